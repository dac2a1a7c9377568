"""The report of a traced step's replay and its what-ifs (``hetsim replay``)."""

from __future__ import annotations

from hetsim.graphs.graph import Graph
from hetsim.sim.replay.whatif import WhatIfs

__all__ = ["host_by_op", "replay_report", "trace_line"]

_MS = 1e3


def trace_line(graph: Graph) -> str:
    """One line: the trace, its device, step, measured time, streams and host threads."""
    m = graph.meta
    gpu = sum(1 for _, d in graph.nodes(data=True) if d["op"] != "sync")
    return (f"trace {m.get('trace')}: {m.get('device') or 'GPU not named'} ({m.get('runtime')}), step {m.get('step')!r} "
            f"{m.get('step_time_s', 0) * _MS:.3f} ms measured, {gpu} GPU nodes on {len(m.get('streams', []))} "
            f"stream(s), {len(graph) - gpu} host sync(s), {len(m.get('host_threads', []))} host thread(s)")


def host_by_op(graph: Graph, top: int = 5) -> str:
    """The ``top`` PyTorch ops by measured host time (their launches' calls and the
    host work before each), with their launch counts."""
    by: dict[str, list[float]] = {}
    for _, d in graph.nodes(data=True):
        a = d["attrs"]
        if d["op"] != "sync" and a.get("call_s", 0) > 0:
            row = by.setdefault(a.get("cpu_op", "(no op)"), [0.0, 0])
            row[0] += a["host_s"] + a["call_s"]
            row[1] += 1
    ranked = sorted(by.items(), key=lambda kv: -kv[1][0])[:top]
    return ", ".join(f"{name} {t * _MS:.3f} ms ({int(n)})" for name, (t, n) in ranked) or "none"


def replay_report(w: WhatIfs, *, graph_launch_s: float | None = None) -> str:
    """The replay checked against the trace (step, each stream, each host thread),
    the host-bound and device-bound parts, then the what-ifs."""
    g, r = w.graph, w.traced
    lines = [trace_line(g), ""]
    lines.append(f"{'':22} {'measured ms':>12} {'simulated ms':>13} {'error':>8}")
    lines.append(f"{'step':22} {r.measured * _MS:12.3f} {r.makespan * _MS:13.3f} {r.error * 100:+7.2f}%")
    for s in r.stream_busy:
        lines.append(f"{f'stream {s} busy':22} {r.measured_stream_busy[s] * _MS:12.3f} {r.stream_busy[s] * _MS:13.3f}")
        me, se = r.measured_stream_end[s], r.stream_end[s]
        err = f"{(se - me) / me * 100:+7.2f}%" if me else ""
        lines.append(f"{f'stream {s} last end':22} {me * _MS:12.3f} {se * _MS:13.3f} {err:>8}")
    for th in r.host_busy:
        lines.append(f"{f'host {th} busy':22} {r.measured_host_busy.get(th, 0.0) * _MS:12.3f} "
                     f"{r.host_busy[th] * _MS:13.3f}")
    lines.append("host time by op (measured, the launch calls and the work before each): " + host_by_op(g))
    m = g.meta
    busy = m.get("stream_busy_s") or {}
    lines.append(f"launch latency {m.get('launch_latency_s', 0) * 1e6:.1f} us, gap between queued kernels "
                 f"{m.get('queue_gap_s', 0) * 1e6:.1f} us (the trace's medians)"
                 + ("; streams busy with earlier work at the start: "
                    + ", ".join(f"{k} until {v * _MS:.3f} ms" for k, v in busy.items()) if busy else ""))
    lines.append("")
    hb = w.host_bound_s
    lines.append(f"device-bound part {w.device_bound.makespan * _MS:.3f} ms (launches free), host-bound part "
                 f"{hb * _MS:.3f} ms (the step waiting for launches)")
    if w.cases:
        lines.append("")
        lines.append(f"{'what-if':28} {'step ms':>10} {'vs traced':>10} {'launches':>9}")
        for label, c in w.cases.items():
            ratio = c.makespan / r.measured if r.measured else float("nan")
            lines.append(f"{label:28} {c.makespan * _MS:10.3f} {ratio:9.2f}x {c.launches:9d}")
    cg = w.cases.get("cuda graphs")
    if cg is not None and graph_launch_s is not None:
        excess = hb - cg.launches * graph_launch_s
        bound = r.measured - excess
        ok = "yes" if cg.makespan <= bound + 1e-9 else "no"
        lines.append("")
        lines.append(f"check: cuda graphs {cg.makespan * _MS:.3f} ms <= traced {r.measured * _MS:.3f} ms - host-launch "
                     f"excess {excess * _MS:.3f} ms (host-bound part - {cg.launches} launch(es) x "
                     f"{graph_launch_s * 1e6:g} us) = {bound * _MS:.3f} ms: {ok}")
    return "\n".join(lines)
