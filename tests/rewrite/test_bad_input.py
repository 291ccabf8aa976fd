"""The bad-input matrix: every case ends in a clear error or a correct rewrite, and nothing is lost."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from neuron_port.rewrite.engine import EngineOptions, transform_source
from neuron_port.rules.registry import all_rules

CUDA_LINE = "torch.cuda.synchronize()"


def rewrite_json(cli, cwd: Path, *extra: str) -> dict:
    result = cli("rewrite", "--output-format", "json", *extra, ".", cwd=cwd)
    return json.loads(result.stdout)


def test_syntax_error_is_reported_with_line_and_left_alone(tmp_path, cli):
    bad = tmp_path / "bad.py"
    bad.write_text("import torch\nx = torch.cuda.is_available(\ndef f(:\n")
    good = tmp_path / "good.py"
    good.write_text(f"import torch\n{CUDA_LINE}\n")
    before = bad.read_bytes()
    doc = rewrite_json(cli, tmp_path)
    assert bad.read_bytes() == before
    [error] = doc["errors"]
    assert error["path"] == "bad.py" and error["message"].startswith("bad.py:")
    assert "syntax error" in error["message"]
    assert "torch.neuron.synchronize()" in good.read_text()  # the run went on


def test_undecodable_bytes(tmp_path, cli):
    path = tmp_path / "latin.py"
    data = b"import torch\n# caf\xe9\ntorch.cuda.synchronize()\n"
    path.write_bytes(data)
    doc = rewrite_json(cli, tmp_path)
    assert path.read_bytes() == data
    assert doc["errors"][0]["message"].startswith("latin.py:2: cannot decode byte 0xe9")


def test_coding_cookie_is_respected(tmp_path, cli):
    path = tmp_path / "latin.py"
    data = "# -*- coding: latin-1 -*-\nimport torch\n# café\ntorch.cuda.synchronize()\n".encode("latin-1")
    path.write_bytes(data)
    doc = rewrite_json(cli, tmp_path)
    assert doc["errors"] == []
    assert path.read_bytes() == data.replace(b"torch.cuda.synchronize", b"torch.neuron.synchronize")


def test_bom_and_crlf_are_kept(tmp_path, cli):
    path = tmp_path / "win.py"
    data = b"\xef\xbb\xbfimport torch\r\n\r\nif torch.cuda.is_available():   \r\n    torch.cuda.synchronize()\r\n"
    path.write_bytes(data)
    os.chmod(path, 0o640)
    rewrite_json(cli, tmp_path)
    out = path.read_bytes()
    assert out == data.replace(b"cuda.is_available", b"neuron.is_available").replace(
        b"cuda.synchronize", b"neuron.synchronize")
    assert stat.S_IMODE(path.stat().st_mode) == 0o640


def test_read_only_file_is_not_touched(tmp_path, cli):
    path = tmp_path / "ro.py"
    path.write_text(f"import torch\n{CUDA_LINE}\n")
    os.chmod(path, 0o444)
    doc = rewrite_json(cli, tmp_path)
    assert path.read_text() == f"import torch\n{CUDA_LINE}\n"
    assert "read-only" in doc["errors"][0]["message"]
    assert doc["summary"]["fixes_applied"] == 0
    assert all(not f["fix"]["applied"] for f in doc["findings"])


def test_symlink_loop_and_outside_links(tmp_path, cli):
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "a.py").write_text(f"import torch\n{CUDA_LINE}\n")
    (tree / "loop").symlink_to(tree, target_is_directory=True)  # a folder link back to the root
    (tree / "self.py").symlink_to(tree / "self.py")  # a link to itself
    outside = tmp_path / "outside.py"
    outside.write_text(f"import torch\n{CUDA_LINE}\n")
    (tree / "ext.py").symlink_to(outside)
    (tree / "alias.py").symlink_to(tree / "a.py")  # inside the tree: same file, processed once
    doc = rewrite_json(cli, tree)
    assert [f["path"] for f in doc["files"]] == ["a.py"]
    assert outside.read_text() == f"import torch\n{CUDA_LINE}\n"
    assert "torch.neuron.synchronize()" in (tree / "a.py").read_text()
    assert (tree / "alias.py").is_symlink()
    assert any("outside the tree" in e["message"] for e in doc["errors"])


def test_empty_file(tmp_path, cli):
    (tmp_path / "empty.py").write_bytes(b"")
    doc = rewrite_json(cli, tmp_path)
    assert doc["errors"] == [] and doc["summary"]["files_scanned"] == 1
    assert (tmp_path / "empty.py").read_bytes() == b""


def test_binary_file_with_py_suffix(tmp_path, cli):
    (tmp_path / "blob.py").write_bytes(b"\x00\x01cuda\x00")
    doc = rewrite_json(cli, tmp_path)
    assert "not a text file" in doc["errors"][0]["message"]


def _generated_source(size: int) -> str:
    lines = ["import torch", ""]
    i = 0
    total = 0
    while total < size:
        chunk = f"def layer_{i}(x):\n    y = x * {i} + {i % 7}\n    return torch.relu(y)\n"
        if i % 500 == 0:
            chunk += f"torch.cuda.synchronize()  # checkpoint {i}\n"
        lines.append(chunk)
        total += len(chunk) + 1
        i += 1
    return "\n".join(lines) + "\n"


def test_five_megabyte_generated_file_gets_a_clear_error(tmp_path, cli):
    source = _generated_source(5 * 2**20)
    path = tmp_path / "big_generated.py"
    path.write_text(source)
    doc = rewrite_json(cli, tmp_path)
    assert path.read_text() == source
    [error] = doc["errors"]
    assert error["path"] == "big_generated.py"
    assert "5.0 MB is larger than the 2 MB limit" in error["message"] and "--max-file-size" in error["message"]


def test_large_generated_file_is_rewritten_when_allowed(tmp_path, cli):
    source = _generated_source(256 * 2**10)
    path = tmp_path / "gen.py"
    path.write_text(source)
    doc = rewrite_json(cli, tmp_path, "--max-file-size", "0.1")
    assert path.read_text() == source and "limit" in doc["errors"][0]["message"]
    doc = rewrite_json(cli, tmp_path, "--max-file-size", "0")
    assert doc["errors"] == []
    assert path.read_text() == source.replace("torch.cuda.synchronize()", "torch.neuron.synchronize()")
    assert doc["summary"]["fixes_applied"] == source.count("torch.cuda.synchronize()")


def test_trailing_whitespace_outside_rewritten_nodes_is_kept():
    source = "import torch  \n\n\nx = torch.cuda.device_count()   \n# trailing   \n   "
    outcome = transform_source(source, list(all_rules()), EngineOptions())
    assert outcome.code == source.replace("torch.cuda.device_count", "torch.neuron.device_count")
