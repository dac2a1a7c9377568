"""``hetsim llm plan`` and its Python API: predictions, the plan JSON, llama.cpp flags, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hetsim.costmodel.platform import Platform
from hetsim.experiments.cli.main import main
from hetsim.experiments.llm_flags import llama_cpp_flags
from hetsim.experiments.llm_plan import plan_llm
from hetsim.graphs.llm import llm_graph
from hetsim.schedulers import SchedulerError
from hetsim.schedulers.llm.policies import NGL, ExpertOffload
from hetsim.schedulers.llm.residency import Residency

TOML = """
name = "tinybox"
host = "cpu"
[[devices]]
name = "cpu"
kind = "cpu"
peak_flops = 1e11
mem_bandwidth_bytes_per_s = 5e10
memory_bytes = {host}
[[devices]]
name = "gpu"
kind = "gpu"
peak_flops = 1e13
mem_bandwidth_bytes_per_s = 5e11
memory_bytes = {gpu}
launch_overhead_s = 1e-6
[[links]]
src = "cpu"
dst = "gpu"
bandwidth_bytes_per_s = 2e9
latency_s = 1e-6
"""


def tinybox(tmp_path: Path, gpu: int = 300_000, host: int = 10**7) -> Path:
    path = tmp_path / "tinybox.toml"
    path.write_text(TOML.format(gpu=gpu, host=host))
    return path


def test_plan_predicts_every_policy_and_ranks_the_best(tmp_path: Path) -> None:
    report = plan_llm("tiny-moe", Platform.from_toml(tinybox(tmp_path)), context=64, prompt=32, weights="f16",
                      reserve_bytes=20_000)
    by = {p.policy: p for p in report.predictions}
    assert list(by) == ["ngl", "expert-offload", "weight-streaming", "llm-search"]
    ok = [p for p in report.predictions if p.ok]
    assert report.best.decode_tok_s == max(p.decode_tok_s for p in ok)
    for p in ok:
        assert p.decode_tok_s > 0 and p.ttft_s > 0
        assert p.prefill_tok_s == pytest.approx(32 / p.ttft_s)
        assert p.memory_bytes["gpu"] <= 300_000
    assert by["ngl"].llama_cpp.startswith("-ngl ")
    text = report.table()
    assert text.splitlines()[0].split()[:3] == ["policy", "prefill", "tok/s"]


def test_plan_json_and_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "plan.json"
    rc = main(["llm", "plan", "tiny", "--platform", str(tinybox(tmp_path)), "--context", "64", "--prompt", "16",
               "--weights", "fp16", "--reserve-gib", "0.00002", "--out", str(out)])
    assert rc == 0
    text = capsys.readouterr().out
    assert "engine simulated (placement policies, roofline costs): tiny (F16, KV f16) on tinybox: context 64, " \
           "batch 1, prompt 16" in text
    assert "engine llama.cpp: does not apply: platform 'tinybox': its GPU declares no tensor_flops" in text
    assert f"wrote {out}" in text
    data = json.loads(out.read_text())
    assert data["hetsim_llm_plan"] == 1 and data["model"] == "tiny" and data["weights"] == "F16"
    assert data["best"]["policy"] in {"ngl", "weight-streaming", "llm-search"}
    assert set(data["best"]["residency"]["devices"]) == set(llm_graph("tiny", kv_length=8).meta["llm"]["units"])
    bad = [p for p in data["predictions"] if p["error"]]
    assert [p["policy"] for p in bad] == ["expert-offload"] and bad[0]["decode_tok_s"] is None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--weights", "q7"], "unknown llama.cpp weight type 'q7'"),
        (["--context", "1"], "--context must be an int >= 2, got 1"),
        (["--prompt", "100"], "--prompt 100 is longer than --context 64"),
        (["--gen", "0"], "--gen must be an int >= 1, got 0"),
        (["--gpu", "RTX 4090"], "--gpu describes a machine; --platform"),
        (["--platform", "no-such-box"], "unknown platform preset 'no-such-box'"),
    ],
)
def test_cli_bad_input_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str],
                                   message: str | None) -> None:
    base = ["llm", "plan", "tiny", "--platform", str(tinybox(tmp_path)), "--context", "64",
            "--out", str(tmp_path / "p.json")]
    rc = main(base + args)
    err = capsys.readouterr().err
    assert rc == 2 and len(err.strip().splitlines()) == 1
    assert err.startswith("hetsim llm: error: ")
    if message:
        assert message in err
    assert not (tmp_path / "p.json").exists()


def test_platform_without_host_memory(tmp_path: Path) -> None:
    gpu_only = tmp_path / "gpus.toml"
    gpu_only.write_text('name = "gpus"\n[[devices]]\nname = "gpu"\nkind = "gpu"\npeak_flops = 1e13\n'
                        'mem_bandwidth_bytes_per_s = 1e12\nmemory_bytes = 1000000\n')
    with pytest.raises(SchedulerError, match="platform 'gpus' has no host memory"):
        plan_llm("tiny", gpu_only, context=64)


def test_model_that_fits_nowhere_gives_needed_and_available_memory(tmp_path: Path) -> None:
    with pytest.raises(SchedulerError, match=(
        r"'tiny' \(F16 weights 214272 bytes, KV cache 32768 bytes at context 128 x batch 1\) fits nowhere on "
        r"'tinybox': needs 247040 bytes; gpu has 100000 bytes \(after a 0 bytes reserve\), cpu has 100000 bytes"
    )):
        plan_llm("tiny", tinybox(tmp_path, gpu=100_000, host=100_000), context=128, weights="f16", reserve_bytes=0)


def test_llama_cpp_flags() -> None:
    p = Platform.preset("desktop-rtx4090")
    g = llm_graph("tiny-moe", kv_length=8)
    assert llama_cpp_flags(NGL.layout(g, p, 3), g, p) == ("-ngl 3", "exact")
    assert llama_cpp_flags(ExpertOffload.layout(g, p, 1), g, p) == ("-ngl 3 --n-cpu-moe 1", "exact")
    mixed = dict(NGL.layout(g, p, 3).devices)
    mixed["blk.1.ffn_exps"] = "cpu"
    assert llama_cpp_flags(Residency(mixed), g, p) == ('-ngl 3 -ot "blk\\.(1)\\.ffn_(up|down|gate)_exps=CPU"', "exact")
    mixed["blk.0.attn"] = "cpu"
    flags, note = llama_cpp_flags(Residency(mixed), g, p)
    assert '-ot "blk\\.(0)\\.attn_.*=CPU"' in flags and note.startswith("approximate")
    streamed = Residency(NGL.layout(g, p, 3).devices, {"blk.0.ffn"})
    assert llama_cpp_flags(streamed, g, p)[0] is None


def test_sweeps_accept_llm_workloads_and_policies(tmp_path: Path) -> None:
    from hetsim.experiments.sweep import Sweep, SweepError, run_sweep

    box = str(tinybox(tmp_path))
    sweep = Sweep.from_dict({"name": "llm", "grid": {
        "model": ["llm:tiny,context=64,weights=f16", "llm:tiny,context=128,weights=f16"],
        "platform": [box], "scheduler": ["ngl", "weight-streaming"], "link_bandwidth": [0.5, 2.0]},
        "scheduler_args": {"ngl": {"reserve_bytes": 20_000}, "weight-streaming": {"reserve_bytes": 20_000}}})
    df = run_sweep(sweep, tmp_path / "out", workers=0, progress=False)
    assert len(df) == 8 and (df["status"] == "ok").all()
    t = df.set_index(["scheduler", "model", "link_bandwidth"])["makespan_s"]
    short, long_ = "llm:tiny,context=64,weights=f16", "llm:tiny,context=128,weights=f16"
    assert t["ngl", long_, 2.0] > t["ngl", short, 2.0]  # the longer context reads more KV cache
    assert (df.nodes[df.model == short] == 31).all()
    with pytest.raises(SweepError, match=r"model 'llm:tiny,context=1': context must be an int >= 2"):
        Sweep.from_dict({"name": "bad", "grid": {"model": ["llm:tiny,context=1"], "platform": [box],
                                                  "scheduler": ["ngl"]}})
