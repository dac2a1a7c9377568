"""Entry points: fit a measured cost model on a profile, load a saved one, or build
one from a short spec string (what ``--cost`` options take).

This module imports nothing heavy at import time (``import hetsim.costmodel`` stays fast);
pandas and xgboost load on first use.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hetsim.costmodel.base import CostModelError

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.costmodel.measured import MeasuredCostModel, Predictor
    from hetsim.costmodel.profile import Profile
    from hetsim.sim.platform import Platform

__all__ = ["KINDS", "DEFAULT_KIND", "fit", "from_spec", "load", "make_predictor", "parse_spec"]

#: predictor kinds that :func:`fit` accepts
KINDS = ("table", "polynomial", "xgboost")
#: what a bare profile folder means in :func:`from_spec`: exact measured times where
#: the profile has the signature, XGBoost elsewhere
DEFAULT_KIND = "table"


def make_predictor(kind: str, **params: Any) -> Predictor:
    """An unfitted predictor of ``kind`` with hyper-parameters ``params``.

    For ``"table"``, ``fallback`` may be a kind name (``"polynomial"``/``"xgboost"``,
    default ``"xgboost"``) or a predictor; ``fallback_params`` configures it.
    """
    from hetsim.costmodel.measured import Predictor, predictor_class

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
    from hetsim.costmodel.profile import Profile, read_profile

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
        A :class:`~costmodel.profile.Profile` or a profile folder.
    kind
        ``"table"`` (measured times, XGBoost for unmeasured signatures),
        ``"polynomial"`` or ``"xgboost"``.
    device_map, platform
        See :class:`~costmodel.measured.MeasuredCostModel`.
    backend
        Rows of this backend only (default: the manifest's when ``ops.csv`` mixes
        backends).
    allow_uncovered
        Price graphs the profile measured none of (see
        :class:`~costmodel.measured.MeasuredCostModel`; refused by default).
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
    from hetsim.costmodel.measured import MeasuredCostModel

    prof = as_profile(profile)
    predictor = make_predictor(kind, **params)
    rows = prof.training_rows(backend)
    predictor.fit(rows, prof.call_times(rows))
    return MeasuredCostModel.from_profile(prof, predictor, device_map=device_map, platform=platform,
                                          allow_uncovered=allow_uncovered)


def parse_spec(spec: str) -> tuple[str, Path | None, str | None]:
    """What a ``--cost`` spec names, checked without fitting or loading anything.

    Returns ``("roofline", None, None)``, ``("profile", folder, kind)``,
    ``("file", path, None)`` or ``("aiconfigurator", None, gpu)``; the CLI calls it before importing a model, so that
    a mistyped spec is reported at once.

    Raises
    ------
    CostModelError
        when the spec names none of them.

    Examples
    --------
    >>> parse_spec("roofline")
    ('roofline', None, None)
    """
    if not isinstance(spec, str) or not spec:
        raise CostModelError(f"cost model spec must be a non-empty string, got {spec!r}")
    if spec == "roofline":
        return "roofline", None, None
    if spec.startswith("aiconfigurator-"):
        return "aiconfigurator", None, spec[len("aiconfigurator-"):]
    path = Path(spec)
    if path.is_dir():
        return "profile", path, DEFAULT_KIND
    if path.is_file():
        return "file", path, None
    head, sep, kind = spec.rpartition(":")
    if sep and kind in KINDS and Path(head).is_dir():
        return "profile", Path(head), kind
    raise CostModelError(
        f"cost model spec {spec!r}: expected 'roofline', a profile folder, PROFILE:KIND "
        f"(KIND in {list(KINDS)}), a saved model file or aiconfigurator-GPU; nothing of that name exists"
    )


def load(path: str | os.PathLike[str]) -> Any:
    """Load a model saved by ``save``: a :class:`~costmodel.measured.MeasuredCostModel`
    (``hetsim costmodel fit``) or a bare predictor (Table, Polynomial, XGBoost)."""
    from hetsim.costmodel.measured import MeasuredCostModel, Predictor, read_model_file

    data = read_model_file(path)
    kind = data.get("kind")
    if kind == "measured":
        return MeasuredCostModel.from_state(data, where=str(path))
    return Predictor.load(path)


def from_spec(spec: str, *, platform: Platform | None = None, device_map: Mapping[str, str] | None = None,
              allow_uncovered: bool = False) -> Any:
    """A cost model from a short string, as ``--cost`` options take it.

    ``"roofline"``
        :class:`~costmodel.roofline.Roofline` with default efficiencies.
    ``PROFILE_DIR``
        :func:`fit` of :data:`DEFAULT_KIND` (``table``: measured times, XGBoost for
        signatures the profile lacks).
    ``PROFILE_DIR:KIND``
        :func:`fit` of ``KIND`` (``table``, ``polynomial``, ``xgboost``).
    ``FILE.json``
        A model saved by ``hetsim costmodel fit`` (:func:`load`).
    ``aiconfigurator-GPU``
        GPU GEMM and attention times measured by NVIDIA AIConfigurator on ``GPU``
        (``h100_sxm``, ``h200_sxm``, ``a100_sxm``, ``l40s``), the roofline for the rest
        (:class:`~costmodel.aiconfigurator.AIConfiguratorCostModel`).

    ``allow_uncovered``: price graphs the profile measured none of, instead of
    refusing them (:class:`~costmodel.measured.MeasuredCostModel`).

    Examples
    --------
    >>> type(from_spec("roofline")).__name__
    'Roofline'
    """
    what, path, kind = parse_spec(spec)
    if what == "roofline":
        from hetsim.costmodel.roofline import Roofline

        return Roofline()
    if what == "aiconfigurator":
        from hetsim.costmodel.aiconfigurator import AIConfiguratorCostModel

        return AIConfiguratorCostModel(kind)
    if what == "profile":
        return fit(path, kind, platform=platform, device_map=device_map, allow_uncovered=allow_uncovered)
    from hetsim.costmodel.measured import MeasuredCostModel

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
