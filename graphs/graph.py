"""The dataflow graph: a thin, validated wrapper around :class:`networkx.DiGraph`.

Node attributes (``docs/architecture.md`` describes the data model):

======================  =====================================================
``op``                  operator kind (``conv2d``, ``matmul``, ...; ``fused``)
``ops``                 for ``fused`` nodes: list of member operator kinds
``inputs``/``outputs``  lists of ``{"shape": [...], "dtype": "float32"}``
``attrs``               JSON-safe operator attributes
``flops``               floating point operations (float >= 0)
``bytes``               bytes read + written by the kernel
``param_bytes``         bytes of constant weights the op reads
``step``                time step of a recurrent model (optional)
``layer``               source module path (optional)
``name``                the Relax variable the node was bound to (optional)
``moe_block``           mixture-of-experts block the node belongs to (optional)
``expert``              expert (within ``moe_block``) whose work the node does
                        (optional; an expert's slice and matmuls)
``top_k``               experts each token is routed to, on the router's
                        ``topk`` node of ``moe_block`` (optional)
======================  =====================================================

Edge attributes: ``bytes`` (size of the tensor that flows along the edge) and
``output`` (which output of the producer it is, default 0). Two edges leaving one
node with the same ``output`` carry the same tensor: a cross-device transfer moves
it once per destination device.

``meta`` holds ``source``, ``batch``, ``dtype``, ``granularity``, ``tvm_version``,
``inputs`` (graph inputs: ``{"name", "shape", "dtype", "bytes", "consumers"}``) and
``outputs`` (graph outputs: ``{"node", "output", "shape", "dtype", "bytes"}``), and for
mixture-of-experts models ``moe`` (one entry per block: ``block``, ``experts``,
``top_k``, ``tokens`` routed to each expert by the example inputs).

``Graph.program`` (not saved in JSON) holds, for a graph imported by
:func:`graphs.relax_import.from_torch` in this process, the exported model
(:class:`graphs.torch_export.ImportedProgram`) that the executor runs.
"""

from __future__ import annotations

import copy
import json
import math
import numbers
import os
import pickle
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import networkx as nx

from hetsim.graphs.bulk_check import EdgeColumns, plainly_valid
from hetsim.graphs.files import atomic_write
from hetsim.graphs.topo_order import first_ready_order

__all__ = [
    "Graph",
    "GraphError",
    "SCHEMA_VERSION",
    "validate",
    "load",
    "DTYPE_BYTES",
    "tensor_bytes",
    "atomic_write",
    "check_io",
    "VIEW_OPS",
    "first_line",
]

SCHEMA_VERSION = 1

DTYPE_BYTES: dict[str, int] = {
    "float64": 8,
    "float32": 4,
    "float16": 2,
    "bfloat16": 2,
    "int64": 8,
    "int32": 4,
    "int16": 2,
    "int8": 1,
    "uint8": 1,
    "bool": 1,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
}

#: operator kinds that only re-index a tensor in place: TVM runs them as views of
#: their input (no kernel), cost models price them at zero (no launch, no dispatch)
#: and the executors skip them.
#: ``weight`` is the home of a constant tensor in memory (the source of a weight
#: streamed to another device, :func:`graphs.llm.stream_weights`): no kernel either.
VIEW_OPS = frozenset({"reshape", "expand_dims", "squeeze", "flatten", "weight"})

_REQUIRED_NODE_KEYS = ("op", "inputs", "outputs", "attrs", "flops", "bytes", "param_bytes")
_OPTIONAL_NODE_KEYS = ("step", "layer", "ops", "name", "moe_block", "expert", "top_k")
_INT_NODE_KEYS = ("step", "moe_block", "expert", "top_k")
_NODE_KEYS = frozenset(_REQUIRED_NODE_KEYS + _OPTIONAL_NODE_KEYS)


class GraphError(ValueError):
    """A graph, a graph file or a model import is invalid; the message names the culprit."""


def first_line(e: BaseException) -> str:
    """``"TypeName: first line of the message"`` (at most 300 characters), for one-line
    errors that wrap what TVM or torch raised (their messages run long)."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    text = lines[0] if lines else ""
    if len(text) > 300:
        text = text[:297] + "..."
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def tensor_bytes(shape: Iterable[int], dtype: str) -> int:
    """Size in bytes of a dense tensor.

    >>> tensor_bytes([1, 3, 224, 224], "float32")
    602112
    """
    try:
        width = DTYPE_BYTES[dtype]
    except KeyError:
        raise GraphError(f"unknown dtype {dtype!r}; known: {sorted(DTYPE_BYTES)}") from None
    n = 1
    for d in shape:
        n *= int(d)
    return n * width


class Graph:
    """A DNN dataflow graph: a :class:`networkx.DiGraph` plus ``name`` and ``meta``.

    Parameters
    ----------
    nx_graph
        The underlying graph (taken as is, not copied). A new empty one if None.
    name
        Model name.
    meta
        Graph-level metadata (source, batch, dtype, granularity, inputs, outputs...).

    Examples
    --------
    >>> g = Graph(name="tiny")
    >>> g.add_op("a", "relu", inputs=[([1, 4], "float32")], outputs=[([1, 4], "float32")])
    >>> g.add_op("b", "relu", inputs=[([1, 4], "float32")], outputs=[([1, 4], "float32")])
    >>> g.add_edge("a", "b")
    >>> g.number_of_nodes(), g.edges["a", "b"]["bytes"]
    (2, 16)
    """

    def __init__(
        self,
        nx_graph: nx.DiGraph | None = None,
        *,
        name: str = "graph",
        meta: Mapping[str, Any] | None = None,
    ) -> None:
        self.nx: nx.DiGraph = nx_graph if nx_graph is not None else nx.DiGraph()
        self.name = name
        self.meta: dict[str, Any] = dict(meta or {})
        #: the in-memory source model (``from_torch``); not saved, kept by :meth:`copy`
        self.program: Any = None
        #: whether the Python model code its ``meta["model_spec"]`` names may be imported to
        #: rebuild its model (the executor, the tvm backend): only when the user said so
        #: (:func:`graphs.load_model_spec` of a ``file.py:Class`` spec they named, or of a
        #: graph file with ``trust_model_code=True``: the CLI's ``--trust-model-code``); a
        #: graph file runs no code by itself. Not saved, kept by :meth:`copy`
        self.model_code_trusted: bool = False

    # ----------------------------------------------------------------- building
    def add_op(
        self,
        node: str,
        op: str,
        *,
        inputs: Iterable[Any] = (),
        outputs: Iterable[Any] = (),
        attrs: Mapping[str, Any] | None = None,
        flops: float = 0.0,
        bytes: int | None = None,  # noqa: A002 - schema key
        param_bytes: int = 0,
        **extra: Any,
    ) -> None:
        """Add an operator node.

        ``inputs``/``outputs`` are ``{"shape", "dtype"}`` dicts or ``(shape, dtype)``
        pairs. ``bytes`` defaults to the sum of input and output tensor sizes (which
        includes weights when they are listed among the inputs).
        """
        if not isinstance(node, str):
            raise GraphError(f"node id {node!r:.60} must be a string")
        if node in self.nx:
            raise GraphError(f"duplicate node id {node!r}")
        ins = [_tensor_spec(f"node {node!r}: inputs", t) for t in inputs]
        outs = [_tensor_spec(f"node {node!r}: outputs", t) for t in outputs]
        _check_tensor_list(f"node {node!r}", "inputs", ins)  # what a file must hold: what the API accepts
        _check_tensor_list(f"node {node!r}", "outputs", outs)
        if bytes is None:
            bytes = sum(tensor_bytes(t["shape"], t["dtype"]) for t in ins + outs)  # noqa: A001
        for key, value in (("flops", flops), ("bytes", bytes), ("param_bytes", param_bytes)):
            _check_number(f"node {node!r}", key, value)
        data = {
            "op": op,
            "inputs": ins,
            "outputs": outs,
            "attrs": dict(attrs or {}),
            "flops": float(flops),
            "bytes": int(bytes),
            "param_bytes": int(param_bytes),
        }
        for k, v in extra.items():
            if v is not None:
                data[k] = v
        self.nx.add_node(node, **data)

    def add_edge(self, src: str, dst: str, *, bytes: int | None = None, output: int = 0) -> None:  # noqa: A002
        """Add a tensor edge; ``bytes`` defaults to the size of ``src``'s output ``output``.

        ``output`` must be one of ``src``'s declared outputs (any index >= 0 when
        ``src`` declares none and ``bytes`` is given: a synthetic graph)."""
        for n in (src, dst):
            if n not in self.nx:
                raise GraphError(f"edge {src!r} -> {dst!r}: unknown node {n!r}")
        outs = self.nx.nodes[src]["outputs"]
        if (bytes is None or outs) and not 0 <= output < len(outs):
            raise GraphError(f"edge {src!r} -> {dst!r}: node {src!r} has no output {output}")
        if bytes is None:
            bytes = tensor_bytes(outs[output]["shape"], outs[output]["dtype"])  # noqa: A001
        _check_number(f"edge {src!r} -> {dst!r}", "bytes", bytes)
        self.nx.add_edge(src, dst, bytes=int(bytes), output=int(output))

    # ------------------------------------------------------------------ queries
    @property
    def nodes(self):  # noqa: D401 - networkx view
        """Node view of the underlying graph (``g.nodes[n]["flops"]``)."""
        return self.nx.nodes

    @property
    def edges(self):
        """Edge view of the underlying graph (``g.edges[u, v]["bytes"]``)."""
        return self.nx.edges

    def __len__(self) -> int:
        return self.nx.number_of_nodes()

    def __iter__(self) -> Iterator[str]:
        return iter(self.nx)

    def __contains__(self, node: object) -> bool:
        return node in self.nx

    def number_of_nodes(self) -> int:
        return self.nx.number_of_nodes()

    def number_of_edges(self) -> int:
        return self.nx.number_of_edges()

    def predecessors(self, node: str) -> Iterator[str]:
        return self.nx.predecessors(node)

    def successors(self, node: str) -> Iterator[str]:
        return self.nx.successors(node)

    def topological_order(self) -> list[str]:
        """Nodes in a deterministic topological order (ties broken by insertion order):
        Kahn's algorithm taking the ready node inserted first, on the nodes' positions."""
        names = list(self.nx)
        get = dict(zip(names, range(len(names)))).__getitem__
        succ = [[get(v) for v in nbrs] for _, nbrs in self.nx.adjacency()]
        if all(i < j for i, lst in enumerate(succ) for j in lst):
            return names  # every edge goes forward: the insertion order
        order = first_ready_order(succ)
        if len(order) < len(names):
            cycle = nx.find_cycle(self.nx)
            raise GraphError(
                f"graph {self.name!r} has a cycle: {' -> '.join(str(u) for u, _ in cycle)}"
            )
        return [names[i] for i in order]

    @property
    def total_flops(self) -> float:
        return float(sum(d["flops"] for _, d in self.nx.nodes(data=True)))

    @property
    def param_bytes(self) -> int:
        """Weight bytes of the model (``meta["param_bytes"]`` when the importer
        deduplicated shared constants, else the sum over nodes)."""
        if "param_bytes" in self.meta:
            return int(self.meta["param_bytes"])
        return int(sum(d["param_bytes"] for _, d in self.nx.nodes(data=True)))

    def copy(self) -> Graph:
        """A deep copy (attribute dicts included; :attr:`program` is shared)."""
        g = Graph(_deep_copy(self.nx), name=self.name, meta=_deep_copy(self.meta))
        g.program = self.program
        g.model_code_trusted = self.model_code_trusted
        return g

    def __repr__(self) -> str:
        gran = self.meta.get("granularity", "?")
        return (
            f"Graph({self.name!r}, nodes={self.number_of_nodes()}, "
            f"edges={self.number_of_edges()}, granularity={gran!r}, "
            f"gflops={self.total_flops / 1e9:.3f})"
        )

    # ---------------------------------------------------------------- (de)serialise
    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict (the file format of :meth:`to_json`)."""
        return {
            "hetsim_graph": SCHEMA_VERSION,
            "name": self.name,
            "meta": self.meta,
            "nodes": [{"id": n, **d} for n, d in self.nx.nodes(data=True)],
            "edges": [{"src": u, "dst": v, **d} for u, v, d in self.nx.edges(data=True)],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str = "<dict>") -> Graph:
        """Rebuild a graph from :meth:`to_dict` output, then :func:`validate` it."""
        if not isinstance(data, Mapping) or "hetsim_graph" not in data:
            raise GraphError(f"{source}: not a hetsim graph file (no 'hetsim_graph' key)")
        version = data["hetsim_graph"]
        if version != SCHEMA_VERSION:
            raise GraphError(
                f"{source}: graph schema version {version!r} is not supported "
                f"(this hetsim reads version {SCHEMA_VERSION})"
            )
        for key in ("nodes", "edges"):
            if not isinstance(data.get(key), list):
                raise GraphError(f"{source}: missing or malformed {key!r} list")
        g = nx.DiGraph()
        for i, nd in enumerate(data["nodes"]):
            if not isinstance(nd, Mapping) or "id" not in nd:
                raise GraphError(f"{source}: node #{i} has no 'id'")
            nid = nd["id"]
            if not isinstance(nid, str):
                raise GraphError(f"{source}: node #{i}: id {nid!r:.60} must be a string")
            if nid in g:
                raise GraphError(f"{source}: duplicate node id {nid!r}")
            g.add_node(nid, **{k: v for k, v in nd.items() if k != "id"})
        for i, ed in enumerate(data["edges"]):
            if not isinstance(ed, Mapping) or "src" not in ed or "dst" not in ed:
                raise GraphError(f"{source}: edge #{i} needs 'src' and 'dst'")
            u, v = ed["src"], ed["dst"]
            for n in (u, v):
                if not isinstance(n, str):
                    raise GraphError(f"{source}: edge #{i}: node id {n!r:.60} must be a string")
                if n not in g:
                    raise GraphError(f"{source}: edge {u!r} -> {v!r} names unknown node {n!r}")
            g.add_edge(u, v, **{k: w for k, w in ed.items() if k not in ("src", "dst")})
        meta = data.get("meta") or {}
        if not isinstance(meta, Mapping):
            raise GraphError(f"{source}: 'meta' must be a mapping, got {type(meta).__name__} {meta!r:.60}")
        graph = cls(g, name=str(data.get("name", "graph")), meta=dict(meta))
        validate(graph, source=source)
        return graph

    def to_json(self, path: str | os.PathLike[str]) -> Path:
        """Write the graph as JSON, atomically (a crash never leaves a truncated file).
        The graph is validated first: no file is written that :func:`load` would refuse."""
        validate(self)
        return atomic_write(path, lambda fh: json.dump(self.to_dict(), fh, separators=(",", ":"),
                                                       default=json_scalar))



def json_scalar(value: Any) -> Any:
    """``json.dump``'s ``default``: a numpy scalar (set through ``graph.nodes[n]``) as the
    Python number it holds; anything else is refused as JSON refuses it."""
    if hasattr(value, "item") and callable(value.item) and getattr(value, "shape", None) == ():
        return value.item()
    raise TypeError(f"{type(value).__name__} {value!r:.60} is not JSON data")


def load(path: str | os.PathLike[str]) -> Graph:
    """Load a graph written by :meth:`Graph.to_json`.

    Raises :class:`GraphError` for a missing, truncated or malformed file.
    """
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise GraphError(f"{path}: no such graph file") from None
    except IsADirectoryError:
        raise GraphError(f"{path}: is a folder, not a graph file") from None
    except UnicodeDecodeError:
        raise GraphError(f"{path}: not a hetsim graph file (binary content)") from None
    except OSError as e:
        raise GraphError(f"{path}: cannot read the graph file ({e.strerror or e})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise GraphError(f"{path}: malformed or truncated JSON ({e.msg}: line {e.lineno} column {e.colno})") from None
    except (ValueError, RecursionError) as e:  # an integer of thousands of digits, nesting too deep
        raise GraphError(f"{path}: malformed JSON ({first_line(e)})") from None
    return Graph.from_dict(data, source=str(path))


def _deep_copy(value: Any) -> Any:
    """``copy.deepcopy(value)``, through a pickle where it pickles: the same copy (shared
    objects stay shared, dicts keep their order) in a third of the time."""
    try:
        return pickle.loads(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
    except (pickle.PicklingError, TypeError, AttributeError):
        return copy.deepcopy(value)


def _tensor_spec(where: str, t: Any) -> dict[str, Any]:
    """``{"shape": [...], "dtype": ...}`` of a tensor given as such a mapping or a
    ``(shape, dtype)`` pair, its dims made ints (numpy's included)."""
    try:
        if isinstance(t, Mapping):
            shape, dtype = t["shape"], t["dtype"]
        else:
            shape, dtype = t
        dims = list(shape)
    except (KeyError, TypeError, ValueError):
        raise GraphError(f"{where}: a tensor must be {{'shape': [...], 'dtype': ...}} or (shape, dtype), "
                         f"got {t!r:.60}") from None
    if not all(isinstance(d, numbers.Integral) and not isinstance(d, bool) for d in dims):
        raise GraphError(f"{where}: shape {dims!r:.60} is not a list of ints >= 0")
    return {"shape": [int(d) for d in dims], "dtype": str(dtype)}


def _check_tensor_list(where: str, key: str, value: Any) -> None:
    if not isinstance(value, list):
        raise GraphError(f"{where}: {key!r} must be a list of tensors, got {type(value).__name__}")
    for j, t in enumerate(value):
        if not isinstance(t, Mapping) or "shape" not in t or "dtype" not in t:
            raise GraphError(f"{where}: {key}[{j}] must be {{'shape': [...], 'dtype': ...}}")
        if not isinstance(t["shape"], list) or not all(
            isinstance(d, numbers.Integral) and not isinstance(d, bool) and d >= 0 for d in t["shape"]
        ):
            raise GraphError(f"{where}: {key}[{j}] shape {t['shape']!r} is not a list of ints >= 0")
        if not isinstance(t["dtype"], str) or t["dtype"] not in DTYPE_BYTES:
            raise GraphError(f"{where}: {key}[{j}] has unknown dtype {t['dtype']!r}")


def _check_number(where: str, key: str, value: Any) -> None:
    """A finite number >= 0 (not a bool, within float range): what ``flops``, ``bytes``
    and ``param_bytes`` of a node and ``bytes`` of an edge must be, from the API
    (:meth:`Graph.add_op`, :meth:`Graph.add_edge`) and from a file (:func:`validate`)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise GraphError(f"{where}: {key!r} must be a number, got {value!r:.60}")
    try:
        finite = math.isfinite(float(value))
    except OverflowError:
        finite = False
    if not finite or value < 0:
        raise GraphError(f"{where}: {key!r} must be finite and >= 0, got {value!r:.60}")


def validate(graph: Graph, *, source: str | None = None, columns: EdgeColumns | None = None) -> Graph:
    """Check the node/edge schema and acyclicity; return the graph.

    ``columns``: the graph's :func:`graphs.bulk_check.edge_columns` when the caller
    has read them (the simulator, which reads them for its tables too).

    Raises
    ------
    GraphError
        naming the offending node or edge.
    """
    where0 = source or f"graph {graph.name!r}"
    if not isinstance(graph.nx, nx.DiGraph) or graph.nx.is_multigraph():
        raise GraphError(f"{where0}: underlying graph must be a networkx.DiGraph")
    if plainly_valid(graph, _REQUIRED_NODE_KEYS, _NODE_KEYS, _INT_NODE_KEYS, frozenset(DTYPE_BYTES), columns):
        check_io(graph, source=source)  # the node-by-node checks below would pass
        return graph
    for n, d in graph.nx.nodes(data=True):
        where = f"{where0}: node {n!r}"
        if not isinstance(n, str):
            raise GraphError(f"{where}: node ids must be strings")
        missing = [k for k in _REQUIRED_NODE_KEYS if k not in d]
        if missing:
            raise GraphError(f"{where}: missing attribute(s) {missing}")
        unknown = sorted(set(d) - _NODE_KEYS)
        if unknown:
            raise GraphError(f"{where}: unknown attribute(s) {unknown}")
        if not isinstance(d["op"], str) or not d["op"]:
            raise GraphError(f"{where}: 'op' must be a non-empty string")
        _check_tensor_list(where, "inputs", d["inputs"])
        _check_tensor_list(where, "outputs", d["outputs"])
        if not isinstance(d["attrs"], Mapping):
            raise GraphError(f"{where}: 'attrs' must be a dict")
        for k in ("flops", "bytes", "param_bytes"):
            _check_number(where, k, d[k])
        if d["op"] == "fused" and not isinstance(d.get("ops"), list):
            raise GraphError(f"{where}: a fused node needs an 'ops' list")
        for k in _INT_NODE_KEYS:
            if k in d and (isinstance(d[k], bool) or not isinstance(d[k], numbers.Integral)):
                raise GraphError(f"{where}: {k!r} must be an int, got {d[k]!r}")
    for u, v, d in graph.nx.edges(data=True):
        where = f"{where0}: edge {u!r} -> {v!r}"
        if "bytes" not in d:
            raise GraphError(f"{where}: missing 'bytes'")
        _check_number(where, "bytes", d["bytes"])
        out = d.get("output", 0)
        if isinstance(out, bool) or not isinstance(out, numbers.Integral) or out < 0:
            raise GraphError(f"{where}: 'output' must be an int >= 0, got {out!r}")
        n_out = len(graph.nx.nodes[u]["outputs"])
        if n_out and out >= n_out:
            raise GraphError(f"{where}: 'output' {out} is beyond the {n_out} output(s) of node {u!r}")
    if not nx.is_directed_acyclic_graph(graph.nx):
        cycle = nx.find_cycle(graph.nx)
        raise GraphError(f"{where0}: cycle {' -> '.join(str(u) for u, _ in cycle)} -> {cycle[0][0]}")
    check_io(graph, source=source)
    return graph


def check_io(graph: Graph, *, source: str | None = None) -> None:
    """Check ``meta["inputs"]`` and ``meta["outputs"]`` against the graph.

    Graph inputs: a list of ``{"name": str, "bytes": int >= 0, "consumers": [node,
    ...]}`` (``name`` and ``consumers`` optional); graph outputs: a list of
    ``{"node": node, "output": int, "bytes": int >= 0}`` (``output`` default 0,
    one of the node's declared outputs; ``bytes`` optional). O(inputs + outputs +
    consumers): the simulator and the schedulers call it on every graph they get.

    Raises
    ------
    GraphError
        naming the entry and the key, e.g. ``meta.inputs[0] ('x'): 'bytes' must be
        a number, got 'big'``.
    """
    where0 = source or f"graph {graph.name!r}"
    if not isinstance(graph.meta, Mapping):
        raise GraphError(f"{where0}: 'meta' must be a mapping, got {type(graph.meta).__name__}")
    nodes = graph.nx.nodes
    for key in ("inputs", "outputs"):
        specs = graph.meta.get(key)
        if specs is None:
            continue
        if not isinstance(specs, list):
            raise GraphError(f"{where0}: meta.{key} must be a list of tables, got {specs!r:.60}")
        for j, spec in enumerate(specs):
            where = f"{where0}: meta.{key}[{j}]"
            if not isinstance(spec, Mapping):
                raise GraphError(f"{where} must be a table, got {spec!r:.60}")
            if key == "inputs":
                where += f" ({spec.get('name', '?')!r})"
                if not isinstance(spec.get("name", ""), str):
                    raise GraphError(f"{where}: 'name' must be a string")
                if "bytes" not in spec:
                    raise GraphError(f"{where}: missing 'bytes'")
                _check_number(where, "bytes", spec["bytes"])
                consumers = spec.get("consumers") or []
                if not isinstance(consumers, list):
                    raise GraphError(f"{where}: 'consumers' must be a list of node ids, got {consumers!r:.60}")
                for c in consumers:
                    if not isinstance(c, str) or c not in nodes:
                        raise GraphError(f"{where} names unknown consumer {c!r}")
                continue
            node = spec.get("node")
            if not isinstance(node, str) or node not in nodes:
                raise GraphError(f"{where} names unknown node {node!r}")
            out = spec.get("output", 0)
            n_out = len(nodes[node]["outputs"])
            if isinstance(out, bool) or not isinstance(out, numbers.Integral) or out < 0 or (n_out and out >= n_out):
                raise GraphError(f"{where}: 'output' {out!r} is not one of the {n_out} output(s) of node {node!r}")
            if "bytes" in spec:
                _check_number(where, "bytes", spec["bytes"])

