"""The engine's run of a static plan on flat arrays: the same events, in the same order,
without a Python call per event.

A run qualifies (:func:`replayable`) when it needs none of what only the SimPy
engine models: the plan places every op (no policy), no GPU launches its work
(no :mod:`sim.engine.host`), the platform declares no memory domains (no
:mod:`sim.contention`), and the call keeps no records and adds no noise. Everything
else (dispatch slots, several streams per device, link directions and multi-hop
routes, hand-overs within a memory domain, zero-time ops, graph inputs and outputs,
several requests and their arrivals, memory and its peaks) is replayed by
:func:`sim.engine.array_kernel.replay`, which keeps SimPy's event order (one queue
keyed by time, then by the order events were scheduled) and the engine's float
operations, so that the result is the SimPy run's bit for bit
(``tests/test_array_replay.py`` compares both on the engine's reference cases). A
run that would overflow a device's memory or cannot finish is run again on SimPy,
which raises or reports it.

The kernel is compiled with numba (``cache=True``: compiled at the first use in an
environment, about a minute of CPU, behind a progress bar, then loaded from
``__pycache__``). Importing
numba and loading the kernel cost about 0.5 s once per process, more than SimPy
spends on a small plan: a run uses the kernel when it has at least :data:`MIN_OPS`
ops (all requests together).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from tqdm.auto import tqdm

from hetsim.sim.engine.array_prep import graph_arrays, kernel_args, plan_tables
from hetsim.sim.result import SimResult

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.sim.engine.run import EngineRun

__all__ = ["MIN_OPS", "compiled", "replay_run", "replayable"]

#: ops (times requests) from which a qualifying run is replayed on arrays even when
#: numba is not loaded yet (its import then pays for itself)
MIN_OPS = 10_000
#: the most per-request table entries (requests x buffers) the kernel allocates
MAX_ENTRIES = 1 << 27


def replayable(run: EngineRun) -> bool:
    """Whether :func:`replay_run` replays ``run`` (see the module's text)."""
    prep = run.prep
    if run.dynamic or run.host is not None or run.contention is not None or run.records is not None:
        return False
    if run.sigma > 0 or not all(run.baked):
        return False
    n_all = len(prep.names)
    if run.n_req * n_all * prep.n_out * len(prep.dev_names) > MAX_ENTRIES:
        return False
    return prep.n_ops * run.n_req >= MIN_OPS


def compiled(kernel: Any) -> bool:
    """Whether numba's ``kernel`` is compiled in this process or in its on-disk cache
    (else its first call compiles it)."""
    if getattr(kernel, "signatures", None):
        return True
    cache = getattr(kernel, "_cache", None)  # numba's FunctionCache: where it keeps the index
    where = getattr(cache, "cache_path", None)
    if where is None:
        return True  # not a numba dispatcher (the kernel's Python function)
    name = getattr(kernel, "py_func", kernel).__qualname__
    return any(Path(where).glob(f"*.{name}-*.nbi"))


def replay_run(run: EngineRun, kernel: object = None) -> SimResult | None:
    """``run``'s result, replayed on arrays (None: it overflows a device's memory or
    cannot finish, and the SimPy engine is to run it). ``kernel``: the replay
    function (default: the compiled :func:`sim.engine.array_kernel.replay`; its
    ``py_func`` runs the same code uncompiled)."""
    if kernel is None:
        # lazy: at the top it would load numba with this module (about 0.5 s)
        from hetsim.sim.engine.array_kernel import replay as kernel
    try:
        graph = graph_arrays(run.prep.tables)
        args = kernel_args(run, plan_tables(run.prep, run.platform, run.transfer_time, graph), graph)
    except OverflowError:  # a size past int64: the SimPy engine's Python ints hold it
        return None
    n_dev, n_res, n_req = len(run.prep.dev_names), len(run.prep.res_names), run.n_req
    mem = args[-3]
    busy, lbusy = np.zeros(n_dev), np.zeros(n_res)
    lbytes, peak = np.zeros(n_res, dtype=np.int64), mem.copy()
    arrivals, completions = np.zeros(n_req), np.zeros(n_req)
    early = np.zeros(n_req, dtype=np.int64)
    fsum = np.zeros(1)
    if compiled(kernel):
        status = kernel(*args, busy, lbusy, lbytes, peak, arrivals, completions, early, fsum)
    else:
        with tqdm(total=1, desc="compiling the simulator's array replay (once per environment, about a minute)",
                  unit="step", leave=False) as bar:
            status = kernel(*args, busy, lbusy, lbytes, peak, arrivals, completions, early, fsum)
            bar.update()
    if status != 0:
        return None
    if mem.tolist() != run.weights:  # pragma: no cover - an engine bug: the SimPy run says so
        return None
    flags = early.tolist()
    run.arrivals = [0 if f & 1 else t for t, f in zip(arrivals.tolist(), flags)]
    run.completions = [0 if f & 2 else t for t, f in zip(completions.tolist(), flags)]
    run.busy, run.lbusy, run.lbytes = busy.tolist(), lbusy.tolist(), lbytes.tolist()
    run.peak, run.mem, run.disp_busy = peak.tolist(), mem.tolist(), float(fsum[0])
    run.done = n_req
    return SimResult.from_run(run)
