"""Where a GPU's ops are cut into segments: the runs launched as one CUDA graph.

One rule, used by the simulator (:func:`sim.engine.host_costs.partition_segments`) and the
executor (:func:`runtime.executor.segments.gpu_segments`): a device's ops, taken in
launch order, start a new segment at an op that reads an input produced on another
device and end a segment at an op that another device reads. So only a segment's
first op waits for another device and only its last op is waited for by one.
Graph inputs and outputs do not cut a segment (inputs are copied when a request
starts, an output when its segment has run).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import TypeVar

__all__ = ["cut_segments"]

N = TypeVar("N", bound=Hashable)


def cut_segments(order: Iterable[N], on_device: Callable[[N], bool], reads_other: Callable[[N], bool],
                 read_by_other: Callable[[N], bool]) -> list[list[N]]:
    """The segments of one device.

    Parameters
    ----------
    order
        Every op in launch order (ops of other devices are skipped).
    on_device
        Whether an op runs on the device.
    reads_other
        Whether an op of the device reads an op of another device (not a graph input).
    read_by_other
        Whether an op of the device is read by an op of another device.

    Returns
    -------
    list of list
        The device's ops, in launch order, cut into segments.

    Examples
    --------
    >>> loc = {"a": "gpu", "b": "gpu", "c": "cpu", "d": "gpu"}
    >>> preds = {"a": [], "b": ["a"], "c": ["b"], "d": ["c"]}
    >>> succs = {"a": ["b"], "b": ["c"], "c": ["d"], "d": []}
    >>> cut_segments("abcd", lambda u: loc[u] == "gpu",
    ...              lambda u: any(loc[p] != "gpu" for p in preds[u]),
    ...              lambda u: any(loc[s] != "gpu" for s in succs[u]))
    [['a', 'b'], ['d']]
    """
    segments: list[list[N]] = []
    current: list[N] = []
    cut = True
    for u in order:
        if not on_device(u):
            continue
        if cut or reads_other(u):
            if current:
                segments.append(current)
            current = []
        current.append(u)
        cut = read_by_other(u)
    if current:
        segments.append(current)
    return segments
