"""Property: `neuron-port rewrite` on a random tree of valid, invalid and CUDA-bearing files, with random line
endings and encodings, leaves every file either as it was or exactly as the engine rewrites that file on its
own (the public API, one file in a copy), and a second run changes nothing (issue 12)."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import run_cli as neuron_port
from neuron_port.api import Settings, rewrite

# (name, lines): the body of a file, without line endings; "é" appears where the encoding may matter
SNIPPETS = {
    "plain": ["import os", "", "def greet(name):", "    # café au lait", "    return f'hello {name}'"],
    "cuda_model": ["import torch", "import torch.nn as nn", "", "model = nn.Linear(4, 2).cuda()",
                   "x = torch.randn(3, 4, device='cuda')  # entrée", "y = model(x)"],
    "cuda_checks": ["import torch", "", "if torch.cuda.is_available():", "    device = torch.device('cuda:0')",
                    "else:", "    device = torch.device('cpu')", "torch.cuda.synchronize()"],
    "amp": ["import torch", "scaler = torch.cuda.amp.GradScaler()", "with torch.cuda.amp.autocast():",
            "    pass", "torch.backends.cudnn.benchmark = True"],
    "invalid": ["import torch", "def broken(:", "    x = torch.zeros(2).cuda()"],
    "empty": [],
}
ENDINGS = {"lf": "\n", "crlf": "\r\n", "cr": "\r"}
ENCODINGS = ("utf-8", "utf-8-sig", "latin-1")

files = st.lists(
    st.tuples(
        st.sampled_from(sorted(SNIPPETS)),
        st.sampled_from(sorted(ENDINGS) + ["mixed"]),
        st.sampled_from(ENCODINGS),
        st.booleans(),  # the last line ends with a line ending
        st.randoms(use_true_random=False),
    ),
    min_size=1, max_size=6,
)


def file_bytes(snippet: str, ending: str, encoding: str, final_newline: bool, rng) -> bytes:
    lines = list(SNIPPETS[snippet])
    if encoding == "latin-1":
        lines.insert(0, "# -*- coding: latin-1 -*-")
    if not lines:
        return b"\xef\xbb\xbf" if encoding == "utf-8-sig" else b""
    endings = [ENDINGS[rng.choice(sorted(ENDINGS))] if ending == "mixed" else ENDINGS[ending] for _ in lines]
    if not final_newline:
        endings[-1] = ""
    return "".join(line + end for line, end in zip(lines, endings)).encode(encoding)


def engine_output(path: Path, data: bytes) -> bytes:
    """What the engine makes of this one file on its own: the public API on a copy."""
    with tempfile.TemporaryDirectory() as folder:
        copy = Path(folder) / path.name
        copy.write_bytes(data)
        rewrite([copy], Settings(), write=True, use_cache=False, jobs=1)
        return copy.read_bytes()


def run_cli(tree: Path) -> subprocess.CompletedProcess:
    return neuron_port("rewrite", "-q", "--no-cache", "-j", "2", str(tree))


def snapshot(tree: Path) -> dict[str, bytes]:
    return {p.relative_to(tree).as_posix(): p.read_bytes() for p in sorted(tree.rglob("*.py"))}


@settings(max_examples=10, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(files)
def test_every_file_is_unchanged_or_the_engines_output_and_a_second_run_changes_nothing(specs):
    with tempfile.TemporaryDirectory() as folder:
        tree = Path(folder) / "project"
        originals: dict[str, bytes] = {}
        for i, (snippet, ending, encoding, final_newline, rng) in enumerate(specs):
            rel = f"pkg{i % 2}/m{i}_{snippet}.py"
            originals[rel] = file_bytes(snippet, ending, encoding, final_newline, rng)
            (tree / rel).parent.mkdir(parents=True, exist_ok=True)
            (tree / rel).write_bytes(originals[rel])
        expected = {rel: engine_output(tree / rel, data) for rel, data in originals.items()}

        first = run_cli(tree)
        assert first.returncode in (0, 1), first.stderr
        after = snapshot(tree)
        for rel, data in after.items():
            what = f"{rel} ({specs})\n{first.stderr}"
            assert data in (originals[rel], expected[rel]), what
            assert data == expected[rel], what  # a file the engine rewrites on its own is rewritten in the tree
            if originals[rel] != expected[rel]:
                # the edit keeps the file's encoding and its line endings outside the edited lines
                assert data.startswith(b"\xef\xbb\xbf") == originals[rel].startswith(b"\xef\xbb\xbf"), what
                assert data.endswith((b"\n", b"\r")) == originals[rel].endswith((b"\n", b"\r")), what

        second = run_cli(tree)
        assert second.returncode in (0, 1), second.stderr
        assert snapshot(tree) == after, "a second run changed files"
        assert not [p for p in tree.rglob("*") if p.name.endswith(".tmp")], "a temp file was left"
        shutil.rmtree(tree)
