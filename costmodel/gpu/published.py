"""Whole-model GPU latencies that were published, against what the presets predict.

``costmodel/data/neusight-e2e/latency.csv`` holds the FP32 inference latencies of
BERT-large (512 tokens, batch 8 and 16) and GPT-2-large (1024 tokens, batch 4 and 8)
that NeuSight published for seven NVIDIA GPUs (MIT licence; ``NOTICE`` says what was
kept). Each GPU has a preset (``t4-server``, ``h100-server``...).

A model is priced as hetsim prices any graph: its all-GPU busy time, the sum of
``op_time`` over its nodes on the preset's GPU, by a cost model (``"default"``: the
preset's own source, a measured profile; ``"roofline"``; ``"cross-gpu"``). The graph
is the zoo's encoder (:class:`graphs.zoo.transformer.Bert`, ``GPT2``) at the
published configuration, imported with one and with two layers: layers are identical,
so ``t(L) = t(1) + (L - 1) (t(2) - t(1))`` is the ``L``-layer model's busy time
without importing 24 or 36 layers. The published latencies are forward passes
bracketed by CUDA events; at these sizes the kernels keep the GPU busy, so the busy
time is what they measure.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from importlib import resources
from typing import TYPE_CHECKING, Any

import pandas as pd

from hetsim.costmodel import as_cost_model
from hetsim.costmodel.base import CostModelError
from hetsim.costmodel.platform import Platform
from hetsim.graphs import from_torch

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.graphs.graph import Graph

__all__ = ["CONFIGS", "PUBLISHED_COLUMNS", "ZOO_COLUMNS", "busy_time", "format_published", "layer_graphs",
           "predict_published", "predict_zoo", "published_latencies"]

#: the published models as the zoo's classes build them (Hugging Face configs of NeuSight)
CONFIGS: dict[str, dict[str, Any]] = {
    "bert_large": {"cls": "Bert", "d": 1024, "heads": 16, "ffn": 4096},
    "gpt2_large": {"cls": "GPT2", "d": 1280, "heads": 20},
}
#: columns of :func:`predict_zoo`
ZOO_COLUMNS = ["gpu", "preset", "model", "batch", "cost", "measured_s", "predicted_s", "error_pct"]
#: columns of :func:`predict_published`
PUBLISHED_COLUMNS = ["gpu", "preset", "model", "batch", "seq_len", "layers", "cost", "measured_s", "predicted_s",
                     "error_pct"]


def published_latencies() -> pd.DataFrame:
    """The published latencies (``gpu, preset, model, batch, seq_len, layers, latency_s, source``)."""
    path = resources.files("hetsim.costmodel") / "data" / "neusight-e2e" / "latency.csv"
    with resources.as_file(path) as p:
        return pd.read_csv(p)


def layer_graphs(model: str, batch: int, seq_len: int) -> tuple[Graph, Graph]:
    """``model`` (a :data:`CONFIGS` key) imported with one and with two layers."""
    import torch

    # lazy: at the top it would load torch with this module
    from hetsim.graphs.zoo import transformer

    if model not in CONFIGS:
        raise CostModelError(f"unknown published model {model!r}; known: {sorted(CONFIGS)}")
    cfg = dict(CONFIGS[model])
    cls = getattr(transformer, cfg.pop("cls"))
    out = []
    for layers in (1, 2):
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            module = cls(seq_len, layers=layers, **cfg).eval()
        ids = torch.ones(batch, seq_len, dtype=torch.int64)
        out.append(from_torch(module, (ids,), name=f"{model}-L{layers}-b{batch}"))
    return out[0], out[1]


def busy_time(graph: Graph, cost: Any, device: Any) -> float:
    """Sum of ``cost.op_time`` over ``graph``'s nodes on ``device`` (seconds)."""
    return float(sum(cost.op_time(graph, n, device) for n in graph))


def predict_published(costs: Sequence[str] = ("default", "roofline"), *, presets: Sequence[str] | None = None,
                      rows: pd.DataFrame | None = None) -> pd.DataFrame:
    """Predicted and published latency of every published row (columns
    :data:`PUBLISHED_COLUMNS`), per cost model of ``costs`` (specs of
    :func:`costmodel.as_cost_model`, ``"default"``: the preset's own sources).

    ``presets`` keeps the rows of those presets; ``rows`` replaces the published table.
    """
    table = published_latencies() if rows is None else rows
    if presets is not None:
        table = table[table["preset"].isin(list(presets))]
    graphs: dict[tuple[str, int, int], tuple[Graph, Graph]] = {}
    out = []
    for r in table.itertuples():
        key = (r.model, int(r.batch), int(r.seq_len))
        if key not in graphs:
            graphs[key] = layer_graphs(*key)
        g1, g2 = graphs[key]
        platform = Platform.preset(r.preset)
        gpu = platform.devices_of_kind("gpu")[0]
        for spec in costs:
            cost = as_cost_model(None if spec == "default" else spec, platform=platform)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # fallback counts: the report is the error
                t1, t2 = busy_time(g1, cost, gpu), busy_time(g2, cost, gpu)
            pred = t1 + (int(r.layers) - 1) * (t2 - t1)
            out.append({"gpu": r.gpu, "preset": r.preset, "model": r.model, "batch": int(r.batch),
                        "seq_len": int(r.seq_len), "layers": int(r.layers), "cost": spec,
                        "measured_s": float(r.latency_s), "predicted_s": pred,
                        "error_pct": 100.0 * (pred - float(r.latency_s)) / float(r.latency_s)})
    return pd.DataFrame(out, columns=PUBLISHED_COLUMNS)


def predict_zoo(rows: pd.DataFrame, costs: Sequence[str] = ("default", "roofline")) -> pd.DataFrame:
    """Measured kernel sums of zoo models (``rows``: ``model, batch, gpu, preset,
    kernel_s``) against each preset's all-GPU busy time of the zoo graph (default
    options), per cost model of ``costs``; columns :data:`ZOO_COLUMNS`."""
    # lazy: at the top it would load torch with this module
    from hetsim.graphs import zoo

    out = []
    for r in rows.itertuples():
        graph = zoo.load(str(r.model), batch=int(r.batch), cache=True)
        platform = Platform.preset(r.preset)
        gpu = platform.devices_of_kind("gpu")[0]
        for spec in costs:
            cost = as_cost_model(None if spec == "default" else spec, platform=platform)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                pred = busy_time(graph, cost, gpu)
            out.append({"gpu": r.gpu, "preset": r.preset, "model": r.model, "batch": int(r.batch), "cost": spec,
                        "measured_s": float(r.kernel_s), "predicted_s": pred,
                        "error_pct": 100.0 * (pred - float(r.kernel_s)) / float(r.kernel_s)})
    return pd.DataFrame(out, columns=ZOO_COLUMNS)


def format_published(published: pd.DataFrame) -> str:
    """:func:`predict_published`'s rows as a text table (model, batch, GPU x cost model:
    signed error in percent) and the mean absolute error per cost model."""
    wide = published.pivot_table(index=["model", "batch", "gpu"], columns="cost", values="error_pct", sort=False)
    mean = published.assign(abs_pct=published["error_pct"].abs()).groupby("cost", sort=False)["abs_pct"].mean()
    return "\n".join(["published FP32 inference latencies against the presets: error % of the all-GPU busy time",
                      wide.to_string(float_format=lambda v: f"{v:+.1f}"),
                      "mean |error| %: " + ", ".join(f"{c} {v:.1f}" for c, v in mean.items())])
