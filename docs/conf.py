"""Sphinx configuration of the routing-gym documentation site (MyST Markdown, furo theme).

Build: ``sphinx-build -W --keep-going -b html docs docs/_build/html`` (``.ci/run`` does). The env,
agent, reward and results pages are generated at build time (``_ext/generate.py``) from the env
docstrings, the registered ids and ``experiments/results``, so they cannot drift from the code.
"""

from __future__ import annotations

import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS / "_ext"))

project = "routing-gym"
author = "routing-gym contributors"
copyright = "routing-gym contributors, Apache-2.0"

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx.ext.viewcode",
    "sphinxarg.ext",
    "cli_parser",  # the CLI page's argument headings as rubrics (out of the page contents)
    "docstrings",  # after napoleon: it reads the reST napoleon leaves
    "generate",
]
templates_path = ["_templates"]

source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

# The docstrings are written with Markdown-style `code` spans: render single backticks as code.
default_role = "code"
autosummary_generate = True
autosummary_imported_members = False
autodoc_default_options = {"members": True, "show-inheritance": True}
# gymnasium's own step/reset docstrings are not ours to render (and not valid reST here).
autodoc_inherit_docstrings = False
autodoc_typehints = "description"
autodoc_member_order = "bysource"

html_theme = "furo"
html_title = "routing-gym"
html_static_path = ["_static"]
html_css_files = ["wrap.css"]  # long code lines wrap instead of running off the side
# No "smart" typography: `--out` became an en dash ("–out") and quotes curled, so copied
# options and commands failed.
smartquotes = False
