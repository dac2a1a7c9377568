"""Import models through Apache TVM Relax as hetsim :class:`~graphs.graph.Graph` s.

Three entry points, one path: :func:`from_torch` (``torch.export`` then TVM's PyTorch
frontend) and :func:`from_onnx` (TVM's ONNX frontend) both end in
:func:`from_relax`, which walks ``main`` of a Relax IRModule.

Granularities
-------------
``op``
    One node per Relax operator call (``conv2d``, ``add``, ``reshape``, ...): the
    graph as the frontend wrote it. Tuples, ``TupleGetItem`` and aliases are folded
    into edges; nodes that feed no graph output (dead code) are dropped.
``fused``
    One node per ``call_tir`` kernel after TVM's own fusion passes, run under an
    llvm target (DecomposeOpsForInference, CanonicalizeBindings, LegalizeOps,
    AnnotateTIROpPattern, FoldConstant, FuseOps, FuseTIR, DeadCodeElimination): what
    TVM launches. Nodes have ``op="fused"``, ``ops`` = member op kinds,
    ``attrs["primfunc"]``, and ``attrs["view"] = True`` for pure reshape-like
    kernels (zero cost at run time). FoldConstant is replaced by an equivalent
    structure-only fold (:func:`graphs.relax_ops.shape_fold`): TVM's pass compiles
    every folded kernel with LLVM (~5 s for ResNet-18) and yields the same kernels.

FLOPs follow the convention multiply-add = 2 FLOPs and come from TVM's TIR
estimation of the legalized kernels (see :mod:`graphs.relax_ops`). ``param_bytes``
of a node counts its constant (weight) inputs; ``meta["param_bytes"]`` counts every
weight of the model once (by identity: content-equal weights such as freshly
initialised all-ones batch-norm scales stay distinct), so that shared weights and
FoldConstant copies are not counted twice. 0-d constants (literals such as
``x * 0.5``) are not weights.

Known TVM 0.27 quirks handled here: the PyTorch importer turns ``y[:, -1]`` into a
``take`` with index -1 that reads out of bounds (rejected with a
:class:`~graphs.graph.GraphError`; write ``y[:, y.shape[1] - 1]``); TIR estimation
counts the zeros of a transposed convolution's dilated input (a formula is used).

TVM and torch are imported on first use, so ``import hetsim.graphs`` stays light.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hetsim.graphs.graph import Graph, GraphError, first_line, validate

if TYPE_CHECKING:
    import onnx
    import torch
    import tvm

    from hetsim.graphs.torch_export import ImportedProgram

__all__ = ["GRANULARITIES", "from_onnx", "from_program", "from_relax", "from_torch"]

GRANULARITIES = ("op", "fused")


def from_relax(
    mod: tvm.IRModule,
    *,
    granularity: str = "op",
    name: str = "model",
    source: str = "relax",
    params_dedup: bool = True,
    tags: Mapping[str, Mapping[str, Any]] | None = None,
) -> Graph:
    """Build a graph from the ``main`` function of a Relax IRModule.

    Parameters
    ----------
    mod
        Relax module, as returned by TVM's frontends; not modified.
    granularity
        ``"op"`` (one node per Relax operator call) or ``"fused"`` (one node per
        fused TIR kernel after TVM's fusion passes).
    name
        Model name: the graph's name and the name used in error messages.
    source
        Recorded in ``meta["source"]`` (``"torch"``, ``"onnx"``, ``"relax"``).
    params_dedup
        ``meta["param_bytes"]`` counts every weight of the source module once (True):
        shared (tied) weights once, and the weights themselves rather than the folded
        values made from them (a transposed copy, FoldConstant's per-use copies).
        False: the sum of the nodes' ``param_bytes`` (what the kernels read).
    tags
        Relax variable name -> node attributes (``moe_block``, ``expert``, ``top_k``)
        for the node of that binding (:func:`graphs.torch_export.export_torch` makes
        them).

    Returns
    -------
    Graph
        A validated graph; ``meta`` has ``source``, ``granularity``,
        ``tvm_version``, ``dtype``, ``batch``, ``inputs``, ``outputs`` and
        ``param_bytes``.

    Raises
    ------
    GraphError
        For an unknown granularity, a module without a Relax ``main``, unsupported
        constructs (control flow, sub-function calls, dynamic shapes) or a failing
        TVM pass; the message names the model and the binding/operator.

    Examples
    --------
    >>> import torch
    >>> from hetsim.graphs.relax_import import from_torch
    >>> g = from_torch(torch.nn.Linear(8, 4), (torch.randn(2, 8),))
    >>> sorted(d["op"] for _, d in g.nodes(data=True))
    ['add', 'matmul', 'permute_dims']
    """
    if granularity not in GRANULARITIES:
        raise GraphError(f"unknown granularity {granularity!r}; choose from {list(GRANULARITIES)}")
    import tvm
    from tvm import relax

    # lazy: at the top it would load tvm with this module
    from hetsim.graphs import relax_ops

    if not isinstance(mod, tvm.IRModule):
        raise GraphError(f"model {name!r}: expected a tvm.IRModule, got {type(mod).__name__}")
    if not any(gv.name_hint == "main" for gv in mod.functions) or not isinstance(
        mod["main"], relax.Function
    ):
        raise GraphError(f"model {name!r}: the IRModule has no Relax function 'main'")
    walked, members, kernel_tags = lower(mod, granularity=granularity, name=name, tags=tags)
    walker = relax_ops.RelaxWalker(
        walked, model=name, members=members, tags={**(tags or {}), **kernel_tags}
    )
    outputs = walker.walk()
    graph = _assemble(walker, outputs, name=name)
    if params_dedup:  # each weight of the source once, tied weights included
        graph.meta["param_bytes"] = relax_ops.module_weight_bytes(mod)
    first = graph.meta["inputs"][0] if graph.meta["inputs"] else None
    dtype = first["dtype"] if first else (outputs[0].dtype if outputs else "float32")
    graph.meta = {
        "source": source,
        "granularity": granularity,
        "tvm_version": str(tvm.__version__),
        "dtype": dtype,
        "batch": first["shape"][0] if first and first["shape"] else None,
        **graph.meta,
    }
    return validate(graph)


def lower(
    mod: tvm.IRModule,
    *,
    granularity: str = "op",
    name: str = "model",
    exact: bool = False,
    tags: Mapping[str, Mapping[str, Any]] | None = None,
    evaluate: Any = None,
) -> tuple[tvm.IRModule, dict[str, list[str]] | None, dict[str, dict[str, Any]]]:
    """The module :func:`from_relax` walks for ``granularity``.

    ``take`` s by negative constant indices are normalised
    (:func:`graphs.fold.normalize_take`) and weight-only operators are folded into
    parameters (:func:`graphs.fold.fold_weight_only`); at ``fused`` granularity TVM's
    fusion pipeline then runs on the folded module (its own constant folding folds what
    legalization adds, e.g. a batch norm's ``sqrt(var + eps)``, but not operators
    without a legalization such as ``cumsum`` of a boolean mask, which the op-level fold
    takes). ``exact``: compute the folded values (for running the module), not only the
    structure, with ``evaluate`` (see :func:`graphs.fold.fold_weight_only`) and TVM's
    ``FoldConstant`` at ``fused``; the walked structure is the same. ``tags``: as for
    :func:`from_relax`
    (the fused kernels get those their members share).

    Returns
    -------
    (module, members, kernel_tags)
        The module to walk; for ``fused``, kernel name -> member op kinds, and kernel
        name -> the tags (``moe_block``, ``expert``) all its members share.
    """
    # lazy: at the top it would load tvm with this module
    from hetsim.graphs import fold

    try:
        mod = fold.normalize_take(mod)
    except Exception as e:  # any TVM failure becomes a GraphError
        raise GraphError(f"model {name!r}: normalising take indices failed: {first_line(e)}") from e
    try:
        if exact and evaluate is None:
            raise GraphError(f"model {name!r}: exact folding needs an evaluator")
        folded = fold.fold_weight_only(mod, evaluate=evaluate if exact else None, name=name)
        if granularity == "fused" and not exact:
            folded = fold.bind_placeholders(folded)
    except GraphError:
        raise
    except Exception as e:  # any TVM failure becomes a GraphError
        raise GraphError(f"model {name!r}: folding weight-only operators failed: {first_line(e)}") from e
    if granularity == "fused":  # what TVM's own constant folding misses is folded already
        return _fuse(folded, name, exact_fold=exact, tags=tags)
    return folded, None, {}


def _assemble(walker: Any, outputs: list[Any], *, name: str) -> Graph:
    """Graph of the walk: the nodes that feed an output, in binding order.

    Node ids are ``f"{i:04d}_{label}"`` (label: op kind, or kernel name when fused).
    Several outputs of one producer read by one consumer share the single edge
    between them: its ``bytes`` is their sum and ``output`` the lowest index.
    ``meta["param_bytes"]`` is the sum of the nodes' ``param_bytes``. Graph outputs
    that are not produced by a node (a returned input or constant) are not listed.
    """
    recs = walker.live_records(outputs)
    width = max(4, len(str(len(recs))))
    ids = {rec.index: f"{k:0{width}d}_{rec.label}" for k, rec in enumerate(recs)}
    g = Graph(name=name)
    for rec in recs:
        weights = {r.key: r.nbytes for r in rec.inputs if r.kind == "param" and not r.scalar}
        g.add_op(
            ids[rec.index],
            rec.op,
            inputs=[r.spec for r in rec.inputs],
            outputs=rec.outputs,
            attrs=rec.attrs,
            flops=rec.flops,
            param_bytes=sum(weights.values()),
            ops=rec.ops,
            name=rec.var,
            **(rec.tags or {}),
        )
    for rec in recs:
        per_src: dict[int, dict[int, int]] = {}
        for r in rec.inputs:
            if r.kind == "node":
                per_src.setdefault(r.key, {})[r.output] = r.nbytes
        for src, outs in per_src.items():
            g.add_edge(ids[src], ids[rec.index], bytes=sum(outs.values()), output=min(outs))
    g.meta["inputs"] = [
        {
            "name": r.key,
            "shape": list(r.shape),
            "dtype": r.dtype,
            "bytes": r.nbytes,
            "consumers": [ids[rec.index] for rec in recs if r in rec.inputs],
        }
        for r in walker.inputs
    ]
    g.meta["outputs"] = [
        {
            "node": ids[r.key],
            "output": r.output,
            "shape": list(r.shape),
            "dtype": r.dtype,
            "bytes": r.nbytes,
        }
        for r in outputs
        if r.kind == "node"
    ]
    g.meta["param_bytes"] = int(sum(d["param_bytes"] for _, d in g.nodes(data=True)))
    return g


def _fuse(
    mod: tvm.IRModule,
    name: str,
    *,
    exact_fold: bool = False,
    tags: Mapping[str, Mapping[str, Any]] | None = None,
) -> tuple[tvm.IRModule, dict[str, list[str]], dict[str, dict[str, Any]]]:
    """Run TVM's fusion pipeline; return the fused module, kernel -> member op kinds
    and kernel -> the tags its tagged members share (``tags``: by variable name).

    Member kinds are recorded exactly: each legalized kernel is traced back to the
    Relax operator whose binding it replaced, and each fused function lists the
    kernels FuseOps grouped into it (FuseTIR keeps the function's name).
    FoldConstant is replaced by :func:`graphs.relax_ops.shape_fold` (same kernels
    and grouping, without compiling every folded kernel) unless ``exact_fold``.
    """
    import tvm
    from tvm import relax

    # lazy: at the top it would load tvm with this module
    from hetsim.graphs import relax_ops

    def run(m: tvm.IRModule, passes: Sequence[str]) -> tvm.IRModule:
        for p in passes:
            try:
                m = getattr(relax.transform, p)()(m)
            except Exception as e:  # any TVM failure becomes a GraphError
                raise GraphError(f"model {name!r}: TVM pass {p} failed: {first_line(e)}") from e
        return m

    func = mod["main"]
    attrs = func.attrs or {}
    if "params" in attrs and "num_input" in attrs:
        # weights passed as parameters (keep_params_as_input): bind them, as a
        # deployment would, so that weight-only kernels fold away as with constants
        n_in = int(attrs["num_input"])
        binding = dict(zip(func.params[n_in:], attrs["params"]))
        try:
            mod = relax.transform.BindParams("main", binding)(mod)
        except Exception as e:  # any TVM failure becomes a GraphError
            raise GraphError(
                f"model {name!r}: binding weight parameters failed: {first_line(e)}"
            ) from e
    with tvm.target.Target({"kind": "llvm"}):
        decomposed = run(mod, ("DecomposeOpsForInference", "CanonicalizeBindings"))
        with relax_ops.quiet_native_stderr():
            legalized = run(decomposed, ("LegalizeOps",))
        op_of_var = {
            b.var: relax_ops.short_op_name(b.value.op.name)
            for b in _bindings(decomposed["main"])
            if isinstance(b.value, relax.Call) and isinstance(b.value.op, tvm.ir.Op)
        }
        kernel_op: dict[str, str] = {}
        for b in _bindings(legalized["main"]):
            v = b.value
            if (
                isinstance(v, relax.Call)
                and isinstance(v.op, tvm.ir.Op)
                and v.op.name == "relax.call_tir"
            ):
                kname = v.args[0].name_hint
                kernel_op.setdefault(
                    kname, op_of_var.get(b.var) or relax_ops.canonical_kernel_name(kname)
                )
        annotated = run(legalized, ("AnnotateTIROpPattern",))
        if exact_fold:
            folded = run(annotated, ("FoldConstant",))
        else:
            try:
                folded = relax_ops.shape_fold(annotated)
            except Exception as e:  # any TVM failure becomes a GraphError
                raise GraphError(
                    f"model {name!r}: constant folding failed: {first_line(e)}"
                ) from e
        grouped = run(folded, ("FuseOps",))
        members: dict[str, list[str]] = {k: [o] for k, o in kernel_op.items()}
        kernel_tags: dict[str, dict[str, Any]] = {}
        for gv, func in grouped.functions.items():
            if isinstance(func, relax.Function) and func.attrs and "Primitive" in func.attrs:
                found = [dict(tags[b.var.name]) for b in _bindings(func) if tags and b.var.name in tags]
                if found and all(t == found[0] for t in found):
                    kernel_tags[gv.name_hint] = found[0]
                members[gv.name_hint] = [
                    kernel_op.get(k, relax_ops.canonical_kernel_name(k))
                    for b in _bindings(func)
                    if isinstance(b.value, relax.Call) and b.value.op.name == "relax.call_tir"
                    for k in [b.value.args[0].name_hint]
                ]
        fused = run(grouped, ("FuseTIR", "DeadCodeElimination"))
    return fused, members, kernel_tags


def _bindings(func: Any) -> list[Any]:
    body = func.body
    if not hasattr(body, "blocks"):
        return []
    return [b for block in body.blocks for b in block.bindings]



def from_torch(
    module: torch.nn.Module,
    example_inputs: Sequence[Any] | Mapping[str, Any] | torch.Tensor,
    *,
    granularity: str = "op",
    name: str | None = None,
) -> Graph:
    """Import a PyTorch module via ``torch.export`` and TVM's PyTorch frontend.

    The export is rewritten where TVM's frontend cannot take it (non-contiguous
    views, mixture-of-experts grouped matmuls, outputs that hold caches: see
    :mod:`graphs.torch_export`), then weight-only operators are folded
    (:func:`lower`). The graph keeps what the executor needs in memory
    (``graph.program``: the module, its example inputs and the Relax module), so
    that ``runtime.execute(graph, plan, platform)`` runs it; JSON files do not keep it.

    Parameters
    ----------
    module
        The model; exported in eval mode (its training flags are restored afterwards).
    example_inputs
        Positional example inputs (a tensor or a tuple), or keyword inputs (a dict);
        their shapes become the graph's static shapes.
    granularity
        ``"op"`` or ``"fused"``, see :func:`from_relax`.
    name
        Model name; defaults to the module's class name, lowercased.

    Returns
    -------
    Graph
        As :func:`from_relax`; mixture-of-experts models also have ``meta["moe"]``
        (per block: ``experts``, ``top_k``, ``tokens`` per expert) and the node
        attributes ``moe_block``, ``expert``, ``top_k``.

    Raises
    ------
    GraphError
        When ``torch.export`` or the conversion fails, naming the model and, where
        TVM has no converter, the operator(s) (e.g. ``_linalg_svd.default``).

    Examples
    --------
    >>> import torch
    >>> m = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU())
    >>> g = from_torch(m, (torch.randn(1, 3, 16, 16),), granularity="fused")
    >>> [d["ops"] for _, d in g.nodes(data=True)]
    [['conv2d', 'add', 'relu']]
    """
    # lazy: at the top it would load torch with this module
    from hetsim.graphs.torch_export import export_torch

    name = name or type(module).__name__.lower()
    return from_program(export_torch(module, example_inputs, name=name), granularity=granularity, name=name)


def from_program(program: ImportedProgram, *, granularity: str = "op", name: str = "model") -> Graph:
    """The graph of a torch export (:func:`graphs.torch_export.export_torch`) at
    ``granularity``, as :func:`from_torch` returns it (``graph.program`` kept): one
    export gives the graphs of both granularities."""
    graph = from_relax(
        program.mod, granularity=granularity, name=name, source="torch", tags=program.tags
    )
    if program.moe:
        graph.meta["moe"] = [dict(b) for b in program.moe]
    graph.program = program
    return graph


def from_onnx(
    path_or_model: str | os.PathLike[str] | onnx.ModelProto,
    *,
    shapes: Mapping[str, Sequence[int]] | None = None,
    granularity: str = "op",
    name: str | None = None,
    example_inputs: Mapping[str, Any] | None = None,
) -> Graph:
    """Import an ONNX model (file or ``onnx.ModelProto``) via TVM's ONNX frontend.

    Parameters
    ----------
    path_or_model
        Path of a ``.onnx`` file, or a loaded model.
    shapes
        Input name -> static shape, for inputs with dynamic dimensions.
    granularity
        ``"op"`` or ``"fused"``, see :func:`from_relax`.
    name
        Model name; defaults to the file's stem, else the ONNX graph's name.
    example_inputs
        Input name -> the value to run the model on (``graph.program``, which the
        executor runs; checked against a single-device run, there being no reference
        module); default seeded random values.

    Raises
    ------
    GraphError
        For a missing file or one that is not an ONNX model (naming the file), an
        operator TVM cannot convert (naming it: LSTM, GRU, RNN, Loop and Scan have no
        converter in TVM 0.27), or dynamic shapes left unresolved.
    """
    import onnx

    if isinstance(path_or_model, str | os.PathLike):
        path = Path(path_or_model)
        name = name or path.stem
        if not path.is_file():
            raise GraphError(f"{path}: no such ONNX file")
        try:
            model = onnx.load(str(path))
        except Exception as e:  # protobuf DecodeError and friends
            raise GraphError(f"{path}: not an ONNX model ({first_line(e)})") from e
        if not model.graph.node or not model.opset_import:
            raise GraphError(f"{path}: not an ONNX model (no graph nodes or opset)")
    elif isinstance(path_or_model, onnx.ModelProto):
        model = path_or_model
        name = name or model.graph.name or "onnx_model"
    else:
        raise GraphError(
            f"from_onnx expects a path or an onnx.ModelProto, got {type(path_or_model).__name__}"
        )
    from tvm.relax.frontend.onnx import from_onnx as tvm_from_onnx

    shape_dict = {k: [int(d) for d in v] for k, v in shapes.items()} if shapes else None
    known = [i.name for i in model.graph.input]
    unknown = sorted(set(shape_dict or ()) - set(known))
    if unknown:
        raise GraphError(
            f"model {name!r}: shapes given for unknown input(s) {unknown}; inputs: {known}"
        )
    try:
        mod = tvm_from_onnx(model, shape_dict=shape_dict)
    except Exception as e:  # OpNotImplemented, KeyError, TVMError...
        match = re.search(r"not supported for frontend ONNX: (.*)", str(e))
        if match:
            raise GraphError(
                f"model {name!r}: TVM's ONNX frontend has no converter for operator(s) "
                f"{match.group(1).strip()}"
            ) from e
        raise GraphError(f"model {name!r}: TVM's ONNX frontend failed: {first_line(e)}") from e
    graph = from_relax(mod, granularity=granularity, name=name, source="onnx")
    graph.program = _onnx_program(graph, mod, example_inputs)
    return graph


def _onnx_program(graph: Graph, mod: tvm.IRModule, values: Mapping[str, Any] | None) -> Any:
    """The in-memory program of an ONNX graph: its Relax module and example inputs
    (``values``, else seeded random ones: floats from a standard normal, ints 0/1)."""
    import numpy as np

    # lazy: at the top it would load torch with this module
    from hetsim.graphs.torch_export import ImportedProgram

    rng = np.random.default_rng(0)
    inputs = {}
    for spec in graph.meta.get("inputs") or []:
        name, shape, dtype = spec["name"], spec["shape"], spec["dtype"]
        if values is not None and name in values:
            inputs[name] = np.ascontiguousarray(np.asarray(values[name]))
        elif dtype.startswith("float"):
            inputs[name] = rng.standard_normal(shape).astype(dtype)
        else:
            inputs[name] = rng.integers(0, 2, size=shape).astype(dtype)
    return ImportedProgram(mod, inputs)
