"""User sites (EVENTS.md, "Sites"): the first Python frame outside torch, neuron_backend and the
standard library, and the table of the first sightings the C++ core stores with each new signature.

A new signature is seen once (``hooks.site_callback``): its site gets an id (equal sites, with the
module that ran them, share one), and the sighting (site id, optimizer step, forward) gets a sequence
number, which is the int the C++ core keeps with the signature. Nothing here runs per op.
"""

from __future__ import annotations

import linecache
import os
import sys
import sysconfig
import threading
from typing import Any

from . import state, steps


def _skip_prefixes() -> tuple[str, ...]:
    import torch

    prefixes = [
        os.path.dirname(os.path.abspath(torch.__file__)) + os.sep,
        # the neuron_backend package (this file is neuron_backend/events/sites.py)
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep,
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
device_backward_seen = False  # an op ran in an autograd device thread (a backward on the neuron device)


def is_internal(filename: str) -> bool:
    """Whether a frame of ``filename`` is not user code (torch, neuron_backend, the standard library)."""
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
        if not is_internal(fn):
            return frame
        frame = frame.f_back
    return None


def user_site(frame=None) -> dict | None:
    """The first frame outside torch, neuron_backend and the standard library, as a site dict.

    In a thread without user frames (autograd's device threads run backward ops), the main thread's
    stack is used instead (it is blocked in ``loss.backward()``) and the site says ``"thread"``.
    """
    global device_backward_seen
    thread = None
    f = _user_frame(frame if frame is not None else sys._getframe(1))
    if f is None and threading.current_thread() is not threading.main_thread():
        device_backward_seen = True
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


def user_files(limit: int = 2000) -> list[str]:
    """The user's Python files the process imported (or ran as ``__main__``), under its working folder:
    what ran, at least at import, for a reader judging a static finding of that file. Read when a snapshot
    is written, never per op."""
    root = os.path.abspath(os.getcwd()) + os.sep
    out = set()
    for module in list(sys.modules.values()):
        # at exit CPython has deleted __main__.__file__ (the script run): its loader still has the path
        name = getattr(module, "__file__", None) or getattr(getattr(module, "__loader__", None), "path", None)
        if not isinstance(name, str) or not name.endswith(".py"):
            continue
        # a relative name is a file of the working folder only if it is there (torch.ops says "_ops.py")
        if not os.path.isabs(name) and not os.path.isfile(name):
            continue
        name = os.path.abspath(name)
        if name.startswith(root) and not is_internal(name):
            out.add(name)
    return sorted(out)[:limit]


# ---------------------------------------------------------------- the site table and first sightings
_sites: list[dict] = []
_site_ids: dict[tuple, int] = {}
# One "first sighting" per new signature, in the order the C++ core reported them; its index (the
# sequence number) is the int site_callback returns and the C++ core stores with the signature:
# (site id, optimizer step, forward) at the time the signature was first seen.
# With the phase (steps.py, "Phases") and the phase's own call count.
_sightings: list[tuple[int, int, int, int, int]] = []


def site_id(site: dict | None, module: str | None = None) -> int:
    """The id of a site (with the module that ran it, if any), the same for equal sites."""
    if site is None:
        return -1
    key = (site["file"], site["line"], site["function"], site.get("thread"), module)
    with state.lock:
        i = _site_ids.get(key)
        if i is None:
            if module is not None:
                site = {**site, "module": module}
            i = len(_sites)
            _sites.append(site)
            _site_ids[key] = i
        return i


def site_of(sid: int) -> dict | None:
    """The site with id ``sid`` (None for -1, no site)."""
    return _sites[sid] if sid >= 0 else None


def add_sighting(sid: int) -> int:
    """Record the first sighting of a new signature at site ``sid`` with the step clock and the phase
    now; returns its sequence number."""
    phase, phase_forward = steps.phase_sighting()
    with state.lock:
        i = len(_sightings)
        _sightings.append((sid, steps.optimizer_step, steps.forward, phase, phase_forward))
    return i


def sighting(i: int) -> tuple[int, int, int, int, int] | None:
    """The first sighting with sequence number ``i`` (what the C++ core stores), or None."""
    return _sightings[i] if 0 <= i < len(_sightings) else None


def site_by_id(i: int) -> dict | None:
    """The site of the C++ core's id ``i`` (a first-sighting sequence number)."""
    s = sighting(i)
    return _sites[s[0]] if s is not None and s[0] >= 0 else None


def site_index(i: int) -> int:
    """The site id of the C++ core's id ``i`` (-1 for none): what per-site sums are keyed by."""
    s = sighting(i)
    return s[0] if s is not None else -1


def first_seen(i: int) -> dict | None:
    s = sighting(i)
    return None if s is None else {"optimizer_step": s[1], "forward": s[2], "seq": i, "phase": s[3],
                                   "phase_forward": s[4]}


def first_seen_counts(sigs) -> list[dict]:
    """How many of ``sigs`` were first seen at each (optimizer step, forward, phase, phase forward)."""
    counts: dict[tuple[int, int, int, int], int] = {}
    for _c, seq, _flags, _u, _d in sigs:
        s = sighting(seq)
        if s is not None:
            counts[s[1:5]] = counts.get(s[1:5], 0) + 1
    return [{"optimizer_step": o, "forward": f, "phase": p, "phase_forward": pf, "signatures": n}
            for (o, f, p, pf), n in sorted(counts.items())]
