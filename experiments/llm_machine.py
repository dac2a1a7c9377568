"""A machine for llama.cpp predictions: from a GPU's name and host figures, a platform, or this one.

:func:`gpu_table` is ``experiments/llm_published/gpus.csv`` without the rows whose
figures were not read in a cited source (their ``notes`` start ``NOT read``, or say the
bandwidth was not read). Every :class:`~costmodel.llamacpp.Machine` is derived from a
hetsim :class:`~sim.platform.Platform` (:func:`machine_from_platform`), so that the
llama.cpp planner and the simulated policies price the same machine:
:func:`platform_from_flags` builds the platform of ``--gpu "RTX 4090" --ram-gb 64
--ram-bw 90GB/s`` (the GPU's tensor rates as its ``tensor_flops``; an Apple GPU shares
the host's memory domain: no PCIe link, one pool), and :func:`machine_from_flags` is
the machine of that platform.

The llama.cpp backend is the GPU vendor's own unless given: CUDA on NVIDIA, ROCm/HIP on
AMD, SYCL on Intel, Metal on Apple (``--backend vulkan`` for Vulkan on any of them).
"""

from __future__ import annotations

import csv
import re
from functools import lru_cache
from pathlib import Path

from hetsim.costmodel.llamacpp.machine import Machine, pcie_bandwidth
from hetsim.costmodel.llamacpp.rates import AchievedRates
from hetsim.costmodel.platform import Device, Link, Platform, PlatformError
from hetsim.schedulers import SchedulerError
from hetsim.schedulers.llm.residency import llm_devices

__all__ = ["GPU_TABLE", "VENDOR_BACKENDS", "find_gpu", "gpu_table", "gpu_vendor", "machine_from_flags",
           "machine_from_platform", "parse_rate", "platform_from_flags"]

#: each GPU vendor's own llama.cpp backend
VENDOR_BACKENDS = {"nvidia": "cuda", "amd": "rocm", "intel": "sycl", "apple": "metal"}

GPU_TABLE = Path(__file__).with_name("llm_published") / "gpus.csv"


def _norm(name: str, memory: bool = False) -> str:
    """``name`` without vendor words, case and punctuation (and, unless ``memory``, its memory size)."""
    s = name.lower()
    for word in ("nvidia", "geforce", "tesla"):
        s = s.replace(word, "")
    if not memory:
        s = re.sub(r"(\b|-)\d+\s*gb\b", "", s)
    return re.sub(r"[^a-z0-9]", "", s)


@lru_cache(maxsize=1)
def gpu_table() -> dict[str, dict[str, str]]:
    """The cited GPUs: normalised name or alias -> row of ``gpus.csv``; with its memory size
    (``a10080gb``) first, then without it (``a100``: the first such row)."""
    out: dict[str, dict[str, str]] = {}
    with GPU_TABLE.open() as fh:
        rows = [r for r in csv.DictReader(fh) if not re.search(r"NOT read|bandwidth[^;]*recalled", r["notes"])]
    for memory in (True, False):
        for row in rows:
            for n in [row["name"], *row["aliases"].split(";")]:
                out.setdefault(_norm(n, memory), row)
    return out


def find_gpu(name: str) -> dict[str, str]:
    """The ``gpus.csv`` row of ``name`` (case, vendor prefix and memory size ignored).

    Raises
    ------
    SchedulerError
        naming the GPU, with the cited ones and the flags that describe another card.
    """
    table = gpu_table()
    row = table.get(_norm(name, memory=True)) or table.get(_norm(name))
    if row is None:
        names = sorted({r["name"] for r in gpu_table().values()})
        raise SchedulerError(f"GPU {name!r} has no cited figures; known: {', '.join(names)} (or give "
                             "--gpu-mem-gb, --gpu-bw and --gpu-tflops)")
    return row


def gpu_vendor(row: dict[str, str]) -> str:
    """The vendor of a ``gpus.csv`` row: its ``vendor`` column, else read from its name."""
    if row.get("vendor"):
        return row["vendor"].strip().lower()
    name = f"{row['name']} {row.get('aliases', '')}".lower()
    if re.search(r"apple|\bm[1-5]\b", name):
        return "apple"
    if re.search(r"radeon|instinct|\bmi\d{2,3}|\brx ?\d{3,4}", name):
        return "amd"
    if re.search(r"\barc\b|intel", name):
        return "intel"
    return "nvidia"


def _fp16_acc_tflops(row: dict[str, str]) -> float:
    """Dense FP16 tensor TFLOPS with FP16 accumulation: the table's figure (FP32
    accumulation) doubled on GeForce parts (a ``GeForce`` alias), which run FP32
    accumulation at half rate; the FP32 rate where the GPU has no FP16 tensor figure."""
    tensor = row["fp16_tensor_tflops_dense"]
    if not tensor:
        return float(row["fp32_tflops"])
    return float(tensor) * (2 if "GeForce" in row["aliases"] else 1)


def _int8_tops(row: dict[str, str]) -> float:
    """Dense INT8 TOPS of llama.cpp's quantised products: the INT8 tensor rate; on a GPU
    without INT8 matrix units the packed-dot (``dp4a``, AMD's ``v_dot4``) rate, four
    multiply-adds per FP32 lane and clock (4 x the FP32 rate); 0 for an NVIDIA GPU with FP16
    but no INT8 tensor cores (Volta), where llama.cpp dequantises and multiplies in FP16."""
    if row["int8_tensor_tops_dense"]:
        return float(row["int8_tensor_tops_dense"])
    if row["fp16_tensor_tflops_dense"] and gpu_vendor(row) == "nvidia":
        return 0.0
    return 4 * float(row["fp32_tflops"])


def _named_gpu(text: str) -> dict[str, str] | None:
    """The cited GPU whose name or alias ``text`` contains as words (the longest such name)."""
    low, best, found = text.lower(), 0, None
    for row in {id(r): r for r in gpu_table().values()}.values():
        for alias in [row["name"], *row["aliases"].split(";")]:
            a = alias.strip().lower()
            if a and len(a) > best and re.search(rf"(?<![\w-]){re.escape(a)}(?![\w-])", low):
                best, found = len(a), row
    return found


def parse_rate(text: str | float, unit: str = "GB/s") -> float:
    """``"90GB/s"``, ``"90"`` or ``90`` as bytes/s (GB = 1e9 bytes).

    >>> parse_rate("90GB/s"), parse_rate(1.5)
    (90000000000.0, 1500000000.0)
    """
    m = re.fullmatch(r"\s*([0-9.]+)\s*(gb/s|gbps|gb)?\s*", str(text).lower())
    if m is None:
        raise SchedulerError(f"{text!r} is not a rate in {unit} (e.g. 90GB/s)")
    return float(m.group(1)) * 1e9


def platform_from_flags(gpu: str | None, *, ram_gb: float | None, ram_bw: str | float | None,
                        threads: int | None, gpu_mem_gb: float | None = None, gpu_bw: str | float | None = None,
                        gpu_tflops: float | None = None, gpu_int8_tops: float | None = None,
                        pcie: str | None = None, gpus: int = 1):
    """The :class:`~sim.platform.Platform` of a GPU name (its cited figures; explicit ones
    override them), the count of such GPUs and host figures; a GPU not in the table needs
    every GPU figure. The CPU's peak is its threads at llama.cpp's fitted per-thread rate.

    Raises
    ------
    SchedulerError
        a figure missing or not positive, naming the flag that gives it.
    """
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1 or (gpus > 1 and not gpu):
        raise SchedulerError(f"--gpus must be an int >= 1 with --gpu, got {gpus!r}")
    missing = [f for f, v in (("--ram-gb", ram_gb), ("--ram-bw", ram_bw), ("--threads", threads)) if v is None]
    if missing:
        raise SchedulerError(f"the machine needs {', '.join(missing)}")
    for flag, v in (("--ram-gb", ram_gb), ("--gpu-mem-gb", gpu_mem_gb), ("--gpu-tflops", gpu_tflops),
                    ("--gpu-int8-tops", gpu_int8_tops)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0
                              or v == float("inf")):
            raise SchedulerError(f"{flag} must be a positive number, got {v!r}")
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 0:
        raise SchedulerError(f"--threads must be an int >= 1, got {threads!r}")
    for flag, v in (("--ram-bw", ram_bw), ("--gpu-bw", gpu_bw)):
        if v is not None and not parse_rate(v) > 0:
            raise SchedulerError(f"{flag} must be a positive rate, got {v!r}")
    host_bw = parse_rate(ram_bw)
    cpu_rate = AchievedRates.load(backend="cpu").cpu_thread_flops
    # threads 0: not known (an error where a prediction needs them)
    devices = [Device("cpu", "cpu", peak_flops=max(threads, 1) * cpu_rate, mem_bandwidth_bytes_per_s=host_bw,
                      memory_bytes=int(ram_gb * 1e9), threads=threads or None, memory_domain="host",
                      description="host CPU")]
    links: list = []
    name = f"CPU only + {ram_gb:g} GB RAM"
    if gpu:
        explicit = {"--gpu-mem-gb": gpu_mem_gb, "--gpu-bw": gpu_bw, "--gpu-tflops": gpu_tflops,
                    "--gpu-int8-tops": gpu_int8_tops, "--pcie": pcie}
        row = find_gpu(gpu) if None in explicit.values() else None
        unified = row is not None and not row["pcie_gen"] and pcie is None
        gen, lanes = (int(row["pcie_gen"]), int(row["pcie_lanes"])) if row and not unified else (0, 0)
        if pcie:
            m = re.fullmatch(r"(?:gen)?([345])x(\d+)", pcie.lower())
            if m is None:
                raise SchedulerError(f"--pcie {pcie!r}: expected GENxLANES, e.g. 4x16")
            gen, lanes = int(m.group(1)), int(m.group(2))
            if lanes < 1:
                raise SchedulerError(f"--pcie {pcie!r}: needs at least one lane")
        label = row["name"] if row else gpu
        fp32 = float(row["fp32_tflops"]) * 1e12 if row and row["fp32_tflops"] else (gpu_tflops or 0) * 1e12
        tensor: dict[str, float] = {}  # empty: no compute rate cited (an error where a prediction needs one)
        fp16 = gpu_tflops or (_fp16_acc_tflops(row) if row and (row["fp32_tflops"] or
                                                                 row["fp16_tensor_tflops_dense"]) else 0)
        if fp16:
            tensor["fp16"] = fp16 * 1e12
            int8 = (gpu_int8_tops if gpu_int8_tops is not None else _int8_tops(row)) * 1e12
            if int8:
                tensor["int8"] = int8
        memory = gpu_mem_gb * 2**30 if gpu_mem_gb else (float(row["memory_gib"]) * 2**30 if row["memory_gib"]
                                                        else ram_gb * 1e9)
        bw = parse_rate(gpu_bw) if gpu_bw else (float(row["mem_bandwidth_gb_s"]) * 1e9 if row["mem_bandwidth_gb_s"]
                                                else host_bw)
        try:
            for g in range(gpus):
                # a GPU without a cited rate: 1 FLOP/s, so that nothing is priced as if its rate were known
                devices.append(Device(f"gpu{g}" if gpus > 1 else "gpu", "gpu",
                                      peak_flops=fp32 or tensor.get("fp16", 1.0),
                                      mem_bandwidth_bytes_per_s=bw, memory_bytes=int(memory),
                                      tensor_flops=tensor, description=label,
                                      memory_domain="host" if unified else None))
                if not unified:
                    links.append(Link("cpu", devices[-1].name, bandwidth_bytes_per_s=pcie_bandwidth(gen, lanes),
                                      description=f"PCIe {gen}.0 x{lanes}"))
        except PlatformError as e:
            raise SchedulerError(f"GPU {label!r}: {e}") from None
        name = f"{f'{gpus}x ' if gpus > 1 else ''}{label} + {ram_gb:g} GB RAM"
    try:
        return Platform(name, tuple(devices), tuple(links), host="cpu", description=name)
    except PlatformError as e:
        raise SchedulerError(str(e)) from None


def machine_from_flags(gpu: str | None, *, ram_gb: float | None, ram_bw: str | float | None, threads: int | None,
                       gpu_mem_gb: float | None = None, gpu_bw: str | float | None = None,
                       gpu_tflops: float | None = None, gpu_int8_tops: float | None = None,
                       pcie: str | None = None, gpus: int = 1, backend: str | None = None) -> Machine:
    """The :class:`Machine` of :func:`platform_from_flags`'s platform (``backend``: llama.cpp's,
    default the GPU vendor's own).

    Raises
    ------
    SchedulerError
        a figure missing, naming the flag that gives it.
    """
    platform = platform_from_flags(gpu, ram_gb=ram_gb, ram_bw=ram_bw, threads=threads, gpu_mem_gb=gpu_mem_gb,
                                   gpu_bw=gpu_bw, gpu_tflops=gpu_tflops, gpu_int8_tops=gpu_int8_tops, pcie=pcie,
                                   gpus=gpus)
    return machine_from_platform(platform, backend=backend)


def machine_from_platform(platform, backend: str | None = None) -> Machine:
    """A :class:`Machine` from a hetsim :class:`~sim.platform.Platform`: the CPU device's
    memory, bandwidth and ``threads``, the GPU's memory and bandwidth, the link between
    them (none where both are one memory domain: unified memory); the GPU's tensor rates
    (FP16 with FP16 accumulation, INT8: what llama.cpp's kernels use) from its
    ``tensor_flops``, else from the cited GPU its description (or the platform's) names;
    as many GPUs as the platform has of that one (same description, memory and
    bandwidth); its memory type (the cited GPU's ``memory_type``); ``backend``
    (default: the GPU vendor's own, ``cpu`` without a GPU)."""
    platform = Platform.load(platform)
    if not any(d.kind == "gpu" for d in platform.devices):
        cpus = [d for d in platform.devices if d.kind == "cpu"]
        if not cpus or not cpus[0].threads:
            raise SchedulerError(f"platform {platform.name!r}: no CPU device with threads")
        return Machine(platform.name, host_memory=cpus[0].memory_bytes,
                       host_bandwidth=cpus[0].mem_bandwidth_bytes_per_s, threads=int(cpus[0].threads),
                       backend=backend or "cpu")
    host, gpu = llm_devices(platform)
    h, g = platform.device(host), platform.device(gpu)
    unified = h.memory_domain == g.memory_domain
    hops = [] if unified else platform.link_directions(host, gpu)
    if not unified and not hops:
        raise SchedulerError(f"platform {platform.name!r}: no link between {host!r} and {gpu!r}")
    row = _named_gpu(f"{g.description} {platform.description}")
    tensor = dict(g.tensor_flops or {})
    if "fp16" not in tensor and g.tensor_flops is not None and row is not None and not (
            row["fp32_tflops"] or row["fp16_tensor_tflops_dense"]):
        tensor = {"fp16": 0.0}  # a cited GPU without a cited compute rate: not known
    if "fp16" not in tensor:
        if row is None:
            raise SchedulerError(f"platform {platform.name!r}: its GPU declares no tensor_flops and its "
                                 "description names no GPU with cited figures (the INT8 rate is needed); describe "
                                 "the machine with --gpu ... instead")
        tensor = {"fp16": _fp16_acc_tflops(row) * 1e12, "int8": _int8_tops(row) * 1e12}
    vendor = gpu_vendor(row) if row else "nvidia"
    # llama.cpp splits the layers over every GPU like this one
    same = sum(1 for d in platform.devices if d.kind == "gpu" and (d.description, d.memory_bytes,
                                                                    d.mem_bandwidth_bytes_per_s)
               == (g.description, g.memory_bytes, g.mem_bandwidth_bytes_per_s))
    return Machine(platform.name, host_memory=h.memory_bytes, host_bandwidth=h.mem_bandwidth_bytes_per_s,
                   threads=int(h.threads or 0), gpu=g.description if row is not None and g.description else gpu,
                   gpu_count=same, gpu_memory=g.memory_bytes,
                   gpu_bandwidth=g.mem_bandwidth_bytes_per_s, gpu_flops=tensor["fp16"],
                   gpu_int8_ops=tensor.get("int8", 0.0),
                   pcie_bandwidth=min(link.bandwidth_bytes_per_s for _, link in hops) if hops else 0.0,
                   backend=backend or VENDOR_BACKENDS.get(vendor, "cuda"), unified_memory=unified,
                   gpu_memory_type=(row.get("memory_type") or "") if row else "")
