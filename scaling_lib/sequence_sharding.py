"""Sharding the KV cache along the sequence: long-context decode when neither heads nor batch can be split.

Chapter 7 shards the cache [B, S, K, H] by KV heads (at most K ways) and then by batch (two all-to-alls per
attention layer, and at least one sequence per chip). A batch-1, long-context request of a multiquery model can use
neither: K = 1 and B = 1. Split S instead: chip j holds tokens [j S/n, (j+1) S/n) of every sequence and attends
with the (replicated) query to its slice only. Softmax does not split directly, but it combines exactly:

    chip j:   m_j = max_s q.k_s,   l_j = sum_s exp(q.k_s - m_j),   o_j = sum_s exp(q.k_s - m_j) v_s
    combine:  m = max_j m_j,       o = sum_j exp(m_j - m) o_j / sum_j exp(m_j - m) l_j

(the split-softmax of FlashAttention / "flash-decoding"). Per attention layer that is an all-reduce (max) of the
[B, N] maxima and an all-reduce (sum) of the [B, N, H + 1] rescaled outputs and sums: two small, latency-bound
collectives. In exchange each chip reads 1/n of the cache:

    KV read per chip = B S 2 L K H b / (n W_hbm),    network = L x 2 all-reduces of ~B N (H + 1) b bytes.

On a torus the all-reduces run axis by axis: a reduce-scatter and an all-gather, each floor(a / 2) hops per axis of
a chips that wraps and a - 1 on one that does not (the book's one hop rule, `collectives.slice_hops`; each axis of
the mesh wraps as an axis of its size does in the chip's slices), and the axes' links share the bandwidth term.

The new token's key and value are written by the one chip that owns its position. `scaling_lib.tiny.
sequence_sharding` runs this on the emulated mesh. Used in chapter 14, *Serving details*.
"""

import math
from dataclasses import dataclass

from ._validate import axes, positive_int
from .collectives import collective_time, slice_hops
from .dtypes import bytes_per_element
from .hardware import get_chip
from .hops import cube_torus
from .memory import kv_cache_bytes
from .models import get_model


@dataclass(frozen=True)
class SequenceShardedAttention:
    """Per decode step, per chip: the cache it holds and reads, and the two all-reduces of every layer."""

    n_chips: int
    kv_bytes_per_chip: float
    kv_read_s: float
    combine_bytes: float  # the sum all-reduce's array: B N (H + 1) values per layer
    combine_s: float  # L x (max all-reduce + sum all-reduce), each max(bandwidth, hop latency)
    combine_latency_bound: bool

    @property
    def total_s(self) -> float:
        """KV read + combine: the attention part of a step, with nothing overlapped."""
        return self.kv_read_s + self.combine_s


def _all_reduce_s(array_bytes: float, chip, mesh: tuple) -> tuple:
    """(bandwidth, latency) of an all-reduce over every axis of a torus: 2 V / W_ici,bidi shared by the axes'
    links; two passes of the hops of `collectives.slice_hops` per axis."""
    axes = [a for a in mesh if a > 1]
    if not axes:
        return 0.0, 0.0
    bandwidth = collective_time("all-reduce", array_bytes, chip, math.prod(axes)).bandwidth_s / len(axes)
    return bandwidth, slice_hops("all-reduce", chip, mesh, whole_slice=False) * chip.ici_hop_latency


def sequence_sharded_attention(model, chip, n_chips: int, batch: int, context_len: int, kv_dtype: str = "bf16",
                               activation_dtype: str = "fp32", mesh_shape=None) -> SequenceShardedAttention:
    """The module docstring's cost of decode attention with the cache split over n chips along S, the chips forming
    the torus `mesh_shape` (default: the most cube-like, `hops.cube_torus`).

    ValueError when n does not divide the context (each chip holds an equal slice).

    Defined in chapter 14, *Serving details*.
    """
    m, c = get_model(model), get_chip(chip)
    n, b, s = positive_int("n_chips", n_chips), positive_int("batch", batch), positive_int("context_len", context_len)
    if s % n:
        raise ValueError(f"context_len={s} does not split into {n} equal slices; use a multiple of n_chips")
    mesh = cube_torus(n) if mesh_shape is None else axes("mesh_shape", mesh_shape)
    if math.prod(mesh) != n:
        raise ValueError(f"mesh_shape {mesh} holds {math.prod(mesh)} chips, not n_chips={n}; pick axes whose "
                         f"product is {n}, or mesh_shape=None for the most cube-like torus")
    kv = kv_cache_bytes(m, s, b, kv_dtype) / n
    a = bytes_per_element(activation_dtype)
    stats = b * m.n_heads * a  # the [B, N] maxima
    combined = b * m.n_heads * (m.head_dim + 1) * a  # rescaled outputs and sums
    times = [_all_reduce_s(size, c, mesh) for size in (stats, combined)]
    return SequenceShardedAttention(
        n_chips=n, kv_bytes_per_chip=kv, kv_read_s=kv / c.hbm_bandwidth, combine_bytes=combined,
        combine_s=m.n_layers * sum(max(bw, lat) for bw, lat in times),
        combine_latency_bound=times[1][1] > times[1][0])
