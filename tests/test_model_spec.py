"""Model specs (graphs.model_spec): parsing, loading a user's module / an ONNX file, and
running a user's module with one call (no import_module)."""

from __future__ import annotations

import textwrap

import pytest
import torch

import hetsim
from hetsim.graphs import GraphError, load, load_model_spec, parse_input_spec, parse_model_spec
from hetsim.graphs.model_spec import InputSpec, ModelSpec, build_module

USER_MODEL = textwrap.dedent(
    """
    import torch
    from torch import nn


    class TwoBranch(nn.Module):
        def __init__(self, hidden: int = 16):
            super().__init__()
            self.a = nn.Linear(8, hidden)
            self.b = nn.Linear(8, hidden)
            self.out = nn.Linear(hidden, 3)

        def forward(self, x):
            return self.out(torch.relu(self.a(x)) + torch.tanh(self.b(x)))


    class Embed(nn.Module):
        def __init__(self):
            super().__init__()
            self.e = nn.Embedding(10, 4)

        def forward(self, ids, scale):
            return self.e(ids) * scale


    def make_small():
        return TwoBranch(hidden=4)


    NOT_A_MODULE = 3
    """
)


@pytest.fixture
def user_file(tmp_path):
    path = tmp_path / "user_models.py"
    path.write_text(USER_MODEL)
    return path


def test_parse_model_spec():
    assert parse_model_spec("resnet18") == ModelSpec("zoo", "resnet18")
    assert parse_model_spec("a/b.json") == ModelSpec("graph", "a/b.json")
    assert parse_model_spec("m.ONNX") == ModelSpec("onnx", "m.ONNX")
    assert parse_model_spec("dir/m.py:Net") == ModelSpec("module", "dir/m.py", "Net")
    with pytest.raises(GraphError, match=r"name the module class too, e.g. m.py:MyNet"):
        parse_model_spec("m.py")
    with pytest.raises(GraphError, match="empty model spec"):
        parse_model_spec(" ")


def test_parse_input_spec():
    assert parse_input_spec("1x3x32x32") == InputSpec(None, (1, 3, 32, 32))
    assert parse_input_spec("ids=2x16:int64:96") == InputSpec("ids", (2, 16), "int64", 96)
    assert parse_input_spec("4:float16") == InputSpec(None, (4,), "float16")
    for bad, why in [("1xax3", "dims '1xax3'"), ("2x0", "every dim"), ("2:float7", "unknown dtype"),
                     ("2:int64:0", "HIGH must be"), ("1-x=3", "not an input name"), ("1:a:2:3", "expected")]:
        with pytest.raises(GraphError, match=why):
            parse_input_spec(bad)


def test_build_module_seeded_with_options(user_file):
    spec = f"{user_file}:TwoBranch"
    m1, (x1,) = build_module(spec, ["2x8"], options={"hidden": 5}, seed=3)
    m2, (x2,) = build_module(spec, ["2x8"], options={"hidden": 5}, seed=3)
    assert m1.a.out_features == 5
    assert torch.equal(m1.a.weight, m2.a.weight) and torch.equal(x1, x2)
    m3, _ = build_module(f"{user_file}:make_small", ["2x8"])
    assert m3.a.out_features == 4
    ids_model, kw = build_module(f"{user_file}:Embed", ["ids=2x5:int64:10", "scale=1"])
    assert set(kw) == {"ids", "scale"} and kw["ids"].dtype == torch.int64 and int(kw["ids"].max()) < 10


@pytest.mark.parametrize(
    ("spec", "inputs", "options", "why"),
    [
        ("{f}:Missing", ["2x8"], {}, "has no 'Missing'"),
        ("{f}:NOT_A_MODULE", ["2x8"], {}, "not a class or function"),
        ("{f}:TwoBranch", [], {}, "give the example input shape"),
        ("{f}:TwoBranch", ["2x8"], {"depth": 2}, "cannot build it with options"),
        ("{f}:Embed", ["ids=2x5:int64", "1"], {}, "name every input"),
        ("nowhere.py:Net", ["2x8"], {}, "no such Python file"),
    ],
)
def test_bad_module_specs_are_named(user_file, spec, inputs, options, why):
    with pytest.raises(GraphError, match=why):
        build_module(spec.format(f=user_file), inputs, options=options)


def test_user_module_runs_with_one_call(user_file, tmp_path):
    """from a spec (CLI path) and from from_torch (Python path), execute needs no model=."""
    g = load_model_spec(f"{user_file}:TwoBranch", inputs=["2x8"], options={"hidden": 16})
    assert g.meta["model_spec"] == {"spec": f"{user_file}:TwoBranch", "inputs": ["2x8:float32:2"],
                                    "options": {"hidden": 16}, "seed": 0}
    platform = hetsim.Platform.preset("cpu2")
    plan = hetsim.get_scheduler("round-robin").schedule(g, platform, hetsim.Roofline())
    assert set(plan.placement.values()) == {"cpu0", "cpu1"}
    run = hetsim.execute(g, plan, platform, warmup=0, repeats=1)
    assert run.check["reference"] == "torch module" and run.check["error"] <= 1.0
    # a graph file keeps the spec: executing it rebuilds the model from the spec, when trusted to
    g.to_json(tmp_path / "g.json")
    again = load_model_spec(str(tmp_path / "g.json"), trust_model_code=True)
    assert again.program is None and again.model_code_trusted
    run2 = hetsim.execute(again, plan, platform, warmup=0, repeats=1)
    assert run2.check["error"] <= 1.0
    # keyword inputs, integer inputs
    emb = load_model_spec(f"{user_file}:Embed", inputs=["ids=2x5:int64:10", "scale=1"])
    assert [i["name"] for i in emb.meta["inputs"]] == ["ids", "scale"]
    plan = hetsim.get_scheduler("all-cpu").schedule(emb, platform, hetsim.Roofline())
    assert hetsim.execute(emb, plan, platform, warmup=0, repeats=1).check["error"] <= 1.0


def test_a_graph_file_runs_no_code_it_names_unless_told_to(user_file, tmp_path, capsys):
    """``hetsim validate g.json`` imported the ``.py`` file named in the graph's
    ``meta.model_spec`` without a word; ``hetsim.execute`` did the same."""
    from hetsim.experiments.cli.main import main

    g = load_model_spec(f"{user_file}:TwoBranch", inputs=["2x8"], options={"hidden": 16})
    assert g.model_code_trusted  # the caller named that code
    g.to_json(tmp_path / "g.json")
    marker = tmp_path / "imported"
    user_file.write_text(f"open({str(marker)!r}, 'w').close()\n" + user_file.read_text())
    bare = load(tmp_path / "g.json")
    assert not bare.model_code_trusted
    platform = hetsim.Platform.preset("cpu2")
    plan = hetsim.get_scheduler("all-cpu").schedule(bare, platform, hetsim.Roofline())
    with pytest.raises(hetsim.runtime.ExecutionError, match="names Python model code.*--trust-model-code"):
        hetsim.execute(bare, plan, platform, warmup=0, repeats=1)
    assert main(["validate", str(tmp_path / "g.json"), "--platform", "cpu2", "--scheduler", "all-cpu",
                 "--warmup", "0", "--repeats", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--trust-model-code" in err
    assert not marker.exists()
    assert main(["validate", str(tmp_path / "g.json"), "--platform", "cpu2", "--scheduler", "all-cpu",
                 "--warmup", "0", "--repeats", "1", "--trust-model-code", "--replicas", "1",
                 "--cost", "roofline"]) == 0  # the code runs; the simulator's inputs need no measuring
    assert marker.exists()


def test_graph_without_a_model_names_what_to_do(tmp_path):
    g = hetsim.from_torch(torch.nn.Linear(4, 2), (torch.rand(1, 4),))
    g.to_json(tmp_path / "lin.json")
    bare = load(tmp_path / "lin.json")
    platform = hetsim.Platform.preset("cpu2")
    plan = hetsim.get_scheduler("all-cpu").schedule(bare, platform, hetsim.Roofline())
    with pytest.raises(hetsim.runtime.ExecutionError, match="names no model.*import_module"):
        hetsim.execute(bare, plan, platform, warmup=0, repeats=1)


def test_onnx_spec_imports_and_runs(tmp_path):
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                                torch.nn.Linear(4 * 6 * 6, 5))
    path = tmp_path / "tiny.onnx"
    torch.onnx.export(model, (torch.rand(1, 3, 8, 8),), str(path), dynamo=False, opset_version=17,
                      input_names=["image"], dynamic_axes={"image": {0: "n"}})
    g = load_model_spec(str(path), inputs=["2x3x8x8"])
    assert g.meta["inputs"][0]["shape"] == [2, 3, 8, 8] and g.meta["source"] == "onnx"
    assert load_model_spec(str(path), inputs=["image=2x3x8x8"]).meta["inputs"][0]["shape"] == [2, 3, 8, 8]
    with pytest.raises(GraphError, match="unknown input"):
        load_model_spec(str(path), inputs=["x=2x3x8x8"])
    with pytest.raises(GraphError, match="input shapes are for ONNX"):
        load_model_spec("resnet18", inputs=["1x3x32x32"])
    platform = hetsim.Platform.preset("cpu2")
    plan = hetsim.get_scheduler("round-robin").schedule(g, platform, hetsim.Roofline())
    run = hetsim.execute(g, plan, platform, warmup=0, repeats=1)
    assert run.check["reference"] == "single device" and run.check["node_error"] <= 1.0


def test_cli_validate_and_compare_take_a_module_spec(user_file, capsys, tmp_path):
    from hetsim.experiments.cli.main import main

    spec = f"{user_file}:TwoBranch"
    assert main(["validate", spec, "--input-shape", "2x8", "--arg", "hidden=8", "--platform", "cpu2",
                 "--scheduler", "round-robin", "--warmup", "0", "--repeats", "1", "--cost", "roofline"]) == 0
    out = capsys.readouterr().out
    assert "twobranch on cpu2: plan round-robin" in out and "outputs match the torch module" in out
    assert main(["compare", spec, "--input-shape", "2x8", "--platform", "cpu2",
                 "--schedulers", "heft,all-cpu", "--out", str(tmp_path / "cmp")]) == 0
    assert "twobranch: 9 nodes (op), batch 2" in capsys.readouterr().out
    assert main(["validate", f"{user_file}:Nope", "--input-shape", "2x8", "--scheduler", "heft"]) != 0
    assert "has no 'Nope'" in capsys.readouterr().err


def test_user_module_under_tensor_split(user_file):
    """split parts of a matmul read column slices of its folded (transposed) weight: each
    part gets its own slice (the wiring keyed temporary slices by id, which Python reuses).
    Every split is kept (``only_if_faster=False``): on a model this small none pays off."""
    g = load_model_spec(f"{user_file}:TwoBranch", inputs=["8x8"], options={"hidden": 32})
    platform = hetsim.Platform.preset("cpu2")
    sched = hetsim.get_scheduler("tensor-split", only_if_faster=False)
    split = sched.transform(g, platform, hetsim.Roofline())
    assert any("split_of" in d["attrs"] for _, d in split.nodes(data=True))
    plan = sched.schedule(split, platform, hetsim.Roofline())
    run = hetsim.execute(split, plan, platform, warmup=0, repeats=1)
    assert run.check["reference"] == "torch module" and run.check["error"] <= 1.0
