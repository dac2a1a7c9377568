"""GPU cost models fitted on measured kernels: per GPU, and across GPUs from spec sheets.

A :class:`GPUBank` holds the profiles of measured GPUs (the data set's, imported by
:mod:`costmodel.gpu.neusight`, or your own in the same format) and fits, on demand:

* **own models**: per GPU and kernel family (:data:`~costmodel.gpu.features.GPU_FAMILIES`),
  XGBoost on the family's dims (:func:`~costmodel.gpu.features.design`: GEMM dims,
  tile waves and quantization for the GPU's SM count, alignment...) learning
  ``log(t / t0)``, ``t0 = a + flops / P + bytes / B`` fitted to the family's rows;
* **cross-GPU models**: per family, over the rows of every GPU of the bank, with
  the GPUs' published figures as inputs (SM count, clock, FP32 peak, memory
  bandwidth, L2, board power), learning ``log(t / t0)`` with ``t0 = floor +
  max(flops / min(peak, W x tdp_w), bytes / (f x bandwidth))``, the power-limited
  roofline (``W``: the median GEMM FLOP/s per watt the bank's GPUs achieve, ``f``
  their median achieved fraction of the published bandwidth; a 70 W T4 sustains
  about half its FP32 peak): what prices a GPU nobody measured, or a family a GPU
  has no rows of (the data set has no convolutions on the H100);
* the **calibrated roofline** of each GPU (:mod:`costmodel.gpu.roofline`) for the
  ops no family covers.

Fitted models are stored (:mod:`costmodel.gpu.store`) under a key made of the content
of the profiles they were fitted on and their parameters: the models of the built-in
profiles ship with the package, so that the built-in GPUs' presets fit nothing; what
a bank fits (other profiles, other parameters, the evaluation's held-out fits) goes to
the user's cache (``$HETSIM_CACHE/gpu-models``, else ``~/.cache/hetsim/gpu-models``),
with a progress bar when it takes more than two seconds.

:class:`GPUCostModel` is the :class:`~costmodel.base.CostModel` over a bank: one GPU
of the bank (``gpu="a100-80gb"``), or any GPU from its Device's published figures
(``gpu=None``: the cross-GPU predictor). The data set's latencies are whole PyTorch
calls bracketed by CUDA events: the smallest call of a GPU (its ``floor``, 24-39
us) is mostly the host's launch path, which the simulator charges to the host as
dispatch. ``op_time`` is therefore the predicted call time less the GPU's floor,
plus the device's ``launch_overhead_s``; :meth:`GPUBank.predict` gives call times.
"""

from __future__ import annotations

import hashlib
import json
import os
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from hetsim.costmodel.base import CostModelBase, CostModelError
from hetsim.costmodel.builtin import builtin_profiles
from hetsim.costmodel.gpu.features import GPU_FAMILIES, SPEC_KEYS, design, gpu_ops, spec_roofline
from hetsim.costmodel.gpu.roofline import (
    MIN_FIT_ROWS,
    CalibratedRoofline,
    fit_calibrated_roofline,
    fits_bandwidth,
    views,
)
from hetsim.costmodel.gpu.store import (
    MODEL_VERSION,
    SHIPPED,
    ModelStore,
    cache_dir,
    store_key,
)
from hetsim.costmodel.gpu.trees import TreeEnsemble, fit_trees
from hetsim.costmodel.learned.xgb_features import sum_fit
from hetsim.costmodel.profile_reader import read_profile, validate_manifest
from hetsim.graphs.features import features

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.costmodel.platform import Device, Link
    from hetsim.graphs.graph import Graph

__all__ = ["GPUBank", "GPUCostModel", "GPUData", "FamilyModel", "MODEL_VERSION", "device_spec", "holdout",
           "parse_fold", "shape_fold"]

#: rows a family needs on a GPU for its own model
MIN_FAMILY_ROWS = 50
#: one row in this many of a GPU's convolutions is held out for evaluation (the data
#: set has no conv test file); chosen by a hash of the signature, so it never moves
CONV_HOLDOUT = 5
#: default XGBoost parameters of the own and the cross-GPU models
DEFAULT_PARAMS: dict[str, Any] = {"n_estimators": 400, "max_depth": 7, "learning_rate": 0.06,
                                  "subsample": 0.8, "colsample_bytree": 0.8, "min_child_weight": 2.0,
                                  "cross_rows_per_gpu": 8000, "seed": 0}


def shape_fold(signatures: Iterable[str], folds: int) -> np.ndarray:
    """The fold (``0 .. folds-1``) of each operator signature, by a hash of the
    signature: stable across runs and machines, the same shape in the same fold on
    every GPU."""
    return np.array([int(hashlib.sha1(s.encode()).hexdigest()[:8], 16) % folds for s in signatures], dtype=int)


def holdout(signatures: Iterable[str]) -> np.ndarray:
    """True for the signatures held out of the conv training rows (one in
    :data:`CONV_HOLDOUT`: fold 0 of :func:`shape_fold`)."""
    return shape_fold(signatures, CONV_HOLDOUT) == 0


def parse_fold(subset: str) -> tuple[int, int]:
    """``(I, K)`` of a cross-validation subset name ``"cv-I-of-K"``."""
    parts = str(subset).split("-")
    if len(parts) == 4 and parts[0] == "cv" and parts[2] == "of" and parts[1].isdigit() and parts[3].isdigit() \
            and 0 <= int(parts[1]) < int(parts[3]) and int(parts[3]) >= 2:
        return int(parts[1]), int(parts[3])
    raise CostModelError(f"subset must be 'all', 'train' or 'cv-I-of-K' (0 <= I < K, K >= 2), got {subset!r}")


def device_spec(device: Device) -> dict[str, float]:
    """The published figures of ``device`` the cross-GPU model needs.

    Raises
    ------
    CostModelError
        Naming the device and the missing key (``sm_count``, ``clock_hz``, ``l2_bytes``,
        ``tdp_w``...).
    """
    spec = {k: getattr(device, k, None) for k in SPEC_KEYS}
    missing = [k for k, v in spec.items() if v is None]
    if missing:
        raise CostModelError(
            f"GPU {device.name!r} has no {', '.join(repr(m) for m in missing)}: the cross-GPU cost model "
            f"prices a GPU from its published figures; add {'/'.join(missing)} to its [[devices]] entry")
    return {k: float(v) for k, v in spec.items()}


# ---------------------------------------------------------------- one family model
@dataclass
class FamilyModel:
    """A fitted model of one kernel family: baseline and trees over it.

    ``mode``: ``"own"`` (one GPU; ``coef = [a, 1/P, 1/B]`` of ``t0 = a + flops/P +
    bytes/B``) or ``"cross"`` (``coef = [flops_per_watt, bandwidth_fraction]`` of
    ``t0 = floor + max(flops / min(peak, flops_per_watt x tdp), bytes / (bandwidth x
    fraction))`` from the GPU's figures: its power-limited roofline).
    ``trees``: the boosted trees of ``log(t / t0)`` (fitted by XGBoost).
    """

    family: str
    mode: str
    coef: list[float]
    columns: list[str]
    trees: TreeEnsemble | None
    n_rows: int
    gpus: list[str] = field(default_factory=list)

    def baseline(self, ops: pd.DataFrame, spec: Mapping[str, float], floor: float | np.ndarray) -> np.ndarray:
        fl, by = ops["flops"].to_numpy(float), ops["bytes"].to_numpy(float)
        if self.mode == "own":
            a, c1, c2 = self.coef
            return np.maximum(a + c1 * fl + c2 * by, 1e-9)
        alpha, fraction = self.coef
        return np.maximum(floor + spec_roofline(ops, spec, flops_per_watt=alpha, bandwidth_fraction=fraction), 1e-9)

    def predict(self, ops: pd.DataFrame, spec: Mapping[str, float], floor: float) -> np.ndarray:
        """Call times (seconds) of ``ops`` rows of this family on a GPU with figures ``spec``."""
        if self.trees is None:
            raise CostModelError(f"{self.mode} model of {self.family!r} has no trees")
        M, _ = design(ops, self.family, spec, with_spec=self.mode == "cross")
        return np.exp(self.trees.predict(M)) * self.baseline(ops, spec, floor)

    def describe(self) -> dict[str, Any]:
        """What :mod:`costmodel.gpu.store` keeps beside the trees."""
        return {"empty": False, "family": self.family, "mode": self.mode, "coef": self.coef,
                "columns": self.columns, "n_rows": self.n_rows, "gpus": self.gpus}


# -------------------------------------------------------------------------- bank
@dataclass
class GPUData:
    """One measured GPU of a bank: its published figures and its profile rows."""

    name: str
    spec: dict[str, float]
    path: Path
    digest: str
    _loaded: tuple[pd.DataFrame, pd.DataFrame, np.ndarray] | None = field(default=None, repr=False)

    @property
    def loaded(self) -> bool:
        """Whether the profile has been read."""
        return self._loaded is not None

    def load(self) -> tuple[pd.DataFrame, pd.DataFrame, np.ndarray]:
        """``(profile rows, gpu_ops of them, call times)``, read once."""
        if self._loaded is None:
            prof = read_profile(self.path)
            rows = prof.ops[prof.ops["device_kind"] == "gpu"].reset_index(drop=True)
            if rows.empty:
                raise CostModelError(f"{self.path}: no GPU rows")
            if "split" not in rows:
                rows = rows.assign(split="train")
            self._loaded = (rows, gpu_ops(rows), prof.call_times(rows))
        return self._loaded


def _digest(folder: Path) -> str:
    h = hashlib.sha1()
    for name in ("manifest.json", "ops.csv.gz", "ops.csv"):
        p = folder / name
        if p.is_file():
            h.update(name.encode())
            h.update(p.read_bytes())
    return h.hexdigest()[:16]


class GPUBank:
    """Measured GPUs and the models fitted on them (see the module docstring).

    Parameters
    ----------
    gpus
        The GPUs (:meth:`from_profiles` reads them from profile folders).
    params
        XGBoost parameters overriding :data:`DEFAULT_PARAMS` (``n_estimators``,
        ``max_depth``, ``learning_rate``, ``subsample``, ``colsample_bytree``,
        ``min_child_weight``, ``cross_rows_per_gpu``, ``seed``, ``n_jobs``).
    cache
        Folder of fitted models; ``None``: ``$HETSIM_CACHE/gpu-models`` (else
        ``~/.cache/hetsim/gpu-models``); ``False``: no disk cache. The models shipped
        with the package (:data:`~costmodel.gpu.store.SHIPPED`) are read after it.

    Examples
    --------
    >>> bank = GPUBank.builtin()                                   # doctest: +SKIP
    >>> t, src = bank.predict(features(graph), gpu="t4")  # call times, sources  # doctest: +SKIP
    """

    def __init__(self, gpus: Sequence[GPUData], *, params: Mapping[str, Any] | None = None,
                 cache: str | os.PathLike[str] | bool | None = None) -> None:
        if not gpus:
            raise CostModelError("a GPU bank needs at least one GPU profile")
        self.gpus = {g.name: g for g in gpus}
        if len(self.gpus) != len(gpus):
            raise CostModelError(f"GPU bank: duplicate GPU names in {[g.name for g in gpus]}")
        unknown = sorted(set(params or {}) - set(DEFAULT_PARAMS) - {"n_jobs"})
        if unknown:
            raise CostModelError(f"GPU bank: unknown parameter(s) {unknown}; known: {sorted(DEFAULT_PARAMS)}")
        self.params = {**DEFAULT_PARAMS, **dict(params or {})}
        self.cache = None if cache is False else (cache_dir() if cache in (None, True) else Path(cache))
        self.store = ModelStore([*([self.cache] if self.cache is not None else []), SHIPPED], self.cache)
        self._models: dict[str, FamilyModel | None] = {}
        self._summaries: dict[str, dict[str, Any]] = {}
        self._roofs: dict[str, CalibratedRoofline] = {}

    def __repr__(self) -> str:
        return f"GPUBank({list(self.gpus)})"

    # ----------------------------------------------------------- construction
    @classmethod
    def from_profiles(cls, folders: Iterable[str | os.PathLike[str]], **kw: Any) -> GPUBank:
        """A bank of the GPU profile folders ``folders`` (one GPU device each, with
        its published figures in the manifest's ``devices[0].spec``)."""
        gpus = []
        for f in folders:
            folder = Path(f)
            mpath = folder / "manifest.json"
            if not mpath.is_file():
                raise CostModelError(f"{mpath}: missing (not a profile folder)")
            try:
                man = json.loads(mpath.read_text())
            except (json.JSONDecodeError, UnicodeDecodeError) as e:
                raise CostModelError(f"{mpath}: not valid JSON ({e})") from None
            validate_manifest(man, where=str(mpath))
            devs = [d for d in man["devices"] if d["kind"] == "gpu"]
            if len(devs) != 1:
                raise CostModelError(f"{folder}: a GPU profile of the bank needs exactly one GPU device, "
                                     f"has {[d['name'] for d in devs]}")
            spec = dict(devs[0].get("spec") or {})
            missing = [k for k in SPEC_KEYS if k not in spec]
            if missing:
                raise CostModelError(f"{folder}/manifest.json: GPU {devs[0]['name']!r} has no "
                                     f"{missing} in 'spec' (the cross-GPU model needs them)")
            gpus.append(GPUData(devs[0]["name"], {k: float(spec[k]) for k in SPEC_KEYS}, folder, _digest(folder)))
        return cls(gpus, **kw)

    @classmethod
    def builtin(cls, **kw: Any) -> GPUBank:
        """The bank of every built-in GPU profile (:func:`costmodel.builtin_profiles`)."""
        return cls.from_profiles([p for n, p in builtin_profiles().items() if n.startswith("gpu-")], **kw)

    # --------------------------------------------------------------- queries
    def spec(self, gpu: str) -> dict[str, float]:
        return dict(self.gpu_data(gpu).spec)

    def gpu_data(self, gpu: str) -> GPUData:
        if gpu not in self.gpus:
            raise CostModelError(f"unknown GPU {gpu!r}; this bank has {list(self.gpus)}")
        return self.gpus[gpu]

    def floor(self, gpu: str | None = None) -> float:
        """The smallest call of ``gpu`` (its 1st percentile); ``None``: the median over the bank."""
        if gpu is None:
            return float(np.median([self.roofline(g).floor_s for g in self.gpus]))
        return self.roofline(gpu).floor_s

    def families(self, gpu: str) -> dict[str, int]:
        """Rows per family of ``gpu``."""
        return dict(self.summary(gpu)["families"])

    def summary(self, gpu: str) -> dict[str, Any]:
        """``{"families": rows per family, "roofline": calibrated roofline}`` of ``gpu``,
        stored with the models (keyed by the bank's profiles: a GPU without element-wise
        rows takes the others' bandwidth fraction), so that pricing with stored models
        reads no profile."""
        if gpu not in self._summaries:
            data = self.gpu_data(gpu)
            key = self._summary_key(gpu)
            got = self.store.get(key)
            if got is not None and isinstance(got[0].get("roofline"), dict):
                meta = got[0]
            else:
                _, ops, t = data.load()
                fraction = None if fits_bandwidth(ops) else self.bandwidth_fraction(exclude=gpu)
                roof = fit_calibrated_roofline(ops, t, data.spec, fraction=fraction)
                meta = {"families": {f: int(n) for f, n in ops["family"].value_counts().items() if f},
                        "roofline": roof.to_dict()}
                self.store.put(key, meta)
            self._summaries[gpu] = {"key": key, "families": meta["families"],
                                    "roofline": CalibratedRoofline(**meta["roofline"])}
        return self._summaries[gpu]

    def roofline(self, gpu: str | None, spec: Mapping[str, float] | None = None) -> CalibratedRoofline:
        """The calibrated roofline of ``gpu`` (``None``: of a GPU with figures ``spec``)."""
        if gpu is None:
            if spec is None:
                raise CostModelError("roofline: give a GPU of the bank or a spec")
            per_watt, fraction = self.power_constants(list(self.gpus))
            return CalibratedRoofline(
                floor_s=self.floor(None),
                bandwidth_bytes_per_s=float(spec["mem_bandwidth_bytes_per_s"]) * fraction,
                flops_per_s=min(float(spec["peak_flops"]), per_watt * float(spec["tdp_w"])),
                source=f"power-limited roofline of {len(self.gpus)} GPUs")
        return self.summary(gpu)["roofline"]

    def bandwidth_fraction(self, exclude: str | None = None) -> float:
        """Median achieved / published bandwidth over the GPUs with element-wise rows
        (``exclude`` left out). Kept in the bank's cache, keyed by the profiles it is
        computed from: a GPU without element-wise rows (the H100) would otherwise read
        every other GPU's profile on first use (16 s of a 20 s HEFT plan on h100-server)."""
        key = self._bandwidth_key(exclude)
        got = self.store.get(key)
        if got is not None:
            try:
                return float(got[0]["bandwidth_fraction"])
            except (KeyError, TypeError, ValueError):
                pass  # a damaged entry is computed again
        value = self._bandwidth_fraction(exclude)
        self.store.put(key, {"bandwidth_fraction": value})
        return value

    def _bandwidth_fraction(self, exclude: str | None) -> float:
        fr = []
        for g in self._reading([g for g in self.gpus if g != exclude], "GPU bandwidths"):
            data = self.gpus[g]
            if self.families(g).get("elementwise", 0) >= MIN_FIT_ROWS:
                fr.append(self.roofline(g).bandwidth_bytes_per_s / data.spec["mem_bandwidth_bytes_per_s"])
        if not fr:
            raise CostModelError("no GPU of the bank has element-wise rows to calibrate a bandwidth on")
        return float(np.median(fr))

    # ----------------------------------------------------------------- fitting
    def _summary_key(self, gpu: str) -> str:
        return store_key({"what": "gpu-summary", "gpu": gpu, "digest": self.gpus[gpu].digest,
                          "bank": {g: d.digest for g, d in sorted(self.gpus.items())}})

    def _bandwidth_key(self, exclude: str | None) -> str:
        return store_key({"what": "bandwidth-fraction",
                          "gpus": {g: d.digest for g, d in sorted(self.gpus.items()) if g != exclude}})

    def _key(self, mode: str, family: str, gpus: Sequence[str], subset: str) -> str:
        return store_key({"mode": mode, "family": family, "subset": subset,
                          "gpus": {g: self.gpus[g].digest for g in sorted(gpus)},
                          "params": {k: v for k, v in sorted(self.params.items()) if k != "n_jobs"}})

    def own(self, gpu: str, family: str, *, subset: str = "all") -> FamilyModel | None:
        """The own model of ``family`` on ``gpu`` (None: fewer than :data:`MIN_FAMILY_ROWS`
        rows). ``subset="train"``: fitted on the data set's training rows only (and,
        for convolutions, without the hold-out, :func:`holdout`); ``"cv-I-of-K"``: on
        every row (both splits) whose :func:`shape_fold` of ``K`` folds is not ``I``."""
        if subset not in ("all", "train"):
            parse_fold(subset)
        key = self._key("own", family, [gpu], subset)
        if key not in self._models:
            self._models[key] = self._cached(key, lambda: self._fit_own(gpu, family, subset))
        return self._models[key]

    def cross(self, family: str, *, exclude: Iterable[str] = ()) -> FamilyModel | None:
        """The cross-GPU model of ``family`` over the bank's GPUs but ``exclude``
        (None: fewer than two GPUs have rows of it)."""
        gpus = [g for g in self.gpus if g not in set(exclude)]
        key = self._key("cross", family, gpus, "all")
        if key not in self._models:
            self._models[key] = self._cached(key, lambda: self._fit_cross(family, gpus))
        return self._models[key]

    def train_mask(self, gpu: str) -> np.ndarray:
        """Rows of ``gpu`` in the training subset (data set train split, conv hold-out out)."""
        rows, ops, _ = self.gpu_data(gpu).load()
        conv_out = (ops["family"].to_numpy() == "conv") & holdout(rows["signature"].astype(str))
        return (rows["split"].astype(str).to_numpy() == "train") & ~conv_out

    def _fit_own(self, gpu: str, family: str, subset: str) -> FamilyModel | None:
        data = self.gpu_data(gpu)
        rows, ops, t = data.load()
        on = (ops["family"].to_numpy() == family) & (ops["via"].to_numpy() == "own")
        if subset == "train":
            on &= self.train_mask(gpu)
        elif subset != "all":
            fold, folds = parse_fold(subset)
            on &= shape_fold(rows["signature"].astype(str), folds) != fold
        if on.sum() < MIN_FAMILY_ROWS:
            return None
        sub, ts = ops[on], t[on]
        a, c1, c2 = sum_fit(sub["flops"].to_numpy(float), sub["bytes"].to_numpy(float), ts)
        model = FamilyModel(family, "own", [float(a), float(c1), float(c2)], [], None, int(on.sum()), [gpu])
        M, model.columns = design(sub, family, data.spec)
        model.trees = fit_trees(M, np.log(ts / model.baseline(sub, data.spec, 0.0)), self.params,
                             f"fitting {gpu} {family} model ({len(ts)} kernels)")
        return model

    def power_constants(self, gpus: Sequence[str]) -> list[float]:
        """``[flops_per_watt, bandwidth_fraction]`` of the power-limited roofline over
        ``gpus``: the median of their achieved GEMM FLOP/s per watt of board power, and
        of their achieved / published bandwidth."""
        per_watt, fraction = [], []
        for g in self._reading(list(gpus), "GPU rooflines"):
            data = self.gpus[g]
            fams = set(self.families(g))
            if "gemm" in fams:
                per_watt.append(self.roofline(g).flops_per_s / data.spec["tdp_w"])
            if "elementwise" in fams:
                fraction.append(self.roofline(g).bandwidth_bytes_per_s / data.spec["mem_bandwidth_bytes_per_s"])
        if not per_watt or not fraction:
            raise CostModelError(f"GPUs {list(gpus)}: need GEMM and element-wise rows to set the power-limited "
                                 f"roofline of the cross-GPU model")
        return [float(np.median(per_watt)), float(np.median(fraction))]

    def _fit_cross(self, family: str, gpus: Sequence[str]) -> FamilyModel | None:
        rng = np.random.default_rng(int(self.params["seed"]))
        cap = int(self.params["cross_rows_per_gpu"])
        mats, targets, n = [], [], 0
        columns: list[str] = []
        samples = []
        for g in self._reading(list(gpus), f"reading GPU profiles for the cross-GPU {family} model"):
            _, ops, _ = self.gpus[g].load()
            idx = np.flatnonzero((ops["family"].to_numpy() == family) & (ops["via"].to_numpy() == "own"))
            if len(idx) >= MIN_FAMILY_ROWS:
                samples.append((g, np.sort(rng.choice(idx, cap, replace=False)) if len(idx) > cap else idx))
        if len(samples) < 2:
            return None
        model = FamilyModel(family, "cross", self.power_constants(gpus), [], None, 0, [g for g, _ in samples])
        for g, idx in samples:
            data = self.gpus[g]
            _, ops, t = data.load()
            sub = ops.iloc[idx]
            M, columns = design(sub, family, data.spec, with_spec=True)
            mats.append(M)
            targets.append(np.log(t[idx] / model.baseline(sub, data.spec, self.floor(g))))
            n += len(idx)
        model.columns, model.n_rows = columns, n
        model.trees = fit_trees(np.vstack(mats), np.concatenate(targets), self.params,
                             f"fitting the cross-GPU {family} model ({n} kernels of {len(samples)} GPUs)")
        return model

    def _cached(self, key: str, fit: Callable[[], FamilyModel | None]) -> FamilyModel | None:
        got = self.store.get(key)
        if got is not None:
            meta, trees = got
            if meta.get("empty") is True:
                return None
            if trees is not None:
                return FamilyModel(meta["family"], meta["mode"], list(meta["coef"]), list(meta["columns"]), trees,
                                   int(meta["n_rows"]), list(meta["gpus"]))
        model = fit()
        self.store.put(key, {"empty": True} if model is None else model.describe(), None if model is None
                       else model.trees)
        return model

    def _reading(self, gpus: list[str], desc: str) -> Iterable[str]:
        """``gpus``, with a progress bar while their profiles are read (those not read yet)."""
        unread = [g for g in gpus if not self.gpus[g].loaded]
        if len(unread) < 2:
            return gpus
        from tqdm import tqdm

        return tqdm(gpus, desc=desc, unit="gpu", delay=2.0, leave=False)

    def model_keys(self) -> list[str]:
        """The store keys of everything this bank prices with: each GPU's summary
        (:meth:`summary`), its own model of each family, the cross-GPU model of each
        family and the bandwidth fraction without each GPU."""
        keys = []
        for g in self.gpus:
            keys.append(self._summary_key(g))
            keys += [self._key("own", family, [g], "all") for family in GPU_FAMILIES]
            keys.append(self._bandwidth_key(exclude=g))
        return keys + [self._key("cross", family, list(self.gpus), "all") for family in GPU_FAMILIES]

    def fit_all(self) -> list[str]:
        """Fit (or find) everything of :meth:`model_keys` (what
        :func:`~costmodel.gpu.store.ship` writes); its keys."""
        for g in self.gpus:
            self.summary(g)
            self.bandwidth_fraction(exclude=g)
            for family in GPU_FAMILIES:
                self.own(g, family)
        for family in GPU_FAMILIES:
            self.cross(family)
        return self.model_keys()

    # ------------------------------------------------------------ prediction
    def predict(self, X: pd.DataFrame, *, gpu: str | None = None, spec: Mapping[str, float] | None = None,
                ops: pd.DataFrame | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Call times (seconds) and their sources, one per row of ``X`` (``graphs.features``
        or profile columns), on GPU ``gpu`` of the bank or on a GPU with figures ``spec``.

        A source is ``own:FAMILY`` (this GPU's model; ``+proxy`` / ``+conv-as-gemm``
        when an op is priced by a relative's), ``cross-gpu:FAMILY``,
        ``calibrated-roofline`` or ``view``.
        """
        if (gpu is None) == (spec is None):
            raise CostModelError("predict: give exactly one of gpu= (a GPU of the bank) or spec=")
        ops = gpu_ops(X) if ops is None else ops
        spec = self.spec(gpu) if gpu is not None else dict(spec or {})
        floor = self.floor(gpu)
        t = self.roofline(gpu, spec).call_times(X)
        src = np.where(views(X), "view", "calibrated-roofline").astype(object)
        fam = ops["family"].to_numpy()
        for family in GPU_FAMILIES:
            on = fam == family
            if not on.any():
                continue
            model = self.own(gpu, family) if gpu is not None else None
            label = f"own:{family}"
            if model is None:
                model = self.cross(family)
                label = f"cross-gpu:{family}"
            if model is None:
                continue
            t[on] = model.predict(ops[on], spec, floor)
            via = ops["via"].to_numpy()[on]
            src[on] = [label if v == "own" else f"{label}+{v}" for v in via]
        return t, src


# -------------------------------------------------------------------- cost model
class GPUCostModel(CostModelBase):
    """A :class:`~costmodel.base.CostModel` pricing GPU devices from a :class:`GPUBank`.

    Parameters
    ----------
    bank
        The measured GPUs.
    gpu
        The bank GPU that prices every device given to it (``"a100-80gb"``);
        ``None``: each device is priced from its published figures
        (:func:`device_spec`) by the cross-GPU models.
    name
        Shown in ``repr`` and reports.

    ``op_time`` = predicted call time - the GPU's floor + ``device.launch_overhead_s``
    (views: 0); ``dispatch_time`` = ``device.dispatch_s`` (views: 0);
    ``transfer_time`` = the link's latency + bytes / bandwidth.
    """

    def __init__(self, bank: GPUBank, gpu: str | None = None, *, name: str | None = None) -> None:
        if gpu is not None:
            bank.gpu_data(gpu)
        self.bank = bank
        self.gpu = gpu
        self.name = name or (f"gpu-{gpu}" if gpu else "cross-gpu")
        self._graphs: dict[tuple[int, str], tuple[Any, dict[str, int], np.ndarray, np.ndarray]] = {}

    def __repr__(self) -> str:
        return f"GPUCostModel({self.name!r}, bank={list(self.bank.gpus)})"

    def _priced(self, graph: Graph, device: Device) -> tuple[dict[str, int], np.ndarray, np.ndarray]:
        if device.kind != "gpu":
            raise CostModelError(f"{self.name}: prices GPUs only, not {device.kind} device {device.name!r}; "
                                 f"give it a source of its own (--cost {device.name}=roofline|PROFILE)")
        key = (id(graph), device.name if self.gpu is None else "")
        hit = self._graphs.get(key)
        if hit is None or hit[0]() is not graph or len(hit[1]) != graph.number_of_nodes():
            X = features(graph)
            spec = device_spec(device) if self.gpu is None else None
            calls, src = self.bank.predict(X, gpu=self.gpu, spec=spec)
            floor = self.bank.floor(self.gpu)
            kernel = np.where(src == "view", 0.0, np.maximum(calls - floor, 0.0))
            hit = (weakref.ref(graph), {n: i for i, n in enumerate(X.index)}, kernel, src)
            self._graphs[key] = hit
            while len(self._graphs) > 16:
                self._graphs.pop(next(iter(self._graphs)))
        return hit[1], hit[2], hit[3]

    def op_time(self, graph: Graph, node: str, device: Device) -> float:
        """Kernel time of ``node`` on GPU ``device`` (seconds, launch overhead included)."""
        index, kernel, src = self._priced(graph, device)
        i = index[node]
        return 0.0 if src[i] == "view" else float(kernel[i]) + device.launch_overhead_s

    def dispatch_time(self, graph: Graph, node: str, device: Device) -> float:
        """Host time to issue ``node``: ``device.dispatch_s`` (views: 0)."""
        index, _, src = self._priced(graph, device)
        return 0.0 if src[index[node]] == "view" else float(device.dispatch_s)

    def transfer_time(self, nbytes: int, link: Link, **_: Any) -> float:
        """The link's own latency and bandwidth."""
        return link.latency_s + nbytes / link.bandwidth_bytes_per_s

    def sources(self, graph: Graph, device: Device) -> pd.Series:
        """Node -> what priced it (see :meth:`GPUBank.predict`)."""
        index, _, src = self._priced(graph, device)
        return pd.Series(src, index=list(index), name="source")
