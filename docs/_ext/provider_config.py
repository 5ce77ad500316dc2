"""The configuration reference, generated from ``get_provider_info()`` at each build.

Options are declared once, in the provider info's ``config`` section (Airflow's ``provider.yaml``
format), and ``reference/configuration.md`` shows them: the line ``<!-- provider-config -->`` there is
replaced, as the page is read, by a section per ``[section]`` and an entry per option. An option added
to the provider info appears with no edit of the docs; an empty or missing section says "none yet".
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from sphinx.application import Sphinx

MARKER = "<!-- provider-config -->"
NO_OPTIONS = (
    "This provider declares no configuration options yet: every setting is an argument of a task or an "
    "extra of the connection."
)


def _literal(value: object) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    if text == "":
        return '`""`'
    fence = "``" if "`" in text else "`"
    return f"{fence} {text} {fence}" if fence == "``" else f"`{text}`"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def config_reference_markdown(config: Mapping[str, Any] | None) -> str:
    """Markdown describing every section and option of ``config``, or a "none yet" paragraph."""
    sections = {name: spec for name, spec in (config or {}).items() if (spec or {}).get("options")}
    if not sections:
        return NO_OPTIONS + "\n"
    out: list[str] = []
    for section, spec in sorted(sections.items()):
        out += [f"## `[{section}]`", ""]
        if spec.get("description"):
            out += [str(spec["description"]).strip(), ""]
        for option, opt in sorted(spec["options"].items()):
            opt = opt or {}
            out += [f"### `{option}`", ""]
            if opt.get("description"):
                out += [str(opt["description"]).strip(), ""]
            default = opt.get("default")
            example = opt.get("example")
            rows = [
                ("Type", _literal(opt.get("type") or "string")),
                ("Default", "none" if default is None else _literal(default)),
                ("Example", "none" if example is None else _literal(example)),
                ("Environment variable", _literal(f"AIRFLOW__{section.upper()}__{option.upper()}")),
                ("Sensitive", "yes: never shown in clear by Airflow" if opt.get("sensitive") else "no"),
                ("Added in version", _literal(opt["version_added"]) if opt.get("version_added") else "unknown"),
            ]
            out += ["| | |", "|---|---|", *(f"| {name} | {_cell(value)} |" for name, value in rows), ""]
    return "\n".join(out)


def _fill(app: Sphinx, docname: str, source: list[str]) -> None:
    if MARKER not in source[0]:
        return
    from airflow_provider_slurmapi.get_provider_info import get_provider_info

    source[0] = source[0].replace(MARKER, config_reference_markdown(get_provider_info().get("config")))


def _always_reread_config_page(app: Sphinx, env: Any, *_docnames: set[str]) -> list[str]:
    # The page's text does not change when the provider info does: read it again at every build.
    return ["reference/configuration"] if "reference/configuration" in env.found_docs else []


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("source-read", _fill)
    app.connect("env-get-outdated", _always_reread_config_page)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
