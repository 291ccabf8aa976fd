"""One process as rank 0 of an N-rank job (``neuron-port check --shape-only --world-size N``): the
``neuron`` process group is PyTorch's ``FakeProcessGroup`` (no communication: it "hallucinates" every
collective) over a ``FakeStore``, so DDP, FSDP / FSDP2 and ZeRO-style sharding run with rank 0's shards,
gradients and optimizer states and its collectives' sizes, from one process. Only in a shape-only run,
where no tensor has values a collective could move (the collectives themselves are accounted by
shape_only/mode.py through backend.account_collective).

``NEURON_PORT_FAKE_WORLD=N`` switches it on; `check` sets it with RANK=0, WORLD_SIZE=N, LOCAL_RANK=0,
LOCAL_WORLD_SIZE=1 (rank 0 on its own NeuronCore).
"""

from __future__ import annotations

import functools
import os

ENV = "NEURON_PORT_FAKE_WORLD"


def world_size() -> int | None:
    value = os.environ.get(ENV, "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else None


def process_group(rank: int, size: int):
    from torch._C._distributed_c10d import FakeProcessGroup

    return FakeProcessGroup._create_internal(rank, size, FakeProcessGroup.Options())


def install(dist) -> None:
    """``init_process_group`` without a store or init method gets a FakeStore, rank 0 and the fake world's
    size: the env:// rendezvous would wait for N processes that never start."""
    size = world_size()
    c10d = dist.distributed_c10d
    orig = c10d.init_process_group
    if size is None or getattr(orig, "_neuron_port_fake_world", False):
        return
    from torch.testing._internal.distributed.fake_pg import FakeStore

    @functools.wraps(orig)
    def init_process_group(*args, **kwargs):
        if kwargs.get("store") is None and kwargs.get("init_method") is None and len(args) < 2:
            kwargs.update(store=FakeStore(), rank=0, world_size=size)
        return orig(*args, **kwargs)

    init_process_group._neuron_port_fake_world = True
    c10d.init_process_group = init_process_group
    if dist.init_process_group is orig:
        dist.init_process_group = init_process_group
