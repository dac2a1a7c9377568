"""``hetsim replay``: replay a PyTorch profiler trace's step and its what-ifs.

Examples
--------
``hetsim replay tests/data/traces/event-sync-a100.json.gz``
``hetsim replay TRACE --host-scale 0.5 --gpu h100-server --chrome-trace out/replay.json``
"""

from __future__ import annotations

import argparse

from hetsim.experiments.cli.common import non_negative_float, output_file, positive_float


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register the ``replay`` subcommand on ``sub``."""
    p = sub.add_parser(
        "replay",
        help="replay a PyTorch profiler trace's step (its streams, host order and measured times) and what-ifs",
        description="Read a Kineto trace (torch.profiler's Chrome trace, .json or .json.gz, NVIDIA or AMD), replay "
        "its step as recorded and print the simulated step time against the measured one, per stream and per "
        "host thread, and the step's device-bound and host-bound parts; then what-ifs: CUDA graphs (one launch "
        "per segment between host synchronisations), a faster or slower host, another GPU (kernel times scaled "
        "by the two GPUs' compute peaks or memory bandwidths by kernel class).",
    )
    p.add_argument("trace", metavar="TRACE", help="Kineto trace file (.json or .json.gz)")
    p.add_argument("--step", metavar="NAME",
                   help="ProfilerStep#N or a record_function name, 'all' for the whole trace "
                   "(default: the last ProfilerStep, else the whole trace)")
    p.add_argument("--execution-trace", metavar="ET.json",
                   help="PyTorch execution trace of the profiled run (its tensors add data dependencies)")
    p.add_argument("--graph-launch-us", type=non_negative_float, default=10.0,
                   help="host time of one CUDA-graph launch in the CUDA-graph what-if (default 10 us)")
    p.add_argument("--no-cuda-graphs", action="store_true", help="leave out the CUDA-graph what-if")
    p.add_argument("--host-scale", type=positive_float, action="append", default=[], metavar="F",
                   help="what-if: every host time times F (0.5: a host twice as fast); repeatable")
    p.add_argument("--gpu", action="append", default=[], metavar="PLATFORM",
                   help="what-if: the kernels on that platform's GPU (a preset or TOML file); repeatable")
    p.add_argument("--traced-platform", metavar="PLATFORM",
                   help="the platform whose GPU ran the trace (default: the preset of the GPU the trace names)")
    p.add_argument("--chrome-trace", type=output_file, metavar="OUT.json",
                   help="write the replay beside the traced step as Chrome trace JSON (opens in Perfetto)")
    return p


def run(args: argparse.Namespace) -> int:
    """Replay and print the report; exit status 0."""
    # lazy: a command's module loads only what its parser needs (hetsim --help)
    from hetsim.experiments.trace_report import replay_report
    from hetsim.graphs.trace import from_trace
    from hetsim.sim.replay.whatif import what_ifs

    graph = from_trace(args.trace, step=args.step, execution_trace=args.execution_trace)
    gl = args.graph_launch_us * 1e-6
    w = what_ifs(graph, cuda_graphs=not args.no_cuda_graphs, graph_launch_s=gl, host_scales=args.host_scale,
                 gpus=args.gpu, traced_platform=args.traced_platform)
    print(replay_report(w, graph_launch_s=gl))
    if args.chrome_trace:
        path = w.traced.to_chrome_trace(args.chrome_trace, graph)
        print(f"wrote {path} (traced and simulated tracks; open in https://ui.perfetto.dev)")
    return 0
