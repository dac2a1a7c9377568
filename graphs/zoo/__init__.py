"""Model zoo: CNNs, RNNs and Transformers written in PyTorch, imported as hetsim graphs.

Every model is defined in this package (no torchvision / transformers dependency),
follows its paper and reference implementation, and has random weights drawn from
a seed argument (global RNG state is left untouched).

==================  ==================================================
name                model
==================  ==================================================
alexnet             AlexNet, torchvision variant
densenet121         DenseNet-121
googlenet           GoogLeNet, the first Inception network, torchvision (BN, no aux)
inception_v3        the third Inception network, torchvision (no aux classifier)
mobilenet_v2        MobileNetV2 1.0
mobilenet_v3_large  MobileNetV3-Large 1.0 (hardswish, SE)
efficientnet_b0     EfficientNet-B0 (SiLU, SE)
shufflenet_v2_x1_0  ShuffleNet V2 1.0x (channel split and shuffle)
resnet18            ResNet-18
resnet50            ResNet-50 v1.5
squeezenet1_1       SqueezeNet 1.1
vgg16               VGG-16 (no BN)
lstm, gru           stacked, explicit cells unrolled over time
bert_base           BERT-base encoder + pooler
gpt2                GPT-2 small, tied LM head, causal mask
vit_b_16            ViT-B/16, torchvision variant
==================  ==================================================

Options (``**kw``): CNNs take ``image_size`` (224; inception_v3: 299, at least 75) and
``num_classes`` (1000); lstm and gru take ``seq_len`` (16), ``hidden`` (256),
``layers`` (2), ``input_size`` and ``out_features`` (both default to ``hidden``);
bert_base and gpt2 take ``seq_len`` (128); vit_b_16 takes ``image_size`` (224, a
multiple of 16) and ``num_classes`` (1000).

Examples
--------
>>> from hetsim.graphs import zoo
>>> zoo.params("resnet18")
11689512
>>> model, (x,) = zoo.build("lstm", batch=2, seq_len=4, hidden=32)
>>> tuple(model(x).shape)
(2, 32)

``zoo.load("resnet18", granularity="fused")`` imports the model through TVM Relax
(:func:`graphs.relax_import.from_torch`); recurrent graphs get a ``step`` on every
node (:func:`graphs.zoo.rnn.tag_steps`).
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import json
import numbers
import os
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import torch
from torch import nn

from hetsim.graphs.graph import SCHEMA_VERSION, Graph, GraphError
from hetsim.graphs.private_cache import read_own_file, usable_folder
from hetsim.graphs.zoo import cnn, mobile, rnn, transformer
from hetsim.graphs.zoo.rnn import tag_steps

__all__ = ["names", "build", "load", "params", "tag_steps", "RECURRENT", "cache_path"]

#: Bump when a model definition changes in a way that changes its graph.
ZOO_VERSION = 1

_FAMILIES: tuple[ModuleType, ...] = (cnn, mobile, rnn, transformer)
_REGISTRY: dict[str, tuple[Callable[..., nn.Module], ModuleType]] = {
    name: (ctor, fam) for fam in _FAMILIES for name, ctor in fam.MODELS.items()
}
#: Models whose graphs carry a ``step`` node attribute.
RECURRENT: frozenset[str] = frozenset(rnn.MODELS)
_GRANULARITIES = ("op", "fused")
#: modules whose source is part of the cache key: a change there re-imports.
_IMPORTER_MODULES = (
    "hetsim.graphs.relax_import",
    "hetsim.graphs.relax_ops",
    "hetsim.graphs.torch_export",
    "hetsim.graphs.moe",
    "hetsim.graphs.fold",
)


def names() -> list[str]:
    """Names of the zoo models, sorted."""
    return sorted(_REGISTRY)


def _entry(name: str) -> tuple[Callable[..., nn.Module], ModuleType]:
    try:
        return _REGISTRY[name]
    except (KeyError, TypeError):
        raise GraphError(f"unknown zoo model {name!r}; known models: {names()}") from None


def _resolve_kwargs(name: str, kw: dict[str, Any]) -> dict[str, Any]:
    """Check ``kw`` against the model's constructor; return all kwargs with defaults."""
    ctor, _ = _entry(name)
    sig = inspect.signature(ctor)
    unknown = sorted(set(kw) - set(sig.parameters))
    if unknown:
        raise GraphError(
            f"zoo model {name!r} has no option(s) {unknown}; it takes {sorted(sig.parameters)}"
        )
    bound = sig.bind(**kw)
    bound.apply_defaults()
    return dict(sorted(bound.arguments.items()))


def _construct(name: str, kw: dict[str, Any]) -> nn.Module:
    ctor, _ = _entry(name)
    try:
        return ctor(**kw)
    except ValueError as e:
        raise GraphError(f"zoo model {name!r}: {e}") from None


#: largest batch a zoo model is built at: its example input is allocated and the model
#: run on it once to import it (resnet18 at batch 1024: 0.6 GB of input alone)
MAX_BATCH = 1024


def _check_int(key: str, value: Any, minimum: int, maximum: int | None = None) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise GraphError(f"{key} must be an int >= {minimum}, got {value!r:.60}")
    if maximum is not None and value > maximum:
        raise GraphError(f"{key} must be at most {maximum}, got {value!r:.60}")


def build(
    name: str, *, batch: int = 1, seed: int = 0, **kw: Any
) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """Construct a zoo model with seeded random weights, and example inputs.

    Parameters
    ----------
    name
        A name from :func:`names`.
    batch
        Batch size of the example inputs.
    seed
        Seed of the weights and of the example inputs; the global RNG state is
        restored afterwards.
    **kw
        Model options (``image_size``, ``seq_len``, ``hidden``, ...).

    Returns
    -------
    (module, inputs)
        The module in eval mode and a tuple of example input tensors.

    Raises
    ------
    GraphError
        For an unknown model, an unknown option or an invalid value.
    """
    _resolve_kwargs(name, kw)
    _check_int("batch", batch, 1, MAX_BATCH)
    _check_int("seed", seed, 0)
    _, family = _entry(name)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        module = _construct(name, kw)
    generator = torch.Generator().manual_seed(seed)
    inputs = family.make_inputs(module, batch, generator)
    return module.eval(), inputs


def params(name: str, **kw: Any) -> int:
    """Number of parameters of a zoo model (tied weights counted once).

    Cheap: the model is built on the ``meta`` device, without allocating weights.
    """
    _resolve_kwargs(name, kw)
    with torch.device("meta"):
        module = _construct(name, kw)
    return sum(p.numel() for p in module.parameters())


# ---------------------------------------------------------------------------- cache
def _source_digest() -> str:
    """Hash of the model definitions and the importer sources (stale-cache guard)."""
    h = hashlib.sha256()
    files = [inspect.getfile(m) for m in _FAMILIES]
    for module in _IMPORTER_MODULES:
        spec = importlib.util.find_spec(module)
        if spec is not None and spec.origin:
            files.append(spec.origin)
    for f in files:
        h.update(Path(f).read_bytes())
    return h.hexdigest()[:16]


def _cache_dir(cache: str | os.PathLike[str] | bool | None) -> Path | None:
    if cache is False:
        return None
    if cache is None or cache is True:
        env = os.environ.get("HETSIM_CACHE")
        if env:
            return Path(env)
        return Path.home() / ".cache" / "hetsim" / "zoo" if cache is True else None
    return Path(cache)


def _tvm_version() -> str:
    """TVM's version from its installed metadata (importing TVM to read it takes
    seconds, which a cache hit need not spend); a source build without metadata is
    imported."""
    from importlib import metadata

    try:
        return metadata.version("apache-tvm")
    except metadata.PackageNotFoundError:
        import tvm

        return str(tvm.__version__)


def cache_path(
    directory: str | os.PathLike[str],
    name: str,
    *,
    batch: int = 1,
    granularity: str = "op",
    seed: int = 0,
    **kw: Any,
) -> Path:
    """The cache file :func:`load` uses for these arguments inside ``directory``.

    The key covers the model name, batch, granularity, all model options (defaults
    filled in), seed, the graph ``SCHEMA_VERSION``, the TVM and torch versions and a
    hash of the model and importer sources.
    """
    key = {
        "name": name,
        "batch": batch,
        "granularity": granularity,
        "kwargs": _resolve_kwargs(name, kw),
        "seed": seed,
        "schema": SCHEMA_VERSION,
        "zoo": ZOO_VERSION,
        "tvm": _tvm_version(),
        "torch": torch.__version__,
        "source": _source_digest(),
    }
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:20]
    return Path(directory) / f"{name}-b{batch}-{granularity}-{digest}.json"


def load(
    name: str,
    *,
    batch: int = 1,
    granularity: str = "op",
    seed: int = 0,
    cache: str | os.PathLike[str] | bool | None = None,
    **kw: Any,
) -> Graph:
    """Build a zoo model and import it as a :class:`~graphs.Graph` through TVM Relax.

    Parameters
    ----------
    name, batch, seed, **kw
        As in :func:`build`.
    granularity
        ``"op"`` (one node per Relax operator) or ``"fused"`` (one node per fused
        TVM kernel).
    cache
        A directory to cache imported graphs in as JSON; ``None`` uses ``$HETSIM_CACHE``
        when set (else no cache); ``True`` uses ``$HETSIM_CACHE`` or
        ``~/.cache/hetsim/zoo`` (created private); ``False`` never caches. A folder
        of another user's, or one other users may write, is not used, and nor is a
        cached file that is a link or that other users may write
        (:mod:`graphs.private_cache`): a graph is never read from a file another
        user could have edited.

    Returns
    -------
    Graph
        With ``meta["model"] = name`` and ``meta["zoo_kwargs"] = kw``; recurrent
        models have a ``step`` on every node.

    Examples
    --------
    >>> g = load("lstm", seq_len=4, hidden=32, granularity="fused")  # doctest: +SKIP
    >>> sorted({g.nodes[n]["step"] for n in g})  # doctest: +SKIP
    [0, 1, 2, 3]
    """
    _resolve_kwargs(name, kw)
    _check_int("batch", batch, 1, MAX_BATCH)
    _check_int("seed", seed, 0)
    if granularity not in _GRANULARITIES:
        raise GraphError(f"granularity must be one of {list(_GRANULARITIES)}, got {granularity!r}")
    directory = _cache_dir(cache)
    if directory is not None:  # only a folder of this user's that no one else may write
        directory = usable_folder(directory, what="zoo graph cache")
    path = None
    graph = None
    if directory is not None:
        path = cache_path(directory, name, batch=batch, granularity=granularity, seed=seed, **kw)
        data = read_own_file(path)  # None: missing, a link, or writable by another user
        if data is not None:
            try:
                graph = Graph.from_dict(json.loads(data), source=str(path))
            except (GraphError, ValueError, RecursionError):
                graph = None  # corrupt or outdated entry: rebuild and overwrite it
    if graph is None:
        graph = _import(name, batch=batch, granularity=granularity, seed=seed, kw=kw)
        if path is not None:
            graph.to_json(path)
    graph.meta["zoo_kwargs"] = dict(kw)
    return graph


def _import(name: str, *, batch: int, granularity: str, seed: int, kw: dict[str, Any]) -> Graph:
    from tqdm import tqdm

    # looked up when called: tests replace it on hetsim.graphs.relax_import
    from hetsim.graphs.relax_import import from_torch

    # an import takes seconds to a minute (torch.export, then TVM Relax): say so on stderr
    with tqdm(total=2, desc=f"importing {name} (torch.export, TVM Relax)", unit="step", leave=False) as bar:
        module, inputs = build(name, batch=batch, seed=seed, **kw)
        bar.update(1)
        graph = from_torch(module, inputs, granularity=granularity, name=name)
        bar.update(1)
    if name in RECURRENT:
        graph = tag_steps(graph)
    graph.meta["model"] = name
    graph.meta["zoo_kwargs"] = dict(kw)
    graph.meta["zoo_seed"] = seed
    return graph
