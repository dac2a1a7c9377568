"""Profiler traces in: the figure of each target of the trace importer and replay.

1. Replay of the traced schedule against the traced step time, on the public traces
   shipped in tests/data/traces (HolisticTraceAnalysis test data: NVIDIA A100 and
   V100, AMD MI250; inference and training steps; one, two, three and four
   streams): per trace the measured and simulated step time and the error, then
   the mean and the largest absolute error over the target's traces. Other traces
   (``OTHER``, and any given with ``--extra FILE[@STEP]``) are checked and printed
   apart.
2. Import and replay of a trace of at least 100k events: a trace made by repeating
   the shipped V100 training step (``--events``, default 100,000), read whole
   (``step="all"``); the wall time of ``from_trace`` + ``replay``.
3. The CUDA-graph what-if on the all-GPU inference trace (AlexNet forward, A100):
   host-bound and device-bound parts, the what-if's step time and the check that it
   is at most the traced time less the host-launch excess.

Run: ``python benchmarks/trace_replay.py`` (about 10 s).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "traces"
ALEXNET_STEP = "[param|pytorch.model.alex_net|0|0|0|measure|forward]"
#: the target's traces: file -> (step or None for the default, what the step is)
TARGET = {
    "alexnet-a100-forward.json.gz": (ALEXNET_STEP, "A100, inference forward, 2 streams"),
    "event-sync-a100.json.gz": (None, "A100, event synchronisation"),
    "event-sync-multi-stream-a100.json.gz": (None, "A100, 3 streams, stream waits"),
    "minitoy-mi250-train.json.gz": (None, "MI250 (ROCm), training step, 2 host threads"),
    "ns-resolution-v100-train.json.gz": (None, "V100, training step"),
    "trace-diff-a100-train.json.gz": (None, "A100, training step, 4 streams"),
    "trace-diff-v100-train.json.gz": (None, "V100, training step, 4 streams"),
}
#: checked too, outside the target: file -> (step, what it is)
OTHER = {
    "queue-length-a100-train.json.gz": (None, "A100-80GB, training, CUDA graphs recorded in part (warned), NCCL"),
    "simple-add-a100.json.gz": (None, "A100, whole trace of two adds"),
}


def replay_error(path: Path, step: str | None) -> tuple[float, float, int]:
    """(measured s, simulated s, nodes) of the replay of ``path``'s step."""
    from hetsim.graphs.trace import from_trace
    from hetsim.sim.replay import replay

    g = from_trace(path, step=step)
    r = replay(g)
    return r.measured, r.makespan, len(g)


def accuracy(extra: list[str]) -> None:
    print("1. replay of the traced schedule against the traced step time")
    print(f"{'trace':40} {'nodes':>6} {'measured ms':>12} {'simulated ms':>13} {'error':>8}  what")
    errors = []
    for name, (step, what) in TARGET.items():
        m, s, n = replay_error(DATA / name, step)
        errors.append(abs(s - m) / m)
        print(f"{name:40} {n:6d} {m * 1e3:12.3f} {s * 1e3:13.3f} {(s - m) / m * 100:+7.2f}%  {what}")
    print(f"target traces: {len(errors)}, mean |error| {statistics.mean(errors) * 100:.2f} %, "
          f"max |error| {max(errors) * 100:.2f} % (target: 5 % mean, 10 % max)")
    others = [(DATA / k, s, w) for k, (s, w) in OTHER.items()]
    for spec in extra:
        path, at, step = spec.partition("@")
        others.append((Path(path), step if at else None, "given with --extra"))
    print("other traces checked:")
    for path, step, what in others:
        m, s, n = replay_error(path, step)
        print(f"{path.name:40} {n:6d} {m * 1e3:12.3f} {s * 1e3:13.3f} {(s - m) / m * 100:+7.2f}%  {what}")


def repeated_trace(source: Path, events: int, out: Path) -> int:
    """Write a trace of at least ``events`` events made of copies of ``source``'s,
    each shifted past the previous one in time and in its ids; return the count."""
    doc = json.loads(gzip.decompress(source.read_bytes()))
    base = [e for e in doc["traceEvents"] if e.get("ph") != "M"]
    meta = [e for e in doc["traceEvents"] if e.get("ph") == "M"]
    t0 = min(e["ts"] for e in base if "ts" in e)
    span = max(e["ts"] + e.get("dur", 0) for e in base if "ts" in e) - t0
    ids = ("correlation", "External id", "Record function id")
    out_events = list(meta)
    k = 0
    while len(out_events) < events:
        shift = k * (span + 1000)
        for e in base:
            c = dict(e)
            if "ts" in c:
                c["ts"] = c["ts"] + shift
            if isinstance(c.get("args"), dict):
                c["args"] = {a: (v + k * 10_000_000 if a in ids and isinstance(v, int) and v >= 0 else v)
                             for a, v in c["args"].items()}
            if isinstance(c.get("id"), int):
                c["id"] = c["id"] + k * 10_000_000
            if str(c.get("name", "")).startswith("ProfilerStep#"):
                c["name"] = f"ProfilerStep#{k}"
            out_events.append(c)
        k += 1
    out.write_bytes(gzip.compress(json.dumps({**doc, "traceEvents": out_events}).encode()))
    return len(out_events)


def speed(events: int) -> None:
    from hetsim.graphs.trace import from_trace
    from hetsim.sim.replay import replay

    print(f"\n2. import and replay of a trace of >= {events:,} events")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "repeated.json.gz"
        n = repeated_trace(DATA / "trace-diff-v100-train.json.gz", events, path)
        load = os.getloadavg()[0]
        t, c = time.perf_counter(), time.process_time()
        g = from_trace(path, step="all")
        t_import = time.perf_counter() - t
        r = replay(g)
        total, cpu = time.perf_counter() - t, time.process_time() - c
    print(f"{n:,} events, {len(g):,} nodes: import {t_import:.2f} s, replay {total - t_import:.2f} s, "
          f"total {total:.2f} s wall, {cpu:.2f} s CPU (target < 10 s; load average {load:.1f} on "
          f"{os.cpu_count()} CPUs); simulated step {r.makespan * 1e3:.1f} ms")


def cuda_graphs() -> None:
    from hetsim.graphs.trace import from_trace
    from hetsim.sim.replay.whatif import what_ifs

    gl = 10e-6
    g = from_trace(DATA / "alexnet-a100-forward.json.gz", step=ALEXNET_STEP)
    w = what_ifs(g, graph_launch_s=gl)
    cg = w.cases["cuda graphs"]
    excess = w.host_bound_s - cg.launches * gl
    bound = w.traced.measured - excess
    print("\n3. CUDA-graph what-if, AlexNet forward on an A100 (all-GPU inference)")
    print(f"traced {w.traced.measured * 1e3:.3f} ms, replay {w.traced.makespan * 1e3:.3f} ms: device-bound part "
          f"{w.device_bound.makespan * 1e3:.3f} ms, host-bound part {w.host_bound_s * 1e3:.3f} ms")
    print(f"cuda graphs ({cg.launches} launch(es) x {gl * 1e6:g} us): {cg.makespan * 1e3:.3f} ms <= traced - "
          f"host-launch excess = {bound * 1e3:.3f} ms: {'yes' if cg.makespan <= bound else 'no'}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--events", type=int, default=100_000, help="events of the speed trace (default 100,000)")
    p.add_argument("--extra", action="append", default=[], metavar="FILE[@STEP]", help="another trace to check")
    args = p.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    warnings.simplefilter("ignore")
    accuracy(args.extra)
    speed(args.events)
    cuda_graphs()
    return 0


if __name__ == "__main__":
    sys.exit(main())
