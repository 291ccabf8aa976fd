"""docs/rules/ is generated from the registry (scripts/generate_rule_docs.py) and checked in: a page that
differs from what `neuron-port explain` prints fails here. The links into it resolve, and no rule cites a
file outside the project."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

from conftest import REPO

SCRIPT = REPO / "scripts" / "generate_rule_docs.py"


def test_checked_in_pages_match_the_registry():
    result = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, "stale rule docs (run scripts/generate_rule_docs.py):\n" + result.stderr


def test_check_names_a_stale_page_and_generation_restores_it(tmp_path):
    """On a copy of the checkout: an edited page fails --check by name; generating writes it back."""
    copy = tmp_path / "repo"
    for folder in ("neuron_port", "rules", "scripts", "docs"):
        shutil.copytree(REPO / folder, copy / folder, ignore=shutil.ignore_patterns("__pycache__"))
    page = copy / "docs" / "rules" / "NP101.md"
    page.write_text(page.read_text() + "\nedited by hand\n")
    (copy / "docs" / "rules" / "NP999.md").write_text("# no such rule\n")
    script = copy / "scripts" / "generate_rule_docs.py"
    check = subprocess.run([sys.executable, str(script), "--check"], capture_output=True, text=True, timeout=300)
    assert check.returncode == 1
    assert "docs/rules/NP101.md: stale" in check.stderr and "docs/rules/NP999.md: no such rule" in check.stderr
    assert subprocess.run([sys.executable, str(script)], capture_output=True, timeout=300).returncode == 0
    assert page.read_text() == (REPO / "docs" / "rules" / "NP101.md").read_text()
    assert not (copy / "docs" / "rules" / "NP999.md").exists()
    assert subprocess.run([sys.executable, str(script), "--check"], timeout=300).returncode == 0


def test_page_is_what_explain_prints(cli):
    explained = cli("explain", "NP101")
    assert explained.returncode == 0, explained.stderr
    assert explained.stdout.strip() in (REPO / "docs" / "rules" / "NP101.md").read_text()


def test_sarif_help_uri_and_readme_link_resolve_to_pages():
    # no public home yet (reporters/sarif.py PROJECT_HOME): the helpUri a configured home gives
    from neuron_port.reporters.sarif import rule_descriptor
    from neuron_port.rules.registry import all_rules

    described = [rule_descriptor(r, home="https://example.org/neuron-port") for r in all_rules()]
    prefix = "https://example.org/neuron-port/blob/main/"
    assert described and all(d["helpUri"].startswith(prefix) for d in described)
    uris = [d["helpUri"].removeprefix(prefix) for d in described]
    for path in uris:
        assert (REPO / path).is_file(), path
    readme_links = re.findall(r"\]\((docs/rules/[^)]+)\)", (REPO / "README.md").read_text())
    assert readme_links and all((REPO / link).is_file() for link in readme_links)


def test_no_rule_cites_a_file_outside_the_project(cli):
    for page in sorted((REPO / "docs" / "rules").glob("*.md")):
        assert "shared/" not in page.read_text() and "torchneuron.md" not in page.read_text(), page.name
    for source in sorted((REPO / "rules").rglob("*.py")):
        assert "shared/" not in source.read_text(), source
    bad_instance = cli("rewrite", "--instance", "trn3.48xlarge", "--check", ".", cwd=REPO / "docs")
    assert bad_instance.returncode == 2
    assert "shared/" not in bad_instance.stderr and "torchneuron.md" not in bad_instance.stderr
    assert "https://" in bad_instance.stderr


def test_explain_prints_markdown_without_rest_backticks(cli):
    """`explain` and the generated pages are Markdown: `code`, not reST's ``code`` (issue 38 item 2)."""
    explained = cli("explain", "NP103")
    assert explained.returncode == 0, explained.stderr
    prose = re.sub(r"^```.*?^```$", "", explained.stdout, flags=re.M | re.S)
    assert "``" not in prose and "`.cuda()`" in prose, explained.stdout
    pages = sorted((REPO / "docs" / "rules").glob("NP*.md"))
    assert pages and not [p.name for p in pages
                          if "``" in re.sub(r"^```.*?^```$", "", p.read_text(), flags=re.M | re.S)]
