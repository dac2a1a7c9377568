"""Handoff between the two workers of cpu2: how long an op waits for an input that the
other worker produced, beyond what an input from its own worker costs.

Executes a plan that alternates neighbours between the workers (round-robin) and
prints the gap statistics of :func:`runtime.validation.validate.measure_handoff`; the median
is what ``handoff_s`` of ``costmodel/presets/cpu2.toml`` should hold on this machine. With
``--dynamic`` it also runs the ``dynamic`` scheduler's policy, whose per-op
decision shows as a longer gap after every input: the dynamic plan's same-worker
gap less the static plan's is what ``decision_s`` of the preset should hold. With
``--bandwidth`` it measures how much longer an op runs when its input comes from the
other worker (:func:`runtime.validation.validate.measure_read_bandwidth`, one-worker and
round-robin plans in alternating rounds) on resnet18, googlenet and squeezenet1_1:
the median is what ``handoff_bandwidth_bytes_per_s`` of the preset should hold.

    python benchmarks/handoff_cpu2.py [--model googlenet] [--repeats 10] [--dynamic] [--bandwidth]

Run it on a quiet machine (load average < 1).
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="googlenet")
    ap.add_argument("--scheduler", default="round-robin")
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--dynamic", action="store_true", help="also measure the dynamic policy's gaps")
    ap.add_argument("--bandwidth", action="store_true",
                    help="also measure the rate of reading the other worker's outputs")
    args = ap.parse_args(argv)
    import numpy as np

    from hetsim import schedulers
    from hetsim.costmodel.platform import Platform
    from hetsim.costmodel.roofline import Roofline
    from hetsim.graphs import zoo
    from hetsim.runtime.validation.validate import measure_handoff

    print(f"load average: {os.getloadavg()[0]:.2f}")
    platform = Platform.load("cpu2")
    graph = zoo.load(args.model, cache=True)
    names = [args.scheduler] + (["dynamic"] if args.dynamic else [])
    same: dict[str, float] = {}
    for name in names:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            run = schedulers.get(name).run(graph, platform, Roofline(), simulate=False)
            out = measure_handoff(run.graph, run.plan, platform, repeats=args.repeats)
        gaps = out["gaps"]
        print(f"\n{args.model} / {name}: {out['n_cross']} waits on the other worker, {out['n_same']} on the same")
        for label, sel in (("other worker", gaps["cross"]), ("same worker", ~gaps["cross"])):
            g = gaps[sel]["gap_s"].to_numpy() * 1e6
            if len(g):
                p10, p50, p90 = np.percentile(g, [10, 50, 90])
                print(f"  gap after an input from the {label:12s}: median {p50:6.1f} us  (p10 {p10:5.1f}, p90 {p90:6.1f})")
        print(f"  handoff_s = {out['handoff_s'] * 1e6:.1f} us")
        same[name] = out["same_s"]
    if args.dynamic:
        print(f"\ndecision_s = {(same['dynamic'] - same[args.scheduler]) * 1e6:.1f} us "
              f"(dynamic's same-worker gap less {args.scheduler}'s)")
    if args.bandwidth:
        from hetsim.runtime.validation.validate import measure_read_bandwidth

        per_byte = []
        print("\nreading the other worker's outputs (one-worker vs round-robin busy time, 5 rounds):")
        for name in ("resnet18", "googlenet", "squeezenet1_1"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out = measure_read_bandwidth(zoo.load(name, cache=True), platform)
            extra = ", ".join(f"{e * 1e3:+.1f}" for e in out["extra_s"])
            print(f"  {name:14s} {out['cross_bytes'] / 1e6:6.1f} MB cross; extra busy per round (ms): {extra}; "
                  f"{out['s_per_byte'] * 1e9:.3f} ns/B")
            per_byte.append(out["s_per_byte"])
        med = float(np.median(per_byte))
        print(f"  handoff_bandwidth_bytes_per_s = {1 / med:.3g} (median {med * 1e9:.3f} ns/B)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
