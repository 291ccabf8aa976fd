"""Runtime events of the simulated neuron device: user sites, the public record() API and the
per-process JSON-lines file. The format is documented in EVENTS.md.

Hot path: none of this runs per op. The C++ core calls ``_site_callback`` once per new
(op, signature) and ``_unsupported_callback`` when an unsupported feature is hit. The step clock
(``steps.py``) runs once per optimizer step and twice per module call, never per op.
"""

from __future__ import annotations

import atexit
import json
import linecache
import os
import signal
import sys
import sysconfig
import threading
import time
from pathlib import Path
from typing import Any

from . import records as durable  # the crash-proof records (records() below is the public API)
from . import steps
from .cost_fields import fallback_fields, summary_fields

SCHEMA_VERSION = 1
FLUSH_INTERVAL_S = 1.0  # at most one snapshot per second while new signatures appear
MAX_SIGNATURES_PER_OP = 200  # eager_compile lines per op in the file (the most-called ones); the rest are summed

_lock = threading.RLock()
_sites: list[dict] = []
_site_ids: dict[tuple, int] = {}
# One "first sighting" per new signature, in the order the C++ core reported them; its index (the
# sequence number) is the int _site_callback returns and the C++ core stores with the signature:
# (site id, optimizer step, forward) at the time the signature was first seen.
_sightings: list[tuple[int, int, int]] = []
_records: list[dict] = []  # compile / distributed / other events from record()
_unsupported: dict[tuple, dict] = {}  # (feature, op, site id) -> event
_unsupported_slots: dict[tuple, int] = {}  # its count's slot in the records' counters file
_started = time.time()
_last_flush = 0.0
_status = "running"
_exception: dict | None = None
_installed = False
_install_pid = os.getpid()
_C = None


def _skip_prefixes() -> tuple[str, ...]:
    import torch

    prefixes = [
        os.path.dirname(os.path.abspath(torch.__file__)) + os.sep,
        os.path.dirname(os.path.abspath(__file__)) + os.sep,
        "<frozen ",
    ]
    for key in ("stdlib", "platstdlib"):
        p = sysconfig.get_paths().get(key)
        if p:
            prefixes.append(os.path.abspath(p) + os.sep)
    return tuple(prefixes)


_SKIP: tuple[str, ...] | None = None
# Extra prefixes (e.g. a colleague's wrapper package) that must not count as user code.
extra_skip_prefixes: list[str] = []


def _is_internal(filename: str) -> bool:
    global _SKIP
    if _SKIP is None:
        _SKIP = _skip_prefixes()
    if filename.startswith(_SKIP):
        return True
    if filename.startswith("<") and filename not in ("<string>", "<stdin>") and not filename.startswith("<ipython"):
        return True
    return any(filename.startswith(p) for p in extra_skip_prefixes)


def _user_frame(frame) -> Any:
    while frame is not None:
        fn = frame.f_code.co_filename
        if not os.path.isabs(fn) and not fn.startswith("<"):
            fn = os.path.abspath(fn)
        if not _is_internal(fn):
            return frame
        frame = frame.f_back
    return None


def user_site(frame=None) -> dict | None:
    """The first frame outside torch, neuron_backend and the standard library, as a site dict.

    In a thread without user frames (autograd's device threads run backward ops), the main thread's
    stack is used instead (it is blocked in ``loss.backward()``) and the site says ``"thread"``.
    """
    thread = None
    f = _user_frame(frame if frame is not None else sys._getframe(1))
    if f is None and threading.current_thread() is not threading.main_thread():
        global _device_backward_seen
        _device_backward_seen = True
        main = sys._current_frames().get(threading.main_thread().ident)
        f = _user_frame(main)
        thread = "autograd" if f is not None else None
    if f is None:
        return None
    fn = f.f_code.co_filename
    if not fn.startswith("<"):
        fn = os.path.abspath(fn)
    line = f.f_lineno
    site = {"file": fn, "line": line, "function": f.f_code.co_name,
            "code": linecache.getline(fn, line).strip() if not fn.startswith("<") else ""}
    if thread:
        site["thread"] = thread
    return site


def _site_id(site: dict | None, module: str | None = None) -> int:
    """The id of a site (with the module that ran it, if any), the same for equal sites."""
    if site is None:
        return -1
    key = (site["file"], site["line"], site["function"], site.get("thread"), module)
    with _lock:
        i = _site_ids.get(key)
        if i is None:
            if module is not None:
                site = {**site, "module": module}
            i = len(_sites)
            _sites.append(site)
            _site_ids[key] = i
        return i


def _sighting(i: int) -> tuple[int, int, int] | None:
    """The first sighting with sequence number ``i`` (what the C++ core stores), or None."""
    return _sightings[i] if 0 <= i < len(_sightings) else None


def site_by_id(i: int) -> dict | None:
    """The site of the C++ core's id ``i`` (a first-sighting sequence number)."""
    s = _sighting(i)
    return _sites[s[0]] if s is not None and s[0] >= 0 else None


def _site_index(i: int) -> int:
    """The site id of the C++ core's id ``i`` (-1 for none): what per-site sums are keyed by."""
    s = _sighting(i)
    return s[0] if s is not None else -1


def _first_seen(i: int) -> dict | None:
    s = _sighting(i)
    return None if s is None else {"optimizer_step": s[1], "forward": s[2], "seq": i}


# ---------------------------------------------------------------- callbacks from C++
def _site_callback() -> int:
    """A new signature: record its first sighting (site, module, step clock); return its sequence number."""
    try:
        # called from C++: in autograd's device thread there is no Python caller frame at all
        sid = _site_id(user_site(sys._getframe(0)), steps.current_module())
        with _lock:
            i = len(_sightings)
            _sightings.append((sid, steps.optimizer_step, steps.forward))
        durable.sighting(i, _sites[sid] if sid >= 0 else None, steps.optimizer_step, steps.forward)
        _maybe_flush()
        return i
    except Exception:  # noqa: BLE001 - never break an op because of accounting
        return -1


def unsupported_mode() -> str:
    m = os.environ.get("NEURON_PORT_UNSUPPORTED", "raise").strip().lower()
    return "record" if m in ("record", "record-only", "record_only", "warn", "0", "off") else "raise"


def _unsupported_callback(feature: str, op: str, message: str) -> bool:
    """Record an unsupported-feature event; return True if the caller must raise."""
    try:
        from . import policy

        site = user_site(sys._getframe(0))
        sid = _site_id(site)
        raise_ = unsupported_mode() == "raise"
        err = policy.unsupported_feature(feature).get("error", "RuntimeError")
        with _lock:
            ev = _unsupported.get((feature, op, sid))
            if ev is None:
                ev = {"kind": "unsupported", "feature": feature, "op": op,
                      "message": "[neuron-port simulator] " + message, "error": err,
                      "action": "raised" if raise_ else "recorded", "count": 0, "site": site}
                _unsupported[(feature, op, sid)] = ev
                _unsupported_slots[(feature, op, sid)] = slot = durable.new_counter()
                durable.append({**ev, "count_slot": slot})
            ev["count"] += 1
            durable.add(_unsupported_slots[(feature, op, sid)])
        flush()
        return raise_
    except Exception:  # noqa: BLE001
        return True


def unsupported(feature: str, op: str, message: str, error: type[BaseException] = NotImplementedError) -> None:
    """Python-level unsupported feature (forward AD, nested tensors, ...): record, then raise unless record mode."""
    if _unsupported_callback(feature, op, message):
        raise error("[neuron-port simulator] " + message)


# ---------------------------------------------------------------- public API for other modules
def record(kind: str, *, site: dict | None = None, frame=None, **fields) -> dict:
    """Append an event (e.g. kind="compile" or "distributed") with the user site; returns it.

    ``fields`` must be JSON-serialisable. Pass ``site=`` to override the captured site, or
    ``frame=`` to start the user-frame search from a given frame.
    """
    ev = {"kind": kind, **fields}
    ev["site"] = site if site is not None else user_site(frame if frame is not None else sys._getframe(1))
    ev["time"] = round(time.time() - _started, 6)
    with _lock:
        _records.append(ev)
    durable.append(ev)
    _maybe_flush()
    return ev


def records(kind: str | None = None) -> list[dict]:
    with _lock:
        return [dict(r) for r in _records if kind is None or r["kind"] == kind]


# ---------------------------------------------------------------- aggregation
# Policy names and signature flag bits of the C++ core: read from its Policy / SigFlag enums by
# install() (_load_enums), never copied here by hand.
_POLICY_NAMES: dict[int, str] = {}
F64 = I64 = COMPLEX = 0


def _load_enums(c_module) -> None:
    global _POLICY_NAMES, F64, I64, COMPLEX
    _POLICY_NAMES = {int(v): name for name, v in c_module.Policy.__members__.items()}
    F64, I64, COMPLEX = (int(c_module.SigFlag.F64), int(c_module.SigFlag.I64), int(c_module.SigFlag.COMPLEX))


def _raw_ops() -> list:
    return _C.op_stats() if _C is not None else []


def op_table(raw=None) -> list[dict]:
    out = []
    for name, pol, calls, sigs in (raw if raw is not None else _raw_ops()):
        if calls == 0:
            continue
        out.append({"kind": "op", "op": name, "policy": _POLICY_NAMES.get(pol, str(pol)), "calls": calls,
                    "unique_signatures": len(sigs)})
    return out


def snapshot() -> dict:
    """All data as one dict (what stats() returns and what the events file contains)."""
    raw = _raw_ops()
    ops = op_table(raw)
    fallbacks, compiles, demotions, truncated = [], [], [], []
    i64: dict[str, dict] = {}
    for name, pol, calls, sigs in raw:
        if calls == 0:
            continue
        policy = _POLICY_NAMES.get(pol, str(pol))
        if policy == "fallback":
            per_site: dict[int, int] = {}
            for c, seq, _flags, _u, _d in sigs:
                sid = _site_index(seq)
                per_site[sid] = per_site.get(sid, 0) + c
            fallbacks.append({"kind": "fallback", "op": name, "calls": calls, **fallback_fields(_C, name, sigs, _first_seen),
                              "sites": [{"site": _sites[s] if s >= 0 else None, "calls": c}
                                        for s, c in sorted(per_site.items(), key=lambda kv: -kv[1])]})
        if policy == "native":
            ranked = sorted(sigs, key=lambda g: -g[0])
            for c, seq, _flags, _u, desc in ranked[:MAX_SIGNATURES_PER_OP]:
                line = {"kind": "eager_compile", "op": name, "signature": desc, "calls": c, "cache_hits": c - 1,
                        "site": site_by_id(seq)}
                first = _first_seen(seq)
                if first is not None:
                    line["first_seen"] = first
                compiles.append(line)
            if len(ranked) > MAX_SIGNATURES_PER_OP:
                rest = ranked[MAX_SIGNATURES_PER_OP:]
                truncated.append({"kind": "eager_compile_truncated", "op": name, "omitted_signatures": len(rest),
                                  "omitted_calls": sum(g[0] for g in rest), "first_seen": _first_seen_counts(rest)})
        f64_sites: dict[int, list[int]] = {}
        for c, seq, flags, _u, desc in sigs:
            if flags & F64:
                sid = _site_index(seq)
                f64_sites.setdefault(sid, [0, 0])
                f64_sites[sid][0] += c
                f64_sites[sid][1] += 1
            if flags & I64:
                e = i64.setdefault(name, {"kind": "demotion", "dtype": "int64", "op": name, "calls": 0,
                                          "aggregated": True, "sites": []})
                e["calls"] += c
                s = site_by_id(seq)
                if s is not None and len(e["sites"]) < 5 and not any(
                        (x["file"], x["line"]) == (s["file"], s["line"]) for x in e["sites"]):
                    e["sites"].append(s)
        for sid, (c, n) in f64_sites.items():
            demotions.append({"kind": "demotion", "dtype": "float64", "computed_as": "float32", "op": name,
                              "calls": c, "signatures": n, "site": _sites[sid] if sid >= 0 else None})
    demotions.extend(i64.values())
    with _lock:
        unsupported = [dict(e) for e in _unsupported.values()]
        recs = [dict(r) for r in _records]
    return {
        "process": _process_info(),
        "ops": ops,
        "fallbacks": fallbacks,
        "eager_compiles": compiles,
        "eager_compiles_truncated": truncated,
        "demotions": demotions,
        "unsupported": unsupported,
        "events": recs,
        "explicit_ops": dict(_C.explicit_counts()) if _C is not None else {},
        "summary": _summary(ops, compiles, fallbacks),
    }


def _first_seen_counts(sigs) -> list[dict]:
    """How many of ``sigs`` were first seen at each (optimizer step, forward) of the step clock."""
    counts: dict[tuple[int, int], int] = {}
    for _c, seq, _flags, _u, _d in sigs:
        s = _sighting(seq)
        if s is not None:
            counts[(s[1], s[2])] = counts.get((s[1], s[2]), 0) + 1
    return [{"optimizer_step": o, "forward": f, "signatures": n} for (o, f), n in sorted(counts.items())]


def _summary(ops, compiles, fallbacks) -> dict:
    return {
        "kind": "summary",
        "op_calls": sum(o["calls"] for o in ops),
        "native_calls": sum(o["calls"] for o in ops if o["policy"] != "fallback"),
        "fallback_calls": sum(o["calls"] for o in ops if o["policy"] == "fallback"),
        "fallback_ops": len(fallbacks),
        "eager_compiles": sum(o["unique_signatures"] for o in ops if o["policy"] == "native"),
        "eager_cache_hits": sum(o["calls"] - o["unique_signatures"] for o in ops if o["policy"] == "native"),
        **steps.totals(), **summary_fields(_C),
    }


def _process_info() -> dict:
    from . import policy

    try:
        rel = policy.release()
    except Exception:  # noqa: BLE001
        rel = {}
    info = {
        "kind": "process", "schema": SCHEMA_VERSION, "simulator": "neuron-port", "pid": os.getpid(),
        "rank": _env_int("RANK"), "local_rank": _env_int("LOCAL_RANK"), "world_size": _env_int("WORLD_SIZE"),
        "argv": list(sys.argv), "cwd": os.getcwd(), "started": _started, "written": time.time(),
        "status": _status, "torchneuron_release": rel, "unsupported_mode": unsupported_mode(),
    }
    try:
        import torch

        info["torch"] = torch.__version__
    except Exception:  # noqa: BLE001
        pass
    if os.environ.get(durable.TOKEN_ENV):
        info["token"] = os.environ[durable.TOKEN_ENV]
    if _exception:
        info["exception"] = _exception
    return info


def _env_int(name: str) -> int | None:
    v = os.environ.get(name)
    try:
        return int(v) if v is not None else None
    except ValueError:
        return None


# ---------------------------------------------------------------- the events file
def events_path() -> Path | None:
    d = os.environ.get("NEURON_PORT_EVENTS_DIR")
    if not d:
        return None
    rank = os.environ.get("RANK")
    tag = f"rank{rank}" if rank is not None else "norank"
    return Path(d) / f"neuron-events-{tag}-pid{os.getpid()}.jsonl"


def to_lines(snap: dict) -> list[dict]:
    lines = [snap["process"]]
    for key in ("ops", "fallbacks", "eager_compiles", "eager_compiles_truncated", "demotions", "unsupported",
                "events"):
        lines.extend(snap[key])
    lines.append({"kind": "explicit_ops", "counts": snap["explicit_ops"]})
    lines.append({**snap["summary"], "complete": snap["process"]["status"] != "running"})
    return lines


def flush(status: str | None = None) -> Path | None:
    """Write the current snapshot atomically (temp file + rename). Safe to call at any time."""
    global _status, _last_flush
    if status is not None:
        _status = status
    path = events_path()
    if path is None or os.getpid() != _install_pid:  # forked children (DataLoader workers) write nothing
        return None
    if not path.parent.is_dir():  # never re-created: check removed it, this process outlived its run
        return None
    with _lock:
        try:
            tmp = path.with_name(path.name + f".tmp{threading.get_ident()}")
            with open(tmp, "w", encoding="utf-8") as f:
                for line in to_lines(snapshot()):
                    f.write(json.dumps(line, default=str) + "\n")
            os.replace(tmp, path)
            _last_flush = time.monotonic()
        except Exception as e:  # noqa: BLE001
            print(f"neuron-port: could not write events to {path}: {e}", file=sys.stderr)
    return path


def _maybe_flush() -> None:
    if time.monotonic() - _last_flush >= FLUSH_INTERVAL_S and events_path() is not None:
        flush()


# ---------------------------------------------------------------- process hooks
_device_backward_seen = False  # an op ran in an autograd device thread (a backward on the neuron device)


def _atexit() -> None:
    flush("exited" if _status == "running" else _status)
    if _device_backward_seen:  # let autograd's device threads release the last graph while Python is alive:
        time.sleep(0.05)  # finalizing under them aborts the process (pytorch/pytorch#190489, any non-CPU device)


def _excepthook(exc_type, exc, tb):
    global _exception
    import traceback

    frames = traceback.extract_tb(tb)
    user = next((fr for fr in reversed(frames) if not _is_internal(os.path.abspath(fr.filename))), None)
    _exception = {"type": exc_type.__name__, "message": str(exc)[:2000]}
    if user is not None:
        _exception["site"] = {"file": os.path.abspath(user.filename), "line": user.lineno,
                              "function": user.name, "code": (user.line or "").strip()}
    flush("exception")
    _prev_excepthook(exc_type, exc, tb)


_prev_excepthook = sys.excepthook
_prev_sigterm = None


def _sigterm(signum, frame):
    flush("sigterm")
    prev = _prev_sigterm
    if callable(prev):
        prev(signum, frame)
        return
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)


def install(c_module) -> None:
    """Connect to the C++ core and install the exit / exception / SIGTERM hooks (idempotent)."""
    global _C, _installed, _prev_excepthook, _prev_sigterm, _install_pid
    _C = c_module
    _load_enums(c_module)
    _install_pid = os.getpid()
    _C.set_callbacks(_site_callback, _unsupported_callback)
    if _installed:
        return
    _installed = True
    try:
        steps.install()
    except Exception as e:  # noqa: BLE001 - sites still work without the step clock
        print(f"neuron-port: no step clock ({e})", file=sys.stderr)
    atexit.register(_atexit)
    _prev_excepthook = sys.excepthook
    sys.excepthook = _excepthook
    if threading.current_thread() is threading.main_thread():
        try:
            prev = signal.getsignal(signal.SIGTERM)
            if prev in (signal.SIG_DFL, None) or callable(prev):
                _prev_sigterm = prev if callable(prev) else None
                signal.signal(signal.SIGTERM, _sigterm)
        except (ValueError, OSError):
            pass
    path = events_path()
    if path is not None:
        why = durable.open_records(c_module, path, _process_info())
        if why is None:
            steps.clock_sink = durable.set_clock
        flush()
