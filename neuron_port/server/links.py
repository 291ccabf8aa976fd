"""The address of a rule's page, for a diagnostic's ``codeDescription``: the page in this install's
checkout (docs/rules/CODE.md, written by scripts/generate_rule_docs.py; an editor opens it) when it is
there, else the project's rule reference (pyproject.toml's ``[project.urls]`` "Rule reference")."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Optional

from neuron_port.reporters.rule_pages import rule_reference

_PAGES = Path(__file__).resolve().parent.parent.parent / "docs" / "rules"


@lru_cache(maxsize=None)
def rule_page(code: str) -> Optional[str]:
    page = _PAGES / f"{code}.md"
    if page.is_file():
        return page.as_uri()
    reference = rule_reference()
    return f"{reference.rstrip('/')}/{code}.md" if reference else None
