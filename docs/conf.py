"""Sphinx configuration of the gbfs documentation site."""

from __future__ import annotations

import os
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(ROOT))          # the repository's gbfs and runners, before any installed copy
sys.path.insert(1, str(DOCS / "_ext"))
os.environ.setdefault("MPLBACKEND", "Agg")

import gbfs  # noqa: E402

project = "gbfs"
author = "the gbfs authors"
copyright = "the gbfs authors"
release = gbfs.__version__
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "myst_parser",
    "sphinx_gallery.gen_gallery",
    "gbfs_layout",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store", "auto_examples/*.ipynb",
                    "auto_examples/*.py", "auto_examples/*.zip", "auto_examples/*.md5",
                    "_generated/*"]
templates_path = ["_templates"]

# MyST: the Markdown pages keep the tables and code blocks of the former README verbatim
myst_enable_extensions = ["dollarmath", "amsmath", "deflist"]
myst_heading_anchors = 3
suppress_warnings = ["myst.header"]  # pages that start at a lower heading level than their title

# API reference: one page per public name, from the numpydoc docstrings
autosummary_generate = True
autosummary_imported_members = False
autodoc_default_options = {"members": False}
autodoc_typehints = "none"
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_validation_checks: set[str] = set()
numpydoc_xref_param_type = False

# no network at build time
intersphinx_mapping: dict = {}

# the executed example gallery: every script in examples/ runs, and a failing one fails the build
sphinx_gallery_conf = {
    "examples_dirs": "../examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "ignore_pattern": r"__init__\.py",
    "abort_on_example_error": True,
    "only_warn_on_example_error": False,
    "download_all_examples": False,
    "plot_gallery": "True",
    "remove_config_comments": True,
    "within_subsection_order": "FileNameSortKey",
}

html_theme = "pydata_sphinx_theme"
html_title = f"gbfs {release}"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
}
html_static_path: list[str] = []
