"""The achievable rate of a matrix op on a device (docs/estimate.md, "Efficiency").

A GEMM runs as output tiles, one tile per processing unit at a time (a GPU's SMs; a NeuronCore's
128 x 128 systolic array), as NVIDIA's *Matrix Multiplication Background User's Guide* describes
(https://docs.nvidia.com/deeplearning/performance/dl-performance-matrix-multiplication/index.html):

* tile quantization: a dimension that is not a multiple of the tile still costs whole tiles;
* wave quantization: the tiles run in waves of ``units`` tiles; the last wave may be partly idle.

For the (batch, M, N, K) of one call and a tile (Tm, Tn, Tk) (0: the dimension is not tiled), the
share of the issued work that is useful is

    utilization = batch · M · N · K / (waves · units · Tm' · Tn' · K'),   waves = ceil(tiles / units),
    tiles = batch · ceil(M / Tm) · ceil(N / Tn),  Tm' = Tm (or M when 0), K' = ceil(K / Tk) · Tk (or K)

and the library picks the tile (and which operand is which) that gives the most. The rate of a full
wave is the device's ``matmul_ceiling``: the best measured fraction of the dense peak on large,
well-shaped GEMMs (a published benchmark per GPU; an assumption for Trainium, listed as such). So

    matmul rate = peak(dtype) · matmul_ceiling · utilization(shape)

A small GEMM also pays a fixed time per call beyond its tiles (pipeline fill and drain, the epilogue),
so its rate is a function of its size (the shape of published GEMM curves: low for small sizes, rising
to the ceiling):

    seconds = FLOPs / (matmul rate) + latency,   rate(size) = FLOPs / seconds

``call_latency``: a GPU library GEMM's ``gemm_latency_seconds`` (an assumption with its source). A
Trainium runs a compiled graph's matmuls as instructions of one NEFF, whose fixed cost is per execution
(model.launch_costs), not per matmul.

Attention (a fused flash kernel) runs at the device's ``attention_efficiency`` of peak, the published
fraction of the flash-attention kernel its framework uses. Neither includes memory time: the roofline
takes the larger of this compute time and the bytes at the achievable bandwidth.
"""

from __future__ import annotations

import math
from typing import Mapping, Optional, Sequence

Tile = tuple[int, int, int]


def _padded(n: int, tile: int) -> int:
    return math.ceil(n / tile) * tile if tile > 0 else n


def utilization(gemm: Sequence[int], tile: Tile, units: int) -> float:
    """Useful share of the work issued for a (batch, M, N, K) GEMM in ``tile`` tiles on ``units`` units."""
    batch, m, n, k = (max(int(v), 1) for v in gemm)
    tm, tn, tk = tile
    tiles = batch * math.ceil(m / (tm or m)) * math.ceil(n / (tn or n))
    waves = math.ceil(tiles / max(units, 1))
    issued = waves * max(units, 1) * (tm or m) * (tn or n) * _padded(k, tk)
    return min(batch * m * n * k / issued, 1.0) if issued else 1.0


def best_utilization(gemm: Sequence[int], tiles: Sequence[Tile], units: int) -> float:
    """The most useful share over the device's tiles, either operand as the tile's rows (a library picks
    its kernel per shape; the Neuron compiler picks the stationary operand)."""
    if not tiles:
        return 1.0
    batch, m, n, k = gemm
    return max(utilization(shape, tile, units) for tile in tiles for shape in ((batch, m, n, k), (batch, n, m, k)))


def matrix_efficiency(family: str, gemm: Optional[Sequence[int]], ceiling: float, tiles: Sequence[Tile],
                      units: int, attention: float, fallback: float) -> float:
    """Fraction of the dense peak an op of ``family`` runs at: a GEMM by its shape (the module docstring),
    attention at ``attention``; ``fallback`` (the assumed compute fraction) where the device has no
    figure or the op's shape is not known."""
    if family == "matmul" and ceiling > 0:
        return ceiling * (best_utilization(gemm, tiles, units) if gemm else 1.0)
    if family == "attention" and attention > 0:
        return attention
    return fallback


def call_latency(family: str, kind: str, a: Mapping[str, float]) -> float:
    """The fixed seconds of one call of an op of ``family`` on a device of ``kind`` beyond its work at the
    rate above: a GPU GEMM's ``gemm_latency_seconds``, else none."""
    return a["gemm_latency_seconds"] if kind == "gpu" and family == "matmul" else 0.0
