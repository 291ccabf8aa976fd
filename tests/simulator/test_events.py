"""The per-process events file survives an uncaught exception and SIGTERM."""

import json
import signal

import pytest

from .conftest import PRELUDE

pytestmark = pytest.mark.slow


def _valid_jsonl(path):
    lines = path.read_text().splitlines()
    return [json.loads(line) for line in lines]


def test_events_after_uncaught_exception(run_sim):
    r = run_sim(PRELUDE + """
torch.linalg.qr(torch.randn(3, 3, device="neuron"))
raise ValueError("user bug")        # L-raise
""")
    assert r.proc.returncode == 1 and "ValueError: user bug" in r.proc.stderr
    ev = _valid_jsonl(r.event_files()[0])
    head = ev[0]
    assert head["status"] == "exception"
    assert head["exception"]["type"] == "ValueError"
    assert head["exception"]["site"]["line"] == r.line_of("# L-raise")
    assert any(e["kind"] == "fallback" and "linalg_qr" in e["op"] for e in ev)
    assert ev[-1]["complete"] is True


def test_events_after_sigterm(run_sim):
    r = run_sim(PRELUDE + """
import signal
torch.linalg.qr(torch.randn(3, 3, device="neuron"))
os.kill(os.getpid(), signal.SIGTERM)
import time; time.sleep(30)
""")
    assert r.proc.returncode == -signal.SIGTERM
    ev = _valid_jsonl(r.event_files()[0])
    assert ev[0]["status"] == "sigterm"
    assert any(e["kind"] == "fallback" and "linalg_qr" in e["op"] for e in ev)


def test_events_file_name_has_rank_and_pid(run_sim):
    r = run_sim(PRELUDE + "torch.ones(2, device='neuron').sum(); result({'pid': os.getpid()})", env={"RANK": "3"})
    files = r.event_files()
    assert [f.name for f in files] == [f"neuron-events-rank3-pid{r.result['pid']}.jsonl"]
    assert r.events()[0]["rank"] == 3


def test_events_after_hard_crash_keep_last_snapshot(run_sim):
    """SIGSEGV cannot run Python: the file holds the last periodic snapshot (status running)."""
    r = run_sim(PRELUDE + """
import ctypes, time
torch.linalg.qr(torch.randn(3, 3, device="neuron"))
time.sleep(1.2)
torch.randn(7, 7, device="neuron").cos()     # a new signature after the flush interval -> snapshot
ctypes.string_at(0)                          # SIGSEGV
""")
    assert r.proc.returncode == -signal.SIGSEGV
    ev = _valid_jsonl(r.event_files()[0])
    assert ev[0]["status"] == "running" and ev[-1]["complete"] is False
    assert any(e["kind"] == "fallback" and "linalg_qr" in e["op"] for e in ev)
