"""Platform descriptions: presets, TOML loading, validation, routes."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from hetsim.sim import Device, Link, Platform, PlatformError


def to_toml(data: dict[str, Any]) -> str:
    """Minimal TOML writer for the platform structure (scalars + arrays of tables)."""

    def value(v: Any) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, str):
            return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
        if isinstance(v, dict):  # an inline table (tensor_flops)
            return "{ " + ", ".join(f"{k} = {value(x)}" for k, x in v.items()) + " }"
        return repr(v)

    lines = [f"{k} = {value(v)}" for k, v in data.items() if not isinstance(v, list)]
    for key in ("devices", "links"):
        for table in data.get(key, []):
            lines += ["", f"[[{key}]]"] + [f"{k} = {value(v)}" for k, v in table.items()]
    return "\n".join(lines) + "\n"


MINIMAL = {
    "name": "box",
    "devices": [
        {
            "name": "cpu",
            "kind": "cpu",
            "peak_flops": 1e12,
            "mem_bandwidth_bytes_per_s": 1e11,
            "memory_bytes": 2**34,
        },
        {
            "name": "gpu",
            "kind": "gpu",
            "peak_flops": 1e13,
            "mem_bandwidth_bytes_per_s": 1e12,
            "memory_bytes": 2**33,
        },
    ],
    "links": [{"src": "cpu", "dst": "gpu", "bandwidth_bytes_per_s": 1.2e10, "latency_s": 1e-5}],
}


def with_changes(path: str, value: Any) -> dict[str, Any]:
    """A deep copy of MINIMAL with ``path`` ("devices.0.kind") set to ``value``."""
    import copy

    data = copy.deepcopy(MINIMAL)
    *parents, last = path.split(".")
    node: Any = data
    for p in parents:
        node = node[int(p)] if p.isdigit() else node[p]
    node[int(last) if last.isdigit() else last] = value
    return data


@pytest.mark.parametrize("name", Platform.presets())
def test_every_preset_loads_and_connects(name: str):
    p = Platform.preset(name)
    assert p.name == name and p.host in p
    assert p.device(p.host).kind == "cpu"
    for a, b in itertools.permutations(p.device_names, 2):
        hops = p.route(a, b)
        assert bool(hops) != p.shares_memory(a, b), (a, b)
    for d in p.devices:
        assert d.peak_flops > 0 and d.memory_bytes > 0 and d.streams >= 1
    assert Platform.from_dict(p.to_dict(), source=name) == p


def test_presets_include_the_documented_machines():
    assert {
        "cpu2",
        "xeon-p2200",
        "ryzen-gtx1080",
        "h100-server",
        "jetson-orin",
        "multi-gpu-4",
    } <= set(Platform.presets())
    jetson = Platform.preset("jetson-orin")
    assert jetson.route("cpu", "gpu") == () and jetson.shares_memory("cpu", "gpu")


@pytest.mark.parametrize("name", ["xeon-p2200", "multi-gpu-4", "cpu2", "a100-server"])
def test_toml_round_trip(tmp_path: Path, name: str):
    p = Platform.preset(name)
    path = tmp_path / f"{name}.toml"
    path.write_text(to_toml(p.to_dict()))
    back = Platform.from_toml(path)
    assert back == p
    assert back.to_dict() == p.to_dict()
    assert Platform.load(str(path)) == p
    assert Platform.load(name) == p and Platform.load(p) is p


def test_minimal_file_defaults(tmp_path: Path):
    path = tmp_path / "box.toml"
    path.write_text(to_toml(MINIMAL))
    p = Platform.from_toml(path)
    assert p.host == "cpu" and p.dispatch_threads == 1
    assert p.device("gpu").streams == 1 and p.device("gpu").memory_domain == "gpu"
    (link,) = p.route("gpu", "cpu")
    assert link.duplex and link.name == "cpu<->gpu"


@pytest.mark.parametrize(
    ("path", "value", "match"),
    [
        ("colour", "red", r"unknown key\(s\) \['colour'\]"),
        ("devices.0.flops", 1.0, r"devices\[0\] \('cpu'\) has unknown key\(s\) \['flops'\]"),
        ("links.0.bandwidth", 1.0, r"links\[0\] has unknown key\(s\) \['bandwidth'\]"),
        (
            "links.0.bandwidth_bytes_per_s",
            -1.0,
            r"'bandwidth_bytes_per_s' must be a positive number, got -1.0",
        ),
        ("links.0.latency_s", -1e-6, r"'latency_s' must be a number >= 0"),
        ("links.0.dst", "tpu", r"names unknown device 'tpu'"),
        ("devices.1.name", "cpu", r"duplicate device name 'cpu'"),
        ("devices.0.kind", "fpga", r"'kind' must be 'cpu' or 'gpu'"),
        ("devices.1.memory_bytes", 0, r"device 'gpu': 'memory_bytes' must be a positive number"),
        ("devices.1.streams", 0, r"'streams' must be an int from 1 to 1024"),
        ("devices.1.streams", 2**63, r"'streams' must be an int from 1 to 1024, got 9223372036854775808"),
        ("host", "gpu7", r"host 'gpu7' is not a device"),
        ("dispatch_threads", 0, r"'dispatch_threads' must be an int from 1 to 1024"),
        ("dispatch_threads", 2**63, r"'dispatch_threads' must be an int from 1 to 1024, got 9223372036854775808"),
        ("decision_s", -1e-6, r"'decision_s' must be a finite number >= 0"),
        ("devices.0.handoff_s", -1e-6, r"'handoff_s'"),
    ],
)
def test_invalid_platforms_name_the_key(tmp_path: Path, path: str, value: Any, match: str):
    data = with_changes(path, value)
    with pytest.raises(PlatformError, match=match):
        Platform.from_dict(data, source="box.toml")
    file = tmp_path / "box.toml"
    file.write_text(to_toml(data))
    with pytest.raises(PlatformError, match=match):
        Platform.from_toml(file)


def test_missing_keys_and_bad_files(tmp_path: Path):
    data = with_changes("devices.0.peak_flops", 1.0)
    del data["devices"][0]["peak_flops"]
    with pytest.raises(PlatformError, match=r"devices\[0\] \('cpu'\) misses \['peak_flops'\]"):
        Platform.from_dict(data)
    with pytest.raises(PlatformError, match="non-empty"):
        Platform.from_dict({"name": "x", "devices": []})
    with pytest.raises(PlatformError, match="no such platform file"):
        Platform.from_toml(tmp_path / "nope.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("name = [unclosed\n")
    with pytest.raises(PlatformError, match="malformed TOML"):
        Platform.from_toml(bad)
    with pytest.raises(PlatformError, match=r"unknown platform preset 'xeon'.*xeon-p2200"):
        Platform.preset("xeon")
    with pytest.raises(PlatformError, match=r"has no device 'tpu'; devices: \['cpu', 'gpu'\]"):
        Platform.from_dict(MINIMAL).device("tpu")


def test_duplicate_link_and_self_link():
    dev = Device("a", "cpu", 1.0, 1.0, 1)
    dev_b = Device("b", "gpu", 1.0, 1.0, 1)
    with pytest.raises(PlatformError, match="duplicate link between 'b' and 'a'"):
        Platform("p", (dev, dev_b), (Link("a", "b", 1.0), Link("b", "a", 2.0)))
    with pytest.raises(PlatformError, match="two different devices"):
        Link("a", "a", 1.0)


def test_routes_hop_through_links_and_shared_memory():
    devs = (
        Device("cpu", "cpu", 1.0, 1.0, 1, memory_domain="host"),
        Device("cpu1", "cpu", 1.0, 1.0, 1, memory_domain="host"),
        Device("gpu0", "gpu", 1.0, 1.0, 1),
        Device("gpu1", "gpu", 1.0, 1.0, 1),
        Device("island", "gpu", 1.0, 1.0, 1),
    )
    l0, l1 = Link("cpu", "gpu0", 1.0), Link("gpu1", "cpu1", 1.0, duplex=False)
    p = Platform("p", devs, (l0, l1))
    assert p.route("gpu0", "gpu1") == (l0, l1)  # through the shared host memory
    assert p.route("cpu", "cpu1") == ()
    assert p.route("gpu1", "cpu") == (l1,)
    with pytest.raises(PlatformError, match="no link path from 'cpu' to 'island'"):
        p.route("cpu", "island")


def test_scaled_copies():
    p = Platform.preset("xeon-p2200")
    s = p.scaled(link_bandwidth=2.0, gpu_peak=0.5, name="half")
    assert s.name == "half"
    assert s.links[0].bandwidth_bytes_per_s == 2 * p.links[0].bandwidth_bytes_per_s
    assert s.device("gpu").peak_flops == 0.5 * p.device("gpu").peak_flops
    assert s.device("cpu") == p.device("cpu")
    with pytest.raises(PlatformError, match="link_bandwidth"):
        p.scaled(link_bandwidth=0)


def test_gpu_spec_sheet_fields(tmp_path: Path):
    data = with_changes("devices.1.sm_count", 108)
    data["devices"][1].update(clock_hz=1.41e9, l2_bytes=41943040, cost="gpu-a100-80gb")
    path = tmp_path / "box.toml"
    path.write_text(to_toml(data))
    gpu = Platform.from_toml(path).device("gpu")
    assert (gpu.sm_count, gpu.clock_hz, gpu.l2_bytes, gpu.cost) == (108, 1.41e9, 41943040, "gpu-a100-80gb")
    assert Platform.from_dict(MINIMAL).device("gpu").sm_count is None  # optional
    for key, bad, msg in (("sm_count", 0, r"'sm_count' must be an int >= 1, got 0"),
                          ("sm_count", 1.5, r"'sm_count' must be an int >= 1, got 1.5"),
                          ("l2_bytes", -4, r"'l2_bytes' must be an int >= 1"),
                          ("clock_hz", 0, r"'clock_hz' must be a positive number"),
                          ("cost", "", r"'cost' must be a non-empty cost spec string")):
        with pytest.raises(PlatformError, match=rf"device 'gpu': {msg}"):
            Platform.from_dict(with_changes(f"devices.1.{key}", bad))


#: a preset for every GPU the project ships a measured profile of, and the H200
PROFILED_GPU_PRESETS = {"p4-server": "gpu-p4", "p100-server": "gpu-p100", "t4-server": "gpu-t4",
                        "v100-server": "gpu-v100", "a100-40gb-server": "gpu-a100-40gb",
                        "a100-server": "gpu-a100-80gb", "l4-server": "gpu-l4", "h100-server": "gpu-h100"}


def test_every_profiled_gpu_has_a_preset_priced_by_its_profile_and_the_h200_by_its_figures():
    from hetsim.costmodel.builtin import builtin_profiles

    assert {v for v in PROFILED_GPU_PRESETS.values()} == {n for n in builtin_profiles() if n.startswith("gpu-")}
    for name, profile in PROFILED_GPU_PRESETS.items():
        gpu = Platform.preset(name).device("gpu")
        assert gpu.cost == profile and gpu.tensor_flops is not None, name
    h200 = Platform.preset("h200-server").device("gpu")
    assert h200.cost is None and (h200.peak_flops, h200.mem_bandwidth_bytes_per_s) == (6.7e13, 4.8e12)
    assert h200.tensor_flops == {"tf32": 4.945e14, "fp16": 9.895e14, "bf16": 9.895e14, "fp8": 1.979e15,
                                 "int8": 1.979e15}
    # tensor cores as the datasheets give them: TF32 from Ampere on, none on Pascal
    assert "tf32" in Platform.preset("l4-server").device("gpu").tensor_flops
    assert not {"tf32", "fp16", "bf16"} & set(Platform.preset("p4-server").device("gpu").tensor_flops)
    assert "tf32" not in Platform.preset("v100-server").device("gpu").tensor_flops


def test_gpu_presets_state_their_published_figures():
    for name in ("t4-server", "v100-server", "a100-server", "h100-server", "xeon-p2200", "l4-server",
                 "h200-server", "p4-server", "p100-server", "a100-40gb-server"):
        gpu = Platform.preset(name).device("gpu")
        assert gpu.sm_count and gpu.clock_hz and gpu.l2_bytes, name
    a100 = Platform.preset("a100-server").device("gpu")
    assert (a100.sm_count, a100.peak_flops, a100.mem_bandwidth_bytes_per_s) == (108, 1.95e13, 1.935e12)


@pytest.mark.parametrize(
    ("path", "value", "match"),
    [
        ("links.0.duplex", "false", r"link 'cpu' -> 'gpu': 'duplex' must be true or false, got 'false'"),
        ("links.0.duplex", 0, r"'duplex' must be true or false, got 0"),
        ("links.0.src", 3, r"'src' must be a device name"),
        ("links.0.description", 5, r"'description' must be a string, got 5"),
        ("devices.0.threads", True, r"device 'cpu': 'threads' must be an int >= 1, got True"),
        ("devices.0.streams", 2.0, r"'streams' must be an int from 1 to 1024, got 2.0"),
        ("devices.1.memory_bytes", 1.5, r"device 'gpu': 'memory_bytes' must be a positive number of whole bytes, got 1.5"),
        ("devices.1.memory_bytes", True, r"'memory_bytes' must be a positive number of whole bytes, got True"),
        ("devices.0.name", [1], r"device 'name' must be a non-empty string, got \[1\]"),
        ("devices.0.kind", ["cpu"], r"'kind' must be 'cpu' or 'gpu', got \['cpu'\]"),
        ("devices.0.peak_flops", "1e12", r"'peak_flops' must be a positive number, got '1e12'"),
        ("devices.0.peak_flops", True, r"'peak_flops' must be a positive number, got True"),
        ("devices.0.peak_flops", 10**400, r"'peak_flops' must be a positive number"),
        ("devices.0.memory_domain", 7, r"'memory_domain' must be a string, got 7"),
        ("devices.0.description", False, r"'description' must be a string, got False"),
        ("devices.1.launch", 1, r"'launch' must be a string, got 1"),
        ("devices.0.dispatch_s", "0", r"'dispatch_s' must be a number >= 0, got '0'"),
        ("name", [1], r"platform 'name' must be a non-empty string, got \[1\]"),
        ("host", 0, r"'host' must be a string, got 0"),
        ("description", 1.0, r"'description' must be a string, got 1.0"),
        ("dispatch_threads", True, r"'dispatch_threads' must be an int from 1 to 1024, got True"),
        ("dispatch_threads", 1.0, r"'dispatch_threads' must be an int from 1 to 1024, got 1.0"),
        ("decision_s", True, r"'decision_s' must be a finite number >= 0"),
        ("decision_s", float("inf"), r"'decision_s' must be a finite number >= 0"),
    ],
)
def test_every_key_is_type_checked(path: str, value: Any, match: str):
    with pytest.raises(PlatformError, match=match):
        Platform.from_dict(with_changes(path, value), source="box.toml")


def test_string_duplex_in_a_file_is_refused(tmp_path: Path):
    file = tmp_path / "box.toml"
    file.write_text(to_toml(with_changes("links.0.duplex", "false")))
    with pytest.raises(PlatformError, match=r"box\.toml: link 'cpu' -> 'gpu': 'duplex' must be true or false"):
        Platform.from_toml(file)


def test_memory_bytes_of_a_whole_float_is_an_int():
    p = Platform.from_dict(with_changes("devices.1.memory_bytes", 8e9), source="box.toml")
    assert p.device("gpu").memory_bytes == 8_000_000_000
    assert isinstance(p.device("gpu").memory_bytes, int)


def test_only_keeps_the_devices_named_and_the_links_between_them():
    p = Platform.preset("multi-gpu-4").only(["cpu", "gpu0", "gpu1"], name="two-gpu")
    assert p.name == "two-gpu" and p.device_names == ["cpu", "gpu0", "gpu1"]
    assert all({lk.src, lk.dst} <= {"cpu", "gpu0", "gpu1"} for lk in p.links) and p.route("gpu0", "gpu1")
    with pytest.raises(PlatformError, match=r"only\(\['gpu0', 'gpu9'\]\) names unknown devices \['gpu9'\]"):
        Platform.preset("multi-gpu-4").only(["gpu0", "gpu9"])
    with pytest.raises(PlatformError, match="leaves out the host 'cpu'"):
        Platform.preset("multi-gpu-4").only(["gpu0"])
