"""Device work a run's counts do not hold, found in (or missing from) its events folder: the report says so
(NP912) instead of reading lost records as "no op reached the neuron device".

- The folder is gone when the command ends (the program, or a process it started, removed it): every
  process's snapshot and records went with it, so nothing can be said about what ran on the device.
- A forked child (a ``multiprocessing`` fork, a DataLoader worker) writes no snapshot: it keeps records of
  its own (neuron_backend/EVENTS.md, "Records": a journal whose ``process`` line has ``forked_from`` and a
  counters file counting from zero at the fork). When they count any call, the child used the device, and
  that work is not in the run's counts (the reader does not rebuild a child from its parent's signatures).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from neuron_port.check.events.recovery import RECORDS_NAME, read_counters

FOLDER_REMOVED = "folder_removed"
FORKED_CHILD = "forked_child"


@dataclass(frozen=True)
class LostRecords:
    """Work on the device the counts miss: the whole folder's, or one forked child's."""

    reason: str  # folder_removed | forked_child
    pid: Optional[int] = None  # the forked child
    parent_pid: Optional[int] = None
    rank: Optional[int] = None  # as the child inherited it (RANK of its parent)
    argv: tuple[str, ...] = ()
    calls: int = 0  # the child's device calls its counters file holds

    def describe(self) -> str:
        """What was lost, for NP912's message and the text report."""
        if self.reason == FOLDER_REMOVED:
            return ("the events folder ($NEURON_PORT_EVENTS_DIR) was removed while the command ran: the records of "
                    "every process that used the neuron device went with it, so this run's device work is "
                    "missing from the counts (nothing below says what ran on the device)")
        command = " ".join(self.argv)
        return (f"process {self.pid}, forked from process {self.parent_pid}"
                + (f" ({command[:120]})" if command else "")
                + f", made {self.calls:,} call(s) on the neuron device that are missing from the counts "
                  "(a forked child writes no events of its own)")

    def to_json(self) -> dict[str, Any]:
        return {"reason": self.reason, "pid": self.pid, "parent_pid": self.parent_pid, "rank": self.rank,
                "argv": list(self.argv), "calls": self.calls, "message": self.describe()}


def lost_records(folder: Path, token: Optional[str] = None) -> list[LostRecords]:
    """What the run's counts miss: the folder itself when it is gone, else each forked child of this run
    (``token``) whose records count a call."""
    if not folder.is_dir():
        return [LostRecords(FOLDER_REMOVED)]
    lost = []
    for journal in sorted(folder.glob("neuron-records-*.journal")):
        if not RECORDS_NAME.match(journal.name):
            continue
        process = _process_line(journal)
        if process is None or not _integer(process.get("forked_from")):
            continue
        counters = read_counters(journal.with_suffix(".counters"), [])
        if counters is None or (token and counters.token != token):
            continue
        calls = sum(c for c in counters.explicit if c > 0) + sum(c for c in counters.slots if c > 0)
        if calls:
            argv = process.get("argv")
            lost.append(LostRecords(FORKED_CHILD, pid=_integer(process.get("pid")),
                                    parent_pid=_integer(process.get("forked_from")),
                                    rank=_integer(process.get("rank")),
                                    argv=tuple(str(a) for a in argv) if isinstance(argv, list) else (), calls=calls))
    return lost


def _process_line(journal: Path) -> Optional[dict[str, Any]]:
    """The journal's first line when it is a ``process`` line (the child writes it at the fork)."""
    try:
        with journal.open(encoding="utf-8", errors="replace") as f:
            first = f.readline(1 << 20)
        data = json.loads(first)
    except (OSError, ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) and data.get("kind") == "process" else None


def _integer(value: Any) -> Optional[int]:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
