"""Write the API reference pages: one per layer, an autosummary of its ``__all__``.

``python docs/reference/generate_api.py`` rewrites ``docs/reference/api/*.md`` from the
packages' ``__all__`` lists, so that a name a layer exports is a name the reference
documents; ``--check`` exits 1 (naming the stale pages) instead of writing.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
API = Path(__file__).resolve().parent / "api"
#: the documented packages, in the order of the layers
PACKAGES = ["graphs", "graphs.zoo", "graphs.llm", "graphs.trace", "costmodel", "costmodel.trace", "sim",
            "sim.replay", "schedulers", "runtime", "runtime.backends", "experiments.sweep"]


def page(package: str, seen: dict[int, str]) -> str:
    """The Markdown page of ``hetsim.<package>``: its docstring's first paragraph and an
    autosummary table (one generated page per name) of its ``__all__``.

    Parameters
    ----------
    package : str
        Dotted name below ``hetsim`` (``"sim"``, ``"graphs.zoo"``).
    seen : dict of int to str
        Objects documented on earlier pages (by ``id``) and their documented names; a
        name of this package that is one of them is listed as an alias, not documented
        twice. Updated with this package's names.

    Returns
    -------
    str
        The page's text.
    """
    module = importlib.import_module(f"hetsim.{package}")
    names = getattr(module, "__all__", None)
    if not names:
        raise SystemExit(f"generate_api: hetsim.{package} has no __all__")
    summary = " ".join((module.__doc__ or "").strip().split("\n\n")[0].split())
    own, aliases = [], []
    for name in names:
        obj = getattr(module, name)
        if not isinstance(obj, (int, float, str)) and id(obj) in seen:
            aliases.append(f"- `hetsim.{package}.{name}` is `{seen[id(obj)]}`\n")
            continue
        seen[id(obj)] = f"hetsim.{package}.{name}"
        own.append(f"   {name}\n")
    text = (f"# hetsim.{package}\n\n{summary}\n\n```{{eval-rst}}\n.. currentmodule:: hetsim.{package}\n\n"
            f".. autosummary::\n   :toctree: generated\n\n{''.join(own)}```\n")
    if aliases:
        text += "\nAlso exported here, documented on another page:\n\n" + "".join(aliases)
    return text


def pages() -> dict[Path, str]:
    """Every API page by its path, ``index.md`` (the toctree) included."""
    seen: dict[int, str] = {}
    out = {API / f"{p}.md": page(p, seen) for p in PACKAGES}
    toc = "".join(f"{p}\n" for p in PACKAGES)
    out[API / "index.md"] = ("# API reference\n\nThe public names of each layer (what its `__all__` exports), "
                             "generated from their docstrings. `import hetsim` re-exports the everyday ones "
                             "(`hetsim.Platform`, `hetsim.simulate`, ...).\n\n"
                             f"```{{toctree}}\n:maxdepth: 1\n\n{toc}```\n")
    return out


def main(argv: list[str] | None = None) -> int:
    """Write the pages, or with ``--check`` report the ones that differ."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a page differs, write nothing")
    args = parser.parse_args(argv)
    stale = [path for path, text in pages().items() if not path.exists() or path.read_text() != text]
    if args.check:
        for path in stale:
            print(f"generate_api: {path.relative_to(ROOT)} is stale", file=sys.stderr)
        return 1 if stale else 0
    API.mkdir(exist_ok=True)
    for path, text in pages().items():
        path.write_text(text)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    raise SystemExit(main())
