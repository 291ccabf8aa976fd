"""How each torchrun worker ended, as torchrun's own process saw it (neuron_backend/distributed/launcher.py):
``neuron-workers-pid<PID>.jsonl`` in the events folder, one ``worker_exit`` line per worker (EVENTS.md
"Worker ends"). A line of another run (its token) or not of this shape is skipped."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

WORKERS_NAME = re.compile(r"^neuron-workers-pid\d+\.jsonl$")


@dataclass(frozen=True)
class WorkerExit:
    """A worker that ended: when (``ended``, epoch seconds), with which exit code or signal, and whether
    torchrun had stopped it (its SIGTERM to the other workers after a failure)."""

    pid: Optional[int]
    rank: Optional[int]
    ended: Optional[float]
    exit_code: Optional[int] = None
    signal: Optional[str] = None  # "SIGKILL"
    signal_number: Optional[int] = None
    stopped_by_launcher: bool = False

    def how(self) -> Optional[str]:
        """How it failed ("was killed by SIGKILL (signal 9)", "exited with code 3 ..."); None for a clean exit."""
        if self.signal is not None:
            number = f" (signal {self.signal_number})" if self.signal_number is not None else ""
            return f"was killed by {self.signal}{number}"
        if self.exit_code:
            return f"exited with code {self.exit_code} without a Python exception"
        return None


def _int(value: object) -> Optional[int]:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def read_worker_exits(folder: Path, token: Optional[str] = None) -> list[WorkerExit]:
    """The worker ends recorded in ``folder`` (of the run with ``token``), in the order they ended."""
    out: list[WorkerExit] = []
    if not folder.is_dir():
        return out
    for path in sorted(p for p in folder.iterdir() if WORKERS_NAME.match(p.name)):
        try:
            lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            continue
        for line in lines:
            try:
                data = json.loads(line)
            except ValueError:
                continue
            if not isinstance(data, dict) or data.get("kind") != "worker_exit":
                continue
            if token is not None and data.get("token") != token:
                continue
            ended = data.get("ended")
            out.append(WorkerExit(
                pid=_int(data.get("pid")), rank=_int(data.get("rank")),
                ended=float(ended) if isinstance(ended, (int, float)) and not isinstance(ended, bool) else None,
                exit_code=_int(data.get("exit_code")),
                signal=data.get("signal") if isinstance(data.get("signal"), str) else None,
                signal_number=_int(data.get("signal_number")),
                stopped_by_launcher=data.get("stopped_by_launcher") is True))
    return sorted(out, key=lambda w: (w.ended is None, w.ended or 0.0))
