"""Locations print exactly as `path:line:col` (issue 22, item 1): rich would turn the `:100:` of
`t.py:100:5` into an emoji and `[red]` in a path into a style. Through the real CLI, in a pipe, for the
text output of `rewrite`, `check` (its static scan and its panel) and `estimate` (a saved report)."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import run_cli

RED = "p[red]"  # a folder whose name is rich markup


def cuda_script(lines: tuple[int, ...]) -> str:
    """A script with one `.cuda()` (column 5) on each of ``lines``."""
    source = ["import torch"]
    for number in range(2, max(lines) + 1):
        source.append("y = torch.zeros(3).cuda()" if number in lines else f"x{number} = {number}")
    return "\n".join(source) + "\n"


def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / RED).mkdir(parents=True)
    (root / "main.py").write_text(cuda_script((100, 1234)))
    (root / RED / "t.py").write_text(cuda_script((100, 1234)))
    return root


def expected(prefix: str) -> list[str]:
    return [f"{prefix}main.py:100:5: NP103", f"{prefix}main.py:1234:5: NP103",
            f"{prefix}{RED}/t.py:100:5: NP103", f"{prefix}{RED}/t.py:1234:5: NP103"]


def assert_locations(text: str, prefix: str) -> None:
    starts = [line.split(" NP103 ")[0] + " NP103" for line in text.splitlines() if " NP103 " in line]
    assert starts == expected(prefix), text
    assert "\N{HUNDRED POINTS SYMBOL}" not in text


def test_rewrite_prints_exact_locations(tmp_path):
    root = project(tmp_path)
    result = run_cli("rewrite", "--check", ".", cwd=root)
    assert result.returncode == 1, result.stderr
    assert_locations(result.stdout, "")
    result = run_cli("rewrite", "--diff", str(root))  # the findings on stderr, the patch on stdout
    assert_locations(result.stderr, f"{root}/")
    result = run_cli("rewrite", "--verbose", str(root))  # writing: the fixed findings listed
    assert_locations(result.stdout, f"{root}/")


def test_check_prints_exact_locations_and_the_command_as_typed(tmp_path):
    root = project(tmp_path)
    result = run_cli("check", ".", "--", "python", "-c", "print('[red]done[/red] :100:')", cwd=root)
    assert result.returncode == 1, result.stderr  # the static errors are left
    assert_locations(result.stdout, "")
    assert "[red]done[/red] :100:\n" in result.stdout  # the program's own output, passed on as it is
    assert "command: python -c print('[red]done[/red] :100:')" in result.stdout  # the panel


def test_check_error_names_the_config_line_exactly(tmp_path):
    root = tmp_path / "proj"
    root.mkdir()
    (root / "pyproject.toml").write_text("[tool.neuron-port]\n" + "\n" * 98 + "unknown-key = 1\n")
    result = run_cli("check", str(root), "--", "python", "-c", "pass")
    assert result.returncode == 2
    assert "pyproject.toml:100:" in result.stderr or "pyproject.toml:100 " in result.stderr, result.stderr
    assert "\N{HUNDRED POINTS SYMBOL}" not in result.stderr


def unboxed(text: str) -> str:
    """The text of a panel, its lines joined (a pipe is 80 columns wide: the panel wraps at spaces)."""
    return " ".join(line.strip(" \N{BOX DRAWINGS LIGHT VERTICAL}") for line in text.splitlines())


EMBEDDINGS = """import torch
emb = torch.nn.Embedding(10, 4).to("neuron")
pos = torch.nn.Embedding(10, 4).to("neuron")
idx = torch.zeros(2, 3, dtype=torch.long).to("neuron")


def lookup_tokens():
    return emb(idx)


def lookup_positions():
    return pos(idx[0])
"""


def test_estimate_prints_exact_sites(tmp_path, sim_build):
    root = tmp_path / "proj"
    (root / RED).mkdir(parents=True)
    lines = EMBEDDINGS.splitlines()
    # the token lookup on line 100, the position lookup on line 1234 of p[red]/model.py
    body = lines[:6] + [""] * 1228
    body[98:100] = lines[6:8]
    body[1232:1234] = lines[10:12]
    (root / RED / "model.py").write_text("\n".join(body) + "\n")
    assert (root / RED / "model.py").read_text().splitlines()[99] == "    return emb(idx)"
    assert (root / RED / "model.py").read_text().splitlines()[1233] == "    return pos(idx[0])"
    (root / "train.py").write_text("import sys\nsys.path.insert(0, 'p[red]')\nimport model\n"
                                   "for step in range(4):\n    (model.lookup_tokens().sum() + "
                                   "model.lookup_positions().sum()).backward()\n")
    report = tmp_path / "report.json"
    result = run_cli("check", str(root), "-o", str(report), "--", "python", "train.py")
    assert report.exists(), result.stderr[-3000:]
    sites = {s["site"] for s in json.loads(report.read_text())["estimate"]["work"]["token_sources"]}
    assert sites == {f"{RED}/model.py:100", f"{RED}/model.py:1234"}, sites

    for line in (100, 1234):
        shown = run_cli("estimate", str(report), "--tokens-per-step", f"embedding@model.py:{line}")
        assert shown.returncode == 0, shown.stderr
        assert f"at {RED}/model.py:{line} in " in unboxed(shown.stdout), shown.stdout
    ambiguous = run_cli("estimate", str(report), "--tokens-per-step", "embedding")  # lists both, exit 2
    assert ambiguous.returncode == 2, ambiguous.stderr
    for line in (100, 1234):
        assert f"\n  embedding@{RED}/model.py:{line} " in ambiguous.stderr, ambiguous.stderr
        assert f"(aten::embedding at {RED}/model.py:{line} in Embedding)" in ambiguous.stderr
