"""The address of a rule's page, for a diagnostic's ``codeDescription``: the page in this install's
checkout (docs/rules/CODE.md, written by scripts/generate_rule_docs.py; an editor opens it) when it is
there, else the project's rule reference (pyproject.toml's ``[project.urls]`` "Rule reference")."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Optional

_PAGES = Path(__file__).resolve().parent.parent.parent / "docs" / "rules"


@lru_cache(maxsize=None)
def rule_page(code: str) -> Optional[str]:
    page = _PAGES / f"{code}.md"
    if page.is_file():
        return page.as_uri()
    reference = _rule_reference()
    return f"{reference.rstrip('/')}/{code}.md" if reference else None


@lru_cache(maxsize=1)
def _rule_reference() -> Optional[str]:
    from importlib import metadata

    try:
        urls = metadata.metadata("neuron-port").get_all("Project-URL") or []
    except metadata.PackageNotFoundError:
        return None
    for entry in urls:
        label, _, url = entry.partition(",")
        if label.strip().lower() == "rule reference" and url.strip():
            return url.strip().replace("/tree/", "/blob/")
    return None
