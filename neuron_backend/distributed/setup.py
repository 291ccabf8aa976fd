"""One NeuronCore per process: the setup of ``init_process_group(backend="neuron")``.

Like TorchNeuron's ``_neuron_runtime_setup`` (April source, distributed/backend.py): the first
``neuron`` process group asserts that the Neuron runtime has not started ("Neuron runtime should not
be initialized before the init_process_group."), sets ``NEURON_RT_VISIBLE_CORES=<LOCAL_RANK>`` unless
it is set (LOCAL_RANK / LOCAL_WORLD_SIZE from the environment, else by grouping the ranks per host
through the store), asserts that the process sees exactly one core ("Attempted to have more than one
device per process in distributed setup") and starts the runtime. As in c10_neuron (NeuronDevice.cpp:
device_count() is local_world_size, set_local_device_start_index(local_rank)), the process's one core is
``neuron:<LOCAL_RANK>``, its current device (``neuron`` == ``neuron:<LOCAL_RANK>``, ``device_count()`` ==
LOCAL_WORLD_SIZE), so accelerate's ``DDP(device_ids=[local_process_index])`` and
``torch.neuron.set_device(local_rank)`` work; ``set_device`` of another index fails ("Device index 0 is out of
range. Valid range is 1 to 1 for this process"). The cases the sources leave open are decided in ``rules/op_policy.toml``
[distributed] and reported as NP907 events: more local ranks than the simulated node has cores, a
``set_device(i)`` before the process group, a device index other than 0 afterwards (also when the
error ends the process: the excepthook).
"""

from __future__ import annotations

import os
import re
import socket
import sys
import threading

from .limits import record_violation, violation

# TorchNeuron's assertions in _neuron_runtime_setup (both AssertionError).
RUNTIME_INITIALIZED_MESSAGE = "Neuron runtime should not be initialized before the init_process_group."
ONE_DEVICE_MESSAGE = "Attempted to have more than one device per process in distributed setup"
# Logical NeuronCores of the simulated node unless NEURON_RT_NUM_CORES says otherwise: one Trainium2 chip at
# LNC=2 (trn2.3xlarge), the simulator's default device count.
SIMULATED_NODE_CORES = 4

_lock = threading.Lock()
_setup: dict | None = None  # one-core-per-process setup of the first neuron process group
_setup_started = False


def setup_once(rank: int, size: int, store) -> dict:
    """The setup, run by the first ``neuron`` process group of the process (TorchNeuron: the first
    ProcessGroupNeuron, the default group, sets the process up); what its process_group event records,
    ``{}`` for later groups."""
    global _setup_started
    with _lock:
        first = not _setup_started
        _setup_started = True
    return _neuron_runtime_setup(rank, size, store) if first else {}


def _neuron_runtime_setup(rank: int, size: int, store) -> dict:
    """TorchNeuron's _neuron_runtime_setup on the simulated device; returns what the process_group event
    records (local_rank, local_world_size, visible_cores, device_count)."""
    global _setup
    from ..device import runtime

    if runtime.runtime_initialized():
        violation("init_process_group", RUNTIME_INITIALIZED_MESSAGE + " The simulated runtime had started: a tensor "
                  "was created on or moved to a neuron device, or torch.neuron.init() / get_device_properties() was "
                  "called. Create tensors and move models to the device after init_process_group.",
                  AssertionError, None)
    local_rank, local_world_size = _local_rank_and_size(rank, size, store)
    if not os.environ.get("NEURON_RT_VISIBLE_CORES"):
        cores = _node_cores()
        if local_rank >= cores:
            violation("init_process_group", f"local rank {local_rank} needs NeuronCore {local_rank} "
                      f"(NEURON_RT_VISIBLE_CORES={local_rank}), but the simulated node has {cores} logical NeuronCores "
                      f"(0-{cores - 1}): one process per NeuronCore, so at most {cores} processes per node. Start fewer "
                      "processes per node, or set NEURON_RT_NUM_CORES to the node's core count to simulate a larger "
                      "instance (trn2.48xlarge: 64 at LNC=2).", RuntimeError, None)
        os.environ["NEURON_RT_VISIBLE_CORES"] = str(local_rank)
    visible = os.environ["NEURON_RT_VISIBLE_CORES"]
    n = runtime.visible_core_count()
    if n != 1:
        violation("init_process_group", f"{ONE_DEVICE_MESSAGE} (NEURON_RT_VISIBLE_CORES={visible} makes {n} NeuronCores "
                  "visible to this process; leave it unset so that init_process_group gives each process NeuronCore "
                  "LOCAL_RANK, or name one core per process)", AssertionError, None)
    count = max(local_world_size, local_rank + 1)  # c10_neuron::device_count(): local_world_size
    runtime.set_process_devices(count, local_rank)
    runtime.mark_runtime_initialized()
    _setup = {"local_rank": local_rank, "local_world_size": local_world_size, "visible_cores": visible,
              "device_count": count, "current_device": local_rank}
    for i, site in runtime.pre_init_set_device:
        if i == local_rank:
            continue
        record_violation(
            "set_device", f"torch.neuron.set_device({i}) before init_process_group(backend=\"neuron\"): the process group "
            f"then pins the process to one NeuronCore, neuron:{local_rank} (its LOCAL_RANK), and makes it current, so "
            f"the call has no effect and neuron:{i} is no device of this process afterwards. Drop the call, or set "
            "the device to the local rank (simulator decision, unconfirmed: see rules/op_policy.toml [distributed])",
            None, None, site=site, action="recorded")
    return dict(_setup)


def _node_cores() -> int:
    """The simulated node's logical NeuronCores: ``NEURON_RT_NUM_CORES`` when it is a positive number, else
    one Trainium2 chip at LNC=2 (the local ranks of a node must fit, one core each)."""
    num = os.environ.get("NEURON_RT_NUM_CORES", "").strip()
    return int(num) if num.isdigit() and int(num) > 0 else SIMULATED_NODE_CORES


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


def process_device() -> int | None:
    """The device index of this process's NeuronCore after the setup (its LOCAL_RANK), else None."""
    return None if _setup is None else _setup["local_rank"]


def invalid_device_index(index: int, message: str, *, frame=None, error: str = "ValueError") -> None:
    """After the setup, a device index other than LOCAL_RANK is another process's NeuronCore: record an NP907
    event (the caller raises). device/management.py calls it through sys.modules (set_device's error)."""
    if _setup is None or index == _setup["local_rank"]:
        return
    from .. import events

    site = events.user_site(frame if frame is not None else sys._getframe(1))
    record_violation(
        "device", f"{message}: after init_process_group(backend=\"neuron\") this process has one NeuronCore, "
        f"neuron:{_setup['local_rank']} (its LOCAL_RANK, the current device); neuron:{index} is not its device. Use "
        "torch.device(\"neuron\") or the local rank, not the global rank, as the device index (TorchNeuron source, "
        "see rules/op_policy.toml [distributed])", error, None, site=site, action="raised")


_INVALID_DEVICE = re.compile(r"Invalid device id: (\d+)\. Valid range is 0 to -?\d+"
                             r"|Attempted to access device that doesn't attach to this process, received (\d+)"
                             r"|neuron:(\d+) is not a NeuronCore of this process")


def install_excepthook() -> None:
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
                index = next(int(g) for g in m.groups() if g is not None)
                invalid_device_index(index, m.group(0), frame=inner.tb_frame, error=exc_type.__name__)
        except Exception:  # noqa: BLE001 - an excepthook must not raise
            pass
        prev(exc_type, exc, tb)

    hook._neuron_port_distributed = True
    sys.excepthook = hook
