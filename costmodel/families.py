"""Kernel families: op kinds grouped by how their kernels spend time.

A learned cost model meets op kinds its training rows never had (``clip`` when only
``relu`` was profiled, ``avg_pool2d`` when only ``max_pool2d`` was). The family says
which measured kinds are its nearest relatives: same loop structure, same
bottleneck. :func:`op_family` is what the predictors use as a categorical input
(:class:`~costmodel.learned.xgb.XGBoost`) and as the fallback between an op kind and the
whole device (:class:`~costmodel.learned.polynomial.Polynomial`).

=================  ============================================================
family             kernels
=================  ============================================================
``gemm``           matmul, dense convolutions (one group): compute bound
``dwconv``         grouped / depthwise convolutions: few MACs per byte
``pool``           max / average pooling windows
``unary``          one input, a few instructions per element (relu, clip, cast)
``transcendental`` one input, a math-library call per element (sigmoid, tanh, gelu)
``binary``         two inputs, broadcasting (add, multiply, ...)
``norm``           batch / layer / group norm: a reduction and an elementwise pass
``reduce``         softmax, mean, sum, ...: reductions over an axis
``move``           copies that change layout: transpose, concat, split, slice, gather
``view``           reshapes: no data moves
=================  ============================================================

Fused nodes (``fused:conv2d+add+relu``) take the family of their dominant member
(:func:`costmodel.roofline.op_key`); an unknown kind is its own family.

Examples
--------
>>> op_family("clip"), op_family("conv2d", groups=32), op_family("fused:matmul+add")
('unary', 'dwconv', 'gemm')
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from hetsim.costmodel.roofline import CONV_OPS, MATMUL_OPS, VIEW_OPS, op_key

__all__ = ["FAMILIES", "family_column", "op_family"]

_MEMBERS: dict[str, str] = {
    "unary": "relu relu6 clip leaky_relu leakyrelu abs negative round floor ceil sign astype square "
             "logical_not hardswish hardsigmoid",
    "transcendental": "sigmoid tanh exp log sqrt rsqrt erf gelu gelu_tanh silu sin cos tan power",
    "binary": "add subtract multiply divide maximum minimum floor_divide floor_mod where equal not_equal "
              "less less_equal greater greater_equal logical_and logical_or bias_add",
    "pool": "max_pool1d max_pool2d max_pool3d avg_pool1d avg_pool2d avg_pool3d adaptive_avg_pool1d "
            "adaptive_avg_pool2d adaptive_avg_pool3d adaptive_max_pool2d",
    "norm": "batch_norm layer_norm group_norm instance_norm rms_norm",
    "reduce": "softmax log_softmax mean sum max min prod variance std argmax argmin cumsum cumprod topk",
    "move": "permute_dims transpose concat split strided_slice take gather gather_elements gather_nd "
            "embedding broadcast_to tile repeat flip pad",
}
_FAMILY: dict[str, str] = {op: fam for fam, ops in _MEMBERS.items() for op in ops.split()}
_FAMILY.update(dict.fromkeys(MATMUL_OPS, "gemm"))
_FAMILY.update(dict.fromkeys(CONV_OPS, "gemm"))
_FAMILY.update(dict.fromkeys(VIEW_OPS, "view"))
#: every named family, in the order of the table above
FAMILIES: tuple[str, ...] = ("gemm", "dwconv", "pool", "unary", "transcendental", "binary", "norm",
                             "reduce", "move", "view")


def op_family(op: str, groups: float = 1) -> str:
    """The family of op kind ``op`` (a convolution with ``groups > 1`` is ``dwconv``)."""
    key = op_key(op)
    fam = _FAMILY.get(key, key)
    if fam == "gemm" and key in CONV_OPS and groups > 1:
        return "dwconv"
    return fam


def family_column(X: pd.DataFrame) -> np.ndarray:
    """:func:`op_family` of every row of a profile / features frame (``op``, ``groups``)."""
    groups = X["groups"].to_numpy(float) if "groups" in X else np.ones(len(X))
    return np.array([op_family(o, g) for o, g in zip(X["op"].astype(str), groups)], dtype=object)
