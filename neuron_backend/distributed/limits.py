"""TorchNeuron's process-group limits on the simulated device: each violated limit raises TorchNeuron's
error (prefixed ``[neuron-port simulator]``) and is recorded as a ``distributed`` event with
``event: "unsupported"`` (NP907): no point-to-point ``send``/``recv``/``isend``/``irecv``
(NotImplementedError), ``barrier`` only on the default group, ``all_to_all_single`` only with equal
splits, ``all_to_all`` only for world sizes 4, 8, 16 or multiples of 32 (group start rank a multiple
of the group size), no ``reduce_scatter_coalesced``, no uneven ``all_gather``.
``NEURON_PORT_UNSUPPORTED=record`` records instead of raising (the op then runs on gloo).
"""

from __future__ import annotations

import threading
from typing import Any

PREFIX = "[neuron-port simulator] "

_lock = threading.Lock()
_violations: dict[tuple, dict] = {}


def group_desc(pg) -> dict:
    """What an event says about a process group: its size, name and ranks."""
    import torch.distributed as dist

    if pg is None:
        return {}
    d: dict[str, Any] = {"group_size": pg.size()}
    try:
        d["group"] = pg.group_name
        d["ranks"] = dist.get_process_group_ranks(pg)
    except Exception:  # noqa: BLE001
        pass
    return d


def is_default_group(pg) -> bool:
    import torch.distributed as dist

    if pg is None:
        return True
    try:
        default = dist.distributed_c10d._get_default_group()
    except Exception:  # noqa: BLE001
        return True
    return pg is default or getattr(pg, "group_name", None) == getattr(default, "group_name", None)


def check(coll: str, c10d_name: str, args, pg) -> None:
    """The limits of one c10d op call (``args`` as the PrivateUse1 kernel receives them)."""
    if coll in ("send", "recv", "recv_anysource"):
        violation(coll, f"{coll}: point-to-point communication (send/recv/isend/irecv) is not supported by the "
                        "Neuron process group; use collectives (all_gather, all_to_all, broadcast) instead",
                  NotImplementedError, pg)
    elif coll == "barrier":
        if not is_default_group(pg):
            barrier_violation(pg)
    elif coll == "reduce_scatter_tensor_coalesced":
        violation(coll, "reduce_scatter_coalesced is not implemented by the Neuron process group",
                  NotImplementedError, pg)
    elif coll == "all_to_all_single":
        out_splits, in_splits = list(args[3]), list(args[4])
        for splits in (out_splits, in_splits):
            if splits and len(set(splits)) > 1:
                violation(coll, "alltoall_base: Only even split sizes are supported. Got output_split_sizes="
                                f"{out_splits}, input_split_sizes={in_splits}", RuntimeError, pg)
                break
        _check_alltoall_group(coll, pg)
    elif coll == "all_to_all":
        _check_alltoall_group(coll, pg)
    elif coll == "all_gather":
        inputs, outputs = args[1], args[0]
        sizes = {t.numel() for t in inputs} | {t.numel() for lst in outputs for t in lst}
        if len(sizes) > 1:
            violation(coll, "all_gather with uneven tensor sizes is not supported by the Neuron process group "
                            f"(sizes {sorted(sizes)})", RuntimeError, pg)


def _check_alltoall_group(coll: str, pg) -> None:
    if pg is None:
        return
    n = pg.size()
    if not (n in (4, 8, 16) or (n > 0 and n % 32 == 0)):
        violation(coll, f"{coll}: unsupported world size {n}, supported sizes: 4, 8, 16, or multiples of 32",
                  RuntimeError, pg)
        return
    try:
        import torch.distributed as dist

        start = min(dist.get_process_group_ranks(pg))
        if start % n:
            violation(coll, f"{coll}: the group's start rank ({start}) must be a multiple of the group size ({n})",
                      RuntimeError, pg)
    except Exception:  # noqa: BLE001
        pass


def barrier_violation(pg) -> None:
    desc = group_desc(pg)
    violation("barrier", "Barrier is implemented only for default group, got a subgroup of size "
                         f"{desc.get('group_size')} (ranks {desc.get('ranks')}). Call dist.barrier() on the default "
                         "group, or synchronise the subgroup with an all_reduce.", RuntimeError, pg)


def violation(coll: str, message: str, error: type[BaseException], pg) -> None:
    """Record a TorchNeuron process-group limit; raise unless NEURON_PORT_UNSUPPORTED=record."""
    from .. import events

    raise_ = events.unsupported_mode() == "raise"
    record_violation(coll, message, error.__name__, pg, site=events.user_site(), action="raised" if raise_ else "recorded")
    if raise_:
        raise error(PREFIX + message)


def record_violation(coll: str, message: str, error: str | None, pg, *, site: dict | None, action: str) -> dict:
    """One NP907 ``distributed`` event per (op, message, site), counted; the events file is written at once."""
    from .. import events

    key = (coll, message, None if site is None else (site["file"], site["line"]))
    with _lock:
        ev = _violations.get(key)
        if ev is None:
            ev = events.record("distributed", site=site, event="unsupported", op=coll, message=PREFIX + message,
                               error=error, action=action, count=0, **group_desc(pg))
            _violations[key] = ev
        ev["count"] += 1
    events.flush()
    return ev
