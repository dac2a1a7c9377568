"""``hetsim profile import``: the NeuSight GPU kernel data set as hetsim profile folders.

``hetsim profile import ~/NeuSight/scripts/asplos/data/dataset --out out/profiles``
(a clone of https://github.com/sitar-lab/NeuSight)
``hetsim profile import ~/NeuSight/scripts/asplos/data/dataset --gpus t4,a100-80gb --out out/profiles``
"""

from __future__ import annotations

import argparse


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    # no help=: listed under 'hetsim profile --help', not as a command of its own
    p = sub.add_parser(
        "profile-import",
        prog="hetsim profile import",
        description="Convert the NeuSight GPU kernel data set (FP32 PyTorch kernel latencies on T4, P4, "
        "P100, V100, A100 40/80 GB, L4, H100; MIT licence) into one hetsim profile folder per GPU "
        "(OUT/gpu-NAME: ops.csv.gz keyed by hetsim operator signatures, the data set's train/test "
        "split in the 'split' column, manifest with source, licence, GPU figures and library "
        "versions, LICENSE). Everything is read and checked before anything is written.",
    )
    p.add_argument("source", metavar="SOURCE",
                   help="the data set folder (train/, test/, device_configs/, LICENSE): the shared copy "
                   "or your download of NeuSight's scripts/asplos/data/dataset")
    p.add_argument("--out", default="profiles", metavar="DIR",
                   help="parent folder of the profiles (default profiles): DIR/gpu-t4, DIR/gpu-h100...")
    p.add_argument("--gpus", metavar="NAME[,NAME...]",
                   help="GPUs to import: t4, p4, p100, v100, a100-40gb, a100-80gb, l4, h100 (default all)")
    p.add_argument("--overwrite", action="store_true", help="replace profile folders that exist")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


def run(args: argparse.Namespace) -> int:
    import time

    # lazy: a command's module loads only what its parser needs (hetsim --help)
    from hetsim.costmodel.gpu.neusight import import_neusight
    from hetsim.costmodel.profile_reader import read_profile

    t0 = time.perf_counter()
    gpus = [g.strip() for g in args.gpus.split(",") if g.strip()] if args.gpus else None
    paths = import_neusight(args.source, args.out, gpus=gpus, overwrite=args.overwrite,
                            progress=not args.no_progress)
    for path in paths:
        prof = read_profile(path)
        counts = prof.ops["split"].value_counts()
        print(f"{path}: {len(prof.ops)} signatures ({int(counts.get('train', 0))} train, "
              f"{int(counts.get('test', 0))} test), GPU {prof.manifest['machine']['gpu_model']}")
    print(f"imported {len(paths)} GPU profile(s) in {time.perf_counter() - t0:.1f} s")
    return 0
