"""DataLoader batches (EVENTS.md, "Phases" and ``data_loader``): where the program's batches come from.

``torch.utils.data.DataLoader``'s iterators all draw a batch through ``_BaseDataLoaderIter.__next__``;
the simulator wraps it once (one Python call per batch, nothing per op) to note, in the main thread,
that a batch was drawn (the next outermost module call took a DataLoader batch: ``steps.batch_pending``)
and to record a ``data_loader`` event the first time a loader yields a batch smaller than its
``batch_size`` at a line (the last, partial batch of an epoch without ``drop_last=True``).
"""

from __future__ import annotations

import threading
from typing import Any, Optional

from . import sites, steps

_main_ident = threading.main_thread().ident
_seen: set[tuple] = set()  # (file, line, batch_size, size) of the partial batches recorded
_installed = False


def leading_size(batch: Any, depth: int = 0) -> Optional[int]:
    """The first dimension of the first tensor in a batch (a tensor, or nested tuples, lists, dicts)."""
    size = getattr(batch, "shape", None)
    if size is not None and hasattr(batch, "dim"):
        return int(size[0]) if batch.dim() > 0 else None
    if depth > 3:
        return None
    if isinstance(batch, dict):
        batch = list(batch.values())
    if isinstance(batch, (tuple, list)):
        for item in batch[:8]:
            found = leading_size(item, depth + 1)
            if found is not None:
                return found
    return None


def _batch_drawn(iterator: Any, batch: Any) -> None:
    if threading.get_ident() != _main_ident:
        return
    steps.batch_pending = True
    sampler = getattr(iterator, "_index_sampler", None) if getattr(iterator, "_auto_collation", False) else None
    batch_size = getattr(sampler, "batch_size", None)
    if not isinstance(batch_size, int) or batch_size <= 1:
        return
    size = leading_size(batch)
    if size is None or size >= batch_size:
        return
    if steps.record_sink is None:
        return
    site = sites.user_site()
    key = (site["file"], site["line"]) if site else None
    if (key, batch_size, size) in _seen:
        return
    _seen.add((key, batch_size, size))
    steps.record_sink("data_loader", site=site, event="partial_batch", batch_size=batch_size, size=size,
           drop_last=bool(getattr(sampler, "drop_last", False)), optimizer_step=steps.optimizer_step,
           forward=steps.forward, phase=steps.phase)


def install_loader_hook() -> None:
    """Wrap ``_BaseDataLoaderIter.__next__`` once (a torch without it: no DataLoader facts, nothing else)."""
    global _installed
    if _installed:
        return
    try:
        from torch.utils.data import dataloader

        cls = dataloader._BaseDataLoaderIter
        original = cls.__next__
    except (ImportError, AttributeError):
        return

    def __next__(self):
        batch = original(self)
        try:
            _batch_drawn(self, batch)
        except Exception:  # noqa: BLE001 - never break the user's loop because of accounting
            pass
        return batch

    __next__.__wrapped__ = original  # type: ignore[attr-defined]
    cls.__next__ = __next__
    _installed = True
