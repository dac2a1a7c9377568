"""Where llama.cpp's flags put each tensor and KV cache, and the memory it then allocates.

llama.cpp's rules (``llama_model::load_tensors``, ``common/arg.cpp``):

* ``-ngl N`` puts the last ``N`` repeating layers on the GPU, and the output head too
  when ``N`` exceeds the layer count; ``token_embd`` stays in host memory (it is read
  by row lookup). ``N`` above ``layers + 1`` is clamped.
* ``--n-cpu-moe N`` keeps the routed-expert tensors (``ffn_*_exps``) of the first ``N``
  layers in host memory; ``-ot REGEX=CPU`` does so for every tensor whose name matches.
* A layer's KV cache is on the device of its layer (``-ngl``), in host memory with
  ``-nkvo``; sliding-window layers hold their window plus one micro-batch.
* GPU memory = its weights + its KV cache + a compute buffer (the largest intermediate
  of the graph over one micro-batch: the logits ``ubatch x vocab`` in f32, or without
  flash attention the scores ``ubatch x context x heads`` in f32; with layers in host
  memory, one layer's weights staged for prompt processing on the GPU).
* On several identical GPUs (``-sm layer``, llama.cpp's default split by free memory),
  the GPU layers are cut into equal consecutive blocks, the output layer on the last
  GPU; each GPU holds its layers' weights and KV cache and a compute buffer of its own.
  ``memory["gpu"]`` and ``breakdown["gpu"]`` are the fullest GPU's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from hetsim.costmodel.base import CostModelError
from hetsim.graphs.llm.architecture import ModelWeights

__all__ = ["GPU", "HARNESSES", "HOST", "LlamaCppRun", "Placement", "place"]

GPU, HOST = "gpu", "host"
#: what times a run: llama.cpp's benchmark, or a front end that adds its own work
HARNESSES = ("llama-bench", "llama-server", "llama-cli", "other")
_BLOCK = re.compile(r"^blk\.(\d+)\.(.+)$")


@dataclass(frozen=True)
class LlamaCppRun:
    """The flags of one llama.cpp run (llama-bench defaults: ``-ngl 99``, ``-ub 512``,
    ``-b 2048``, flash attention off, f16 KV cache on the GPU); ``cuda_graphs``: whether
    generation replays each step as a CUDA graph (llama.cpp builds since 2024 on Ampere
    and newer GPUs); ``mmq``: whether prompt processing multiplies quantised weights with
    llama.cpp's MMQ kernels on the quantised data (the default since June 2024, PR #8075,
    on GPUs with INT8 tensor cores) rather than dequantising them to F16 for cuBLAS
    (earlier builds, or a build with ``GGML_CUDA_FORCE_CUBLAS``); ``cpu_tiled_gemm``: whether
    CPU prompt processing multiplies Q4_0 and Q8_0 weights with tiled GEMM kernels (builds
    since April 2024, llama.cpp PR #6414); ``depth``: tokens already in the KV cache when
    the test starts (llama-bench ``-d``; a generation after a prompt of that length);
    ``harness``: what timed the run, ``llama-bench`` or a front end (``llama-server``,
    ``llama-cli``, ``other``: a third-party one) whose timings include its own per-request
    and per-token work."""

    ngl: int = 99
    n_cpu_moe: int = 0
    override_cpu: tuple[str, ...] = ()
    ubatch: int = 512
    batch: int = 2048
    flash_attn: bool = False
    type_k: str = "F16"
    type_v: str = "F16"
    kv_offload: bool = True
    context: int = 0
    threads: int = 0
    cuda_graphs: bool = True
    mmq: bool = True
    cpu_tiled_gemm: bool = True
    depth: int = 0
    harness: str = "llama-bench"

    def __post_init__(self) -> None:
        if self.harness not in HARNESSES:
            raise CostModelError(f"llama.cpp run: unknown harness {self.harness!r}; known: {', '.join(HARNESSES)}")
        for k in ("ngl", "n_cpu_moe", "context", "threads", "depth"):
            v = getattr(self, k)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise CostModelError(f"llama.cpp run: {k} must be an int >= 0, got {v!r}")
        for k in ("ubatch", "batch"):
            v = getattr(self, k)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise CostModelError(f"llama.cpp run: {k} must be an int >= 1, got {v!r}")
        for pattern in self.override_cpu:
            try:
                re.compile(pattern)
            except re.error as e:
                raise CostModelError(f"llama.cpp run: -ot pattern {pattern!r} is not a regular expression: {e}") from None


@dataclass(frozen=True)
class Placement:
    """Bytes per device of one run: ``layers[i]`` maps a layer's groups (``attn``, ``ffn``,
    ``exps``) to their device; ``kv_device[i]`` holds its cache; ``notes`` say what was clamped;
    ``gpu_of_layer[i]`` is the GPU (0, 1...) of a GPU layer, -1 for a host one, and
    ``gpu_bytes`` the memory of each GPU."""

    ngl: int
    layers: tuple[dict[str, str], ...]
    kv_device: tuple[str, ...]
    output_device: str
    memory: dict[str, int]
    breakdown: dict[str, dict[str, int]]
    notes: tuple[str, ...] = field(default=())
    gpu_of_layer: tuple[int, ...] = field(default=())
    gpu_bytes: tuple[int, ...] = field(default=())

    @property
    def gpu_layers(self) -> int:
        """Layers whose attention runs on the GPU."""
        return sum(1 for d in self.layers if d["attn"] == GPU)


def place(model: ModelWeights, run: LlamaCppRun, context: int, *, has_gpu: bool = True, gpus: int = 1) -> Placement:
    """Where ``run`` puts ``model``'s tensors and what each device allocates at ``context``
    tokens, on ``gpus`` identical GPUs."""
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1:
        raise CostModelError(f"llama.cpp placement: gpus must be an int >= 1, got {gpus!r}")
    a = model.arch
    n = a.layers
    notes: list[str] = []
    ngl = run.ngl if has_gpu else 0
    if ngl > n + 1:
        notes.append(f"-ngl {run.ngl} clamped to {n + 1} (the model has {n} layers and an output layer)")
        ngl = n + 1
    first_gpu = n - min(ngl, n)
    act = max(ngl, 1)

    def gpu_index(i: int) -> int:  # llama.cpp's split: equal consecutive blocks of the GPU layers
        return min(gpus - 1, int((i - first_gpu) / act * gpus))

    patterns = [re.compile(p) for p in run.override_cpu]
    layers = []
    per_gpu = [{"weights": 0, "kv": 0, "compute": 0} for _ in range(gpus)]
    host = {"weights": model.token_embd_bytes, "kv": 0, "compute": 0}
    overridden: dict[int, dict[str, int]] = {}
    for t in model.tensors if patterns else ():
        m = _BLOCK.match(t.name)
        if m and any(p.search(t.name) for p in patterns):
            rest = m.group(2)
            kind = "exps" if "_exps" in rest else ("ffn" if rest.startswith("ffn") else "attn")
            overridden.setdefault(int(m.group(1)), {}).setdefault(kind, 0)
            overridden[int(m.group(1))][kind] += t.nbytes
    staged = 0
    gpu_of = []
    for i, lb in enumerate(model.layer_bytes):
        dev = GPU if i >= first_gpu else HOST
        g = gpu_index(i) if dev == GPU else -1
        gpu_of.append(g)
        groups = {"attn": dev, "ffn": dev, "exps": dev}
        if dev == GPU and i < run.n_cpu_moe and a.is_moe_layer(i):
            groups["exps"] = HOST
        sizes = {"attn": lb.attn, "ffn": lb.ffn, "exps": lb.exps}
        moved = overridden.get(i, {})
        for kind, size in sizes.items():
            on_host = moved.get(kind, 0) if groups[kind] == GPU else 0
            (per_gpu[g] if groups[kind] == GPU else host)["weights"] += size - on_host
            host["weights"] += on_host
            if on_host:
                groups[kind] = HOST if on_host == size else "split"
        layers.append(groups)
        staged = max(staged, sum(s for k, s in sizes.items() if groups[k] != GPU))
    out_dev = GPU if ngl > n else HOST
    head = model.output_bytes - (model.token_embd_bytes if model.output_is_embedding and out_dev == HOST else 0)
    (per_gpu[-1] if out_dev == GPU else host)["weights"] += head  # a tied head in host memory is token_embd
    ctx = context
    kv_device = []
    for i in range(n):
        kvd = layers[i]["attn"] if run.kv_offload else HOST
        kvd = GPU if kvd == "split" else kvd
        kv_device.append(kvd)
        (per_gpu[gpu_of[i]] if kvd == GPU else host)["kv"] += a.kv_bytes(i, a.kv_cells(i, ctx, run.ubatch),
                                                                          run.type_k, run.type_v)
    ub = min(run.ubatch, run.batch)
    logits = 4 * ub * a.vocab
    scores = 0 if run.flash_attn else 4 * ub * ctx * a.heads
    activations = 4 * ub * (2 * a.hidden + 2 * max(a.ffn, a.expert_ffn * a.top_k if a.is_moe else 0))
    used = {g for g in gpu_of if g >= 0} | ({gpus - 1} if out_dev == GPU else set())
    if has_gpu and staged:
        used.add(0)  # host weights are staged on the main GPU for prompt processing
    for g in sorted(used):
        last = g == gpus - 1 and out_dev == GPU
        per_gpu[g]["compute"] = (max(logits if last else 0, scores, activations)
                                 + (staged if ub >= 32 and g == 0 else 0))
    host["compute"] = max(logits, activations)
    fullest = max(range(gpus), key=lambda g: sum(per_gpu[g].values()))
    by_group = {GPU: per_gpu[fullest], HOST: host}
    memory = {d: sum(v.values()) for d, v in by_group.items()}
    if not has_gpu:
        memory.pop(GPU)
        by_group.pop(GPU)
    return Placement(min(ngl, n + 1), tuple(layers), tuple(kv_device), out_dev, memory, by_group, tuple(notes),
                     tuple(gpu_of), tuple(sum(d.values()) for d in per_gpu) if has_gpu else ())
