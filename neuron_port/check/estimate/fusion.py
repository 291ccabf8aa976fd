"""Fused-region bytes of a compiled graph (docs/estimate.md, "Fusion").

A compiler that fuses (Inductor, neuronx-cc on a torch.compile graph) runs each chain of elementwise,
norm, softmax, reduction and copy ops that feed one another as one kernel: the region reads each tensor it
takes from outside once and writes each tensor it hands outside once; what flows between its ops stays
on chip. Matmuls, convolutions, attention and lookups are the boundaries: they read and write their own
tensors (``flops.work``). The graph's dataflow comes from the ``graph_work`` event's ``flow``
(neuron_backend/EVENTS.md): one entry per call, ``[op index, output bytes, graph output, [[producer,
bytes], ...]]``.

``fused_bytes`` returns, per op of the graph's ``ops`` list, the bytes of one graph run under fusion; the
caller uses them in place of the unfused bytes for the fusible ops.
"""

from __future__ import annotations

from typing import Sequence

from neuron_port.check.estimate.flops import Work

FUSIBLE = frozenset({"elementwise", "norm", "softmax", "reduction", "copy/view"})


def _root(parent: list[int], i: int) -> int:
    while parent[i] != i:
        parent[i] = parent[parent[i]]
        i = parent[i]
    return i


def _regions(works: Sequence[Work], flow: Sequence[Sequence]):
    """The graph's calls (entries), which are views, which are fusible, each call's region and its
    consumers; None for an unreadable flow."""
    entries = []
    for entry in flow:
        try:
            index, out_bytes, is_output, producers = int(entry[0]), float(entry[1]), bool(entry[2]), entry[3]
            entries.append((index, out_bytes, is_output, [(int(p), float(b)) for p, b in producers]))
        except (TypeError, ValueError, IndexError):
            return None  # an unreadable flow: no fusion rather than a wrong one
    n = len(entries)
    # a view moves nothing (flops.VIEWS: 0 bytes): its consumers read what it views
    view = [0 <= e[0] < len(works) and works[e[0]].family == "copy/view" and works[e[0]].bytes == 0
            for e in entries]
    source = list(range(n))
    for j, (_, _, _, producers) in enumerate(entries):
        if view[j] and producers and 0 <= producers[0][0] < j:
            source[j] = source[producers[0][0]]
    entries = [(index, out_bytes, is_output, [(source[p] if 0 <= p < n else p, b) for p, b in producers])
               for index, out_bytes, is_output, producers in entries]
    for j in range(n):  # a view that is a graph output makes what it views one
        if view[j] and entries[j][2] and source[j] != j:
            entries[source[j]] = entries[source[j]][:2] + (True,) + entries[source[j]][3:]
    fusible = [0 <= e[0] < len(works) and works[e[0]].family in FUSIBLE and not view[j]
               for j, e in enumerate(entries)]
    parent = list(range(n))
    consumers: list[list[int]] = [[] for _ in range(n)]
    for j, (_, _, _, producers) in enumerate(entries):
        if view[j]:
            continue
        for p, _ in producers:
            if 0 <= p < n:
                consumers[p].append(j)
                if fusible[j] and fusible[p]:
                    parent[_root(parent, j)] = _root(parent, p)
    region = [_root(parent, j) for j in range(n)]
    return entries, view, fusible, region, consumers


def fused_bytes(works: Sequence[Work], flow: Sequence[Sequence]) -> dict[int, float]:
    """Bytes per run of each fusible op of the graph (by its index in ``works``) when every connected
    chain of fusible calls is one region; ops absent from the result keep their own bytes."""
    regions = _regions(works, flow)
    if regions is None:
        return {}
    entries, view, fusible, region, consumers = regions
    n = len(entries)
    out: dict[int, float] = {}
    read: set[tuple[int, int]] = set()  # (producer, region): a region reads an outside tensor once
    for j, (index, out_bytes, is_output, producers) in enumerate(entries):
        if not fusible[j]:
            continue
        moved = 0.0
        for p, nbytes in producers:
            inside = 0 <= p < n and fusible[p] and region[p] == region[j]
            if not inside and (p, region[j]) not in read:
                read.add((p, region[j]))
                moved += nbytes
        if is_output or any(not fusible[c] or region[c] != region[j] for c in consumers[j]):
            moved += out_bytes
        out[index] = out.get(index, 0.0) + moved
    for index in {e[0] for e, f in zip(entries, fusible) if f}:
        out.setdefault(index, 0.0)
    return out


def kernels(works: Sequence[Work], flow: Sequence[Sequence], counts: Sequence[int]) -> float:
    """Kernels one run of the graph launches when it is fused as above: one per region of fusible calls,
    one per other call that is not a view (a matmul, a convolution, an attention, a lookup: a library
    kernel each). Without a readable flow, one per call that is not a view (``counts``: the calls of each
    op of ``works`` in one run)."""
    regions = _regions(works, flow) if flow else None
    if regions is None:
        return float(sum(c for w, c in zip(works, counts) if not (w.family == "copy/view" and w.bytes == 0)))
    entries, view, fusible, region, _ = regions
    fused = {region[j] for j in range(len(entries)) if fusible[j]}
    others = sum(1 for j in range(len(entries)) if not view[j] and not fusible[j])
    return float(len(fused) + others)
