"""Sharding arithmetic: how far prefill and decode can be split, and what the collectives cost.

The collective costs themselves are in `collectives` (a TPU torus ring, a GPU NVLink switch) and the hop counts in
`hops`; this module builds on them. In the book's notation W_ici is one direction of one ICI link
(`chip.ici_link_bandwidth`) and W_ici,bidi = 2 W_ici both directions (`chip.ici_bidirectional`); on a torus ring of n
chips, V = bytes of the full array,
    all-gather, reduce-scatter:  V / W_ici,bidi      all-reduce:  2 V / W_ici,bidi      all-to-all:  V / (4 W_ici,bidi)
and each takes `hops.collective_hops` hops of ~1 us: floor(n / 2) per pass on a ring, n - 1 on an axis without
wraparound, two passes for an all-reduce. On a GPU the collective bandwidth W is the NVLink injection bandwidth
instead (`collectives.collective_bandwidth`), and beta, the model-parallelism limits and FSDP's cost below use it.
`latency_bound_bytes` stays importable from here, where the book's public API first placed it; it lives in
`collectives`.
"""

import math
from dataclasses import dataclass

from types import MappingProxyType

from . import collectives, hops
from ._validate import axes, positive, positive_int
from .collectives import latency_bound_bytes  # noqa: F401 - readers import sharding.latency_bound_bytes
from .dtypes import bytes_per_element
from .hardware import get_chip
from .inference import decode_step_time
from .memory import param_bytes as model_param_bytes
from .models import get_model

__all__ = ["TORUS_SHAPES", "DecodeStepComponents", "FsdpDecodeCost", "KvSharding", "beta", "decode_hops_per_layer",
           "decode_step_components", "fsdp_decode_cost", "fsdp_gather_bytes", "kv_cache_sharding", "max_decode_model_parallelism",
           "max_prefill_model_parallelism", "weight_shapes"]


def beta(chip) -> float:
    """beta = W_hbm / W: HBM bandwidth over the collective bandwidth W of `collectives.collective_bandwidth`.

    On a TPU W = W_ici,bidi, one ICI link's two directions: 9.1 on TPU v5e (the Scaling Book rounds it to 8), 36.9 on
    Ironwood (7.38e12 / 2e11). On a GPU W is the NVLink injection bandwidth of its switched node: 3.35e12 / 4.5e11 =
    7.4 on H100.

    Defined in chapter 7, *Sharding prefill and generation*.
    """
    chip = get_chip(chip)
    return chip.hbm_bandwidth / collectives.collective_bandwidth(chip)


def max_decode_model_parallelism(d_ff: int, batch: int, beta_value: float) -> float:
    """F / (B x beta): model-parallel ways before a decode step's ICI *bytes* outlast its weight read.

    Per layer each chip reads 2 D F b_w / n bytes of feed-forward weights at W_hbm and moves ~2 B D b_a bytes of
    activations at W_ici,bidi; with b_w = b_a they take equally long at n = F / (B beta) (Scaling Book ch. 7:
    F = 16,384, B = 32, beta = 8 gives 64 ways). Bandwidth only: decode's collectives are usually latency-bound,
    and then `decode_hops_per_layer` sets where ICI overtakes the weights (chapter 7's figure).

    Defined in chapter 7, *Sharding prefill and generation*.
    """
    positive("d_ff", d_ff)
    positive("batch", batch)
    positive("beta_value", beta_value)
    return d_ff / (batch * beta_value)


def max_prefill_model_parallelism(chip, d_ff: int, compute_dtype: str = "bf16") -> float:
    """F x W / C: model-parallel ways per axis (or within one GPU node) before prefill turns collective-bound, with
    W = `collectives.collective_bandwidth(chip)` (W_ici,bidi on a TPU, the NVLink injection bandwidth on a GPU).

    A Megatron-sharded matmul stays compute-bound while F / n > C / W (about 2,200 on TPU v5e, and on H100 with its
    450 GB/s NVLink injection: F = 28,672 splits 13 ways, more than the 8 GPUs of an HGX node).

    Defined in chapter 7, *Sharding prefill and generation*.
    """
    chip = get_chip(chip)
    positive("d_ff", d_ff)
    return d_ff * collectives.collective_bandwidth(chip) / chip.peak_flops(compute_dtype)


@dataclass(frozen=True)
class FsdpDecodeCost:
    """Per decode step: all-gathering FSDP-sharded weights over ICI vs reading a shard from HBM."""

    ici_s: float
    hbm_s: float

    @property
    def slowdown(self) -> float:
        return self.ici_s / self.hbm_s


def fsdp_decode_cost(model, chip, n_chips: int, weight_dtype: str = "bf16") -> FsdpDecodeCost:
    """FSDP in decode: every step all-gathers the weights (P_bytes (n-1)/n / W, W = `collective_bandwidth`: W_ici,bidi
    on one ring axis, the injection bandwidth in a GPU node) instead of reading P_bytes / n from each chip's HBM; the
    ratio is (n - 1) x beta (Scaling Book ch. 7: "no FSDP in decode").

    Defined in chapter 7, *Sharding prefill and generation*.
    """
    chip = get_chip(chip)
    positive_int("n_chips", n_chips)
    if n_chips < 2:
        raise ValueError(f"FSDP needs at least 2 chips, got n_chips={n_chips}")
    weights = model_param_bytes(model, weight_dtype)
    return FsdpDecodeCost(ici_s=weights * (n_chips - 1) / n_chips / collectives.collective_bandwidth(chip),
                          hbm_s=weights / (n_chips * chip.hbm_bandwidth))


def weight_shapes(model) -> dict:
    """{name: shape} of the arrays a dense LLaMA-style decoder stores, stacked over its L layers, as the tiny JAX
    model holds them: embed [V, D], attn_norm [L, D], wq [L, D, N, H], wk and wv [L, D, K, H], wo [L, N, H, D],
    mlp_norm [L, D], w_gate and w_up [L, D, F], w_down [L, F, D], final_norm [D] and, unless the embeddings are tied,
    unembed [D, V]. Their elements are the parameter count plus the RMSNorm gains, 2 L D + D.

    Defined in chapter 7, *Sharding prefill and generation*.
    """
    m = get_model(model)
    if m.n_experts != 1 or m.is_mla or m.global_every is not None:
        raise ValueError(f"{m.name}: weight_shapes describes a dense decoder with standard attention on every layer; "
                         "use param_breakdown for MoE and MLA models")
    L, D, F, N, K, H, V = m.n_layers, m.d_model, m.d_ff, m.n_heads, m.n_kv_heads, m.head_dim, m.vocab_size
    shapes = dict(embed=(V, D), attn_norm=(L, D), wq=(L, D, N, H), wk=(L, D, K, H), wv=(L, D, K, H),
                  wo=(L, N, H, D), mlp_norm=(L, D), w_gate=(L, D, F), w_up=(L, D, F), w_down=(L, F, D),
                  final_norm=(D,))
    if not m.tied_embeddings:
        shapes["unembed"] = (D, V)
    return shapes


def fsdp_gather_bytes(model, dtype: str = "bf16", replicated=()) -> int:
    """Bytes an FSDP decode step all-gathers onto each chip: every stored array of `weight_shapes` (weights and norm
    gains) arrives whole, except those named in `replicated`, which every chip already holds whole.

    Defined in chapter 7, *Sharding prefill and generation*.
    """
    shapes = weight_shapes(model)
    names = (replicated,) if isinstance(replicated, str) else replicated
    if not isinstance(names, (tuple, list, set, frozenset)) or not all(isinstance(n, str) for n in names):
        raise ValueError(f"replicated must be a weight name or a tuple of names, got {replicated!r}; e.g. "
                         "replicated=('embed',)")
    replicated = set(names)
    unknown = sorted(replicated - set(shapes))
    if unknown:
        raise ValueError(f"replicated names {unknown}, which this model does not store; use names from "
                         f"{sorted(shapes)}")
    elements = sum(math.prod(shape) for name, shape in shapes.items() if name not in replicated)
    return round(elements * bytes_per_element(dtype))


@dataclass(frozen=True)
class KvSharding:
    """How a KV cache [B, S, K, H] is split over n chips: by KV heads first, then by batch."""

    head_shards: int
    batch_shards: int

    @property
    def all_to_alls_per_attention_layer(self) -> int:
        """Two (queries into batch sharding, outputs back to head sharding) once the batch is split; else none."""
        return 2 if self.batch_shards > 1 else 0


def kv_cache_sharding(n_kv_heads: int, batch: int, n_shards: int) -> KvSharding:
    """Shard the KV cache by KV heads up to gcd(K, n) ways (free under head-sharded attention), the rest by batch.

    Scaling Book ch. 7: beyond K ways, shard the batch, at the cost of two all-to-alls per attention layer.

    Defined in chapter 7, *Sharding prefill and generation*.
    """
    n_kv_heads, batch = positive_int("n_kv_heads", n_kv_heads), positive_int("batch", batch)
    n_shards = positive_int("n_shards", n_shards)
    head_shards = math.gcd(n_kv_heads, n_shards)
    batch_shards = n_shards // head_shards
    if batch % batch_shards:
        raise ValueError(
            f"batch={batch} does not split {batch_shards} ways: {n_shards} shards use {head_shards} for the "
            f"{n_kv_heads} KV heads and need the batch divisible by the remaining {batch_shards}; "
            f"use a batch that is a multiple of {batch_shards}"
        )
    return KvSharding(head_shards, batch_shards)


# Where the time of a model-parallel decode step goes, by chip count (chapter 7's figure) --------------------------

# The torus n chips form in chapter 7's figure, by chip count: 2D on TPU v5e (4 ICI links per chip), 3D on Ironwood
# (6 links), as square as the count allows. Chapter 7's table of hops and its tests use the same shapes.
TORUS_SHAPES = MappingProxyType({
    "tpu-v5e": MappingProxyType({4: (2, 2), 8: (4, 2), 16: (4, 4), 32: (8, 4), 64: (8, 8), 128: (16, 8),
                                 256: (16, 16)}),
    "ironwood": MappingProxyType({4: (2, 2, 1), 8: (2, 2, 2), 16: (4, 2, 2), 32: (4, 4, 2), 64: (4, 4, 4),
                                  128: (8, 4, 4), 256: (8, 8, 4)}),
})

@dataclass(frozen=True)
class DecodeStepComponents:
    """One model-parallel decode step, per chip, in seconds: the three terms of `inference.decode_step_time` plus
    the ICI collectives (two all-reduces of the [B, D] activations per layer, and two all-to-alls per layer when the
    KV cache is split by batch), each latency + bandwidth. `ici_latency_s` is the latency part of `ici_s` (each
    collective's hops x ~1 us)."""

    weights_s: float
    kv_s: float
    flops_s: float
    ici_s: float
    ici_latency_s: float

    @property
    def total_s(self) -> float:
        """kv + max(weights, flops) + ici: nothing overlaps the collectives (an upper estimate of the bound)."""
        return self.kv_s + max(self.weights_s, self.flops_s) + self.ici_s

    @property
    def ici_bound(self) -> bool:
        """True once the collectives take longer than streaming this chip's share of the weights."""
        return self.ici_s > self.weights_s


def _torus(n_chips: int, mesh_shape) -> tuple:
    n_chips = positive_int("n_chips", n_chips)
    mesh_shape = (n_chips,) if mesh_shape is None else axes("mesh_shape", mesh_shape)
    if math.prod(mesh_shape) != n_chips:
        raise ValueError(f"mesh_shape {mesh_shape} has {math.prod(mesh_shape)} chips, not n_chips={n_chips}; "
                         "pass axis sizes that multiply to n_chips")
    return mesh_shape


def decode_hops_per_layer(model, n_chips: int, batch: int, mesh_shape=None, chip=None) -> int:
    """h(n): hops of the collectives in one layer of a Megatron decode step on n chips.

    h = 2 all-reduces x (hops of one all-reduce over the torus axes, one after another) + (2 all-to-alls x the hops
    of one pass over the n_B batch shards, when `kv_cache_sharding` splits the batch n_B ways), every axis counted by
    the book's one hop rule (`hops.mesh_hops`): floor(a / 2) a pass on an axis of a chips that wraps, a - 1 on one
    that does not. `chip` decides which axes wrap, by its slice rule (`collectives.slice_hops`): a TPU v5e axis only
    when it spans 16 chips, so its 4 x 2 slice is two lines, 2 x 2 x (3 + 1) = 16 hops for LLaMA-3-70B at batch 64
    on 8 chips; without a chip every axis wraps (2 x 2 x (2 + 1) = 12). With the chip these are exactly the hops
    `decode_step_components` prices, so its latency term is L h t_hop. When every collective is latency-bound the
    step's ICI time is L h t_hop, which grows with the torus while the weight read P_bytes / (n W_hbm) falls: where
    they meet, more chips stop paying, whatever the batch (Scaling Book ch. 7, latency-bound collectives).
    Chapter 7's section *Where the step time goes*. mesh_shape: the torus the n chips form, e.g. (4, 4) (default a
    ring of n).

    Defined in chapter 7, *Sharding prefill and generation*.
    """
    m = get_model(model)
    mesh_shape = _torus(n_chips, mesh_shape)
    # one chip keeps the whole batch (one batch shard, no all-to-all hop), and the batch is checked there too
    batch_shards = (kv_cache_sharding(m.n_kv_heads, batch, n_chips).batch_shards,)
    if chip is None:
        return 2 * hops.mesh_hops("all-reduce", mesh_shape) + 2 * hops.mesh_hops("all-to-all", batch_shards)
    return 2 * collectives.slice_hops("all-reduce", chip, mesh_shape) + \
        2 * collectives.slice_hops("all-to-all", chip, batch_shards)


def decode_step_components(model, chip, n_chips: int, batch: int, context_len: int, weight_dtype: str = "bf16",
                           kv_dtype: str = "bf16", compute_dtype: str = "bf16", activation_dtype: str = "bf16",
                           mesh_shape=None, *, check_capacity: bool = True) -> DecodeStepComponents:
    """Per-step time of Megatron decode on n chips, by component (Scaling Book ch. 7, "Sharding generation").

    weights P_bytes / (n W_hbm), KV B KV_seq / (n W_hbm), FLOPs 2 B P / (n C) come from `decode_step_time`; the ICI
    term is L x [2 all-reduces of B D b_a bytes + (2 all-to-alls of the B N H b_a queries/outputs over the
    batch shards, when `kv_cache_sharding` splits the batch)], each hop latency + bandwidth by
    `collectives.collective_time` and `collectives.mesh_collective` (whether an axis wraps follows the chip's rule for
    that slice).
    mesh_shape: the torus the n chips form, e.g. (4, 4) (default a ring of n). Raises ValueError when the batch does
    not fit in HBM; `check_capacity=False` prices it as if it fitted: used to show what would not fit.

    Defined in chapter 7, *Sharding prefill and generation*.
    """
    m = get_model(model)
    positive_int("n_chips", n_chips)
    mesh_shape = _torus(n_chips, mesh_shape)
    step = decode_step_time(m, chip, n_chips, batch, context_len, weight_dtype, kv_dtype, compute_dtype,
                            check_capacity=check_capacity)
    b_act = bytes_per_element(activation_dtype)
    reduce = collectives.mesh_collective("all-reduce", batch * m.d_model * b_act, chip, mesh_shape)
    # between the batch shards (one shard, e.g. on one chip or with a KV head per chip: a collective of 0 s)
    swap = collectives.collective_time("all-to-all", batch * m.n_heads * m.head_dim * b_act, chip,
                                       kv_cache_sharding(m.n_kv_heads, batch, n_chips).batch_shards)
    ici, latency = 2 * reduce.total_s + 2 * swap.total_s, 2 * reduce.latency_s + 2 * swap.latency_s
    return DecodeStepComponents(weights_s=step.weight_s, kv_s=step.kv_s, flops_s=step.compute_s,
                                ici_s=m.n_layers * ici, ici_latency_s=m.n_layers * latency)
