"""Disk taken by a hetsim install: the packages ``pyproject.toml`` asks for, and theirs.

Walks the dependency closure of hetsim's ``dependencies`` (plus the extras named on the
command line) through the installed distributions' metadata, and sums each package's
installed files as its ``RECORD`` lists them (``__pycache__`` included, as pip writes
it). A package the closure names that is not installed here is listed as missing: the
figure is then a lower bound. The largest packages are printed with the total.

Run: ``python benchmarks/install_size.py`` (the install without extras: no PyTorch) and
``python benchmarks/install_size.py --extra torch`` (with PyTorch; its CPU build must be
the one installed for the figure to be the CPU install's).
Target: the install without extras under 1.5 GB.
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]


def requirements(extras: list[str]) -> list[Requirement]:
    """hetsim's own requirements, with those of ``extras``."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    names = list(project["dependencies"])
    for extra in extras:
        if extra not in project.get("optional-dependencies", {}):
            raise SystemExit(f"install_size: hetsim has no extra {extra!r}; extras: "
                             f"{sorted(project.get('optional-dependencies', {}))}")
        names += project["optional-dependencies"][extra]
    return [Requirement(r) for r in names]


def installed_bytes(dist: md.Distribution) -> int:
    """Bytes of the files ``dist``'s RECORD lists (those present)."""
    total = 0
    for f in dist.files or []:
        try:
            total += f.locate().stat().st_size
        except OSError:
            pass
    return total


def closure(reqs: list[Requirement]) -> tuple[dict[str, int], list[str]]:
    """Installed size of every package in the closure of ``reqs``, and those missing."""
    sizes: dict[str, int] = {}
    missing: list[str] = []
    todo = list(reqs)
    while todo:
        req = todo.pop()
        key = req.name.lower().replace("_", "-")
        if key in sizes or key in missing:
            continue
        try:
            dist = md.distribution(req.name)
        except md.PackageNotFoundError:
            missing.append(key)
            continue
        sizes[key] = installed_bytes(dist)
        for line in dist.requires or []:
            sub = Requirement(line)
            wanted = {e.lower() for e in req.extras}
            if sub.marker is None or any(sub.marker.evaluate({"extra": e}) for e in (wanted or {""})):
                todo.append(sub)
    return sizes, sorted(missing)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--extra", action="append", default=[], help="an extra of hetsim to include (repeatable)")
    ap.add_argument("--top", type=int, default=8, help="largest packages listed (default 8)")
    args = ap.parse_args(argv)
    sizes, missing = closure(requirements(args.extra))
    total = sum(sizes.values())
    label = "hetsim" + (f"[{','.join(args.extra)}]" if args.extra else "")
    print(f"{label}: {total / 1e9:.2f} GB over {len(sizes)} packages (installed files, RECORD)")
    for name, size in sorted(sizes.items(), key=lambda kv: -kv[1])[: args.top]:
        print(f"  {name:<24} {size / 1e6:8.1f} MB")
    if missing:
        print(f"not installed here (not counted): {', '.join(missing)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
