"""Kernel backends: op mappings, per-node runs against the torch model, errors, TVM cache.

Per-node check: every node of a model's graph runs in topological order on the
backend with the model's real weights (from its Relax module), fed the real outputs
of its producers; the graph's outputs must equal the torch module's outputs within
``rtol = atol = 1e-4`` (float32; observed differences are <= 2e-6).
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from hetsim.graphs import Graph, zoo
from hetsim.runtime.backends import BackendError, get_backend, parse_device, parse_devices, to_numpy
from hetsim.runtime.backends.tvm_backend import (
    RelaxModel,
    import_model,
    import_module,
    keyed_digest,
)

RTOL = ATOL = 1e-4
#: small sizes for CI: CNNs at 64x64, RNNs with 4 steps of 32, transformers over 8 tokens
SMALL = {
    "lstm": {"seq_len": 4, "hidden": 32},
    "gru": {"seq_len": 4, "hidden": 32},
    "bert_base": {"seq_len": 8},
    "gpt2": {"seq_len": 8},
    "inception_v3": {"image_size": 75},  # its last grid reduction needs a 3x3 input
}


def small(name: str) -> dict:
    return SMALL.get(name, {"image_size": 64})


def run_nodes(model: RelaxModel, backend, device: str = "cpu") -> list[np.ndarray]:
    """Run every node of ``model.graph`` in topological order; return the graph outputs."""
    graph, values = model.graph, {}
    for n in graph.topological_order():
        kernel = backend.prepare(graph, n, device, values=model.constants(n))
        feed = {}
        for i, (kind, src) in enumerate(model.sources[n]):
            if kind == "node":
                feed[i] = values[src[0]][src[1]]
            elif kind == "input":
                feed[i] = model.example_inputs[src]
        values[n] = kernel.run_with(feed)
    return [to_numpy(values[o["node"]][o["output"]]) for o in graph.meta["outputs"]]


def reference(module: torch.nn.Module, inputs: tuple) -> list[np.ndarray]:
    with torch.no_grad():
        out = module(*inputs)
    return [o.numpy() for o in (out if isinstance(out, tuple) else (out,))]


def check_model(name: str, backend: str, granularity: str = "op", **bk_kw) -> None:
    model = import_model(name, granularity=granularity, **small(name))
    got = run_nodes(model, get_backend(backend, **bk_kw))
    want = reference(*zoo.build(name, **small(name)))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=RTOL, atol=ATOL)


@pytest.fixture
def tvm_cache(tmp_path):
    return tmp_path / "tvm-cache"


# ------------------------------------------------------------------ whole models
@pytest.mark.parametrize("name", ["lstm", "resnet18"])
def test_torch_backend_per_node_matches_model(name):
    check_model(name, "torch")


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(set(zoo.names()) - {"lstm", "resnet18"}))
def test_torch_backend_per_node_matches_every_zoo_model(name):
    check_model(name, "torch")


@pytest.mark.parametrize("granularity", ["op", "fused"])
def test_tvm_backend_per_node_matches_lstm(granularity, tvm_cache):
    check_model("lstm", "tvm", granularity, cache=tvm_cache)


@pytest.mark.slow
@pytest.mark.parametrize(("name", "granularity"), [("resnet18", "fused"), ("squeezenet1_1", "op"),
                                                   ("gru", "op"), ("mobilenet_v2", "fused")])
def test_tvm_backend_per_node_matches_model_slow(name, granularity, tvm_cache):
    check_model(name, "tvm", granularity, cache=tvm_cache)


class _Misc(torch.nn.Module):
    """Ops outside the zoo, some of which TVM legalizes into more than one kernel."""

    def forward(self, q):
        a = F.scaled_dot_product_attention(q, q, q)  # full_like, where, ... (VM path)
        b = torch.var(q, dim=-1)
        c = torch.cumsum(q, dim=-1)
        d = torch.topk(q, 2, dim=-1).values
        e = F.conv_transpose2d(q, torch.ones(2, 3, 3, 3), stride=2, padding=1)
        return a, b, c, d, e, q.std()


@pytest.mark.parametrize("backend", ["torch", "tvm"])
def test_backends_on_ops_outside_the_zoo(backend, tvm_cache):
    module, inputs = _Misc(), (torch.rand(1, 2, 4, 8, generator=torch.Generator().manual_seed(0)),)
    model = import_module(module, inputs, name="misc")
    kw = {"cache": tvm_cache} if backend == "tvm" else {}
    bk = get_backend(backend, **kw)
    if backend == "tvm":
        bk.register(model.graph, model)
        kinds = {bk.prepare(model.graph, n, "cpu").kind for n in model.graph}
        assert kinds == {"primfunc", "vm", "view"}
    for got, want in zip(run_nodes(model, bk), reference(module, inputs)):
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)


# ------------------------------------------------------------- single-op mappings
def _graph(op, ins, outs, attrs=None):
    g = Graph(name="one")
    g.add_op("n", op, inputs=[(s, d) for s, d in ins], outputs=[(s, d) for s, d in outs], attrs=attrs or {})
    return g


def _run(g, *arrays):
    k = get_backend("torch").prepare(g, "n", "cpu")
    return [o.numpy() for o in k.run_with([torch.as_tensor(a) for a in arrays])]


def test_conv2d_asymmetric_padding_and_nhwc_layouts():
    rng = np.random.default_rng(0)
    x = rng.random((1, 9, 8, 4), dtype=np.float32)  # NHWC
    w = rng.random((3, 3, 2, 6), dtype=np.float32)  # HWIO, groups 2
    attrs = {"strides": [2, 1], "padding": [0, 1, 2, 0], "dilation": [1, 2], "groups": 2,
             "data_layout": "NHWC", "kernel_layout": "HWIO", "out_layout": "NHWC", "out_dtype": "float32"}
    xt = F.pad(torch.from_numpy(x).permute(0, 3, 1, 2), [1, 0, 0, 2])
    want = F.conv2d(xt, torch.from_numpy(w).permute(3, 2, 0, 1), stride=[2, 1], dilation=[1, 2], groups=2)
    want = want.permute(0, 2, 3, 1).numpy()
    g = _graph("conv2d", [([1, 9, 8, 4], "float32"), ([3, 3, 2, 6], "float32")],
               [(list(want.shape), "float32")], attrs)
    np.testing.assert_allclose(_run(g, x, w)[0], want, rtol=1e-5, atol=1e-5)


def test_pooling_padding_and_ceil_mode():
    x = torch.rand(1, 2, 7, 7)
    attrs = {"pool_size": [3, 3], "strides": [2, 2], "dilation": [1, 1], "padding": [0, 0, 1, 1],
             "ceil_mode": False, "count_include_pad": False, "layout": "NCHW", "out_layout": "NCHW"}
    want = F.max_pool2d(F.pad(x, [0, 1, 0, 1], value=float("-inf")), 3, 2).numpy()
    g = _graph("max_pool2d", [([1, 2, 7, 7], "float32")], [(list(want.shape), "float32")], attrs)
    np.testing.assert_allclose(_run(g, x)[0], want)
    attrs = {**attrs, "padding": [1, 1, 1, 1], "ceil_mode": True}
    want = F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False).numpy()
    g = _graph("avg_pool2d", [([1, 2, 7, 7], "float32")], [(list(want.shape), "float32")], attrs)
    np.testing.assert_allclose(_run(g, x)[0], want, rtol=1e-6)


def test_take_split_strided_slice_reductions():
    x = torch.arange(24.0).reshape(2, 3, 4)
    g = _graph("take", [([2, 3, 4], "float32"), ([2], "int64")], [([2, 2, 4], "float32")],
               {"axis": 1, "mode": "clip"})
    np.testing.assert_array_equal(_run(g, x, np.array([2, 7]))[0], x[:, [2, 2]].numpy())
    g = _graph("split", [([2, 3, 4], "float32")], [([2, 3, 1], "float32"), ([2, 3, 3], "float32")],
               {"indices_or_sections": [1], "axis": 2})
    parts = _run(g, x)
    np.testing.assert_array_equal(parts[1], x[:, :, 1:].numpy())
    g = _graph("strided_slice", [([2, 3, 4], "float32")], [([2, 1, 2], "float32")],
               {"axes": [1, 2], "begin": [1, 0], "end": [2, 4], "strides": [1, 2]})
    np.testing.assert_array_equal(_run(g, x)[0], x[:, 1:2, 0:4:2].numpy())
    g = _graph("mean", [([2, 3, 4], "float32")], [([2, 1, 1], "float32")], {"axis": [-1, -2], "keepdims": True})
    np.testing.assert_allclose(_run(g, x)[0], x.mean((1, 2), keepdim=True).numpy())


def test_kernel_keeps_resident_weights_and_materialises_given_values():
    w = np.eye(4, dtype=np.float32) * 2
    g = _graph("matmul", [([1, 4], "float32"), ([4, 4], "float32")], [([1, 4], "float32")], {"out_dtype": "float32"})
    k = get_backend("torch").prepare(g, "n", "cpu", values={1: w})
    out = k.run_with({0: np.ones((1, 4), np.float32)})
    np.testing.assert_array_equal(out[0].numpy(), [[2, 2, 2, 2]])
    assert k().shape == (1, 4)  # random activations, resident weights


# ---------------------------------------------------------------------- errors
def test_unmapped_op_is_a_clear_error():
    g = _graph("fancy_op", [([2], "float32")], [([2], "float32")])
    with pytest.raises(BackendError, match=r"op 'fancy_op' \(node 'n'\).*tvm backend"):
        get_backend("torch").prepare(g, "n", "cpu")


def test_unsupported_attrs_and_wrong_shapes_name_the_op():
    g = _graph("strided_slice", [([4], "float32")], [([2], "float32")], {"assume_inbound": False})
    with pytest.raises(BackendError, match="strided_slice.*axes/begin/end"):
        get_backend("torch").prepare(g, "n", "cpu")
    g = _graph("relu", [([4], "float32")], [([5], "float32")])
    with pytest.raises(BackendError, match=r"op 'relu'.*\(\[4\], 'float32'\).*\(\[5\], 'float32'\)"):
        get_backend("torch").prepare(g, "n", "cpu")


def test_fused_nodes_need_the_tvm_backend():
    g = Graph(name="f")
    g.add_op("k", "fused", inputs=[([2], "float32")], outputs=[([2], "float32")], ops=["add", "relu"])
    with pytest.raises(BackendError, match="fused:add\\+relu.*tvm backend"):
        get_backend("torch").prepare(g, "k", "cpu")


def test_tvm_backend_needs_a_model():
    g = _graph("relu", [([4], "float32")], [([4], "float32")])
    with pytest.raises(BackendError, match="names no model.*import_module"):
        get_backend("tvm", cache=False).prepare(g, "n", "cpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
@pytest.mark.parametrize("backend", ["torch", "tvm"])
def test_cuda_without_gpu_is_a_clear_error(backend):
    g = _graph("relu", [([4], "float32")], [([4], "float32")])
    with pytest.raises(BackendError, match="'cuda:0'.*no CUDA GPU"):
        get_backend(backend, **({"cache": False} if backend == "tvm" else {})).prepare(g, "n", "cuda:0")


def test_device_specs():
    assert [d.name for d in parse_devices("cpu, cpu@1,cuda")] == ["cpu", "cpu@1", "cuda:0"]
    assert parse_device("cpu@1").threads == 1 and parse_device("cuda:1").index == 1
    assert parse_device("cpu", threads=3).cpu_threads() == 3
    for bad in ("gpu", "cpu@0", "cuda:x", "cpu,cpu"):
        with pytest.raises(BackendError):
            parse_devices(bad)
    with pytest.raises(BackendError, match="unknown backend 'onnx'"):
        get_backend("onnx")


# ------------------------------------------------------------------ TVM kernel cache
def test_tvm_kernels_are_cached_on_disk(tvm_cache):
    model = import_module(torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU()), (torch.rand(2, 8),))
    first = get_backend("tvm", cache=tvm_cache)
    first.register(model.graph, model)
    outs = [to_numpy(first.prepare(model.graph, n, "cpu", seed=1)()[0]) for n in model.graph]
    assert first.cache.builds == len(model.graph)
    index = (tvm_cache / "index.json").read_text()
    assert '"op": "matmul"' in index and len(list(tvm_cache.glob("*.so"))) == len(model.graph)
    second = get_backend("tvm", cache=tvm_cache)
    second.register(model.graph, model)
    again = [to_numpy(second.prepare(model.graph, n, "cpu", seed=1)()[0]) for n in model.graph]
    assert second.cache.builds == 0
    for a, b in zip(outs, again):
        np.testing.assert_array_equal(a, b)


def test_tvm_kernel_cache_is_private_and_loads_only_libraries_with_their_recorded_hash(tvm_cache):
    import hashlib
    import stat

    model = import_module(torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU()), (torch.rand(2, 8),))
    first = get_backend("tvm", cache=tvm_cache)
    first.register(model.graph, model)
    for n in model.graph:
        first.prepare(model.graph, n, "cpu", seed=1)
    assert stat.S_IMODE(tvm_cache.stat().st_mode) == 0o700
    libraries = sorted(tvm_cache.glob("*.so"))
    key = (tvm_cache / ".key").read_bytes()
    assert stat.S_IMODE((tvm_cache / ".key").stat().st_mode) == 0o600 and len(key) == 32
    for lib in libraries:
        recorded = (tvm_cache / f"{lib.name}.sha256").read_text().strip()
        assert recorded == keyed_digest(lib.read_bytes(), key)
        # a plain sha256 beside it (what anyone could compute) is not what is recorded
        assert recorded != hashlib.sha256(lib.read_bytes()).hexdigest()
    tampered = libraries[0]
    swap = tvm_cache / "swap"  # someone else's bytes under a cached name (a new file: the old one is mapped)
    swap.write_bytes(tampered.read_bytes() + b"\0")
    os.replace(swap, tampered)
    second = get_backend("tvm", cache=tvm_cache)
    second.register(model.graph, model)
    for n in model.graph:
        second.prepare(model.graph, n, "cpu", seed=1)
    assert second.cache.builds == 1  # the tampered library rebuilt, never loaded; the others loaded
    assert (tvm_cache / f"{tampered.name}.sha256").read_text().strip() == keyed_digest(tampered.read_bytes(), key)
    # a library whose bytes and plain sha256 are both forged is not loaded either
    forged = libraries[-1]
    swap.write_bytes(forged.read_bytes() + b"\0")
    os.replace(swap, forged)
    (tvm_cache / f"{forged.name}.sha256").write_text(hashlib.sha256(forged.read_bytes()).hexdigest() + "\n")
    third = get_backend("tvm", cache=tvm_cache)
    third.register(model.graph, model)
    for n in model.graph:
        third.prepare(model.graph, n, "cpu", seed=1)
    assert third.cache.builds == 1


def test_a_kernel_cache_folder_of_another_user_is_not_used(tmp_path, monkeypatch):
    from hetsim.runtime.backends.tvm_backend import KernelCache, KernelCacheWarning

    folder = tmp_path / "shared"
    folder.mkdir(mode=0o777)
    folder.chmod(0o777)
    cache = KernelCache(folder)
    assert cache.folder() == folder and stat_mode(folder) == 0o700  # ours: made private
    monkeypatch.setattr(os, "getuid", lambda: os.stat(folder).st_uid + 1)  # as if another user made it
    other = KernelCache(folder)
    with pytest.warns(KernelCacheWarning, match=rf"kernel cache {folder} belongs to user id \d+, not to this user"):
        assert other.folder() is None
    monkeypatch.undo()
    mine = KernelCache(tmp_path / "mine")
    assert mine.folder() is not None
    (tmp_path / "mine").chmod(0o777)  # opened up after its first check: checked again at every use
    with pytest.warns(KernelCacheWarning, match="opened to other users"):
        assert mine.folder() is None
    monkeypatch.setenv("HETSIM_CACHE", str(tmp_path))
    assert KernelCache().directory == tmp_path / f"tvm-{os.getuid()}"


def stat_mode(path) -> int:
    import stat

    return stat.S_IMODE(os.stat(path).st_mode)


def test_import_runtime_is_light():
    code = "import sys, runtime, runtime.backends; print('torch' in sys.modules, 'tvm' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


class _SelfAttention(torch.nn.Module):
    """One head pair of attention: legalized, its safe softmax creates a tensor of
    ``seq * seq * heads`` elements with a kernel that takes no argument (``full_like``)."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(8, 24)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.proj(x).view(1, x.shape[1], 3, 2, 4).permute(2, 0, 3, 1, 4)
        return F.scaled_dot_product_attention(q, k, v)


@pytest.mark.parametrize(("seq", "full_kernel"), [(4, False), (24, True)])
def test_fused_graph_has_the_kernels_of_its_exactly_folded_module(seq, full_kernel):
    """TVM's FoldConstant folds an argument-less kernel of up to 1024 elements only (here
    2 x 4 x 4 = 32 folds, 2 x 24 x 24 = 1152 stays); the import's structure-only fold folded
    both, so that DeiT, CLIP, Swin and SegFormer at fused granularity could not rebuild
    their model to execute ("node ... does not match the module's binding")."""
    import hetsim
    from hetsim.runtime.backends.relax_model import relax_model

    g = hetsim.from_torch(_SelfAttention(), (torch.rand(1, seq, 8),), granularity="fused")
    softmax = [n for n, d in g.nodes(data=True) if "softmax" in d["ops"]]
    assert len(softmax) == 1 and ("full_like" in g.nodes[softmax[0]]["ops"]) == full_kernel
    model = relax_model(g.program, granularity="fused", exact=True)  # raised on a mismatch
    assert list(model.graph) == list(g)


def test_importing_a_module_prints_no_torch_future_warning():
    """``hetsim validate`` rebuilt its model through ``import_module``, and every run
    printed torch 2.13's ``LeafSpec`` FutureWarning (its own pytree code trips it)."""
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        import_module(torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU()), (torch.rand(1, 3, 8, 8),))
    assert [str(w.message) for w in caught if issubclass(w.category, FutureWarning)] == []
