"""Sphinx configuration of the hetsim documentation (``python -m sphinx -W -b html docs out/docs``)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
# the command reference's parser (reference/cli_parser.py)
sys.path.insert(0, str(Path(__file__).resolve().parent / "reference"))

project = "hetsim"
author = "hetsim developers"
copyright = "hetsim developers"

extensions = [
    "myst_parser",
    "numpydoc",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "sphinxarg.ext",
]

source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_build", "results/data/*", "README.md"]
templates_path = ["_templates"]

# MyST: ``(label)=`` targets, heading anchors for in-page links, $math$.
myst_enable_extensions = ["colon_fence", "dollarmath"]
myst_heading_anchors = 3

# Autodoc and autosummary: one page per public name of each layer (its ``__all__``).
autosummary_generate = True
autosummary_ignore_module_all = False
autosummary_imported_members = True
autodoc_default_options = {"members": True, "show-inheritance": True}
autodoc_typehints = "none"
autodoc_member_order = "bysource"

# numpydoc renders the sections; class members are listed by autosummary instead.
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_validation_checks: set[str] = set()
numpydoc_xref_param_type = False

# Docstrings are written by several people in parallel: references to names that
# Sphinx cannot resolve are not errors (nitpicky off); a docstring written twice
# (a name exported by two layers) is documented once per page without a warning.
nitpicky = False
suppress_warnings = [
    "autosummary.import_cycle",
    "myst.header",
    "myst.xref_missing",
    "myst.domains",
    "ref.python",
]

html_theme = "pydata_sphinx_theme"
html_title = "hetsim"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
}
html_static_path: list[str] = []
