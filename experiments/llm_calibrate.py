"""``hetsim llm calibrate``: measure this machine and write it as a platform file.

What llama.cpp's speed depends on, measured here:

* host memory bandwidth: a multi-threaded STREAM triad (``a = b + s * c`` over arrays far
  larger than the caches, numba ``prange`` on every core; bytes counted as STREAM does,
  three arrays per pass), the best of several passes;
* CPU threads (``os.cpu_count``), host memory (``SC_PHYS_PAGES``), and the CPU's FP32
  matrix-product rate (a numpy ``float32`` GEMM) as its peak;
* where torch sees a CUDA GPU: its name and memory, its memory bandwidth (a device-to-
  device copy timed with CUDA events, read plus write bytes), its FP16 matrix-product
  rate, and the host-to-GPU link (a pinned host-to-device copy).

The platform file has a ``cpu`` and, with a GPU, a ``gpu`` device and their link (and
``gpu1``, ``gpu2``... for the other GPUs of the same name and memory, copies of the
measured one), and a ``[calibration]`` table (machine, date, format, hetsim version); ``--platform this`` reads
it from :data:`THIS_PLATFORM`.
"""

from __future__ import annotations

import datetime as dt
import numbers
import os
import platform as pyplatform
import time
from pathlib import Path
from typing import Any

__all__ = ["MAX_STREAM_MIB", "THIS_PLATFORM", "calibrate", "host_bandwidth", "platform_toml", "this_platform"]

#: where ``hetsim llm calibrate`` writes this machine and ``--platform this`` reads it
THIS_PLATFORM = Path("out") / "this-machine.toml"
FORMAT = "hetsim-llm-calibrate-1"


#: largest STREAM array, in MiB (three are allocated)
MAX_STREAM_MIB = 16384


def host_bandwidth(mib: int = 512, passes: int = 5) -> float:
    """Bytes/s of a multi-threaded STREAM triad over three arrays of ``mib`` MiB each
    (an int in [1, :data:`MAX_STREAM_MIB`]: no array, no bandwidth)."""
    if isinstance(mib, bool) or not isinstance(mib, numbers.Integral) or not 1 <= mib <= MAX_STREAM_MIB:
        raise ValueError(f"mib must be an int in [1, {MAX_STREAM_MIB}], got {mib!r:.40}")
    import numba
    import numpy as np

    @numba.njit(parallel=True, cache=False)
    def triad(a, b, c, s):  # noqa: ANN001, ANN202 - jitted  # pragma: no cover - jitted
        for i in numba.prange(a.size):
            a[i] = b[i] + s * c[i]

    n = mib * 2**20 // 8
    a, b, c = np.zeros(n), np.ones(n), np.full(n, 2.0)
    triad(a, b, c, 3.0)  # compile and touch the pages
    best = float("inf")
    for _ in range(passes):
        t0 = time.perf_counter()
        triad(a, b, c, 3.0)
        best = min(best, time.perf_counter() - t0)
    return 3 * a.nbytes / best


def _cpu_flops(size: int = 1024, repeats: int = 3) -> float:
    import numpy as np

    x = np.ones((size, size), dtype=np.float32)
    x @ x
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        x @ x
        best = min(best, time.perf_counter() - t0)
    return 2 * size**3 / best


def _gpu(cuda: Any, torch: Any, mib: int) -> dict[str, Any]:
    """Name, memory, bandwidth, FP16 rate and pinned host-to-device bandwidth of GPU 0, and
    how many GPUs are like it (``count``)."""
    props = cuda.get_device_properties(0)
    n = mib * 2**20

    def timed(fn: Any, repeats: int = 5) -> float:
        fn()
        best = float("inf")
        for _ in range(repeats):
            start, end = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            cuda.synchronize()
            best = min(best, start.elapsed_time(end) / 1e3)
        return best

    src = torch.empty(n, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    bw = 2 * n / timed(lambda: dst.copy_(src))
    host = torch.empty(n, dtype=torch.uint8, pin_memory=True)
    link = n / timed(lambda: dst.copy_(host, non_blocking=True))
    k = 4096
    m = torch.ones((k, k), dtype=torch.float16, device="cuda")
    flops = 2 * k**3 / timed(lambda: m @ m)
    name = cuda.get_device_name(0)
    # llama.cpp splits the layers over every GPU; those like GPU 0 are written as copies of it
    count = sum(1 for i in range(cuda.device_count()) if cuda.get_device_name(i) == name
                and int(cuda.get_device_properties(i).total_memory) == int(props.total_memory))
    return {"name": name, "memory": int(props.total_memory), "bandwidth": bw, "flops": flops, "link": link,
            "count": max(count, 1)}


def calibrate(*, mib: int = 512, gpu_mib: int = 1024, torch_module: Any = None) -> dict[str, Any]:
    """Measure this machine (see the module docstring); ``torch_module`` replaces torch (tests)."""
    threads = os.cpu_count() or 1
    out: dict[str, Any] = {
        "machine": pyplatform.node() or "this machine", "processor": pyplatform.processor() or pyplatform.machine(),
        "threads": threads, "host_memory": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"),
        "host_bandwidth": host_bandwidth(mib), "cpu_flops": _cpu_flops(), "gpu": None,
    }
    torch = torch_module
    if torch is None:
        try:
            import torch
        except ImportError:  # pragma: no cover - torch is a dependency
            torch = None
    if torch is not None and torch.cuda.is_available():
        out["gpu"] = _gpu(torch.cuda, torch, gpu_mib)
    return out


def platform_toml(m: dict[str, Any]) -> str:
    """The platform file of a :func:`calibrate` result."""
    gpu = m["gpu"]
    desc = f"{m['processor']} ({m['threads']} threads)" + (f" + {gpu['name']}" if gpu else "")
    lines = ['name = "this"', f'description = "{desc} (measured by hetsim llm calibrate)"', 'host = "cpu"', "",
             "[[devices]]", 'name = "cpu"', 'kind = "cpu"', "# numpy float32 GEMM, measured",
             f"peak_flops = {float(m['cpu_flops'])!r}", "# STREAM triad, all threads, measured",
             f"mem_bandwidth_bytes_per_s = {float(m['host_bandwidth'])!r}", f"memory_bytes = {m['host_memory']}",
             f"threads = {m['threads']}"]
    for k in range(gpu.get("count", 1) if gpu else 0):
        name = "gpu" if k == 0 else f"gpu{k}"
        measured = "measured" if k == 0 else "measured on gpu"
        lines += ["", "[[devices]]", f'name = "{name}"', 'kind = "gpu"', f'description = "{gpu["name"]}"',
                  f"# torch float16 GEMM, {measured}", f"peak_flops = {float(gpu['flops'])!r}",
                  f"# device-to-device copy, read + write bytes, {measured}",
                  f"mem_bandwidth_bytes_per_s = {float(gpu['bandwidth'])!r}", f"memory_bytes = {gpu['memory']}",
                  "", "[[links]]", 'src = "cpu"', f'dst = "{name}"', f"# pinned host-to-device copy, {measured}",
                  f"bandwidth_bytes_per_s = {float(gpu['link'])!r}"]
    from importlib.metadata import PackageNotFoundError, version

    try:
        hv = version("hetsim")
    except PackageNotFoundError:  # pragma: no cover - a checkout without installation
        hv = "checkout"
    lines += ["", "[calibration]", f'machine = "{m["machine"]}"', f'date = "{dt.date.today().isoformat()}"',
              f'format = "{FORMAT}"', f'hetsim_version = "{hv}"', ""]
    return "\n".join(lines)


def this_platform(path: str | Path = THIS_PLATFORM) -> Path:
    """The platform file ``--platform this`` names; :class:`SchedulerError` when not calibrated."""
    # lazy: at the top it would load networkx, numpy, simpy with this module
    from hetsim.schedulers import SchedulerError

    p = Path(path)
    if not p.is_file():
        raise SchedulerError(f"--platform this: {p} does not exist; run hetsim llm calibrate first")
    return p
