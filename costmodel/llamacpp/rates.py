"""The fractions of peak that llama.cpp's kernels achieve, fitted on published runs.

:class:`AchievedRates` holds, per backend class, what scales a :class:`~costmodel.llamacpp.Machine`'s
peaks into llama.cpp's speed:

* ``gpu_bw_frac``: fraction of GPU memory bandwidth token generation draws (memory-bound
  matrix-vector products); ``hbm_bw_frac``: the same on a GPU with high-bandwidth memory
  (HBM: A100, H100, V100, MI50), whose many wide channels llama.cpp's matrix-vector kernels
  keep less busy than a GDDR or LPDDR card's (0: ``gpu_bw_frac``); ``gddr7_bw_frac`` and
  ``gddr5_bw_frac``: the same on GDDR7 (Blackwell GeForce cards) and GDDR5 (Pascal and older
  cards) (:data:`MEMORY_CLASSES`; 0: ``gpu_bw_frac``); ``gpu_token_s``: fixed seconds per generated token on the GPU
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
  processing reach; ``switch_s``: seconds each hand-over between CPU and GPU costs per token;
* ``cpu_attn_flops``: FLOP/s of one thread in attention on the CPU (a KV cache in host
  memory, ``-nkvo``, or a CPU-only run);
* ``server_request_s`` and ``server_token_s``: what a front end such as llama-server adds
  to llama-bench's timings: seconds per request (tokenising, the HTTP exchange, the
  prompt cache) counted in its prompt-processing time, and seconds per generated token
  (sampling, detokenising and streaming it).

Each llama.cpp backend has its own set (:class:`BackendRates`: ``cuda``, ``vulkan``,
``rocm``, ``sycl``, ``metal``, ``cpu``): the same kernels do not reach the same fraction of
a GPU's peaks under each. The shipped sets (``costmodel/data/llamacpp_rates.json``) are
fitted by ``benchmarks/llm_published.py --fit`` on every row of
``experiments/llm_published`` of that backend (the CPU figures on the CPU-only and
partial-offload rows); a figure no row of a backend depends on is listed in its
``undetermined`` and kept at the value of the CUDA set (CUDA's own: at its physical bound,
a fraction of 1, an overhead of 0, a memory class's fraction ``gpu_bw_frac``; another backend's
memory class fraction: its own ``gpu_bw_frac``
times CUDA's ratio of the two).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from hetsim.costmodel.base import CostModelError

__all__ = ["BACKENDS", "MEMORY_CLASSES", "RATES_PATH", "AchievedRates", "BackendRates"]

#: llama.cpp's GPU backends and its CPU backend, as the rates file names them
BACKENDS = ("cuda", "vulkan", "rocm", "sycl", "metal", "cpu")

RATES_PATH = Path(__file__).resolve().parent.parent / "data" / "llamacpp_rates.json"

#: classes of GPU memory whose achieved bandwidth fraction is a figure of its own: (prefix of the
#: cited ``memory_type``, the figure); any other memory draws ``gpu_bw_frac``
MEMORY_CLASSES = (("HBM", "hbm_bw_frac"), ("GDDR7", "gddr7_bw_frac"), ("GDDR5", "gddr5_bw_frac"))


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
    cpu_attn_flops: float = 0.0
    server_request_s: float = 0.0
    server_token_s: float = 0.0
    hbm_bw_frac: float = 0.0
    gddr7_bw_frac: float = 0.0
    gddr5_bw_frac: float = 0.0
    fitted_on: str = ""
    undetermined: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name not in ("fitted_on", "undetermined") and (not isinstance(v, (int, float)) or not v >= 0):
                raise CostModelError(f"llama.cpp rates: {f.name} must be a number >= 0, got {v!r}")

    def gpu_bandwidth_fraction(self, memory_type: str) -> float:
        """The fraction of the bandwidth of a GPU memory of ``memory_type`` (``HBM2e``, ``GDDR7``...)
        llama.cpp draws: its class's (:data:`MEMORY_CLASSES`) where fitted, else ``gpu_bw_frac``."""
        kind = str(memory_type).upper()
        for prefix, name in MEMORY_CLASSES:
            if kind.startswith(prefix):
                return getattr(self, name) or self.gpu_bw_frac
        return self.gpu_bw_frac

    @classmethod
    def names(cls) -> list[str]:
        """The fitted figures' names (all but ``fitted_on``)."""
        return [f.name for f in fields(cls) if f.name not in ("fitted_on", "undetermined")]

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str = "llama.cpp rates") -> AchievedRates:
        """The rates of a dict :meth:`to_dict` wrote."""
        try:
            return cls(**{**data, "undetermined": tuple(data.get("undetermined", ()))})
        except TypeError as e:
            raise CostModelError(f"{where}: not a llama.cpp rates file: {e}") from None

    @classmethod
    def load(cls, path: str | Path | None = None, backend: str = "cuda") -> AchievedRates:
        """The rates of ``backend`` in ``path`` (default: the shipped, fitted file)."""
        return BackendRates.load(path).for_backend(backend)

    def to_dict(self) -> dict[str, Any]:
        """The rates as a dict."""
        return asdict(self)


@dataclass(frozen=True)
class BackendRates:
    """The :class:`AchievedRates` of each llama.cpp backend (see the module docstring)."""

    backends: dict[str, AchievedRates]
    fitted_on: str = ""

    def __post_init__(self) -> None:
        for name in self.backends:
            if name not in BACKENDS:
                raise CostModelError(f"llama.cpp rates: unknown backend {name!r}; known: {', '.join(BACKENDS)}")

    def for_backend(self, backend: str) -> AchievedRates:
        """The rates of ``backend``; :class:`CostModelError` naming the fitted ones."""
        key = str(backend).lower()
        if key not in self.backends:
            raise CostModelError(f"no achieved rates for llama.cpp backend {backend!r}; fitted: "
                                 f"{', '.join(self.backends) or 'none'}")
        return self.backends[key]

    @classmethod
    def load(cls, path: str | Path | None = None) -> BackendRates:
        """The rates in ``path`` (default: the shipped, fitted file)."""
        p = Path(path) if path is not None else RATES_PATH
        try:
            data = json.loads(p.read_text())
        except (OSError, ValueError) as e:
            raise CostModelError(f"{p}: not a llama.cpp rates file: {e}") from None
        if not isinstance(data, dict):
            raise CostModelError(f"{p}: not a llama.cpp rates file: a JSON object is needed")
        if "backends" not in data:  # one set: CUDA's (and the CPU's figures in it)
            one = AchievedRates.from_dict(data, str(p))
            return cls({"cuda": one, "cpu": one}, one.fitted_on)
        if not isinstance(data["backends"], dict):
            raise CostModelError(f"{p}: 'backends' must be an object of backend -> rates")
        return cls({k: AchievedRates.from_dict(v, f"{p}: backend {k!r}") for k, v in data["backends"].items()},
                   str(data.get("fitted_on", "")))

    def save(self, path: str | Path | None = None) -> Path:
        """Write the rates as JSON to ``path`` (default: the shipped file)."""
        p = Path(path) if path is not None else RATES_PATH
        data = {"fitted_on": self.fitted_on, "backends": {k: asdict(v) for k, v in self.backends.items()}}
        p.write_text(json.dumps(data, indent=1) + "\n")
        return p
