"""``hetsim llm plan``: predict where an LLM's weights should live before loading it.

Examples::

    hetsim llm plan llama3-70b --platform desktop-rtx4090 --context 8192 --batch 1 --weights q4
    hetsim llm plan mixtral-8x7b --platform workstation-rtx6000ada --objective ttft --out plan.json

Prints, for each placement policy (``ngl``, ``expert-offload``, ``weight-streaming``,
``llm-search``): prefill tokens/s, decode tokens/s, time to first token, peak memory
per device, PCIe bytes per generated token and the equivalent llama.cpp flags; writes
the best plan as JSON (``--out``, default ``out/llm-plan.json``).
"""

from __future__ import annotations

import argparse

from hetsim.experiments.cli.common import non_negative_float, output_file, positive_int
from hetsim.experiments.cli.main import CLIError


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register the ``llm`` subcommand on ``sub``."""
    p = sub.add_parser(
        "llm",
        help="LLMs larger than the GPU: predict the best CPU-GPU placement and its tokens/s",
        description="Placement of decoder-only LLMs over GPU and host memory, predicted by simulation.",
    )
    llm_sub = p.add_subparsers(dest="llm_command", metavar="ACTION")
    q = llm_sub.add_parser(
        "plan",
        help="predict every placement policy and write the best plan as JSON",
        description="Build the model's prefill and decode graphs, let each placement policy choose "
        "where its weights live, simulate both phases and print the predictions.",
    )
    q.add_argument("model", metavar="MODEL", help="LLM preset (llama3-8b, llama3-70b, mixtral-8x7b, tiny, ...)")
    q.add_argument("--platform", required=True, metavar="NAME|FILE", help="platform preset name or TOML file")
    q.add_argument("--context", type=positive_int, default=8192, metavar="N", help="KV-cache tokens (default 8192)")
    q.add_argument("--batch", type=positive_int, default=1, metavar="B", help="sequences decoded together (default 1)")
    q.add_argument("--prompt", type=positive_int, default=512, metavar="P", help="prompt tokens of the prefill (default 512)")
    q.add_argument("--weights", default="q4_K", metavar="FORMAT",
                   help="weight storage: f16, bf16, q8_0, q6_K, q5_K, q4_K, q4_0, ... (aliases q8, q4; default q4_K)")
    q.add_argument("--kv-dtype", default="f16", metavar="DTYPE", help="KV-cache dtype (f16, q8_0, ...; default f16)")
    q.add_argument("--objective", choices=["decode", "ttft"], default="decode",
                   help="what the search optimises and the best plan is ranked by (default decode tokens/s)")
    q.add_argument("--policy", action="append", metavar="NAME", help="policies to run (repeatable; default all)")
    q.add_argument("--cost", default="roofline", metavar="SPEC", help="cost model (default: roofline)")
    q.add_argument("--reserve-gib", type=non_negative_float, default=1.0, metavar="GIB",
                   help="GPU memory left free for activations (default 1, as llama.cpp --fit)")
    q.add_argument("--out", type=output_file, default="out/llm-plan.json", metavar="FILE",
                   help="best plan JSON (default out/llm-plan.json)")
    return p


def run(args: argparse.Namespace) -> int:
    if args.llm_command != "plan":
        raise CLIError("choose an action: hetsim llm plan MODEL --platform P")
    from hetsim.experiments.llm_plan import plan_llm

    report = plan_llm(
        args.model, args.platform, context=args.context, batch=args.batch, prompt=args.prompt,
        weights=args.weights, kv_dtype=args.kv_dtype, policies=args.policy, objective=args.objective,
        cost=args.cost, reserve_bytes=int(args.reserve_gib * 2**30),
    )
    print(f"{report.model} ({report.weights}, KV {report.kv_dtype}) on {report.platform}: context "
          f"{report.context}, batch {report.batch}, prompt {report.prompt}")
    print(report.table())
    best = report.best
    path = report.save(args.out)
    print(f"best ({report.objective}): {best.policy}: {best.decode_tok_s:,.2f} decode tok/s, "
          f"TTFT {best.ttft_s:.3f} s; llama.cpp: {best.llama_cpp or best.llama_cpp_note}")
    print(f"wrote {path}")
    return 0
