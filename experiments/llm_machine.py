"""A machine for llama.cpp predictions: from a GPU's name and host figures, a platform, or this one.

:func:`gpu_table` is ``experiments/llm_published/gpus.csv`` without the rows whose
figures were not read in a cited source (their ``notes`` start ``NOT read``, or say the
bandwidth was not read); :func:`machine_from_flags` builds a
:class:`~costmodel.llamacpp.Machine` from ``--gpu "RTX 4090" --ram-gb 64 --ram-bw 90GB/s``;
:func:`machine_from_platform` from a hetsim platform (a preset, a TOML file, or the one
``hetsim llm calibrate`` wrote).
"""

from __future__ import annotations

import csv
import re
from functools import lru_cache
from pathlib import Path

from hetsim.costmodel.llamacpp.machine import Machine, pcie_bandwidth
from hetsim.schedulers import SchedulerError

__all__ = ["GPU_TABLE", "find_gpu", "gpu_table", "machine_from_flags", "machine_from_platform", "parse_rate"]

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
    without tensor cores (Pascal) the ``dp4a`` rate, four multiply-adds per FP32 lane and
    clock (4 x the FP32 rate); 0 for a GPU with FP16 but no INT8 tensor cores (Volta),
    where llama.cpp dequantises and multiplies in FP16."""
    if row["int8_tensor_tops_dense"]:
        return float(row["int8_tensor_tops_dense"])
    return 0.0 if row["fp16_tensor_tflops_dense"] else 4 * float(row["fp32_tflops"])


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


def machine_from_flags(gpu: str | None, *, ram_gb: float | None, ram_bw: str | float | None, threads: int | None,
                       gpu_mem_gb: float | None = None, gpu_bw: str | float | None = None,
                       gpu_tflops: float | None = None, gpu_int8_tops: float | None = None,
                       pcie: str | None = None, gpus: int = 1) -> Machine:
    """A :class:`Machine` from a GPU name (its cited figures; explicit ones override them),
    the count of such GPUs and host figures; a GPU not in the table needs every GPU figure.

    Raises
    ------
    SchedulerError
        a figure missing, naming the flag that gives it.
    """
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1 or (gpus > 1 and not gpu):
        raise SchedulerError(f"--gpus must be an int >= 1 with --gpu, got {gpus!r}")
    missing = [f for f, v in (("--ram-gb", ram_gb), ("--ram-bw", ram_bw), ("--threads", threads)) if v is None]
    if missing:
        raise SchedulerError(f"the machine needs {', '.join(missing)}")
    kw: dict = {}
    if gpu:
        explicit = {"--gpu-mem-gb": gpu_mem_gb, "--gpu-bw": gpu_bw, "--gpu-tflops": gpu_tflops,
                    "--gpu-int8-tops": gpu_int8_tops, "--pcie": pcie}
        row = find_gpu(gpu) if None in explicit.values() else None
        if row is None and None in explicit.values():
            raise SchedulerError(f"GPU {gpu!r} needs {', '.join(k for k, v in explicit.items() if v is None)}")
        if row:
            # an integrated GPU or Apple's shares the host memory (no PCIe figure) and some cited
            # rows have no rate read: the flag for each figure the table lacks
            needs = (("--pcie", "pcie_gen"), ("--gpu-mem-gb", "memory_gib"), ("--gpu-bw", "mem_bandwidth_gb_s"),
                     ("--gpu-tflops", "fp32_tflops"), ("--gpu-int8-tops", "fp32_tflops"))
            lacking = [flag for flag, column in needs if not row[column] and explicit[flag] is None]
            if lacking:
                raise SchedulerError(f"gpus.csv has no figure of GPU {row['name']!r} for {', '.join(lacking)} (a GPU "
                                     f"that shares the host's memory has no PCIe link); give {', '.join(lacking)}")
        gen, lanes = (int(row["pcie_gen"]), int(row["pcie_lanes"])) if row and row["pcie_gen"] else (0, 0)
        if pcie:
            m = re.fullmatch(r"(?:gen)?([345])x(\d+)", pcie.lower())
            if m is None:
                raise SchedulerError(f"--pcie {pcie!r}: expected GENxLANES, e.g. 4x16")
            gen, lanes = int(m.group(1)), int(m.group(2))
        kw = dict(
            gpu=row["name"] if row else gpu,
            gpu_memory=(gpu_mem_gb or float(row["memory_gib"])) * 2**30,
            gpu_bandwidth=parse_rate(gpu_bw) if gpu_bw else float(row["mem_bandwidth_gb_s"]) * 1e9,
            gpu_flops=(gpu_tflops or _fp16_acc_tflops(row)) * 1e12,
            gpu_int8_ops=(gpu_int8_tops or _int8_tops(row)) * 1e12,
            pcie_bandwidth=pcie_bandwidth(gen, lanes),
            gpu_count=gpus,
        )
    name = f"{f'{gpus}x ' if gpus > 1 else ''}{kw.get('gpu', 'CPU only')} + {ram_gb:g} GB RAM"
    return Machine(name, host_memory=ram_gb * 1e9, host_bandwidth=parse_rate(ram_bw), threads=int(threads), **kw)


def machine_from_platform(platform) -> Machine:
    """A :class:`Machine` from a hetsim :class:`~sim.platform.Platform` with a CPU and a GPU:
    the CPU device's memory, bandwidth and ``threads``, the GPU's memory and bandwidth,
    the link between them; the GPU's tensor rates (FP16 with FP16 accumulation, INT8:
    what llama.cpp's kernels use, not the platform's single peak) from the cited GPU its
    description (or the platform's) names; as many GPUs as the platform has of that one
    (same description, memory and bandwidth)."""
    from hetsim.schedulers.llm.residency import llm_devices
    from hetsim.sim.platform import Platform

    platform = Platform.load(platform)
    if not any(d.kind == "gpu" for d in platform.devices):
        cpus = [d for d in platform.devices if d.kind == "cpu"]
        if not cpus or not cpus[0].threads:
            raise SchedulerError(f"platform {platform.name!r}: no CPU device with threads")
        return Machine(platform.name, host_memory=cpus[0].memory_bytes,
                       host_bandwidth=cpus[0].mem_bandwidth_bytes_per_s, threads=int(cpus[0].threads))
    host, gpu = llm_devices(platform)
    h, g = platform.device(host), platform.device(gpu)
    hops = platform.link_directions(host, gpu)
    if not hops:
        raise SchedulerError(f"platform {platform.name!r}: no link between {host!r} and {gpu!r}")
    if not h.threads:
        raise SchedulerError(f"platform {platform.name!r}: CPU {host!r} declares no threads (give threads = N)")
    row = _named_gpu(f"{g.description} {platform.description}")
    if row is None:
        raise SchedulerError(f"platform {platform.name!r}: its GPU description names no GPU with cited figures "
                             "(the INT8 rate is needed); describe the machine with --gpu ... instead")
    # llama.cpp splits the layers over every GPU like this one
    same = sum(1 for d in platform.devices if d.kind == "gpu" and (d.description, d.memory_bytes,
                                                                    d.mem_bandwidth_bytes_per_s)
               == (g.description, g.memory_bytes, g.mem_bandwidth_bytes_per_s))
    return Machine(platform.name, host_memory=h.memory_bytes, host_bandwidth=h.mem_bandwidth_bytes_per_s,
                   threads=int(h.threads), gpu=gpu, gpu_count=same, gpu_memory=g.memory_bytes,
                   gpu_bandwidth=g.mem_bandwidth_bytes_per_s, gpu_flops=_fp16_acc_tflops(row) * 1e12,
                   gpu_int8_ops=_int8_tops(row) * 1e12, pcie_bandwidth=min(link.bandwidth_bytes_per_s for _, link in hops))
