"""Sphinx configuration of the provider's documentation (``make docs``; warnings are errors).

Pages are Markdown read by MyST, as Airflow's providers write theirs in reStructuredText: every
``docs/*.md`` page lands in the index's toctree by a glob, so a new page needs no edit here. The API
reference is read from the source by sphinx-autoapi (Airflow is not imported at build time), and the
configuration reference is generated from ``get_provider_info()`` at each build (``_ext/``).
"""

from __future__ import annotations

import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
REPO = DOCS.parent
sys.path.insert(0, str(DOCS / "_ext"))
sys.path.insert(0, str(REPO))

from airflow_provider_slurmapi import __version__  # noqa: E402

project = "airflow-provider-slurmapi"
author = "airflow-provider-slurmapi contributors"
copyright = "the airflow-provider-slurmapi contributors"
version = release = __version__

extensions = [
    "myst_parser",
    "autoapi.extension",
    "provider_config",
]

source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
# pypi-description.md is the package page (pyproject.toml readme), not a page of the site.
exclude_patterns = ["_build", "_ext", "Thumbs.db", ".DS_Store", "pypi-description.md"]

# MyST: fenced directives with ::: as well as ```, definition lists, and anchors for ## and ###
# headings, so pages link to a section as [text](page.md#section-name).
myst_enable_extensions = ["colon_fence", "deflist", "fieldlist", "substitution"]
myst_heading_anchors = 3

# The API reference, from the source only: public modules and members, no Airflow import.
autoapi_type = "python"
autoapi_dirs = [str(REPO / "airflow_provider_slurmapi")]
autoapi_root = "reference/api"
autoapi_add_toctree_entry = False
autoapi_keep_files = False
autoapi_member_order = "groupwise"
autoapi_options = ["members", "undoc-members", "show-inheritance", "show-module-summary"]
autodoc_typehints = "signature"

# The private ``_compat`` module is left out of the reference: it only re-exports Airflow's own
# classes (BaseOperator, Context...) from where each Airflow version keeps them, so autoapi cannot
# follow those imports. That one kind of autoapi warning is silenced; every other warning fails.
suppress_warnings = ["autoapi.python_import_resolution"]

# Every reference must resolve (-n). Names outside this package (Airflow, also as re-exported by
# ``_compat``, the standard library, google-auth, aiohttp) have no inventory here: the build reads no
# network, so they stay plain text. A broken reference to this package's own names still fails.
nitpicky = True
nitpick_ignore_regex = [(r"py:.*", r"(?!airflow_provider_slurmapi\.(?!_compat\.)).*")]

html_theme = "furo"
html_title = f"Slurm Job API provider {release}"
html_static_path: list[str] = ["_static"]
# Code blocks wrap rather than scroll sideways (the pages read whole at 1280 px).
html_css_files = ["wrap-code.css"]
