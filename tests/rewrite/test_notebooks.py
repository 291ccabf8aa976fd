"""Notebooks: code cells are rewritten, every other byte of the file is kept; magics and shell lines are
left alone; findings carry the cell (1-based position) and the line in it."""

from __future__ import annotations

import json

import jsonschema
import pytest

from conftest import FIXTURES
from neuron_port.rewrite.engine import EngineOptions, RewriteError
from neuron_port.rewrite.sources import SourceError
from neuron_port.rewrite.notebooks import source_spans, transform_notebook
from neuron_port.rules.registry import select_rules

RULES = select_rules()


def notebook(sources, indent=1, ensure_ascii=False, language="python", string_sources=False, outputs=None):
    cells = [{"cell_type": "markdown", "id": "m0", "metadata": {}, "source": ["# Title — ünïcode ✓\n", "text"]}]
    for i, src in enumerate(sources):
        lines = src.splitlines(keepends=True)
        cells.append({"cell_type": "code", "execution_count": i + 1, "id": f"c{i}", "metadata": {"scrolled": True},
                      "outputs": outputs if outputs is not None else
                      [{"name": "stdout", "output_type": "stream", "text": ["naïve → cuda\n"]}],
                      "source": src if string_sources else lines})
    doc = {"cells": cells,
           "metadata": {"kernelspec": {"display_name": "K", "language": language, "name": "k"},
                        "language_info": {"name": language}},
           "nbformat": 4, "nbformat_minor": 5}
    return json.dumps(doc, indent=indent, ensure_ascii=ensure_ascii) + "\n"


def run(text, **kw):
    return transform_notebook(text, RULES, EngineOptions(**kw), path="nb.ipynb")


NO_CUDA = ["import torch\nx = torch.ones(3, device='cpu')\n", "%matplotlib inline\n!ls\nprint(x.sum())"]


@pytest.mark.parametrize("indent, ensure_ascii", [(1, False), (2, True), (4, False)])
def test_round_trip_without_cuda_is_identical(indent, ensure_ascii):
    text = notebook(NO_CUDA, indent=indent, ensure_ascii=ensure_ascii)
    out = run(text)
    assert out.code == text and out.findings == [] and out.fixes_applied == 0


def test_round_trip_on_disk_with_cli(tmp_path, cli):
    path = tmp_path / "clean.ipynb"
    data = notebook(NO_CUDA).encode()
    path.write_bytes(data)
    result = cli("rewrite", ".", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert path.read_bytes() == data
    # also a notebook that mentions cuda only in markdown and outputs (the pre-filter lets it through)
    other = tmp_path / "mentions.ipynb"
    data2 = notebook(["print('hello')\n"]).replace("Title", "cuda notes").encode()
    other.write_bytes(data2)
    cli("rewrite", ".", cwd=tmp_path)
    assert other.read_bytes() == data2


CUDA = [
    "%pip install -q transformers\n!nvidia-smi\nimport torch\n"
    "device = 'cuda' if torch.cuda.is_available() else 'cpu'\nfiles = !ls *.pt\n",
    "model = model.cuda()\nwith torch.no_grad():\n    %time y = model(x.to('cuda'))\n",
    "%%bash\nCUDA_VISIBLE_DEVICES=0 python train.py --device cuda\n",
    "%%time\ntorch.cuda.synchronize()\n",
    "torch.cuda.empty_cache()",
]


def _outside_sources(text: str) -> list[str]:
    spans = [s for s in source_spans(text) if s]
    pieces, last = [], 0
    for start, end in spans:
        pieces.append(text[last:start])
        last = end
    pieces.append(text[last:])
    return pieces


@pytest.mark.parametrize("indent, ensure_ascii, string_sources",
                         [(1, False, False), (2, True, False), (1, False, True)])
def test_only_code_cell_sources_change(indent, ensure_ascii, string_sources):
    text = notebook(CUDA, indent=indent, ensure_ascii=ensure_ascii, string_sources=string_sources)
    out = run(text)
    assert out.code != text
    # byte for byte the same outside the source values, and the same number of them
    assert _outside_sources(out.code) == _outside_sources(text)
    before, after = json.loads(text), json.loads(out.code)
    for old, new in zip(before["cells"], after["cells"]):
        assert {k: v for k, v in old.items() if k != "source"} == {k: v for k, v in new.items() if k != "source"}
        assert type(old["source"]) is type(new["source"])
    src = ["".join(c["source"]) for c in after["cells"]]
    assert src[1] == ("%pip install -q transformers\n!nvidia-smi\nimport torch\n"
                      "device = 'neuron' if torch.neuron.is_available() else 'cpu'\nfiles = !ls *.pt\n")
    # a line magic is left alone as a whole, Python after `%time` included
    assert src[2] == "model = model.to(\"neuron\")\nwith torch.no_grad():\n    %time y = model(x.to('cuda'))\n"
    assert src[3] == CUDA[2]  # %%bash is not Python: untouched
    assert src[4] == "%%time\ntorch.neuron.synchronize()\n"
    assert src[5] == "torch.neuron.empty_cache()"  # no `import torch` added: cell 2 imports it
    if not ensure_ascii:
        assert "— ünïcode ✓" in out.code and "naïve → cuda" in out.code
    else:
        assert "\\u2014" in out.code and "\\u2192" in out.code
    # idempotent
    again = run(out.code)
    assert again.code == out.code and again.fixes_applied == 0


def test_findings_carry_cell_and_line():
    out = run(notebook(CUDA))
    where = {(f.cell, f.line, f.code) for f in out.findings}
    assert (2, 4, "NP101") in where and (2, 4, "NP201") in where
    assert (3, 1, "NP103") in where and not any(c == 3 and line == 3 for c, line, _ in where)
    assert (5, 2, "NP201") in where and (6, 1, "NP201") in where
    assert all(f.path == "nb.ipynb" and f.cell is not None for f in out.findings)
    assert not any(f.cell == 4 for f in out.findings)  # %%bash cell


def test_non_python_kernel_is_skipped():
    text = notebook(["x <- 'cuda'\n"], language="R")
    out = run(text)
    assert out.code == text and out.findings == []


def test_cell_that_does_not_parse_is_an_error_naming_the_cell():
    with pytest.raises(RewriteError, match=r"nb.ipynb\[cell 2\]:1:"):
        run(notebook(["x = = 'cuda'\n"]))


def test_not_a_notebook():
    with pytest.raises(SourceError, match="not a valid notebook"):
        run('{"cells": [cuda')
    with pytest.raises(SourceError, match="nbformat 3"):
        run('{"worksheets": [], "cuda": 1}')


def test_cli_reports_cells_and_validates_json(tmp_path, cli, report_schema):
    path = tmp_path / "nb.ipynb"
    text = notebook(CUDA)
    path.write_text(text, encoding="utf-8")
    result = cli("rewrite", "--check", "--output-format", "json", ".", cwd=tmp_path)
    doc = json.loads(result.stdout)
    jsonschema.validate(doc, report_schema)
    assert {f["cell"] for f in doc["findings"]} == {2, 3, 5, 6}
    assert path.read_text(encoding="utf-8") == text  # --check writes nothing
    text_out = cli("rewrite", "--check", ".", cwd=tmp_path).stdout
    assert "nb.ipynb[cell 2]:4:" in text_out
    cli("rewrite", ".", cwd=tmp_path)
    assert path.read_text(encoding="utf-8") != text
    assert cli("rewrite", "--diff", ".", cwd=tmp_path).stdout == ""


def test_fixture_notebook_keeps_everything_but_sources():
    text = (FIXTURES / "hf_finetune" / "explore.ipynb").read_text(encoding="utf-8")
    out = run(text)
    assert _outside_sources(out.code) == _outside_sources(text)
    assert "%pip install -q transformers" in out.code and "!nvidia-smi" in out.code
