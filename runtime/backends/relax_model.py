"""A graph together with the Relax module it was walked from (:class:`RelaxModel`): the
dataflow and real weights behind a graph's nodes, which the executor wires and the tvm
backend compiles.

Where a graph's model comes from (:func:`model_for`): the exported program a graph
imported by :func:`graphs.from_torch` keeps in memory (``graph.program``), the zoo model
it names (``meta["model"]``), or its model spec (``meta["model_spec"]``). TVM IR cannot be
persisted, so the module is rebuilt from them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hetsim.graphs import relax_import
from hetsim.graphs.graph import Graph, GraphError
from hetsim.graphs.model_spec import load_model_spec, parse_model_spec
from hetsim.runtime.backends.base import BackendError

__all__ = [
    "RelaxModel", "check_same", "import_model", "import_module", "model_for", "relax_model", "source_model",
]


@dataclass
class RelaxModel:
    """A graph together with the Relax module it was walked from.

    Attributes
    ----------
    graph
        The graph (same node ids as :func:`graphs.zoo.load` gives).
    mod
        The walked module: the frontend's output (``op``) or the fused module.
    calls
        Node -> its Relax call (an operator call, or a ``call_tir`` when fused).
    sources
        Node -> per input slot ``("node", (src, output))``, ``("input", name)`` or
        ``("const", tvm constant)``.
    example_inputs
        Graph input name -> the example value the model was imported with.
    program
        The exported torch model (:class:`graphs.torch_export.ImportedProgram`): its
        module's own forward is the reference of the executor's output check.
    const_arrays
        ``id(constant)`` -> ``(constant, array)``: each constant converted once and
        shared by every wiring of the model (:func:`runtime.executor.setup.wire`),
        so that the executions of one model's plans hold its weights once.
    """

    graph: Graph
    mod: Any
    calls: dict[str, Any]
    sources: dict[str, list[tuple[str, Any]]]
    example_inputs: dict[str, np.ndarray] = field(default_factory=dict)
    program: Any = None
    const_arrays: dict[int, tuple[Any, np.ndarray]] = field(default_factory=dict, repr=False, compare=False)

    def constants(self, node: str) -> dict[int, np.ndarray]:
        """Input index -> value of the node's constant inputs (weights, literals)."""
        return {i: v.value.numpy() if hasattr(v, "value") else v.numpy() if hasattr(v, "numpy") else np.asarray(v)
                for i, (kind, v) in enumerate(self.sources[node]) if kind == "const"}


def import_module(
    module: Any, example_inputs: Any, *, granularity: str = "op", name: str = "model",
    exact: bool = True,
) -> RelaxModel:
    """Import a torch module (:func:`graphs.torch_export.export_torch`) as a :class:`RelaxModel`.

    Parameters
    ----------
    module, example_inputs
        The model and its example inputs (a tuple, or a dict of keyword inputs; their
        shapes become static shapes).
    granularity
        ``"op"`` or ``"fused"``.
    name
        Model name.
    exact
        Compute the values of folded weights (op: weight-only operators; fused: TVM's
        ``FoldConstant``) instead of only the structure (zero-valued or absent folded
        constants: enough to time kernels, not to check results).
    """
    # lazy: at the top it would load torch with this module
    from hetsim.graphs.torch_export import export_torch

    try:
        program = export_torch(module, example_inputs, name=name)
    except GraphError as e:
        raise BackendError(f"model {name!r}: export to Relax failed: {e}") from e
    return relax_model(program, granularity=granularity, name=name, exact=exact)


def relax_model(program: Any, *, granularity: str = "op", name: str = "model", exact: bool = True) -> RelaxModel:
    """The :class:`RelaxModel` of an exported torch model (a
    :class:`graphs.torch_export.ImportedProgram`, e.g. ``graph.program`` of a graph
    imported by :func:`graphs.from_torch`)."""
    try:
        graph = relax_import.from_relax(program.mod, granularity=granularity, name=name, source="torch",
                                        tags=program.tags)
        # lazy: at the top it would load torch with this module
        from hetsim.runtime.backends.torch_backend import evaluate_op

        walked, members, kernel_tags = relax_import.lower(program.mod, granularity=granularity, name=name,
                                                          exact=exact, tags=program.tags, evaluate=evaluate_op)
    except GraphError as e:
        raise BackendError(f"model {name!r}: {e}") from e
    if program.moe:
        graph.meta["moe"] = [dict(b) for b in program.moe]
    graph.program = program
    model = _align(graph, walked, members, name)
    names = [i["name"] for i in graph.meta.get("inputs", [])]
    model.example_inputs = {k: v for k, v in program.inputs.items() if k in names}
    model.program = program
    return model


def import_model(
    name: str, *, batch: int = 1, granularity: str = "op", seed: int = 0, exact: bool = True, **kw: Any
) -> RelaxModel:
    """A zoo model (built as :func:`graphs.zoo.build` does) as a :class:`RelaxModel`;
    its graph equals ``graphs.zoo.load(name, batch=..., granularity=..., seed=..., **kw)``."""
    # lazy: at the top it would load torch with this module
    from hetsim.graphs import zoo

    module, inputs = zoo.build(name, batch=batch, seed=seed, **kw)
    model = import_module(module, inputs, granularity=granularity, name=name, exact=exact)
    if name in zoo.RECURRENT:
        model.graph = zoo.tag_steps(model.graph)
    model.graph.meta.update(model=name, zoo_kwargs=dict(kw), zoo_seed=seed)
    return model


def source_model(graph: Graph, *, exact: bool = True) -> RelaxModel:
    """The Relax model a graph was imported from, rebuilt: from ``graph.program`` (a graph
    imported by :func:`graphs.from_torch` or :func:`graphs.from_onnx` in this process),
    else from the zoo model it names (``meta["model"]``, ``batch``, ``zoo_kwargs``,
    ``zoo_seed``, ``granularity``), else from its model spec (``meta["model_spec"]``):
    an ONNX file, or Python code only when ``graph.model_code_trusted``.
    Its graph is the imported one (a graph rewritten since, e.g. by ``split_op``, has
    other nodes: the executor's wiring maps them).

    Raises
    ------
    BackendError
        When the graph has none of these, its model fails to rebuild, or its model spec
        names Python code it was not trusted to import.
    """
    meta = graph.meta
    gran = str(meta.get("granularity", "op"))
    if getattr(graph, "program", None) is not None:  # imported in this process
        return relax_model(graph.program, granularity=gran, name=graph.name, exact=exact)
    model_name = meta.get("model")
    spec = meta.get("model_spec")
    if not model_name and isinstance(spec, dict) and spec.get("spec"):
        try:
            kind = parse_model_spec(str(spec["spec"])).kind
        except GraphError as e:
            raise BackendError(f"graph {graph.name!r}: meta.model_spec {spec['spec']!r:.80}: {e}") from None
        if kind == "module" and not getattr(graph, "model_code_trusted", False):
            raise BackendError(
                f"graph {graph.name!r} names Python model code {spec['spec']!r:.80} (meta.model_spec): a graph "
                "file runs no code unless told to; to import it, pass --trust-model-code (Python: "
                "load_model_spec(..., trust_model_code=True), or graph.model_code_trusted = True)")

        try:
            rebuilt = load_model_spec(spec["spec"], inputs=spec.get("inputs") or (),
                                      options=spec.get("options"), seed=int(spec.get("seed", 0)),
                                      granularity=gran)
        except GraphError as e:
            raise BackendError(f"graph {graph.name!r}: cannot rebuild its model {spec['spec']!r}: {e}") from e
        return relax_model(rebuilt.program, granularity=gran, name=rebuilt.name, exact=exact)
    if not model_name:
        raise BackendError(
            f"graph {graph.name!r} names no model (it was not imported by graphs.from_torch in this "
            "process, nor from the zoo or a model spec); pass its Relax model: "
            "import_module(module, inputs)"
        )
    return import_model(
        str(model_name), batch=int(meta.get("batch") or 1), granularity=gran,
        seed=int(meta.get("zoo_seed", 0)), exact=exact, **dict(meta.get("zoo_kwargs") or {}),
    )


def model_for(graph: Graph, *, exact: bool = False) -> RelaxModel:
    """:func:`source_model` of ``graph``, checked to have ``graph``'s nodes, with ``graph``
    as its graph (what the tvm backend compiles kernels from)."""
    model = source_model(graph, exact=exact)
    check_same(graph, model.graph)
    model.graph = graph
    return model


def check_same(graph: Graph, rebuilt: Graph) -> None:
    """Raise :class:`BackendError` unless ``rebuilt`` has ``graph``'s nodes (ids, ops, specs)."""
    if list(graph) != list(rebuilt):
        raise BackendError(
            f"graph {graph.name!r} differs from its model rebuilt now ({len(graph)} vs "
            f"{len(rebuilt)} nodes, or other node ids): it was imported by another hetsim/TVM "
            "version; re-import it (clear the zoo cache)"
        )
    for n in graph:
        a, b = graph.nodes[n], rebuilt.nodes[n]
        if a["op"] != b["op"] or a["inputs"] != b["inputs"] or a["outputs"] != b["outputs"]:
            raise BackendError(f"graph {graph.name!r}: node {n!r} differs from the rebuilt model's")


def _align(graph: Graph, walked: Any, members: Any, name: str) -> RelaxModel:
    """Walk ``walked`` again and pair its live records with the graph's nodes, in order
    (the order :func:`graphs.relax_import.from_relax` gives them)."""
    # lazy: at the top it would load tvm with this module
    from hetsim.graphs import relax_ops

    class Walker(relax_ops.RelaxWalker):
        """Also remembers the Relax call behind each record."""

        rec_calls: dict[int, Any] = {}

        def call(self, call: Any, var: str) -> Any:
            n = len(self.recs)
            out = super().call(call, var)
            if len(self.recs) > n:
                self.rec_calls[self.recs[-1].index] = call
            return out

    walker = Walker(walked, model=name, members=members)
    walker.rec_calls = {}
    outputs = walker.walk()
    recs = walker.live_records(outputs)
    nodes = list(graph)
    if len(recs) != len(nodes):
        raise BackendError(f"model {name!r}: {len(recs)} kernels in the module, {len(nodes)} graph nodes")
    func = walked["main"]
    attrs = func.attrs or {}
    n_in = int(attrs["num_input"]) if "num_input" in attrs else len(func.params)
    bound = dict(zip(func.params[n_in:], attrs["params"])) if "params" in attrs else {}
    ids = {rec.index: n for rec, n in zip(recs, nodes)}
    calls: dict[str, Any] = {}
    sources: dict[str, list[tuple[str, Any]]] = {}
    for rec, n in zip(recs, nodes):
        d = graph.nodes[n]
        if d["op"] != rec.op or [r.spec for r in rec.inputs] != d["inputs"]:
            raise BackendError(f"model {name!r}: node {n!r} does not match the module's binding {rec.var!r}")
        calls[n] = walker.rec_calls[rec.index]
        src: list[tuple[str, Any]] = []
        for r in rec.inputs:
            if r.kind == "node":
                src.append(("node", (ids[r.key], r.output)))
            elif r.kind == "input":
                src.append(("input", r.key))
            else:
                kind, obj = r.key
                if kind == "var" and obj not in bound:  # a folded weight of a structure-only fold
                    bound[obj] = np.zeros(r.shape, dtype=r.dtype)
                src.append(("const", obj if kind == "const" else bound[obj]))
        sources[n] = src
    return RelaxModel(graph, walked, calls, sources)


