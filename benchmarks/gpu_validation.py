"""The CPU+GPU execution check in one command: calibration, the executor against a
whole-model CUDA-graph replay, and ``validate --all`` in graph and eager mode.

Its targets: all-GPU googlenet and resnet18 at batch 1 through the executor within
1.25x of a whole-model CUDA-graph replay, with a p10-p90 spread of at most 5 %;
``validate --all`` in graph mode with a mean |error| of at most 5 %, a max of at most
12 % and a Kendall tau of at least 0.9 per model; in eager mode a mean |error| of at
most 8 %.

Parts, each run in a process of its own with a time budget (a part that fails or
runs out of time is recorded as such and the others still run; every CSV is
written as soon as its part ends):

* ``smoke`` -- first, about 30 s, fail-fast: a mixed CPU+GPU plan in graph mode, in
  eager mode and traced, and two GPU segments ready together on a GPU with two
  streams (captured during set-up, replayed on two workers), each checked against
  the single-device reference; when it fails the check stops with its message
  (``smoke.log``), since every later part would fail the same way;
* ``calibration`` -- :func:`runtime.calibrate` of the platform, the GPU's host cost
  per op measured on googlenet's and resnet18's own ops (``calibration/``,
  ``calibration.csv``);
* ``replay`` -- all-GPU googlenet and resnet18 at batch 1 through the executor
  (``launch="graph"`` where the executor takes it) against the model's ops replayed
  as one ``torch.cuda.CUDAGraph``: medians, their ratio and the executor's p10-p90
  spread (``replay.csv``);
* ``validate-graph-b1``, ``validate-eager-b1`` -- ``validate --all`` (op times and
  host costs measured in the run) on googlenet, resnet18, mobilenet_v2 and bert_base
  at 128 tokens with the schedulers listed in ``SCHEDULERS``, in each launch mode;
  ``validate-graph-b8``, ``validate-eager-b8`` -- googlenet and resnet18 at batch 8
  (``<part>.csv``, rewritten after each model; the traces under ``<part>/<model>/``).

``summary.csv`` holds one row per target (met, missed or not measured,
the figure, the card) and ``parts.csv`` each part's status and time; the targets
are printed one line each.

    python benchmarks/gpu_validation.py [--out DIR] [--platform h100-server] [--budget-s 390]
    python benchmarks/gpu_validation.py --dry-run --out out/gpu-dry   # the pipeline on this CPU, tiny sizes

Without ``--out`` the folder is ``$OUT/gpu-validation`` where ``$OUT`` is set, else
``out/gpu-validation``. ``--dry-run`` (or ``--device cpu``) runs every part on the
CPU workers of ``cpu2`` with tiny models, two timed runs and a few schedulers: what
the pipeline does, not what the GPU measures (benchmarks/gpu_run.md says how a
session runs the real one).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

#: the schedulers the check validates (``--schedulers all``: every applicable one)
SCHEDULERS = "all-cpu,all-gpu,round-robin,heft,cpop,cp-greedy,by-path,dynamic,antichain-dp,refine"
#: part -> (seconds of the budget it may take at most, share of the budget)
PARTS = {"smoke": 0.08, "calibration": 0.14, "replay": 0.10, "validate-graph-b1": 0.26, "validate-eager-b1": 0.22,
         "validate-graph-b8": 0.10, "validate-eager-b8": 0.10}


def settings(args: argparse.Namespace) -> dict[str, Any]:
    """Models, sizes and repeats of each part: the check's on a GPU, tiny ones for the CPU dry run."""
    if args.device == "cpu":
        tiny = {"image_size": 32}
        return {"platform": "cpu2", "device": "cpu0", "replay_models": ["squeezenet1_1"],
                "models_b1": ["squeezenet1_1"], "models_b8": ["squeezenet1_1"], "batch_big": 2,
                "model_args": {"squeezenet1_1": tiny}, "schedulers": "all-cpu,heft,dynamic", "repeats": 2,
                "warmup": 1, "replicas": 1, "host_calibration": "none", "calls": 5, "cal_repeats": 1,
                "cal_models": []}
    return {"platform": args.platform, "device": "gpu", "replay_models": ["googlenet", "resnet18"],
            "models_b1": ["googlenet", "resnet18", "mobilenet_v2", "bert_base"],
            "models_b8": ["googlenet", "resnet18"], "batch_big": 8, "model_args": {"bert_base": {"seq_len": 128}},
            "schedulers": args.schedulers, "repeats": args.repeats, "warmup": 3, "replicas": 1,
            "host_calibration": None, "calls": 100, "cal_repeats": 9,
            "cal_models": ["googlenet", "resnet18"]}


# ------------------------------------------------------------------ parts (each in its own process)
def part_calibration(out: Path, s: dict[str, Any]) -> None:
    from hetsim.runtime.calibration import calibrate

    cal = calibrate(s["platform"], out=out / "calibration", calls=s["calls"], repeats=s["cal_repeats"],
                    gpu=None if s["device"] == "cpu0" else 0, progress=False, models=s["cal_models"])
    print(cal, flush=True)
    rows = [{"key": k, "value": v} for k, v in _flat(cal.measured).items()]
    write_csv(out / "calibration.csv", rows)


def sequential_call(ex: Any, device: str) -> Callable[[], Any]:
    """A call that runs every op of ``ex``'s graph in topological order on the memory of
    platform device ``device``, with the kernels the execution built (its inputs
    copied there once): the model as a plain sequence of its graph's ops."""
    import torch

    from hetsim.runtime.executor.check import run_in_order

    eng = ex.engine
    d = eng.dev_index[device]
    calls, where = eng.calls[eng.dmem[d]], eng.mem_names[eng.dmem[d]]
    missing = [eng.names[u] for u in range(eng.n) if calls[u] is None]
    if missing:
        raise RuntimeError(f"{device}: no kernel for {missing[:3]}")
    inputs = [(torch.as_tensor(v).to(where),) for v in eng.input_values]
    ex.backend.configure(eng.specs[d])

    return lambda: run_in_order(calls, eng.n, inputs)


def whole_model_times(run_all: Callable[[], Any], repeats: int, *, cuda: bool) -> list[float]:
    """Seconds of each of ``repeats`` runs of ``run_all``: as one CUDA graph replayed
    (``cuda``: captured once after three warm-up runs on a side stream), else called."""
    import torch

    if not cuda:
        run_all()
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            run_all()
            times.append(time.perf_counter() - t0)
        return times
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            run_all()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        run_all()
    graph.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        graph.replay()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return times


def part_replay(out: Path, s: dict[str, Any]) -> None:
    from hetsim.costmodel.platform import Platform
    from hetsim.runtime.backends.relax_model import import_model
    from hetsim.runtime.executor.execute import Execution
    from hetsim.runtime.executor.setup import wire
    from hetsim.runtime.validation.cuda_host import plan_launch
    from hetsim.sim.plan import Plan

    platform = Platform.load(s["platform"])
    cuda = s["device"] != "cpu0"
    rows = []
    for name in s["replay_models"]:
        model = import_model(name, batch=1, **s["model_args"].get(name, {}))
        plan = Plan(dict.fromkeys(model.graph.nx, s["device"]), meta={"scheduler": f"all-{s['device']}"})
        mode, note = plan_launch(plan, platform, "graph")
        with Execution(model.graph, plan, platform, wire(model.graph, model), model=model, launch=mode) as ex:
            ex.run(s["warmup"], timed=False)
            ex.run(max(s["repeats"], 5) * 4)
            res = ex.result()
            whole = whole_model_times(sequential_call(ex, s["device"]), max(s["repeats"], 5) * 4, cuda=cuda)
        base = statistics.median(whole)
        rows.append({"model": name, "batch": 1, "device": s["device"], "launch": mode or "", "note": note,
                     "executor_ms": res.median * 1e3, "executor_p10_ms": res.p10 * 1e3,
                     "executor_p90_ms": res.p90 * 1e3, "spread_pct": 100 * res.spread,
                     "whole_model_ms": base * 1e3, "baseline": "cuda graph replay" if cuda else "sequential calls",
                     "ratio": res.median / base, "card": card(cuda)})
        print(f"{name}: executor {res.median * 1e3:.3f} ms (spread {100 * res.spread:.1f}%), whole model "
              f"{base * 1e3:.3f} ms, ratio {res.median / base:.2f}", flush=True)
        write_csv(out / "replay.csv", rows)


def part_validate(out: Path, s: dict[str, Any], launch: str, big: bool) -> None:
    """``validate --all`` of each model in turn (its own rounds and calibration), the
    part's CSV rewritten after each: a part cut short by its budget keeps the models done."""
    import pandas as pd

    from hetsim.runtime.validation.validate import format_table, validate_all

    name = f"validate-{launch}-b{8 if big else 1}"
    scheds = None if s["schedulers"] == "all" else s["schedulers"].split(",")
    batch = s["batch_big"] if big else 1
    tables = []
    for model in s["models_b8"] if big else s["models_b1"]:
        table = validate_all([model], s["platform"], scheds, None, warmup=s["warmup"], repeats=s["repeats"],
                             batch=batch, model_kwargs=s["model_args"], out=out / name / model,
                             progress=lambda line: print(line, file=sys.stderr, flush=True),
                             calibrate=s["host_calibration"], replicas=s["replicas"], launch=launch)
        print(format_table(table), flush=True)
        tables.append(table.assign(card=card(s["device"] != "cpu0"), batch=batch))
        pd.concat(tables, ignore_index=True).to_csv(out / f"{name}.csv", index=False)


def card(cuda: bool) -> str:
    """The GPU's name, or the CPU's model for the dry run."""
    if cuda:
        import torch

        return torch.cuda.get_device_name(0)
    from hetsim.runtime.calibration.calibrated import cpu_model

    return f"CPU {cpu_model()} (dry run)"


def part_smoke(out: Path, s: dict[str, Any]) -> None:
    """Fail-fast checks of the GPU path on small synthetic graphs (:func:`smoke_graph`):
    a mixed plan in graph mode, eager mode and traced, and a fork whose two GPU
    branches are ready together on a GPU with two streams."""
    import dataclasses

    from hetsim.costmodel.platform import Platform
    from hetsim.runtime.executor.execute import execute_wired
    from hetsim.sim.plan import Plan

    gpu, host = ("gpu", "cpu") if s["device"] != "cpu0" else ("cpu1", "cpu0")
    base = Platform.preset("xeon-p2200" if s["device"] != "cpu0" else "cpu2")
    two = base.replace(devices=tuple(dataclasses.replace(d, streams=2) if d.kind == "gpu" else d
                                     for d in base.devices))
    rows = []
    chain = {"a": [], "b": ["a"], "c": ["b"], "d": ["c"]}
    fork = {"a": [], "b": ["a"], "c": ["a"], "d": ["b", "c"], "e": ["d"]}
    checks = [("mixed plan, graph mode", chain, {"a": gpu, "b": gpu, "c": host, "d": gpu}, base, "graph", False),
              ("mixed plan, eager mode, traced", chain, {"a": gpu, "b": gpu, "c": host, "d": gpu}, base, "eager",
               True),
              ("two GPU segments ready together on two streams", fork,
               {"a": host, "b": gpu, "c": gpu, "d": host, "e": gpu}, two, "graph", False)]
    for what, edges, placement, platform, launch, trace in checks:
        graph, wiring = smoke_graph(edges)
        t0 = time.perf_counter()
        res = execute_wired(graph, Plan(placement, meta={"scheduler": "smoke"}), platform, wiring, warmup=1,
                            repeats=3, launch=launch if s["device"] != "cpu0" else None, trace=trace,
                            device_map={host: "cpu@1"} if s["device"] != "cpu0" else None, pin_threads=False)
        if res.check["node_error"] > 1.0:
            raise RuntimeError(f"{what}: outputs differ from the reference ({res.check})")
        rows.append({"check": what, "launch": res.launch or "", "median_ms": res.median * 1e3,
                     "seconds": time.perf_counter() - t0, "card": card(s["device"] != "cpu0")})
        print(f"ok  {what} ({res.median * 1e3:.3f} ms per run)", flush=True)
        write_csv(out / "smoke.csv", rows)


def smoke_graph(edges: dict[str, list[str]], size: int = 64) -> tuple[Any, Any]:
    """A graph and its wiring from ``node -> predecessors`` (in topological order): a node
    with one predecessor (or none: the graph input) is a matmul by a fixed weight, one
    with two an add; the last node is the graph output."""
    import numpy as np

    from hetsim.graphs.graph import Graph
    from hetsim.runtime.executor.setup import Wiring

    g = Graph(name="smoke")
    t = ([8, size], "float32")
    rng = np.random.default_rng(0)
    srcs: dict[str, list] = {}
    first = []
    for n, preds in edges.items():
        if len(preds) == 2:
            g.add_op(n, "add", inputs=[t, t], outputs=[t], flops=8.0 * size)
            srcs[n] = [("node", (p, 0)) for p in preds]
        else:
            g.add_op(n, "matmul", inputs=[t, ([size, size], "float32")], outputs=[t], flops=16.0 * size * size,
                     param_bytes=4 * size * size)
            srcs[n] = [("node", (preds[0], 0)) if preds else ("input", "x"), ("const", 0)]
            first += [] if preds else [n]
        for p in preds:
            g.add_edge(p, n)
    nbytes = 4 * 8 * size
    g.meta["inputs"] = [{"name": "x", "shape": t[0], "dtype": "float32", "bytes": nbytes, "consumers": first}]
    g.meta["outputs"] = [{"node": list(edges)[-1], "output": 0, "shape": t[0], "dtype": "float32", "bytes": nbytes}]
    weight = (rng.standard_normal((size, size)) / size**0.5).astype(np.float32)
    return g, Wiring(srcs, {0: weight}, {}, {"x": rng.random(t[0], dtype=np.float32)})


def run_part(part: str, out: Path, s: dict[str, Any]) -> None:
    """Run one part in this process."""
    if part == "smoke":
        part_smoke(out, s)
    elif part == "calibration":
        part_calibration(out, s)
    elif part == "replay":
        part_replay(out, s)
    else:
        _, launch, batch = part.split("-")
        part_validate(out, s, launch, batch == "b8")


# ------------------------------------------------------------------ targets
def targets(out: Path) -> list[dict[str, Any]]:
    """One row per target from the parts' CSVs: ``target``, ``status``
    (met, missed, not measured), ``figure``, ``card``."""
    rows = []
    replay = read_csv(out / "replay.csv")
    cards = sorted({r["card"] for r in replay}) if replay else []
    if replay:
        ratios = {r["model"]: float(r["ratio"]) for r in replay}
        spreads = {r["model"]: float(r["spread_pct"]) for r in replay}
        rows.append(_target("all-GPU batch 1 through the executor within 1.25x of a whole-model CUDA-graph replay",
                            all(v <= 1.25 for v in ratios.values()),
                            ", ".join(f"{m} {v:.2f}x" for m, v in ratios.items()), cards))
        rows.append(_target("all-GPU p10-p90 spread <= 5 %", all(v <= 5 for v in spreads.values()),
                            ", ".join(f"{m} {v:.1f}%" for m, v in spreads.items()), cards))
    else:
        rows += [_missing("all-GPU batch 1 through the executor within 1.25x of a whole-model CUDA-graph replay"),
                 _missing("all-GPU p10-p90 spread <= 5 %")]
    for launch, mean_max, extra in (("graph", 5.0, True), ("eager", 8.0, False)):
        what = (f"validate --all, {launch} mode: mean |error| <= {mean_max:g} %"
                + (", max <= 12 %, Kendall tau >= 0.9 per model" if extra else ""))
        ok_rows = [r for b in ("b1", "b8") for r in read_csv(out / f"validate-{launch}-{b}.csv")
                   if r.get("status") == "ok"]
        if not ok_rows:
            rows.append(_missing(what))
            continue
        met, figures = True, []
        for key in dict.fromkeys((r["model"], r["batch"]) for r in ok_rows):
            grp = [r for r in ok_rows if (r["model"], r["batch"]) == key]
            errs = [abs(float(r["error_pct"])) for r in grp]
            tau = float(grp[0]["kendall_tau"]) if grp[0].get("kendall_tau") not in ("", None) else math.nan
            mean, worst = statistics.fmean(errs), max(errs)
            met &= mean <= mean_max and (not extra or (worst <= 12 and tau >= 0.9))
            figures.append(f"{key[0]} b{key[1]} mean {mean:.1f}% max {worst:.1f}% tau {tau:.2f}")
        rows.append(_target(what, met, "; ".join(figures), sorted({r["card"] for r in ok_rows})))
    rows.append({"target": "no regression on CPU-only platforms (validate_cpu2.py mean |error| <= 2 %)",
                 "status": "not measured", "figure": "run python benchmarks/validate_cpu2.py on a quiet CPU host",
                 "card": ""})
    return rows


def _target(what: str, met: bool, figure: str, cards: Sequence[str]) -> dict[str, Any]:
    return {"target": what, "status": "met" if met else "missed", "figure": figure, "card": ", ".join(cards)}


def _missing(what: str) -> dict[str, Any]:
    return {"target": what, "status": "not measured", "figure": "its part did not finish (parts.csv)", "card": ""}


# ------------------------------------------------------------------ files
def write_csv(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    """``rows`` as CSV (columns in first-seen order), written atomically."""
    cols = list(dict.fromkeys(k for r in rows for k in r))
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=cols)
        w.writeheader()
        w.writerows(rows)
    os.replace(tmp, path)


def read_csv(path: Path) -> list[dict[str, str]]:
    """The rows of a CSV, or none where the file is missing."""
    if not path.is_file():
        return []
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def _flat(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = json.dumps(v) if isinstance(v, list) else v
    return out


# ------------------------------------------------------------------ the command
def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=None, help="results folder (default $OUT/gpu-validation or out/gpu-validation)")
    p.add_argument("--platform", default="h100-server", help="platform preset or TOML (default h100-server)")
    p.add_argument("--schedulers", default=SCHEDULERS, help=f"validated schedulers, or 'all' (default {SCHEDULERS})")
    p.add_argument("--repeats", type=int, default=10, help="rounds of timed runs per plan (default 10)")
    p.add_argument("--budget-s", type=float, default=390.0, help="seconds for all parts together (default 390)")
    p.add_argument("--parts", default=",".join(PARTS), help=f"parts to run (default all: {','.join(PARTS)})")
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda", help="cpu: the dry run (tiny sizes)")
    p.add_argument("--dry-run", action="store_true", help="same as --device cpu")
    p.add_argument("--part", default=None, help=argparse.SUPPRESS)  # one part, in this process
    args = p.parse_args(argv)
    if args.dry_run:
        args.device = "cpu"
    unknown = sorted(set(args.parts.split(",")) - set(PARTS))
    if unknown:
        p.error(f"unknown part(s) {unknown}; parts: {list(PARTS)}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    out = Path(args.out or Path(os.environ.get("OUT", "out")) / "gpu-validation")
    out.mkdir(parents=True, exist_ok=True)
    s = settings(args)
    if args.part is not None:
        run_part(args.part, out, s)
        return 0
    start = time.monotonic()
    log: list[dict[str, Any]] = []
    parts = args.parts.split(",")
    share = sum(PARTS[p] for p in parts)
    for part in parts:
        left = args.budget_s - (time.monotonic() - start)
        budget = min(args.budget_s * PARTS[part] / share, left) if len(parts) > 1 else left
        if budget < 5:
            log.append({"part": part, "status": "skipped", "seconds": 0.0, "note": "the overall budget was spent"})
            write_csv(out / "parts.csv", log)
            continue
        cmd = [sys.executable, str(Path(__file__).resolve()), "--part", part, "--out", str(out), "--device",
               args.device, "--platform", args.platform, "--schedulers", args.schedulers, "--repeats",
               str(args.repeats)]
        t0 = time.monotonic()
        print(f"== {part} (budget {budget:.0f} s)", flush=True)
        with (out / f"{part}.log").open("w") as fh:
            try:
                rc = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, timeout=budget, cwd=ROOT,
                                    env={**os.environ, "PYTHONPATH": os.pathsep.join(
                                        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}).returncode
                status, note = ("ok", "") if rc == 0 else ("failed", f"exit status {rc}: {_last_line(out, part)}")
            except subprocess.TimeoutExpired:
                status, note = "timed out", f"over its budget of {budget:.0f} s (partial results kept)"
        log.append({"part": part, "status": status, "seconds": round(time.monotonic() - t0, 1), "note": note})
        print(f"   {status} in {log[-1]['seconds']} s {note}", flush=True)
        write_csv(out / "parts.csv", log)
        write_csv(out / "summary.csv", targets(out))
        if part == "smoke" and status != "ok":
            print(f"the smoke check failed ({note}); see {out / 'smoke.log'}: the other parts would fail the same way")
            return 1
    rows = targets(out)
    write_csv(out / "summary.csv", rows)
    for r in rows:
        print(f"{r['status'].upper():>12}  {r['target']}: {r['figure']}" + (f" [{r['card']}]" if r["card"] else ""))
    print(f"results in {out} ({time.monotonic() - start:.0f} s)")
    return 0 if all(r["status"] == "ok" for r in log) else 1


def _last_line(out: Path, part: str) -> str:
    lines = [x for x in (out / f"{part}.log").read_text(errors="replace").splitlines() if x.strip()]
    return lines[-1][:200] if lines else "no output"


if __name__ == "__main__":
    sys.exit(main())
