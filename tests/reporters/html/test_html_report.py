"""`check --html FILE`: the real CLI on the GPT trainer fixture writes a self-contained page, which a real
headless Chromium (Debian's `chromium`, driven over the DevTools protocol by tests/browser.py) loads in light
and dark: no console error, no network request, every chart drawn with a non-zero size and readable colours.

The estimate parts are rendered from the real run's report: as `check` wrote it (its tokens-per-step spec could
not choose), and recomputed by `neuron-port estimate` with the token lookup named (prices, $ per million tokens,
the scaling chart's price panel). tests/reporters/html/data/estimate_sample.json is an `estimate` section written
before the scaling table, the validation and the collectives existed: an older report still renders.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from html.parser import HTMLParser
from pathlib import Path

import pytest

from browser import Browser, find_chromium
from conftest import FIXTURES, REPO, run_cli

pytestmark = pytest.mark.slow

SAMPLE_ESTIMATE = Path(__file__).parent / "data" / "estimate_sample.json"
RUNTIME_CHARTS = ["timeline", "shape-variance"]
ESTIMATE_CHARTS = ["estimate-families", "estimate-eager-compiled", "estimate-scaling", "estimate-memory"]
OLD_ESTIMATE_CHARTS = ["estimate-families", "estimate-eager-compiled", "estimate-memory"]  # no scaling section
HOSTILE_CODE = "x = '</td><script>alert(1)</script><img src=http://127.0.0.1:9/leak.png>'"


def needs_chromium() -> str:
    """Chromium's path; the test is skipped without it, except in CI, where it must run."""
    found = find_chromium()
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed: scripts/setup.sh installs it (apt-get install chromium)")
        pytest.skip("chromium is not installed (scripts/setup.sh installs it as root: apt-get install chromium)")
    return found


@pytest.fixture(scope="module")
def gpt_run(tmp_path_factory, sim_build):
    """One real `check --preview --html` run of the GPT trainer, with its JSON report saved beside."""
    root = tmp_path_factory.mktemp("html")
    project = root / "gpt_trainer"
    shutil.copytree(FIXTURES / "gpt_trainer", project)
    page, report = root / "report.html", root / "report.json"
    # `--tokens-per-step embedding` cannot choose between the token and position lookups: the page lists them
    result = run_cli("check", str(project), "--preview", "-q", "--html", str(page), "-o", str(report),
                     "--tokens-per-step", "embedding", "--", "python", "train.py", "--steps", "6", "--variable-length")
    assert result.returncode == 1, result.stderr  # the unrewritten tree keeps NP101 errors
    return root, page, report


def render_saved(report: Path, page: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "neuron_port.commands.html", str(report), "--html", str(page)],
                          capture_output=True, text=True, timeout=300)


class PageParts(HTMLParser):
    """What a self-contained page must not have, and the parts the tests look at."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def of(self, tag: str) -> list[dict]:
        return [attrs for name, attrs in self.tags if name == tag]


def parse(page: Path) -> PageParts:
    parts = PageParts()
    parts.feed(page.read_text(encoding="utf-8"))
    return parts


@pytest.fixture(scope="module")
def estimate_page(gpt_run):
    """The real run's report with its estimate recomputed for the token lookup (`neuron-port estimate`) and a
    hostile line of user code, rendered from JSON."""
    root, _, report = gpt_run
    document = json.loads(report.read_text())
    recomputed = run_cli("estimate", str(report), "--tokens-per-step", "embedding@transformer.wte",
                         "--output-format", "json")
    assert recomputed.returncode == 0, recomputed.stderr
    document["estimate"] = json.loads(recomputed.stdout)
    document["runtime"]["fallbacks"][0]["sites"][0]["code"] = HOSTILE_CODE
    saved = root / "with_estimate.json"
    saved.write_text(json.dumps(document))
    page = root / "with_estimate.html"
    result = render_saved(saved, page)
    assert result.returncode == 0, result.stderr
    return page


def test_check_html_writes_a_self_contained_page_of_the_run(gpt_run):
    root, page, report = gpt_run
    document = json.loads(report.read_text())
    parts = parse(page)
    text = page.read_text(encoding="utf-8")
    # loads nothing: no stylesheet or script files, no external images or frames, and a CSP that forbids them
    assert not parts.of("link") and not parts.of("iframe") and not parts.of("object")
    assert all("src" not in attrs for name, attrs in parts.tags if name in ("script", "img", "source"))
    assert not [a for a in parts.of("a") if not a.get("href", "").startswith(("#", "https://", "http://"))]
    [csp] = [m for m in parts.of("meta") if m.get("http-equiv") == "Content-Security-Policy"]
    assert "default-src 'none'" in csp["content"]
    ids = {attrs.get("id") for _, attrs in parts.tags}
    assert {"summary", "fallbacks", "timeline", "shapes", "estimate", "findings"} <= ids
    # what the page says is what the run recorded
    runtime = document["runtime"]
    assert f"{runtime['ops']['readiness']:.1%}" in text
    assert "aten::multinomial" in text and "model.py:137" in text
    charts = [attrs["data-chart"] for attrs in parts.of("svg") if attrs.get("role") == "img"]
    if "estimate" in document:  # once the cost model writes one, its charts are there too
        assert charts == RUNTIME_CHARTS + ESTIMATE_CHARTS
    else:
        assert charts == RUNTIME_CHARTS
        assert "This report has no estimate" in text
    # the same report saved as JSON renders to the same bytes: a second write changes nothing
    again = root / "again.html"
    result = render_saved(report, again)
    assert result.returncode == 0, result.stderr
    assert again.read_bytes() == page.read_bytes()


def chart_facts(page) -> dict:
    """Per chart: its box, accessible name, caption, data rows and the colours it was painted in."""
    return page.evaluate("""(() => {
      const rgb = c => (c.match(/[\\d.]+/g) || []).slice(0, 3).map(Number);
      const charts = [...document.querySelectorAll('svg')].map(svg => {
        const box = svg.getBoundingClientRect();
        const figure = svg.closest('figure');
        const text = svg.querySelector('text');
        const series = [...svg.querySelectorAll('path, use')].filter(
          e => (e.getAttribute('style') || '').includes('--series-') && !e.closest('defs'));  // defs: not drawn
        const seriesBoxes = series.map(e => e.getBBox()).filter(b => b.width > 0 && b.height > 0);
        // a line is painted by its stroke, a bar or a marker by its fill
        const paint = e => { const s = getComputedStyle(e); return s.fill === 'none' ? s.stroke : s.fill; };
        const fills = [...new Set(series.map(paint))].map(rgb);
        return {
          id: svg.dataset.chart, role: svg.getAttribute('role'), width: box.width, height: box.height,
          name: (document.getElementById(svg.getAttribute('aria-labelledby')) || {}).textContent || '',
          caption: figure && figure.querySelector('figcaption') ? figure.querySelector('figcaption').textContent : '',
          dataRows: figure ? figure.querySelectorAll('details table tbody tr').length : 0,
          text: text ? rgb(getComputedStyle(text).fill) : null,
          series: fills,
          seriesDrawn: seriesBoxes.length,
          panel: figure ? rgb(getComputedStyle(figure).backgroundColor) : null,
        };
      });
      return {charts, background: rgb(getComputedStyle(document.body).backgroundColor),
              scripts: document.scripts.length, body: document.body.textContent};
    })()""")


def contrast(a: list[float], b: list[float]) -> float:
    """WCAG contrast ratio of two sRGB colours."""
    def luminance(rgb):
        linear = [(c / 255) / 12.92 if c / 255 <= 0.04045 else ((c / 255 + 0.055) / 1.055) ** 2.4 for c in rgb]
        return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]
    high, low = sorted((luminance(a), luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


@pytest.mark.parametrize("which", ["run", "with_estimate"])
def test_the_page_renders_in_headless_chromium_light_and_dark(gpt_run, estimate_page, tmp_path, which):
    needs_chromium()
    page_file = gpt_run[1] if which == "run" else estimate_page
    expected = RUNTIME_CHARTS + (ESTIMATE_CHARTS if which == "with_estimate" else [])
    backgrounds = {}
    with Browser.start(tmp_path / "profile") as browser:
        for scheme in ("light", "dark"):
            page = browser.open(page_file.as_uri(), color_scheme=scheme)
            facts = chart_facts(page)
            assert page.problems() == [], (scheme, page.problems())
            if which == "run" and "estimate-families" in [c["id"] for c in facts["charts"]]:
                expected = RUNTIME_CHARTS + ESTIMATE_CHARTS
            assert [c["id"] for c in facts["charts"]] == expected
            for chart in facts["charts"]:
                where = (scheme, chart["id"])
                assert chart["role"] == "img" and chart["name"] and chart["caption"], where
                assert chart["width"] > 100 and chart["height"] > 100, where
                assert chart["dataRows"] > 0 and chart["seriesDrawn"] > 0, where
                # text and axes take the page's colour; every series colour keeps 3:1 against the panel
                assert contrast(chart["text"], chart["panel"]) >= 4.5, where
                assert chart["series"] and all(contrast(c, chart["panel"]) >= 3 for c in chart["series"]), where
            assert facts["scripts"] == 0
            backgrounds[scheme] = facts["background"]
            shot = page.screenshot(tmp_path / f"{which}-{scheme}.png")
            assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
            if which == "with_estimate":  # the user's code is shown as text, never run or fetched
                assert HOSTILE_CODE in facts["body"]
                assert "no published price: set one" in facts["body"]  # the Trainium3 rows
                # the text panel's facts: validated error, collectives, the largest cost's next step, scaling
                for words in ("validated error", "estimate / published", "not validated on hardware",
                              "collectives per step", "one rank: no collective", "Next step.", "Scaling over chips",
                              "h100-sxm $ per million tokens"):
                    assert words in facts["body"], words
    assert contrast(backgrounds["light"], backgrounds["dark"]) > 10
    print(f"screenshots: {tmp_path}")


def test_the_page_says_what_the_run_did_on_each_device(gpt_run):
    """The demotions table lists real demotions only, the int64 ops apart with what they mean; a GPU row is
    charged no NEFF compile; a tokens-per-step spec that cannot choose shows the lookups to pick from."""
    _, page, report = gpt_run
    document = json.loads(report.read_text())
    text = page.read_text(encoding="utf-8")
    runtime = document["runtime"]
    int64 = [d for d in runtime["demotions"] if d["dtype"] == "int64"]
    assert int64 and any(d["dtype"] == "float64" for d in runtime["demotions"])  # the run has both kinds
    demotions = text[text.index("<h3>dtype demotions</h3>"):]
    demotions = demotions[:demotions.index("</table>")]
    rows = re.findall(r"<tr>(.*?)</tr>", demotions)[1:]
    assert rows and all(re.match(r"<td>float64</td><td>float32</td>", row) for row in rows), rows
    assert "int64 ops:" in text and "Trainium computes int64 in 32 bits" in text
    # the compile table: the Trainium rows count NEFFs, the H100 row compiles none
    compile_table = text[text.index("<h3>Compile time</h3>"):]
    compile_table = compile_table[:compile_table.index("</table>")]
    [gpu_row] = [r for r in re.findall(r"<tr>(.*?)</tr>", compile_table) if "H100" in r]
    assert "no NEFF compile on a GPU (eager CUDA kernels)" in gpu_row and "min" not in gpu_row
    eager_neffs = document["estimate"]["work"]["eager_neffs"]
    kinds = {d["id"]: d["kind"] for d in document["estimate"]["devices"]}
    trainium = [r for r in document["estimate"]["per_device"] if kinds[r["device"]] == "trainium"]
    assert len(trainium) >= 2  # the like-for-like Trainium2 and Trainium3 rows
    assert sum(f">{eager_neffs:,}<" in r for r in re.findall(r"<tr>(.*?)</tr>", compile_table)) == len(trainium)
    # the lookups the spec could name, as the text report lists them
    error = document["estimate"]["steps"]["tokens_from"]["error"]
    assert "pick one" in error
    candidates = [line.split()[0] for line in error.splitlines()[1:]]
    assert len(candidates) == 2 and all(f"<li><code>{c} " in text for c in candidates), candidates


FIT_800 = """(() => {
  document.querySelectorAll('details').forEach(d => d.open = true);
  const page = document.documentElement;
  const smallest = [...document.querySelectorAll('svg.chart')].map(svg => {
    const sizes = [...svg.querySelectorAll('text')].map(t => {
      const m = t.getScreenCTM();
      return parseFloat(getComputedStyle(t).fontSize) * Math.hypot(m.a, m.b);
    });
    return [svg.dataset.chart, Math.min(...sizes)];
  });
  const wraps = [...document.querySelectorAll('table')].map(t => {
    const box = t.closest('.table-wrap');
    const heads = [...t.querySelectorAll('thead th')];
    return {heading: (box.previousElementSibling || {}).textContent || '',
            columns: heads.map(th => th.textContent),
            lastInside: heads[heads.length - 1].getBoundingClientRect().right
                        <= box.getBoundingClientRect().right + 1,
            scrolls: box.scrollWidth > box.clientWidth + 1, own: getComputedStyle(box).overflowX};
  });
  // a line that breaks between two letters or digits of a cell, a header or a piece of code: a word cut
  // in two (GPT.forwar|d); identifiers break after "_" or "." (<wbr>), prose between words
  const cut = [];
  const boxes_ = [...document.querySelectorAll('td, th, code')].filter(e => e.tagName !== 'CODE'
                                                                      || !e.closest('td, th'));
  for (const box of boxes_) {
    const walker = document.createTreeWalker(box, NodeFilter.SHOW_TEXT);
    let top = null, last = '';
    for (let n = walker.nextNode(); n; n = walker.nextNode()) {
      for (let i = 0; i < n.length; i++) {
        const range = document.createRange();
        range.setStart(n, i);
        range.setEnd(n, i + 1);
        const rect = range.getClientRects()[0];
        if (!rect) continue;
        const ch = n.data[i];
        if (top !== null && rect.top > top + 2 && /[A-Za-z0-9]/.test(last) && /[A-Za-z0-9]/.test(ch))
          cut.push(box.textContent.slice(0, 80));
        top = rect.top;
        last = ch;
      }
    }
  }
  // text drawn past its cell's edge
  const spilled = [...document.querySelectorAll('td, th')].filter(c => c.scrollWidth > c.clientWidth + 1)
    .map(c => c.textContent.slice(0, 80));
  const timeline = document.querySelector('svg[data-chart="timeline"]').getBoundingClientRect();
  const phases = [...document.querySelectorAll('svg[data-chart="timeline"] text')]
    .filter(t => /after optimizer step/.test(t.textContent)).map(t => {
      const box = t.getBoundingClientRect();
      return {text: t.textContent, inside: box.left >= timeline.left - 1 && box.right <= timeline.right + 1,
              size: box.height};
    });
  const boxes = [...document.querySelectorAll('svg.chart')].map(svg => {
    const wrap = svg.closest('.chart-wrap');
    return {id: svg.dataset.chart, right: svg.getBoundingClientRect().right,
            scrolls: wrap.scrollWidth > wrap.clientWidth + 1,
            panels: [...svg.querySelectorAll('text')].map(t => t.textContent)};
  });
  return {scrollWidth: page.scrollWidth, clientWidth: page.clientWidth, smallest, wraps, phases, boxes,
          cut: [...new Set(cut)], spilled};
})()"""


@pytest.mark.parametrize("which", ["run", "with_estimate"])
def test_the_page_fits_800_px_with_readable_charts(gpt_run, estimate_page, tmp_path, which):
    """At 800 px, every <details> open: nothing runs off the page (a table too wide for its box scrolls in
    its own box), the demotions table fits, and no chart text is drawn under 10 px."""
    needs_chromium()
    page_file = gpt_run[1] if which == "run" else estimate_page
    with Browser.start(tmp_path / "profile") as browser:
        page = browser.open(page_file.as_uri(), width=800)
        facts = page.evaluate(FIT_800)
        assert page.problems() == []
        page.screenshot(tmp_path / f"{which}-800.png")
    assert facts["scrollWidth"] <= facts["clientWidth"] == 800, facts
    assert len(facts["smallest"]) >= 2
    for chart, size in facts["smallest"]:
        assert size >= 10, (chart, size)
    assert all(w["own"] == "auto" for w in facts["wraps"])
    [demotions] = [w for w in facts["wraps"] if w["heading"] == "dtype demotions"]
    assert not demotions["scrolls"]
    # issue 38: no word cut in two, no text past its cell, and the shape-variance table and the estimate's
    # per-device table (whose last column was clipped) fit the page, every column inside their box
    assert facts["cut"] == [] and facts["spilled"] == [], (facts["cut"], facts["spilled"])
    fitting = [w for w in facts["wraps"]
               if "what varies" in w["columns"] or "step (lower – expected)" in w["columns"]]
    assert len(fitting) == 2, [w["columns"] for w in facts["wraps"]]
    assert all(not w["scrolls"] and w["lastInside"] for w in fitting), fitting
    # the generation after training is named on the timeline, inside the chart, at a readable size
    assert [p["text"] for p in facts["phases"]] == ["generation after optimizer step 6"], facts["phases"]
    assert all(p["inside"] and p["size"] >= 10 for p in facts["phases"]), facts["phases"]
    # the scaling chart: on the page, not scrolled in its box, with the step and (priced) $ panels
    [scaling] = [b for b in facts["boxes"] if b["id"] == "estimate-scaling"]
    assert scaling["right"] <= 800 and not scaling["scrolls"], scaling
    assert "expected ms per step" in scaling["panels"] and "chips" in scaling["panels"], scaling
    if which == "with_estimate":  # tokens per step named: the H100's shipped price gives $ per million tokens
        assert "$ per million tokens" in scaling["panels"], scaling
    print(f"800 px: {facts['smallest']}; tables scrolling in their box: "
          f"{[w['heading'][:40] for w in facts['wraps'] if w['scrolls']]}")


def test_the_timeline_labels_the_phases_of_the_run(gpt_run):
    """The generation after gpt_trainer's 6 training steps is a phase of its own on the timeline: shaded and
    named, its bars in their own series (not training's steady state), its rows named in the data table."""
    root, page, report = gpt_run
    text = page.read_text(encoding="utf-8")
    timeline = text[text.index('data-chart="timeline"'):text.index("</svg>", text.index('data-chart="timeline"'))]
    assert "generation after optimizer step 6" in timeline
    assert "generation after its warm-up" in timeline and "training after warm-up" in timeline
    assert ">G0<" in timeline or "G0" in timeline  # the generation's calls are numbered on their own
    data = text[text.index("The data of this chart"):]
    assert "<td>generation after optimizer step 6</td>" in data and "<td>training</td>" in data
    # the shape variance per site says which phase each line's shapes varied in
    shapes = text[text.index('id="shapes"'):]
    assert '<th scope="col">phase</th>' in shapes and "<td>generation after optimizer step 6</td>" in shapes


def test_the_browser_check_sees_console_errors_and_network_requests(tmp_path):
    """The checks above can fail: a page with an error and an outside image is caught."""
    needs_chromium()
    bad = tmp_path / "bad.html"
    bad.write_text("<!DOCTYPE html><html><body><p>x</p><script>console.error('drawn wrong')</script>"
                   "<img src='http://127.0.0.1:9/outside.png' alt=''></body></html>")
    with Browser.start(tmp_path / "profile") as browser:
        problems = browser.open(bad.as_uri()).problems()
    assert any("drawn wrong" in p for p in problems), problems
    assert any("network request: http://127.0.0.1:9/outside.png" in p for p in problems), problems


def test_html_target_problems_stop_check_before_the_command_runs(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (project / "touch.py").write_text("open('ran', 'w').close()\n")
    (tmp_path / "folder.html").mkdir()
    for target, says in ((tmp_path / "missing" / "page.html", "its folder does not exist"),
                         (tmp_path / "folder.html", "is a folder")):
        result = run_cli("check", str(project), "-q", "--html", str(target), "--", "python", "touch.py")
        assert result.returncode == 2, result.stderr
        assert str(target) in result.stderr and says in result.stderr
        assert not (project / "ran").exists()


def test_without_matplotlib_html_fails_clearly_and_check_never_imports_it(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (project / "touch.py").write_text("open('ran', 'w').close()\n")
    # matplotlib made unimportable the way a missing install is: ImportError at `import matplotlib`
    shadow = tmp_path / "shadow" / "matplotlib"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError(\"No module named 'matplotlib'\")\n")
    result = run_cli("check", str(project), "-q", "--html", str(tmp_path / "page.html"), "--", "python", "touch.py",
                     env={"PYTHONPATH": os.pathsep.join([str(shadow.parent), str(REPO)])})
    assert result.returncode == 2, result.stderr
    assert "pip install 'neuron-port[html]'" in result.stderr
    assert not (project / "ran").exists() and not (tmp_path / "page.html").exists()
    # without --html, check runs and never loads matplotlib
    traced = subprocess.run([sys.executable, "-X", "importtime", "-m", "neuron_port", "check", str(project), "-q",
                             "--", "python", "touch.py"], capture_output=True, text=True, timeout=300)
    assert traced.returncode == 0, traced.stderr[-2000:]
    assert (project / "ran").exists()
    # the trace is there, the option's module with it, and no matplotlib
    assert re.search(r"\|\s+neuron_port\.commands\.html$", traced.stderr, re.M), traced.stderr[-2000:]
    assert "matplotlib" not in traced.stderr


def test_saved_report_errors_name_the_file(tmp_path):
    page = tmp_path / "page.html"
    cases = [("broken.json", '{"schema_version": 1,\n  "runtime": }', "broken.json:2:14: not valid JSON"),
             ("list.json", "[1, 2]", "list.json: not a neuron-port report"),
             ("missing.json", None, "missing.json: cannot read the report"),
             # issue 33: deep nesting and a huge integer were internal errors (exit 1, a traceback)
             ("deep.json", "[" * 100_000 + "]" * 100_000, "deep.json: not a JSON report: nested too deeply"),
             ("huge.json", '{"schema_version": ' + "9" * 5000 + "}", "huge.json: not a JSON report: Exceeds")]
    for name, content, says in cases:
        source = tmp_path / name
        if content is not None:
            source.write_text(content)
        result = render_saved(source, page)
        assert result.returncode == 2 and says in result.stderr, result.stderr
        assert not page.exists()


def test_a_rewrite_report_and_a_partial_estimate_render(tmp_path):
    project = tmp_path / "project"
    shutil.copytree(FIXTURES / "gpt_trainer", project)
    rewrite = run_cli("rewrite", str(project), "--check", "--output-format", "json")
    saved = tmp_path / "rewrite.json"
    saved.write_text(rewrite.stdout)
    result = render_saved(saved, tmp_path / "rewrite.html")
    assert result.returncode == 0, result.stderr
    text = (tmp_path / "rewrite.html").read_text()
    assert "not run (static scan only)" in text and "NP101" in text and "<svg" not in text
    assert 'id="estimate"' not in text and "from a static scan" in text
    # an estimate with no per-device figures still shows its note and assumptions
    document = json.loads(rewrite.stdout)
    sample = json.loads(SAMPLE_ESTIMATE.read_text())
    document["estimate"] = {"version": 1, "note": sample["note"], "assumptions": sample["assumptions"]}
    saved.write_text(json.dumps(document))
    result = render_saved(saved, tmp_path / "partial.html")
    assert result.returncode == 0, result.stderr
    text = (tmp_path / "partial.html").read_text()
    assert sample["note"] in text and "dispatch_seconds_per_op" in text


def test_the_page_is_old_or_new_when_the_writer_is_killed(gpt_run, tmp_path):
    """SIGKILL at random points of `commands/html.py` (render + atomic write): the page is always whole."""
    _, page, report = gpt_run
    target = tmp_path / "page.html"
    started = time.monotonic()
    assert render_saved(report, target).returncode == 0
    duration = time.monotonic() - started
    new = target.read_bytes()
    old = b"<!DOCTYPE html><p>the previous page</p>\n"
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    outcomes = set()
    for _ in range(8):
        target.write_bytes(old)
        process = subprocess.Popen([sys.executable, "-m", "neuron_port.commands.html", str(report), "--html",
                                    str(target)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.3, 1.3) * duration)
        process.send_signal(signal.SIGKILL)
        process.wait()
        content = target.read_bytes()
        assert content in (old, new), (seed, content[:200])
        outcomes.add(content == new)
    print(f"seed {seed}; render+write {duration:.2f} s; outcomes seen (True = new page): {sorted(outcomes)}")


def test_long_runs_and_empty_figures_render_bounded(gpt_run):
    """A 5,000-step run with a new shape every step, an estimate with zero memory and no per-family time:
    the page renders, the timeline is grouped into at most about 60 bars, and the page stays small."""
    from neuron_port.reporters.html.page import render

    document = json.loads(gpt_run[2].read_text())
    runtime = document["runtime"]
    runtime["eager_compiles"][0]["first_seen"] = [{"step": s, "signatures": 1} for s in range(5000)]
    runtime["shapes"]["warmup_steps"] = 2
    estimate = json.loads(SAMPLE_ESTIMATE.read_text())
    for entry in estimate["per_device"]:
        entry["memory"]["peak_bytes"] = 0
        entry["seconds_by_family"] = {}
    document["estimate"] = estimate
    page = render(document)
    parts = PageParts()
    parts.feed(page)
    assert [a["data-chart"] for a in parts.of("svg")] == RUNTIME_CHARTS + OLD_ESTIMATE_CHARTS
    timeline = page[page.index('data-chart="timeline"'):page.index("</svg>", page.index('data-chart="timeline"'))]
    assert timeline.count("var(--series-1)") <= 70  # a path per group of steps (and the legend), not per step
    assert "(grouped)" in timeline
    # the data table shows the first 200 steps (training's 5,000 and the generation's after it)
    assert re.search(r"4,8\d\d more row\(s\) are in the JSON report", page)
    assert len(page) < 1_500_000


def test_help_names_the_option_and_the_extra():
    for result in (run_cli("check", "--help"),
                   subprocess.run([sys.executable, "-m", "neuron_port.commands.html", "--help"], capture_output=True,
                                  text=True, timeout=120)):
        assert result.returncode == 0, result.stderr
        assert "--html FILE" in result.stdout and "pip install 'neuron-port[html]'" in " ".join(result.stdout.split())
