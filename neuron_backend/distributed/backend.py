"""The ``neuron`` c10d backend: ``torch.distributed`` with ``backend="neuron"`` on the simulated device.

``dist.init_process_group(backend="neuron")`` (torchrun, ``init_device_mesh("neuron", ...)``, DDP,
FSDP2, DTensor) creates a gloo process group underneath. Simulated neuron tensors live in host
memory, so every ``c10d::*`` op that reaches the PrivateUse1 key is re-registered here: its neuron
tensors become zero-copy CPU aliases (cpu_aliases.py) and the op is redispatched to the CPU (gloo)
kernel, in place, so the result lands in the user's neuron tensors. Each call is checked against
TorchNeuron's limits (limits.py) and counted (accounting.py); the first neuron process group sets the
process up with one NeuronCore (setup.py). ``barrier()`` and the point-to-point calls are checked at
the Python API too (the PrivateUse1 kernels do not see them).

Each rank writes its own events file (``neuron-events-rank<RANK>-pid<PID>.jsonl``).
"""

from __future__ import annotations

import functools
import threading
import warnings

from . import cpu_aliases, fake_world
from .accounting import count, nbytes
from .limits import barrier_violation, check, is_default_group, record_violation, violation
from .setup import install_excepthook, setup_once

__all__ = ["register", "account_collective", "C10D_OPS", "BACKEND_NAME"]

BACKEND_NAME = "neuron"

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
    _remember_group_sites(dist.distributed_c10d)
    fake_world.install(dist)
    _patch_work_future()
    install_excepthook()


def _patch_work_future() -> None:
    """``Work.get_future()`` of a neuron collective holds the user's neuron tensors (cpu_aliases.device_future);
    after ``Work.wait()`` the work is done, and the collectives that are done and dropped are let go
    (cpu_aliases.release_completed): their buffers are freed once the user dropped them too."""
    from torch._C._distributed_c10d import Work

    orig = Work.get_future
    if getattr(orig, "_neuron_port_wrapped", False):
        return

    @functools.wraps(orig)
    def get_future(self):
        try:
            fut = orig(self)
        except RuntimeError as exc:  # gloo's reduce_scatter works have no future; a device backend's have
            fut = cpu_aliases.work_future(self) if "getFuture not implemented" in str(exc) else None
            if fut is None:
                raise
            return fut
        return cpu_aliases.device_future(self, fut)

    get_future._neuron_port_wrapped = True
    Work.get_future = get_future
    wait = Work.wait

    @functools.wraps(wait)
    def wait_then_release(self, *args, **kwargs):
        done = wait(self, *args, **kwargs)
        cpu_aliases.waited(self)
        cpu_aliases.release_completed()
        return done

    Work.wait = wait_then_release


def _create_backend(store, rank, size, timeout):
    import torch.distributed as dist

    from .. import events

    setup = setup_once(rank, size, store)  # TorchNeuron: the first ProcessGroupNeuron sets the process up
    fake = fake_world.world_size() is not None
    events.record("distributed", event="process_group", backend=BACKEND_NAME, group_rank=rank, group_size=size,
                  implementation="fake (one process of the world)" if fake else "gloo (host memory)", **setup)
    return fake_world.process_group(rank, size) if fake else dist.ProcessGroupGloo(store, rank, size, timeout)


# ---------------------------------------------------------------- the PrivateUse1 c10d kernels
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
_neuron_ready: set[str] = set()  # groups with a backend for neuron tensors
_group_sites: dict[str, tuple[str, str, dict | None]] = {}  # group name -> (API, backend, the user's line)


def _require_neuron_backend(pg, coll: str) -> None:
    """A collective on neuron tensors needs a backend for the ``neuron`` device in its group. PyTorch gives a
    group one backend per device type (distributed_c10d.BackendConfig): ``backend="gloo"`` maps only gloo's
    devices (``Backend.backend_capability["gloo"]``: cpu, cuda), and TorchNeuron registers its backend for
    ``neuron`` alone, so c10d's PrivateUse1 kernel fails in ``ProcessGroup::getBackend`` with "No backend type
    associated with device type neuron", before any data moves. The same error is raised here, by the group
    itself, and recorded (NP907) at the user's line that created the group, with the fix."""
    import torch

    neuron = torch.device(BACKEND_NAME)
    if neuron in pg._device_types:
        _neuron_ready.add(pg.group_name)
        return
    api, backend, site = _group_sites.get(pg.group_name, ("init_process_group", "", None))
    served = ", ".join(sorted(d.type for d in pg._device_types)) or "no device"
    record_violation(
        "process_group", f"{api}(backend=\"{backend}\") made a process group with no backend for neuron tensors "
        f"({backend or 'its backend'} serves {served}): {coll} on a neuron tensor fails with PyTorch's "
        "\"No backend type associated with device type neuron\" (so does DistributedDataParallel, on its first "
        "collective). "
        "Use backend=\"neuron\" (TorchNeuron's process group), or \"cpu:gloo,neuron:neuron\" to keep gloo for "
        "CPU tensors", "RuntimeError", pg, site=site, action="raised")
    pg._get_backend(neuron)  # raises PyTorch's own error
    _neuron_ready.add(pg.group_name)  # a backend for neuron appeared: nothing to report


def _remember_group_sites(c10d) -> None:
    """Where each process group was created (the user's line, the API, the backend asked for), for the finding
    of a group that has no backend for neuron tensors."""
    orig = c10d._new_process_group_helper
    if getattr(orig, "_neuron_port_wrapped", False):
        return

    @functools.wraps(orig)
    def helper(*args, **kwargs):
        import sys

        from .. import events

        caller = sys._getframe(1).f_code.co_name
        api = "new_group" if "new_group" in caller else caller
        site = events.user_site(sys._getframe(1))
        backend = kwargs.get("backend", args[3] if len(args) > 3 else None)
        result = orig(*args, **kwargs)
        try:
            pg = result[0] if isinstance(result, tuple) else result
            _group_sites[pg.group_name] = (api, str(backend) if backend is not None else "", site)
        except Exception:  # noqa: BLE001 - only the finding's place is lost
            pass
        return result

    helper._neuron_port_wrapped = True
    c10d._new_process_group_helper = helper


def _ensure_cpu_backend(pg) -> None:
    """The CPU (gloo) kernels look up the group's CPU backend. A group created for the neuron device
    only (``init_process_group()`` without a backend, ``init_device_mesh("neuron", ...)``) has none:
    register its neuron backend, which is gloo, for CPU too."""
    import torch

    cpu = torch.device("cpu")
    if cpu not in pg._device_types:
        pg._register_backend(cpu, pg.BackendType.CUSTOM, pg._get_backend(torch.device(BACKEND_NAME)))
    _cpu_ready.add(pg.group_name)


@functools.lru_cache(maxsize=None)
def _pg_index_of(name: str) -> int:
    import torch

    return _pg_index(getattr(torch.ops.c10d, name).default)


def account_collective(name: str, args) -> object:
    """Check one c10d op call against TorchNeuron's limits and count it (``args`` as the op takes them);
    returns its process group. The PrivateUse1 kernels and shape-only runs (shape_only/mode.py) call it."""
    pg_i = _pg_index_of(name)
    coll, bytes_arg = C10D_OPS[name]
    pg = _unbox(args[pg_i]) if pg_i >= 0 else None
    check(coll, name, args, pg)
    if coll != "barrier":
        count(coll, pg, nbytes(args[bytes_arg]) if bytes_arg is not None else 0)
    return pg


def _make_kernel(name: str):
    import torch

    op = getattr(torch.ops.c10d, name).default

    def kernel(*args):
        pg = _unbox(args[_pg_index_of(name)]) if _pg_index_of(name) >= 0 else None
        if pg is not None and pg.group_name not in _neuron_ready:
            _require_neuron_backend(pg, C10D_OPS[name][0])
        pg = account_collective(name, args)
        if pg is not None and pg.group_name not in _cpu_ready:
            _ensure_cpu_backend(pg)
        cpu_args = [cpu_aliases.to_cpu(a) for a in args]
        r = op(*cpu_args)
        if isinstance(r, tuple) and len(r) == 2:
            cpu_aliases.keep_until_done(r[1], cpu_args, list(args), outputs=args[0])
            return (args[0], r[1])  # the op's tensors, written in place through the aliases
        return r

    kernel.__name__ = f"neuron_c10d_{name}"
    return kernel


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
                violation(name, f"{name}: point-to-point communication (send/recv/isend/irecv) is not supported "
                                "by the Neuron process group; use collectives (all_gather, all_to_all, broadcast) "
                                "instead", NotImplementedError, group)
            elif name == "monitored_barrier":
                violation(name, "monitored_barrier is not implemented by the Neuron process group; use barrier() "
                                "on the default group", NotImplementedError, group)
            else:
                if not is_default_group(group):
                    barrier_violation(group)
                count("barrier", group, 0)
        return orig(*args, **kwargs)

    wrapper._neuron_port_wrapped = True
    return wrapper
