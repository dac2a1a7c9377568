"""The dataflow graph of one forward pass of a decoder-only LLM, built directly.

Every operator carries its exact FLOPs and bytes (closed forms below), so that a
70B-parameter model builds in well under a second without materialising a weight:
the graph of one phase is

* ``prefill``: ``tokens`` prompt tokens of each of ``batch`` sequences, causal
  attention over the prompt, logits of the last token;
* ``decode``: one new token per sequence attending to ``kv_length`` cached tokens.

Node ids follow llama.cpp's GGUF tensor names, so that a placement reads as its
``-ot`` rules: ``token_embd``, ``blk.{i}.attn_norm``, ``blk.{i}.attn_q`` / ``_k`` /
``_v``, ``blk.{i}.rope``, ``blk.{i}.attn`` (scores, softmax and values over the KV
cache), ``blk.{i}.attn_output``, ``blk.{i}.attn_residual``, ``blk.{i}.ffn_norm``,
``blk.{i}.ffn_gate`` / ``_up``, ``blk.{i}.ffn_act`` (SiLU(gate) * up),
``blk.{i}.ffn_down``, ``blk.{i}.ffn_residual``; for a mixture of experts
``blk.{i}.ffn_gate_inp`` (router), ``blk.{i}.ffn_topk``, the routed experts as one
grouped operation each (as llama.cpp's ``mul_mat_id``): ``blk.{i}.ffn_gate_exps``,
``..._up_exps``, ``..._act_exps``, ``..._down_exps``, and ``blk.{i}.ffn_moe_sum``;
then ``output_norm`` and ``output``.

Conventions (as llama.cpp computes): activations in float32; a matrix weight is read
once per op at its storage width (:data:`~graphs.llm.config.WEIGHT_FORMATS`), norm
weights are float32; the KV cache of a layer is resident with its ``attn`` node
(``param_bytes``: capacity for ``context`` tokens of every sequence) and the node reads
the cached keys and values it attends to and writes the new ones. A mixture of
experts is priced at its expectation under uniform routing: the grouped products
take ``rows * top_k`` rows, ``rows * top_k / experts`` per expert (``attrs["groups"]``:
the experts), and an expert's weights are read when it gets at least one token, with
probability ``1 - (1 - top_k / experts) ** rows``; experts in host memory move as one
tensor per layer.

A ``matmul`` node's ``attrs`` hold its weight's ``k`` (input) and ``n`` (output)
sizes (and ``groups``, the experts, on a grouped one). Node attributes: ``layer`` (the
decoder layer index) on every node of a layer, ``moe_block`` on the routed-expert nodes,
``top_k`` on the router's ``topk`` node.
``meta["llm"]`` holds the :class:`~graphs.llm.workload.LLMWorkload` (read it with
``LLMWorkload.of(graph)``): the architecture, the phase and its sizes, and ``units``: the
groups of nodes a placement moves together (``token_embd``, ``blk.{i}.attn``,
``blk.{i}.ffn``, ``blk.{i}.ffn_exps``, ``output``).
"""

from __future__ import annotations

import math
from typing import Any

from hetsim.graphs.graph import Graph, GraphError
from hetsim.graphs.llm.architecture import Architecture, ModelWeights
from hetsim.graphs.llm.config import WEIGHT_FORMATS, WeightFormat, kv_dtype_bytes, weight_format
from hetsim.graphs.llm.workload import LLMWorkload

__all__ = ["ACT_BYTES", "PHASES", "SIMULATED_LIMITS", "check_simulated", "graph_weight_format", "llm_graph"]

#: what the simulated graph cannot express, as (test, what it is)
SIMULATED_LIMITS = (
    (lambda a: a.is_mla, "multi-head latent attention"),
    (lambda a: a.shared_experts > 0, "shared experts"),
    (lambda a: a.dense_layers > 0, "leading dense layers"),
    (lambda a: bool(a.swa_layers and a.sliding_window), "sliding-window layers"),
    (lambda a: a.head_dim_v != a.head_dim, "value heads of another size than key heads"),
    (lambda a: a.has_layer_kinds, "layers of different attention (linear-attention or global layers)"),
)


def check_simulated(arch: Architecture) -> None:
    """:class:`GraphError` naming what of ``arch`` the simulated graph does not express."""
    missing = [what for test, what in SIMULATED_LIMITS if test(arch)]
    if missing:
        raise GraphError(f"model {arch.name!r} ({arch.arch}) has {', '.join(missing)}, which the simulated "
                         "policies do not express; plan it as llama.cpp runs it (without --policy)")


#: nodes the graph of one phase may hold (about 20 per layer): beyond, building it would
#: exhaust memory before a single op is priced
MAX_NODES = 2_000_000


def _check_size(arch: Architecture, batch: object) -> None:
    """:class:`GraphError` for a graph too large to build, estimated before allocating."""
    nodes = 20 * arch.layers + 8
    if nodes > MAX_NODES:
        raise GraphError(f"model {arch.name!r}: {arch.layers} layers would make a graph of about {nodes:,} nodes "
                         f"(at most {MAX_NODES:,}): too large to build")


def graph_weight_format(arch: Architecture, weights: str | WeightFormat) -> WeightFormat:
    """The weights as one format: a ggml type (``Q4_K``) as it is; a llama.cpp file type
    (``Q4_K_M``) at the bits per weight llama-quantize's recipe gives ``arch``."""
    try:
        return weight_format(weights)
    except GraphError:
        # import cycle: hetsim.graphs.llm.quant_recipe -> hetsim.graphs.llm -> hetsim.graphs.llm.build
        from hetsim.graphs.llm.quant_recipe import FILE_TYPES, file_type, recipe_tensors

        try:
            ftype = file_type(weights)
        except GraphError:
            raise GraphError(f"unknown weight type {weights!r}; ggml types: {', '.join(WEIGHT_FORMATS)}; "
                             f"llama.cpp file types: {', '.join(FILE_TYPES)}") from None
        model = ModelWeights(arch, recipe_tensors(arch, ftype), ftype, f"llama-quantize's {ftype} recipe")
        return WeightFormat(ftype, model.bits_per_weight(), "float" if model.float_weights else "dequant",
                            model.origin)


#: bytes of one activation element (llama.cpp computes in float32)
ACT_BYTES = 4
#: bytes of one norm-weight element (float32 in GGUF files)
NORM_BYTES = 4
PHASES = ("prefill", "decode")


class _Builder:
    """Adds nodes with explicit FLOPs/bytes and records each node's unit."""

    def __init__(self, graph: Graph) -> None:
        self.g = graph
        self.units: dict[str, list[str]] = {}

    def op(self, unit: str, node: str, op: str, *, rows: float, width: int, flops: float, nbytes: float,
           param_bytes: float = 0, inputs: list[tuple[str, float]] = (), op_attrs: dict | None = None,
           **attrs: Any) -> str:
        out_rows = max(1, math.ceil(rows))
        self.g.add_op(
            node, op,
            outputs=[([out_rows, width], "float32")],
            attrs=op_attrs,
            flops=float(flops),
            bytes=int(round(nbytes)),
            param_bytes=int(round(param_bytes)),
            **attrs,
        )
        for src, b in inputs:
            self.g.add_edge(src, node, bytes=int(round(b)))
        self.units.setdefault(unit, []).append(node)
        return node


def llm_graph(
    config: Architecture | str,
    *,
    phase: str = "decode",
    batch: int = 1,
    tokens: int | None = None,
    kv_length: int | None = None,
    context: int | None = None,
    weights: str | WeightFormat = "f16",
    kv_dtype: str = "f16",
) -> Graph:
    """The graph of one prefill or one decode step of ``config``.

    Parameters
    ----------
    config
        An :class:`~graphs.llm.architecture.Architecture` or a preset name.
    phase
        ``"prefill"`` (``tokens`` prompt tokens per sequence) or ``"decode"`` (one
        token per sequence attending to ``kv_length`` cached tokens, itself included).
    batch
        Sequences processed together.
    tokens
        Prompt length of a prefill (default 512); ignored by decode.
    kv_length
        Tokens in the KV cache a decode step attends to (default: ``context``).
    context
        KV-cache capacity per sequence, which sizes its memory (default: the prompt
        for a prefill, ``kv_length`` or the model's ``max_context`` for a decode).
    weights
        Weight storage format: a ggml type (:func:`~graphs.llm.config.weight_format`) or a
        llama.cpp file type (``Q4_K_M``: :func:`graph_weight_format`).
    kv_dtype
        KV-cache element type (:data:`~graphs.llm.config.KV_DTYPES`).

    Returns
    -------
    Graph
        Validated; ``meta["llm"]`` describes it.

    Raises
    ------
    GraphError
        unknown preset, format or dtype; an architecture the graph does not express;
        a non-positive size.

    Examples
    --------
    >>> g = llm_graph("tiny", phase="decode", kv_length=16)
    >>> g.nodes["blk.0.attn_q"]["flops"] == 2 * 64 * 64
    True
    """
    cfg = Architecture.preset(config) if isinstance(config, str) else config
    if phase not in PHASES:
        raise GraphError(f"unknown phase {phase!r}; phases: {', '.join(PHASES)}")
    check_simulated(cfg)
    fmt = graph_weight_format(cfg, weights)
    kvb = kv_dtype_bytes(kv_dtype)
    if context is not None and (isinstance(context, bool) or not isinstance(context, int) or context < 2):
        raise GraphError(f"context must be an int >= 2 (the prompt and one generated token), got {context!r}")
    _check_size(cfg, batch)
    if phase == "prefill":
        tokens = 512 if tokens is None else tokens
        kv_length = tokens
        context = tokens if context is None else context
    else:
        if kv_length is None:
            kv_length = context if context is not None else cfg.max_context
        context = kv_length if context is None else context
        tokens = 1
    for key, v in (("batch", batch), ("tokens", tokens), ("kv_length", kv_length), ("context", context)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise GraphError(f"{key} must be an int >= 1, got {v!r}")
    if kv_length > context:
        raise GraphError(f"{phase}: {kv_length} tokens do not fit a context of {context}")

    B, T, h, qd, kvd, ffn = batch, tokens, cfg.hidden, cfg.q_dim, cfg.kv_dim, cfg.routed_ffn
    N = B * T  # rows of every per-token op
    a, wb = ACT_BYTES, fmt.bytes_per_weight
    # attention: (query, key) pairs per sequence and head; keys and values read per sequence
    pairs = T * (T + 1) / 2 if phase == "prefill" else kv_length
    kv_read = kv_length
    g = Graph(name=f"{cfg.name}-{phase}", meta={
        "source": "hetsim.graphs.llm", "batch": B, "dtype": "float32", "granularity": "op",
        "model": cfg.name,
    })
    b = _Builder(g)

    def matmul(unit: str, node: str, src: str, rows: float, k: int, n: int, *, groups: int = 1,
               read_p: float = 1.0, in_bytes: float | None = None, **attrs: Any) -> str:
        w = groups * k * n * wb
        act_in = rows * k * a if in_bytes is None else in_bytes
        op_attrs = {"k": k, "n": n} | ({"groups": groups} if groups > 1 else {})
        return b.op(unit, node, "matmul", rows=rows, width=n, flops=2 * rows * k * n,
                    nbytes=act_in + rows * n * a + w * read_p, param_bytes=w, inputs=[(src, act_in)],
                    op_attrs=op_attrs, **attrs)

    def norm(unit: str, node: str, src: str, rows: float, **attrs: Any) -> str:
        return b.op(unit, node, "rms_norm", rows=rows, width=h, flops=4 * rows * h,
                    nbytes=2 * rows * h * a + h * NORM_BYTES, param_bytes=h * NORM_BYTES,
                    inputs=[(src, rows * h * a)], **attrs)

    def add(unit: str, node: str, x: str, y: str, rows: float, **attrs: Any) -> str:
        return b.op(unit, node, "add", rows=rows, width=h, flops=rows * h, nbytes=3 * rows * h * a,
                    inputs=[(x, rows * h * a), (y, rows * h * a)], **attrs)

    x = b.op("token_embd", "token_embd", "take", rows=N, width=h, flops=0,
             nbytes=N * 4 + N * h * wb + N * h * a, param_bytes=cfg.vocab * h * wb)
    for i in range(cfg.layers):
        p, L = f"blk.{i}", {"layer": i}
        u = f"{p}.attn"
        xn = norm(u, f"{p}.attn_norm", x, N, **L)
        q = matmul(u, f"{p}.attn_q", xn, N, h, qd, **L)
        k = matmul(u, f"{p}.attn_k", xn, N, h, kvd, **L)
        v = matmul(u, f"{p}.attn_v", xn, N, h, kvd, **L)
        r = b.op(u, f"{p}.rope", "rope", rows=N, width=qd + kvd, flops=3 * N * (qd + kvd),
                 nbytes=2 * N * (qd + kvd) * a, inputs=[(q, N * qd * a), (k, N * kvd * a)], **L)
        att = b.op(
            u, f"{p}.attn", "attention", rows=N, width=qd,
            flops=4 * B * cfg.heads * cfg.head_dim * pairs + 5 * B * cfg.heads * pairs,
            nbytes=2 * N * qd * a + B * kv_read * 2 * kvd * kvb + N * 2 * kvd * kvb + N * kvd * a,
            param_bytes=B * context * 2 * kvd * kvb,
            inputs=[(r, N * (qd + kvd) * a), (v, N * kvd * a)], **L,
        )
        o = matmul(u, f"{p}.attn_output", att, N, qd, h, **L)
        x = add(u, f"{p}.attn_residual", o, x, N, **L)
        u = f"{p}.ffn"
        xn = norm(u, f"{p}.ffn_norm", x, N, **L)
        if not cfg.is_moe:
            gt = matmul(u, f"{p}.ffn_gate", xn, N, h, ffn, **L)
            up = matmul(u, f"{p}.ffn_up", xn, N, h, ffn, **L)
            act = b.op(u, f"{p}.ffn_act", "silu_mul", rows=N, width=ffn, flops=5 * N * ffn,
                       nbytes=3 * N * ffn * a, inputs=[(gt, N * ffn * a), (up, N * ffn * a)], **L)
            dn = matmul(u, f"{p}.ffn_down", act, N, ffn, h, **L)
        else:
            E, K = cfg.experts, cfg.top_k
            rt = matmul(u, f"{p}.ffn_gate_inp", xn, N, h, E, **L)
            tk = b.op(u, f"{p}.ffn_topk", "topk", rows=N, width=2 * K, flops=N * E,
                      nbytes=N * E * a + N * 2 * K * a, inputs=[(rt, N * E * a)], top_k=K, **L)
            R = N * K  # routed rows: N * K / E expected per expert
            p_used = 1.0 - (1.0 - K / E) ** N  # chance an expert gets a token: its weights are read
            ue, X = f"{p}.ffn_exps", {"layer": i, "moe_block": i}
            ge = matmul(ue, f"{p}.ffn_gate_exps", xn, R, h, ffn, groups=E, read_p=p_used, **X)
            g.add_edge(tk, ge, bytes=int(round(R * 2 * a)))
            ue_ = matmul(ue, f"{p}.ffn_up_exps", xn, R, h, ffn, groups=E, read_p=p_used, **X)
            ae = b.op(ue, f"{p}.ffn_act_exps", "silu_mul", rows=R, width=ffn, flops=5 * R * ffn,
                      nbytes=3 * R * ffn * a, inputs=[(ge, R * ffn * a), (ue_, R * ffn * a)], **X)
            de = matmul(ue, f"{p}.ffn_down_exps", ae, R, ffn, h, groups=E, read_p=p_used, **X)
            dn = b.op(u, f"{p}.ffn_moe_sum", "moe_sum", rows=N, width=h, flops=2 * N * K * h,
                      nbytes=(K + 1) * N * h * a + N * K * a,
                      inputs=[(tk, N * 2 * K * a), (de, R * h * a)], **L)
        x = add(u, f"{p}.ffn_residual", dn, x, N, **L)
    # logits of the last token of each sequence only (llama.cpp's inp_out_ids)
    xn = b.op("output", "output_norm", "rms_norm", rows=B, width=h, flops=4 * B * h,
              nbytes=2 * B * h * a + h * NORM_BYTES, param_bytes=h * NORM_BYTES, inputs=[(x, B * h * a)])
    out = matmul("output", "output", xn, B, h, cfg.vocab)
    g.meta["inputs"] = [{"name": "tokens", "shape": [B, T], "dtype": "int32", "bytes": N * 4,
                         "consumers": ["token_embd"]}]
    g.meta["outputs"] = [{"node": out, "output": 0, "shape": [B, cfg.vocab], "dtype": "float32",
                          "bytes": B * cfg.vocab * a}]
    g.meta["llm"] = LLMWorkload(
        cfg, fmt, phase, B, T, kv_length, context, kv_dtype, b.units,
        expert_read_fraction=(1.0 - (1.0 - cfg.top_k / cfg.experts) ** N) if cfg.is_moe else 1.0,
    ).to_meta()
    return g
