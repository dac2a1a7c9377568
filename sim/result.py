"""What a simulation returns: times, utilisation, traffic, memory and (optionally) records.

A record is one op, one transfer hop, one dispatch or one batch of run-time
placements (dynamic plans):

==========  ==================================================================
``kind``    ``"op"``, ``"transfer"``, ``"dispatch"`` or ``"decision"`` (a
            stream placing the nodes its op made placeable, holding a
            dispatch slot)
``name``    op: the node; transfer: ``"node[output]->device"``; dispatch: the
            node; decision: the op that finished
``node``    the node run, dispatched, or whose output moves (graph input name
            for the inputs); decision: the op that finished
``request`` request (micro-batch) index
``resource`` device name, link direction (``"cpu->gpu"``; ``"a--b"`` for a
            half-duplex link) or ``"dispatch"``
``stream``  stream of the device (-1: a zero-cost view op, on no stream), dispatch
            thread, or 0 for links
``start``, ``end``  seconds
``bytes``   op: bytes the kernel touches; transfer: tensor size; dispatch and
            decision: 0
``dst``, ``output``, ``hop``  transfers only: final device, output index, hop index
==========  ==================================================================
"""

from __future__ import annotations

import math
import os
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hetsim.sim.collector import pause_collector, resume_collector

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["METRIC_COLUMNS", "METRIC_DEFINITIONS", "RECORD_COLUMNS", "SimResult", "describe_metrics"]

RECORD_COLUMNS = (
    "kind",
    "name",
    "node",
    "request",
    "resource",
    "stream",
    "start",
    "end",
    "bytes",
    "dst",
    "output",
    "hop",
)
#: the columns of :meth:`SimResult.metrics` (SI units: seconds, bytes, fractions)
METRIC_COLUMNS = (
    "makespan_s",
    "latency_mean_s",
    "latency_p50_s",
    "latency_p99_s",
    "requests_per_s",
    "throughput_per_s",
    "cpu_util",
    "gpu_util",
    "link_util",
    "dispatch_util",
    "bytes_moved",
    "peak_memory_cpu_bytes",
    "peak_memory_gpu_bytes",
)
#: what each of :data:`METRIC_COLUMNS` is (``hetsim compare --help``, the README)
METRIC_DEFINITIONS: dict[str, str] = {
    "makespan_s": "from the first request's arrival to the last request's completion (its "
    "outputs back on the host), seconds",
    "latency_mean_s": "mean over requests of completion - arrival, seconds",
    "latency_p50_s": "median request latency (nearest rank: a latency that happened), seconds",
    "latency_p99_s": "99th-percentile request latency (nearest rank), seconds",
    "requests_per_s": "requests / makespan",
    "throughput_per_s": "steady-state rate: (requests - 1) / (last completion - first "
    "completion); 1 / makespan for one request",
    "cpu_util": "mean over the CPU devices of busy / (makespan x streams); busy is the kernel "
    "time summed over a device's streams",
    "gpu_util": "the same over the GPU devices (a GPU with 4 streams is 100 % busy only when "
    "all 4 run kernels for the whole makespan)",
    "link_util": "mean over the link directions of transfer time / makespan",
    "dispatch_util": "host time spent dispatching kernels / makespan",
    "bytes_moved": "bytes over every link direction (a tensor crossing two hops counts twice)",
    "peak_memory_cpu_bytes": "largest peak memory (weights included) over the CPU devices",
    "peak_memory_gpu_bytes": "largest peak memory (weights included) over the GPU devices",
}


def describe_metrics(
    columns: Sequence[str] = METRIC_COLUMNS,
    more: Mapping[str, str] | None = None,
    *,
    width: int = 24,
    line: int = 88,
) -> str:
    """``column  definition`` lines (wrapped at ``line`` characters) for ``columns`` and
    the extra definitions ``more``: the text of ``--help`` epilogues."""
    import textwrap

    items = [(c, METRIC_DEFINITIONS[c]) for c in columns if c in METRIC_DEFINITIONS]
    items += list((more or {}).items())
    out = []
    for c, text in items:
        out.append(textwrap.fill(text, line, initial_indent=f"  {c:<{width}}",
                                 subsequent_indent=" " * (width + 2)))  # fmt: skip
    return "\n".join(out)


@dataclass
class SimResult:
    """Outcome of :func:`sim.simulate`. Times in seconds, sizes in bytes.

    Attributes
    ----------
    makespan
        Time from the first arrival to the end of the last request (graph outputs
        back on the host included).
    latencies
        Per request: completion minus arrival.
    throughput
        Steady-state requests per second: ``(n - 1) / (last - first completion)``
        for ``n >= 2`` requests, else ``1 / makespan`` (:attr:`requests_per_s` is
        ``n / makespan``).
    device_busy, device_utilisation
        Kernel time per device, summed over its streams, and that over
        ``makespan * streams``.
    link_busy, link_utilisation, bytes_moved
        Per link direction (``"cpu->gpu"``; ``"a--b"`` for a half-duplex link).
    dispatch_busy
        Host time spent dispatching kernels.
    peak_memory, memory_capacity, weights
        Per device: peak bytes in use (weights included), capacity, resident weights.
    device_kinds
        Per device: ``"cpu"`` or ``"gpu"`` (what :meth:`metrics` averages by).
    failures
        Memory overflows when simulated with ``check_memory=False``; ``ok`` is False
        when there are any.
    records
        Per-op/transfer/dispatch dicts (module docstring) when ``record=True``, else
        None: built from ``record_rows`` on first access, then kept.
    record_rows
        The same records as tuples in :data:`RECORD_COLUMNS` order, as the engine
        wrote them (what :meth:`to_dataframe` reads): a tuple is a fifth of a dict's
        memory, and a run of 100 000 ops with 213 000 records spends about 0.1 s
        making the dicts, so :func:`sim.simulate` leaves that to the first access of
        ``records``.
    """

    graph: str
    platform: str
    requests: int
    interval_s: float
    makespan: float
    arrivals: list[float]
    completions: list[float]
    latencies: list[float]
    throughput: float
    ops: int
    device_busy: dict[str, float]
    device_utilisation: dict[str, float]
    link_busy: dict[str, float]
    link_utilisation: dict[str, float]
    bytes_moved: dict[str, int]
    dispatch_busy: float
    peak_memory: dict[str, int]
    memory_capacity: dict[str, int]
    weights: dict[str, int]
    streams: dict[str, int]
    device_kinds: dict[str, str] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    record_rows: list[tuple] | None = field(default=None, repr=False)

    @property
    def records(self) -> list[dict[str, Any]] | None:
        """The records as dicts keyed by :data:`RECORD_COLUMNS` (None without
        ``record=True``); made from :attr:`record_rows` on first access."""
        if self.record_rows is None:
            return None
        made = self.__dict__.get("_record_dicts")
        if made is None:
            collecting = pause_collector()  # dicts of scalars: no cycles to collect
            try:
                made = self.__dict__["_record_dicts"] = _record_dicts(self.record_rows)
            finally:
                resume_collector(collecting)
        return made

    def __getstate__(self) -> dict[str, Any]:
        """Pickled without the record dicts (made again from the rows on access)."""
        state = dict(self.__dict__)
        state.pop("_record_dicts", None)
        return state

    @classmethod
    def from_run(cls, run: Any) -> SimResult:
        """Collect the counters of a finished :mod:`sim.engine.simulator` run."""
        prep = run.prep
        completions = list(run.completions)
        makespan = max(completions) if completions else 0.0
        latencies = [c - a for c, a in zip(completions, run.arrivals)]
        n = len(completions)
        span = max(completions) - min(completions) if n else 0.0
        if n >= 2 and span > 0:
            throughput = (n - 1) / span
        else:
            throughput = n / makespan if makespan > 0 else math.inf
        devs = prep.dev_names
        dev_busy = {d: run.busy[i] for i, d in enumerate(devs)}
        dev_util = {
            d: (run.busy[i] / (makespan * prep.streams[i]) if makespan > 0 else 0.0)
            for i, d in enumerate(devs)
        }
        res = prep.res_names
        return cls(
            graph=run.graph.name,
            platform=run.platform.name,
            requests=run.n_req,
            interval_s=run.interval,
            makespan=makespan,
            arrivals=list(run.arrivals),
            completions=completions,
            latencies=latencies,
            throughput=throughput,
            ops=prep.n_ops * run.n_req,
            device_busy=dev_busy,
            device_utilisation=dev_util,
            link_busy={r: run.lbusy[i] for i, r in enumerate(res)},
            link_utilisation={
                r: (run.lbusy[i] / makespan if makespan > 0 else 0.0) for i, r in enumerate(res)
            },
            bytes_moved={r: run.lbytes[i] for i, r in enumerate(res)},
            dispatch_busy=run.disp_busy,
            peak_memory={d: run.peak[i] for i, d in enumerate(devs)},
            memory_capacity={d: prep.capacity[i] for i, d in enumerate(devs)},
            weights={d: run.weights[i] for i, d in enumerate(devs)},
            streams={d: prep.streams[i] for i, d in enumerate(devs)},
            device_kinds={d.name: d.kind for d in run.platform.devices},
            failures=list(run.failures),
            record_rows=run.records,
        )

    # ---------------------------------------------------------------- queries
    @property
    def ok(self) -> bool:
        """False when the run overflowed a device's memory (``check_memory=False``)."""
        return not self.failures

    @property
    def latency(self) -> float:
        """Mean request latency."""
        return statistics.fmean(self.latencies) if self.latencies else 0.0

    @property
    def requests_per_s(self) -> float:
        """``requests / makespan`` (:attr:`throughput` is the steady-state rate)."""
        return len(self.completions) / self.makespan if self.makespan > 0 else math.nan

    @property
    def total_bytes_moved(self) -> int:
        return sum(self.bytes_moved.values())

    def link_bytes(self) -> dict[str, int]:
        """Bytes per physical link, both directions summed (``"cpu<->gpu"``)."""
        out: dict[str, int] = {}
        for name, b in self.bytes_moved.items():
            if "->" in name:
                a, c = name.split("->", 1)
                key = next((k for k in out if k in (f"{a}<->{c}", f"{c}<->{a}")), f"{a}<->{c}")
            else:
                key = name
            out[key] = out.get(key, 0) + b
        return out

    def summary(self) -> dict[str, Any]:
        """One flat, JSON-safe row: the numbers an experiment sweep stores.

        Examples
        --------
        >>> from hetsim.graphs import Graph
        >>> from hetsim.sim import Plan, simulate
        >>> g = Graph()
        >>> g.add_op("a", "relu", bytes=1_000_000)
        >>> s = simulate(g, "cpu2", Plan({"a": "cpu0"})).summary()
        >>> s["requests"], s["ops"], s["bytes_moved"]
        (1, 1, 0)
        """
        lat = sorted(self.latencies)
        row: dict[str, Any] = {
            "graph": self.graph,
            "platform": self.platform,
            "requests": self.requests,
            "interval_s": self.interval_s,
            "ops": self.ops,
            "makespan_s": self.makespan,
            "requests_per_s": self.requests_per_s,
            "throughput_per_s": self.throughput,
            "latency_mean_s": self.latency,
            "latency_p50_s": _quantile(lat, 0.5),
            "latency_p99_s": _quantile(lat, 0.99),
            "latency_max_s": lat[-1] if lat else 0.0,
            "bytes_moved": self.total_bytes_moved,
            "dispatch_busy_s": self.dispatch_busy,
            "ok": self.ok,
        }
        for d, u in self.device_utilisation.items():
            row[f"util:{d}"] = u
        for d, m in self.peak_memory.items():
            row[f"peak_memory:{d}"] = m
        for r, u in self.link_utilisation.items():
            row[f"util:{r}"] = u
        return row

    def metrics(self) -> dict[str, float]:
        """The metric columns of a results row (:data:`METRIC_COLUMNS`).

        :data:`METRIC_DEFINITIONS` says what each is; ``cpu_util``, ``gpu_util``,
        ``link_util`` and ``peak_memory_*_bytes`` are NaN where the platform has no
        device (link) of that kind.

        Examples
        --------
        >>> from hetsim import graphs, sim
        >>> one = graphs.Graph(name="one-matmul")
        >>> one.add_op("mm", "matmul", flops=1e9, bytes=4_000_000)
        >>> m = sim.simulate(one, "xeon-p2200", sim.Plan({"mm": "gpu"})).metrics()
        >>> m["cpu_util"], m["bytes_moved"]
        (0.0, 0)
        """
        util: dict[str, list[float]] = {"cpu": [], "gpu": []}
        peak: dict[str, list[int]] = {"cpu": [], "gpu": []}
        for d, u in self.device_utilisation.items():
            util.setdefault(self.device_kinds.get(d, "other"), []).append(u)
        for d, m in self.peak_memory.items():
            peak.setdefault(self.device_kinds.get(d, "other"), []).append(m)
        lat = sorted(self.latencies)
        links = list(self.link_utilisation.values())
        return {
            "makespan_s": self.makespan,
            "latency_mean_s": statistics.fmean(lat) if lat else math.nan,
            "latency_p50_s": _quantile(lat, 0.5) if lat else math.nan,
            "latency_p99_s": _quantile(lat, 0.99) if lat else math.nan,
            "requests_per_s": self.requests_per_s,
            "throughput_per_s": self.throughput,
            "cpu_util": statistics.fmean(util["cpu"]) if util["cpu"] else math.nan,
            "gpu_util": statistics.fmean(util["gpu"]) if util["gpu"] else math.nan,
            "link_util": statistics.fmean(links) if links else math.nan,
            "dispatch_util": self.dispatch_busy / self.makespan if self.makespan > 0 else math.nan,
            "bytes_moved": self.total_bytes_moved,
            "peak_memory_cpu_bytes": max(peak["cpu"]) if peak["cpu"] else math.nan,
            "peak_memory_gpu_bytes": max(peak["gpu"]) if peak["gpu"] else math.nan,
        }

    def to_dataframe(self) -> pd.DataFrame:
        """The records as a :class:`pandas.DataFrame` (one row per record).

        Raises :class:`ValueError` when the run kept no records.
        """
        import pandas as pd

        if self.record_rows is None:
            raise ValueError("this result has no records: run simulate(..., record=True)")
        return pd.DataFrame.from_records(self.record_rows, columns=list(RECORD_COLUMNS))

    def to_chrome_trace(self, path: str | os.PathLike[str]) -> Path:
        """Write the records as Chrome trace JSON (opens in Perfetto); see :mod:`sim.trace`."""
        # import cycle: hetsim.sim.trace -> hetsim.sim -> hetsim.sim.result
        from hetsim.sim.trace import write_chrome_trace

        return write_chrome_trace(self, path)

    def __str__(self) -> str:
        ms = 1e3
        lat = sorted(self.latencies)
        n = len(self.completions)
        rates = f"{self.requests_per_s:.2f} requests/s (requests / makespan)"
        if n > 1:
            rates += f", steady state {self.throughput:.2f}/s"
        lines = [
            f"{self.graph} on {self.platform}: {self.requests} request(s), {self.ops} ops, "
            f"makespan {self.makespan * ms:.4f} ms, {rates}",
            f"latency (ms): mean {self.latency * ms:.4f}  p50 {_quantile(lat, 0.5) * ms:.4f}  "
            f"max {(lat[-1] if lat else 0.0) * ms:.4f}",
            f"{'resource':<24}{'streams':>8}{'busy ms':>12}{'util':>8}{'peak MiB':>12}{'cap MiB':>12}"
            f"{'moved MiB':>12}",
        ]
        for d in self.device_busy:
            lines.append(
                f"{d:<24}{self.streams.get(d, 1):>8}{self.device_busy[d] * ms:>12.4f}"
                f"{self.device_utilisation[d]:>8.1%}{self.peak_memory[d] / 2**20:>12.2f}"
                f"{self.memory_capacity[d] / 2**20:>12.0f}{'':>12}"
            )
        for r in self.link_busy:
            lines.append(
                f"{r:<24}{'':>8}{self.link_busy[r] * ms:>12.4f}{self.link_utilisation[r]:>8.1%}"
                f"{'':>12}{'':>12}{self.bytes_moved[r] / 2**20:>12.2f}"
            )
        util = self.dispatch_busy / self.makespan if self.makespan > 0 else 0.0
        lines.append(f"{'dispatch (host)':<24}{'':>8}{self.dispatch_busy * ms:>12.4f}{util:>8.1%}")
        if any(k > 1 for k in self.streams.values()):
            lines.append("busy: kernel time summed over a device's streams; util: busy / (makespan x streams)")
        for f in self.failures:
            lines.append(f"FAILED: {f}")
        return "\n".join(lines)


def _record_dicts(rows: list[tuple]) -> list[dict[str, Any]]:
    """The engine's record tuples as dicts keyed by :data:`RECORD_COLUMNS`, in order.

    A dict display per row: 1.5x faster than ``dict(zip(RECORD_COLUMNS, row))``
    (hundreds of thousands of rows on large graphs). The keys are spelled out:
    tests/test_engine.py checks them against :data:`RECORD_COLUMNS`.
    """
    return [
        {"kind": kind, "name": name, "node": node, "request": request, "resource": res,
         "stream": stream, "start": start, "end": end, "bytes": nbytes, "dst": dst,
         "output": output, "hop": hop}
        for kind, name, node, request, res, stream, start, end, nbytes, dst, output, hop in rows
    ]


def _quantile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return 0.0
    i = min(len(sorted_values) - 1, max(0, math.ceil(q * len(sorted_values)) - 1))
    return sorted_values[i]
