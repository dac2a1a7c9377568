"""A residency written as llama.cpp command-line flags, where llama.cpp can express it.

llama.cpp places tensors with ``-ngl N`` (the last ``N`` layers on the GPU, the output
layer too when ``N`` exceeds the layer count), ``--n-cpu-moe N`` (the expert tensors
of the first ``N`` layers in host memory) and ``-ot REGEX=CPU``
(``--override-tensor``: tensors whose GGUF name matches stay in host memory); an op
runs where its weights are. It has no weight streaming: a residency that streams
weights has no flags. A layer's KV cache follows ``-ngl``, not ``-ot``: moving a layer's
attention weights with ``-ot`` leaves its cache (and attention) on the GPU, so that
case is flagged as approximate.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hetsim.schedulers.llm.policies import NGL, ExpertOffload
from hetsim.schedulers.llm.residency import layer_units, llm_devices

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.costmodel.platform import Platform
    from hetsim.graphs.graph import Graph
    from hetsim.schedulers.llm.residency import Residency

__all__ = ["llama_cpp_flags", "number_regex"]

#: what ``-ot`` moves for each set of a layer's units in host memory
_PATTERNS = {
    frozenset({"ffn_exps"}): "ffn_(up|down|gate)_exps",
    frozenset({"ffn"}): "ffn_(norm|gate|up|down|gate_inp)",
    frozenset({"ffn", "ffn_exps"}): "ffn_.*",
    frozenset({"attn"}): "attn_.*",
}


def llama_cpp_flags(residency: Residency, graph: Graph, platform: Platform) -> tuple[str | None, str]:
    """The llama.cpp flags of ``residency`` and a note; flags None when inexpressible.

    Examples
    --------
    >>> from hetsim.graphs.llm import llm_graph
    >>> from hetsim.costmodel.platform import Platform
    >>> g, p = llm_graph("tiny", kv_length=8), Platform.preset("desktop-rtx4090")
    >>> llama_cpp_flags(NGL.layout(g, p, 1), g, p)[0]
    '-ngl 1'
    """
    if residency.streamed:
        return None, "weights streamed to the GPU: llama.cpp has no equivalent (FlexGen does)"
    layers = layer_units(graph)
    n_layers = len(layers)
    for n in range(n_layers + 2):
        if NGL.layout(graph, platform, n).devices == residency.devices:
            return f"-ngl {n}", "exact"
    all_gpu = n_layers + 1
    if any(u.endswith(".ffn_exps") for us in layers.values() for u in us):
        for n in range(1, n_layers + 1):
            if ExpertOffload.layout(graph, platform, n).devices == residency.devices:
                return f"-ngl {all_gpu} --n-cpu-moe {n}", "exact"
    host, _ = llm_devices(platform)
    by_pattern: dict[str, list[int]] = {}
    approximate = False
    for i, units in layers.items():
        on_host = frozenset(u.split(".", 2)[2] for u in units if residency.devices[u] == host)
        if not on_host:
            continue
        # otherwise attention and (part of) the FFN are on the CPU: every tensor of the layer
        pattern = _PATTERNS.get(on_host, ".*")
        approximate |= "attn" in on_host
        by_pattern.setdefault(pattern, []).append(i)
    parts = [f"-ngl {all_gpu}"]
    for pattern, idx in by_pattern.items():
        parts.append(f'-ot "blk\\.({number_regex(idx)})\\.{pattern}=CPU"')
    if residency.devices.get("output") == host:
        parts.append('-ot "output\\.weight=CPU"')
    note = ("approximate: llama.cpp keeps the KV cache of these layers on the GPU, -ot moves only their "
            "attention weights" if approximate else "exact")
    return " ".join(parts), note


def number_regex(numbers: list[int]) -> str:
    """A regular expression alternation matching exactly ``numbers`` (non-negative),
    with runs of a decade as character classes.

    >>> number_regex([2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 30])
    '[2-9]|1[0-9]|2[0-5]|30'
    """
    by_prefix: dict[str, list[int]] = {}
    for n in sorted(set(numbers)):
        by_prefix.setdefault(str(n)[:-1], []).append(n % 10)
    parts = []
    for prefix, units in by_prefix.items():
        runs: list[list[int]] = []
        for u in units:
            if runs and u == runs[-1][-1] + 1:
                runs[-1].append(u)
            else:
                runs.append([u])
        for r in runs:
            parts.append(prefix + (str(r[0]) if len(r) == 1 else f"[{r[0]}-{r[-1]}]"))
    return "|".join(parts)
