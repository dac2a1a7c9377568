"""One cost model per platform: the --cost grammar, device defaults, links, built-in profiles."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pandas as pd
import pytest

from hetsim.costmodel import (
    CostModelError,
    PlatformCostModel,
    Roofline,
    builtin_profiles,
    from_spec,
)
from hetsim.costmodel.composite import parse_composite
from hetsim.costmodel.gpu.model import GPUCostModel
from hetsim.costmodel.gpu.neusight import import_neusight
from hetsim.costmodel.profile_writer import write_profile
from hetsim.graphs import Graph
from hetsim.graphs.features import FEATURE_COLUMNS
from hetsim.sim import Platform

SAMPLE = Path(__file__).parent / "data" / "neusight-sample"


@pytest.fixture(scope="module")
def v100_profile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    (path,) = import_neusight(SAMPLE, tmp_path_factory.mktemp("p"), gpus=["v100"])
    return path


@pytest.fixture(autouse=True)
def _model_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HETSIM_CACHE", str(tmp_path_factory.getbasetemp() / "cache"))
    # the routing, not the forests: GPU models fitted with ten small trees
    import hetsim.costmodel.gpu.model as gpu_model

    monkeypatch.setattr(gpu_model, "DEFAULT_PARAMS", {**gpu_model.DEFAULT_PARAMS, "n_estimators": 10, "max_depth": 4})


def _graph() -> Graph:
    g = Graph(name="two")
    g.add_op("mm", "matmul", inputs=[([256, 512], "float32"), ([512, 256], "float32")],
             outputs=[([256, 256], "float32")], flops=2.0 * 256 * 512 * 256)
    g.add_op("r", "relu", inputs=[([256, 256], "float32")], outputs=[([256, 256], "float32")], flops=65536)
    g.add_edge("mm", "r")
    return g


# --------------------------------------------------------------------- grammar
def test_parse_composite() -> None:
    assert parse_composite("cpu=profiles/a, gpu=gpu-t4,link=profiles/b") == {
        "cpu": "profiles/a", "gpu": "gpu-t4", "link": "profiles/b"}
    with pytest.raises(CostModelError, match=r"'gpu=' must look like DEVICE=SPEC"):
        parse_composite("cpu=roofline,gpu=")
    with pytest.raises(CostModelError, match="'cpu' is named twice"):
        parse_composite("cpu=roofline,cpu=roofline")


def test_a_composite_naming_a_device_the_platform_lacks() -> None:
    p = Platform.preset("xeon-p2200")
    with pytest.raises(CostModelError, match=r"names device 'gpu0', which platform 'xeon-p2200' does not have "
                                             r"\(devices: \['cpu', 'gpu'\]"):
        from_spec("cpu=roofline,gpu0=roofline", platform=p)


def test_unknown_single_spec_lists_the_forms_and_built_in_profiles() -> None:
    with pytest.raises(CostModelError, match=r"'gpu-a100'.*built-in profile \(gpu-a100-40gb, gpu-a100-80gb"):
        from_spec("gpu-a100")


# ------------------------------------------------------------------ defaults
def test_default_is_the_roofline_where_no_device_names_a_source() -> None:
    assert isinstance(from_spec("default", platform=Platform.preset("xeon-p2200")), Roofline)
    assert isinstance(from_spec(None, platform=Platform.preset("cpu2")), Roofline)


def test_gpu_presets_price_their_gpu_from_the_measured_profile_by_default() -> None:
    for preset, profile in (("t4-server", "gpu-t4"), ("v100-server", "gpu-v100"),
                            ("a100-server", "gpu-a100-80gb"), ("h100-server", "gpu-h100")):
        p = Platform.preset(preset)
        assert p.device("gpu").cost == profile and profile in builtin_profiles()
        cost = from_spec("default", platform=p)
        assert isinstance(cost, PlatformCostModel)
        assert cost.describe() == f"cpu=roofline,gpu={profile}"
        assert from_spec("roofline", platform=p).__class__ is Roofline  # explicit roofline stays roofline


def test_no_cost_given_prices_each_device_from_its_own_source() -> None:
    from hetsim.costmodel import as_cost_model

    t4 = as_cost_model(None, platform=Platform.preset("t4-server"))
    assert isinstance(t4, PlatformCostModel) and t4.describe() == "cpu=roofline,gpu=gpu-t4"
    assert isinstance(as_cost_model(None, platform=Platform.preset("cpu2")), Roofline)
    assert isinstance(as_cost_model(None), Roofline)  # no platform: nothing names a source


def test_a_registered_source_prices_the_device_it_is_named_for(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib

    from hetsim.costmodel import register_cost_source

    monkeypatch.setattr(importlib.import_module("hetsim.costmodel.spec"), "_SOURCES", {})
    built = []

    def factory(arg: str, *, platform: Platform | None = None) -> Roofline:
        built.append((arg, platform.name if platform else None))
        return Roofline()

    register_cost_source("llm-table", factory)
    p = Platform.preset("a100-server")
    cost = from_spec("gpu=llm-table:runs/a100.csv", platform=p)
    assert cost.describe() == "cpu=roofline,gpu=llm-table:runs/a100.csv"
    assert isinstance(cost.source(p.device("gpu")), Roofline)
    assert built == [("runs/a100.csv", "a100-server")]
    with pytest.raises(CostModelError, match=r"llm-table:ARG, or DEVICE=SPEC"):
        from_spec("nothing-here")
    for bad in ("gpu-x", "Roofline", "roofline", ""):
        with pytest.raises(CostModelError, match="need a lowercase name that is not a built-in form"):
            register_cost_source(bad, factory)


def test_every_device_routes_to_its_own_source(v100_profile: Path) -> None:
    p = Platform.preset("v100-server")
    g = _graph()
    cost = from_spec(f"cpu=roofline,gpu={v100_profile}", platform=p)
    gpu_model = cost.source(p.device("gpu"))
    assert isinstance(gpu_model, GPUCostModel)
    for n in g.nx:
        assert cost.op_time(g, n, p.device("cpu")) == Roofline().op_time(g, n, p.device("cpu"))
        assert cost.op_time(g, n, p.device("gpu")) == gpu_model.op_time(g, n, p.device("gpu"))
    assert cost.describe() == f"cpu=roofline,gpu={v100_profile}"
    # a bare GPU source on a CPU+GPU platform prices the GPU; the CPU keeps its default
    bare = from_spec(str(v100_profile), platform=p)
    assert isinstance(bare, PlatformCostModel) and isinstance(bare.source(p.device("cpu")), Roofline)
    assert bare.op_time(g, "mm", p.device("gpu")) == gpu_model.op_time(g, "mm", p.device("gpu"))


def test_dispatch_goes_through_host_dispatch() -> None:
    """A source without dispatch_time: the device's figure; one that answers no number:
    the CostModelError of host_dispatch, naming the node and the device."""
    p = Platform.preset("xeon-p2200")
    g = _graph()

    class NoNumber(Roofline):
        def dispatch_time(self, graph: Graph, node: str, device: object) -> object:
            return "soon"

    class NoDispatch:
        def op_time(self, graph: Graph, node: str, device: object) -> float:
            return 1e-3

        def transfer_time(self, nbytes: int, link: object) -> float:
            return 0.0

    cost = PlatformCostModel({"cpu": NoDispatch(), "gpu": NoNumber()}, platform=p)
    assert cost.dispatch_time(g, "mm", p.device("cpu")) == p.device("cpu").dispatch_s
    with pytest.raises(CostModelError, match=r"dispatch_time of 'mm' on 'gpu' returned 'soon'"):
        cost.dispatch_time(g, "mm", p.device("gpu"))


def test_kind_keys_and_device_defaults_without_a_platform(v100_profile: Path) -> None:
    p = Platform.preset("v100-server")
    g = _graph()
    cost = from_spec(f"gpu={v100_profile}")  # the sweep builds it without a platform
    cpu = dataclasses.replace(p.device("cpu"), cost="roofline")
    assert cost.op_time(g, "mm", cpu) == Roofline().op_time(g, "mm", cpu)
    assert isinstance(cost.source(p.device("gpu")), GPUCostModel)
    assert cost.describe() == f"gpu={v100_profile}"


def test_link_profile_prices_transfers(tmp_path: Path) -> None:
    row = {c: 0 for c in FEATURE_COLUMNS}
    row.update(signature="relu|{}|[]", device="cpu", device_kind="cpu", backend="torch", model="m", node="n",
               models="m", op="relu", batch=1, time_s=1e-5, p10_s=1e-5, p90_s=1e-5, repeats=5)
    manifest = {"hetsim_profile": 1, "name": "box", "devices": [{"name": "cpu", "kind": "cpu"},
                                                                 {"name": "cuda:0", "kind": "gpu"}]}
    fits = {"cpu->cuda:0": {"latency_s": 2e-5, "bandwidth_bytes_per_s": 1e10, "pinned": True},
            "cuda:0->cpu": {"latency_s": 3e-5, "bandwidth_bytes_per_s": 8e9, "pinned": True}, "duplex": True}
    write_profile(tmp_path / "box", manifest, pd.DataFrame([row]), link_fits=fits)
    p = Platform.preset("xeon-p2200")
    cost = from_spec(f"link={tmp_path / 'box'}", platform=p)
    (link,) = p.links
    assert cost.transfer_time(10**8, link) == pytest.approx(2e-5 + 10**8 / 1e10)
    assert cost.transfer_time(10**8, link, src="gpu") == pytest.approx(3e-5 + 10**8 / 8e9)
    plain = from_spec("cpu=roofline", platform=p)
    assert plain.transfer_time(10**8, link) == link.latency_s + 10**8 / link.bandwidth_bytes_per_s
    write_profile(tmp_path / "nolinks", manifest, pd.DataFrame([row]))
    with pytest.raises(CostModelError, match="nolinks: the profile has no links.json fit"):
        from_spec(f"cpu=roofline,link={tmp_path / 'nolinks'}", platform=p)


# ---------------------------------------------------------- built-in profiles
def test_built_in_gpu_profiles_are_complete() -> None:
    found = builtin_profiles()
    assert [n for n in found if n.startswith("gpu-")] == [
        "gpu-a100-40gb", "gpu-a100-80gb", "gpu-h100", "gpu-l4", "gpu-p100", "gpu-p4", "gpu-t4", "gpu-v100"]
    notices = (Path(found["gpu-t4"]).parent / "THIRD_PARTY_NOTICES").read_text()
    assert "MIT License" in notices and "sitar-lab/NeuSight" in notices
    for name, folder in found.items():
        assert (folder / "LICENSE").read_text().startswith("MIT License"), name
        assert (folder / "ops.csv.gz").is_file(), name


def test_scaled_platforms_are_no_longer_the_measured_machine() -> None:
    p = Platform.preset("a100-server")
    assert p.scaled(link_bandwidth=2).device("gpu").cost == "gpu-a100-80gb"
    assert p.scaled(gpu_peak=2).device("gpu").cost is None
    cross = p.replace(devices=tuple(dataclasses.replace(d, cost="cross-gpu") if d.kind == "gpu" else d
                                    for d in p.devices))
    assert cross.scaled(gpu_bandwidth=0.5).device("gpu").cost == "cross-gpu"
