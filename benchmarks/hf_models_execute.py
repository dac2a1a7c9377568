"""Every architecture of the real-model test set executed on cpu2, outputs checked.

``tests/test_hf_models.py`` executes a subset in CI (to keep its time down); this
script runs all of ``tests/hf_architectures.py`` (Hugging Face Transformers models
built from small configs, random weights, no downloads): each is imported with
``hetsim.from_torch`` at the granularity asked for, planned by HEFT on ``cpu2`` (two
single-thread workers) and executed with the torch backend (op granularity; a model
whose graph holds an operator the torch backend leaves to TVM falls back to the tvm
backend) or the tvm backend (fused granularity). Each run's outputs are checked
against the module's own forward, node by node. Prints one row per model (nodes,
workers used, backend, median makespan, output error in units of the tolerance, or
the error) and the count that ran.

    python benchmarks/hf_models_execute.py [--granularity op|fused] [--only gpt2,t5]

Needs the ``dev`` extra (``transformers``).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_one(name: str, granularity: str) -> dict[str, object]:
    """Import, plan and execute one architecture; the row printed for it."""
    import hf_architectures as hf

    import hetsim
    from hetsim.runtime.backends import BackendError

    module, inputs = hf.build(name)
    t0 = time.perf_counter()
    g = hetsim.from_torch(module, inputs, name=name, granularity=granularity)
    platform = hetsim.Platform.preset("cpu2")
    plan = hetsim.get_scheduler("heft").schedule(g, platform, hetsim.Roofline())
    backend = "torch" if granularity == "op" else "tvm"
    try:
        run = hetsim.execute(g, plan, platform, warmup=1, repeats=3, backend=backend)
    except BackendError:
        if backend == "tvm":
            raise
        backend = "tvm"  # an operator left to TVM (torch_ops_tensor.TVM_ONLY)
        run = hetsim.execute(g, plan, platform, warmup=1, repeats=3, backend=backend)
    return {
        "nodes": len(g),
        "workers": len(set(plan.placement.values())),
        "backend": backend,
        "median_ms": 1e3 * run.median,
        "error": run.check["error"],
        "node_error": run.check["node_error"],
        "reference": run.check["reference"],
        "wall_s": time.perf_counter() - t0,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--granularity", choices=("op", "fused"), default="op")
    ap.add_argument("--only", default="", help="comma-separated architectures (default: all)")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT / "tests"))
    import hf_architectures as hf

    names = [n for n in args.only.split(",") if n] or sorted(hf.ARCHITECTURES)
    unknown = sorted(set(names) - set(hf.ARCHITECTURES))
    if unknown:
        ap.error(f"unknown architecture(s) {', '.join(unknown)}; known: {', '.join(sorted(hf.ARCHITECTURES))}")
    ok = 0
    print(f"{'model':16} {'nodes':>6} {'workers':>7} {'backend':>7} {'median_ms':>10} "
          f"{'error':>6} {'node_err':>8} {'wall_s':>6}  (errors in units of the tolerance)")
    for name in names:
        try:
            r = run_one(name, args.granularity)
        except Exception as e:  # noqa: BLE001 - a failing model is a row of the table
            print(f"{name:16} FAILED: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
            continue
        checked = r["reference"] == "torch module" and r["error"] <= 1.0 and r["node_error"] <= 1.0
        ok += checked
        print(f"{name:16} {r['nodes']:6d} {r['workers']:7d} {r['backend']:>7} {r['median_ms']:10.2f} "
              f"{r['error']:6.3f} {r['node_error']:8.3f} {r['wall_s']:6.1f}" + ("" if checked else "  OUTPUT MISMATCH"))
    print(f"{ok}/{len(names)} executed on cpu2 at {args.granularity} granularity with outputs checked")
    return 0 if ok == len(names) else 1


if __name__ == "__main__":
    sys.exit(main())
