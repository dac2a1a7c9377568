"""The NeuSight GPU data set importer: signatures, profile folders, bad input."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hetsim.costmodel import CostModelError
from hetsim.costmodel.gpu.neusight import (
    DATASET_CAVEATS,
    GPUS,
    gpu_by_name,
    import_neusight,
    neusight_node,
    read_device_config,
    read_neusight,
)
from hetsim.costmodel.profile_reader import read_profile
from hetsim.experiments.cli.main import main

SAMPLE = Path(__file__).parent / "data" / "neusight-sample"


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("neusight")
    import_neusight(SAMPLE, out)
    return out


def _raw(path: str) -> pd.DataFrame:
    return pd.read_csv(SAMPLE / path)


# ------------------------------------------------------------------ signatures
class _F:
    def __init__(self, fn):  # noqa: ANN001
        import torch

        class M(torch.nn.Module):
            def forward(self, *a):  # noqa: ANN002, ANN202
                return fn(*a)

        self.module = M()


def _torch_cases():
    import torch

    return {
        "linear": (torch.nn.Linear(24, 40), (torch.randn(1, 16, 24),), {"B": 1, "M": 16, "N": 24, "K": 40}),
        "bmm": (_F(torch.bmm).module, (torch.randn(3, 16, 24), torch.randn(3, 24, 40)),
                {"B": 3, "M": 16, "N": 24, "K": 40}),
        "conv": (torch.nn.Conv2d(8, 16, 3, stride=1, padding=1, bias=False), (torch.randn(2, 8, 20, 20),),
                 {"B": 2, "Input_Channel": 8, "Output_Channel": 16, "Kernel_Szie": 3, "Input_Size": 20,
                  "Stride": 1, "Padding": 1}),
        "ln": (torch.nn.LayerNorm(24), (torch.randn(16, 24),), {"B": 16, "H": 24}),
        "softmax": (_F(lambda x: torch.softmax(x, -1)).module, (torch.randn(16, 24),), {"B": 16, "H": 24}),
        "mul": (_F(torch.mul).module, (torch.randn(16, 24), torch.randn(16, 24)), {"B": 16, "H": 24}),
        "divu": (_F(lambda x: x / 1.5).module, (torch.randn(16, 24),), {"B": 16, "H": 24}),
        "powu": (_F(lambda x: torch.pow(x, 1.5)).module, (torch.randn(16, 24),), {"B": 16, "H": 24}),
        "gelu": (torch.nn.GELU(), (torch.randn(16, 24),), {"B": 16, "H": 24}),
        "tanh": (_F(torch.tanh).module, (torch.randn(16, 24),), {"B": 16, "H": 24}),
    }


@pytest.mark.slow
def test_rows_are_keyed_by_the_signatures_the_relax_importer_gives_the_same_torch_call() -> None:
    from hetsim.graphs import from_torch, signature
    from hetsim.graphs.graph import Graph

    kinds = {"linear": "matmul", "bmm": "matmul", "conv": "conv2d", "ln": "layer_norm", "softmax": "softmax",
             "mul": "multiply", "divu": "divide", "powu": "power", "gelu": "gelu", "tanh": "tanh"}
    for op, (module, args, shape) in _torch_cases().items():
        g = from_torch(module, args, name=op)
        (real,) = [d for _, d in g.nx.nodes(data=True) if d["op"] == kinds[op]]
        node = neusight_node(op, shape)
        mine = Graph()
        kind = node.pop("op")
        mine.add_op("n", kind, **node)
        d = mine.nx.nodes["n"]
        assert signature(d) == signature(real), op
        assert (d["flops"], d["bytes"], d["param_bytes"]) == (real["flops"], real["bytes"], real["param_bytes"]), op
        assert [t["shape"] for t in d["outputs"]] == [t["shape"] for t in real["outputs"]][:1], op


def test_node_shapes_and_counts_of_each_operator() -> None:
    lin = neusight_node("linear", {"B": 2, "M": 8, "N": 16, "K": 4})
    assert [t["shape"] for t in lin["inputs"]] == [[16, 16], [16, 4]]  # [B*M, N] x [N, K]
    assert lin["flops"] == 2 * 16 * 16 * 4
    conv = neusight_node("conv", {"B": 1, "Input_Channel": 3, "Output_Channel": 5, "Kernel_Szie": 3,
                                  "Input_Size": 9, "Stride": 2, "Padding": 1})
    assert conv["outputs"][0]["shape"] == [1, 5, 5, 5]
    assert conv["flops"] == 2 * 5 * 25 * 3 * 9 and conv["param_bytes"] == 4 * 5 * 3 * 9
    addu = neusight_node("addu", {"B": 4, "H": 6})
    assert (addu["op"], [t["shape"] for t in addu["inputs"]]) == ("add", [[4, 6], []])
    assert neusight_node("pow", {"B": 4, "H": 6})["flops"] == 0.0  # TIR counts no FLOPs for power
    with pytest.raises(CostModelError, match="unknown data set operator 'sub'"):
        neusight_node("sub", {"B": 1, "H": 1})


# ------------------------------------------------------------------- profiles
def test_one_profile_folder_per_gpu_with_manifest_licence_and_split(imported: Path) -> None:
    assert sorted(p.name for p in imported.iterdir()) == ["gpu-a100-40gb", "gpu-h100", "gpu-t4", "gpu-v100"]
    prof = read_profile(imported / "gpu-t4")
    m = prof.manifest
    assert m["source"].startswith("NeuSight kernel data set") and "MIT" in m["licence"]
    assert m["machine"]["gpu_model"] == "Tesla T4"
    assert m["libraries"]["torch"] == "2.1.0" and m["libraries"]["cudnn"] == "8902"
    assert m["devices"][0]["spec"] == {"sm_count": 40, "cores_per_sm": 64, "clock_hz": 1.59e9,
                                       "peak_flops": 8.141e12, "mem_bandwidth_bytes_per_s": 3.2e11,
                                       "l2_bytes": 4 * 2**20, "memory_bytes": 15 * 2**30,
                                       "tdp_w": 70.0}
    assert (imported / "gpu-t4" / "LICENSE").read_text() == (SAMPLE / "LICENSE").read_text()
    assert (imported / "gpu-t4" / "ops.csv.gz").is_file() and not (imported / "gpu-t4" / "ops.csv").exists()
    # the data set's own split stays visible, with what it holds in the manifest
    counts = prof.ops.groupby(["split", "source_op"]).size()
    assert counts["train"]["linear"] == 70 and counts["train"]["conv"] == 70
    assert m["split"]["rows"]["train"]["linear"] == 70
    assert int(counts["test"]["linear"]) == len(_raw("test/linear.csv.gz").query("Device == 'Tesla T4'"))


def test_manifest_states_what_the_data_set_gets_wrong_or_lacks(imported: Path) -> None:
    m = read_profile(imported / "gpu-t4").manifest
    assert m["caveats"] == list(DATASET_CAVEATS) and m["spec_corrections"] == {}
    assert any("different campaigns" in c and "P4 0.87 vs 3.23" in c for c in m["caveats"])
    assert any("3x3 kernels, stride 1, padding 1 only" in c for c in m["caveats"])


def test_the_p4_sm_count_of_the_data_set_is_corrected(tmp_path: Path) -> None:
    (tmp_path / "device_configs").mkdir()
    config = {"Num_Sm": 40, "Core_Per_SM": 64, "Freq": 1063, "SingleFLOPs": 5443, "Mem_Bw": 192,
              "L2Cache": 2, "Dev_Mem": 8}  # as the data set states it: 40 x 64
    (tmp_path / "device_configs" / "Tesla_P4.json").write_text(json.dumps(config))
    spec = read_device_config(tmp_path, GPUS["p4"])
    assert (spec["sm_count"], spec["cores_per_sm"], spec["tdp_w"]) == (20, 128, 75.0)
    assert spec["sm_count"] * spec["cores_per_sm"] == config["Num_Sm"] * config["Core_Per_SM"]
    assert read_device_config(tmp_path, GPUS["t4"]) == {"tdp_w": 70.0}  # no config file: board power only


def test_rows_hold_the_latency_in_seconds_and_the_signature(imported: Path) -> None:
    raw = _raw("train/linear/Tesla_T4.csv.gz").iloc[0]
    prof = read_profile(imported / "gpu-t4")
    row = prof.ops[prof.ops["node"] == "train/linear/Tesla_T4.csv.gz:1"].iloc[0]
    m, n, k = int(raw["M"]), int(raw["N"]), int(raw["K"])
    assert row["signature"] == (f'matmul|{{"out_dtype":"float32"}}|[[[{m},{n}],"float32"],[[{n},{k}],"float32"]]')
    assert row["time_s"] == pytest.approx(raw["Latency"] * 1e-3, rel=1e-6)
    assert (row["op"], row["device"], row["device_kind"], row["timer"]) == ("matmul", "t4", "gpu", "cuda_event")


def test_test_rows_repeated_across_files_are_imported_once(imported: Path) -> None:
    # vec.csv repeats rows of elem.csv (the data set's own layout): one row per shape
    prof = read_profile(imported / "gpu-v100")
    test = prof.ops[prof.ops["split"] == "test"]
    assert not test["signature"].duplicated().any()
    raw = pd.concat([_raw("test/elem.csv.gz"), _raw("test/vec.csv.gz")])
    raw = raw[raw["Device"] == "Tesla V100-PCIE-32GB"]
    assert raw.duplicated(["OPName", "B", "H"]).any()  # the sample does hold repeated rows
    vector = test[~test["source_op"].isin(["linear", "bmm"])]
    assert len(vector) == len(raw.drop_duplicates(["OPName", "B", "H"]))


def test_h100_has_only_its_gemm_test_rows(imported: Path) -> None:
    prof = read_profile(imported / "gpu-h100")
    assert set(prof.ops["source_op"]) == {"linear", "bmm"} and set(prof.ops["split"]) == {"test"}


# ------------------------------------------------------------------ bad input
def _copy_sample(tmp_path: Path) -> Path:
    src = tmp_path / "ds"
    shutil.copytree(SAMPLE, src)
    return src


def test_a_renamed_column_names_the_file_and_the_column(tmp_path: Path) -> None:
    src = _copy_sample(tmp_path)
    path = src / "train" / "bmm" / "Tesla_T4.csv.gz"
    frame = pd.read_csv(path).rename(columns={"K": "Kdim"})
    frame.to_csv(path, index=False)
    with pytest.raises(CostModelError, match=r"train/bmm/Tesla_T4\.csv\.gz: missing column\(s\) \['K'\]"):
        import_neusight(src, tmp_path / "out")
    assert not (tmp_path / "out").exists()  # nothing written


def test_a_bad_latency_names_the_row(tmp_path: Path) -> None:
    src = _copy_sample(tmp_path)
    path = src / "test" / "linear.csv.gz"
    frame = pd.read_csv(path)
    frame.loc[3, "Latency"] = -1.0
    frame.to_csv(path, index=False)
    with pytest.raises(CostModelError, match=r"linear\.csv\.gz: row 4: column 'Latency' is -1\.0"):
        read_neusight(src)


def test_unknown_gpu_lists_the_known_ones() -> None:
    with pytest.raises(CostModelError, match=r"unknown GPU 'a100'; the data set's GPUs are \['t4', 'p4'"):
        gpu_by_name("a100")
    assert gpu_by_name("Tesla V100-PCIE-32GB").name == "v100" and gpu_by_name("gpu-h100") is GPUS["h100"]


def test_not_a_data_set_folder(tmp_path: Path) -> None:
    with pytest.raises(CostModelError, match="not the NeuSight data set folder"):
        import_neusight(tmp_path, tmp_path / "out")


def test_existing_profiles_are_kept_unless_overwrite(tmp_path: Path, imported: Path) -> None:
    out = tmp_path / "out"
    shutil.copytree(imported / "gpu-t4", out / "gpu-t4")
    before = (out / "gpu-t4" / "ops.csv.gz").read_bytes()
    with pytest.raises(CostModelError, match="already exist"):
        import_neusight(SAMPLE, out, gpus=["t4"])
    assert (out / "gpu-t4" / "ops.csv.gz").read_bytes() == before


def test_a_failure_midway_loses_nothing_already_written(tmp_path: Path, imported: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out"
    shutil.copytree(imported / "gpu-v100", out / "gpu-v100")
    old_v100 = (out / "gpu-v100" / "ops.csv.gz").read_bytes()
    import hetsim.costmodel.profile_writer as profile_writer

    real = profile_writer.write_profile
    calls = []

    def failing(path, *a, **kw):  # noqa: ANN001, ANN002, ANN003, ANN202
        calls.append(Path(path).name)
        if Path(path).name == "gpu-v100":
            raise OSError("disk full")
        return real(path, *a, **kw)

    monkeypatch.setattr(profile_writer, "write_profile", failing)
    with pytest.raises(OSError, match="disk full"):
        import_neusight(SAMPLE, out, gpus=["t4", "v100"], overwrite=True)
    assert calls == ["gpu-t4", "gpu-v100"]
    assert read_profile(out / "gpu-t4").ops["split"].eq("train").any()  # complete
    assert (out / "gpu-v100" / "ops.csv.gz").read_bytes() == old_v100  # untouched
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # no temporary folder left


# --------------------------------------------------------------------- CLI
def test_cli_imports_and_reports(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profile", "import", str(SAMPLE), "--gpus", "t4,h100", "--out", str(tmp_path),
                 "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert f"{tmp_path}/gpu-t4: " in out and "imported 2 GPU profile(s)" in out
    assert main(["profile", "import", str(SAMPLE), "--gpus", "a100", "--out", str(tmp_path)]) == 2
    assert "hetsim profile import: error: unknown GPU 'a100'" in capsys.readouterr().err


def test_gzip_profile_is_byte_reproducible(tmp_path: Path) -> None:
    import_neusight(SAMPLE, tmp_path / "a", gpus=["h100"])
    import_neusight(SAMPLE, tmp_path / "b", gpus=["h100"])
    a = gzip.decompress((tmp_path / "a" / "gpu-h100" / "ops.csv.gz").read_bytes())
    assert (tmp_path / "a" / "gpu-h100" / "ops.csv.gz").read_bytes() == \
        (tmp_path / "b" / "gpu-h100" / "ops.csv.gz").read_bytes()
    assert a.startswith(b"signature,split,node,source_op,time_s")
    man = json.loads((tmp_path / "a" / "gpu-h100" / "manifest.json").read_text())
    assert man["devices"][0]["spec"]["sm_count"] == 132
    assert np.isclose(man["devices"][0]["spec"]["peak_flops"], 66.908e12)


def test_an_unreadable_ops_file_is_named_for_what_it_is(tmp_path: Path, imported: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A damaged ops.csv.gz is 'the gzip file'; a plain ops.csv that cannot be read is not."""
    bad = tmp_path / "gpu-t4"
    shutil.copytree(imported / "gpu-t4", bad)
    (bad / "ops.csv.gz").write_bytes(b"not gzip")
    with pytest.raises(CostModelError, match=r"ops.csv.gz: cannot read the gzip file \(BadGzipFile"):
        read_profile(bad)
    plain = tmp_path / "plain"
    shutil.copytree(imported / "gpu-t4", plain)
    (plain / "ops.csv").write_bytes(gzip.decompress((plain / "ops.csv.gz").read_bytes()))
    (plain / "ops.csv.gz").unlink()
    real = Path.read_bytes

    def denied(self: Path) -> bytes:
        if self.name == "ops.csv":
            raise PermissionError(13, "Permission denied")
        return real(self)

    monkeypatch.setattr(Path, "read_bytes", denied)
    with pytest.raises(CostModelError, match=r"ops.csv: cannot read it \(PermissionError"):
        read_profile(plain)
