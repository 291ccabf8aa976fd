"""The ``process`` line of the events file (EVENTS.md): who wrote it (pid, rank, argv, torch, the
TorchNeuron release the op policy describes), how the process is doing (``status``, the uncaught
exception) and the run's token; and the unsupported-feature mode it reports."""

from __future__ import annotations

import os
import sys
import time

from . import durable, state

SCHEMA_VERSION = 1


def unsupported_mode() -> str:
    """NEURON_PORT_UNSUPPORTED: "raise" (default) or "record"."""
    m = os.environ.get("NEURON_PORT_UNSUPPORTED", "raise").strip().lower()
    return "record" if m in ("record", "record-only", "record_only", "warn", "0", "off") else "raise"


def process_info() -> dict:
    from .. import policy

    try:
        rel = policy.release()
    except Exception:  # noqa: BLE001
        rel = {}
    info = {
        "kind": "process", "schema": SCHEMA_VERSION, "simulator": "neuron-port", "pid": os.getpid(),
        "rank": _env_int("RANK"), "local_rank": _env_int("LOCAL_RANK"), "world_size": _env_int("WORLD_SIZE"),
        "argv": list(sys.argv), "cwd": os.getcwd(), "started": state.started, "written": time.time(),
        "status": state.status, "torchneuron_release": rel, "unsupported_mode": unsupported_mode(),
        "mode": state.mode,
    }
    try:
        import torch

        info["torch"] = torch.__version__
    except Exception:  # noqa: BLE001
        pass
    if os.environ.get(durable.TOKEN_ENV):
        info["token"] = os.environ[durable.TOKEN_ENV]
    if state.exception:
        info["exception"] = state.exception
    return info


def _env_int(name: str) -> int | None:
    v = os.environ.get(name)
    try:
        return int(v) if v is not None else None
    except ValueError:
        return None
