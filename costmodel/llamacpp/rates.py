"""The fractions of peak that llama.cpp's kernels achieve, fitted on published runs.

:class:`AchievedRates` holds, per backend class, what scales a :class:`~costmodel.llamacpp.Machine`'s
peaks into llama.cpp's speed:

* ``gpu_bw_frac``: fraction of GPU memory bandwidth token generation draws (memory-bound
  matrix-vector products); ``gpu_token_s``: fixed seconds per generated token on the GPU
  (the synchronisation of the sampled token); ``gpu_layer_s``: seconds per GPU layer and
  token when each kernel is launched on its own, ``graph_layer_s`` when the step is
  replayed as one CUDA graph (llama.cpp since PR #6766, 2024, on Ampere and newer: the
  launches go, the kernels' own latency stays);
* ``gemm_frac_quant``: fraction of the GPU's dense INT8 tensor rate prompt processing
  reaches with quantised weights (llama.cpp's MMQ kernels multiply 8-bit integers);
  ``gemm_frac_float``: fraction of its dense FP16 tensor rate with FP16 accumulation
  reached with F16 weights (cuBLAS) and, on GPUs without INT8 tensor cores, with
  quantised weights dequantised to F16; ``expert_rows_half``: rows of a routed expert's
  product at which it runs at half that rate (``ubatch x top_k / experts`` rows each:
  the fewer, the less of each tile is used);
* ``cpu_bw_frac``: fraction of host DRAM bandwidth CPU generation draws; ``cpu_thread_bw``:
  bytes/s one thread draws (fewer threads than saturate DRAM); ``cpu_thread_flops``:
  FLOP/s of one thread in CPU prompt processing; ``cpu_tiled_flops``: the same for
  Q4_0 and Q8_0 weights, which llama.cpp multiplies with tiled integer GEMM kernels
  (llamafile's sgemm since April 2024, repacked weights since late 2024) rather than
  one dot product per row;
* ``pcie_frac``: fraction of the PCIe link weights streamed to the GPU for prompt
  processing reach; ``switch_s``: seconds each hand-over between CPU and GPU costs per token.

The shipped figures (``costmodel/data/llamacpp_rates.json``) are fitted by
``benchmarks/llm_published.py --fit`` on the fit rows of ``experiments/llm_published``;
a figure no fit row depends on is listed in ``undetermined`` and set to its physical
bound (a fraction of 1: the peak; an overhead of 0; ``graph_layer_s``: ``gpu_layer_s``,
since a replayed graph runs no slower than its kernels launched one by one).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from hetsim.costmodel.base import CostModelError

__all__ = ["RATES_PATH", "AchievedRates"]

RATES_PATH = Path(__file__).resolve().parent.parent / "data" / "llamacpp_rates.json"


@dataclass(frozen=True)
class AchievedRates:
    """Achieved fractions and overheads of llama.cpp (see the module docstring)."""

    gpu_bw_frac: float
    gpu_token_s: float
    gpu_layer_s: float
    graph_layer_s: float
    gemm_frac_quant: float
    gemm_frac_float: float
    expert_rows_half: float
    cpu_bw_frac: float
    cpu_thread_bw: float
    cpu_thread_flops: float
    cpu_tiled_flops: float
    pcie_frac: float
    switch_s: float
    fitted_on: str = ""
    undetermined: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name not in ("fitted_on", "undetermined") and (not isinstance(v, (int, float)) or not v >= 0):
                raise CostModelError(f"llama.cpp rates: {f.name} must be a number >= 0, got {v!r}")

    @classmethod
    def names(cls) -> list[str]:
        """The fitted figures' names (all but ``fitted_on``)."""
        return [f.name for f in fields(cls) if f.name not in ("fitted_on", "undetermined")]

    @classmethod
    def load(cls, path: str | Path | None = None) -> AchievedRates:
        """The rates in ``path`` (default: the shipped, fitted file)."""
        p = Path(path) if path is not None else RATES_PATH
        try:
            data = json.loads(p.read_text())
            return cls(**{**data, "undetermined": tuple(data.get("undetermined", ()))})
        except (OSError, ValueError, TypeError) as e:
            raise CostModelError(f"{p}: not a llama.cpp rates file: {e}") from None

    def save(self, path: str | Path | None = None) -> Path:
        """Write the rates as JSON to ``path`` (default: the shipped file)."""
        p = Path(path) if path is not None else RATES_PATH
        p.write_text(json.dumps(asdict(self), indent=1) + "\n")
        return p

    def to_dict(self) -> dict[str, Any]:
        """The rates as a dict."""
        return asdict(self)
