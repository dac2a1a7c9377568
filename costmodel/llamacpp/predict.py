"""llama.cpp's prompt-processing and generation speed for one placement on one machine.

Token generation (``tg``) of ``n`` tokens after ``depth`` cached ones (llama-bench ``-d``,
or the prompt before a generation) is priced at the mean cache length ``depth + n / 2``:
each device reads the weights it holds that one token uses (routed experts: ``top_k`` of
them) and its layers' KV cache, at its achieved bandwidth (several GPUs one after
another, each its own layers); the GPU adds a fixed cost per token and every hand-over
between CPU and GPU, or from one GPU to the next, costs ``switch_s``. A KV cache in host
memory (``-nkvo``) puts each layer's attention on the CPU: two hand-overs per GPU layer.

Prompt processing (``pp``) of ``n`` tokens runs in micro-batches of ``ubatch`` rows.
Layers on the GPU run their matrix products at the achieved tensor rate: quantised
weights at the INT8 rate of llama.cpp's MMQ kernels, or, where those are not used (no
INT8 tensor cores, builds before June 2024), dequantised to F16 in GPU memory for each
micro-batch (read the quantised bytes, write two bytes a weight) and multiplied at the
FP16 rate, as F16 weights are, the product reading the F16 copy. Routed experts are one grouped product over the experts the
micro-batch reaches, ``rows x top_k`` rows spread over them, slower the fewer rows an expert
gets. Micro-batches of at most :data:`VECTOR_KERNEL_MAX_ROWS` rows run llama.cpp's
matrix-vector kernels instead: bound by the weights they read.
Several GPUs run their layer blocks one after another (llama.cpp's pipeline of
micro-batches over them is not modelled: on eight A100s it gave pp512 no gain over one,
ggml-org/llama.cpp PR #6017). Layers in host memory are, for micro-batches of 32 rows or
more, run on the GPU too, their weights copied over PCIe for each micro-batch (llama.cpp's
operation offload); without a GPU they run on the CPU threads (Q4_0 and Q8_0 weights at
the rate of llama.cpp's tiled GEMM kernels, other types one dot product per row).
Each micro-batch also reads the weights it uses at the device's achieved bandwidth (what a
micro-batch of a few rows is bound by): once, or, in llama.cpp's quantised products on the GPU,
once per block of columns its kernel multiplies (:data:`COLUMN_TILE`: a micro-batch of 512 rows
streams the weights four times under CUDA, sixteen under Metal), and launches its kernels as a generated
token does. Attention runs where its KV cache is, over the ``depth`` cached tokens and the prompt so
far; without flash attention its scores (``ubatch x cells x heads`` in f32) are written,
normalised and read back at the device's achieved bandwidth; with it, the cached keys and
values are streamed once per block of queries (:data:`ATTENTION_TILE`).

Apple silicon (``unified_memory``) has no PCIe link: layers left in host memory run on
the CPU, none is copied to the GPU. A front end's timings (``harness`` other than
``llama-bench``) add ``server_request_s`` to prompt processing and ``server_token_s`` to
each generated token. Each backend's rates are its own (:class:`BackendRates`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from hetsim.costmodel.base import CostModelError
from hetsim.costmodel.llamacpp.machine import Machine
from hetsim.costmodel.llamacpp.placement import GPU, HOST, LlamaCppRun, Placement, place
from hetsim.costmodel.llamacpp.rates import AchievedRates, BackendRates
from hetsim.graphs.llm.architecture import ModelWeights

__all__ = ["ATTENTION_TILE", "COLUMN_TILE", "CPU_TILED_TYPES", "OP_OFFLOAD_MIN_ROWS", "VECTOR_KERNEL_MAX_ROWS",
           "Prediction", "attention_passes",
           "predict", "rates_for", "weight_passes"]

#: llama.cpp offloads an operation on host-resident weights to the GPU from this batch size
OP_OFFLOAD_MIN_ROWS = 32
#: micro-batches of at most this many rows multiply with llama.cpp's matrix-vector kernels
#: (CUDA's ``MMVQ_MAX_BATCH_SIZE``, 8): memory-bound, on the quantised data, each routed expert a
#: token reaches read once, no tile of a matrix kernel left idle
VECTOR_KERNEL_MAX_ROWS = 8


@dataclass(frozen=True)
class Prediction:
    """Predicted tokens/s of a test (``pp`` or ``tg``) of ``tokens`` tokens after ``depth``
    cached ones, and seconds per device."""

    test: str
    tokens: int
    tokens_per_s: float
    seconds: dict[str, float]
    depth: int = 0

    @property
    def label(self) -> str:
        """llama-bench's name of the test: ``pp512``, ``tg128 @ d512``."""
        return f"{self.test}{self.tokens}" + (f" @ d{self.depth}" if self.depth else "")


def _gemm_seconds(flops: float, machine: Machine, rates: AchievedRates, mmq: bool, expert_rows: float = 0) -> float:
    """A product on the GPU; a routed expert's of ``expert_rows`` rows runs at
    ``expert_rows / (expert_rows + expert_rows_half)`` of the rate."""
    if not machine.gpu_flops:
        raise CostModelError(f"machine {machine.name!r}: the GPU's compute rate is not known and prompt processing "
                             "needs it (give --gpu-tflops)")
    rate = machine.gpu_int8_ops * rates.gemm_frac_quant if mmq else machine.gpu_flops * rates.gemm_frac_float
    small = (expert_rows + rates.expert_rows_half) / expert_rows if expert_rows else 1.0
    return flops * small / rate


#: columns of the batch one block of llama.cpp's quantised matrix product multiplies against the
#: rows of weights it loads: CUDA's MMQ kernels take up to 128 columns a block on GPUs with
#: INT8 tensor cores (``get_mmq_x_max_host``; Pascal's ``dp4a`` path, 64, is priced as 128 here) and
#: HIP's 64 on AMD GPUs without matrix cores; Vulkan's large matrix-multiply tile is 128 wide,
#: Metal's ``kernel_mul_mm`` 32 (a 64 x 32 tile of the result per threadgroup); SYCL's taken as 64
COLUMN_TILE = {"cuda": 128, "rocm": 64, "vulkan": 128, "sycl": 64, "metal": 32}


def weight_passes(machine: Machine, rows: float) -> int:
    """Times a micro-batch of ``rows`` rows reads a quantised weight matrix from GPU memory:
    once per block of columns (:data:`COLUMN_TILE`), each block streaming every weight row
    (the weights do not stay in the GPU's cache between blocks)."""
    return max(1, math.ceil(rows / COLUMN_TILE.get(machine.backend, 64)))


#: queries one block of llama.cpp's flash-attention kernel takes against the cached keys and
#: values it streams: 64 in CUDA's (and HIP's) tensor-core kernel, Metal's
#: ``kernel_flash_attn_ext`` 8 a threadgroup, 64 taken for Vulkan's and SYCL's
ATTENTION_TILE = {"cuda": 64, "rocm": 64, "vulkan": 64, "sycl": 64, "metal": 8}


def attention_passes(machine: Machine, rows: int) -> int:
    """Times flash attention over a micro-batch of ``rows`` queries reads a layer's KV cache:
    once per block of queries (:data:`ATTENTION_TILE`)."""
    return max(1, math.ceil(rows / ATTENTION_TILE.get(machine.backend, 64)))


def _attended_kv_bytes(model: ModelWeights, i: int, kv_len: int, run: LlamaCppRun) -> float:
    """Bytes of the cached keys and values layer ``i``'s queries attend to (a sliding-window
    layer: its window; a linear-attention layer: its recurrent state)."""
    a = model.arch
    return a.kv_bytes(i, a.attended_cells(i, kv_len), run.type_k, run.type_v)


def _dequant_seconds(nbytes: float, elements: float, machine: Machine, rates: AchievedRates) -> float:
    """Seconds to dequantise weights of ``nbytes`` (``elements`` weights) to F16 in GPU memory."""
    return (nbytes + 2 * elements) / machine.achieved_gpu_bandwidth(rates)


#: weight types llama.cpp's CPU backend multiplies with tiled integer GEMM kernels
CPU_TILED_TYPES = ("Q4_0", "Q8_0")


def _cpu_seconds(flops: float, machine: Machine, rates: AchievedRates, threads: int, tiled: bool = False) -> float:
    if not threads:
        raise CostModelError(f"machine {machine.name!r}: CPU threads not known and work runs on the CPU "
                             "(give --threads)")
    return flops / (threads * (rates.cpu_tiled_flops if tiled else rates.cpu_thread_flops))


def _cpu_attention_seconds(flops: float, rates: AchievedRates, threads: int, machine: Machine) -> float:
    if not threads:
        raise CostModelError(f"machine {machine.name!r}: CPU threads not known and attention runs on the CPU "
                             "(give --threads)")
    return flops / (threads * (rates.cpu_attn_flops or rates.cpu_thread_flops))


def _scores_bytes(model: ModelWeights, i: int, rows: int, kv_len: int) -> float:
    """Bytes of attention scores without flash attention: written, normalised in place, read."""
    a = model.arch
    return 3 * 4.0 * a.heads * rows * a.attended_cells(i, kv_len)


def rates_for(rates: AchievedRates | BackendRates, machine: Machine) -> AchievedRates:
    """The rates of ``machine``'s backend (``rates`` itself when it is one backend's)."""
    return rates.for_backend(machine.backend) if isinstance(rates, BackendRates) else rates


def _cpu_bandwidth(machine: Machine, rates: AchievedRates, threads: int) -> float:
    if not machine.host_bandwidth or not threads:
        raise CostModelError(f"machine {machine.name!r}: host memory bandwidth or threads not known and "
                             "weights are read from host memory (give --ram-bw and --threads)")
    return min(machine.host_bandwidth * rates.cpu_bw_frac, threads * rates.cpu_thread_bw)


def predict(model: ModelWeights, machine: Machine, run: LlamaCppRun, test: str, tokens: int,
            rates: AchievedRates | BackendRates, placement: Placement | None = None) -> Prediction:
    """Tokens/s of llama-bench's ``test`` (``"pp"`` or ``"tg"``) of ``tokens`` tokens after
    ``run.depth`` cached ones."""
    a = model.arch
    rates = rates_for(rates, machine)
    if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 1:
        raise CostModelError(f"llama.cpp {test}: tokens must be an int >= 1, got {tokens!r}")
    # threads beyond the machine's cores add nothing: hyper-threads share a core's vector units
    threads = min(run.threads, machine.threads) if run.threads and machine.threads else run.threads or machine.threads
    context = run.context or run.depth + tokens
    pl = placement or place(model, run, context, has_gpu=machine.has_gpu, gpus=machine.gpu_count)
    if test == "tg":
        return _generation(model, machine, run, pl, tokens, rates, threads)
    if test != "pp":
        raise ValueError(f"test must be 'pp' or 'tg', got {test!r}")
    ub = min(run.ubatch, run.batch)
    seconds = {GPU: 0.0, HOST: 0.0, "pcie": 0.0}
    float_w = model.float_weights
    # quantised weights through MMQ; otherwise (F16 weights, or dequantised) through cuBLAS
    mmq = not float_w and run.mmq and machine.gpu_int8_ops > 0
    dequant = not float_w and not mmq
    tiled = run.cpu_tiled_gemm and model.weights in CPU_TILED_TYPES
    done = 0
    offload = machine.has_gpu and not machine.unified_memory  # host weights copied to the GPU per micro-batch
    while done < tokens:
        m = min(ub, tokens - done)
        vector = m <= VECTOR_KERNEL_MAX_ROWS  # matrix-vector kernels: no tiles, no dequantised copy
        kv_mean = run.depth + done + m / 2
        for i, groups in enumerate(pl.layers):
            el, by = model.layer_elements[i], model.layer_bytes[i]
            attn_flops = m * a.attention_flops_per_token(i, int(kv_mean))
            scores = 0.0 if run.flash_attn else _scores_bytes(model, i, m, int(kv_mean))
            if pl.kv_device[i] == GPU:
                seconds[GPU] += (_gemm_seconds(attn_flops, machine, rates, mmq=False)
                                 + scores / machine.achieved_gpu_bandwidth(rates))
                if run.flash_attn:  # each block of queries streams the cached keys and values
                    seconds[GPU] += (_attended_kv_bytes(model, i, int(kv_mean), run) * attention_passes(machine, m)
                                     / machine.achieved_gpu_bandwidth(rates))
            else:  # attention runs where its KV cache is
                seconds[HOST] += _cpu_attention_seconds(attn_flops, rates, threads, machine)
                if scores:
                    seconds[HOST] += scores / _cpu_bandwidth(machine, rates, threads)
            for kind in ("attn", "ffn", "exps"):
                n_el = getattr(el, kind)
                if not n_el:
                    continue
                share = a.top_k / a.experts if kind == "exps" else 1.0
                flops = 2 * m * n_el * share
                # rows each routed expert the micro-batch reaches multiplies (uniform routing)
                expert_rows = m * a.top_k / (a.experts * model.expert_read_fraction(m)) if kind == "exps" else 0
                dev = groups[kind]
                on_gpu = dev == GPU or (offload and m >= OP_OFFLOAD_MIN_ROWS)
                # each micro-batch reads the weights it uses once (all of a small one's time)
                read = getattr(by, kind) * (model.expert_read_fraction(m) if kind == "exps" else 1.0)
                if on_gpu:
                    if dev != GPU:
                        seconds["pcie"] += getattr(by, kind) / (machine.pcie_bandwidth * rates.pcie_frac)
                    seconds[GPU] += _gemm_seconds(flops, machine, rates, mmq, 0 if vector else expert_rows)
                    passes = weight_passes(machine, expert_rows if kind == "exps" else m) if mmq and not vector else 1
                    if dequant and not vector:  # dequantised to an F16 copy, which the F16 product reads
                        seconds[GPU] += _dequant_seconds(getattr(by, kind), n_el, machine, rates)
                        read *= 2 * n_el / getattr(by, kind)
                    seconds[GPU] += passes * read / machine.achieved_gpu_bandwidth(rates)
                else:
                    seconds[HOST] += _cpu_seconds(flops, machine, rates, threads, tiled)
                    seconds[HOST] += read / _cpu_bandwidth(machine, rates, threads)
        if machine.has_gpu:  # each micro-batch is one evaluation of the graph: its launches, layer by layer
            seconds[GPU] += rates.gpu_token_s + rates.gpu_layer_s * pl.gpu_layers
        done += m
    if run.harness != "llama-bench":
        seconds["front end"] = rates.server_request_s
    total = sum(seconds.values())
    return Prediction("pp", tokens, tokens / total if total > 0 else math.inf, seconds, run.depth)


def _generation(model: ModelWeights, machine: Machine, run: LlamaCppRun, pl: Placement, tokens: int,
                rates: AchievedRates, threads: int) -> Prediction:
    a = model.arch
    kv_len = run.depth + max(1, math.ceil(tokens / 2))
    read = {GPU: 0.0, HOST: 0.0}
    attn_host_flops = 0.0
    path = [HOST]  # the token's embedding row is looked up in host memory
    for i, groups in enumerate(pl.layers):
        by = model.layer_bytes[i]
        for kind in ("attn", "ffn", "exps"):
            size = getattr(by, kind)
            if not size:
                continue
            share = a.top_k / a.experts if kind == "exps" else 1.0
            dev = HOST if groups[kind] != GPU else GPU
            read[dev] += size * share
            if path[-1] != dev:
                path.append(dev)
            if kind == "attn" and pl.kv_device[i] != dev:  # attention where its cache is, and back
                path += [pl.kv_device[i], dev]
        read[pl.kv_device[i]] += a.kv_bytes(i, a.kv_cells(i, kv_len, 1), run.type_k, run.type_v)
        if pl.kv_device[i] == HOST and groups["attn"] == GPU:  # -nkvo: the CPU computes a GPU layer's attention
            attn_host_flops += a.attention_flops_per_token(i, kv_len)
    read[pl.output_device] += model.output_bytes
    if path[-1] != pl.output_device:
        path.append(pl.output_device)
    seconds = {HOST: read[HOST] / _cpu_bandwidth(machine, rates, threads) if read[HOST] else 0.0}
    if attn_host_flops:
        seconds["host attention"] = _cpu_attention_seconds(attn_host_flops, rates, threads, machine)
    if machine.has_gpu:
        seconds[GPU] = (read[GPU] / machine.achieved_gpu_bandwidth(rates) + rates.gpu_token_s
                        + (rates.graph_layer_s if run.cuda_graphs else rates.gpu_layer_s) * pl.gpu_layers)
        gpu_handovers = len({g for g in pl.gpu_of_layer if g >= 0}) - 1 if pl.gpu_of_layer else 0
        seconds["switch"] = ((len(path) - 2 if len(path) > 2 else 0) + max(gpu_handovers, 0)) * rates.switch_s
    if run.harness != "llama-bench":
        seconds["front end"] = rates.server_token_s
    total = sum(seconds.values())
    return Prediction("tg", tokens, 1.0 / total if total > 0 else math.inf, seconds, run.depth)
