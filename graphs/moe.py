"""Mixture-of-experts layers as static per-expert operators (this module imports torch).

A mixture-of-experts (MoE) block routes every token to ``top_k`` of ``E`` experts: a
router (linear + softmax + ``topk``) picks them, the tokens are sorted by expert, and
one *grouped* matrix multiplication applies each expert's weights to its contiguous
group of rows (Hugging Face Transformers 5: ``transformers::grouped_mm_fallback`` or
``aten._grouped_mm``, group ends from ``histc`` + ``cumsum``). TVM's frontend has no
converter for either, and a grouped matmul's work depends on the data.

:func:`decompose_grouped_matmuls` runs the exported program once on the example
inputs, reads how many rows each expert got, and replaces every grouped matmul by
one ``slice`` + ``mm`` per expert that got rows (its weight ``select`` ed from the
stacked expert weights, a weight-only op that the importer folds) and a ``cat``:
exactly the multiply-adds the grouped kernel does for these inputs, with static
shapes. The ``histc`` and ``cumsum`` that sized the groups are then dead code. The
graph is the trace of one inference: the expert group sizes are those of the example
inputs (as every shape is).

Node tags (FX ``node.meta["hetsim"]``; graph node attributes after import):
``moe_block`` (index of the MoE block, in graph order) and ``expert`` on each
expert's slice and matmul; ``moe_block`` and ``top_k`` on the router's ``topk``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from hetsim.graphs.graph import GraphError

__all__ = ["TAG", "decompose_grouped_matmuls", "is_grouped_matmul"]

#: key of the hetsim node tags in an FX node's ``meta``
TAG = "hetsim"
_GROUPED = frozenset({"transformers::grouped_mm_fallback", "aten::_grouped_mm"})


def is_grouped_matmul(node: torch.fx.Node) -> bool:
    """Whether an FX node is a grouped matmul this module decomposes."""
    schema = getattr(node.target, "_schema", None)
    return node.op == "call_function" and schema is not None and schema.name in _GROUPED


def _operands(node: torch.fx.Node) -> tuple[Any, Any, Any]:
    args = list(node.args) + [None] * 3
    offs = args[2] if args[2] is not None else node.kwargs.get("offs")
    extra = [a for a in args[3:] if a is not None] + [
        v for k, v in node.kwargs.items() if k not in ("offs", "out_dtype") and v is not None
    ]
    if offs is None or extra:
        raise GraphError(
            f"grouped matmul {node.name!r} without group offsets, or with a bias: not supported"
        )
    return args[0], args[1], offs


def lifted_arguments(ep: torch.export.ExportedProgram, user: Sequence[torch.Tensor]) -> list[Any]:
    """The exported graph's placeholder values: weights, buffers, constants, and the
    user's tensors ``user`` (in order) where it takes user inputs."""
    from torch.export.graph_signature import InputKind, TensorArgument

    state, consts = ep.state_dict, ep.constants
    it = iter(user)
    out: list[Any] = []
    for spec in ep.graph_signature.input_specs:
        if spec.kind == InputKind.USER_INPUT:
            out.append(next(it) if isinstance(spec.arg, TensorArgument) else spec.arg.value)
        elif spec.target in state:
            out.append(state[spec.target])
        else:
            out.append(consts[spec.target])
    return out


def _record(ep: torch.export.ExportedProgram, user: Sequence[torch.Tensor], wanted: set) -> dict:
    """Values of the FX nodes ``wanted`` when the program runs on the example inputs."""
    values: dict[torch.fx.Node, Any] = {}

    class Recorder(torch.fx.Interpreter):
        def run_node(self, n: torch.fx.Node) -> Any:
            out = super().run_node(n)
            if n in wanted:
                values[n] = out
            return out

    with torch.no_grad():
        Recorder(ep.graph_module).run(*lifted_arguments(ep, user))
    return values


def _router(offs: torch.fx.Node) -> torch.fx.Node | None:
    """The nearest ``topk`` upstream of a grouped matmul's offsets."""
    seen, stack = set(), [offs]
    while stack:
        n = stack.pop(0)
        if n in seen:
            continue
        seen.add(n)
        if n.op == "call_function" and n.target is torch.ops.aten.topk.default:
            return n
        stack.extend(n.all_input_nodes)
    return None


def _meta_val(node: torch.fx.Node) -> torch.Tensor:
    v = node.meta.get("val")
    return torch.empty(tuple(v.shape), dtype=v.dtype, device="meta")


def decompose_grouped_matmuls(
    ep: torch.export.ExportedProgram, user: Sequence[torch.Tensor]
) -> list[dict[str, Any]]:
    """Rewrite the grouped matmuls of ``ep`` (in place) as per-expert matmuls.

    Parameters
    ----------
    ep
        A decomposed exported program; changed in place.
    user
        The example input tensors, in the program's user-input order.

    Returns
    -------
    list of dict
        One entry per MoE block (matmuls sharing their group offsets): ``block``,
        ``experts``, ``top_k`` (None when no ``topk`` feeds the routing) and ``tokens``
        (rows each expert got).
    """
    graph = ep.graph
    grouped = [n for n in graph.nodes if is_grouped_matmul(n)]
    if not grouped:
        return []
    operands = {n: _operands(n) for n in grouped}
    offs_nodes = list(dict.fromkeys(o for _, _, o in operands.values()))
    values = _record(ep, user, set(offs_nodes))
    blocks: list[dict[str, Any]] = []
    block_of: dict[torch.fx.Node, int] = {}
    for b, offs in enumerate(offs_nodes):
        ends = [int(v) for v in values[offs].reshape(-1).tolist()]
        router = _router(offs)
        k = int(router.args[1]) if router is not None else None
        if router is not None:
            router.meta[TAG] = {"moe_block": b, "top_k": k}
        tokens = [e - s for s, e in zip([0, *ends[:-1]], ends)]
        blocks.append({"block": b, "experts": len(ends), "top_k": k, "tokens": tokens})
        block_of[offs] = b
    aten = torch.ops.aten
    for node in grouped:
        x, w, offs = operands[node]
        b = block_of[offs]
        ends = [0]
        for t in blocks[b]["tokens"]:
            ends.append(ends[-1] + t)
        xv, wv = _meta_val(x), _meta_val(w)
        rows = int(xv.shape[0])
        parts = []
        with graph.inserting_before(node):
            for e in range(len(ends) - 1):
                start, end = ends[e], ends[e + 1]
                if end <= start:
                    continue
                sl = graph.call_function(aten.slice.Tensor, (x, 0, start, end))
                sl.meta["val"] = xv[start:end]
                we = graph.call_function(aten.select.int, (w, 0, e))
                we.meta["val"] = wv[e]
                mm = graph.call_function(aten.mm.default, (sl, we))
                mm.meta["val"] = torch.mm(sl.meta["val"], we.meta["val"])
                for n in (sl, mm):
                    n.meta[TAG] = {"moe_block": b, "expert": e}
                parts.append(mm)
            if ends[-1] < rows:  # rows past the last group: the kernel leaves them zero
                pad = graph.call_function(
                    aten.full.default, ([rows - ends[-1], int(wv.shape[-1])], 0.0),
                    {"dtype": wv.dtype, "device": torch.device("cpu")},
                )
                pad.meta["val"] = torch.zeros(rows - ends[-1], int(wv.shape[-1]), dtype=wv.dtype, device="meta")
                parts.append(pad)
            if len(parts) == 1:
                out = parts[0]
            else:
                out = graph.call_function(aten.cat.default, (parts, 0))
                out.meta["val"] = torch.cat([p.meta["val"] for p in parts], 0)
        node.replace_all_uses_with(out)
        graph.erase_node(node)
    graph.eliminate_dead_code()
    ep.graph_module.recompile()
    return blocks
