"""Stacked LSTM and GRU written as explicit cells unrolled over time, and step tagging.

``torch.nn.LSTM``/``GRU`` import into TVM with a barrier between layers (layer 2
reads the concatenation of all of layer 1's steps), which hides the wavefront
parallelism of a stacked RNN. Here each (step, layer) is its own cell call inside a
Python loop over time, so the exported graph is fully unrolled: the cell of layer
``l`` at step ``t`` depends only on layer ``l-1`` at step ``t`` and on layer ``l`` at
step ``t-1``.

The cells compute exactly what ``torch.nn.LSTMCell``/``GRUCell`` compute (gate order
i, f, g, o and r, z, n; two biases per gate) and have the same number of parameters,
but store their weights pre-transposed (``[in, gates * hidden]``) so that a gate
projection imports as one ``matmul`` plus one ``add`` with no per-step transpose of
the weight. The initial state is zero, kept as a ``[1, hidden]`` constant buffer that
broadcasts over the batch.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable

import networkx as nx
import torch
from torch import nn

from hetsim.graphs.graph import Graph, GraphError

__all__ = ["MODELS", "make_inputs", "lstm", "gru", "LSTMCell", "GRUCell", "StackedRNN", "tag_steps"]


class _Cell(nn.Module):
    """Gate projections ``x @ W_ih + b_ih`` and ``h @ W_hh + b_hh`` for ``gates`` gates."""

    gates = 1

    def __init__(self, input_size: int, hidden: int) -> None:
        super().__init__()
        n = self.gates * hidden
        self.hidden = hidden
        self.weight_ih = nn.Parameter(torch.empty(input_size, n))
        self.weight_hh = nn.Parameter(torch.empty(hidden, n))
        self.bias_ih = nn.Parameter(torch.empty(n))
        self.bias_hh = nn.Parameter(torch.empty(n))
        bound = 1.0 / math.sqrt(hidden)  # torch.nn.RNNCellBase's initialisation
        for p in self.parameters():
            nn.init.uniform_(p, -bound, bound)

    def _project(self, x: torch.Tensor, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x @ self.weight_ih + self.bias_ih, h @ self.weight_hh + self.bias_hh


class LSTMCell(_Cell):
    """LSTM cell (Hochreiter & Schmidhuber 1997, with forget gate), torch gate order i, f, g, o."""

    gates = 4

    def forward(
        self, x: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        h, c = state
        gi, gh = self._project(x, h)
        i, f, g, o = torch.chunk(gi + gh, 4, 1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(c)
        return h, c


class GRUCell(_Cell):
    """GRU cell (Cho et al. 2014), torch formulation: ``n = tanh(W_in x + r * (W_hn h + b_hn))``."""

    gates = 3

    def forward(self, x: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        gi, gh = self._project(x, h)
        i_r, i_z, i_n = torch.chunk(gi, 3, 1)
        h_r, h_z, h_n = torch.chunk(gh, 3, 1)
        r = torch.sigmoid(i_r + h_r)
        z = torch.sigmoid(i_z + h_z)
        n = torch.tanh(i_n + r * h_n)
        return n + z * (h - n)


class StackedRNN(nn.Module):
    """A stack of LSTM or GRU cells unrolled over time, with a linear head on the last step.

    Parameters
    ----------
    kind
        ``"lstm"`` or ``"gru"``.
    input_size, hidden, layers
        Feature size of the input, hidden size, number of stacked layers.
    out_features
        Output size of the linear head applied to the top layer's last hidden state.
    seq_len
        Sequence length of the example input (the module itself accepts any length).

    Input ``[batch, seq_len, input_size]``; output ``[batch, out_features]``.
    """

    def __init__(
        self, kind: str, input_size: int, hidden: int, layers: int, out_features: int, seq_len: int
    ) -> None:
        super().__init__()
        cell = {"lstm": LSTMCell, "gru": GRUCell}[kind]
        self.kind = kind
        self.seq_len = seq_len
        self.input_size = input_size
        self.cells = nn.ModuleList(
            cell(input_size if i == 0 else hidden, hidden) for i in range(layers)
        )
        self.head = nn.Linear(hidden, out_features)
        self.register_buffer("zero_state", torch.zeros(1, hidden), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = [self.zero_state] * len(self.cells)
        c = [self.zero_state] * len(self.cells)
        for t in range(x.shape[1]):
            inp = x[:, t]  # select with a non-negative index (see TVM_NOTES)
            for i, cell in enumerate(self.cells):
                if self.kind == "lstm":
                    h[i], c[i] = cell(inp, (h[i], c[i]))
                else:
                    h[i] = cell(inp, h[i])
                inp = h[i]
        return self.head(h[-1])


def _check_sizes(**sizes: int) -> None:
    for key, v in sizes.items():
        if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 1:
            raise ValueError(f"{key} must be an int >= 1, got {v!r}")


def _rnn(
    kind: str,
    seq_len: int,
    hidden: int,
    layers: int,
    input_size: int | None,
    out_features: int | None,
) -> StackedRNN:
    input_size = hidden if input_size is None else input_size
    out_features = hidden if out_features is None else out_features
    _check_sizes(
        seq_len=seq_len,
        hidden=hidden,
        layers=layers,
        input_size=input_size,
        out_features=out_features,
    )
    return StackedRNN(kind, input_size, hidden, layers, out_features, seq_len)


def lstm(
    *,
    seq_len: int = 16,
    hidden: int = 256,
    layers: int = 2,
    input_size: int | None = None,
    out_features: int | None = None,
) -> StackedRNN:
    """Stacked LSTM, unrolled; ``input_size`` and ``out_features`` default to ``hidden``.

    Parameters: ``layers * 4 * hidden * (input + hidden + 2)`` (input = ``hidden`` above
    the first layer) plus the head, 1,118,464 with the defaults.
    """
    return _rnn("lstm", seq_len, hidden, layers, input_size, out_features)


def gru(
    *,
    seq_len: int = 16,
    hidden: int = 256,
    layers: int = 2,
    input_size: int | None = None,
    out_features: int | None = None,
) -> StackedRNN:
    """Stacked GRU, unrolled; ``input_size`` and ``out_features`` default to ``hidden``.

    Parameters: ``layers * 3 * hidden * (input + hidden + 2)`` plus the head, 855,296
    with the defaults.
    """
    return _rnn("gru", seq_len, hidden, layers, input_size, out_features)


MODELS: dict[str, Callable[..., nn.Module]] = {"gru": gru, "lstm": lstm}


def make_inputs(
    model: nn.Module, batch: int, generator: torch.Generator
) -> tuple[torch.Tensor, ...]:
    """Example input of a recurrent model: ``[batch, seq_len, input_size]`` float32."""
    return (torch.randn(batch, model.seq_len, model.input_size, generator=generator),)


# ----------------------------------------------------------------------- step tags
_INDEX_KEYS = ("index", "indices", "begin", "start")


def _attr_index(attrs: dict) -> int | None:
    """The time index recorded in a slicing node's attributes, if the importer kept it."""
    for key in _INDEX_KEYS:
        v = attrs.get(key)
        while isinstance(v, list | tuple) and len(v) == 1:
            v = v[0]
        if isinstance(v, int) and not isinstance(v, bool):
            return v
    return None


def tag_steps(graph: Graph, *, input_index: int = 0) -> Graph:
    """A copy of ``graph`` with a ``step`` attribute on every node.

    The input-slicing nodes are the direct consumers of graph input ``input_index``
    (``meta["inputs"][input_index]["consumers"]``): the ``take``/``strided_slice``
    that reads ``x[:, t]``. A node's step is the largest ``t`` among the slicing nodes
    that are its ancestors (or itself); nodes with none get step 0.

    ``t`` is read from the slicing node's ``attrs`` (``index``, ``indices``, ``begin``
    or ``start``). Where the importer did not record it (a fused node, say), the
    slicing nodes are ranked by causality instead: in a recurrence, an earlier
    step's slice has strictly more descendants than a later one's.

    With this rule the recurrent projection ``h[t-1] @ W_hh`` of step ``t`` is tagged
    ``t - 1`` (its latest slicing ancestor is ``x[:, t-1]``): it can run as soon as
    step ``t - 1`` is done. Nodes fed only by constants (at ``op`` granularity: the
    projection of the zero initial state, the head's weight transpose) get step 0.

    Parameters
    ----------
    graph
        An imported recurrent model; not modified.
    input_index
        Which graph input is the sequence.

    Returns
    -------
    Graph
        The tagged copy.

    Raises
    ------
    GraphError
        If the graph has no such input or the input has no consumers.
    """
    inputs = graph.meta.get("inputs") or []
    if not 0 <= input_index < len(inputs):
        raise GraphError(f"graph {graph.name!r} has no input #{input_index} to slice steps from")
    slices = [n for n in inputs[input_index].get("consumers", []) if n in graph]
    if not slices:
        raise GraphError(f"graph {graph.name!r}: input #{input_index} has no consumer nodes")
    index = {n: _attr_index(graph.nodes[n]["attrs"]) for n in slices}
    if any(v is None for v in index.values()) or len(set(index.values())) != len(slices):
        order = {n: i for i, n in enumerate(graph.nx)}
        ranked = sorted(slices, key=lambda n: (-len(nx.descendants(graph.nx, n)), order[n]))
        index = {n: t for t, n in enumerate(ranked)}
    out = graph.copy()
    step: dict[str, int] = {}
    for n in out.topological_order():
        s = max((step[p] for p in out.predecessors(n)), default=-1)
        step[n] = max(s, index.get(n, -1))
    for n, s in step.items():
        out.nodes[n]["step"] = max(s, 0)
    return out
