"""Entry points: fit a measured cost model on a profile, load a saved one, or build
one from a short spec string (what ``--cost`` options take).

This module imports nothing heavy at import time (``import hetsim.costmodel`` stays fast);
pandas and xgboost load on first use.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hetsim.costmodel.base import CostModelError

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.costmodel.learned.measured import MeasuredCostModel, Predictor
    from hetsim.costmodel.platform import Platform
    from hetsim.costmodel.profile_reader import Profile

__all__ = ["KINDS", "DEFAULT_KIND", "builtin_bank", "check_spec", "fit", "from_spec", "load", "gpu_profile_name",
           "make_predictor", "register_cost_source", "single_source"]

#: predictor kinds that :func:`fit` accepts
KINDS = ("table", "polynomial", "xgboost")
#: what a bare profile folder means in :func:`from_spec`: exact measured times where
#: the profile has the signature, XGBoost elsewhere
DEFAULT_KIND = "table"


def _trace_source(arg: str, *, platform: Platform | None = None) -> Any:
    """``trace:PATH[@STEP]``: the measured times of a profiler trace's step."""
    # import cycle: hetsim.costmodel.trace.measured -> hetsim.costmodel -> hetsim.costmodel.spec
    from hetsim.costmodel.trace.measured import trace_source

    return trace_source(arg, platform=platform)


#: cost sources by prefix: ``PREFIX:ARG`` -> factory(ARG, platform=...); ``trace`` is
#: built in, other packages or layers add theirs (:func:`register_cost_source`)
_SOURCES: dict[str, Callable[..., Any]] = {"trace": _trace_source}


def register_cost_source(prefix: str, factory: Callable[..., Any]) -> None:
    """Add a kind of cost source: the spec ``PREFIX:ARG`` (alone, or as one device's
    source in ``DEVICE=SPEC,...``) builds ``factory(ARG, platform=platform)``.

    How a new data set (measured LLM kernels, another simulator's tables) prices the
    devices it knows while the platform's other devices keep their own sources.

    Parameters
    ----------
    prefix
        A lowercase name (letters, digits, ``-``, ``_``), not one of the built-in
        forms (``default``, ``roofline``, ``cross-gpu``, ``gpu-...``).
    factory
        ``factory(arg: str, *, platform: Platform | None) -> cost model``.

    Examples
    --------
    >>> from hetsim.costmodel.roofline import Roofline
    >>> register_cost_source("doc-example", lambda arg, platform=None: Roofline())
    >>> type(from_spec("doc-example:anything")).__name__
    'Roofline'
    """
    import re

    if not isinstance(prefix, str) or not re.fullmatch(r"[a-z][a-z0-9_-]*", prefix) \
            or prefix in ("default", "roofline", "cross-gpu", "kernel") or prefix.startswith("gpu-"):
        raise CostModelError(f"cost source prefix {prefix!r}: need a lowercase name that is not a built-in form")
    if not callable(factory):
        raise CostModelError(f"cost source {prefix!r}: factory {factory!r} is not callable")
    _SOURCES[prefix] = factory


def make_predictor(kind: str, **params: Any) -> Predictor:
    """An unfitted predictor of ``kind`` with hyper-parameters ``params``.

    For ``"table"``, ``fallback`` may be a kind name (``"polynomial"``/``"xgboost"``,
    default ``"xgboost"``) or a predictor; ``fallback_params`` configures it.
    """
    # import cycle: hetsim.costmodel.learned.measured -> hetsim.costmodel -> hetsim.costmodel.spec
    from hetsim.costmodel.learned.measured import Predictor, predictor_class

    if kind not in KINDS:
        raise CostModelError(f"unknown cost model kind {kind!r}; known: {list(KINDS)}")
    if kind == "table":
        fb = params.pop("fallback", "xgboost")
        fb_params = params.pop("fallback_params", {}) or {}
        if params:
            raise CostModelError(f"table: unknown hyper-parameter(s) {sorted(params)} (fallback, fallback_params)")
        if not isinstance(fb, Predictor):
            if fb not in ("polynomial", "xgboost"):
                raise CostModelError(f"table: fallback must be 'polynomial' or 'xgboost', got {fb!r}")
            fb = predictor_class(fb)(**fb_params)
        return predictor_class("table")(fallback=fb)
    try:
        return predictor_class(kind)(**params)
    except TypeError as e:
        raise CostModelError(f"{kind}: {e}") from None


def as_profile(profile: Profile | str | os.PathLike[str]) -> Profile:
    # import cycle: hetsim.costmodel.profile_reader -> hetsim.costmodel -> hetsim.costmodel.spec
    from hetsim.costmodel.profile_reader import Profile, read_profile

    return profile if isinstance(profile, Profile) else read_profile(profile)


def fit(
    profile: Profile | str | os.PathLike[str],
    kind: str = DEFAULT_KIND,
    *,
    device_map: Mapping[str, str] | None = None,
    platform: Platform | None = None,
    backend: str | None = None,
    allow_uncovered: bool = False,
    **params: Any,
) -> MeasuredCostModel:
    """Fit a cost model of ``kind`` on a profile.

    Parameters
    ----------
    profile
        A :class:`~costmodel.profile_reader.Profile` or a profile folder.
    kind
        ``"table"`` (measured times, XGBoost for unmeasured signatures),
        ``"polynomial"`` or ``"xgboost"``.
    device_map, platform
        See :class:`~costmodel.learned.measured.MeasuredCostModel`.
    backend
        Rows of this backend only (default: the manifest's when ``ops.csv`` mixes
        backends).
    allow_uncovered
        Price graphs the profile measured none of on a device (extrapolated) instead
        of refusing them (:class:`~costmodel.learned.measured.MeasuredCostModel`).
    **params
        Hyper-parameters of the predictor (see :func:`make_predictor`).

    Returns
    -------
    MeasuredCostModel
        A :class:`~costmodel.base.CostModel` for the simulator and the schedulers.

    Examples
    --------
    >>> cost = costmodel.fit("profiles/box", "polynomial")         # doctest: +SKIP
    >>> cost.predictor.selection()                                 # doctest: +SKIP
    """
    # import cycle: hetsim.costmodel.learned.measured -> hetsim.costmodel -> hetsim.costmodel.spec
    from hetsim.costmodel.learned.measured import MeasuredCostModel

    prof = as_profile(profile)
    predictor = make_predictor(kind, **params)
    rows = prof.training_rows(backend)
    predictor.fit(rows, prof.call_times(rows))
    return MeasuredCostModel.from_profile(prof, predictor, device_map=device_map, platform=platform,
                                          allow_uncovered=allow_uncovered)


def load(path: str | os.PathLike[str]) -> Any:
    """Load a model saved by ``save``: a :class:`~costmodel.learned.measured.MeasuredCostModel`
    (``hetsim costmodel fit``) or a bare predictor (Table, Polynomial, XGBoost)."""
    # import cycle: hetsim.costmodel.learned.measured -> hetsim.costmodel -> hetsim.costmodel.spec
    from hetsim.costmodel.learned.measured import MeasuredCostModel, Predictor, read_model_file

    data = read_model_file(path)
    kind = data.get("kind")
    if kind == "measured":
        return MeasuredCostModel.from_state(data, where=str(path))
    return Predictor.load(path)


def from_spec(spec: str | None = "default", *, platform: Platform | None = None,
              device_map: Mapping[str, str] | None = None, allow_uncovered: bool = False) -> Any:
    """A cost model from a short string, as ``--cost`` options take it (every command
    and the sweep build their cost models here).

    ``"default"`` (or None)
        Each device priced by its own ``cost`` (the platform TOML's per-device
        source: the presets of measured GPUs name their GPU profile), else the
        roofline (:class:`~costmodel.composite.PlatformCostModel`; a plain
        :class:`~costmodel.roofline.Roofline` when no device names a source).
    ``"roofline"``
        :class:`~costmodel.roofline.Roofline` with default efficiencies, for every device.
    ``PROFILE_DIR``
        :func:`fit` of :data:`DEFAULT_KIND` (``table``: measured times, XGBoost for
        signatures the profile lacks). A GPU profile (one GPU device with its
        published figures in the manifest, as ``hetsim profile import`` writes)
        gives the GPU models instead (:class:`~costmodel.gpu.model.GPUCostModel`).
    ``PROFILE_DIR:KIND``
        :func:`fit` of ``KIND`` (``table``, ``polynomial``, ``xgboost``).
    ``FILE.json``
        A model saved by ``hetsim costmodel fit`` (:func:`load`).
    ``gpu-NAME``
        A built-in GPU profile (:func:`costmodel.builtin_profiles`: ``gpu-t4``,
        ``gpu-a100-80gb``, ``gpu-h100``...): that GPU's models, the cross-GPU models
        for kernel families it has no rows of.
    ``"kernel"``
        Every GPU priced from its spec sheet by the kernel model (waves of tiles,
        achieved bandwidth, L2, PyTorch's math modes; :mod:`costmodel.gpu.kernel`), with
        the constants fitted on the built-in GPUs that ship with hetsim.
    ``"cross-gpu"``
        Every GPU priced from its published figures (``sm_count``, ``clock_hz``,
        ``peak_flops``, ``mem_bandwidth_bytes_per_s``, ``l2_bytes``, ``tdp_w``) by the models
        fitted across the built-in GPUs.
    ``DEVICE=SPEC,DEVICE=SPEC,...``
        One source per device (a device name or kind; ``link=PROFILE_DIR`` prices
        transfers from that profile's link fit); unnamed devices as ``"default"``
        (:class:`~costmodel.composite.PlatformCostModel`).

    ``trace:PATH`` or ``trace:PATH@STEP``
        The kernel and launch times a PyTorch profiler trace measured, for the graph
        read from that trace (:class:`~costmodel.trace.measured.TraceCostModel`; the
        roofline for what it did not measure).
    ``aiconfigurator-GPU``
        GPU GEMM and attention times measured by NVIDIA AIConfigurator on ``GPU``
        (``h100_sxm``, ``h200_sxm``, ``a100_sxm``, ``l40s``), the roofline for the rest
        (:class:`~costmodel.gpu.aiconfigurator.AIConfiguratorCostModel`).

    A single GPU source (``gpu-a100-80gb``, ``cross-gpu``, ``kernel``, a GPU profile) given with
    a ``platform`` that has other devices prices its GPUs; the others keep their default.
    ``allow_uncovered``: a measured profile prices graphs it measured none of, instead
    of refusing them (:class:`~costmodel.learned.measured.MeasuredCostModel`).

    Examples
    --------
    >>> type(from_spec("roofline")).__name__
    'Roofline'
    >>> from hetsim.costmodel.platform import Platform
    >>> from_spec("cpu=roofline,gpu=roofline", platform=Platform.preset("xeon-p2200")).describe()
    'cpu=roofline,gpu=roofline'
    """
    # import cycle: hetsim.costmodel.composite -> hetsim.costmodel.spec
    from hetsim.costmodel.composite import PlatformCostModel, parse_composite

    if spec is None or spec == "default":
        if platform is not None and not any(d.cost for d in platform.devices):
            # import cycle: hetsim.costmodel.roofline -> hetsim.costmodel -> hetsim.costmodel.spec
            from hetsim.costmodel.roofline import Roofline

            return Roofline()
        return PlatformCostModel({}, platform=platform)
    if not isinstance(spec, str) or not spec.strip():
        raise CostModelError(f"cost model spec must be a non-empty string, got {spec!r}")
    if "=" in spec:
        items = parse_composite(spec)
        links = items.pop("link", None)
        return PlatformCostModel(items, links=links, platform=platform)
    model = single_source(spec, platform=platform, device_map=device_map, allow_uncovered=allow_uncovered)
    # import cycles:
    #   hetsim.costmodel.gpu.kernel_cost -> hetsim.costmodel -> hetsim.costmodel.spec
    #   hetsim.costmodel.gpu.model -> hetsim.costmodel -> hetsim.costmodel.spec
    from hetsim.costmodel.gpu.kernel_cost import KernelCostModel
    from hetsim.costmodel.gpu.model import GPUCostModel

    if isinstance(model, GPUCostModel | KernelCostModel) and platform is not None and any(d.kind != "gpu" for d in platform.devices):
        return PlatformCostModel({"gpu": model}, platform=platform)
    return model


@functools.lru_cache(maxsize=1)
def builtin_bank() -> Any:
    """The :class:`~costmodel.gpu.model.GPUBank` of the built-in GPU profiles (one per process)."""
    # import cycle: hetsim.costmodel.gpu.model -> hetsim.costmodel -> hetsim.costmodel.spec
    from hetsim.costmodel.gpu.model import GPUBank

    return GPUBank.builtin()


def gpu_profile_name(path: Path) -> str | None:
    """The GPU's name when ``path`` is a GPU profile (one GPU device with ``spec``)."""
    import json

    try:
        devices = json.loads((path / "manifest.json").read_text()).get("devices", [])
    except (OSError, ValueError, AttributeError):
        return None
    if len(devices) == 1 and isinstance(devices[0], dict) and devices[0].get("kind") == "gpu" \
            and isinstance(devices[0].get("spec"), dict):
        return str(devices[0]["name"])
    return None


def single_source(spec: str, *, platform: Platform | None = None,
                  device_map: Mapping[str, str] | None = None, allow_uncovered: bool = False) -> Any:
    """The cost model of one source spec (every form of :func:`from_spec` but
    ``default`` and ``DEVICE=SPEC`` lists)."""
    # import cycle: hetsim.costmodel.builtin -> hetsim.costmodel -> hetsim.costmodel.spec
    from hetsim.costmodel.builtin import builtin_profiles

    if spec == "roofline":
        # import cycle: hetsim.costmodel.roofline -> hetsim.costmodel -> hetsim.costmodel.spec
        from hetsim.costmodel.roofline import Roofline

        return Roofline()
    if spec == "cross-gpu":
        # import cycle: hetsim.costmodel.gpu.model -> hetsim.costmodel -> hetsim.costmodel.spec
        from hetsim.costmodel.gpu.model import GPUCostModel

        return GPUCostModel(builtin_bank(), None)
    if spec == "kernel":
        # import cycle: hetsim.costmodel.gpu.kernel_cost -> hetsim.costmodel -> hetsim.costmodel.spec
        from hetsim.costmodel.gpu.kernel_cost import KernelCostModel

        return KernelCostModel()
    if spec.startswith("aiconfigurator-"):
        # import cycle: hetsim.costmodel.gpu.aiconfigurator -> hetsim.costmodel -> hetsim.costmodel.spec
        from hetsim.costmodel.gpu.aiconfigurator import AIConfiguratorCostModel

        return AIConfiguratorCostModel(spec[len("aiconfigurator-"):])
    prefix, colon, arg = spec.partition(":")
    if colon and prefix in _SOURCES:
        return _SOURCES[prefix](arg, platform=platform)
    path = Path(spec)
    if path.is_dir():
        gpu = gpu_profile_name(path)
        if gpu is not None:
            # import cycle: hetsim.costmodel.gpu.model -> hetsim.costmodel -> hetsim.costmodel.spec
            from hetsim.costmodel.gpu.model import GPUBank, GPUCostModel

            return GPUCostModel(GPUBank.from_profiles([path]), gpu, name=path.name)
        return fit(path, DEFAULT_KIND, platform=platform, device_map=device_map, allow_uncovered=allow_uncovered)
    if path.is_file():
        # import cycle: hetsim.costmodel.learned.measured -> hetsim.costmodel -> hetsim.costmodel.spec
        from hetsim.costmodel.learned.measured import MeasuredCostModel

        model = load(path)
        if not isinstance(model, MeasuredCostModel):
            raise CostModelError(
                f"{path}: holds a bare {type(model).__name__} predictor, not a cost model; "
                f"write one with 'hetsim costmodel fit PROFILE --kind K --out FILE'"
            )
        if device_map or platform:
            model = MeasuredCostModel(model.predictor, device_kinds=model.device_kinds,
                                      link_fits=model.link_fits, dispatch=model.dispatch,
                                      device_map=device_map or model.device_map, platform=platform,
                                      fallback=model.fallback, name=model.name)
        model.allow_uncovered = allow_uncovered
        return model
    head, sep, kind = spec.rpartition(":")
    if sep and kind in KINDS and Path(head).is_dir():
        return fit(head, kind, platform=platform, device_map=device_map, allow_uncovered=allow_uncovered)
    builtins = builtin_profiles()
    if spec in builtins:
        gpu = gpu_profile_name(builtins[spec])
        if gpu is not None:
            # import cycle: hetsim.costmodel.gpu.model -> hetsim.costmodel -> hetsim.costmodel.spec
            from hetsim.costmodel.gpu.model import GPUCostModel

            return GPUCostModel(builtin_bank(), gpu, name=spec)
        return fit(builtins[spec], DEFAULT_KIND, platform=platform, device_map=device_map,
                   allow_uncovered=allow_uncovered)
    raise _unknown_spec(spec)


def _unknown_spec(spec: str) -> CostModelError:
    """The error for a cost spec that names nothing: every form :func:`from_spec` knows."""
    # import cycle: hetsim.costmodel.builtin -> hetsim.costmodel -> hetsim.costmodel.spec
    from hetsim.costmodel.builtin import builtin_profiles

    return CostModelError(
        f"cost model spec {spec!r}: expected 'default', 'roofline', 'cross-gpu', 'kernel', a profile folder, "
        f"PROFILE:KIND (KIND in {list(KINDS)}), a saved model file, a built-in profile "
        f"({', '.join(builtin_profiles())}), aiconfigurator-GPU, {''.join(f'{p}:ARG, ' for p in _SOURCES)}"
        f"or DEVICE=SPEC,...; nothing of that name exists"
    )


def check_spec(spec: str | None) -> None:
    """Refuse a cost spec that names nothing, without fitting or loading anything: what
    the CLI runs before it imports a model, so that a mistyped ``--cost`` is reported at
    once (every form of :func:`from_spec`; the devices a ``DEVICE=SPEC`` list names are
    checked against the platform when the model is built).

    Raises
    ------
    CostModelError
        naming the spec (or the item of a list) that names nothing.

    Examples
    --------
    >>> check_spec("cpu=roofline,gpu=gpu-t4")
    >>> check_spec("roofline:typo")
    Traceback (most recent call last):
    ...
    hetsim.costmodel.base.CostModelError: cost model spec 'roofline:typo': expected ...
    """
    # import cycles:
    #   hetsim.costmodel.builtin -> hetsim.costmodel -> hetsim.costmodel.spec
    #   hetsim.costmodel.composite -> hetsim.costmodel.spec
    from hetsim.costmodel.builtin import builtin_profiles
    from hetsim.costmodel.composite import parse_composite

    if spec is None or spec == "default":
        return
    if not isinstance(spec, str) or not spec.strip():
        raise CostModelError(f"cost model spec must be a non-empty string, got {spec!r}")
    if "=" in spec:
        items = parse_composite(spec)
        links = items.pop("link", None)
        if links is not None and not Path(links).is_dir():
            raise CostModelError(f"cost spec {spec!r}: link={links!r} is not a profile folder")
        for item in items.values():
            check_spec(item)
        return
    prefix, colon, _ = spec.partition(":")
    head, sep, kind = spec.rpartition(":")
    if (spec in ("roofline", "cross-gpu", "kernel") or spec.startswith("aiconfigurator-") or (colon and prefix in _SOURCES)
            or Path(spec).exists() or (sep and kind in KINDS and Path(head).is_dir()) or spec in builtin_profiles()):
        return
    raise _unknown_spec(spec)
