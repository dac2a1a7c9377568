"""Measured cost models: the glue between a profile, a learned predictor and the
:class:`~costmodel.base.CostModel` protocol, plus the base class of the predictors.

A *predictor* (:class:`~costmodel.learned.table.Table`, :class:`~costmodel.learned.polynomial.Polynomial`,
:class:`~costmodel.learned.xgb.XGBoost`) is a scikit-learn style estimator on profile rows:
``fit(X, y)`` with ``X`` a DataFrame holding ``device`` (profile device name), ``op``,
``signature`` and the :data:`graphs.FEATURE_COLUMNS`, ``y`` the kernel times in
seconds; it keeps one sub-model per profile device. :class:`MeasuredCostModel`
wraps a fitted predictor with what else the profile measured and prices graphs:

* **op_time** -- the predictor's time for the node's features. Predictors are
  fitted on :meth:`~costmodel.profile_reader.Profile.call_times` (a CPU op's wall time per
  call, dispatch included; a GPU op's kernel time), so the dispatch those hold
  (``call_overhead``, :meth:`~costmodel.profile_reader.Profile.call_overhead`) is taken
  off again: the simulator charges it to the host. A platform device is
  priced as a profile device: ``device_map[device.name]`` when given, else the first
  profile device of the same kind that the predictor has data for. A device with
  none (a GPU on a CPU-only profile) is priced by the fallback
  (:class:`~costmodel.roofline.Roofline`) and reported as a fallback.
* **transfer_time** -- ``transfer_time(nbytes, link)`` sees the link, not the
  device objects nor the direction of the copy. When the kinds of both ends are
  known -- from ``device_map``, from ``platform`` (give it: ``costmodel.fit(...,
  platform=p)``, ``from_spec(..., platform=p)``), or because a platform device has
  the name of a profile device -- and ``links.json`` has a fit for that pair of
  kinds, the fit for ``kind(link.src) -> kind(link.dst)`` (the reverse one if only
  that was measured) prices it: ``latency_s + nbytes / bandwidth_bytes_per_s``;
  pass ``src=`` to name the sending end. Otherwise the link's own ``latency_s`` and
  bandwidth price it. The answer never depends on what was priced before.
* **dispatch_time** -- on a GPU profiled in format version 2, the launch time
  the profile measured for the node's signature (``launch_s``; a signature it did not
  measure: the median of the device's), since ``op_time`` is the device time alone;
  otherwise ``dispatch.json`` of the mapped profile device, else the platform
  device's ``dispatch_s``. View ops (:data:`graphs.VIEW_OPS`) on a GPU run no
  kernel: ``op_time`` and ``dispatch_time`` 0, never a fallback.

Nothing is priced silently: a node priced by a fallback (a signature the Table did
not measure, an op kind the Polynomial had too few samples of, an op kind XGBoost
never saw, a device the profile lacks) is listed by :meth:`MeasuredCostModel.fallbacks`,
counted by :meth:`MeasuredCostModel.coverage`, and one :class:`CostModelWarning`
per graph and device says how many.
"""

from __future__ import annotations

import inspect
import json
import numbers
import os
import warnings
import weakref
from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import pandas as pd

from hetsim.costmodel.base import CostModelBase, CostModelError
from hetsim.costmodel.roofline import Roofline
from hetsim.graphs.features import FEATURE_COLUMNS, features
from hetsim.graphs.graph import VIEW_OPS, atomic_write

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.costmodel.platform import Device, Link, Platform
    from hetsim.costmodel.profile_reader import Profile
    from hetsim.graphs.graph import Graph

__all__ = [
    "COSTMODEL_FILE_VERSION",
    "KERNEL_FEATURES",
    "TIME_FLOOR_S",
    "CostModelWarning",
    "MeasuredCostModel",
    "NotFittedError",
    "Predictor",
]

#: version of the JSON files written by ``save``
COSTMODEL_FILE_VERSION = 1
#: times are floored here before taking logs or relative errors (1 ns: below any
#: measurable kernel, so it only guards against a zero in a profile)
TIME_FLOOR_S = 1e-9
#: features that describe the kernel itself: FEATURE_COLUMNS without the node's
#: position in its graph (in/out degree, depth), which says nothing about its speed
KERNEL_FEATURES: list[str] = [c for c in FEATURE_COLUMNS if c not in ("in_degree", "out_degree", "depth")]
_PREDICTORS = {
    "table": ("hetsim.costmodel.learned.table", "Table"),
    "polynomial": ("hetsim.costmodel.learned.polynomial", "Polynomial"),
    "xgboost": ("hetsim.costmodel.learned.xgb", "XGBoost"),
}


class NotFittedError(CostModelError):
    """A predictor was used before ``fit``."""


class CostModelWarning(UserWarning):
    """Some operators were priced by a fallback; the message says how many and why."""


# -------------------------------------------------------------------- predictors
class Predictor:
    """Base of the learned predictors: parameters, checks and persistence.

    Subclasses set ``kind``, store keyword hyper-parameters in ``__init__`` (nothing
    else), and implement ``fit``, ``predict``, ``fallback_reasons``,
    ``fitted_state`` and ``load_fitted``. Fitted state lives in attributes ending
    in ``_``; ``devices_`` lists the profile devices fitted.
    """

    kind: ClassVar[str] = ""
    #: columns ``fit``/``predict`` need besides ``device``
    required_columns: ClassVar[tuple[str, ...]] = ("op", *FEATURE_COLUMNS)

    def get_params(self) -> dict[str, Any]:
        """Hyper-parameters, as given to ``__init__``."""
        names = [p for p in inspect.signature(type(self).__init__).parameters if p != "self"]
        return {n: getattr(self, n) for n in names}

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({params})"

    @property
    def is_fitted(self) -> bool:
        return hasattr(self, "devices_")

    def check_fitted(self) -> None:
        if not self.is_fitted:
            raise NotFittedError(f"{type(self).__name__} is not fitted yet: call fit(X, y) first")

    def _check_X(self, X: Any, *, fitting: bool = False) -> pd.DataFrame:
        if not isinstance(X, pd.DataFrame):
            raise CostModelError(f"{type(self).__name__}: X must be a pandas DataFrame of profile rows, got {type(X).__name__}")
        missing = [c for c in ("device", *self.required_columns) if c not in X.columns]
        if missing:
            raise CostModelError(f"{type(self).__name__}: X lacks column(s) {missing}")
        if not fitting:
            unknown = sorted(set(X["device"].astype(str)) - set(self.devices_))
            if unknown:
                raise CostModelError(
                    f"{type(self).__name__}: no data for device(s) {unknown} (fitted on {self.devices_})"
                )
        return X

    def _check_Xy(self, X: Any, y: Any) -> tuple[pd.DataFrame, np.ndarray]:
        X = self._check_X(X, fitting=True)
        t = np.asarray(y, dtype=float).reshape(-1)
        if len(t) != len(X):
            raise CostModelError(f"{type(self).__name__}: X has {len(X)} rows but y has {len(t)}")
        if len(t) == 0:
            raise CostModelError(f"{type(self).__name__}: cannot fit on zero rows")
        if not np.all(np.isfinite(t)) or np.any(t < 0):
            i = int(np.flatnonzero(~np.isfinite(t) | (t < 0))[0])
            raise CostModelError(f"{type(self).__name__}: y[{i}] = {t[i]!r} (need finite times >= 0)")
        num = X[[c for c in self.required_columns if c in FEATURE_COLUMNS]].to_numpy(dtype=float)
        if not np.all(np.isfinite(num)):
            i = int(np.flatnonzero(~np.isfinite(num).all(axis=1))[0])
            raise CostModelError(f"{type(self).__name__}: X row {i} (0-based position) has a non-finite feature")
        return X, np.maximum(t, TIME_FLOOR_S)

    def predict(self, X: pd.DataFrame) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def fallback_reasons(self, X: pd.DataFrame) -> list[str]:  # pragma: no cover - abstract
        """One string per row: empty when the row is priced by the main model,
        else why and by what it was priced."""
        raise NotImplementedError

    def fitted_state(self) -> dict[str, Any]:  # pragma: no cover - abstract
        raise NotImplementedError

    def load_fitted(self, state: Mapping[str, Any]) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    # ------------------------------------------------------------- persistence
    @classmethod
    def from_params(cls, params: dict[str, Any]) -> Predictor:
        return cls(**params)

    def params_state(self) -> dict[str, Any]:
        params = self.get_params()
        return {k: list(v) if isinstance(v, tuple) else v for k, v in params.items()}

    def get_state(self) -> dict[str, Any]:
        """JSON-safe description: ``{"kind", "params", "fitted"}``."""
        self.check_fitted()
        return {"kind": self.kind, "params": self.params_state(), "fitted": self.fitted_state()}

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the fitted predictor as JSON (``costmodel.load`` reads it back)."""
        path = Path(path)
        write_json(path, {"hetsim_costmodel": COSTMODEL_FILE_VERSION, **self.get_state()})
        return path

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Predictor:
        """Read a file written by :meth:`save`."""
        data = read_model_file(path)
        if data.get("kind") == "xgboost" and "booster_files" in data.get("fitted", {}):
            pred = predictor_class("xgboost").load(path)  # boosters in their own files
        else:
            pred = predictor_from_state(data, where=str(path))
        if cls is not Predictor and not isinstance(pred, cls):
            raise CostModelError(f"{path}: holds a {data.get('kind')!r} model, not a {cls.kind!r} one")
        return pred


def predictor_from_state(state: Mapping[str, Any], *, where: str = "<state>") -> Predictor:
    """Rebuild a fitted predictor from :meth:`Predictor.get_state`."""
    cls = predictor_class(state.get("kind"), where=where)
    try:
        pred = cls.from_params(dict(state.get("params", {})))
        pred.load_fitted(state["fitted"])
    except (KeyError, TypeError, ValueError) as e:
        if isinstance(e, CostModelError):
            raise
        raise CostModelError(f"{where}: malformed {state.get('kind')!r} model ({type(e).__name__}: {e})") from None
    return pred


def predictor_class(kind: Any, *, where: str = "") -> type[Predictor]:
    """The predictor class of ``kind`` (``table``, ``polynomial``, ``xgboost``)."""
    if kind not in _PREDICTORS:
        raise CostModelError(f"{where + ': ' if where else ''}unknown predictor kind {kind!r}; known: {sorted(_PREDICTORS)}")
    import importlib

    module, name = _PREDICTORS[kind]
    return getattr(importlib.import_module(module), name)


def read_model_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The JSON of a saved model, checked for ``hetsim_costmodel`` version."""
    p = Path(path)
    try:
        data = json.loads(p.read_text())
    except FileNotFoundError:
        raise CostModelError(f"{p}: no such saved cost model") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CostModelError(f"{p}: not a saved cost model (invalid JSON: {e})") from None
    if not isinstance(data, dict) or data.get("hetsim_costmodel") != COSTMODEL_FILE_VERSION:
        got = data.get("hetsim_costmodel") if isinstance(data, dict) else None
        raise CostModelError(f"{p}: 'hetsim_costmodel' is {got!r}; this hetsim reads version {COSTMODEL_FILE_VERSION}")
    return data


def write_json(path: Path, data: Any) -> None:
    """Write ``data`` as compact JSON, atomically (:func:`graphs.graph.atomic_write`)."""
    atomic_write(path, lambda fh: fh.write(json.dumps(data, separators=(",", ":")) + "\n"))


# ------------------------------------------------------------------ cost model
class _GraphEntry:
    """Features of one graph and, per profile device, its predicted times."""

    __slots__ = ("ref", "n_nodes", "index", "X", "times", "reasons", "uncovered", "warned")

    def __init__(self, graph: Graph) -> None:
        self.ref = weakref.ref(graph)
        self.n_nodes = graph.number_of_nodes()
        self.X = features(graph)
        self.index = {n: i for i, n in enumerate(self.X.index)}
        self.times: dict[str, np.ndarray] = {}
        self.reasons: dict[str, list[str]] = {}
        self.uncovered: set[str] = set()  # profile devices that measured none of the nodes
        self.warned: set[str] = set()


class MeasuredCostModel(CostModelBase):
    """A :class:`~costmodel.base.CostModel` from a fitted predictor and a profile's
    devices, link fits and dispatch times (see the module docstring for the rules).

    Parameters
    ----------
    predictor
        A fitted :class:`Predictor`.
    device_kinds
        Profile device name -> ``"cpu"``/``"gpu"`` (manifest order).
    link_fits
        ``"cpukind->gpukind"`` (device *kinds*) -> ``(latency_s, bandwidth_bytes_per_s)``.
    dispatch
        Profile device name -> host seconds per op launch.
    launch
        GPU profile device -> signature -> host seconds of one eager launch, ``""``
        -> the device's median (:meth:`~costmodel.profile_reader.Profile.launch_times`).
    device_map
        Platform device name -> profile device name, overriding the match by kind.
    platform
        The platform priced: gives the device kinds of link ends to ``transfer_time``.
    fallback
        Cost model for devices the profile has no data for (default :class:`Roofline`).
    name
        Shown in warnings and ``repr`` (the profile name).
    allow_uncovered
        Price a graph none of whose nodes the profile measured on a device (coverage
        0 %: every time a fallback's extrapolation). By default that is refused with a
        :class:`CostModelError`: a profile of other models says nothing measured about it.
    cache_size
        Graphs whose features and predicted times are kept (least recently used
        first out); entries hold the graph weakly.

    Examples
    --------
    >>> cost = costmodel.fit("profiles/box", kind="xgboost")          # doctest: +SKIP
    >>> sim.simulate(graph, "cpu2", plan, cost).makespan              # doctest: +SKIP
    >>> cost.coverage(graph, platform.device("cpu0"))                 # doctest: +SKIP
    """

    def __init__(
        self,
        predictor: Predictor,
        *,
        device_kinds: Mapping[str, str],
        link_fits: Mapping[str, tuple[float, float]] | None = None,
        dispatch: Mapping[str, float] | None = None,
        call_overhead: Mapping[str, float] | None = None,
        launch: Mapping[str, Mapping[str, float]] | None = None,
        device_map: Mapping[str, str] | None = None,
        platform: Platform | None = None,
        fallback: Any = None,
        name: str = "measured",
        allow_uncovered: bool = False,
        cache_size: int = 8,
    ) -> None:
        predictor.check_fitted()
        self.predictor = predictor
        self.device_kinds = dict(device_kinds)
        self.link_fits = {k: (float(v[0]), float(v[1])) for k, v in (link_fits or {}).items()}
        self.dispatch = dict(dispatch or {})
        self.launch = {str(d): {str(k): float(v) for k, v in per.items()} for d, per in (launch or {}).items()}
        self.call_overhead = {str(k): float(v) for k, v in (call_overhead or {}).items()}
        bad = {k: v for k, v in self.call_overhead.items() if not (np.isfinite(v) and v >= 0)}
        if bad:
            raise CostModelError(f"call_overhead: need finite seconds >= 0, got {bad}")
        self.device_map = dict(device_map or {})
        for plat, prof in self.device_map.items():
            if prof not in self.device_kinds:
                raise CostModelError(
                    f"device_map: {plat!r} -> {prof!r}, but the profile's devices are {list(self.device_kinds)}"
                )
        self.platform = platform
        self.fallback = fallback if fallback is not None else Roofline()
        self.name = name
        self.allow_uncovered = bool(allow_uncovered)
        if not isinstance(cache_size, numbers.Integral) or cache_size < 1:
            raise CostModelError(f"cache_size must be an int >= 1, got {cache_size!r}")
        self.cache_size = cache_size
        self._graphs: OrderedDict[int, _GraphEntry] = OrderedDict()

    @classmethod
    def from_profile(
        cls, profile: Profile, predictor: Predictor, *, device_map: Mapping[str, str] | None = None,
        platform: Platform | None = None, fallback: Any = None, allow_uncovered: bool = False,
    ) -> MeasuredCostModel:
        """Wrap ``predictor`` (fitted on ``profile.call_times()``) with the profile's
        devices, link fits and dispatch times; ``call_overhead`` is
        :meth:`~costmodel.profile_reader.Profile.call_overhead` (taken off the predicted
        per-call time)."""
        fits = {f"{a}->{b}": v for (a, b), v in profile.kind_link_fits().items()}
        overhead = profile.call_overhead()
        return cls(predictor, device_kinds=profile.device_kinds, link_fits=fits, dispatch=profile.dispatch,
                   call_overhead=overhead, launch=profile.launch_times(), device_map=device_map, platform=platform, fallback=fallback,
                   name=profile.name, allow_uncovered=allow_uncovered)

    def __repr__(self) -> str:
        return f"MeasuredCostModel({self.name!r}, {self.predictor!r}, devices={list(self.device_kinds)})"

    # ------------------------------------------------------------ device match
    def profile_device(self, device: Device, *, need_data: bool = True) -> str | None:
        """The profile device that prices platform ``device`` (None: none fits)."""
        if device.name in self.device_map:
            return self.device_map[device.name]
        have = set(self.predictor.devices_) if need_data else set(self.device_kinds)
        for name, kind in self.device_kinds.items():
            if kind == device.kind and name in have:
                return name
        return None

    def _kind_of(self, name: str) -> str | None:
        if name in self.device_map:
            return self.device_kinds[self.device_map[name]]
        if self.platform is not None and name in self.platform:
            return self.platform.device(name).kind
        return self.device_kinds.get(name)

    # ----------------------------------------------------------------- pricing
    def _entry(self, graph: Graph, node: str | None = None) -> _GraphEntry:
        key = id(graph)
        entry = self._graphs.get(key)
        if (entry is None or entry.ref() is not graph or entry.n_nodes != graph.number_of_nodes()
                or (node is not None and node not in entry.index)):
            entry = _GraphEntry(graph)
            self._graphs[key] = entry
            while len(self._graphs) > self.cache_size:
                self._graphs.popitem(last=False)
        else:
            self._graphs.move_to_end(key)
        if node is not None and node not in entry.index:
            raise CostModelError(f"graph {graph.name!r} has no node {node!r}")
        return entry

    def _priced(self, graph: Graph, pdev: str, node: str | None = None, *, refuse_uncovered: bool = True) -> _GraphEntry:
        """The graph's entry with its times on ``pdev`` (predicted once); a graph the
        profile measured none of is refused unless :attr:`allow_uncovered` (or
        ``refuse_uncovered=False``: the reports)."""
        entry = self._entry(graph, node)
        if pdev not in entry.times:
            X = entry.X.assign(device=pdev)
            times = np.asarray(self.predictor.predict(X), dtype=float)
            overhead = self.call_overhead.get(pdev, 0.0)
            if overhead:
                times = np.maximum(times - overhead, TIME_FLOOR_S)
            reasons = self.predictor.fallback_reasons(X)
            if self.device_kinds.get(pdev) == "gpu":  # a view runs no kernel on a GPU
                view = X["op"].astype(str).isin(VIEW_OPS).to_numpy()
                times = np.where(view, 0.0, times)
                reasons = ["" if v else r for v, r in zip(view, reasons)]
            entry.times[pdev] = times
            entry.reasons[pdev] = reasons
            n_fb = sum(1 for r in reasons if r)
            if n_fb and n_fb == len(reasons):
                entry.uncovered.add(pdev)
            if n_fb and (pdev not in entry.uncovered or self.allow_uncovered):
                example = next(r for r in reasons if r)
                warnings.warn(
                    CostModelWarning(
                        f"{self.name}: {n_fb} of {len(reasons)} nodes of graph {graph.name!r} on profile "
                        f"device {pdev!r} priced by a fallback (coverage {1 - n_fb / len(reasons):.1%}), "
                        f"e.g. {example}; see .fallbacks(graph, device)"
                    ),
                    stacklevel=4,
                )
        if refuse_uncovered and pdev in entry.uncovered and not self.allow_uncovered:
            raise CostModelError(
                f"{self.name}: the profile measured none of the {len(entry.reasons[pdev])} nodes of graph "
                f"{graph.name!r} on {pdev!r} (coverage 0%, e.g. {entry.reasons[pdev][0]}); profile the model "
                "('hetsim profile'), or accept extrapolated times with --allow-uncovered "
                "(Python: allow_uncovered=True)"
            )
        return entry

    def op_time(self, graph: Graph, node: str, device: Device) -> float:
        """Predicted kernel time of ``node`` on ``device``: the predictor's per-call
        time less the profile device's ``call_overhead`` (its dispatch, which the
        simulator charges to the host)."""
        pdev = self.profile_device(device)
        if pdev is None:
            entry = self._entry(graph, node)
            if device.name not in entry.warned:
                entry.warned.add(device.name)
                warnings.warn(
                    CostModelWarning(
                        f"{self.name}: the profile has no data for a {device.kind} device "
                        f"({device.name!r}); graph {graph.name!r} priced on it by {type(self.fallback).__name__}"
                    ),
                    stacklevel=2,
                )
            return float(self.fallback.op_time(graph, node, device))
        entry = self._priced(graph, pdev, node)
        return float(entry.times[pdev][entry.index[node]])

    def dispatch_time(self, graph: Graph, node: str, device: Device) -> float:
        """Host time to issue one op on ``device``: the measured launch of its signature
        (GPU, format version 2; views 0), else ``dispatch.json`` of its profile device,
        else ``device.dispatch_s``."""
        pdev = self.profile_device(device, need_data=False)
        if pdev is not None and pdev in self.launch:
            entry = self._entry(graph, node)
            row = entry.X.iloc[entry.index[node]]
            if str(row["op"]) in VIEW_OPS:
                return 0.0
            per = self.launch[pdev]
            return per.get(str(row["signature"]), per[""])
        if pdev is not None and pdev in self.dispatch:
            return self.dispatch[pdev]
        return float(device.dispatch_s)

    def transfer_time(self, nbytes: int, link: Link, *, src: str | None = None) -> float:
        """One hop over ``link``; ``src``: the sending end when known."""
        ks, kd = self._kind_of(link.src), self._kind_of(link.dst)
        if src is not None and src == link.dst:
            ks, kd = kd, ks
        fit = None
        if ks is not None and kd is not None:
            fit = self.link_fits.get(f"{ks}->{kd}") or self.link_fits.get(f"{kd}->{ks}")
        if fit is None:
            return link.latency_s + nbytes / link.bandwidth_bytes_per_s
        return fit[0] + nbytes / fit[1]

    # ---------------------------------------------------------------- reports
    def fallbacks(self, graph: Graph, device: Device) -> dict[str, str]:
        """Node -> why it was not priced by the main model, on ``device``."""
        pdev = self.profile_device(device)
        nodes = list(graph.nx)
        if pdev is None:
            why = f"no profile data for a {device.kind} device: {type(self.fallback).__name__}"
            return {n: why for n in nodes}
        entry = self._priced(graph, pdev, refuse_uncovered=False)
        return {n: r for n, r in zip(entry.X.index, entry.reasons[pdev]) if r}

    def coverage(self, graph: Graph, device: Device) -> float:
        """Fraction of ``graph``'s nodes priced by the main model on ``device``
        (for a :class:`~costmodel.learned.table.Table`: measured signatures found)."""
        n = graph.number_of_nodes()
        return 1.0 - len(self.fallbacks(graph, device)) / n if n else 1.0

    def clear_cache(self) -> None:
        """Forget cached features and times (after mutating a graph in place)."""
        self._graphs.clear()

    # ------------------------------------------------------------ persistence
    def get_state(self) -> dict[str, Any]:
        """JSON-safe state (the predictor's included)."""
        fb = self.fallback
        return {
            "kind": "measured",
            "name": self.name,
            "device_kinds": self.device_kinds,
            "link_fits": {k: list(v) for k, v in self.link_fits.items()},
            "dispatch": self.dispatch,
            "call_overhead": self.call_overhead,
            "launch": self.launch,
            "device_map": self.device_map,
            "fallback": fb.to_dict() if isinstance(fb, Roofline) else None,
            "predictor": self.predictor.get_state(),
        }

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the model as one JSON file (``costmodel.load`` reads it back)."""
        if self.fallback is not None and not isinstance(self.fallback, Roofline):
            raise CostModelError(f"save: cannot store a {type(self.fallback).__name__} fallback (only Roofline)")
        path = Path(path)
        write_json(path, {"hetsim_costmodel": COSTMODEL_FILE_VERSION, **self.get_state()})
        return path

    @classmethod
    def from_state(cls, state: Mapping[str, Any], *, where: str = "<state>") -> MeasuredCostModel:
        """Inverse of :meth:`get_state`."""
        try:
            pred = predictor_from_state(state["predictor"], where=where)
            fb = Roofline.from_dict(state["fallback"]) if state.get("fallback") else None
            return cls(pred, device_kinds=state["device_kinds"], link_fits=state.get("link_fits"),
                       dispatch=state.get("dispatch"), call_overhead=state.get("call_overhead"),
                       launch=state.get("launch"), device_map=state.get("device_map"),
                       fallback=fb, name=state.get("name", "measured"))
        except (KeyError, TypeError) as e:
            raise CostModelError(f"{where}: malformed measured cost model ({type(e).__name__}: {e})") from None

