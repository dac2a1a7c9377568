"""The math mode a GPU runs an op in, and the peak FLOP/s that mode has on a device.

PyTorch does not run every FP32 op on the FP32 (CUDA-core) pipes:

* **convolutions** run on TF32 tensor cores on a GPU that has them, because
  ``torch.backends.cudnn.allow_tf32`` is on by default;
* **matmuls** stay FP32 unless ``torch.set_float32_matmul_precision`` says ``"high"``
  (TF32) or ``"medium"`` (BF16) (``Device.matmul_precision``; default ``"highest"``);
* **FP16 / BF16 tensors** run convolutions and matmuls on the tensor cores of their
  dtype;
* everything else (element-wise, reductions, normalisations) runs on the CUDA cores
  and is memory-bound: ``fp32``.

A device states its tensor-core peaks in ``Device.tensor_flops`` (``{tf32 = ...,
fp16 = ..., bf16 = ...}``). :func:`mode_peak` gives the peak of a mode on a device:

* no ``tensor_flops`` at all: ``peak_flops`` prices every mode (the platform states
  one peak for the dtype its model uses, as the LLM presets do);
* a stated table without ``tf32``: the GPU has no TF32 (Volta, Turing, Pascal) and
  PyTorch runs those ops in FP32: ``peak_flops``;
* a stated table without the ``fp16``/``bf16`` peak an op needs: ``peak_flops``, and
  the caller warns (:data:`MISSING`), naming the device and the key.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.costmodel.platform import Device

__all__ = ["MISSING", "math_mode", "mode_peak", "node_dtype"]

#: :func:`mode_peak`'s second value when the device lacks the peak the mode needs
MISSING = "missing"
_HALF = {"float16": "fp16", "half": "fp16", "bfloat16": "bf16"}
_PRECISION = {None: "fp32", "highest": "fp32", "high": "tf32", "medium": "bf16"}


def math_mode(op_class: str, dtype: str, matmul_precision: str | None = None) -> str:
    """The math mode PyTorch runs an op of ``op_class`` (:func:`costmodel.roofline.op_class`)
    on ``dtype`` tensors in, on a GPU with tensor cores.

    >>> math_mode("conv2d", "float32"), math_mode("matmul", "float32")
    ('tf32', 'fp32')
    >>> math_mode("matmul", "float32", "high"), math_mode("matmul", "bfloat16"), math_mode("add", "float16")
    ('tf32', 'bf16', 'fp32')
    """
    if op_class not in ("conv2d", "matmul"):
        return "fp32"
    if dtype in _HALF:
        return _HALF[dtype]
    if op_class == "conv2d":
        return "tf32"
    return _PRECISION[matmul_precision]


def mode_peak(device: Device, mode: str) -> tuple[float, str | None]:
    """``(peak FLOP/s of mode on device, None or MISSING)`` (see the module docstring)."""
    table = device.tensor_flops
    if mode == "fp32" or table is None or device.kind != "gpu":
        return device.peak_flops, None
    if mode in table:
        return table[mode], None
    return device.peak_flops, (None if mode == "tf32" else MISSING)


def node_dtype(data: dict) -> str:
    """The dtype of a node's first input (``float32`` when it declares none)."""
    inputs = data.get("inputs")
    if inputs:
        first = inputs[0]
        if isinstance(first, dict) and first.get("dtype"):
            return str(first["dtype"])
    return "float32"
