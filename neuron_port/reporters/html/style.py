"""The HTML report's stylesheet and content security policy, inlined into the page (it loads nothing).

Two palettes, picked by ``prefers-color-scheme``: the charts draw text and axes in ``currentColor`` and
their series in ``--series-N``, so they follow the palette too. The series colours keep a contrast of
at least 3:1 against the background of their palette (WCAG 1.4.11 for graphics).
"""

from __future__ import annotations

# nothing may be fetched and nothing runs: styles are inline, there is no script, images are data: URLs only
CONTENT_SECURITY_POLICY = ("default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; "
                           "form-action 'none'")

STYLE = """
:root {
  color-scheme: light dark;
  --bg: #ffffff; --fg: #1f2328; --muted: #59636e; --border: #d1d9e0; --panel: #f6f8fa;
  --good: #1a7f37; --bad: #cf222e; --warn: #9a6700; --link: #0550ae;
  --series-0: #1f6feb; --series-1: #d1242f; --series-2: #1a7f37; --series-3: #8250df;
  --series-4: #bc4c00; --series-5: #0a7f8a; --series-6: #bf3989; --series-7: #6e7781;
  --series-8: #9a6700; --series-9: #4d2d8f; --series-10: #116329; --series-11: #953800;
}
@media (prefers-color-scheme: dark) {
  :root {
    --bg: #0d1117; --fg: #e6edf3; --muted: #9198a1; --border: #3d444d; --panel: #151b23;
    --good: #3fb950; --bad: #f85149; --warn: #d29922; --link: #4493f8;
    --series-0: #4493f8; --series-1: #ff7b72; --series-2: #3fb950; --series-3: #bc8cff;
    --series-4: #ffa657; --series-5: #39c5cf; --series-6: #f778ba; --series-7: #9198a1;
    --series-8: #d29922; --series-9: #a371f7; --series-10: #7ee787; --series-11: #ffab70;
  }
}
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--fg);
       font: 15px/1.5 system-ui, -apple-system, "Segoe UI", "DejaVu Sans", sans-serif; }
main { max-width: 70rem; margin: 0 auto; padding: 1.5rem; }
header { border-bottom: 1px solid var(--border); margin-bottom: 1rem; }
h1 { font-size: 1.6rem; margin: 0 0 .25rem; }
h2 { font-size: 1.25rem; margin: 2rem 0 .5rem; border-bottom: 1px solid var(--border); padding-bottom: .25rem; }
h3 { font-size: 1.05rem; margin: 1.25rem 0 .5rem; }
a { color: var(--link); }
code, .mono { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: .9em; }
.muted { color: var(--muted); }
.outcome-ok { color: var(--good); font-weight: 600; }
.outcome-bad { color: var(--bad); font-weight: 600; }
nav ul { list-style: none; padding: 0; display: flex; flex-wrap: wrap; gap: .25rem 1rem; }
dl.numbers { display: grid; grid-template-columns: repeat(auto-fill, minmax(12rem, 1fr)); gap: .75rem;
             margin: 0; }
dl.numbers div { background: var(--panel); border: 1px solid var(--border); border-radius: 6px; padding: .6rem .8rem; }
dl.numbers dt { color: var(--muted); font-size: .85rem; }
dl.numbers dd { margin: 0; font-size: 1.3rem; font-weight: 600; }
meter { width: 100%; max-width: 30rem; height: 1.2rem; }
figure { margin: 1rem 0; padding: .75rem; border: 1px solid var(--border); border-radius: 6px;
         background: var(--panel); color: var(--fg); }
figcaption { color: var(--muted); font-size: .9rem; margin-top: .5rem; }
.chart-wrap { overflow-x: auto; }
/* never narrower than the drawing's 720 units (charts.py): chart text keeps at least its drawn size */
svg.chart { display: block; width: 100%; min-width: 720px; max-width: 960px; height: auto; }
svg.chart * { stroke-linejoin: round; stroke-linecap: butt; }
.table-wrap { overflow-x: auto; }
table { border-collapse: collapse; width: 100%; font-size: .9rem; margin: .5rem 0; }
caption { text-align: left; color: var(--muted); padding: .25rem 0; }
th, td { text-align: left; vertical-align: top; padding: .3rem .5rem; border-bottom: 1px solid var(--border); }
th { font-weight: 600; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
td.num { white-space: nowrap; }
td.num .prose { white-space: normal; }
td.site { white-space: nowrap; }
/* a cell breaks between words only: break-word, unlike anywhere, keeps a cell at least as wide as its
   longest word (an identifier such as GPT.forward or aten::addmm is never cut: a table too wide for its
   box scrolls in it, .table-wrap) and cuts a word only where a line could not hold it at all */
td { overflow-wrap: break-word; }
td code { white-space: pre-wrap; overflow-wrap: break-word; }
td code.device { white-space: nowrap; overflow-wrap: normal; }
td.wide { min-width: 14rem; }
details { margin: .5rem 0; }
summary { cursor: pointer; color: var(--link); }
.sev-error { color: var(--bad); font-weight: 600; }
.sev-warning { color: var(--warn); font-weight: 600; }
ul.candidates code { white-space: pre-wrap; overflow-wrap: break-word; }
.note { border-left: 4px solid var(--warn); padding: .5rem .75rem; background: var(--panel); }
footer { margin-top: 2rem; color: var(--muted); font-size: .85rem; border-top: 1px solid var(--border);
         padding-top: .5rem; }
/* a narrow window (800 px): the room of the page's margins and the cells' padding goes to the columns */
@media (max-width: 60rem) {
  main { padding: 1rem .75rem; }
  table { font-size: .85rem; }
  th, td { padding: .3rem .3rem; }
  td.wide { min-width: 9rem; }
}
@media print { details { display: block; } }
"""
