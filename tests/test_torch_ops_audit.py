"""The torch backend covers every Relax operator TVM's frontends can emit (the audit), and
its mappings of the less common ones compute what the model computes."""

from __future__ import annotations

import os
import re

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import hetsim
from hetsim.runtime.backends.torch_backend import supported_ops
from hetsim.runtime.backends.torch_ops_tensor import TVM_ONLY


def frontend_operators() -> set[str]:
    """Relax operators named in TVM's PyTorch and ONNX frontends (``relax.op.X`` / ``_op.X``
    that are registered operators)."""
    import tvm

    base = os.path.join(os.path.dirname(tvm.__file__), "relax", "frontend")
    files = [os.path.join(base, "torch", f) for f in os.listdir(os.path.join(base, "torch")) if f.endswith(".py")]
    files.append(os.path.join(base, "onnx", "onnx_frontend.py"))
    names: set[str] = set()
    for path in files:
        with open(path) as fh:
            for m in re.finditer(r"\b(?:relax\.op|_op)\.((?:[a-z_]+\.)*[a-z_0-9]+)\b", fh.read()):
                names.add(m.group(1).split(".")[-1])
    ops = set()
    for n in names:
        for prefix in ("relax.", "relax.nn.", "relax.image.", "relax.memory."):
            try:
                tvm.ir.Op.get(prefix + n)
            except Exception:  # noqa: BLE001 - not an operator under this prefix
                continue
            ops.add(n)
            break
    return ops


def test_every_frontend_operator_has_a_backend():
    ops = frontend_operators()
    assert len(ops) > 120  # the parse found the frontends' operator list
    missing = sorted(ops - set(supported_ops()) - set(TVM_ONLY))
    assert missing == []
    # what is left to the tvm backend is named with a reason, and is not also mapped
    assert set(TVM_ONLY).isdisjoint(supported_ops())
    assert all(TVM_ONLY.values())


class Indexing(nn.Module):
    """argsort, gather, index_put, scatter, one_hot, tril/triu, stack, cumsum (of floats,
    booleans, int32) on activations."""

    def forward(self, x: torch.Tensor, idx: torch.Tensor) -> tuple[torch.Tensor, ...]:
        order = torch.argsort(x, dim=-1)
        g = torch.gather(x, 1, order)
        inv = torch.empty_like(order[0])
        inv[order[0]] = torch.arange(order.shape[1])
        s = torch.zeros_like(x).scatter(1, order, x)
        hot = F.one_hot(idx, 6).float() * 2.0
        tri = torch.tril(x @ x.T) + torch.triu(x @ x.T, 1)
        st = torch.stack([x, g], 1).sum(1)
        counts = torch.cumsum(idx > 2, 0) + torch.cumsum(idx.int(), 0)  # bool, int32: no int64 by torch
        return g, inv, s, hot, tri, st, torch.cumsum(x, 1), counts


class MathOps(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.prelu = nn.PReLU(3)
        self.norm = nn.InstanceNorm2d(3, affine=True)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        y = torch.atan2(x, x + 2.0) + torch.round(x * 3) + torch.trunc(x * 5) + torch.asinh(x)
        z = F.softplus(x, beta=2.0) + torch.sinh(x) - torch.cosh(x) + F.selu(x)
        return y, z, self.prelu(x), F.pixel_shuffle(self.norm(x).repeat(1, 4, 1, 1), 2)


@pytest.mark.parametrize(
    ("module", "inputs"),
    [
        (Indexing(), (torch.rand(4, 6), torch.randint(0, 6, (5,)))),
        (MathOps(), (torch.randn(2, 3, 4, 4),)),
    ],
    ids=["indexing", "math"],
)
def test_mapped_operators_compute_what_the_module_does(module, inputs):
    g = hetsim.from_torch(module, inputs)
    ops = {d["op"] for _, d in g.nodes(data=True)}
    platform = hetsim.Platform.preset("cpu2")
    plan = hetsim.get_scheduler("round-robin").schedule(g, platform, hetsim.Roofline())
    run = hetsim.execute(g, plan, platform, warmup=0, repeats=1)  # torch backend
    assert run.check["reference"] == "torch module"
    assert run.check["error"] <= 1.0 and run.check["node_error"] <= 1.0
    assert ops <= set(supported_ops())


class Upsample(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.interpolate(self.conv(x), scale_factor=2, mode="bilinear") + 1.0


def test_operators_left_to_tvm_run_on_the_tvm_backend():
    g = hetsim.from_torch(Upsample(), (torch.rand(1, 3, 8, 8),))
    assert "resize2d" in TVM_ONLY and "resize2d" in {d["op"] for _, d in g.nodes(data=True)}
    platform = hetsim.Platform.preset("cpu2")
    plan = hetsim.get_scheduler("round-robin").schedule(g, platform, hetsim.Roofline())
    with pytest.raises(hetsim.runtime.backends.BackendError, match=r"'resize2d'.*use the tvm backend"):
        hetsim.execute(g, plan, platform, warmup=0, repeats=1)
    run = hetsim.execute(g, plan, platform, warmup=0, repeats=1, backend="tvm")
    assert run.check["reference"] == "torch module" and run.check["error"] <= 1.0
