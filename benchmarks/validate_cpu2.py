"""Simulated vs measured makespan on cpu2 (two single-thread workers of this machine).

Runs every scheduler that applies on googlenet and resnet18, simulates each plan with
the committed in-context CPU profile, executes it with the torch backend, and prints
the error table, the share of plans within 10 % and the Kendall tau of the ranking.

    python benchmarks/validate_cpu2.py [--profile profiles/cpu2-torch-ctx] [--repeats 10]

Run it on a quiet machine (load average < 1): a shared 2-core VM drifts by +-15 % in
speed over minutes. ``relative_error_pct`` (error relative to each model's all-cpu
plan) cancels a uniform drift.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default=str(ROOT / "profiles" / "cpu2-torch-ctx"))
    ap.add_argument("--models", default="googlenet,resnet18")
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--out", default=None, help="folder for validation.csv and ranking.csv")
    args = ap.parse_args(argv)
    from runtime.validate import format_table, validate_all

    print(f"load average: {os.getloadavg()[0]:.2f}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        table = validate_all(args.models.split(","), "cpu2", None, args.profile, warmup=3,
                             repeats=args.repeats, out=args.out)
    print(format_table(table))
    ok = table[table["status"] == "ok"]
    within = int((ok["error_pct"].abs() <= 10.0).sum())
    print(f"\nplans within 10 %: {within} of {len(ok)}; mean |error| {ok['error_pct'].abs().mean():.1f} %, "
          f"max {ok['error_pct'].abs().max():.1f} %")
    if "relative_error_pct" in ok:
        rel = int((ok["relative_error_pct"].abs() <= 10.0).sum())
        print(f"plans within 10 % relative to all-cpu: {rel} of {len(ok)}")
    rank = table.attrs.get("ranking")
    if rank is not None:
        print(rank.to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
