"""Building blocks of the HTML report's pages: escaping, tables, figures and sections.

Every value from the report is escaped here: sites and messages carry the user's code.
"""

from __future__ import annotations

import html
import re
from typing import Any, Iterable, Optional, Sequence

MAX_TABLE_ROWS = 50
# a site stays on one line; prose columns get room before code columns squeeze them
WIDTH_CLASSES = {"site": "site", "what varies": "wide", "message": "wide", "meaning": "wide"}
# columns that carry identifiers (op names, dotted paths): they may wrap at their parts (breakable)
BREAKABLE_COLUMNS = {"op", "message"}
# a break opportunity after "_" between word characters and after "." between names (not in 3.5)
_PARTS = re.compile(r"(?<=[A-Za-z0-9])_(?=[A-Za-z0-9])|(?<=[A-Za-z_)\]])\.(?=[A-Za-z_])")


def escape(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def breakable(escaped: str) -> str:
    """Escaped text with <wbr> after each "_" and "." inside an identifier: a long op name or dotted path
    (aten::_scaled_dot_product_attention, GPT.forward) wraps at its parts, never mid-word (the cells' CSS
    breaks between words only), and does not widen its table past the page."""
    return _PARTS.sub(lambda match: match.group(0) + "<wbr>", escaped)


def site_text(site: Optional[dict]) -> str:
    if not site:
        return "(no user frame)"
    return f"{site.get('path')}:{site.get('line')}"


def number(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):  # counts averaged over steps
        return f"{value:,.0f}" if value.is_integer() else f"{value:,.1f}"
    return f"{value:,}" if isinstance(value, int) else escape(value)


class Markup:
    """HTML that a table cell takes as it is (already escaped by whoever built it)."""

    def __init__(self, html_text: str) -> None:
        self.html = html_text


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], *, caption: str = "",
          numeric: Sequence[int] = (), limit: int = MAX_TABLE_ROWS) -> str:
    """An HTML table; cells are escaped unless given as ``Markup``. Rows past ``limit`` are counted, not shown."""
    rows = list(rows)
    head = "".join(f'<th scope="col"{" class=num" if i in numeric else ""}>{escape(h)}</th>'
                   for i, h in enumerate(headers))
    body = []
    for row in rows[:limit]:
        cells = []
        for i, cell in enumerate(row):
            if isinstance(cell, Markup):
                text = cell.html
            elif isinstance(cell, (int, float)) and not isinstance(cell, bool):
                text = number(cell)
            elif headers[i] in BREAKABLE_COLUMNS:
                text = breakable(escape(cell))
            else:
                text = escape(cell)
            classes = "num" if i in numeric else WIDTH_CLASSES.get(headers[i], "")
            cells.append(f'<td class="{classes}">{text}</td>' if classes else f"<td>{text}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    more = (f'<p class="muted">{len(rows) - limit:,} more row(s) are in the JSON report.</p>'
            if len(rows) > limit else "")
    caption_html = f"<caption>{escape(caption)}</caption>" if caption else ""
    return (f'<div class="table-wrap"><table>{caption_html}<thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table></div>{more}')


def code_cell(site: Optional[dict]) -> Markup:
    return Markup(f"<code>{breakable(escape((site or {}).get('code', '')))}</code>")


def figure(svg: str, caption: str, data_table: str) -> str:
    return (f'<figure><div class="chart-wrap">{svg}</div><figcaption>{escape(caption)}</figcaption>'
            f"<details><summary>The data of this chart</summary>{data_table}</details></figure>")


def section(anchor: str, title: str, body: str) -> str:
    return (f'<section id="{anchor}" aria-labelledby="{anchor}-h"><h2 id="{anchor}-h">{escape(title)}</h2>'
            f"{body}</section>")
