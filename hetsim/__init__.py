"""hetsim: simulate DNN execution on CPU-GPU platforms and compare schedulers.

Everything is importable as ``hetsim.<layer>`` (``hetsim.graphs``, ``hetsim.costmodel``,
``hetsim.sim``, ``hetsim.schedulers``, ``hetsim.runtime``, ``hetsim.experiments``);
the everyday API is here, loaded on first use so that ``import hetsim`` stays fast:

>>> import hetsim
>>> platform = hetsim.Platform.preset("xeon-p2200")
>>> "heft" in hetsim.schedulers.names()
True

A typical session::

    graph = hetsim.zoo.load("resnet18", batch=4)        # TVM Relax import, cached
    run = hetsim.get_scheduler("heft").run(graph, platform, hetsim.Roofline(), requests=8)
    run.plan, run.result, run.metrics()               # the plan, its simulation, its row
    table = hetsim.compare(graph, platform).table     # every scheduler, one row each
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
from importlib.machinery import ModuleSpec
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

#: the layer folders, each the subpackage ``hetsim.<layer>``
LAYERS = ("graphs", "costmodel", "sim", "schedulers", "runtime", "experiments")


class CheckoutLayerFinder(importlib.abc.MetaPathFinder):
    """Finds ``hetsim.<layer>`` for the six layer folders of a source checkout.

    In a checkout the layer folders (``graphs/``, ``sim/``, ...) sit beside ``hetsim/``;
    an installed wheel holds them under ``hetsim/`` itself (pyproject's package-dir
    mapping). Only the layers are mapped: the checkout's other folders (``tests/``,
    ``docs/``, ``benchmarks/``) are not subpackages of ``hetsim``.
    """

    def __init__(self, root: Path) -> None:
        self.root = root

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> ModuleSpec | None:
        """The spec of ``hetsim.<layer>`` from the checkout, None for any other name."""
        package, _, layer = fullname.partition(".")
        if package != "hetsim" or layer not in LAYERS:
            return None
        folder = self.root / layer
        return importlib.util.spec_from_file_location(
            fullname, folder / "__init__.py", submodule_search_locations=[str(folder)])


_CHECKOUT = Path(__file__).resolve().parent.parent
if (_CHECKOUT / "pyproject.toml").is_file() and (_CHECKOUT / "sim" / "engine" / "simulator.py").is_file():
    if not any(isinstance(f, CheckoutLayerFinder) and f.root == _CHECKOUT for f in sys.meta_path):
        sys.meta_path.insert(0, CheckoutLayerFinder(_CHECKOUT))

try:
    __version__ = version("hetsim")
except PackageNotFoundError:  # pragma: no cover - running from a checkout never installed
    __version__ = "0+unknown"

#: public name -> (module, attribute); attribute None: the module itself
_API: dict[str, tuple[str, str | None]] = {
    # layers
    "graphs": ("hetsim.graphs", None),
    "costmodel": ("hetsim.costmodel", None),
    "sim": ("hetsim.sim", None),
    "schedulers": ("hetsim.schedulers", None),
    "runtime": ("hetsim.runtime", None),
    "experiments": ("hetsim.experiments", None),
    # graphs
    "zoo": ("hetsim.graphs.zoo", None),
    "Graph": ("hetsim.graphs", "Graph"),
    "GraphError": ("hetsim.graphs", "GraphError"),
    "load_graph": ("hetsim.graphs", "load"),
    "from_torch": ("hetsim.graphs", "from_torch"),
    "from_onnx": ("hetsim.graphs", "from_onnx"),
    "from_relax": ("hetsim.graphs", "from_relax"),
    "llm_graph": ("hetsim.graphs.llm", "llm_graph"),
    "Architecture": ("hetsim.graphs.llm", "Architecture"),
    # cost models
    "Roofline": ("hetsim.costmodel", "Roofline"),
    "cost_model": ("hetsim.costmodel", "from_spec"),
    "CostModelError": ("hetsim.costmodel", "CostModelError"),
    # simulation
    "Platform": ("hetsim.sim", "Platform"),
    "Device": ("hetsim.sim", "Device"),
    "Link": ("hetsim.sim", "Link"),
    "Plan": ("hetsim.sim", "Plan"),
    "PlanError": ("hetsim.sim", "PlanError"),
    "PlatformError": ("hetsim.sim", "PlatformError"),
    "SimResult": ("hetsim.sim", "SimResult"),
    "SimulationError": ("hetsim.sim", "SimulationError"),
    "simulate": ("hetsim.sim", "simulate"),
    "Simulator": ("hetsim.sim", "Simulator"),
    "SimOptions": ("hetsim.sim", "SimOptions"),
    # schedulers
    "get_scheduler": ("hetsim.schedulers", "get"),
    "SchedulerError": ("hetsim.schedulers", "SchedulerError"),
    "PlanRun": ("hetsim.schedulers", "PlanRun"),
    "run_plan": ("hetsim.schedulers", "run_plan"),
    # experiments and real devices
    "compare": ("hetsim.experiments.compare", "compare"),
    "Comparison": ("hetsim.experiments.compare", "Comparison"),
    "plan_llm": ("hetsim.experiments.llm_plan", "plan_llm"),
    "execute": ("hetsim.runtime", "execute"),
    "ExecutionOptions": ("hetsim.runtime", "ExecutionOptions"),
}

__all__ = ["__version__", *sorted(_API)]


def __getattr__(name: str) -> Any:
    try:
        module, attr = _API[name]
    except KeyError:
        raise AttributeError(f"module 'hetsim' has no attribute {name!r}") from None
    mod = importlib.import_module(module)
    value = mod if attr is None else getattr(mod, attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_API})
