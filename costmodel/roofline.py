"""Analytic roofline cost model: prices ops from device specs alone (no hardware needed).

An op on a device takes::

    max(flops / (peak_flops * efficiency), bytes / (mem_bandwidth * bandwidth_efficiency))
        + launch_overhead_s

``peak_flops`` is the peak of the math mode the op runs in on a GPU that states its
tensor-core peaks (``Device.tensor_flops``; :mod:`costmodel.math_mode`): FP32
convolutions at the TF32 peak (cuDNN's default), FP32 matmuls at the FP32 peak
unless ``matmul_precision`` says ``"high"`` (TF32) or ``"medium"`` (BF16),
FP16/BF16 convolutions and matmuls at their tensor peak. ``efficiency`` depends on
the op kind and on the op's size: small kernels reach a
small fraction of peak (the per-size efficiency tables of Calculon, Isaev et al.,
"Calculon: a methodology and tool for high-level co-design of systems and large
language models", SC 2023). View ops (``reshape``, ``expand_dims``, ``squeeze``,
``flatten``) are free: no kernel, no launch, no dispatch.

Efficiency table format
-----------------------
``efficiency`` maps a key to either a constant fraction of peak or a list of
``(flops, fraction)`` breakpoints in increasing ``flops``; between breakpoints the
fraction is interpolated linearly in ``log10(flops)``, outside them it is clamped::

    {
        "gpu:matmul": [(1e6, 0.03), (1e9, 0.45), (1e11, 0.8)],   # GPUs, matmul class
        "cpu0:conv2d": 0.55,                                     # device "cpu0" only
        "softmax": 0.2,                                          # any device
        "default": 0.5,                                          # everything else
    }

A key is ``OP``, ``KIND:OP`` or ``DEVICE:OP``, where ``OP`` is an op kind
(``"matmul"``), an op class (``"matmul"`` covers ``dense``/``linear``/
``batch_matmul``, ``"conv2d"`` covers every convolution, ``"elementwise"`` the
element-wise ops) or ``"default"``. The most specific op key wins (kind, then class,
then ``default``); for one op key a device-name prefix beats a device-kind prefix,
which beats no prefix. A ``fused`` node uses its dominant member: ``conv2d`` if it
contains a convolution, else ``matmul`` if it contains one, else ``elementwise``.
:meth:`Roofline.calibrate` fits such a table from measurements;
:meth:`Roofline.to_dict` / :meth:`Roofline.from_dict` store it.
"""

from __future__ import annotations

import bisect
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from operator import itemgetter
from typing import TYPE_CHECKING, Any

import numpy as np

from hetsim.costmodel.base import CostModelBase, CostModelError
from hetsim.costmodel.math_mode import MISSING, math_mode, mode_peak, node_dtype
from hetsim.graphs.graph import VIEW_OPS

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.costmodel.platform import Device, Link, Platform
    from hetsim.graphs.graph import Graph

__all__ = [
    "DEFAULT_EFFICIENCY",
    "MATMUL_OPS",
    "CONV_OPS",
    "ELEMENTWISE_OPS",
    "VIEW_OPS",
    "Roofline",
    "op_key",
]

#: Fraction of peak FLOP/s reached, by op class and size (nominal values in the
#: shape of Calculon's tables: a GPU needs ~1e10 FLOPs per kernel to approach its
#: peak, a CPU core saturates earlier; one-thread torch on the cpu2 preset reaches
#: 56 of 83 GFLOP/s on a 1024^3 matmul, i.e. 0.67 at 2.1e9 FLOPs).
DEFAULT_EFFICIENCY: dict[str, float | list[tuple[float, float]]] = {
    "gpu:matmul": [(1e6, 0.03), (1e8, 0.2), (1e9, 0.45), (1e10, 0.7), (1e11, 0.8)],
    "gpu:conv2d": [(1e6, 0.03), (1e8, 0.18), (1e9, 0.4), (1e10, 0.6), (1e11, 0.7)],
    "cpu:matmul": [(1e5, 0.05), (1e7, 0.3), (1e9, 0.65), (1e10, 0.75)],
    "cpu:conv2d": [(1e5, 0.05), (1e7, 0.25), (1e9, 0.5), (1e10, 0.6)],
    "default": 0.5,
}

MATMUL_OPS = frozenset({"matmul", "dense", "linear", "batch_matmul", "bmm", "einsum"})
CONV_OPS = frozenset(
    {
        "conv1d",
        "conv2d",
        "conv3d",
        "conv1d_transpose",
        "conv2d_transpose",
        "conv3d_transpose",
    }
)
ELEMENTWISE_OPS = frozenset(
    (
        "add subtract multiply divide power maximum minimum floor_divide floor_mod negative "
        "abs exp log sqrt rsqrt sin cos tanh sigmoid erf relu relu6 leaky_relu gelu "
        "gelu_tanh silu hardswish hardsigmoid clip where equal not_equal less less_equal "
        "greater greater_equal logical_and logical_or logical_not astype square round "
        "floor ceil sign bias_add"
    ).split()
)

Table = Mapping[str, "float | Sequence[tuple[float, float]] | Sequence[Sequence[float]]"]


def _short(op: str) -> str:
    return op.rsplit(".", 1)[-1]


def op_class(op: str) -> str:
    """The efficiency class of an op kind: ``matmul``, ``conv2d``, ``elementwise`` or itself."""
    op = _short(op)
    if op in MATMUL_OPS:
        return "matmul"
    if op in CONV_OPS:
        return "conv2d"
    if op in ELEMENTWISE_OPS:
        return "elementwise"
    return op


def _members(op: str, ops: Sequence[str] | None) -> list[str] | None:
    if op.startswith("fused:"):  # profile notation: fused:conv2d+add+relu
        return [m for m in op[len("fused:") :].split("+") if m]
    if op == "fused":
        return [str(m) for m in (ops or [])]
    return None


def op_key(op: str, ops: Sequence[str] | None = None) -> str:
    """The op kind whose efficiency prices a node (the dominant member of a fused node).

    >>> op_key("relax.nn.conv2d"), op_key("fused", ["conv2d", "add", "relu"])
    ('conv2d', 'conv2d')
    >>> op_key("fused:matmul+add"), op_key("fused", ["add", "relu"])
    ('matmul', 'elementwise')
    """
    members = _members(op, ops)
    if members is None:
        return _short(op)
    classes = [op_class(m) for m in members]
    for dominant in ("conv2d", "matmul"):
        if dominant in classes:
            return dominant
    return "elementwise"


def _check_table(efficiency: Table) -> dict[str, float | tuple[tuple[float, float], ...]]:
    out: dict[str, float | tuple[tuple[float, float], ...]] = {}
    for key, value in efficiency.items():
        if not isinstance(key, str) or not key:
            raise CostModelError(f"efficiency table: key {key!r} must be a non-empty string")
        if isinstance(value, int | float) and not isinstance(value, bool):
            out[key] = _fraction(f"efficiency[{key!r}]", value)
            continue
        try:
            points = tuple((float(f), float(e)) for f, e in value)  # type: ignore[union-attr]
        except (TypeError, ValueError):
            raise CostModelError(
                f"efficiency[{key!r}] must be a fraction or a list of (flops, fraction) pairs, "
                f"got {value!r}"
            ) from None
        if not points:
            raise CostModelError(f"efficiency[{key!r}] has no breakpoints")
        prev = -math.inf
        for f, e in points:
            if not math.isfinite(f) or f <= 0 or f <= prev:
                raise CostModelError(
                    f"efficiency[{key!r}]: breakpoint flops must be positive and increasing, "
                    f"got {[p[0] for p in points]}"
                )
            _fraction(f"efficiency[{key!r}] at {f:g} flops", e)
            prev = f
        out[key] = points
    return out


def _fraction(where: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 1:
        raise CostModelError(f"{where} must be a fraction in (0, 1], got {value!r}")
    return float(value)


def _curve(
    points: float | tuple[tuple[float, float], ...],
) -> float | tuple[list[float], list[float]]:
    """A table entry as a constant or as (log10 flops, fraction) arrays for :func:`_interp`."""
    if isinstance(points, float):
        return points
    if len(points) == 1:
        return points[0][1]
    return [math.log10(f) for f, _ in points], [e for _, e in points]


#: below this many nodes, batch pricing goes node by node (arrays cost more than they save)
_ARRAY_MIN = 16


def _interp(curve: tuple[list[float], list[float]], flops: float) -> float:
    xs, ys = curve
    x = math.log10(flops) if flops > 0 else -math.inf
    if x <= xs[0]:
        return ys[0]
    if x >= xs[-1]:
        return ys[-1]
    i = bisect.bisect_right(xs, x)
    w = (x - xs[i - 1]) / (xs[i] - xs[i - 1])
    return ys[i - 1] + w * (ys[i] - ys[i - 1])


def _interp_many(curve: tuple[list[float], list[float]], flops: np.ndarray) -> np.ndarray:
    """:func:`_interp` of each of ``flops`` (all > 0), bit for bit: the same float
    operations on each element (``bisect_right`` as ``searchsorted(side="right")``)."""
    xs, ys = curve
    x = np.fromiter(map(math.log10, flops.tolist()), dtype=np.float64, count=len(flops))
    out = np.where(x <= xs[0], ys[0], ys[-1])
    mid = np.flatnonzero((x > xs[0]) & (x < xs[-1]))
    if len(mid):
        xa, ya = np.array(xs), np.array(ys)
        xm = x[mid]
        i = np.searchsorted(xa, xm, side="right")
        w = (xm - xa[i - 1]) / (xa[i] - xa[i - 1])
        out[mid] = ya[i - 1] + w * (ya[i] - ya[i - 1])
    return out


class Roofline(CostModelBase):
    """Roofline cost model with per-op, per-size compute efficiency.

    Parameters
    ----------
    efficiency
        Efficiency table (see the module docstring); its entries override and extend
        :data:`DEFAULT_EFFICIENCY`. ``None``: the defaults.
    bandwidth_efficiency
        Fraction of ``mem_bandwidth_bytes_per_s`` that kernels reach: one number, or
        a mapping from device name or kind (or ``"default"``) to a fraction. The
        presets give sustainable bandwidth, hence the default 1.0.
    view_ops
        Op kinds priced at zero (no kernel, no launch, no dispatch).
    matmul_precision
        ``torch.set_float32_matmul_precision`` of the run (``"highest"``, ``"high"``,
        ``"medium"``), overriding each device's ``matmul_precision``; None: the
        device's. Matters only on a GPU with ``tensor_flops``.

    Examples
    --------
    >>> from hetsim.graphs import Graph
    >>> from hetsim.costmodel.platform import Platform
    >>> g = Graph()
    >>> g.add_op("mm", "matmul", flops=2e9, bytes=12_000_000)
    >>> gpu = Platform.preset("xeon-p2200").device("gpu")
    >>> t = Roofline().op_time(g, "mm", gpu)   # 2e9 / (3.8e12 * 0.525) + 5e-6
    >>> round(t * 1e6, 1)
    1007.0
    >>> Roofline(efficiency={"gpu:matmul": 1.0}).op_time(g, "mm", gpu) < t
    True
    """

    def __init__(
        self,
        *,
        efficiency: Table | None = None,
        bandwidth_efficiency: float | Mapping[str, float] = 1.0,
        view_ops: Iterable[str] = VIEW_OPS,
        matmul_precision: str | None = None,
    ) -> None:
        # import cycle: hetsim.costmodel.platform -> hetsim.costmodel -> hetsim.costmodel.roofline
        from hetsim.costmodel.platform import MATMUL_PRECISIONS

        if matmul_precision is not None and matmul_precision not in MATMUL_PRECISIONS:
            raise CostModelError(f"unknown matmul_precision {matmul_precision!r}; choose from {list(MATMUL_PRECISIONS)}")
        self.matmul_precision = matmul_precision
        table: dict[str, Any] = dict(DEFAULT_EFFICIENCY)
        table.update(efficiency or {})
        self.efficiency = _check_table(table)
        if isinstance(bandwidth_efficiency, Mapping):
            self.bandwidth_efficiency: float | dict[str, float] = {
                str(k): _fraction(f"bandwidth_efficiency[{k!r}]", v)
                for k, v in bandwidth_efficiency.items()
            }
        else:
            self.bandwidth_efficiency = _fraction("bandwidth_efficiency", bandwidth_efficiency)
        self.view_ops = frozenset(view_ops)
        # caches bounded by op kinds (x devices): they cannot grow in a sweep.
        self._classes: dict[Any, tuple[bool, str]] = {}
        self._plain: dict[str, tuple[bool, str]] = {}  # the unfused ops of _classes
        self._resolved: dict[tuple[str, str, str], float | tuple[list[float], list[float]]] = {}
        self._modes: dict[tuple[str, str, str | None], str] = {}  # (key, dtype, precision) -> mode
        self._warned: set[tuple[str, str]] = set()  # (device, mode) whose missing peak was stated

    def __repr__(self) -> str:
        return f"Roofline(efficiency=<{len(self.efficiency)} entries>, bandwidth_efficiency={self.bandwidth_efficiency!r})"

    # ------------------------------------------------------------------ pricing
    def is_view(self, graph: Graph, node: str) -> bool:
        """True when ``node`` is a view op (or a fused node made only of views)."""
        return self._classify(graph.nx.nodes[node])[0]

    def _classify(self, d: Mapping[str, Any]) -> tuple[bool, str]:
        """(is a view, efficiency key) of a node's attributes, cached per op pattern."""
        op = d["op"]
        hit = self._plain.get(op)
        if hit is not None:
            return hit
        members = _members(op, d.get("ops")) if op == "fused" or op.startswith("fused:") else None
        ckey: Any = op if members is None else (op, tuple(members))
        hit = self._classes.get(ckey)
        if hit is None:
            if members is None:
                hit = self._plain[op] = (_short(op) in self.view_ops, _short(op))
            else:
                view = bool(members) and all(_short(m) in self.view_ops for m in members)
                hit = (view, op_key(op, members))
            self._classes[ckey] = hit
        return hit

    def compute_efficiency(
        self, op: str, flops: float, device: Device, ops: Sequence[str] | None = None
    ) -> float:
        """Fraction of ``device.peak_flops`` that ``op`` reaches at ``flops``.

        >>> from hetsim.costmodel.platform import Device
        >>> gpu = Device("g", "gpu", peak_flops=1e13, mem_bandwidth_bytes_per_s=1e12, memory_bytes=2**30)
        >>> Roofline().compute_efficiency("dense", 1e10, gpu)
        0.7
        """
        return self._efficiency(op_key(op, ops), flops, device)

    def _efficiency(self, key: str, flops: float, device: Device) -> float:
        rkey = (key, device.name, device.kind)
        entry = self._resolved.get(rkey)
        if entry is None:
            entry = _curve(self._lookup(key, device))
            self._resolved[rkey] = entry
        if isinstance(entry, float):
            return entry
        return _interp(entry, flops)

    def _lookup(self, key: str, device: Device) -> float | tuple[tuple[float, float], ...]:
        candidates = [key]
        cls = op_class(key)
        if cls != key:
            candidates.append(cls)
        candidates.append("default")
        table = self.efficiency
        for cand in candidates:
            for full in (f"{device.name}:{cand}", f"{device.kind}:{cand}", cand):
                if full in table:
                    return table[full]
        raise CostModelError(f"efficiency table has no entry for op {key!r} and no 'default'")

    def peak(self, key: str, dtype: str, device: Device) -> float:
        """Peak FLOP/s of an op of efficiency key ``key`` on ``dtype`` tensors on
        ``device``: its math mode's (:mod:`costmodel.math_mode`). A GPU whose
        ``tensor_flops`` lacks the FP16/BF16 peak the op needs is priced at its FP32
        peak, with one :class:`~costmodel.learned.measured.CostModelWarning` per
        device and mode saying so."""
        if device.tensor_flops is None:
            return device.peak_flops
        precision = self.matmul_precision or device.matmul_precision
        mkey = (key, dtype, precision)
        mode = self._modes.get(mkey)
        if mode is None:
            mode = self._modes[mkey] = math_mode(op_class(key), dtype, precision)
        peak, missing = mode_peak(device, mode)
        if missing == MISSING and (device.name, mode) not in self._warned:
            import warnings

            # import cycle: hetsim.costmodel.learned.measured -> hetsim.costmodel.roofline
            from hetsim.costmodel.learned.measured import CostModelWarning

            self._warned.add((device.name, mode))
            warnings.warn(CostModelWarning(
                f"GPU {device.name!r} states no tensor_flops.{mode}: its {mode} convolutions and matmuls "
                f"are priced at its FP32 peak_flops ({device.peak_flops:.3g} FLOP/s)"), stacklevel=3)
        return peak

    def memory_efficiency(self, device: Device) -> float:
        """Fraction of ``device.mem_bandwidth_bytes_per_s`` that kernels reach."""
        be = self.bandwidth_efficiency
        if isinstance(be, float):
            return be
        for k in (device.name, device.kind, "default"):
            if k in be:
                return be[k]
        return 1.0

    def op_time(self, graph: Graph, node: str, device: Device) -> float:
        """Kernel time of ``node`` on ``device`` in seconds, launch overhead included."""
        d = graph.nx.nodes[node]
        view, key = self._classify(d)
        if view:
            return 0.0
        flops = float(d["flops"])
        nbytes = float(d["bytes"])
        t_mem = nbytes / (device.mem_bandwidth_bytes_per_s * self.memory_efficiency(device))
        t_cmp = 0.0
        if flops > 0:
            eff = self._efficiency(key, flops, device)
            peak = device.peak_flops if device.tensor_flops is None else self.peak(key, node_dtype(d), device)
            t_cmp = flops / (peak * eff)
        return max(t_cmp, t_mem) + device.launch_overhead_s

    def price_nodes(
        self,
        graph: Graph,
        nodes: Sequence[str],
        device: Device,
        *,
        attrs: Sequence[Mapping[str, Any]] | None = None,
    ) -> tuple[list[float], list[float]]:
        """Op and dispatch times of ``nodes`` on ``device`` (the numbers of
        :meth:`op_time` and :meth:`dispatch_time`, bit for bit): each node's attributes
        read once, the roofline computed over arrays; the simulator and the schedulers
        price whole graphs with it.

        ``attrs``: the nodes' attribute dicts (``graph.nx.nodes[n]``) in ``nodes``
        order, when the caller has them at hand (the simulator does): saves looking
        each node up by name. Nodes whose attributes the array path cannot take (a
        time that is not a number, an op without an efficiency entry) are priced node
        by node, which raises the first error in ``nodes`` order.
        """
        if not isinstance(nodes, Sequence):
            nodes = list(nodes)
        if attrs is None:
            data = graph.nx.nodes
            attrs = [data[n] for n in nodes]
        if len(attrs) < _ARRAY_MIN:
            return super().price_nodes(graph, nodes, device)
        try:
            view, keys = self._classified(attrs)
            flops = np.array(list(map(itemgetter("flops"), attrs)), dtype=float)
            nbytes = np.array(list(map(itemgetter("bytes"), attrs)), dtype=float)
            compute = np.flatnonzero((flops > 0) & ~view)
            effs = self._efficiencies(keys, compute, flops[compute], device)
        except (CostModelError, KeyError, TypeError, ValueError, OverflowError):
            return super().price_nodes(graph, nodes, device)  # names the first bad node
        t_mem = nbytes / (device.mem_bandwidth_bytes_per_s * self.memory_efficiency(device))
        t = np.where(0.0 >= t_mem, 0.0, t_mem)
        if device.tensor_flops is None:
            peaks: Any = device.peak_flops
        else:
            peaks = np.array([self.peak(keys[i], node_dtype(attrs[i]), device) for i in compute.tolist()])
        t_cmp = flops[compute] / (peaks * effs)
        t_mem_c = t_mem[compute]
        t[compute] = np.where(t_cmp >= t_mem_c, t_cmp, t_mem_c)
        t += device.launch_overhead_s
        t[view] = 0.0
        return t.tolist(), np.where(view, 0.0, float(device.dispatch_s)).tolist()

    def _classified(self, attrs: Sequence[Mapping[str, Any]]) -> tuple[np.ndarray, list[str]]:
        """:meth:`_classify` of each node: whether it is a view (an array) and its
        efficiency key; the ops seen before are looked up in one pass (``map``)."""
        plain, classify = self._plain, self._classify
        ops = list(map(itemgetter("op"), attrs))
        hits = list(map(plain.get, ops))
        if None in hits:  # fused, or an op not seen yet: each new op classified once
            first: dict[Any, Mapping[str, Any]] = {}
            for op, h, d in zip(ops, hits, attrs):
                if h is None and op not in first:
                    first[op] = d
            for d in first.values():
                classify(d)
            hits = list(map(plain.get, ops))
            if None in hits:  # fused nodes: their members
                hits = [h or classify(d) for h, d in zip(hits, attrs)]
        view = np.fromiter(map(itemgetter(0), hits), dtype=bool, count=len(hits))
        return view, list(map(itemgetter(1), hits))

    def _efficiencies(self, keys: list[str], compute: np.ndarray, flops: np.ndarray, device: Device) -> np.ndarray:
        """:meth:`_efficiency` of the nodes at positions ``compute`` (efficiency keys
        ``keys``, all nodes) of ``flops`` (> 0, one per compute node), each key's entry
        resolved once and its curve interpolated over arrays: :func:`_interp`'s
        operations, element by element (``math.log10`` of each, then the same
        subtractions, divisions and products)."""
        effs = np.empty(len(compute))
        if not len(compute):
            return effs
        ckeys = list(map(keys.__getitem__, compute.tolist()))
        distinct = list(dict.fromkeys(ckeys))  # in order of first use: errors as node by node
        codes = None
        if len(distinct) > 1:
            number = {k: j for j, k in enumerate(distinct)}
            codes = np.fromiter(map(number.__getitem__, ckeys), dtype=np.int64, count=len(ckeys))
        for j, key in enumerate(distinct):
            at = slice(None) if codes is None else np.flatnonzero(codes == j)
            f = flops[at]
            self._efficiency(key, float(f[0]), device)  # resolves the entry (or raises)
            entry = self._resolved[(key, device.name, device.kind)]
            effs[at] = entry if type(entry) is float else _interp_many(entry, f)
        return effs

    def transfer_time(self, nbytes: int, link: Link) -> float:
        """One hop: ``latency_s + nbytes / bandwidth_bytes_per_s``."""
        return link.latency_s + nbytes / link.bandwidth_bytes_per_s

    def dispatch_time(self, graph: Graph, node: str, device: Device) -> float:
        """Host time to issue ``node``: ``device.dispatch_s`` (zero for view ops)."""
        if self._classify(graph.nx.nodes[node])[0]:
            return 0.0
        return device.dispatch_s

    # -------------------------------------------------------------- calibration
    def calibrate(
        self,
        measurements: Iterable[Mapping[str, Any]] | Any,
        platform: Platform,
        *,
        by: str = "device",
    ) -> Roofline:
        """A new Roofline whose efficiency table is fitted to measured kernel times.

        Parameters
        ----------
        measurements
            Rows (mappings, or a pandas DataFrame) with ``op`` (``fused:a+b`` or
            ``fused`` plus ``ops`` for fused kernels), ``device`` (a device of
            ``platform``), ``flops``, ``bytes`` and ``time_s``: the columns of a
            profile's ``ops.csv`` joined with node features.
        platform
            Gives each row's device specs.
        by
            ``"device"`` keys the fitted entries by device name (``gpu:matmul``
            for a device called ``gpu``), ``"kind"`` by device kind.

        Returns
        -------
        Roofline
            Compute-bound rows (ideal compute time above ideal memory time) give, per
            (device, op kind) and per decade of FLOPs, the median achieved fraction of
            peak; memory-bound rows give each device's bandwidth efficiency. Entries
            without data keep this model's values.

        Examples
        --------
        >>> from hetsim.costmodel.platform import Platform
        >>> p = Platform.preset("cpu2")
        >>> rows = [{"op": "matmul", "device": "cpu0", "flops": 2e9, "bytes": 1.2e7,
        ...          "time_s": 2e9 / (8.3e10 * 0.5) + 1e-6}]
        >>> fitted = Roofline().calibrate(rows, p)
        >>> round(fitted.compute_efficiency("matmul", 2e9, p.device("cpu0")), 6)
        0.5
        """
        if by not in ("device", "kind"):
            raise CostModelError(f"calibrate: by must be 'device' or 'kind', got {by!r}")
        if hasattr(measurements, "to_dict") and hasattr(measurements, "columns"):
            measurements = measurements.to_dict("records")
        compute: dict[str, dict[int, list[tuple[float, float]]]] = {}
        bandwidth: dict[str, list[float]] = {}
        for i, row in enumerate(measurements, start=1):
            try:
                op, dev_name = str(row["op"]), str(row["device"])
                flops, nbytes, t = float(row["flops"]), float(row["bytes"]), float(row["time_s"])
            except (KeyError, TypeError, ValueError) as e:
                raise CostModelError(
                    f"calibrate: row {i} needs op, device, flops, bytes, time_s ({e})"
                ) from None
            dev = platform.device(dev_name)
            busy = t - dev.launch_overhead_s
            if not math.isfinite(busy) or busy <= 0:
                continue
            prefix = dev.name if by == "device" else dev.kind
            ops = row.get("ops") if isinstance(row.get("ops"), list | tuple) else None
            if _members(op, ops) is None and _short(op) in self.view_ops:
                continue
            ideal_cmp = flops / self.peak(op_key(op, ops), str(row.get("dtype") or "float32"), dev)
            ideal_mem = nbytes / dev.mem_bandwidth_bytes_per_s
            if flops > 0 and ideal_cmp >= ideal_mem:
                key = f"{prefix}:{op_class(op_key(op, ops))}"
                decade = math.floor(math.log10(flops))
                eff = min(1.0, ideal_cmp / busy)
                compute.setdefault(key, {}).setdefault(decade, []).append((flops, eff))
            elif nbytes > 0:
                bandwidth.setdefault(prefix, []).append(min(1.0, ideal_mem / busy))
        table: dict[str, Any] = dict(self.efficiency)
        for key in sorted(compute):
            points = []
            for decade in sorted(compute[key]):
                rows = compute[key][decade]
                points.append(
                    (statistics.median(f for f, _ in rows), statistics.median(e for _, e in rows))
                )
            table[key] = points
        be = self.bandwidth_efficiency
        bw: dict[str, float] = dict(be) if isinstance(be, dict) else {"default": be}
        for prefix in sorted(bandwidth):
            bw[prefix] = statistics.median(bandwidth[prefix])
        return Roofline(efficiency=table, bandwidth_efficiency=bw, view_ops=self.view_ops,
                        matmul_precision=self.matmul_precision)

    # ------------------------------------------------------------ (de)serialise
    def to_dict(self) -> dict[str, Any]:
        """JSON-safe parameters; :meth:`from_dict` rebuilds an identical model."""
        return {
            "efficiency": {
                k: (v if isinstance(v, float) else [list(p) for p in v])
                for k, v in sorted(self.efficiency.items())
            },
            "bandwidth_efficiency": (
                dict(sorted(self.bandwidth_efficiency.items()))
                if isinstance(self.bandwidth_efficiency, dict)
                else self.bandwidth_efficiency
            ),
            "view_ops": sorted(self.view_ops),
            **({"matmul_precision": self.matmul_precision} if self.matmul_precision else {}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Roofline:
        """Inverse of :meth:`to_dict`."""
        unknown = sorted(set(data) - {"efficiency", "bandwidth_efficiency", "view_ops", "matmul_precision"})
        if unknown:
            raise CostModelError(f"Roofline.from_dict: unknown key(s) {unknown}")
        return cls(
            efficiency=data.get("efficiency"),
            bandwidth_efficiency=data.get("bandwidth_efficiency", 1.0),
            view_ops=data.get("view_ops", VIEW_OPS),
            matmul_precision=data.get("matmul_precision"),
        )
