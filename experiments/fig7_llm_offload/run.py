"""Figure 7: published CPU-GPU offloading measurements, predicted on the hardware they name.

Every row of ``published.csv`` beside this file is one published figure (source,
URL, the quoted figure, hardware, model, quantisation, context, batch, and the
placement that was run, as an LLM policy of :func:`hetsim.plan_llm` with its
arguments: llama.cpp ``-ngl N`` is policy ``ngl`` with ``n_gpu_layers=N``; FlexGen's
``--percent 20 80 0 100 0 100 --cpu`` is ``weight-streaming`` with the KV cache and
attention on the CPU). :func:`predict` simulates it with the roofline of the row's
platform preset (every number sourced in ``costmodel/presets/*.toml``) and ``run.py``
writes ``results.csv`` (published, predicted, error %), one row per figure::

    python experiments/fig7_llm_offload/run.py && python experiments/fig7_llm_offload/plot.py

Metrics: ``decode_tok_s`` is llama.cpp's generation speed at batch 1 (the decode
step at the row's context). ``generation_throughput`` is FlexGen's: ``batch x gen``
tokens over prefill plus decode time; FlexGen runs the prefill in ``batch / gpu_batch``
GPU batches (its ``--num-gpu-batches``) and each decode step over the whole batch, so
the prediction is ``batch x gen / (batch / gpu_batch x TTFT(gpu_batch) + (gen - 1) x
step(batch))``. ``prefill_*_busy_s``: seconds the CPU and the GPU compute in one
prefill (one GPU batch for FlexGen), ``decode_*_busy_s`` in one decode step.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

import hetsim
from hetsim.costmodel.platform import Platform

HERE = Path(__file__).resolve().parent
PUBLISHED = HERE / "published.csv"
#: columns of results.csv, in order
COLUMNS = ("id", "source", "url", "platform", "model", "weights", "context", "batch", "policy", "policy_args",
           "llama_cpp", "metric", "published", "predicted", "error_pct", "units", "decode_step_s", "ttft_s",
           "gpu_bytes", "cpu_bytes", "pcie_bytes_per_token", "prefill_cpu_busy_s", "prefill_gpu_busy_s",
           "decode_cpu_busy_s", "decode_gpu_busy_s", "cpu_bandwidth", "gpu_bandwidth", "link_bandwidth",
           "git_commit", "hetsim_version", "finished_at")  # fmt: skip


def load_published(path: Path = PUBLISHED) -> pd.DataFrame:
    """The published figures; ``policy_args`` parsed from JSON."""
    df = pd.read_csv(path)
    df["policy_args"] = [json.loads(a) for a in df["policy_args"]]
    return df


def scale_host_bandwidth(platform: Platform, factor: float) -> Platform:
    """``platform`` with its CPU's memory bandwidth and its host-memory domains times
    ``factor`` (the sensitivity ``--host-bandwidth-scale`` measures)."""
    devs = tuple(dataclasses.replace(d, mem_bandwidth_bytes_per_s=d.mem_bandwidth_bytes_per_s * factor)
                 if d.kind == "cpu" else d for d in platform.devices)  # fmt: skip
    doms = tuple(dataclasses.replace(m, bandwidth_bytes_per_s=m.bandwidth_bytes_per_s * factor)
                 for m in platform.memory_domains)  # fmt: skip
    return platform.replace(devices=devs, memory_domains=doms)


def predict(row: pd.Series | dict[str, Any], host_bandwidth_scale: float = 1.0) -> dict[str, Any]:
    """Simulate one published figure; the prediction beside it, with what it rests on."""
    args = {row["policy"]: dict(row["policy_args"])}
    common = dict(context=int(row["context"]), weights=row["weights"], policies=[row["policy"]], policy_args=args)
    batch, gen = int(row["batch"]), int(row["gen"])
    plat = Platform.load(row["platform"])
    if host_bandwidth_scale != 1.0:
        plat = scale_host_bandwidth(plat, host_bandwidth_scale)
    if row["metric"] == "decode_tok_s":
        p = _one(hetsim.plan_llm(row["model"], plat, batch=batch, prompt=int(row["prompt"]), **common))
        step, ttft, value = batch / p.decode_tok_s, p.ttft_s, p.decode_tok_s
        pre = p
    elif row["metric"] == "generation_throughput":
        gpu_batch = int(row["gpu_batch"])
        p = _one(hetsim.plan_llm(row["model"], plat, batch=batch, prompt=1, **common))
        pre = _one(hetsim.plan_llm(row["model"], plat, batch=gpu_batch, prompt=int(row["prompt"]), **common))
        step, ttft = batch / p.decode_tok_s, batch / gpu_batch * pre.ttft_s
        value = batch * gen / (ttft + (gen - 1) * step)
    else:
        raise ValueError(f"unknown metric {row['metric']!r}")
    return {
        "predicted": value, "error_pct": (value / float(row["published"]) - 1) * 100, "decode_step_s": step,
        "ttft_s": ttft, "gpu_bytes": p.memory_bytes.get("gpu", 0), "cpu_bytes": p.memory_bytes.get("cpu", 0),
        "pcie_bytes_per_token": p.pcie_bytes_per_token, "llama_cpp": p.llama_cpp or "",
        "prefill_cpu_busy_s": pre.busy_s["prefill"].get("cpu", 0.0),
        "prefill_gpu_busy_s": pre.busy_s["prefill"].get("gpu", 0.0),
        "decode_cpu_busy_s": p.busy_s["decode"].get("cpu", 0.0), "decode_gpu_busy_s": p.busy_s["decode"].get("gpu", 0.0),
        "cpu_bandwidth": plat.device("cpu").mem_bandwidth_bytes_per_s,
        "gpu_bandwidth": plat.device("gpu").mem_bandwidth_bytes_per_s,
        "link_bandwidth": plat.route("cpu", "gpu")[0].bandwidth_bytes_per_s,
    }  # fmt: skip


def _one(report: Any) -> Any:
    p = report.predictions[0]
    if not p.ok:
        raise RuntimeError(f"{report.model} on {report.platform}: {p.error}")
    return p


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--published", type=Path, default=PUBLISHED)
    ap.add_argument("--out", type=Path, default=HERE / "results.csv")
    ap.add_argument("--only", nargs="*", help="ids of the rows to predict (default: all)")
    ap.add_argument("--host-bandwidth-scale", type=float, default=1.0,
                    help="multiply the CPU's memory bandwidth (and host-memory domains) by this (sensitivity)")
    a = ap.parse_args(argv)
    pub = load_published(a.published)
    if a.only:
        pub = pub[pub["id"].isin(a.only)]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=HERE).stdout.strip()  # fmt: skip
    rows = []
    for _, r in pub.iterrows():
        res = predict(r, a.host_bandwidth_scale)
        rows.append({**r.to_dict(), **res, "policy_args": json.dumps(r["policy_args"], sort_keys=True),
                     "git_commit": commit, "hetsim_version": hetsim.__version__,
                     "finished_at": datetime.now(UTC).isoformat(timespec="seconds")})  # fmt: skip
        print(f"{r['id']:>20}: published {r['published']:8.2f}  predicted {res['predicted']:8.2f} {r['units']}"
              f"  error {res['error_pct']:+6.1f} %", flush=True)
    pd.DataFrame(rows, columns=list(COLUMNS)).to_csv(a.out, index=False, float_format="%.6g")
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
