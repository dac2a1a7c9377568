"""Do the profiler's GPU device times add up to the model's kernels? (run on a GPU)

For googlenet, resnet18, mobilenet_v2 and bert_base (128 tokens) at batch 1 and 32:

1. ``hetsim profile`` of every graph on the GPU (:func:`runtime.profiler.profile_graphs`):
   each op signature's device time as it runs in a stream, and its launch;
2. the **profiled sum** of each graph: its nodes' device times added up (views: 0);
3. the **kernel sum** of the whole model: the torch module run ``--iterations`` times
   under ``torch.profiler``, the durations of its CUDA kernels added up (Chrome
   trace events of category ``kernel``) per iteration;
4. the ratio, with the target: within 5 % at batch 1 and 32.

Writes under ``--out``: ``profile/`` (the profile folder), ``traces/`` (the Chrome
traces), ``kernels.csv`` (model, batch, nodes, profiled_s, kernel_s, ratio, within),
and prints one target line per row and a summary. Takes about 3 minutes on an H100
(most of it the zoo imports when the zoo cache is cold).

Run: ``python benchmarks/gpu_kernels.py --out out/gpu-kernels [--device cuda:0]
[--models googlenet,resnet18] [--batches 1,32]``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

MODELS = ("googlenet", "resnet18", "mobilenet_v2", "bert_base")
BATCHES = (1, 32)
#: zoo options of each model (bert_base: 128 tokens)
MODEL_KWARGS: dict[str, dict[str, Any]] = {"bert_base": {"seq_len": 128}}
#: the target: profiled sum within this fraction of the kernel sum
TOLERANCE = 0.05
COLUMNS = ["model", "batch", "nodes", "profiled_s", "kernel_s", "ratio", "within"]


def profiled_sum(graph: Any, ops: pd.DataFrame, device: str) -> float:
    """Sum over ``graph``'s nodes of the device time (``time_s``) of their signature on
    profile device ``device`` (seconds); view ops count 0.

    Raises
    ------
    KeyError
        Naming the first node whose signature the profile has no row of.
    """
    from hetsim.graphs.features import features
    from hetsim.graphs.graph import VIEW_OPS

    rows = ops[ops["device"] == device]
    times = dict(zip(rows["signature"].astype(str), rows["time_s"].astype(float)))
    X = features(graph)
    total = 0.0
    for node, op, sig in zip(X.index, X["op"].astype(str), X["signature"].astype(str)):
        if op in VIEW_OPS:
            continue
        if sig not in times:
            raise KeyError(f"{graph.name}: node {node!r} ({op}) has no row on {device} in the profile")
        total += times[sig]
    return total


def kernel_sum(trace: Mapping[str, Any], iterations: int) -> float:
    """Seconds of CUDA kernels per iteration in a ``torch.profiler`` Chrome trace
    (``traceEvents`` of category ``kernel``; ``dur`` in microseconds).

    >>> kernel_sum({"traceEvents": [{"cat": "kernel", "dur": 30.0}, {"cat": "cpu_op", "dur": 99.0},
    ...                             {"cat": "kernel", "dur": 10.0}]}, 2)
    2e-05
    """
    if iterations < 1:
        raise ValueError(f"iterations must be >= 1, got {iterations}")
    durs = [float(e.get("dur", 0.0)) for e in trace.get("traceEvents", []) if e.get("cat") == "kernel"]
    return sum(durs) * 1e-6 / iterations


def compare_rows(rows: Iterable[Mapping[str, Any]], tolerance: float = TOLERANCE) -> pd.DataFrame:
    """The ``kernels.csv`` frame: ``rows`` (model, batch, nodes, profiled_s, kernel_s)
    with ``ratio`` (profiled / kernel) and ``within`` (``|ratio - 1| <= tolerance``)."""
    frame = pd.DataFrame(list(rows), columns=COLUMNS[:5])
    frame["ratio"] = frame["profiled_s"] / frame["kernel_s"]
    frame["within"] = (frame["ratio"] - 1.0).abs() <= tolerance
    return frame[COLUMNS]


def target_lines(frame: pd.DataFrame, tolerance: float = TOLERANCE) -> list[str]:
    """One printed line per row and a summary line (met / missed).

    >>> f = compare_rows([{"model": "m", "batch": 1, "nodes": 3, "profiled_s": 1.03e-3, "kernel_s": 1e-3}])
    >>> target_lines(f)[0]
    'm batch 1: profiled 1.030 ms, kernels 1.000 ms, ratio 1.030 (target within 5%: met)'
    """
    out = [f"{r.model} batch {r.batch}: profiled {r.profiled_s * 1e3:.3f} ms, kernels {r.kernel_s * 1e3:.3f} ms, "
           f"ratio {r.ratio:.3f} (target within {tolerance:.0%}: {'met' if r.within else 'missed'})"
           for r in frame.itertuples()]
    out.append(f"{int(frame['within'].sum())} of {len(frame)} within {tolerance:.0%}; "
               f"mean |ratio - 1| {float((frame['ratio'] - 1).abs().mean()):.1%}")
    return out


def trace_model(model: str, batch: int, device: str, path: Path, iterations: int) -> float:
    """Kernel seconds per forward pass of zoo ``model`` on ``device`` (torch profiler)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    from hetsim.graphs import zoo

    module, inputs = zoo.build(model, batch=batch, **MODEL_KWARGS.get(model, {}))
    module = module.to(device)
    inputs = tuple(x.to(device) for x in inputs)
    with torch.inference_mode():
        for _ in range(3):
            module(*inputs)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(iterations):
                module(*inputs)
            torch.cuda.synchronize()
    path.parent.mkdir(parents=True, exist_ok=True)
    prof.export_chrome_trace(str(path))
    return kernel_sum(json.loads(path.read_text()), iterations)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="folder for profile/, traces/ and kernels.csv")
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--batches", default=",".join(map(str, BATCHES)))
    ap.add_argument("--iterations", type=int, default=10, help="forward passes under the torch profiler")
    args = ap.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("gpu_kernels: error: torch sees no CUDA GPU; run this on a GPU machine", file=sys.stderr)
        return 2
    from hetsim.costmodel.profile_reader import read_profile
    from hetsim.graphs import zoo
    from hetsim.runtime.profiler import MeasureSettings, profile_graphs

    t0 = time.perf_counter()
    out = Path(args.out)
    models = [m for m in args.models.split(",") if m]
    batches = [int(b) for b in args.batches.split(",") if b]
    graphs = {(m, b): zoo.load(m, batch=b, cache=True, **MODEL_KWARGS.get(m, {})) for m in models for b in batches}
    print(f"imported {len(graphs)} graphs ({time.perf_counter() - t0:.0f} s)", flush=True)
    settings = MeasureSettings(warmup_s=0.005, min_time_s=0.02, max_time_s=0.3, min_repeats=5, max_repeats=400)
    run = profile_graphs(list(graphs.values()), args.device, "torch", out / "profile", settings=settings,
                         links=False, progress=False)
    print(f"profiled {run.measured} signatures ({run.seconds:.0f} s)", flush=True)
    ops = read_profile(out / "profile").ops
    rows = []
    for (m, b), g in graphs.items():
        kernel = trace_model(m, b, args.device, out / "traces" / f"{m}-b{b}.json", args.iterations)
        rows.append({"model": m, "batch": b, "nodes": g.number_of_nodes(),
                     "profiled_s": profiled_sum(g, ops, args.device), "kernel_s": kernel})
    frame = compare_rows(rows)
    frame.to_csv(out / "kernels.csv", index=False)
    print(f"device: {torch.cuda.get_device_name(torch.device(args.device))}")
    print("\n".join(target_lines(frame)))
    print(f"wrote {out / 'kernels.csv'} ({time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
