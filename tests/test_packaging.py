"""The wheel holds every package of the checkout: pyproject's package list is the
folders with an ``__init__.py`` under the layer folders (an omitted one installs
from a checkout but is missing from a wheel)."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_package_folder_is_listed_in_pyproject() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    mapping = config["package-dir"]
    folders = {}
    for name, folder in mapping.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder)
            folders[".".join([name, *rel.parts])] = init.parent
    assert sorted(config["packages"]) == sorted(folders)
