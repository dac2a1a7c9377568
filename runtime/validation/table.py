"""The table of a validation: ranks, the measured band, errors and their summary.

:func:`ranking` gives Kendall's tau (with its p-value) between the simulated and
the measured ranking of each model's plans; :func:`with_ranks` completes a
:func:`runtime.validation.validate.validate_all` table; :func:`summary` condenses it into the
figures a validation is judged by (share of plans whose simulation falls inside
the measured p10-p90 band, mean and max |error|, tau per model) and
:func:`format_table` prints it.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["BASELINE", "NEAR_PCT", "VALIDATION_COLUMNS", "format_table", "in_band", "ranking", "summary", "with_ranks"]

#: columns of the :func:`validate_all` table, in order
VALIDATION_COLUMNS = [
    "model", "scheduler", "status", "simulated_s", "measured_s", "error_pct", "measured_p10_s",
    "measured_p90_s", "spread_pct", "in_band", "relative_error_pct", "simulated_rank", "measured_rank",
    "kendall_tau", "kendall_p", "ops", "requests", "platform", "backend", "launch", "statistic", "cost", "note",
]
#: the plan :data:`VALIDATION_COLUMNS` ``relative_error_pct`` is relative to
BASELINE = "all-cpu"
#: a plan outside its measured band still counts as predicted within this |error| (%)
NEAR_PCT = 5.0


def in_band(simulated_s: float, p10_s: float, p90_s: float) -> bool:
    """Whether a simulated makespan falls inside the measured p10-p90 band."""
    return bool(p10_s <= simulated_s <= p90_s)


def ranking(table: pd.DataFrame) -> pd.DataFrame:
    """Per model: Kendall's tau between the simulated and measured makespans of its ok
    schedulers, its p-value, how many there are, the best by each, and the fraction
    of scheduler pairs that the measurements resolve (makespans further apart than
    the p10-p90 spreads) which the simulator orders the same way."""
    import pandas as pd
    from scipy.stats import kendalltau

    out = []
    if "status" not in table:
        return pd.DataFrame(columns=["model", "kendall_tau", "kendall_p", "n", "best_simulated",
                                     "best_measured", "resolved_pairs", "resolved_agree"])
    for model, grp in table[table["status"] == "ok"].groupby("model", sort=False):
        sim, meas = grp["simulated_s"].to_numpy(float), grp["measured_s"].to_numpy(float)
        lo, hi = grp["measured_p10_s"].to_numpy(float), grp["measured_p90_s"].to_numpy(float)
        tau, p = (kendalltau(sim, meas) if len(grp) >= 2 else (math.nan, math.nan))
        resolved = agree = 0
        for i in range(len(grp)):
            for j in range(i + 1, len(grp)):
                if hi[i] < lo[j] or hi[j] < lo[i]:
                    resolved += 1
                    agree += (sim[i] - sim[j]) * (meas[i] - meas[j]) > 0
        names = grp["scheduler"].to_numpy()
        out.append({"model": model, "kendall_tau": float(tau), "kendall_p": float(p), "n": len(grp),
                    "best_simulated": names[int(np.argmin(sim))], "best_measured": names[int(np.argmin(meas))],
                    "resolved_pairs": resolved, "resolved_agree": agree / resolved if resolved else math.nan})
    return pd.DataFrame(out)


def with_ranks(table: pd.DataFrame, rank: pd.DataFrame) -> pd.DataFrame:
    import pandas as pd

    table = table.copy()
    for col in VALIDATION_COLUMNS:
        if col not in table:
            table[col] = "" if col in ("note", "status", "launch", "statistic") else (None if col == "in_band" else math.nan)
    ok = table["status"] == "ok"
    for src, dst in (("simulated_s", "simulated_rank"), ("measured_s", "measured_rank")):
        table.loc[ok, dst] = table[ok].groupby("model")[src].rank(method="min")
    table["in_band"] = table["in_band"].astype(object)
    table.loc[ok, "in_band"] = [in_band(s, lo, hi) for s, lo, hi in zip(
        table.loc[ok, "simulated_s"], table.loc[ok, "measured_p10_s"], table.loc[ok, "measured_p90_s"])]
    base = table[ok & (table["scheduler"] == BASELINE)].set_index("model")
    if len(base):
        sim_ratio = table["simulated_s"] / table["model"].map(base["simulated_s"])
        run_ratio = table["measured_s"] / table["model"].map(base["measured_s"])
        table.loc[ok, "relative_error_pct"] = (100.0 * (sim_ratio - run_ratio) / run_ratio)[ok]
    taus = rank.set_index("model") if len(rank) else pd.DataFrame(columns=["kendall_tau", "kendall_p"])
    table["kendall_tau"] = table["model"].map(taus["kendall_tau"]) if len(rank) else math.nan
    table["kendall_p"] = table["model"].map(taus["kendall_p"]) if len(rank) else math.nan
    extra = [c for c in table.columns if c not in VALIDATION_COLUMNS]
    return table[VALIDATION_COLUMNS + extra].reset_index(drop=True)


def summary(table: pd.DataFrame) -> dict[str, Any]:
    """The figures a validation is judged by, over the ok plans of a :func:`with_ranks`
    table.

    Returns
    -------
    dict
        ``plans``; ``in_band`` (plans whose simulated makespan falls inside the
        measured p10-p90 band), ``in_band_or_near`` (inside, or within
        :data:`NEAR_PCT` %), ``within_10pct``; ``mean_abs_error_pct``,
        ``max_abs_error_pct``; ``mean_spread_pct`` (the measured p10-p90 width
        over the median: the machine's noise in this run); ``kendall``: per model
        ``(tau, p)``.
    """
    ok = table[table["status"] == "ok"]
    err = ok["error_pct"].abs()
    band = ok["in_band"].astype(bool)
    rank = table.attrs.get("ranking")
    kendall = ({r.model: (float(r.kendall_tau), float(r.kendall_p)) for r in rank.itertuples(index=False)}
               if rank is not None else {})
    return {"plans": len(ok), "in_band": int(band.sum()), "in_band_or_near": int((band | (err <= NEAR_PCT)).sum()),
            "within_10pct": int((err <= 10).sum()),
            "mean_abs_error_pct": float(err.mean()) if len(ok) else math.nan,
            "max_abs_error_pct": float(err.max()) if len(ok) else math.nan,
            "mean_spread_pct": float(ok["spread_pct"].mean()) if len(ok) else math.nan, "kendall": kendall}


def format_table(table: pd.DataFrame) -> str:
    """The :func:`validate_all` table as aligned text (ms and %; ``spread``: the measured
    p10-p90 width over the median, the run-to-run noise; ``band``: whether the
    simulation falls inside the measured p10-p90), the ranking and :func:`summary`."""
    lines = [f"{'model':<14}{'scheduler':<20}{'simulated ms':>13}{'measured ms':>13}{'p10-p90 ms':>17}"
             f"{'spread':>8}{'band':>6}{'error':>9}{'rel.err':>9}  ranks s/m"]
    for r in table.itertuples(index=False):
        if r.status != "ok":
            lines.append(f"{r.model:<14}{r.scheduler:<20}({r.status}: {str(r.note)[:90]})")
            continue
        lines.append(
            f"{r.model:<14}{r.scheduler:<20}{r.simulated_s * 1e3:>13.3f}{r.measured_s * 1e3:>13.3f}"
            f"{f'{r.measured_p10_s * 1e3:.2f}-{r.measured_p90_s * 1e3:.2f}':>17}{r.spread_pct:>7.1f}%"
            f"{'in' if r.in_band else 'out':>6}{r.error_pct:>+8.1f}%"
            f"{_pct(r.relative_error_pct):>9}  {int(r.simulated_rank)}/{int(r.measured_rank)}"
            + (f"  ({r.note})" if isinstance(r.note, str) and r.note else "")
        )
    rank = table.attrs.get("ranking")
    if rank is not None and len(rank):
        lines.append("")
        for r in rank.itertuples(index=False):
            res = (f", resolved pairs ordered alike {r.resolved_agree:.0%} of {r.resolved_pairs}"
                   if r.resolved_pairs else "")
            lines.append(f"{r.model}: Kendall tau {r.kendall_tau:+.3f} (p={r.kendall_p:.3g}, {r.n} schedulers); "
                         f"best simulated {r.best_simulated}, best measured {r.best_measured}{res}")
    ok = table[table["status"] == "ok"]
    if len(ok):
        s = summary(table)
        n = s["plans"]
        lines.append(f"|error|: mean {s['mean_abs_error_pct']:.1f}%, max {s['max_abs_error_pct']:.1f}% over {n} "
                     f"plans; within 10%: {s['within_10pct']}/{n}")
        lines.append(f"inside the measured p10-p90 band: {s['in_band']}/{n}; inside or within {NEAR_PCT:g}%: "
                     f"{s['in_band_or_near']}/{n} (mean band width {s['mean_spread_pct']:.1f}% of the median)")
        stats = sorted({str(x) for x in ok.get("statistic", []) if x})
        if stats:
            lines.append(f"measured ms: the {' or '.join(stats)} of each plan's timed runs, the statistic "
                         f"its simulation's inputs add up to")
        rel = ok["relative_error_pct"].dropna().abs()
        if len(rel):
            lines.append(f"|rel.err| (vs each model's {BASELINE} plan): mean {rel.mean():.1f}%, "
                         f"max {rel.max():.1f}%; within 10%: {int((rel <= 10).sum())}/{len(rel)}")
    return "\n".join(lines)


def _pct(v: float) -> str:
    return "-" if v != v else f"{v:+.1f}%"
