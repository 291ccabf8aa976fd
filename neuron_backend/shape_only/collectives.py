"""Collectives of a shape-only run: fake tensors have no values to move, so a ``c10d`` op on them is
checked against TorchNeuron's limits and counted with its bytes exactly as the simulator's PrivateUse1
c10d kernels do (distributed/backend.py ``account_collective``), and returns at once: its tensors as
they are (outputs are fake: their shape is what the op writes) and a completed ``Work`` whose future
holds them (DDP's comm hooks and ``wait()`` work as after a real collective). No process group is
called, so a one-process fake world (distributed/fake_world.py) behaves as rank 0 of N.
"""

from __future__ import annotations

import torch

from . import values


def _gather_known_values(name: str, args) -> None:
    """All-gathers of a small known tensor: every rank holds what rank 0 holds (values.py, "Known values")."""
    if name == "allgather_":
        for outputs, source in zip(args[0], args[1]):
            for out in outputs:
                values.set_value(out, values.value_of(source))
    elif name == "_allgather_base_":
        known = values.value_of(args[1])
        if known is not None and args[0].numel() % max(known.numel(), 1) == 0:
            from torch.utils._python_dispatch import _disable_current_modes

            with _disable_current_modes():
                repeated = known.reshape(-1).repeat(args[0].numel() // max(known.numel(), 1))
                values.set_value(args[0], repeated.reshape(args[0].shape))


def run(name: str, func, args):
    from ..distributed.backend import account_collective

    account_collective(name, args)
    _gather_known_values(name, args)
    two = len(func._schema.returns) == 2  # (tensors, Work), else Work
    future = torch.futures.Future()
    future.set_result(args[0] if two else [])
    work = torch._C._distributed_c10d._create_work_from_future(future).boxed()  # as a c10d op returns it
    return (args[0], work) if two else work
