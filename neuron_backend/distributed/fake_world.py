"""One process as rank 0 of an N-rank job (``neuron-port check --shape-only --world-size N``): the
``neuron`` process group is PyTorch's ``FakeProcessGroup`` (no communication: it "hallucinates" every
collective) over a ``FakeStore``, so DDP, FSDP / FSDP2 and ZeRO-style sharding run with rank 0's shards,
gradients and optimizer states and its collectives' sizes, from one process. Only in a shape-only run,
where no tensor has values a collective could move (the collectives themselves are accounted by
shape_only/mode.py through backend.account_collective).

``NEURON_PORT_FAKE_WORLD=N`` switches it on; `check` sets it with RANK=0, WORLD_SIZE=N, LOCAL_RANK=0,
LOCAL_WORLD_SIZE=1 (rank 0 on its own NeuronCore).

Rank 0 builds only what rank 0 holds. FSDP cuts each parameter into one piece per rank with ``torch.chunk``
over the world's size and keeps its own: FSDP2 in ``_chunk_with_empty`` (``_fsdp_param.py``, at sharding and
for the post-forward size), FSDP1 in ``FlatParamHandle._get_unpadded_shard``. Every piece is a tensor, so
rank 0 of 4,096 made 4,096 fake views (and an empty tensor for each rank past the last chunk) per parameter,
twice: the shard step grew with the world, not the model. In a fake world those helpers give the pieces
lazily: a piece is the same view ``torch.chunk`` makes (``narrow`` at ``torch.chunk``'s offsets; an empty
tensor past the last chunk, as the helpers pad), made when the caller takes it; the pieces nobody takes
(the other ranks') are never made. Views are no counted device call and hold no memory, so the report
(op calls, memory, collectives, the estimate) is the same as with every piece made.
``NEURON_PORT_FAKE_WORLD_PIECES=all`` makes every piece as PyTorch does (to compare).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence

ENV = "NEURON_PORT_FAKE_WORLD"
PIECES_ENV = "NEURON_PORT_FAKE_WORLD_PIECES"  # "all": every rank's piece made, as PyTorch makes them


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
    _fake_rendezvous(size)
    if os.environ.get(PIECES_ENV, "").strip().lower() != "all":
        from ..after_import import after_import

        after_import("torch.distributed.fsdp._fully_shard._fsdp_param", _fsdp2_lazy_pieces)
        after_import("torch.distributed.fsdp._flat_param", _fsdp1_own_piece)


def _fake_rendezvous(size: int) -> None:
    """A module that took ``init_process_group`` by name before the wrapper above (``init_device_mesh``:
    torch/distributed/device_mesh.py imports it) reaches the env:// (or tcp://) rendezvous, whose TCPStore
    waits for N processes that never start: in a fake world both give a FakeStore, rank 0 and the world's
    size, as the wrapper does."""
    import importlib

    from torch.testing._internal.distributed.fake_pg import FakeStore

    rendezvous = importlib.import_module("torch.distributed.rendezvous")  # the package re-exports a function

    def fake(url, timeout=None, **kwargs):
        yield FakeStore(), 0, size
        raise RuntimeError("Unable to perform re-rendezvous in a fake world")

    for scheme in ("env", "tcp"):
        if not getattr(rendezvous._rendezvous_handlers.get(scheme), "_neuron_port_fake_world", False):
            fake._neuron_port_fake_world = True
            rendezvous._rendezvous_handlers[scheme] = fake


# ---------------------------------------------------------------- one rank's piece
def chunk_layout(size: int, num_chunks: int) -> tuple[int, int, int]:
    """``torch.chunk(t, num_chunks)`` along a dimension of ``size``: (pieces made, piece size, last piece's
    size), as ATen's ``chunk`` computes them (aten/src/ATen/native/TensorShape.cpp: ``split`` by
    ``ceil(size / num_chunks)``, or ``num_chunks`` empty pieces of an empty dimension)."""
    if num_chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {num_chunks}")
    split = (size + num_chunks - 1) // num_chunks
    if split == 0 and size == 0:
        return num_chunks, 0, 0
    made = max((size + split - 1) // split, 1)
    return made, split, split - (split * made - size)


def piece(tensor, num_chunks: int, index: int, dim: int = 0):
    """Piece ``index`` of ``torch.chunk(tensor, num_chunks, dim)`` (the same view), or None past the last
    piece torch.chunk makes."""
    made, split, last = chunk_layout(tensor.size(dim), num_chunks)
    if index >= made:
        return None
    return tensor.narrow(dim, index * split, last if index == made - 1 else split)


class LazyPieces(Sequence):
    """FSDP2's ``_chunk_with_empty(tensor, num_chunks, dim)`` (a list of ``num_chunks`` pieces, the ranks past
    the last chunk given ``pieces[0].new_empty(0)``), each piece made when it is first taken."""

    def __init__(self, tensor, num_chunks: int, dim: int) -> None:
        chunk_layout(tensor.size(dim), num_chunks)  # torch.chunk's own error for num_chunks <= 0
        self._tensor, self._n, self._dim, self._made = tensor, num_chunks, dim, {}

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self._n))]
        i = index + self._n if index < 0 else index
        if not 0 <= i < self._n:
            raise IndexError("list index out of range")
        got = self._made.get(i)
        if got is None:
            got = piece(self._tensor, self._n, i, self._dim)
            if got is None:
                got = self[0].new_empty(0)
            self._made[i] = got
        return got


def _fsdp2_lazy_pieces(fsdp_param) -> None:
    original = getattr(fsdp_param, "_chunk_with_empty", None)
    if original is None or getattr(original, "_neuron_port_lazy", False):
        return

    @functools.wraps(original)
    def _chunk_with_empty(tensor, num_chunks: int, dim: int):
        return LazyPieces(tensor, num_chunks, dim)

    _chunk_with_empty._neuron_port_lazy = True
    fsdp_param._chunk_with_empty = _chunk_with_empty


def _fsdp1_own_piece(flat_param) -> None:
    handle = getattr(flat_param, "FlatParamHandle", None)
    original = getattr(handle, "_get_unpadded_shard", None) if handle is not None else None
    if original is None or getattr(original, "_neuron_port_lazy", False):
        return

    def _get_unpadded_shard(tensor, rank: int, world_size: int):
        flat = (tensor.flatten() if flat_param._is_truly_contiguous(tensor)
                else tensor.as_strided((tensor.numel(),), (1,)))
        first = piece(flat, world_size, 0)
        chunk = piece(flat, world_size, rank) if rank else first
        if chunk is None:  # not enough chunks across ranks: this rank's is empty, padded with zeros
            chunk = first.new_empty(0)
        numel_to_pad = first.numel() - chunk.numel()
        if numel_to_pad < 0:
            raise AssertionError("Chunk's size should be at most the first chunk's size")
        return chunk, numel_to_pad

    _get_unpadded_shard.__doc__ = original.__doc__
    _get_unpadded_shard._neuron_port_lazy = True
    handle._get_unpadded_shard = staticmethod(_get_unpadded_shard)
