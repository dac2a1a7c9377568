"""``hetsim costmodel eval`` on GPU profiles: held-out shapes, shape cross-validation,
leave one GPU out (the cross-GPU models; the kernel model over these profiles and
Vidur's LLM layer kernels), and the published whole-model latencies against the GPUs'
presets."""

from __future__ import annotations

import argparse
from pathlib import Path

from hetsim.experiments.cli.main import CLIError
from hetsim.graphs.graph import atomic_write

PROTOCOLS = ("held-out", "cv", "logo", "kernel-logo", "published")


def gpu_profiles(profiles: list[str], gpus: str | None) -> list[Path] | None:
    """The GPU profile folders to evaluate, or None when ``profiles`` are not GPU profiles."""
    # lazy: a command's module loads only what its parser needs (hetsim --help)
    from hetsim.costmodel.builtin import builtin_profiles
    from hetsim.costmodel.spec import gpu_profile_name

    builtins = {n: p for n, p in builtin_profiles().items() if n.startswith("gpu-")}
    if gpus:
        if profiles:
            raise CLIError("give either GPU profile folders or --gpus, not both")
        if gpus.strip() == "all":
            return list(builtins.values())
        out = []
        for name in (g.strip() for g in gpus.split(",") if g.strip()):
            key = name if name.startswith("gpu-") else f"gpu-{name}"
            if key not in builtins:
                raise CLIError(f"unknown GPU {name!r}; built-in GPUs: {[n[4:] for n in builtins]}")
            out.append(builtins[key])
        return out
    folders = [builtins.get(p, Path(p)) for p in profiles]
    kinds = [gpu_profile_name(Path(f)) is not None for f in folders]
    if not folders or not any(kinds):
        return None
    if not all(kinds):
        bad = [str(f) for f, k in zip(folders, kinds) if not k]
        raise CLIError(f"mixing GPU and other profiles: {bad} are not GPU profiles")
    return [Path(f) for f in folders]


def run_gpu_eval(args: argparse.Namespace, folders: list[Path]) -> int:
    import pandas as pd

    # lazy: a command's module loads only what its parser needs (hetsim --help)
    from hetsim.costmodel.gpu.evaluate import (
        cv_predictions,
        format_gpu_eval,
        logo_predictions,
        plot_gpu_eval,
        split_predictions,
        summarize_gpu,
    )
    from hetsim.costmodel.gpu.features import GPU_FAMILIES
    from hetsim.costmodel.gpu.model import GPUBank

    protocols = [p.strip() for p in args.protocols.split(",") if p.strip()]
    bad = [p for p in protocols if p not in PROTOCOLS]
    if bad or not protocols:
        raise CLIError(f"--protocols must be a subset of {','.join(PROTOCOLS)}, got {args.protocols!r}")
    families = [f.strip() for f in args.families.split(",")] if args.families else None
    if families and (unknown := [f for f in families if f not in GPU_FAMILIES]):
        raise CLIError(f"unknown kernel famil(ies) {unknown}; known: {list(GPU_FAMILIES)}")
    bank = GPUBank.from_profiles(folders)
    if "logo" in protocols and len(bank.gpus) < 3:  # before the other protocols fit anything
        raise CLIError(f"leave one GPU out needs at least 3 GPU profiles, got {list(bank.gpus)}")
    out = Path(args.out) if args.out else Path("out") / "eval" / "gpu"  # never into a (tracked) profile
    if "published" in protocols:
        run_published(list(bank.gpus), out)
    frames = []
    if "held-out" in protocols:
        frames.append(split_predictions(bank, families=families or GPU_FAMILIES, progress=True))
    if "cv" in protocols:
        frames.append(cv_predictions(bank, families=families or ("gemm",), folds=args.folds, progress=True))
    if "logo" in protocols:
        frames.append(logo_predictions(bank, families=families or ("gemm", "conv"), progress=True))
    if "kernel-logo" in protocols:
        # lazy: a command's module loads only what its parser needs (hetsim --help)
        from hetsim.costmodel.gpu.evaluate import kernel_logo_predictions
        from hetsim.costmodel.gpu.kernel_fit import bank_sets
        from hetsim.costmodel.gpu.vidur import vidur_sets

        sets = [*bank_sets(bank), *vidur_sets()]
        kernel = kernel_logo_predictions(sets, progress=True)
        frames.append(kernel[kernel["family"].isin(families)] if families else kernel)
    if not frames:
        return 0
    points = pd.concat(frames, ignore_index=True)
    summary = summarize_gpu(points)
    print(f"GPU cost models on {', '.join(bank.gpus)}: absolute percentage error of the call time")
    print(format_gpu_eval(summary))
    atomic_write(out / "gpu_eval.csv", lambda fh: summary.to_csv(fh, index=False))
    atomic_write(out / "gpu_eval_points.csv.gz",
                 lambda fh: points.to_csv(fh, index=False, compression={"method": "gzip", "mtime": 0}),
                 binary=True)  # fmt: skip
    paths = plot_gpu_eval(points, out)
    for p in [out / "gpu_eval.csv", out / "gpu_eval_points.csv.gz", *paths]:
        print(f"wrote {p}")
    return 0


def run_published(gpus: list[str], out: Path) -> None:
    """The published latencies of ``gpus`` against their presets (default cost and
    roofline): prints the error table and writes ``published.csv`` into ``out``."""
    # lazy: a command's module loads only what its parser needs (hetsim --help)
    from hetsim.costmodel.gpu.published import (
        format_published,
        predict_published,
        published_latencies,
    )

    table = published_latencies()
    rows = table[table["gpu"].isin(gpus)]
    if rows.empty:
        print(f"published latencies: none for {gpus} (published for {sorted(set(table['gpu']))})")
        return
    published = predict_published(("default", "roofline"), rows=rows)
    print(format_published(published))
    atomic_write(out / "published.csv", lambda fh: published.to_csv(fh, index=False, float_format="%.6g"))
    print(f"wrote {out / 'published.csv'}")
