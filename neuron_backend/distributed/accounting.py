"""Collective accounting: every collective on neuron tensors is counted per (collective, group, user
site) as one ``distributed`` event with ``event: "collective"``, ``count`` and ``bytes`` (updated in
place, written with the events file). One dict update per collective call, nothing per op."""

from __future__ import annotations

import threading

from .limits import group_desc

_lock = threading.Lock()
_stats: dict[tuple, dict] = {}


def count(coll: str, pg, nbytes: int) -> None:
    """Count one call of collective ``coll`` on group ``pg`` moving ``nbytes``, at the user's site."""
    from .. import events

    site = events.user_site()
    group = getattr(pg, "group_name", None) if pg is not None else None
    key = (coll, group, None if site is None else (site["file"], site["line"], site.get("thread")))
    with _lock:
        ev = _stats.get(key)
        if ev is None:
            ev = events.record("distributed", site=site, event="collective", op=coll, count=0, bytes=0,
                               **group_desc(pg))
            _stats[key] = ev
        ev["count"] += 1
        ev["bytes"] += nbytes


def collective_stats() -> list[dict]:
    """The per-(collective, group, site) counters recorded so far."""
    with _lock:
        return [dict(e) for e in _stats.values()]


def nbytes(a) -> int:
    """The bytes of the tensors in a c10d op argument (a tensor, or lists of them)."""
    import torch

    if isinstance(a, torch.Tensor):
        return a.numel() * a.element_size()
    if isinstance(a, (list, tuple)):
        return sum(nbytes(x) for x in a)
    return 0
