"""Copy times between the host and a CUDA device (the profiler's ``links.csv``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from hetsim.runtime.backends import DeviceSpec
from hetsim.runtime.backends.base import check_available

__all__ = ["measure_links"]

_GIB = 1 << 30


def measure_links(
    host: str, device: DeviceSpec, *, max_bytes: int = _GIB, repeats: int = 5
) -> tuple[list[dict[str, Any]], bool]:
    """Copy times between the host and a CUDA device, and whether they overlap.

    Returns ``links.csv`` rows (h2d and d2h, pinned and pageable, 1 KiB to
    ``max_bytes`` in powers of 4; plus the concurrent pair) and the duplex verdict:
    True when a concurrent h2d + d2h on two streams takes less than 75% of the two
    copies one after the other.
    """
    import torch

    # lazy: at the top it would load torch with this module
    from hetsim.runtime.backends.torch_backend import CudaTimer

    check_available(device)
    timer = CudaTimer(device)
    dev = torch.device(device.torch_device)
    sizes = [1024 * 4**i for i in range(16) if 1024 * 4**i <= max_bytes]
    rows: list[dict[str, Any]] = []

    def row(direction: str, pinned: bool, nbytes: int, times: list[float], concurrent: int) -> dict[str, Any]:
        src, dst = (host, device.name) if direction == "h2d" else (device.name, host)
        return {"src": src, "dst": dst, "direction": direction, "pinned": int(pinned), "bytes": nbytes,
                "time_s": float(np.median(times)), "concurrent": concurrent,
                "p10_s": float(np.percentile(times, 10)), "p90_s": float(np.percentile(times, 90)),
                "repeats": len(times)}

    def copies(h: Any, d: Any, pinned: bool) -> tuple[Callable[[], Any], Callable[[], Any]]:
        return (lambda: d.copy_(h, non_blocking=pinned)), (lambda: h.copy_(d, non_blocking=pinned))

    with torch.cuda.device(device.index):
        for pinned in (True, False):
            for nbytes in sizes:
                host_buf = torch.empty(nbytes, dtype=torch.uint8, pin_memory=pinned)
                dev_buf = torch.empty(nbytes, dtype=torch.uint8, device=dev)
                for direction, fn in zip(("h2d", "d2h"), copies(host_buf, dev_buf, pinned)):
                    fn()
                    torch.cuda.synchronize()
                    times, _ = timer.samples(fn, repeats, 1e-5)
                    rows.append(row(direction, pinned, nbytes, times, 0))
                del host_buf, dev_buf
        nbytes = min(sizes[-1], 256 << 20)  # duplex: both directions at once, two streams
        alone = sum(r["time_s"] for r in rows if r["pinned"] and r["bytes"] == nbytes)
        h1, h2 = (torch.empty(nbytes, dtype=torch.uint8, pin_memory=True) for _ in range(2))
        d1, d2 = (torch.empty(nbytes, dtype=torch.uint8, device=dev) for _ in range(2))
        streams = {"h2d": (torch.cuda.Stream(), copies(h1, d1, True)[0]),
                   "d2h": (torch.cuda.Stream(), copies(h2, d2, True)[1])}
        walls, per = [], {"h2d": [], "d2h": []}
        for _ in range(repeats):
            ev = {k: (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for k in per}
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for k, (stream, fn) in streams.items():
                with torch.cuda.stream(stream):
                    ev[k][0].record()
                    fn()
                    ev[k][1].record()
            torch.cuda.synchronize()
            walls.append(time.perf_counter() - t0)
            for k, (e0, e1) in ev.items():
                per[k].append(e0.elapsed_time(e1) * 1e-3)
        rows += [row(k, True, nbytes, times, 1) for k, times in per.items()]
        duplex = float(np.median(walls)) < 0.75 * alone
    return rows, bool(duplex)
