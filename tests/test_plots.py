"""Plots: artists per figure, fixed scheduler colours, paper sizes, saving, and ``hetsim plot``."""

from __future__ import annotations

import itertools
import math

import matplotlib
import numpy as np
import pandas as pd
import pytest
from matplotlib.collections import PolyCollection
from matplotlib.colors import to_hex
from matplotlib.image import AxesImage

from hetsim.experiments.cli.main import main
from hetsim.experiments.plotting import charts as plots
from hetsim.experiments.plotting.charts import (
    COLUMN_WIDTH_IN,
    gantt,
    makespan_bars,
    save_figure,
    scheduler_style,
    sim_vs_measured,
    speedup_lines,
    utilisation_heatmap,
)
from hetsim.sim import Plan, simulate

matplotlib.use("Agg")

MODELS = ["resnet18", "lstm", "bert_base"]
SCHEDS = ["all-gpu", "heft", "cp-greedy", "my-new-scheduler"]
FACTOR = {"all-gpu": 1.0, "heft": 0.5, "cp-greedy": 0.8, "my-new-scheduler": 0.25}
BW = [0.25, 1.0, 4.0]


@pytest.fixture
def results() -> pd.DataFrame:
    """A results table: makespan = (model index + 1) ms * FACTOR[scheduler] / bw**k."""
    rows = []
    for (i, m), s, bw in itertools.product(enumerate(MODELS), SCHEDS, BW):
        k = 0.0 if s == "all-gpu" else 0.5
        rows.append({"point_id": f"{m}{s}{bw}", "status": "ok", "model": m, "scheduler": s,
                     "link_bandwidth": bw, "makespan_s": (i + 1) * 1e-3 * FACTOR[s] / bw**k,
                     "gpu_util": FACTOR[s] * bw / 4, "error": ""})  # fmt: skip
    rows.append({"point_id": "x", "status": "error", "model": "lstm", "scheduler": "heft",
                 "link_bandwidth": 1.0, "makespan_s": math.nan, "error": "boom"})  # fmt: skip
    return pd.DataFrame(rows)


def bar_colours(fig: matplotlib.figure.Figure) -> dict[str, str]:
    ax = fig.axes[0]
    return {c.get_label(): to_hex(c.patches[0].get_facecolor()) for c in ax.containers}


def test_bars_name_every_scheduler_on_the_axis_and_print_values(results: pd.DataFrame) -> None:
    fig = makespan_bars(results, where={"link_bandwidth": 1.0})
    ax = fig.axes[0]
    assert len(ax.patches) == len(MODELS) * len(SCHEDS)
    # the schedulers named under their bars, in the order hetsim compare tabulates them
    # (registry order; unknown names last), each model named above its bars
    ticks = [t.get_text() for t in ax.get_xticklabels()]
    assert ticks == SCHEDS * len(MODELS)
    texts = [t.get_text() for t in ax.texts]
    assert [t for t in texts if t in MODELS] == MODELS
    values = [t.get_text() for t in ax.texts if t.get_text() not in MODELS]
    assert len(values) == len(ax.patches) and "0.5" in values and "1.5" in values  # heft, ms
    assert ax.get_xlabel() == "not shown: heft (lstm: error)"  # the point that failed
    assert ax.get_ylabel() == "makespan (ms)"
    assert fig.get_size_inches()[0] == pytest.approx(COLUMN_WIDTH_IN)
    assert ax.yaxis.label.get_fontsize() == 8
    with pytest.raises(ValueError, match=r"differ in \['link_bandwidth'\]"):
        makespan_bars(results)  # three rows per bar: never averaged silently
    agg = makespan_bars(results, agg="mean", hue_order=["heft", "all-gpu"])
    assert len(agg.axes[0].patches) == len(MODELS) * 2
    assert agg.axes[0].get_ylabel() == "makespan (ms), mean of rows"


def test_bars_with_a_legend_for_panels(results: pd.DataFrame) -> None:
    fig = makespan_bars(results, where={"link_bandwidth": 1.0}, labels="legend", values=False)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == MODELS
    heights = {c.get_label(): [p.get_height() for p in c.patches] for c in ax.containers}
    assert heights["heft"] == pytest.approx([0.5, 1.0, 1.5])  # ms
    assert [t.get_text() for t in fig.legends[0].get_texts()] == SCHEDS
    assert not ax.texts


def _lab(colour: str) -> tuple[float, float, float]:
    """sRGB hex -> CIELAB (D65)."""
    rgb = [int(colour.lstrip("#")[i : i + 2], 16) / 255 for i in (0, 2, 4)]
    r, g, b = (c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb)
    xyz = ((0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047, 0.2126 * r + 0.7152 * g + 0.0722 * b,
           (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883)  # fmt: skip
    fx, fy, fz = (t ** (1 / 3) if t > 0.008856 else 7.787 * t + 16 / 116 for t in xyz)
    return 116 * fy - 16, 500 * (fx - fy), 200 * (fy - fz)


def ciede2000(c1: str, c2: str) -> float:
    """The CIEDE2000 colour difference (Sharma, Wu, Dalal 2005)."""
    (l1, a1, b1), (l2, a2, b2) = _lab(c1), _lab(c2)
    cb = (math.hypot(a1, b1) + math.hypot(a2, b2)) / 2
    g = 0.5 * (1 - math.sqrt(cb**7 / (cb**7 + 25**7)))
    a1p, a2p = (1 + g) * a1, (1 + g) * a2
    c1p, c2p = math.hypot(a1p, b1), math.hypot(a2p, b2)
    h1, h2 = math.degrees(math.atan2(b1, a1p)) % 360, math.degrees(math.atan2(b2, a2p)) % 360
    dh = 0.0 if c1p * c2p == 0 else (h2 - h1 + 180) % 360 - 180
    dhp = 2 * math.sqrt(c1p * c2p) * math.sin(math.radians(dh / 2))
    lb, cbp = (l1 + l2) / 2, (c1p + c2p) / 2
    hb = h1 + h2 if c1p * c2p == 0 else (h1 + h2) / 2 + (180 if abs(h1 - h2) > 180 else 0)
    t = (1 - 0.17 * math.cos(math.radians(hb - 30)) + 0.24 * math.cos(math.radians(2 * hb))
         + 0.32 * math.cos(math.radians(3 * hb + 6)) - 0.20 * math.cos(math.radians(4 * hb - 63)))  # fmt: skip
    sl = 1 + 0.015 * (lb - 50) ** 2 / math.sqrt(20 + (lb - 50) ** 2)
    sc, sh = 1 + 0.045 * cbp, 1 + 0.015 * cbp * t
    rt = -math.sin(math.radians(60 * math.exp(-(((hb - 275) / 25) ** 2)))) * 2 * math.sqrt(cbp**7 / (cbp**7 + 25**7))
    return math.sqrt(((l2 - l1) / sl) ** 2 + ((c2p - c1p) / sc) ** 2 + (dhp / sh) ** 2
                     + rt * ((c2p - c1p) / sc) * (dhp / sh))  # fmt: skip


def test_every_registered_scheduler_has_a_distinct_colour() -> None:
    from hetsim import schedulers

    assert ciede2000("#56B4E9", "#88CCEE") < 10  # cpop and random were this close
    colours = {n: scheduler_style(n)["color"] for n in schedulers.names()}
    closest = min((ciede2000(colours[a], colours[b]), a, b) for a, b in itertools.combinations(colours, 2))
    assert closest[0] >= 19.9, closest


def test_scheduler_colours_fixed_across_figures(results: pd.DataFrame) -> None:
    a = bar_colours(makespan_bars(results, where={"link_bandwidth": 1.0,
                                                  "scheduler": ["heft", "cp-greedy"]}))
    b = bar_colours(makespan_bars(results, where={"link_bandwidth": 1.0,
                                                  "scheduler": ["my-new-scheduler", "heft"]}))
    assert a["heft"] == b["heft"] == scheduler_style("heft")["color"].lower()
    assert b["my-new-scheduler"] == scheduler_style("my-new-scheduler")["color"].lower()
    lines = speedup_lines(results, where={"scheduler": ["all-gpu", "heft"]}, agg="geomean")
    (heft,) = [ln for ln in lines.axes[0].lines if ln.get_label() == "heft"]
    assert to_hex(heft.get_color()) == a["heft"]
    assert heft.get_marker() == scheduler_style("heft")["marker"]


def test_speedup_lines_one_per_scheduler(results: pd.DataFrame) -> None:
    with pytest.raises(ValueError, match=r"differ in \['model'\]"):
        speedup_lines(results, x="link_bandwidth", baseline="all-gpu")  # three models: no silent mean
    fig = speedup_lines(results, x="link_bandwidth", baseline="all-gpu", agg="geomean")
    ax = fig.axes[0]
    lines = {ln.get_label(): ln for ln in ax.lines}
    assert set(lines) == set(SCHEDS)
    np.testing.assert_allclose(lines["all-gpu"].get_ydata(), [1, 1])  # the baseline at 1
    # speedup = bw**0.5 / FACTOR, the same for every model (geometric mean)
    np.testing.assert_allclose(lines["heft"].get_xdata(), BW)
    np.testing.assert_allclose(lines["heft"].get_ydata(), [1.0, 2.0, 4.0])
    assert ax.get_xscale() == "log"  # 0.25..4 spans 16x
    assert ax.get_ylabel() == "speedup over all-gpu\n(geomean over 3 models)"
    one = speedup_lines(results, x="link_bandwidth", where={"model": "lstm"})
    assert one.axes[0].get_ylabel() == "speedup over all-gpu"
    with pytest.raises(ValueError, match="baseline 'all-cpu'"):
        speedup_lines(results, baseline="all-cpu", agg="geomean")


def test_gantt_rows_and_colours(diamond) -> None:  # noqa: ANN001
    plan = Plan({"a": "cpu", "b": "gpu", "c": "cpu", "d": "cpu"})
    res = simulate(diamond, "xeon-p2200", plan, requests=2, record=True)
    fig = gantt(res, color_by="kind")
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == ["cpu", "gpu", "cpu→gpu", "gpu→cpu", "dispatch"]
    bars = [c for c in ax.collections if isinstance(c, PolyCollection)]
    assert len(bars) == 5  # one colour per row when coloured by kind
    n_spans = sum(len(c.get_paths()) for c in bars)
    assert n_spans == sum(1 for r in res.records if r["end"] > r["start"] and r["stream"] >= 0)
    by_req = gantt(res, color_by="request")
    legend = [t.get_text() for t in by_req.legends[0].get_texts()]
    assert legend == ["request 0", "request 1"]
    by_op = gantt(res.to_dataframe(), color_by="op", graph=diamond, time_unit="us")
    assert "relu" in [t.get_text() for t in by_op.legends[0].get_texts()]
    custom = [{"kind": "op", "node": "x", "request": 0, "resource": "gpu", "stream": s,
               "start": 0.0, "end": 1e-3} for s in (0, 1)]  # fmt: skip
    assert [t.get_text() for t in gantt(custom).axes[0].get_yticklabels()] == ["gpu:0", "gpu:1"]


def test_sim_vs_measured_identity_and_bands() -> None:
    rng = np.random.default_rng(0)
    measured = rng.uniform(1e-4, 1e-1, 30)
    df = pd.DataFrame({"measured_s": measured, "sim_s": measured * rng.normal(1, 0.1, 30),
                       "scheduler": ["heft", "all-gpu", "dynamic"] * 10})  # fmt: skip
    fig = sim_vs_measured(df)
    ax = fig.axes[0]
    (identity,) = [ln for ln in ax.lines if ln.get_gid() == "identity"]
    x, y = identity.get_data()
    np.testing.assert_allclose(x, y)
    assert x[0] <= measured.min() * 1e3 and x[-1] >= measured.max() * 1e3
    bands = [c for c in ax.collections if c.get_label().startswith("±")]
    assert sorted(b.get_label() for b in bands) == ["±10%", "±20%"]
    assert len(ax.collections) - len(bands) == 3  # one scatter per scheduler
    assert ax.get_xscale() == ax.get_yscale() == "log"
    assert any("MAPE" in t.get_text() for t in ax.texts)


def test_utilisation_heatmap_cells(results: pd.DataFrame) -> None:
    fig = utilisation_heatmap(results, x="link_bandwidth", y="scheduler", value="gpu_util",
                              where={"model": "lstm"})  # fmt: skip
    ax = fig.axes[0]
    (image,) = [im for im in ax.get_images() if isinstance(im, AxesImage)]
    grid = image.get_array()
    assert grid.shape == (len(SCHEDS), len(BW))
    assert grid[1, 2] == pytest.approx(FACTOR["heft"] * 4.0 / 4)
    assert len(fig.axes) == 2  # and the colour bar
    assert len(ax.texts) == grid.size


def test_save_figure_writes_png_and_pdf(results: pd.DataFrame, tmp_path) -> None:  # noqa: ANN001
    fig = makespan_bars(results, where={"link_bandwidth": 1.0})
    paths = save_figure(fig, tmp_path / "figs" / "bars.png")
    assert [p.name for p in paths] == ["bars.png", "bars.pdf"]
    assert paths[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    pdf = paths[1].read_bytes()
    assert pdf[:5] == b"%PDF-" and b"/FontFile2" in pdf  # TrueType fonts embedded
    import matplotlib.pyplot as plt

    assert plt.get_fignums() == []  # figures are not kept by pyplot


def test_figures_do_not_touch_global_rcparams(results: pd.DataFrame) -> None:
    before = dict(matplotlib.rcParams)
    makespan_bars(results, where={"link_bandwidth": 1.0})
    assert dict(matplotlib.rcParams) == before
    assert plots.PAPER_RC["pdf.fonttype"] == 42


def test_cli_plot(results: pd.DataFrame, tmp_path, diamond, capsys) -> None:  # noqa: ANN001
    csv = tmp_path / "results.csv"
    results.to_csv(csv, index=False)
    assert main(["plot", str(csv), "--kind", "bars", "--where", "link_bandwidth=1"]) == 0
    assert (tmp_path / "figures" / "bars.pdf").exists()
    assert main(["plot", str(tmp_path), "--kind", "speedup", "--out", str(tmp_path / "s")]) == 2
    assert "differ in ['model']" in capsys.readouterr().err  # no silent mean over the models
    assert main(["plot", str(tmp_path), "--kind", "speedup", "--agg", "geomean", "--out", str(tmp_path / "s")]) == 0
    assert (tmp_path / "s.png").exists()
    assert main(["plot", str(csv), "--kind", "heatmap", "--where", "model=lstm,resnet18",
                 "--agg", "mean"]) == 0  # fmt: skip
    res = simulate(diamond, "xeon-p2200", Plan({"a": "cpu", "b": "gpu", "c": "cpu", "d": "gpu"}),
                   record=True)  # fmt: skip
    trace = res.to_chrome_trace(tmp_path / "trace.json")
    assert main(["plot", str(trace), "--kind", "gantt", "--out", str(tmp_path / "g")]) == 0
    assert (tmp_path / "g.pdf").exists()
    assert main(["plot", str(csv), "--kind", "bars"]) == 2
    assert "differ in ['link_bandwidth']" in capsys.readouterr().err


def test_figure_files_carry_no_creation_date(results: pd.DataFrame, tmp_path) -> None:  # noqa: ANN001
    """Re-running a documented command rewrote tracked PDFs whose only change was the
    creation date: the same figure must give the same bytes (save_figure, and the
    cost-model scatter that ``hetsim costmodel eval`` writes)."""
    import time

    from hetsim.costmodel.learned.evaluate import plot_eval

    points = pd.DataFrame({"predictor": "xgboost", "held_out": "m", "device": "cpu", "op": "conv2d",
                           "signature": ["a", "b", "c"], "measured_s": [1e-5, 2e-5, 4e-5],
                           "predicted_s": [1.1e-5, 1.9e-5, 4.4e-5], "ape_pct": [10.0, 5.0, 10.0]})  # fmt: skip
    files = []
    for i in range(2):
        if i:
            time.sleep(1.1)  # PDF dates have one-second resolution
        files.append([p.read_bytes() for p in save_figure(makespan_bars(results, where={"link_bandwidth": 1.0}),
                                                          tmp_path / str(i) / "bars")])  # fmt: skip
        files[-1] += [p.read_bytes() for p in plot_eval(points, tmp_path / str(i))]
    assert files[0] == files[1]
    assert not any(b"/CreationDate" in f for f in files[0])
