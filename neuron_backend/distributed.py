"""``torch.distributed`` with ``backend="neuron"`` on the simulated device.

* ``dist.init_process_group(backend="neuron")`` (torchrun, ``init_device_mesh("neuron", ...)``, DDP,
  FSDP2, DTensor) creates a gloo process group underneath. Simulated neuron tensors live in host
  memory, so every ``c10d::*`` op that reaches the PrivateUse1 key is re-registered here: its neuron
  tensors become zero-copy CPU aliases and the op is redispatched to the CPU (gloo) kernel, in
  place, so the result lands in the user's neuron tensors.
* TorchNeuron's process-group limits raise its errors (prefixed ``[neuron-port simulator]``) and are
  recorded as ``distributed`` events: no point-to-point ``send``/``recv``/``isend``/``irecv``
  (NotImplementedError), ``barrier`` only on the default group, ``all_to_all_single`` only with equal
  splits, ``all_to_all`` only for world sizes 4, 8, 16 or multiples of 32 (group start rank a
  multiple of the group size), no ``reduce_scatter_coalesced``. ``NEURON_PORT_UNSUPPORTED=record``
  records instead of raising (the op then runs on gloo).
* Every collective on neuron tensors is counted per (collective, group, user site): one
  ``distributed`` event with ``count`` and ``bytes`` (updated in place, written with the events file).

* One NeuronCore per process (TorchNeuron's ``_neuron_runtime_setup``): the first ``neuron`` process
  group checks that the runtime has not started, sets ``NEURON_RT_VISIBLE_CORES=<LOCAL_RANK>`` unless
  set, checks that the process sees one core and starts the runtime; the process then has one device,
  ``neuron`` == ``neuron:0``. Sources and open cases: ``rules/op_policy.toml`` [distributed] (NP907).

Each rank writes its own events file (``neuron-events-rank<RANK>-pid<PID>.jsonl``).
"""

from __future__ import annotations

import functools
import os
import re
import socket
import sys
import threading
import warnings
from typing import Any

from . import cpu_aliases

__all__ = ["register", "BACKEND_NAME", "collective_stats"]

BACKEND_NAME = "neuron"
PREFIX = "[neuron-port simulator] "
# TorchNeuron's assertions in _neuron_runtime_setup (both AssertionError).
RUNTIME_INITIALIZED_MESSAGE = "Neuron runtime should not be initialized before the init_process_group."
ONE_DEVICE_MESSAGE = "Attempted to have more than one device per process in distributed setup"
# Logical NeuronCores of the simulated node unless NEURON_RT_NUM_CORES says otherwise: one Trainium2 chip at
# LNC=2 (trn2.3xlarge), the simulator's default device count.
SIMULATED_NODE_CORES = 4

# c10d op -> (user-facing collective name, index of the argument whose bytes are counted or None)
C10D_OPS: dict[str, tuple[str, int | None]] = {
    "allreduce_": ("all_reduce", 0),
    "allreduce_coalesced_": ("all_reduce_coalesced", 0),
    "broadcast_": ("broadcast", 0),
    "reduce_": ("reduce", 0),
    "allgather_": ("all_gather", 1),
    "_allgather_base_": ("all_gather_into_tensor", 1),
    "allgather_coalesced_": ("all_gather_coalesced", 1),
    "allgather_into_tensor_coalesced_": ("all_gather_into_tensor_coalesced", 1),
    "reduce_scatter_": ("reduce_scatter", 1),
    "_reduce_scatter_base_": ("reduce_scatter_tensor", 1),
    "reduce_scatter_tensor_coalesced_": ("reduce_scatter_tensor_coalesced", 1),
    "alltoall_": ("all_to_all", 1),
    "alltoall_base_": ("all_to_all_single", 1),
    "gather_": ("gather", 1),
    "scatter_": ("scatter", 1),
    "barrier": ("barrier", None),
    "send": ("send", 0),
    "recv_": ("recv", 0),
    "recv_any_source_": ("recv_anysource", 0),
}
P2P_API = ("send", "recv", "isend", "irecv")

_lock = threading.Lock()
_registered = False
_lib = None
_stats: dict[tuple, dict] = {}
_violations: dict[tuple, dict] = {}
_setup: dict | None = None  # one-core-per-process setup of the first neuron process group
_setup_started = False


# ---------------------------------------------------------------- registration
def register() -> None:
    """Register the ``neuron`` c10d backend, the PrivateUse1 c10d kernels and the API checks (idempotent)."""
    global _registered, _lib
    with _lock:
        if _registered:
            return
        _registered = True
    import torch
    import torch.distributed as dist

    if not dist.is_available():
        return
    if BACKEND_NAME not in dist.Backend.backend_list:
        dist.Backend.register_backend(BACKEND_NAME, _create_backend, devices=["cpu", BACKEND_NAME])
    _lib = torch.library.Library("c10d", "IMPL")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Overriding a previously registered kernel" (c10d's own PrivateUse1 kernel)
        for name in C10D_OPS:
            if hasattr(torch.ops.c10d, name) and torch._C._dispatch_has_kernel_for_dispatch_key(f"c10d::{name}", "PrivateUse1"):
                _lib.impl(name, _make_kernel(name), "PrivateUse1")
    _patch_api(dist)
    _install_excepthook()


def _create_backend(store, rank, size, timeout):
    global _setup_started
    import torch.distributed as dist

    from . import events

    setup: dict = {}
    with _lock:
        first = not _setup_started
        _setup_started = True
    if first:  # TorchNeuron: the first ProcessGroupNeuron (the default group) sets the process up
        setup = _neuron_runtime_setup(rank, size, store)
    events.record("distributed", event="process_group", backend=BACKEND_NAME, group_rank=rank, group_size=size,
                  implementation="gloo (host memory)", **setup)
    return dist.ProcessGroupGloo(store, rank, size, timeout)


# ---------------------------------------------------------------- one NeuronCore per process
def _neuron_runtime_setup(rank: int, size: int, store) -> dict:
    """TorchNeuron's _neuron_runtime_setup on the simulated device; returns what the process_group event
    records (local_rank, local_world_size, visible_cores, device_count)."""
    global _setup
    from . import device

    if device.runtime_initialized():
        _violation("init_process_group", RUNTIME_INITIALIZED_MESSAGE + " The simulated runtime had started: a tensor "
                   "was created on or moved to a neuron device, or torch.neuron.init() / get_device_properties() was "
                   "called. Create tensors and move models to the device after init_process_group.",
                   AssertionError, None)
    local_rank, local_world_size = _local_rank_and_size(rank, size, store)
    if not os.environ.get("NEURON_RT_VISIBLE_CORES"):
        num = os.environ.get("NEURON_RT_NUM_CORES", "").strip()  # the simulated node's cores
        cores = int(num) if num.isdigit() and int(num) > 0 else SIMULATED_NODE_CORES
        if local_rank >= cores:
            _violation("init_process_group", f"local rank {local_rank} needs NeuronCore {local_rank} "
                       f"(NEURON_RT_VISIBLE_CORES={local_rank}), but the simulated node has {cores} logical NeuronCores "
                       f"(0-{cores - 1}): one process per NeuronCore, so at most {cores} processes per node. Start fewer "
                       "processes per node, or set NEURON_RT_NUM_CORES to the node's core count to simulate a larger "
                       "instance (trn2.48xlarge: 64 at LNC=2).", RuntimeError, None)
        os.environ["NEURON_RT_VISIBLE_CORES"] = str(local_rank)
    visible = os.environ["NEURON_RT_VISIBLE_CORES"]
    n = device.visible_core_count()
    if n != 1:
        _violation("init_process_group", f"{ONE_DEVICE_MESSAGE} (NEURON_RT_VISIBLE_CORES={visible} makes {n} NeuronCores "
                   "visible to this process; leave it unset so that init_process_group gives each process NeuronCore "
                   "LOCAL_RANK, or name one core per process)", AssertionError, None)
    count = max(n, 1)  # 1; with NEURON_PORT_UNSUPPORTED=record the process keeps the cores it sees
    device.set_process_device_count(count)
    device.mark_runtime_initialized()
    _setup = {"local_rank": local_rank, "local_world_size": local_world_size, "visible_cores": visible,
              "device_count": count}
    for i, site in device.pre_init_set_device:
        _record_violation(
            "set_device", f"torch.neuron.set_device({i}) before init_process_group(backend=\"neuron\"): the process group "
            "then pins the process to one NeuronCore, `neuron` (neuron:0), and makes it current, so the call has no "
            f"effect and neuron:{i} is no device of this process afterwards. Drop the call and use "
            "torch.device(\"neuron\") (simulator decision, unconfirmed: see rules/op_policy.toml [distributed])",
            None, None, site=site, action="recorded")
    return dict(_setup)


def _local_rank_and_size(rank: int, size: int, store) -> tuple[int, int]:
    """LOCAL_RANK / LOCAL_WORLD_SIZE (torchrun sets both); otherwise, like TorchNeuron, the ranks register their
    host address in the store and the local rank is the position among the ranks of this host."""
    lr, lws = os.environ.get("LOCAL_RANK"), os.environ.get("LOCAL_WORLD_SIZE")
    if lr is not None and lws is not None:
        return int(lr), int(lws)
    try:
        ip = socket.gethostbyname(socket.gethostname())
    except OSError:
        ip = "127.0.0.1"
    store.set(f"neuron_port_worker_{rank}", f"{ip}:{rank}")
    here = []
    for i in range(size):  # store.get waits until rank i has registered
        worker_ip, worker_rank = store.get(f"neuron_port_worker_{i}").decode().rsplit(":", 1)
        if worker_ip == ip:
            here.append(int(worker_rank))
    here.sort()
    return here.index(rank), len(here)


def invalid_device_index(index: int, message: str, *, frame=None, error: str = "ValueError") -> None:
    """After the setup, a device index other than 0 is another process's NeuronCore: record an NP907 event
    (the caller raises)."""
    if _setup is None or index == 0:
        return
    from . import events

    site = events.user_site(frame if frame is not None else sys._getframe(1))
    _record_violation(
        "device", f"{message}: after init_process_group(backend=\"neuron\") this process has one NeuronCore, "
        f"`neuron` (neuron:0); neuron:{index} is not its device. Use torch.device(\"neuron\") rather than the rank "
        "as the device index (simulator model, see rules/op_policy.toml [distributed])", error, None, site=site,
        action="raised")


_INVALID_DEVICE = re.compile(r"Invalid device id: (\d+)\. Valid range is 0 to -?\d+")


def _install_excepthook() -> None:
    """Tensors placed on another core fail in the C++ core's device guard ("Invalid device id: 1. Valid range is 0
    to 0"); when that ends the process, record it as an NP907 event too (before the events file is written)."""
    prev = sys.excepthook
    if getattr(prev, "_neuron_port_distributed", False):
        return

    def hook(exc_type, exc, tb):
        try:
            m = _INVALID_DEVICE.search(str(exc))
            if m and _setup is not None and not getattr(exc, "_neuron_port_recorded", False) and tb is not None:
                inner = tb  # the innermost frame; user_site walks out to the user's line
                while inner.tb_next is not None:
                    inner = inner.tb_next
                invalid_device_index(int(m.group(1)), m.group(0), frame=inner.tb_frame, error=exc_type.__name__)
        except Exception:  # noqa: BLE001 - an excepthook must not raise
            pass
        prev(exc_type, exc, tb)

    hook._neuron_port_distributed = True
    sys.excepthook = hook


# ---------------------------------------------------------------- zero-copy CPU aliases: cpu_aliases.py
def _nbytes(a) -> int:
    import torch

    if isinstance(a, torch.Tensor):
        return a.numel() * a.element_size()
    if isinstance(a, (list, tuple)):
        return sum(_nbytes(x) for x in a)
    return 0


def _unbox(pg_obj):
    from torch._C._distributed_c10d import ProcessGroup

    try:
        return ProcessGroup.unbox(pg_obj)
    except Exception:  # noqa: BLE001
        return pg_obj if isinstance(pg_obj, ProcessGroup) else None


def _pg_index(op) -> int:
    for i, a in enumerate(op._schema.arguments):
        if a.name == "process_group":
            return i
    return -1


_cpu_ready: set[str] = set()


def _ensure_cpu_backend(pg) -> None:
    """The CPU (gloo) kernels look up the group's CPU backend. A group created for the neuron device
    only (``init_process_group()`` without a backend, ``init_device_mesh("neuron", ...)``) has none:
    register its neuron backend, which is gloo, for CPU too."""
    import torch

    cpu = torch.device("cpu")
    if cpu not in pg._device_types:
        pg._register_backend(cpu, pg.BackendType.CUSTOM, pg._get_backend(torch.device(BACKEND_NAME)))
    _cpu_ready.add(pg.group_name)


def _make_kernel(name: str):
    import torch

    op = getattr(torch.ops.c10d, name).default
    pg_i = _pg_index(op)
    coll, bytes_arg = C10D_OPS[name]

    def kernel(*args):
        pg = _unbox(args[pg_i]) if pg_i >= 0 else None
        _check(coll, name, args, pg)
        if pg is not None and pg.group_name not in _cpu_ready:
            _ensure_cpu_backend(pg)
        if coll != "barrier":
            _count(coll, pg, _nbytes(args[bytes_arg]) if bytes_arg is not None else 0)
        cpu_args = [cpu_aliases.to_cpu(a) for a in args]
        r = op(*cpu_args)
        if isinstance(r, tuple) and len(r) == 2:
            cpu_aliases.keep_until_done(r[1], cpu_args)
            return (args[0], r[1])  # the op's tensors, written in place through the aliases
        return r

    kernel.__name__ = f"neuron_c10d_{name}"
    return kernel


# ---------------------------------------------------------------- TorchNeuron's limits
def _group_desc(pg) -> dict:
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


def _is_default_group(pg) -> bool:
    import torch.distributed as dist

    if pg is None:
        return True
    try:
        default = dist.distributed_c10d._get_default_group()
    except Exception:  # noqa: BLE001
        return True
    return pg is default or getattr(pg, "group_name", None) == getattr(default, "group_name", None)


def _check(coll: str, c10d_name: str, args, pg) -> None:
    if coll in ("send", "recv", "recv_anysource"):
        _violation(coll, f"{coll}: point-to-point communication (send/recv/isend/irecv) is not supported by the "
                         "Neuron process group; use collectives (all_gather, all_to_all, broadcast) instead",
                   NotImplementedError, pg)
    elif coll == "barrier":
        if not _is_default_group(pg):
            _barrier_violation(pg)
    elif coll == "reduce_scatter_tensor_coalesced":
        _violation(coll, "reduce_scatter_coalesced is not implemented by the Neuron process group",
                   NotImplementedError, pg)
    elif coll == "all_to_all_single":
        out_splits, in_splits = list(args[3]), list(args[4])
        for splits in (out_splits, in_splits):
            if splits and len(set(splits)) > 1:
                _violation(coll, "alltoall_base: Only even split sizes are supported. Got output_split_sizes="
                                 f"{out_splits}, input_split_sizes={in_splits}", RuntimeError, pg)
                break
        _check_alltoall_group(coll, pg)
    elif coll == "all_to_all":
        _check_alltoall_group(coll, pg)
    elif coll == "all_gather":
        inputs, outputs = args[1], args[0]
        sizes = {t.numel() for t in inputs} | {t.numel() for lst in outputs for t in lst}
        if len(sizes) > 1:
            _violation(coll, "all_gather with uneven tensor sizes is not supported by the Neuron process group "
                             f"(sizes {sorted(sizes)})", RuntimeError, pg)


def _check_alltoall_group(coll: str, pg) -> None:
    if pg is None:
        return
    n = pg.size()
    if not (n in (4, 8, 16) or (n > 0 and n % 32 == 0)):
        _violation(coll, f"{coll}: unsupported world size {n}, supported sizes: 4, 8, 16, or multiples of 32",
                   RuntimeError, pg)
        return
    try:
        import torch.distributed as dist

        start = min(dist.get_process_group_ranks(pg))
        if start % n:
            _violation(coll, f"{coll}: the group's start rank ({start}) must be a multiple of the group size ({n})",
                       RuntimeError, pg)
    except Exception:  # noqa: BLE001
        pass


def _barrier_violation(pg) -> None:
    desc = _group_desc(pg)
    _violation("barrier", "Barrier is implemented only for default group, got a subgroup of size "
                          f"{desc.get('group_size')} (ranks {desc.get('ranks')}). Call dist.barrier() on the default "
                          "group, or synchronise the subgroup with an all_reduce.", RuntimeError, pg)


def _violation(coll: str, message: str, error: type[BaseException], pg) -> None:
    """Record a TorchNeuron process-group limit; raise unless NEURON_PORT_UNSUPPORTED=record."""
    from . import events

    raise_ = events.unsupported_mode() == "raise"
    _record_violation(coll, message, error.__name__, pg, site=events.user_site(), action="raised" if raise_ else "recorded")
    if raise_:
        raise error(PREFIX + message)


def _record_violation(coll: str, message: str, error: str | None, pg, *, site: dict | None, action: str) -> dict:
    """One NP907 ``distributed`` event per (op, message, site), counted; the events file is written at once."""
    from . import events

    key = (coll, message, None if site is None else (site["file"], site["line"]))
    with _lock:
        ev = _violations.get(key)
        if ev is None:
            ev = events.record("distributed", site=site, event="unsupported", op=coll, message=PREFIX + message,
                               error=error, action=action, count=0, **_group_desc(pg))
            _violations[key] = ev
        ev["count"] += 1
    events.flush()
    return ev


# ---------------------------------------------------------------- collective counts
def _count(coll: str, pg, nbytes: int) -> None:
    from . import events

    site = events.user_site()
    group = getattr(pg, "group_name", None) if pg is not None else None
    key = (coll, group, None if site is None else (site["file"], site["line"], site.get("thread")))
    with _lock:
        ev = _stats.get(key)
        if ev is None:
            ev = events.record("distributed", site=site, event="collective", op=coll, count=0, bytes=0,
                               **_group_desc(pg))
            _stats[key] = ev
        ev["count"] += 1
        ev["bytes"] += nbytes


def collective_stats() -> list[dict]:
    """The per-(collective, group, site) counters recorded so far."""
    with _lock:
        return [dict(e) for e in _stats.values()]


# ---------------------------------------------------------------- Python API checks
def _patch_api(dist) -> None:
    """barrier() runs on a CPU tensor and p2p calls may use CPU tensors, so the PrivateUse1 kernels do not
    see them: check them at the API when the group's backend is neuron."""
    c10d = dist.distributed_c10d
    for name in P2P_API + ("barrier", "monitored_barrier"):
        orig = getattr(c10d, name, None)
        if orig is None or getattr(orig, "_neuron_port_wrapped", False):
            continue
        w = _wrap_api(name, orig)
        setattr(c10d, name, w)
        if getattr(dist, name, None) is orig:
            setattr(dist, name, w)


def _uses_neuron(group) -> bool:
    import torch.distributed as dist

    try:
        return dist.is_initialized() and str(dist.get_backend(group)) == BACKEND_NAME
    except Exception:  # noqa: BLE001
        return False


def _wrap_api(name: str, orig):
    import torch.distributed as dist

    @functools.wraps(orig)
    def wrapper(*args, **kwargs):
        group = kwargs.get("group")
        if name in ("barrier", "monitored_barrier") and args:
            group = args[0]
        elif name in P2P_API and len(args) >= 3:
            group = args[2]
        if _uses_neuron(group):
            if group is None:
                group = dist.group.WORLD
            if name in P2P_API:
                _violation(name, f"{name}: point-to-point communication (send/recv/isend/irecv) is not supported "
                                 "by the Neuron process group; use collectives (all_gather, all_to_all, broadcast) "
                                 "instead", NotImplementedError, group)
            elif name == "monitored_barrier":
                _violation(name, "monitored_barrier is not implemented by the Neuron process group; use barrier() "
                                 "on the default group", NotImplementedError, group)
            else:
                if not _is_default_group(group):
                    _barrier_violation(group)
                _count("barrier", group, 0)
        return orig(*args, **kwargs)

    wrapper._neuron_port_wrapped = True
    return wrapper
