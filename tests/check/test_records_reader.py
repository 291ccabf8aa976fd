"""The reader of the crash-proof records (neuron_port/check/events/recovery.py) on files written in the
format EVENTS.md documents: rebuilt events, the run's token, and files or lines it ignores (named)."""

from __future__ import annotations

import json
import struct
from pathlib import Path

from neuron_port.check.events import (
    DemotionEvent,
    FallbackEvent,
    OpEvent,
    UnsupportedEvent,
    read_events,
    run_environment,
)

SITE = {"file": "/work/proj/train.py", "line": 7, "function": "<module>", "code": "y = qr(x)"}
PROCESS = {"kind": "process", "schema": 1, "pid": 77, "rank": None, "status": "running", "records_format": 1,
           "explicit_ops": ["aten::view", "aten::_copy_from"]}


def counters_bytes(slots: list[int], token: str = "", clock: tuple[int, int] = (3, 4),
                   explicit: tuple[int, ...] = (5, 6)) -> bytes:
    header = bytearray(4096)
    header[0:8] = b"NPRECORD"
    struct.pack_into("<IIqqqq", header, 8, 1, 4096, 77, 8192, *clock)
    header[64:64 + len(token)] = token.encode()
    struct.pack_into(f"<{len(explicit)}q", header, 128, *explicit)
    return bytes(header) + struct.pack(f"<{len(slots)}q", *slots)


def write_records(folder: Path, lines: list, slots: list[int], token: str = "", tag: str = "norank-pid77") -> None:
    folder.mkdir(exist_ok=True)
    text = "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines)
    (folder / f"neuron-records-{tag}.journal").write_text(text)
    (folder / f"neuron-records-{tag}.counters").write_bytes(counters_bytes(slots, token))


JOURNAL = [
    PROCESS,
    {"kind": "sighting", "seq": 0, "site": SITE, "optimizer_step": 0, "forward": 1},
    {"kind": "signature", "slot": 0, "seq": 0, "op": "aten::linalg_qr", "policy": "fallback", "dtypes": [],
     "signature": ["f32[8,8]", "'reduced'"]},
    {"kind": "signature", "slot": 1, "seq": 0, "op": "aten::mul.Tensor", "policy": "native", "dtypes": ["float64"],
     "signature": ["f64[8,8]", "2"]},
    {"kind": "unsupported", "feature": "sparse", "op": "aten::to_sparse", "message": "m", "error": "E",
     "action": "recorded", "count": 1, "site": SITE, "count_slot": 2},
]


def test_events_are_rebuilt_with_the_counts_of_the_counters_file(tmp_path):
    write_records(tmp_path, JOURNAL, [5, 9, 4])
    notes: list[str] = []
    [process] = read_events(tmp_path, on_note=notes.append)
    assert process.rebuilt and process.process is not None and process.process.pid == 77
    ops = {e.op: e.calls for e in process.events if isinstance(e, OpEvent)}
    assert ops == {"aten::linalg_qr": 5, "aten::mul.Tensor": 9}
    [fallback] = [e for e in process.events if isinstance(e, FallbackEvent)]
    assert fallback.calls == 5 and fallback.sites[0].site.line == 7
    [demotion] = [e for e in process.events if isinstance(e, DemotionEvent)]
    assert (demotion.dtype, demotion.calls, demotion.signatures) == ("float64", 9, 1)
    [unsupported] = [e for e in process.events if isinstance(e, UnsupportedEvent)]
    assert unsupported.count == 4
    assert process.summary is not None and (process.summary.op_calls, process.summary.complete) == (14, False)
    assert (process.summary.optimizer_steps, process.summary.forwards) == (3, 4)
    assert notes == ["neuron-records-norank-pid77.journal: the process ended without a complete snapshot: its "
                     "events were rebuilt from its crash-proof records"]


def test_a_complete_snapshot_wins_over_the_records(tmp_path):
    write_records(tmp_path, JOURNAL, [5, 9, 4])
    (tmp_path / "neuron-events-norank-pid77.jsonl").write_text(
        json.dumps({"kind": "process", "pid": 77, "status": "exited"}) + "\n"
        + json.dumps({"kind": "summary", "op_calls": 1, "complete": True}) + "\n")
    [process] = read_events(tmp_path, on_note=None)
    assert not process.rebuilt and process.summary.op_calls == 1


def test_a_cut_last_line_and_bad_lines_are_named(tmp_path):
    write_records(tmp_path, [*JOURNAL, "[1, 2]", {"kind": "signature", "slot": "x", "op": "a", "policy": "native"}],
                  [5, 9, 4])
    with open(tmp_path / "neuron-records-norank-pid77.journal", "a") as f:
        f.write('{"kind": "sighting", "se')
    [process] = read_events(tmp_path, on_note=None)
    assert sum(e.calls for e in process.events if isinstance(e, OpEvent)) == 14
    assert process.notes[:3] == (
        "neuron-records-norank-pid77.journal:6: ignored: not an object: list",
        "neuron-records-norank-pid77.journal:7: ignored: slot: expected an integer, got str 'x'",
        "neuron-records-norank-pid77.journal:8: ignored: the last line is cut (the process died writing it)")


def test_a_counters_file_that_is_not_one_gives_no_counts_and_a_note(tmp_path):
    write_records(tmp_path, JOURNAL, [5, 9, 4])
    (tmp_path / "neuron-records-norank-pid77.counters").write_bytes(b"garbage" * 10)
    [process] = read_events(tmp_path, on_note=None)
    assert [e for e in process.events if isinstance(e, OpEvent)] == []
    assert "neuron-records-norank-pid77.counters: ignored: not a counters file of the simulator (no NPRECORD " \
           "header)" in process.notes


def test_records_of_another_run_are_ignored_with_the_token(tmp_path):
    env, token = run_environment(tmp_path)
    assert env == {"NEURON_PORT_EVENTS_DIR": str(tmp_path), "NEURON_PORT_EVENTS_TOKEN": token}
    write_records(tmp_path, JOURNAL, [5, 9, 4], token=token, tag="rank0-pid1")
    write_records(tmp_path, JOURNAL, [5, 9, 4], token="an-earlier-run", tag="rank0-pid2")
    (tmp_path / "neuron-events-rank0-pid3.jsonl").write_text(
        json.dumps({"kind": "process", "pid": 3, "token": "an-earlier-run"}) + "\n")
    assert [p.path.name for p in read_events(tmp_path, token=token, on_note=None)] == [
        "neuron-records-rank0-pid1.journal"]
    assert len(read_events(tmp_path, on_note=None)) == 3  # without a token, every process
