"""A project import inside a function says why it is not at the top of its module.

Imports say the layering (STYLE.md, 16): a function-local ``hetsim`` import is there
only to break an import cycle, to keep a heavy library (torch, TVM, pandas, SimPy,
numba, matplotlib) or the CLI's start-up lazy, or because tests replace the name on
its module; a comment on its line, or on the lines just above its group of imports,
says which. A named cycle (``import cycle: a -> b -> c``) is checked: each module of
it imports the next at its top (importing ``x.y`` runs ``x`` first).
"""

from __future__ import annotations

import ast
import functools
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ("hetsim", "graphs", "costmodel", "sim", "schedulers", "runtime", "experiments")

#: what a reason starts with: the cycle broken, the library or start-up kept lazy,
#: a name tests replace on its module
REASON = re.compile(r"\b(cycles?|lazy|heavy|looked up when called)\b", re.I)
#: "lazy: at the top it would load X, Y with this module": the libraries X, Y
LAZY = re.compile(r"lazy: at the top it would load (.+?) with this module")
#: the libraries such a reason may name, checked by the slow test below
LIBRARIES = ("matplotlib", "networkx", "numba", "numpy", "pandas", "scipy", "simpy", "torch", "tvm")
CYCLE = re.compile(r"(hetsim(?:\.\w+)*)(?:\s*->\s*(hetsim(?:\.\w+)*))+")


def _module(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = [p for p in rel.parts if p != "__init__"]
    return ".".join(parts if parts[0] == "hetsim" else ["hetsim", *parts])


def _files() -> list[Path]:
    return [p for folder in PACKAGE for p in sorted((ROOT / folder).rglob("*.py"))]


@functools.cache
def _source(path: Path) -> tuple[ast.Module, list[str]]:
    """The parsed file and its lines."""
    text = path.read_text(encoding="utf-8")
    return ast.parse(text, str(path)), text.splitlines()


def _comment(line: str) -> str:
    """The comment of an import statement's line, or of a comment line (no string
    in either holds a ``#``)."""
    return line.partition("#")[2].strip() if "#" in line else ""


def _is_project(node: ast.stmt) -> bool:
    if isinstance(node, ast.ImportFrom):
        return node.level > 0 or (node.module or "").split(".")[0] == "hetsim"
    return isinstance(node, ast.Import) and any(a.name.split(".")[0] == "hetsim" for a in node.names)


def _bodies(node: ast.AST) -> list[list[ast.stmt]]:
    return [v for f in ("body", "orelse", "finalbody") if isinstance(v := getattr(node, f, None), list)] + [
        h.body for h in getattr(node, "handlers", [])] + [c.body for c in getattr(node, "cases", [])]


def _local_groups(tree: ast.Module) -> list[list[ast.stmt]]:
    """Runs of adjacent import statements inside functions that hold a project import."""
    groups: list[list[ast.stmt]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        inside = in_function or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        for body in _bodies(node):
            run: list[ast.stmt] = []
            for stmt in [*body, None]:
                if isinstance(stmt, ast.Import | ast.ImportFrom) and (not run or stmt.lineno == run[-1].end_lineno + 1):
                    run.append(stmt)
                    continue
                if inside and any(_is_project(s) for s in run):
                    groups.append(run)
                run = [stmt] if isinstance(stmt, ast.Import | ast.ImportFrom) else []
                if stmt is not None and not isinstance(stmt, ast.Import | ast.ImportFrom):
                    visit(stmt, inside)

    visit(tree, False)
    return groups


def _reason(group: list[ast.stmt], lines: list[str]) -> str:
    """The comment block just above the group, and the comments on its own lines."""
    above: list[str] = []
    line = group[0].lineno - 1
    while line >= 1 and lines[line - 1].strip().startswith("#"):
        above.insert(0, _comment(lines[line - 1]))
        line -= 1
    own = [_comment(lines[n - 1]) for s in group for n in range(s.lineno, s.end_lineno + 1)]
    return " ".join(above + own)


def _local_imports() -> list[tuple[str, int, str]]:
    """``(file, line, reason)`` of every function-local project import."""
    out = []
    for path in _files():
        tree, lines = _source(path)
        for group in _local_groups(tree):
            reason = _reason(group, lines)
            out += [(str(path.relative_to(ROOT)), s.lineno, reason) for s in group if _is_project(s)]
    return out


def test_every_function_local_project_import_says_why() -> None:
    found = _local_imports()
    assert len(found) > 20  # the walk finds them (the CLI's lazy command modules at least)
    missing = [f"{file}:{line}" for file, line, reason in found if not REASON.search(reason)]
    assert not missing, ("function-local project imports without a reason (a cycle named, or "
                         "'lazy: ...', 'heavy: ...'):\n" + "\n".join(missing))


@functools.cache
def _top_imports(module: str) -> frozenset[str]:
    """The modules ``module`` imports at its top (outside functions and TYPE_CHECKING)."""
    names = {_module(p): p for p in _files()}
    path = names.get(module)
    if path is None:
        return frozenset()
    tree = _source(path)[0]
    out: set[str] = set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]

    def visit(body: list[ast.stmt]) -> None:
        for stmt in body:
            if isinstance(stmt, ast.Import):
                out.update(a.name for a in stmt.names)
            elif isinstance(stmt, ast.ImportFrom):
                base = stmt.module or ""
                if stmt.level:
                    anchor = package.split(".")[: len(package.split(".")) - stmt.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                out.add(base)
                out.update(f"{base}.{a.name}" for a in stmt.names)  # a submodule imported by name
            elif isinstance(stmt, ast.If) and "TYPE_CHECKING" not in ast.unparse(stmt.test):
                visit(stmt.body)
                visit(stmt.orelse)
            elif isinstance(stmt, ast.Try):
                visit(stmt.body)

    visit(tree.body)
    return frozenset(out)


def _runs(importer: str, imported: str) -> bool:
    """Whether importing ``importer`` runs ``imported`` at once: one of its top imports
    is ``imported``, inside it, or a package above it, or ``importer`` sits inside it."""
    if importer.startswith(imported + "."):
        return True
    return any(m == imported or m.startswith(imported + ".") for m in _top_imports(importer))


def test_a_named_import_cycle_is_one() -> None:
    wrong = []
    for file, line, reason in _local_imports():
        for m in CYCLE.finditer(reason):
            chain = re.findall(r"hetsim(?:\.\w+)*", m.group(0))
            wrong += [f"{file}:{line}: {a} does not import {b}" for a, b in zip(chain, chain[1:])
                      if not _runs(a, b)]  # fmt: skip
    assert not wrong, "\n".join(wrong)


@pytest.mark.slow
def test_a_library_kept_lazy_is_not_loaded_by_the_module_that_keeps_it() -> None:
    """A reason "lazy: at the top it would load simpy" goes stale when the module comes to
    load simpy some other way (then the import belongs at the top): every module that
    says so is imported, one process per library, and the library must not be loaded."""
    claims: dict[str, set[str]] = {}
    for file, _, reason in _local_imports():
        for m in LAZY.finditer(reason):
            for lib in re.split(r",\s*|\s+and\s+", m.group(1)):
                if lib in LIBRARIES:
                    claims.setdefault(lib, set()).add(_module(ROOT / file))
    assert {"simpy", "torch", "pandas"} <= set(claims)
    code = "import importlib, sys\nfor m in sys.argv[2:]: importlib.import_module(m)\nprint(sys.argv[1] in sys.modules)"
    loaded = {}
    for lib, modules in sorted(claims.items()):
        out = subprocess.run([sys.executable, "-c", code, lib, *sorted(modules)], cwd=ROOT, capture_output=True,
                             text=True, timeout=600)  # fmt: skip
        assert out.returncode == 0, out.stderr[-2000:]
        if out.stdout.split()[-1] == "True":
            loaded[lib] = sorted(modules)
    assert not loaded, f"these modules load the library they say they keep lazy (one of them at least): {loaded}"
