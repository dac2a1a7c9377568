"""The profile folder format (costmodel/PROFILE_FORMAT.md): reading, validation with
errors that name the file and row, atomic writing and resuming (ProfileWriter)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hetsim import graphs
from hetsim.costmodel import CostModelError
from hetsim.costmodel.profile_reader import LINKS_COLUMNS, OPS_COLUMNS, read_profile
from hetsim.costmodel.profile_writer import ProfileWriter, fit_links, write_profile
from hetsim.graphs import Graph

MANIFEST = {
    "hetsim_profile": 2,
    "name": "tiny",
    "date": "2026-11-22T03:30:00Z",
    "machine": {"hostname": "h", "cpu_model": "c", "cpu_cores": 2, "gpu_model": None, "driver": None},
    "libraries": {"hetsim": "0.1.0", "python": "3.11.7"},
    "backend": "torch",
    "devices": [{"name": "cpu", "kind": "cpu", "torch_device": "cpu", "threads": 1},
                {"name": "cuda:0", "kind": "gpu", "torch_device": "cuda:0"}],
    "models": ["m1", "m2"],
    "batches": [1],
    "granularity": "op",
}


def _graph(name: str, widths: list[int]) -> Graph:
    g = Graph(name=name)
    for i, w in enumerate(widths):
        g.add_op(f"r{i}", "relu", inputs=[([1, w], "float32")], outputs=[([1, w], "float32")], flops=float(w))
    return g


def rows_of(g: Graph, device: str = "cpu", kind: str = "cpu", models: str | None = None) -> list[dict]:
    out = []
    for node, f in graphs.features(g).iterrows():
        t = 1e-6 + f["bytes"] * 1e-10
        out.append({"signature": f["signature"], "device": device, "device_kind": kind, "backend": "torch",
                    "model": g.name, "node": node, "batch": 1, "models": models or g.name, "op": f["op"],
                    "time_s": t, "p10_s": t * 0.9, "p90_s": t * 1.1, "repeats": 10,
                    **{c: f[c] for c in graphs.FEATURE_COLUMNS}})
    return out


def _links() -> pd.DataFrame:
    rows = []
    for direction, src, dst, lat, bw in (("h2d", "cpu", "cuda:0", 1e-5, 1.2e10), ("d2h", "cuda:0", "cpu", 1.5e-5, 1e10)):
        for b in (1024, 2**20, 2**26):
            rows.append({"src": src, "dst": dst, "direction": direction, "pinned": 1, "bytes": b,
                         "time_s": lat + b / bw, "concurrent": 0})
    rows.append({"src": "cpu", "dst": "cuda:0", "direction": "h2d", "pinned": 0, "bytes": 2**26,
                 "time_s": 1.0, "concurrent": 0})  # pageable: ignored when pinned rows exist
    return pd.DataFrame(rows, columns=LINKS_COLUMNS)


@pytest.fixture
def good(tmp_path: Path) -> Path:
    ops = rows_of(_graph("m1", [4, 8, 16])) + rows_of(_graph("m2", [32, 64]))
    ops += rows_of(_graph("m2", [32]), device="cuda:0", kind="gpu")
    fits = fit_links(_links())
    return write_profile(tmp_path / "p", MANIFEST, ops, links=_links(), link_fits={**fits, "duplex": True},
                         dispatch={"cpu": 1.2e-5, "cuda:0": 6e-6})


def _edit_csv(path: Path, fn) -> None:
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    frame = fn(frame)
    frame.to_csv(path, index=False)


# ------------------------------------------------------------------- reading
def test_read_valid_profile(good: Path) -> None:
    prof = read_profile(good)
    assert prof.name == "tiny" and prof.device_kinds == {"cpu": "cpu", "cuda:0": "gpu"}
    assert len(prof.ops) == 6 and prof.ops["time_s"].dtype == float and prof.ops["repeats"].dtype.kind == "i"
    assert set(OPS_COLUMNS) <= set(prof.ops.columns)
    assert prof.models == ["m1", "m2"]
    assert prof.model_mask("m2").tolist() == [False, False, False, True, True, True]
    assert prof.dispatch == {"cpu": 1.2e-5, "cuda:0": 6e-6} and prof.duplex is True
    fits = prof.kind_link_fits()
    assert fits[("cpu", "gpu")] == pytest.approx((1e-5, 1.2e10), rel=1e-6)
    assert fits[("gpu", "cpu")] == pytest.approx((1.5e-5, 1e10), rel=1e-6)
    assert prof.link_fits["cpu->cuda:0"]["pinned"] is True
    assert len(prof.links) == 7 and prof.links["bytes"].dtype == "int64"


def test_optional_files_may_be_absent(good: Path) -> None:
    for name in ("links.csv", "links.json", "dispatch.json"):
        (good / name).unlink()
    prof = read_profile(good)
    assert prof.link_fits == {} and prof.dispatch == {} and prof.duplex is None and prof.links.empty


def test_write_is_atomic_and_refuses_to_clobber(good: Path) -> None:
    assert sorted(p.name for p in good.parent.iterdir()) == ["p"]  # no temporary folder left
    with pytest.raises(CostModelError, match="already exists"):
        write_profile(good, MANIFEST, read_profile(good).ops)
    bad = read_profile(good).ops.assign(time_s=-1.0)
    with pytest.raises(CostModelError, match="row 1: column 'time_s'"):
        write_profile(good, MANIFEST, bad, overwrite=True)
    assert len(read_profile(good).ops) == 6  # the failed write left the old profile intact


# ------------------------------------------------------- corrupted profiles
@pytest.mark.parametrize(
    ("edit", "match"),
    [
        (lambda f: f.drop(columns="time_s"), r"ops\.csv: missing required column\(s\) \['time_s'\]"),
        (lambda f: f.drop(columns="log_flops"), r"ops\.csv: missing required column\(s\) \['log_flops'\]"),
        (lambda f: f.assign(time_s=f["time_s"].where(f.index != 2, "-3e-6")),
         r"ops\.csv: row 3: column 'time_s' is '-3e-6' \(need a finite number >= 0\)"),
        (lambda f: f.assign(time_s=f["time_s"].where(f.index != 1, "nan")),
         r"ops\.csv: row 2: column 'time_s' is 'nan'"),
        (lambda f: f.assign(p90_s=f["p90_s"].where(f.index != 4, "")), r"ops\.csv: row 5: column 'p90_s' is ''"),
        (lambda f: f.assign(flops=f["flops"].where(f.index != 0, "NaN")), r"ops\.csv: row 1: column 'flops' is 'NaN'"),
        (lambda f: f.assign(time_s=f["time_s"].where(f.index != 0, "inf")), r"row 1: column 'time_s' is 'inf'"),
        (lambda f: f.assign(repeats=f["repeats"].where(f.index != 3, "2.5")), r"row 4: column 'repeats' is '2.5'"),
        (lambda f: f.assign(device=f["device"].where(f.index != 1, "tpu0")), r"row 2: device 'tpu0' is not in the manifest"),
        (lambda f: f.assign(device_kind=f["device_kind"].where(f.index != 0, "gpu")),
         r"row 1: device_kind 'gpu' but the manifest says 'cpu' is 'cpu'"),
        (lambda f: f.assign(models=f["models"].where(f.index != 2, "")), r"row 3: column 'models' is empty"),
        (lambda f: pd.concat([f, f.iloc[[1]]], ignore_index=True), r"row 7: duplicate of row 2"),
    ],
)
def test_corrupted_ops_csv_names_file_and_row(good: Path, edit, match: str) -> None:
    _edit_csv(good / "ops.csv", edit)
    with pytest.raises(CostModelError, match=match) as info:
        read_profile(good)
    assert str(good / "ops.csv") in str(info.value)


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"hetsim_profile": 3}, r"'hetsim_profile' is 3; this hetsim reads versions 1, 2"),
        ({"hetsim_profile": True}, r"'hetsim_profile' is True"),
        ({"hetsim_profile": None}, r"'hetsim_profile' is None"),
        ({"devices": []}, r"'devices' must be a non-empty list"),
        ({"devices": [{"name": "cpu", "kind": "npu"}]}, r"device 'cpu': 'kind' must be 'cpu' or 'gpu'"),
        ({"devices": [{"name": "cpu", "kind": "cpu"}, {"name": "cpu", "kind": "cpu"}]}, "duplicate device name 'cpu'"),
        ({"models": "m1"}, r"'models' must be a list"),
    ],
)
def test_bad_manifest(good: Path, change: dict, match: str) -> None:
    path = good / "manifest.json"
    path.write_text(json.dumps({**MANIFEST, **change}))
    with pytest.raises(CostModelError, match=match) as info:
        read_profile(good)
    assert str(path) in str(info.value)


def test_missing_or_unreadable_files(good: Path, tmp_path: Path) -> None:
    (good / "manifest.json").unlink()
    with pytest.raises(CostModelError, match=r"manifest\.json: missing"):
        read_profile(good)
    with pytest.raises(CostModelError, match="does not exist"):
        read_profile(tmp_path / "nowhere")
    (good / "manifest.json").write_text("{not json")
    with pytest.raises(CostModelError, match=r"manifest\.json: not valid JSON"):
        read_profile(good)
    (good / "manifest.json").write_text(json.dumps(MANIFEST))
    (good / "ops.csv").write_text("")
    with pytest.raises(CostModelError, match=r"ops\.csv: empty file"):
        read_profile(good)
    (good / "ops.csv").unlink()
    with pytest.raises(CostModelError, match=r"ops\.csv: missing"):
        read_profile(good)


@pytest.mark.parametrize(
    ("name", "content", "match"),
    [
        ("links.json", {"cpu->cuda:0": {"latency_s": 1e-5, "bandwidth_bytes_per_s": 0}},
         r"links\.json: 'cpu->cuda:0': 'bandwidth_bytes_per_s' is 0"),
        ("links.json", {"cpu=>gpu": {}}, r"links\.json: key 'cpu=>gpu' must be 'SRC->DST'"),
        ("links.json", {"duplex": "yes"}, r"'duplex' must be true or false"),
        ("dispatch.json", {"cpu": -1e-6}, r"dispatch\.json: device 'cpu': -1e-06"),
        ("dispatch.json", {"npu": 1e-6}, r"dispatch\.json: device 'npu' is not in the manifest"),
    ],
)
def test_bad_json_files(good: Path, name: str, content: dict, match: str) -> None:
    (good / name).write_text(json.dumps(content))
    with pytest.raises(CostModelError, match=match):
        read_profile(good)


def test_bad_links_csv(good: Path) -> None:
    _edit_csv(good / "links.csv", lambda f: f.assign(direction=f["direction"].where(f.index != 3, "sideways")))
    with pytest.raises(CostModelError, match=r"links\.csv: row 4: column 'direction' is 'sideways'"):
        read_profile(good)
    _edit_csv(good / "links.csv", lambda f: f.drop(columns="pinned"))
    with pytest.raises(CostModelError, match=r"links\.csv: missing required column\(s\) \['pinned'\]"):
        read_profile(good)


def test_fit_links_needs_two_sizes() -> None:
    one = _links().iloc[[0]]
    with pytest.raises(CostModelError, match="at least two sizes"):
        fit_links(one)


# -------------------------------------------------------------- ProfileWriter
def test_writer_appends_resumes_and_merges_models(tmp_path: Path) -> None:
    path = tmp_path / "run"
    w = ProfileWriter(path, {**MANIFEST, "models": []}).open()
    assert w.done("cpu") == set()
    g1 = _graph("m1", [4, 8])
    assert w.append_ops(rows_of(g1)) == 2
    sig8 = graphs.signature(g1.nodes["r1"])
    assert w.done("cpu") == {graphs.signature(g1.nodes["r0"]), sig8}
    # a second run (the profiler restarted) resumes from what is on disk
    w2 = ProfileWriter(path, MANIFEST).open()
    assert w2.done() == {(s, "cpu") for s in w.done("cpu")}
    g2 = _graph("m2", [8, 16])
    todo = [r for r in rows_of(g2) if r["signature"] not in w2.done("cpu")]
    assert [r["node"] for r in todo] == ["r1"]
    assert w2.append_ops(todo) == 1
    assert w2.add_models("m2", {graphs.signature(n) for _, n in g2.nodes(data=True)}) == 2
    prof = read_profile(path)
    assert dict(zip(prof.ops["signature"], prof.ops["models"]))[sig8] == "m1;m2"
    assert prof.manifest["models"] == ["m1", "m2"] and prof.manifest["batches"] == [1]
    # a re-measured row only merges its models; the first time is kept
    again = rows_of(_graph("m3", [4]))
    again[0]["time_s"] = 99.0
    assert w2.append_ops(again) == 0
    prof = read_profile(path)
    row = prof.ops[prof.ops["signature"] == again[0]["signature"]].iloc[0]
    assert row["models"] == "m1;m3" and row["time_s"] < 1
    assert sorted(p.name for p in path.iterdir()) == ["manifest.json", "ops.csv"]  # no temporary files


def test_writer_validates_before_writing(tmp_path: Path) -> None:
    w = ProfileWriter(tmp_path / "run", MANIFEST).open()
    w.append_ops(rows_of(_graph("m1", [4])))
    bad = rows_of(_graph("m1", [8]))
    bad[0]["time_s"] = float("nan")
    with pytest.raises(CostModelError, match=r"appended rows\): row 1: column 'time_s' is nan"):
        w.append_ops(bad)
    assert len(w.read().ops) == 1
    with pytest.raises(CostModelError, match="devices .* differ"):
        ProfileWriter(tmp_path / "run", {**MANIFEST, "devices": [{"name": "cpu", "kind": "cpu"}]}).open()


def test_a_profile_folder_of_another_machine_is_refused_by_name(tmp_path: Path) -> None:
    """``hetsim profile`` into a folder whose manifest names another host, CPU and torch
    merged its rows with the folder's silently."""
    w = ProfileWriter(tmp_path / "run", {**MANIFEST, "libraries": {**MANIFEST["libraries"], "torch": "2.13.0"}}).open()
    w.append_ops(rows_of(_graph("m1", [4])))
    before = {p.name: p.read_bytes() for p in (tmp_path / "run").iterdir()}
    other = {**MANIFEST, "machine": {**MANIFEST["machine"], "hostname": "elsewhere", "cpu_model": "other cpu"},
             "libraries": {**MANIFEST["libraries"], "torch": "2.4.0"}}
    with pytest.raises(CostModelError, match=r"a profile of another machine \(machine.hostname 'h', this run "
                                             r"'elsewhere'; machine.cpu_model 'c', this run 'other cpu'; "
                                             r"libraries.torch '2.13.0', this run '2.4.0'\)"):
        ProfileWriter(tmp_path / "run", other).open()
    assert {p.name: p.read_bytes() for p in (tmp_path / "run").iterdir()} == before


def test_writer_links_and_dispatch(tmp_path: Path) -> None:
    w = ProfileWriter(tmp_path / "run", MANIFEST).open()
    w.append_ops(rows_of(_graph("m1", [4])))
    w.write_links(_links())
    w.write_link_fits(fit_links(_links()), duplex=True)
    w.write_dispatch({"cpu": 1e-5})
    prof = w.read()
    assert prof.dispatch == {"cpu": 1e-5} and prof.duplex is True
    assert np.isclose(prof.link_fits["cuda:0->cpu"]["bandwidth_bytes_per_s"], 1e10)
    with pytest.raises(CostModelError, match="not in the manifest"):
        w.write_dispatch({"gpu7": 1e-5})


def test_launch_column_is_optional_seconds_and_a_bad_cell_names_its_row(good: Path) -> None:
    ops = pd.read_csv(good / "ops.csv", dtype=str, keep_default_na=False)
    gpu = ops["device_kind"] == "gpu"
    ops["launch_s"] = ["6e-06" if g else "" for g in gpu]
    ops.to_csv(good / "ops.csv", index=False)
    prof = read_profile(good)
    assert prof.ops.loc[~gpu.to_numpy(), "launch_s"].isna().all()
    assert prof.launch_times()["cuda:0"][""] == 6e-06
    i = int(np.flatnonzero(gpu.to_numpy())[0])
    ops.loc[i, "launch_s"] = "-1"
    ops.to_csv(good / "ops.csv", index=False)
    with pytest.raises(CostModelError, match=rf"row {i + 1}: column 'launch_s' is '-1' \(need seconds >= 0, or empty\)"):
        read_profile(good)


def test_version_1_reads_warn_only_for_gpu_times_measured_by_the_old_profiler(good: Path) -> None:
    import warnings

    from hetsim.costmodel.learned.measured import CostModelWarning

    path = good / "manifest.json"
    path.write_text(json.dumps({**MANIFEST, "hetsim_profile": 1}))
    with pytest.warns(CostModelWarning, match=r"profile 'tiny' .* format version 1: .* taken as device times"):
        read_profile(good)
    path.write_text(json.dumps({**MANIFEST, "hetsim_profile": 1, "source": "an imported data set"}))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert read_profile(good).manifest["hetsim_profile"] == 1
