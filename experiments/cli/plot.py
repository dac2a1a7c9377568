"""``hetsim plot``: paper figures (PNG + PDF) from a results table or a trace."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from hetsim.experiments.cli.common import output_path, positive_float
from hetsim.experiments.cli.main import CLIError
from hetsim.experiments.plotting import AGGREGATES, MAX_FIGURE_IN

KINDS = ("bars", "speedup", "gantt", "scatter", "heatmap")


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "plot",
        help="draw a figure (PNG + PDF) from a sweep's results or a simulation trace",
        description="bars: a metric per scheduler grouped by model; speedup: speedup over a "
        "baseline against a swept column; heatmap: a metric over two columns; scatter: "
        "simulated vs measured; gantt: one run, from a Chrome trace JSON or records "
        "CSV, or from results.csv with --point ID (the point is simulated again).",
    )
    p.add_argument("results", metavar="RESULTS",
                   help="results.csv / .parquet, the sweep's output folder, or (gantt) a trace")
    p.add_argument("--kind", choices=KINDS, required=True, help="figure kind")
    p.add_argument("--out", type=output_path, metavar="PATH",
                   help="output path without extension (default <results folder>/figures/<kind>)")
    p.add_argument("--x", metavar="COL",
                   help="x column (speedup, heatmap; default link_bandwidth)")
    p.add_argument("--y", metavar="COL", help="heatmap row column (default scheduler)")
    p.add_argument("--metric", metavar="COL",
                   help="value column (default makespan_s; heatmap gpu_util; scatter sim_s)")
    p.add_argument("--measured", metavar="COL", default="measured_s",
                   help="scatter: measured column (default measured_s)")
    p.add_argument("--group", metavar="COL", default="model", help="bars: group column")
    p.add_argument("--hue", metavar="COL", default="scheduler",
                   help="one colour per value of this column (default scheduler)")
    p.add_argument("--baseline", default="all-gpu", help="speedup: baseline (default all-gpu)")
    p.add_argument("--where", action="append", metavar="COL=VALUE[,VALUE...]",
                   help="keep only these rows (repeatable), e.g. --where link_bandwidth=1")
    p.add_argument("--agg", metavar="HOW", choices=AGGREGATES,
                   help="combine several rows per bar, point or cell: mean, median, min, max, geomean "
                   "(default: none; a figure never averages silently, the axis says what it combined)")
    p.add_argument("--log", action="store_true", help="bars: logarithmic y axis")
    p.add_argument("--point", metavar="ID", help="gantt: point id (or unique prefix) in RESULTS")
    p.add_argument("--color-by", choices=("kind", "request", "op"), default="kind",
                   help="gantt: colour by record kind, request or operator type")
    p.add_argument("--title", help="figure title")
    p.add_argument("--width", type=figure_inches, default=3.5,
                   help=f"width in inches, at most {MAX_FIGURE_IN:g} (default 3.5)")
    p.add_argument("--height", type=figure_inches, help=f"height in inches, at most {MAX_FIGURE_IN:g}")
    return p


def figure_inches(text: str) -> float:
    """argparse type of ``--width``/``--height``: a number of inches > 0 and at most
    :data:`~experiments.plotting.charts.MAX_FIGURE_IN`."""
    value = positive_float(text)
    if value > MAX_FIGURE_IN:
        raise argparse.ArgumentTypeError(f"expected at most {MAX_FIGURE_IN:g} inches, got {text!r}")
    return value


def parse_where(items: list[str] | None) -> dict[str, Any]:
    """``["link_bandwidth=1", "scheduler=heft,all-gpu"]`` -> ``{..: 1, ..: ["heft", "all-gpu"]}``."""
    out: dict[str, Any] = {}
    for item in items or []:
        if "=" not in item:
            raise ValueError(f"--where {item!r} must look like COLUMN=VALUE[,VALUE...]")
        col, raw = item.split("=", 1)
        values = [_value(v) for v in raw.split(",")]
        out[col.strip()] = values[0] if len(values) == 1 else values
    return out


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text.strip()


def trace_records(path: Path) -> list[dict[str, Any]]:
    """The simulation records of a Chrome trace JSON (:mod:`sim.trace`): one per complete
    (``"X"``) event; ``ValueError`` naming the file and the event for a malformed one."""
    try:
        data = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as e:
        raise ValueError(f"{path}: not a trace JSON ({str(e).splitlines()[0][:200]})") from None
    events = data.get("traceEvents") if isinstance(data, dict) else data
    if not isinstance(events, list) or not all(isinstance(e, dict) for e in events):
        raise ValueError(f"{path}: a trace is a list of event objects, or {{'traceEvents': [...]}}")
    names: dict[Any, str] = {}
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "process_name":
            names[e.get("pid")] = str((e.get("args") or {}).get("name", e.get("pid")))
    out = []
    for i, e in enumerate(events):
        if e.get("ph") != "X":
            continue
        args = e.get("args") if isinstance(e.get("args"), dict) else {}
        ts, dur = e.get("ts"), e.get("dur")
        if not all(isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in (ts, dur)):
            raise ValueError(f"{path}: event {i} needs numbers 'ts' and 'dur', got {ts!r:.30} and {dur!r:.30}")
        if "pid" not in e or "name" not in e:
            raise ValueError(f"{path}: event {i} needs 'pid' and 'name'")
        out.append({"kind": e.get("cat", "op"), "name": str(e["name"]), "node": args.get("node"),
                    "request": args.get("request", 0), "resource": names.get(e["pid"], str(e["pid"])),
                    "stream": e.get("tid", 0), "start": ts / 1e6, "end": (ts + dur) / 1e6})  # fmt: skip
    return out


def load_records(path: Path) -> list[dict[str, Any]]:
    """Simulation records from a Chrome trace JSON (:mod:`sim.trace`) or a records CSV."""
    if path.suffix == ".json":
        return trace_records(path)
    import pandas as pd

    df = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)
    return df.to_dict("records")


def run(args: argparse.Namespace) -> int:
    import matplotlib

    matplotlib.use("Agg")
    # lazy: a command's module loads only what its parser needs (hetsim --help)
    from hetsim.experiments.plotting import charts as plots
    from hetsim.experiments.sweep import load_results

    src = Path(args.results)
    if not src.exists():
        raise CLIError(f"{src}: no such file or folder")
    folder = src if src.is_dir() else src.parent
    out = Path(args.out) if args.out else folder / "figures" / args.kind
    size = {"width": args.width, **({"height": args.height} if args.height else {})}
    try:
        where = parse_where(args.where)
        if args.kind == "gantt":
            fig = _gantt(src, args, size)
        else:
            df = load_results(src)
            common = {"where": where, "title": args.title, **size}
            if args.kind == "bars":
                fig = plots.makespan_bars(df, metric=args.metric or "makespan_s", group=args.group,
                                          hue=args.hue, agg=args.agg, log=args.log, **common)
            elif args.kind == "speedup":
                fig = plots.speedup_lines(df, x=args.x or "link_bandwidth", baseline=args.baseline,
                                          metric=args.metric or "makespan_s", hue=args.hue,
                                          agg=args.agg, **common)
            elif args.kind == "heatmap":
                fig = plots.utilisation_heatmap(df, x=args.x or "link_bandwidth",
                                                y=args.y or "scheduler",
                                                value=args.metric or "gpu_util", agg=args.agg,
                                                **common)
            else:
                fig = plots.sim_vs_measured(df, sim=args.metric or "sim_s", measured=args.measured,
                                            hue=args.hue or None, **common)  # fmt: skip
    except (ValueError, KeyError) as e:
        text = str(e) if isinstance(e, ValueError) else f"no column {e}"
        raise CLIError(text if str(src) in text else f"{src}: {text}") from None
    for path in plots.save_figure(fig, out):
        print(f"wrote {path}")
    return 0


def _gantt(src: Path, args: argparse.Namespace, size: dict[str, float]) -> Any:
    # lazy: a command's module loads only what its parser needs (hetsim --help)
    from hetsim.experiments.plotting import charts as plots
    from hetsim.experiments.sweep import Point, load_results, simulate_point

    graph = None
    if args.point:
        df = load_results(src)
        rows = df[df["point_id"].astype(str).str.startswith(args.point)]
        if len(rows) != 1:
            raise ValueError(f"--point {args.point!r} matches {len(rows)} rows of {src}")
        point = Point.from_row(rows.iloc[0])
        cache = src / ".cache" if src.is_dir() else src.parent / ".cache"
        cache_dir = cache if cache.is_dir() else None
        run, _ = simulate_point(point, record=True, cache_dir=cache_dir)
        records: Any = run.result
        title = args.title or f"{point.model}: {point.scheduler} on {point.platform}"
        if args.color_by == "op":
            graph = run.graph  # the graph the plan ran (tensor-split's, split)
    else:
        if src.is_dir() or src.name.startswith("results"):
            raise ValueError("gantt needs a trace JSON / records CSV, or --point ID with results")
        if args.color_by == "op":
            raise ValueError("--color-by op needs --point (the graph of the run)")
        records, title = load_records(src), args.title
    return plots.gantt(records, color_by=args.color_by, graph=graph, title=title, **size)
