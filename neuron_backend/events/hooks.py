"""How events get in and out: the callbacks the C++ core calls and the process's exit / exception /
SIGTERM hooks, connected by ``install()``.

Hot path: none of this runs per op. The C++ core calls ``site_callback`` once per new (op,
signature) and ``unsupported_callback`` when an unsupported feature is hit. The step clock
(``steps.py``) runs once per optimizer step and twice per module call, never per op.
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
import threading
import time

from . import durable, loaders, sigterm, sites, state, steps
from .aggregate import load_enums
from .process import process_info, unsupported_mode
from .writer import events_path, flush, maybe_flush

_installed = False


# ---------------------------------------------------------------- callbacks from C++
def site_callback() -> int:
    """A new signature: record its first sighting (site, module, step clock); return its sequence number."""
    try:
        # called from C++: in autograd's device thread there is no Python caller frame at all
        sid = sites.site_id(sites.user_site(sys._getframe(0)), steps.current_module())
        i = sites.add_sighting(sid)
        seen = sites.sighting(i)
        durable.sighting(i, sites.site_of(sid), steps.optimizer_step, steps.forward, seen[3], seen[4])
        maybe_flush()
        return i
    except Exception:  # noqa: BLE001 - never break an op because of accounting
        return -1


def unsupported_callback(feature: str, op: str, message: str) -> bool:
    """Record an unsupported-feature event; return True if the caller must raise."""
    try:
        from .. import policy

        site = sites.user_site(sys._getframe(0))
        sid = sites.site_id(site)
        raise_ = unsupported_mode() == "raise"
        err = policy.unsupported_feature(feature).get("error", "RuntimeError")
        with state.lock:
            ev = state.unsupported.get((feature, op, sid))
            if ev is None:
                ev = {"kind": "unsupported", "feature": feature, "op": op,
                      "message": "[neuron-port simulator] " + message, "error": err,
                      "action": "raised" if raise_ else "recorded", "count": 0, "site": site}
                state.unsupported[(feature, op, sid)] = ev
                state.unsupported_slots[(feature, op, sid)] = slot = durable.new_counter()
                durable.append({**ev, "count_slot": slot})
            ev["count"] += 1
            durable.add(state.unsupported_slots[(feature, op, sid)])
        flush()
        return raise_
    except Exception:  # noqa: BLE001
        return True


def unsupported(feature: str, op: str, message: str, error: type[BaseException] = NotImplementedError) -> None:
    """Python-level unsupported feature (forward AD, nested tensors, ...): record, then raise unless record mode."""
    if unsupported_callback(feature, op, message):
        raise error("[neuron-port simulator] " + message)


# ---------------------------------------------------------------- process hooks
def _atexit() -> None:
    flush("exited" if state.status == "running" else state.status)
    if sites.device_backward_seen:  # let autograd's device threads release the last graph while Python is alive:
        time.sleep(0.05)  # finalizing under them aborts the process (pytorch/pytorch#190489, any non-CPU device)


def _excepthook(exc_type, exc, tb):
    import traceback

    frames = traceback.extract_tb(tb)
    user = next((fr for fr in reversed(frames) if not sites.is_internal(os.path.abspath(fr.filename))), None)
    state.exception = {"type": exc_type.__name__, "message": str(exc)[:2000], "time": time.time()}
    if user is not None:
        state.exception["site"] = {"file": os.path.abspath(user.filename), "line": user.lineno,
                                   "function": user.name, "code": (user.line or "").strip()}
    flush("exception")
    _prev_excepthook(exc_type, exc, tb)


_prev_excepthook = sys.excepthook
_prev_sigterm = None


def _sigterm(signum, frame):
    sigterm.handler_started()
    _flush_sigterm()
    prev = _prev_sigterm
    if callable(prev):
        prev(signum, frame)
        return
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)


def _flush_sigterm() -> None:
    # a process already ending from its uncaught exception (torchrun stops the other ranks when one fails)
    # keeps "exception": the exception is how it failed, the signal only cut its shutdown short
    flush("exception" if state.status == "exception" else "sigterm")


def _flush_sigterm_from_watcher() -> None:
    # sigterm.py's thread, the main thread stuck in native code: a lock it holds is given up on
    if state.lock.acquire(timeout=2.0):
        try:
            _flush_sigterm()
        finally:
            state.lock.release()


def _records_of_forked_child() -> None:
    """A forked child (a DataLoader worker, a ``multiprocessing`` fork) keeps counting in private copies of its
    parent's counters; it gets records of its own (its process line says ``forked_from``), so that the device
    work of a child, which writes no snapshot, is never lost without a word (EVENTS.md, "Records")."""
    parent = durable.inherited_from()
    path = events_path()
    if parent is None or path is None or state.C is None:
        return
    try:
        durable.open_records(state.C, path, {**process_info(), "forked_from": parent})
    except Exception:  # noqa: BLE001 - never break a fork because of accounting
        pass


def install(c_module) -> None:
    """Connect to the C++ core and install the exit / exception / SIGTERM hooks (idempotent)."""
    global _installed, _prev_excepthook, _prev_sigterm
    state.C = c_module
    load_enums(c_module)
    state.install_pid = os.getpid()
    state.C.set_callbacks(site_callback, unsupported_callback)
    if _installed:
        return
    _installed = True
    try:
        steps.install()
        loaders.install_loader_hook()
    except Exception as e:  # noqa: BLE001 - sites still work without the step clock
        print(f"neuron-port: no step clock ({e})", file=sys.stderr)
    atexit.register(_atexit)
    os.register_at_fork(after_in_child=_records_of_forked_child)
    _prev_excepthook = sys.excepthook
    sys.excepthook = _excepthook
    if threading.current_thread() is threading.main_thread():
        try:
            prev = signal.getsignal(signal.SIGTERM)
            if prev in (signal.SIG_DFL, None) or callable(prev):
                _prev_sigterm = prev if callable(prev) else None
                signal.signal(signal.SIGTERM, _sigterm)
                if _prev_sigterm is None:  # with the user's own handler, a real run waits for it as well
                    sigterm.install(_sigterm, _flush_sigterm_from_watcher)
        except (ValueError, OSError):
            pass
    path = events_path()
    if path is not None:
        why = durable.open_records(c_module, path, process_info())
        if why is None:
            steps.clock_sink = durable.set_clock
        flush()
