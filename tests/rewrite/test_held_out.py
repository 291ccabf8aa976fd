"""The held-out habit (issue 20): real code that none of the rules were written against, rewritten file by
file; bench/held_out/audit.py is the full audit (five pinned wheels), this is its CI subset: one package.

The wheel is fetched in the test's set-up with `pip download` (the package index is reachable wherever the
suite's set-up ran) and reused from ~/.cache/neuron-port-bench/wheels. What it holds: every rewritten file
parses and a second rewrite changes nothing, and the safe fixes that change a device test are no more than
bench/held_out/recorded.json says. A rule change that makes more device-test flips safe fails here until
the new edits are read (`audit.py --sample`) and recorded (`audit.py --record`), as bench/README.md says.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "trl==0.12.1"  # 103 findings, 5 safe device-test edits: small, and touched by the safety model


def load_audit():
    spec = importlib.util.spec_from_file_location("held_out_audit", ROOT / "bench" / "held_out" / "audit.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def audited(tmp_path_factory):
    audit = load_audit()
    folders = audit.build_corpus([PACKAGE], tmp_path_factory.mktemp("held-out"))
    return audit, audit.run_audit(folders)


def test_rewritten_held_out_files_parse_and_are_stable(audited):
    _, result = audited
    assert result["broken"] == []
    assert sum(result["findings"].values()) > 50  # the corpus was really read


def test_safe_device_test_edits_do_not_grow_unread(audited):
    audit, result = audited
    recorded = json.loads(audit.RECORDED.read_text())[PACKAGE]
    now = audit.totals(result)
    assert now["safe_device_test"] <= recorded["safe_device_test"], (
        "more safe fixes change a device test than were read and recorded:\n"
        + "\n".join(result["safe_device_test_edits"]))
    # A finding lost is as much a change as an edit gained: the record is refreshed when either moves.
    assert now["findings"] == recorded["findings"]


def test_device_test_spans_find_the_tests_a_flip_changes():
    audit = load_audit()
    text = (
        "import torch\n"
        "if x.is_cuda:\n    pass\n"
        "ok = device.type == 'cuda'\n"
        "d = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
        "name = 'cuda:0'\n"
    )
    lines = sorted(start[0] for start, _ in audit.device_test_spans(text))
    assert lines == [2, 4, 5]
