"""Model specs: one string naming any model the command line (and a script) can import.

=====================================  ===============================================
spec                                   model
=====================================  ===============================================
``resnet18``                           a zoo model (:mod:`graphs.zoo`)
``out/bert.json``                      a graph file written by ``Graph.to_json``
``model.onnx``                         an ONNX file (TVM's ONNX frontend)
``my_models.py:Net``                   a ``torch.nn.Module`` class (or a function that
                                       returns a module) in a Python file, built with
                                       the options as keyword arguments
=====================================  ===============================================

A ``file.py:Class`` spec imports that Python file: whatever code it holds runs, with the
rights of the user running hetsim, as ``python file.py`` would. Give only files you trust
(a graph JSON or an ONNX file runs no code of its own).

Inputs of ONNX and Python models are given as *input specs*:
``[NAME=]DIMS[:DTYPE[:HIGH]]``, e.g. ``1x3x224x224``, ``input_ids=2x16:int64:50257``.
Dims are the full shape (batch included); the dtype defaults to float32; integer inputs
are drawn in ``[0, HIGH)`` (default 2), float inputs from a standard normal, all from
``seed``. Named inputs are keyword arguments of ``forward`` (ONNX: graph input names);
unnamed ones are positional (ONNX: allowed when the model has one input).

Examples
--------
>>> parse_model_spec("models.py:TinyNet")
ModelSpec(kind='module', target='models.py', attr='TinyNet')
>>> parse_input_spec("input_ids=2x16:int64:96")
InputSpec(name='input_ids', shape=(2, 16), dtype='int64', high=96)
"""

from __future__ import annotations

import hashlib
import importlib.util
import math
import os
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hetsim.graphs.graph import DTYPE_BYTES, Graph, GraphError

__all__ = [
    "InputSpec",
    "ModelSpec",
    "build_module",
    "load_model_spec",
    "parse_input_spec",
    "parse_model_spec",
]

_MODULE_SPEC = re.compile(r"^(?P<path>.+\.py):(?P<attr>[A-Za-z_][A-Za-z0-9_.]*)$")


@dataclass(frozen=True)
class ModelSpec:
    """A parsed model spec: ``kind`` is ``zoo``, ``graph``, ``onnx`` or ``module``;
    ``target`` the zoo name or file; ``attr`` the class/function of a ``module``."""

    kind: str
    target: str
    attr: str | None = None


@dataclass(frozen=True)
class InputSpec:
    """One example input: optional name, full shape, dtype, and ``[0, high)`` for ints."""

    name: str | None
    shape: tuple[int, ...]
    dtype: str = "float32"
    high: int = 2


def parse_model_spec(text: str) -> ModelSpec:
    """Parse a model spec (see the module docstring).

    Raises
    ------
    GraphError
        For an empty spec, or a ``.py`` file given without ``:ClassName``.
    """
    text = str(text).strip()
    if not text:
        raise GraphError("empty model spec; give a zoo name, a graph .json, a .onnx file or file.py:Class")
    m = _MODULE_SPEC.match(text)
    if m:
        return ModelSpec("module", m["path"], m["attr"])
    if text.endswith(".py"):
        raise GraphError(f"model spec {text!r}: name the module class too, e.g. {text}:MyNet")
    if text.lower().endswith(".onnx"):
        return ModelSpec("onnx", text)
    if text.endswith(".json") or Path(text).is_file():
        return ModelSpec("graph", text)
    return ModelSpec("zoo", text)


#: largest example input of an ONNX or Python model, in bytes (it is allocated, and the
#: model run on it, to import the model)
MAX_INPUT_BYTES = 2**30


def parse_input_spec(text: str) -> InputSpec:
    """Parse ``[NAME=]DIMS[:DTYPE[:HIGH]]`` (e.g. ``x=1x3x32x32``, ``16:int64:96``).

    Raises
    ------
    GraphError
        Naming the malformed part.
    """
    raw = str(text).strip()
    name = None
    body = raw
    if "=" in raw:
        name, body = (s.strip() for s in raw.split("=", 1))
        if not name.isidentifier():
            raise GraphError(f"input spec {raw!r}: {name!r} is not an input name")
    parts = body.split(":")
    if len(parts) > 3:
        raise GraphError(f"input spec {raw!r}: expected [NAME=]DIMS[:DTYPE[:HIGH]]")
    try:
        shape = tuple(int(d) for d in parts[0].lower().replace(",", "x").split("x"))
    except ValueError:
        raise GraphError(f"input spec {raw!r}: dims {parts[0]!r} must look like 1x3x224x224") from None
    if not shape or any(d < 1 for d in shape):
        raise GraphError(f"input spec {raw!r}: every dim must be >= 1")
    dtype = parts[1] if len(parts) > 1 and parts[1] else "float32"
    if dtype not in DTYPE_BYTES:
        raise GraphError(f"input spec {raw!r}: unknown dtype {dtype!r}; known: {sorted(DTYPE_BYTES)}")
    size = math.prod(shape) * DTYPE_BYTES[dtype]
    if size > MAX_INPUT_BYTES:
        raise GraphError(f"input spec {raw!r}: {size:.3g} bytes, past the {MAX_INPUT_BYTES / 2**30:g} GiB an example "
                         "input may hold (the model runs on it once to be imported)")
    high = 2
    if len(parts) > 2:
        try:
            high = int(parts[2])
        except ValueError:
            high = 0
        if high < 1:
            raise GraphError(f"input spec {raw!r}: HIGH must be an int >= 1, got {parts[2]!r}")
    return InputSpec(name, shape, dtype, high)


def _python_module(path: str) -> Any:
    """Import the Python file ``path`` (once per path and content)."""
    p = Path(path)
    if not p.is_file():
        raise GraphError(f"{path}: no such Python file")
    digest = hashlib.sha256(str(p.resolve()).encode() + p.read_bytes()).hexdigest()[:12]
    mod_name = f"hetsim_user_{re.sub(r'[^A-Za-z0-9_]', '_', p.stem)}_{digest}"
    if mod_name in sys.modules:
        return sys.modules[mod_name]
    spec = importlib.util.spec_from_file_location(mod_name, p)
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    sys.path.insert(0, str(p.resolve().parent))  # its sibling imports
    try:
        spec.loader.exec_module(module)
    except Exception as e:  # the user's code raised
        del sys.modules[mod_name]
        raise GraphError(f"{path}: importing it failed: {type(e).__name__}: {e}") from e
    finally:
        sys.path.remove(str(p.resolve().parent))
    return module


def build_module(
    spec: str | ModelSpec,
    inputs: Sequence[str | InputSpec],
    *,
    options: Mapping[str, Any] | None = None,
    seed: int = 0,
) -> tuple[Any, tuple[Any, ...] | dict[str, Any]]:
    """Build the torch module of a ``file.py:Class`` spec (seeded weights, eval mode)
    and its example inputs (a tuple, or a dict when the inputs are named).

    Raises
    ------
    GraphError
        For a missing file or name, a name that is not a module class or factory,
        constructor options it does not take, or no input specs.
    """
    import torch

    ms = parse_model_spec(spec) if isinstance(spec, str) else spec
    if ms.kind != "module":
        raise GraphError(f"model spec {ms.target!r} is not a file.py:Class spec")
    where = f"{ms.target}:{ms.attr}"
    obj: Any = _python_module(ms.target)
    for part in str(ms.attr).split("."):
        if not hasattr(obj, part):
            raise GraphError(f"{where}: {ms.target} has no {ms.attr!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise GraphError(f"{where}: not a class or function")
    specs = [parse_input_spec(s) if isinstance(s, str) else s for s in inputs]
    if not specs:
        raise GraphError(f"{where}: give the example input shape(s), e.g. --input-shape 1x3x224x224")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        try:
            module = obj(**dict(options or {}))
        except TypeError as e:
            raise GraphError(f"{where}: cannot build it with options {dict(options or {})}: {e}") from e
    if not isinstance(module, torch.nn.Module):
        raise GraphError(f"{where}: returned a {type(module).__name__}, not a torch.nn.Module")
    values = _example_values(specs, seed)
    named = [s.name is not None for s in specs]
    if any(named) and not all(named):
        raise GraphError(f"{where}: name every input (NAME=DIMS) or none")
    if all(named):
        return module.eval(), {s.name: v for s, v in zip(specs, values)}
    return module.eval(), tuple(values)


def _example_values(specs: Sequence[InputSpec], seed: int) -> list[Any]:
    import torch

    gen = torch.Generator().manual_seed(seed)
    out = []
    for s in specs:
        if s.dtype.startswith(("float", "bfloat")):
            out.append(torch.randn(s.shape, generator=gen).to(getattr(torch, s.dtype)))
        elif s.dtype == "bool":
            out.append(torch.rand(s.shape, generator=gen) < 0.5)
        else:
            out.append(torch.randint(0, s.high, s.shape, generator=gen).to(getattr(torch, s.dtype)))
    return out


def load_model_spec(
    spec: str | ModelSpec,
    *,
    inputs: Sequence[str | InputSpec] = (),
    options: Mapping[str, Any] | None = None,
    batch: int | None = None,
    granularity: str | None = None,
    seed: int = 0,
    cache: str | os.PathLike[str] | bool | None = None,
    trust_model_code: bool = False,
) -> Graph:
    """Import the model a spec names as a graph.

    Parameters
    ----------
    spec
        A model spec (see the module docstring).
    inputs
        Input specs of ONNX and Python models (``[NAME=]DIMS[:DTYPE[:HIGH]]``).
    options
        Zoo model options, or the Python model's constructor keyword arguments.
    batch
        Batch size of a zoo model (``None``: 1). ONNX and Python models take theirs
        from the input dims, a graph file has its own: another batch is refused, never
        ignored.
    granularity
        ``"op"`` or ``"fused"`` (``None``: ``"op"``, a graph file's own); a graph file
        of another granularity is refused, never returned as it is.
    seed
        Seed of the weights and example inputs.
    cache
        Zoo graph cache (see :func:`graphs.zoo.load`).
    trust_model_code
        A graph file's ``meta["model_spec"]`` may name Python model code
        (``file.py:Class``), which the executor imports to rebuild the model: only with
        ``True`` (the CLI's ``--trust-model-code``) is the loaded graph marked so
        (:attr:`Graph.model_code_trusted`). A ``file.py:Class`` spec named here is the
        caller's own choice of code: its graph is marked trusted.

    Returns
    -------
    Graph
        ONNX and Python models keep their program in memory (``graph.program``: the
        executor runs them) and record the spec in ``meta["model_spec"]`` (``spec``,
        ``inputs``, ``options``, ``seed``), from which a graph file can be rebuilt.

    Raises
    ------
    GraphError
        For a malformed spec, a missing file, inputs that do not fit.
    """
    # import cycles: hetsim.graphs.graph -> hetsim.graphs -> hetsim.graphs.model_spec;
    # hetsim.graphs.relax_import -> hetsim.graphs -> hetsim.graphs.model_spec
    from hetsim.graphs.graph import load
    from hetsim.graphs.relax_import import from_onnx, from_torch

    ms = parse_model_spec(spec) if isinstance(spec, str) else spec
    options = dict(options or {})
    specs = [parse_input_spec(s) if isinstance(s, str) else s for s in inputs]
    if ms.kind in ("zoo", "graph") and specs:
        raise GraphError(f"model {ms.target!r}: input shapes are for ONNX and file.py:Class models only")
    if ms.kind == "graph":
        # import cycle: hetsim.graphs.trace -> hetsim.graphs -> hetsim.graphs.model_spec
        from hetsim.graphs.trace import from_trace, is_trace_file

        if options:
            raise GraphError(f"model {ms.target!r}: a graph file takes no options ({sorted(options)})")
        if is_trace_file(ms.target):
            return from_trace(ms.target)
        loaded = load(ms.target)
        own_batch = loaded.meta.get("batch") or 1
        if batch is not None and batch != own_batch:
            raise GraphError(f"model {ms.target!r}: batch {batch} asked of a graph file of batch {own_batch}: "
                             "a graph file is simulated as it was saved (import the model again at that batch)")
        own_gran = loaded.meta.get("granularity", "op")
        if granularity is not None and granularity != own_gran:
            raise GraphError(f"model {ms.target!r}: granularity {granularity!r} asked of a graph file of "
                             f"granularity {own_gran!r} (import the model again at that granularity)")
        loaded.model_code_trusted = bool(trust_model_code)
        return loaded
    if ms.kind == "zoo":
        # import cycle: hetsim.graphs.zoo -> hetsim.graphs -> hetsim.graphs.model_spec (and torch)
        from hetsim.graphs import zoo

        return zoo.load(ms.target, batch=1 if batch is None else batch, granularity=granularity or "op", seed=seed,
                        cache=cache, **options)
    if batch not in (None, 1):
        raise GraphError(f"model {ms.target!r}: batch is for zoo models; an ONNX or file.py:Class model takes its "
                         "batch from its input shapes (--input-shape)")
    granularity = granularity or "op"
    record = {
        "spec": ms.target if ms.kind == "onnx" else f"{ms.target}:{ms.attr}",
        "inputs": [_unparse(s) for s in specs],
        "options": options,
        "seed": seed,
    }
    if ms.kind == "onnx":
        if options:
            raise GraphError(f"model {ms.target!r}: ONNX models take no options ({sorted(options)})")
        shapes = _onnx_shapes(ms.target, specs)
        values = None
        if shapes:
            arrays = _example_values(specs, seed)
            values = {n: a.numpy() for n, a in zip(shapes, arrays)}
        graph = from_onnx(ms.target, shapes=shapes, granularity=granularity, example_inputs=values)
    else:
        module, example = build_module(ms, specs, options=options, seed=seed)
        graph = from_torch(module, example, granularity=granularity, name=str(ms.attr).lower())
    graph.meta["model_spec"] = record
    graph.model_code_trusted = ms.kind == "module"  # the code the caller named
    return graph


def _unparse(s: InputSpec) -> str:
    dims = "x".join(str(d) for d in s.shape)
    return f"{s.name + '=' if s.name else ''}{dims}:{s.dtype}:{s.high}"


def _onnx_shapes(path: str, specs: Sequence[InputSpec]) -> dict[str, list[int]] | None:
    if not specs:
        return None
    if all(s.name for s in specs):
        return {str(s.name): list(s.shape) for s in specs}
    if len(specs) > 1 or specs[0].name:
        raise GraphError(f"model {path!r}: name each input (NAME=DIMS) when giving several")
    import onnx

    try:
        model = onnx.load(path, load_external_data=False)
    except Exception as e:  # protobuf errors
        raise GraphError(f"{path}: not an ONNX model ({type(e).__name__})") from e
    weights = {t.name for t in model.graph.initializer}
    names = [i.name for i in model.graph.input if i.name not in weights]
    if len(names) != 1:
        raise GraphError(f"model {path!r} has inputs {names}: name them (NAME=DIMS)")
    return {names[0]: list(specs[0].shape)}
