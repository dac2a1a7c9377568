"""``hetsim llm plan`` and ``hetsim llm calibrate``: LLMs on this machine or one you describe.

Examples::

    hetsim llm plan model.gguf --platform this
    hetsim llm plan Qwen3-30B-A3B/ --gpu "RTX 4090" --ram-gb 64 --ram-bw 90GB/s --threads 16 --weights Q4_K_M
    hetsim llm plan llama-3-70b --gpu "RTX 4090" --ram-gb 128 --ram-bw 75 --threads 16 --ngl 40
    hetsim llm calibrate
    hetsim llm plan llama3-70b --platform desktop-rtx4090 --objective ttft     # simulated policies
    hetsim llm plan model.gguf --platform desktop-rtx4090 --policy weight-streaming --policy ngl

A GGUF file, a ``config.json``, a model folder or a model preset
(``graphs/llm/configs``) is planned as llama.cpp runs it: the fastest ``-ngl`` /
``--n-cpu-moe`` that fits (or the placement given), its memory per device and
llama-bench's pp / tg table. A simulator preset (``llama3-8b``, ``tiny``...), or any model
with ``--policy NAME``, is planned with the simulated placement policies. The plan JSON goes to ``--out`` (default
``out/llm-plan.json``).
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from hetsim.costmodel.base import CostModelError
from hetsim.experiments.cli.common import int_at_least
from hetsim.experiments.cli.main import CLIError
from hetsim.experiments.llm_calibrate import (
    MAX_STREAM_MIB,
    THIS_PLATFORM,
    calibrate,
    platform_toml,
    this_platform,
)
from hetsim.graphs.files import atomic_write
from hetsim.graphs.graph import GraphError

DEFAULT_OUT = Path("out") / "llm-plan.json"


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register the ``llm`` subcommand on ``sub``."""
    p = sub.add_parser(
        "llm",
        help="LLMs larger than the GPU: predict the best CPU-GPU placement and its tokens/s",
        description="Placement of decoder-only LLMs over GPU and host memory: llama.cpp's flags and speed.",
    )
    llm_sub = p.add_subparsers(dest="llm_command", metavar="ACTION")
    q = llm_sub.add_parser(
        "plan",
        help="suggest (or evaluate) a placement, print its speed and write the plan JSON",
        description="Plan a model (GGUF file, config.json, model folder or preset) on a machine (--platform, "
        "or --gpu and host figures) as llama.cpp runs it; a simulator preset, or any model with --policy, is "
        "planned with the simulated placement policies.",
    )
    q.add_argument("model", metavar="MODEL", help="model.gguf, config.json, a model folder or a preset")
    q.add_argument("--platform", metavar="this|NAME|FILE",
                   help="'this' (written by hetsim llm calibrate), a platform preset or a TOML file")
    m = q.add_argument_group("a machine you describe (instead of --platform)")
    m.add_argument("--gpu", metavar="NAME", help='a GPU of the cited table (e.g. "RTX 4090"); omit for CPU only')
    m.add_argument("--gpus", type=int, default=1, metavar="N",
                   help="N such GPUs (llama.cpp splits the layers between them; default 1)")
    m.add_argument("--ram-gb", type=float, metavar="GB", help="host memory, GB")
    m.add_argument("--ram-bw", metavar="RATE", help="host memory bandwidth (peak), e.g. 90GB/s")
    m.add_argument("--threads", type=int, metavar="N", help="CPU threads llama.cpp uses")
    m.add_argument("--gpu-mem-gb", type=float, metavar="GIB", help="GPU memory (GiB), overrides the table")
    m.add_argument("--gpu-bw", metavar="RATE", help="GPU memory bandwidth, e.g. 1008GB/s")
    m.add_argument("--gpu-tflops", type=float, metavar="T", help="dense FP16 tensor TFLOPS (FP16 accumulate)")
    m.add_argument("--gpu-int8-tops", type=float, metavar="T", help="dense INT8 tensor TOPS")
    m.add_argument("--pcie", metavar="GENxLANES", help="PCIe link, e.g. 4x16")
    r = q.add_argument_group("llama.cpp flags")
    r.add_argument("--ngl", "-ngl", type=int, metavar="N", help="layers on the GPU (evaluate this placement)")
    r.add_argument("--n-cpu-moe", "-ncmoe", type=int, metavar="N",
                   help="keep the experts of the first N layers in host memory")
    r.add_argument("--override-tensor", "-ot", action="append", default=[], metavar="REGEX=CPU",
                   help="tensors matching REGEX stay in host memory (repeatable)")
    r.add_argument("--ubatch", "-ub", type=int, default=512, metavar="N", help="micro-batch (default 512)")
    r.add_argument("--n-batch", "-b", type=int, default=2048, metavar="N", help="logical batch (default 2048)")
    r.add_argument("--flash-attn", "-fa", action="store_true", help="flash attention")
    r.add_argument("--no-kv-offload", "-nkvo", action="store_true", help="KV cache in host memory")
    r.add_argument("--force-cublas", action="store_true",
                   help="the build dequantises weights for cuBLAS in prompt processing (GGML_CUDA_FORCE_CUBLAS, "
                        "or a build before June 2024) instead of llama.cpp's MMQ kernels")
    r.add_argument("--no-cuda-graphs", action="store_true",
                   help="the build launches each kernel of a generated token (GGML_CUDA_DISABLE_GRAPHS=1, or "
                        "a GPU before Ampere)")
    r.add_argument("--cache-type-k", "-ctk", default="F16", metavar="TYPE", help="K cache type (default F16)")
    r.add_argument("--cache-type-v", "-ctv", default="F16", metavar="TYPE", help="V cache type (default F16)")
    r.add_argument("--gen", "-n", type=int, default=128, metavar="N",
                   help="generated tokens of the tg test (default 128)")
    r.add_argument("--depth", "-d", type=int, default=0, metavar="N",
                   help="tokens already in the KV cache before the prompt (llama-bench -d; default 0)")
    r.add_argument("--harness", choices=["llama-bench", "llama-server", "llama-cli"], default="llama-bench",
                   help="what times the run: llama-bench, or a front end whose timings include its own work")
    m.add_argument("--backend", choices=["cuda", "vulkan", "rocm", "sycl", "metal", "cpu"],
                   help="llama.cpp backend (default: the GPU vendor's own: CUDA, ROCm, SYCL or Metal)")
    q.add_argument("--context", type=int, metavar="N", help="KV-cache tokens (default: model maximum, at most 8192)")
    q.add_argument("--batch", type=int, default=1, metavar="B", help="simulated policies: sequences decoded together")
    q.add_argument("--prompt", "-p", type=int, metavar="P",
                   help="prompt tokens of the pp test (default 512, at most the context)")
    q.add_argument("--weights", metavar="TYPE",
                   help="llama.cpp weight type (Q4_K_M, Q8_0, F16, ...; default Q4_K_M, MXFP4_MOE for gpt-oss; a GGUF "
                        "file has its own)")
    q.add_argument("--kv-dtype", default="f16", metavar="DTYPE", help="simulated policies: KV-cache dtype")
    q.add_argument("--objective", choices=["decode", "ttft"], default="decode",
                   help="simulated policies: what the search optimises (default decode tokens/s)")
    q.add_argument("--policy", action="append", metavar="NAME", help="simulate this placement policy (repeatable; default for a simulator preset: all): ngl, "
                   "expert-offload, weight-streaming, llm-search")
    q.add_argument("--cost", default="roofline", metavar="SPEC", help="simulated policies: cost model")
    q.add_argument("--reserve-gib", type=float, default=1.0, metavar="GIB",
                   help="GPU memory left free (default 1, as llama.cpp --fit)")
    q.add_argument("--out", type=Path, default=DEFAULT_OUT, metavar="FILE", help=f"plan JSON (default {DEFAULT_OUT})")
    c = llm_sub.add_parser("calibrate", help="measure this machine and write it as a platform file",
                           description="Measure host memory bandwidth (STREAM triad), threads, memory and, where "
                           "torch sees a CUDA GPU, its memory, bandwidth and link; write the platform file that "
                           "--platform this reads.")

    c.add_argument("--out", type=Path, default=THIS_PLATFORM, metavar="FILE", help=f"default {THIS_PLATFORM}")
    c.add_argument("--mib", type=int_at_least(1, MAX_STREAM_MIB), default=512, metavar="MIB",
                   help=f"MiB per STREAM array, 1 to {MAX_STREAM_MIB} (default 512)")
    return p


def run(args: argparse.Namespace) -> int:
    """Run ``hetsim llm plan`` or ``hetsim llm calibrate``."""
    if args.llm_command == "calibrate":
        return _calibrate(args)
    if args.llm_command != "plan":
        raise CLIError("choose an action: hetsim llm plan MODEL ... | hetsim llm calibrate")
    if not math.isfinite(args.reserve_gib) or args.reserve_gib < 0:
        raise CLIError(f"--reserve-gib must be a number >= 0, got {args.reserve_gib}")
    for flag, value, least in (("--prompt", args.prompt, 1), ("--gen", args.gen, 1), ("--context", args.context, 2),
                               ("--batch", args.batch, 1), ("--ubatch", args.ubatch, 1), ("--n-batch", args.n_batch, 1),
                               ("--depth", args.depth, 0), ("--threads", args.threads, 1), ("--gpus", args.gpus, 1)):
        if value is not None and value < least:
            raise CLIError(f"{flag} must be an int >= {least}, got {value}")
    if args.context is not None and args.prompt is not None and args.prompt > args.context:
        raise CLIError(f"--prompt {args.prompt} is longer than --context {args.context}")
    if args.prompt is None:
        args.prompt = min(512, args.context or 512)
    machine_flags = [f for f, v in (("--gpu", args.gpu), ("--ram-gb", args.ram_gb), ("--ram-bw", args.ram_bw),
                                    ("--threads", args.threads), ("--gpu-mem-gb", args.gpu_mem_gb),
                                    ("--gpu-bw", args.gpu_bw), ("--gpu-tflops", args.gpu_tflops),
                                    ("--gpu-int8-tops", args.gpu_int8_tops), ("--pcie", args.pcie))
                     if v is not None]
    if args.platform is not None and machine_flags:
        verb = "describes" if len(machine_flags) == 1 else "describe"
        raise CLIError(f"{', '.join(machine_flags)} {verb} a machine; --platform {args.platform} is one already "
                       "(give one or the other)")
    _check_model(args.model)
    if args.platform == "this":
        args.platform = str(this_platform())
    given = [flag for flag, value, default in (("--batch", args.batch, 1), ("--kv-dtype", args.kv_dtype, "f16"),
                                               ("--objective", args.objective, "decode"),
                                               ("--cost", args.cost, "roofline")) if value != default]
    if given and args.policy is None:
        raise CLIError(f"{', '.join(given)} applies to the simulated policies: add --policy NAME (repeatable) "
                       f"to simulate them on {args.model!r}")
    if args.policy is not None and args.platform is None:
        raise CLIError(f"the simulated policies need --platform (a preset or TOML file) to plan {args.model!r}")
    if args.platform is None:
        return _plan_llamacpp(args)
    return _plan_both(args)


def _check_model(name: str) -> None:
    """``unknown model NAME; known: ...`` for a name that is no file, folder or preset."""
    # lazy: a command's module loads only what its parser needs (hetsim --help)
    from hetsim.graphs.llm.presets import canonical_preset, preset_names

    if not Path(name).exists() and not name.lower().endswith((".gguf", ".json")) and canonical_preset(name) is None:
        raise CLIError(f"unknown model {name!r}; known: {', '.join(preset_names())} (or a .gguf file, a "
                       "config.json or a model folder)")


def _machine(args: argparse.Namespace):
    # lazy: a command's module loads only what its parser needs (hetsim --help)
    from hetsim.experiments.llm_machine import machine_from_flags, machine_from_platform

    if args.platform is not None:
        if args.gpus != 1:
            raise CLIError("--gpus describes the GPUs of --gpu; a platform lists its own")
        return machine_from_platform(args.platform, backend=args.backend)
    if not any((args.gpu, args.ram_gb, args.ram_bw)):
        raise CLIError("describe the machine: --platform this|NAME|FILE, or --gpu NAME --ram-gb GB --ram-bw RATE "
                       "--threads N")
    return machine_from_flags(args.gpu, ram_gb=args.ram_gb, ram_bw=args.ram_bw, threads=args.threads,
                              gpu_mem_gb=args.gpu_mem_gb, gpu_bw=args.gpu_bw, gpu_tflops=args.gpu_tflops,
                              gpu_int8_tops=args.gpu_int8_tops, pcie=args.pcie, gpus=args.gpus, backend=args.backend)


def _llamacpp_plan(args: argparse.Namespace):
    # lazy: a command's module loads only what its parser needs (hetsim --help)
    from hetsim.costmodel.llamacpp import LlamaCppRun
    from hetsim.experiments.llm_llamacpp_plan import plan_llamacpp
    from hetsim.graphs.llm.model_source import load_model

    model = load_model(args.model, args.weights)
    machine = _machine(args)
    patterns = []
    for ot in args.override_tensor:
        pattern, sep, dev = ot.rpartition("=")
        if not sep or dev.upper() != "CPU":
            raise CLIError(f"-ot {ot!r}: expected REGEX=CPU")
        patterns.append(pattern)
    given = args.ngl is not None or args.n_cpu_moe is not None or bool(patterns)
    run = LlamaCppRun(ngl=99 if args.ngl is None else args.ngl, n_cpu_moe=args.n_cpu_moe or 0,
                      override_cpu=tuple(patterns), ubatch=args.ubatch, batch=args.n_batch,
                      flash_attn=args.flash_attn, type_k=args.cache_type_k.upper(), type_v=args.cache_type_v.upper(),
                      kv_offload=not args.no_kv_offload, threads=args.threads or 0,
                      mmq=not args.force_cublas, cuda_graphs=not args.no_cuda_graphs, depth=args.depth or 0,
                      harness=args.harness)
    return plan_llamacpp(model, machine, context=args.context, run=run, given=given, prompt=args.prompt,
                         generate=args.gen, reserve=int(args.reserve_gib * 2**30))


def _print_llamacpp(plan) -> None:
    model, machine = plan.model, plan.machine
    print(f"engine llama.cpp (achieved rates of its {machine.backend} backend, fitted on published runs): "
          f"{model.arch.name} ({model.weights}, {model.bits_per_weight():.2f} bits per weight, from "
          f"{model.origin}) on {machine.name}: context {plan.context}")
    print(plan.table())
    print(f"{'suggested' if plan.suggested else 'given'}: {plan.evaluation.flags()}  memory: {plan.memory_text()}")
    for note in plan.notes:
        print(f"note: {note}")


def _plan_llamacpp(args: argparse.Namespace) -> int:
    plan = _llamacpp_plan(args)
    _print_llamacpp(plan)
    print(f"wrote {plan.save(args.out)}")
    return 0


def _plan_both(args: argparse.Namespace) -> int:
    """Both engines on a platform: llama.cpp's where it applies, the simulated policies where
    they apply, each row labelled, and the two compared on the placement both price."""
    # lazy: a command's module loads only what its parser needs (hetsim --help)
    from hetsim.experiments.llm_engines import compare_engines
    from hetsim.experiments.llm_plan import plan_llm

    # lazy: a command's module loads only what its parser needs (hetsim --help)
    from hetsim.schedulers import SchedulerError

    errors = (GraphError, SchedulerError, CostModelError)
    plan = report = None
    why_not: dict[str, str] = {}
    try:
        plan = _llamacpp_plan(args)
    except errors as e:
        why_not["llama.cpp"] = str(e).splitlines()[0]
    simulate = args.policy is not None or plan is None
    if simulate:
        try:
            report = plan_llm(
                args.model, args.platform, context=args.context or (plan.context if plan else 8192),
                batch=args.batch, prompt=args.prompt, weights=args.weights, kv_dtype=args.kv_dtype,
                policies=args.policy, objective=args.objective, cost=args.cost,
                reserve_bytes=int(args.reserve_gib * 2**30),
            )
        except errors as e:
            why_not["simulated"] = str(e).splitlines()[0]
    if plan is None and report is None:
        raise CLIError("; ".join(f"engine {k}: {v}" for k, v in why_not.items()))
    if plan is not None:
        _print_llamacpp(plan)
    else:
        print(f"engine llama.cpp: does not apply: {why_not['llama.cpp']}")
    agreement = None
    if report is not None:
        print(f"engine simulated (placement policies, {args.cost} costs): {report.model} ({report.weights}, KV "
              f"{report.kv_dtype}) on {report.platform}: context {report.context}, batch {report.batch}, "
              f"prompt {report.prompt}")
        print(report.table())
        best = report.best
        print(f"best ({report.objective}): {best.policy}: {best.decode_tok_s:,.2f} decode tok/s, "
              f"TTFT {best.ttft_s:.3f} s; llama.cpp: {best.llama_cpp or best.llama_cpp_note}")
        if plan is not None:
            agreement = compare_engines(plan, report, args.platform)
            print(agreement.text())
    elif "simulated" in why_not:
        print(f"engine simulated: does not apply: {why_not['simulated']}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    if report is not None:
        data = report.to_dict()
        data["llama_cpp"] = plan.to_dict() if plan is not None else {"error": why_not["llama.cpp"]}
        if agreement is not None:
            data["engines"] = agreement.to_dict()
        path = atomic_write(args.out, lambda fh: json.dump(data, fh, indent=1, allow_nan=False))
    else:
        path = plan.save(args.out)
    print(f"wrote {path}")
    return 0


def _calibrate(args: argparse.Namespace) -> int:
    m = calibrate(mib=args.mib)
    text = platform_toml(m)
    atomic_write(args.out, lambda fh: fh.write(text))  # never through a link, never half-written
    gpu = m["gpu"]
    print(f"host: {m['threads']} threads, {m['host_memory'] / 2**30:.1f} GiB, STREAM triad "
          f"{m['host_bandwidth'] / 1e9:.1f} GB/s")
    print(f"gpu: {gpu['name']}, {gpu['memory'] / 2**30:.1f} GiB, {gpu['bandwidth'] / 1e9:.0f} GB/s, link "
          f"{gpu['link'] / 1e9:.1f} GB/s" if gpu else "gpu: none that torch sees")
    print(f"wrote {args.out}")
    return 0
