"""One cost model for a whole platform: each device priced from its own source.

A CPU+GPU machine is measured in pieces: the CPU by ``hetsim profile`` on the host,
the GPU from a GPU profile (the data set's, or yours), the links by the platform's
figures or a profile's link fit. :class:`PlatformCostModel` routes every call of the
:class:`~costmodel.base.CostModel` protocol to the source of the device (or link)
it is about::

    cpu=profiles/cpu-zoo-torch,gpu=gpu-a100-80gb,link=profiles/gpu-box

A key is a device name, or a device kind (``cpu``/``gpu``: every device of that
kind not named itself), or ``link``; a value is any single cost spec of
:func:`costmodel.from_spec`. A device that no key names is priced by its own
``cost`` (the platform TOML's per-device default: the presets of measured GPUs
name their profile) and else by the roofline. Transfers use the ``link`` profile's
fit (``links.json``, by the kinds of the two ends) or else the platform's link
figures.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from hetsim.costmodel.base import CostModelBase, CostModelError, host_dispatch
from hetsim.costmodel.spec import single_source

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.costmodel.platform import Device, Link, Platform
    from hetsim.graphs.graph import Graph

__all__ = ["PlatformCostModel", "parse_composite"]

_KINDS = ("cpu", "gpu")


def parse_composite(spec: str) -> dict[str, str]:
    """``"cpu=A,gpu=B"`` -> ``{"cpu": "A", "gpu": "B"}``; a clear error on a malformed item.

    >>> parse_composite("cpu=roofline, gpu=gpu-t4")
    {'cpu': 'roofline', 'gpu': 'gpu-t4'}
    """
    out: dict[str, str] = {}
    for item in spec.split(","):
        key, sep, value = item.strip().partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key or not value:
            raise CostModelError(f"cost spec {spec!r}: {item.strip()!r} must look like DEVICE=SPEC "
                                 f"(DEVICE a device name, 'cpu', 'gpu' or 'link')")
        if key in out:
            raise CostModelError(f"cost spec {spec!r}: {key!r} is named twice")
        out[key] = value
    return out


class PlatformCostModel(CostModelBase):
    """A cost model per device (see the module docstring).

    Parameters
    ----------
    sources
        Device name or kind -> cost model (or cost spec string, built by
        :func:`costmodel.from_spec` on first use).
    links
        A profile folder (or :class:`~costmodel.profile_reader.Profile`) whose ``links.json``
        prices transfers; None: the platform's link figures.
    platform
        Checks that every key is a device name or a kind of it, and gives the kinds
        of link ends to ``links``.

    Examples
    --------
    >>> from hetsim.costmodel.platform import Platform
    >>> p = Platform.preset("xeon-p2200")
    >>> cost = PlatformCostModel({"cpu": "roofline"}, platform=p)
    >>> cost.describe()
    'cpu=roofline,gpu=roofline'
    """

    def __init__(self, sources: Mapping[str, Any] | None = None, *, links: Any = None,
                 platform: Platform | None = None) -> None:
        self.sources: dict[str, Any] = dict(sources or {})
        self.platform = platform
        self._built: dict[str, Any] = {}
        self._link_fits: dict[tuple[str, str], tuple[float, float]] | None = None
        self.links = links
        if links is not None:
            # lazy: at the top it would load pandas with this module
            from hetsim.costmodel.profile_reader import Profile, read_profile

            prof = links if isinstance(links, Profile) else read_profile(links)
            self._link_fits = prof.kind_link_fits()
            if not self._link_fits:
                raise CostModelError(f"link={prof.path}: the profile has no links.json fit")
        if platform is not None:
            names = set(platform.device_names)
            for key in self.sources:
                if key not in names and key not in _KINDS:
                    raise CostModelError(
                        f"cost spec names device {key!r}, which platform {platform.name!r} does not have "
                        f"(devices: {platform.device_names}; kinds: cpu, gpu)")

    def __repr__(self) -> str:
        return f"PlatformCostModel({self.describe()!r})"

    def describe(self) -> str:
        """The spec that builds this model (every device of the platform, when known)."""
        if self.platform is None:
            parts = [f"{k}={_name(v)}" for k, v in self.sources.items()]
        else:
            parts = [f"{d.name}={_name(self._spec_of(d))}" for d in self.platform.devices]
        if self.links is not None:
            parts.append(f"link={getattr(self.links, 'path', self.links)}")
        return ",".join(parts) or "default"

    # ----------------------------------------------------------------- routing
    def _spec_of(self, device: Device) -> Any:
        if device.name in self.sources:
            return self.sources[device.name]
        if device.kind in self.sources:
            return self.sources[device.kind]
        return device.cost or "roofline"

    def source(self, device: Device) -> Any:
        """The cost model that prices ``device``."""
        spec = self._spec_of(device)
        if not isinstance(spec, str):
            return spec
        model = self._built.get(spec)
        if model is None:
            model = self._built[spec] = single_source(spec, platform=self.platform)
        return model

    def op_time(self, graph: Graph, node: str, device: Device) -> float:
        return float(self.source(device).op_time(graph, node, device))

    def dispatch_time(self, graph: Graph, node: str, device: Device) -> float:
        return host_dispatch(self.source(device), graph, node, device)

    def transfer_time(self, nbytes: int, link: Link, *, src: str | None = None) -> float:
        """One hop over ``link``: the ``links`` profile's fit for the kinds of its ends
        when given (and the platform is known), else the link's own figures."""
        if self._link_fits and self.platform is not None:
            a, b = link.src, link.dst
            if src is not None and src == link.dst:
                a, b = b, a
            ka, kb = self.platform.device(a).kind, self.platform.device(b).kind
            fit = self._link_fits.get((ka, kb)) or self._link_fits.get((kb, ka))
            if fit is not None:
                return fit[0] + nbytes / fit[1]
        return link.latency_s + nbytes / link.bandwidth_bytes_per_s


def _name(source: Any) -> str:
    if isinstance(source, str):
        return source
    return str(getattr(source, "name", type(source).__name__))
