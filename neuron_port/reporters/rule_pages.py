"""A rule's documentation as Markdown and as plain text (SARIF's ``help.markdown`` / ``help.text``,
`neuron-port explain`).

The rules' docstrings (rules/spec.py ``docs``) are Markdown with reST-style ````code```` spans. As Markdown
a span becomes single backticks (double ones only where the code holds a backtick, as CommonMark needs);
as plain text the markup goes: headings lose their ``#``, spans their backticks, links show their address,
fenced code is indented by four spaces. Fenced blocks are left as written in Markdown.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Optional

# a span may run over a line break of its paragraph, never over a blank line
_DOUBLE = re.compile(r"``(?!`)((?:[^`\n]|`(?!`)|\n(?!\n))+?)(?<!`)``")
_SINGLE = re.compile(r"`((?:[^`\n]|\n(?!\n))+)`")
_HEADING = re.compile(r"^#{1,6}\s+", re.M)
_LINK = re.compile(r"\[([^\]\n]+)\]\(([^)\s]+)\)")
_BOLD = re.compile(r"\*\*([^*\n]+)\*\*")
_FENCE = re.compile(r"^[ \t]*```.*?^[ \t]*```[^\n]*$", re.M | re.S)


def _pieces(page: str) -> list[tuple[bool, str]]:
    """``page`` cut into (fenced, text) pieces, in order."""
    pieces, at = [], 0
    for block in _FENCE.finditer(page):
        pieces += [(False, page[at:block.start()]), (True, block.group(0))]
        at = block.end()
    return pieces + [(False, page[at:])]


def markdown(page: str) -> str:
    """``page`` with its ````code```` spans in Markdown's single backticks (fenced code untouched)."""
    return "".join(text if fenced else _DOUBLE.sub(lambda m: f"`{m.group(1)}`" if "`" not in m.group(1)
                                                     else m.group(0), text)
                   for fenced, text in _pieces(page))


def plain(page: str) -> str:
    """``page`` as plain text, with no Markdown or reST markup left (fenced code indented by four)."""
    out = []
    for fenced, text in _pieces(markdown(page)):
        if fenced:
            body = text.split("\n")[1:-1]
            out.append("\n".join("    " + line if line.strip() else "" for line in body))
            continue
        text = _HEADING.sub("", text)
        text = _LINK.sub(lambda m: m.group(2) if m.group(1) == m.group(2) else f"{m.group(1)} ({m.group(2)})", text)
        text = _BOLD.sub(r"\1", text)
        out.append(_SINGLE.sub(r"\1", _DOUBLE.sub(r"\1", text)))
    return "".join(out)


@lru_cache(maxsize=1)
def rule_reference() -> Optional[str]:
    """pyproject's ``[project.urls]`` "Rule reference" (the folder of the generated rule pages, as a page
    address: ``/blob/``), from the installed metadata; None without it. The language server links the
    same pages (neuron_port/server/links.py)."""
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
