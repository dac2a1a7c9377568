"""Profiler traces in: a PyTorch profiler (Kineto) trace of one step becomes a graph
with its measured host and device times (:func:`from_trace`).

``kineto`` reads the file, ``step`` picks the step, ``build`` makes the graph,
``execution_trace`` adds the tensor dependencies of PyTorch's execution trace.
"""

from __future__ import annotations

import os

from hetsim.graphs.graph import Graph, validate
from hetsim.graphs.trace.build import COMPUTE_CLASSES, build_graph, kernel_class, runtime_role
from hetsim.graphs.trace.kineto import KinetoTrace, TraceWarning, read_kineto
from hetsim.graphs.trace.step import WHOLE, Window, select_step

__all__ = ["COMPUTE_CLASSES", "WHOLE", "KinetoTrace", "TraceWarning", "Window", "build_graph", "from_trace",
           "is_trace_file", "kernel_class", "read_kineto", "runtime_role", "select_step"]


def from_trace(path: str | os.PathLike[str], *, step: str | None = None,
               execution_trace: str | os.PathLike[str] | None = None) -> Graph:
    """The graph of one step of a Kineto trace (``torch.profiler``'s Chrome trace,
    ``.json`` or ``.json.gz``, from an NVIDIA or an AMD GPU).

    Parameters
    ----------
    path
        The trace file.
    step
        ``None``: the last ``ProfilerStep#N``, else the whole trace; ``"all"``: the
        whole trace; a name: the profiler step or ``record_function`` range of that
        name (the last to start where several have it).
    execution_trace
        PyTorch's execution trace of the same run (``ExecutionTraceObserver``): its
        tensors add the data dependencies between the kernels of different ops.

    Returns
    -------
    Graph
        One node per kernel, copy, fill and host synchronisation (see
        :mod:`graphs.trace.build`), ``meta["step_time_s"]`` the measured step time.

    Raises
    ------
    GraphError
        A file that is not a trace (missing, truncated, not JSON), a named step the
        trace lacks, a step without GPU work.

    Examples
    --------
    >>> g = from_trace("tests/data/traces/alexnet-a100-forward.json.gz",
    ...                step="[param|pytorch.model.alex_net|0|0|0|measure|forward]")  # doctest: +SKIP
    """
    trace = read_kineto(path)
    window = select_step(trace, step)
    graph = build_graph(trace, window)
    if execution_trace is not None:
        # import cycle: hetsim.graphs.trace.execution_trace -> hetsim.graphs.trace
        from hetsim.graphs.trace.execution_trace import add_tensor_edges

        add_tensor_edges(graph, execution_trace)
    return validate(graph, source=os.fspath(path))


def is_trace_file(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` names a Kineto trace rather than a hetsim graph JSON: a
    ``.json.gz`` file, or a ``.json`` file whose first kilobytes hold ``traceEvents``."""
    p = os.fspath(path)
    if p.endswith(".json.gz"):
        return True
    if not p.endswith(".json") or not os.path.isfile(p):
        return False
    try:
        with open(p, "rb") as fh:
            head = fh.read(65536)
    except OSError:
        return False
    return b'"traceEvents"' in head and b'"hetsim_graph"' not in head
