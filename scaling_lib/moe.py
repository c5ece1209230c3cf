"""Mixture-of-experts inference: critical batch, weight bytes, expert-sharded memory and the routing all-to-alls.

An MoE layer holds E copies of the feed-forward block and sends each token through k of them. Three consequences
for decode (Scaling Book ch. 7):
- every expert's matmul sees only k / E of the tokens, so compute-bound decode needs E / k x B_crit tokens
  (`roofline.moe_critical_batch_size`: 1,920 for 16 experts, top-2, bf16 on v5e);
- the weight bytes grow with E while the KV cache (attention) does not change, so decode is weight-bandwidth-
  and capacity-bound at almost any batch;
- routing costs two all-to-alls per layer (dispatch tokens to their experts, return the outputs), which at decode
  sizes are latency-bound.
Expert FFNs are gated (3 D F parameters each, `models.param_breakdown`); a router of D x E per layer is counted.
"""

import math
from dataclasses import dataclass

from ._validate import divides, positive, positive_int
from .collectives import collective_time, latency_bound_bytes
from .dtypes import bytes_per_element
from .hardware import get_chip
from .memory import kv_bytes_per_token
from .models import active_param_count, get_model, param_breakdown, param_count


def as_moe(model, n_experts: int, n_active_experts: int):
    """The same model with every feed-forward block replaced by n_experts experts, n_active_experts per token.

    Defined in chapter 10, *Speculative decoding, mixture of experts and quantization*.
    """
    n_experts, n_active_experts = positive_int("n_experts", n_experts), positive_int("n_active_experts", n_active_experts)
    return get_model(model).with_(n_experts=n_experts, n_active_experts=n_active_experts)


@dataclass(frozen=True)
class MoeWeights:
    """Parameters and weight bytes of an MoE next to the dense model it was made from."""

    dense_params: int
    total_params: int  # every expert
    active_params: int  # what one token touches: k experts
    bytes_per_param: float
    kv_bytes_per_token: float  # identical for the MoE and the dense model: attention is unchanged

    @property
    def weight_bytes(self) -> float:
        return self.total_params * self.bytes_per_param

    @property
    def dense_weight_bytes(self) -> float:
        return self.dense_params * self.bytes_per_param

    @property
    def weight_ratio(self) -> float:
        """MoE weight bytes over dense weight bytes: 1 + (E - 1) x (feed-forward share of the dense params)."""
        return self.total_params / self.dense_params


def moe_weights(model, n_experts: int, n_active_experts: int, dtype: str = "bf16") -> MoeWeights:
    """Total vs active params and weight bytes of `model` turned into an E-expert, top-k MoE.

    Only the feed-forward blocks are multiplied, so the ratio depends on the model's feed-forward share. The
    Scaling Book's ch. 7 worked-problem model (`get_model("sb7-worked")`: L = 64, D = 4,096, F = 16,384, N = 32,
    K = 8, H = 256, V = 32,128, embedding counted once) has 18.4e9 parameters; with E = 16, k = 2 it has 212e9
    (31.2e9 active), 11.5x the weight bytes: the "about 12x" of the source. LLaMA-2-13B itself (untied
    embeddings, F = 2.7 D) gives 10.8x.

    Defined in chapter 10, *Speculative decoding, mixture of experts and quantization*.
    """
    dense = get_model(model).with_(n_experts=1, n_active_experts=1)
    moe = as_moe(dense, n_experts, n_active_experts)
    return MoeWeights(dense_params=param_count(dense), total_params=param_count(moe),
                      active_params=active_param_count(moe), bytes_per_param=bytes_per_element(dtype),
                      kv_bytes_per_token=kv_bytes_per_token(moe, dtype))


def expected_experts_touched(n_experts: int, n_active_experts: int, tokens: int) -> float:
    """E (1 - (1 - k/E)^T): experts that receive at least one of T tokens under uniform random routing.

    The experts a decode step must read from HBM. It reaches E within a few E / k tokens, long before the batch
    is large enough (E / k x B_crit) for those reads to be amortised: the reason MoE decode stays
    weight-bandwidth-bound. Uniform, independent routing is an assumption (real routers are skewed).

    Defined in chapter 10, *Speculative decoding, mixture of experts and quantization*.
    """
    positive_int("n_experts", n_experts)
    positive_int("n_active_experts", n_active_experts)
    positive("tokens", tokens, allow_zero=True)  # an expected token count (a mean over requests) need not be whole
    if n_active_experts > n_experts:
        raise ValueError(f"n_active_experts={n_active_experts} exceeds n_experts={n_experts}")
    return n_experts * (1.0 - (1.0 - n_active_experts / n_experts) ** tokens)


@dataclass(frozen=True)
class ExpertShardedMemory:
    """Bytes per chip with experts split over `expert_shards` (n_E) chips and each expert over `model_shards` (n_mp)."""

    expert_bytes_per_chip: float  # E / n_E experts, each split n_mp ways
    other_bytes_per_chip: float  # attention, router and embeddings, split n_mp ways, replicated n_E times
    capacity_bytes: float  # HBM of one chip

    @property
    def total_bytes_per_chip(self) -> float:
        return self.expert_bytes_per_chip + self.other_bytes_per_chip

    @property
    def free_bytes_per_chip(self) -> float:
        """HBM left for KV caches (negative: the weights do not fit)."""
        return self.capacity_bytes - self.total_bytes_per_chip

    @property
    def fits(self) -> bool:
        return self.free_bytes_per_chip >= 0


def expert_sharded_memory(model, chip, expert_shards: int, model_shards: int = 1,
                          dtype: str = "bf16") -> ExpertShardedMemory:
    """Weights per chip when the experts are split n_E ways and each expert n_mp ways (Scaling Book ch. 7, worked
    problem 6, which writes the expert weights W_in[E_Z, D, F_Y] on a Z x Y mesh).

    Feed-forward bytes / (n_E n_mp) per chip, the rest (attention, router, embeddings) / n_mp per chip, on n_E x n_mp
    chips. n_E is `expert_shards`, n_mp is `model_shards` (book/notation.md). Chapter 10's section *Expert-sharded
    memory*.

    Defined in chapter 10, *Speculative decoding, mixture of experts and quantization*.
    """
    m = get_model(model)
    chip = get_chip(chip)
    if m.n_experts == 1:
        raise ValueError(f"{m.name} is dense (n_experts=1): it has no experts to shard; use moe.as_moe(model, E, k) "
                         "first")
    divides("expert_shards", expert_shards, "n_experts", m.n_experts)
    positive_int("model_shards", model_shards)
    parts = param_breakdown(m)
    size = bytes_per_element(dtype)
    return ExpertShardedMemory(
        expert_bytes_per_chip=parts.feed_forward * size / (expert_shards * model_shards),
        other_bytes_per_chip=(parts.attention + parts.router + parts.embeddings) * size / model_shards,
        capacity_bytes=chip.hbm_capacity)


@dataclass(frozen=True)
class RoutingAllToAll:
    """The two all-to-alls of one MoE layer at decode: dispatch the tokens to their experts, then return them."""

    bytes_each: float  # the dispatched array: B x k x D activations
    latency_bound_bytes: float  # below this a collective over these shards is latency-bound
    time_each_s: float  # collectives.collective_time("all-to-all", ...)
    n_layers: int

    per_layer: int = 2

    @property
    def latency_bound(self) -> bool:
        return self.bytes_each < self.latency_bound_bytes

    @property
    def per_step_s(self) -> float:
        """All routing all-to-alls of one decode step: 2 per layer x L layers."""
        return self.per_layer * self.n_layers * self.time_each_s


def routing_all_to_all(model, chip, batch: int, expert_shards: int, activation_dtype: str = "bf16") -> RoutingAllToAll:
    """Size and time of the routing all-to-alls at decode: B x k x D x bytes each, two per layer.

    Each of the B tokens sends its D-wide activation to each of its k experts (and gets k results back), so the
    array resharded is B k D elements. Decode batches make it small: compare with
    `collectives.latency_bound_bytes(chip, expert_shards)` (Scaling Book ch. 7, on latency-bound decode collectives).

    Defined in chapter 10, *Speculative decoding, mixture of experts and quantization*.
    """
    m = get_model(model)
    positive_int("batch", batch)
    positive_int("expert_shards", expert_shards)
    if m.n_experts == 1:
        raise ValueError(f"{m.name} is dense (n_experts=1): it routes nothing; use moe.as_moe(model, E, k) first")
    divides("expert_shards", expert_shards, "n_experts", m.n_experts)
    array = batch * m.n_active_experts * m.d_model * bytes_per_element(activation_dtype)
    return RoutingAllToAll(bytes_each=array, latency_bound_bytes=latency_bound_bytes(chip, expert_shards),
                           time_each_s=collective_time("all-to-all", array, chip, expert_shards).total_s,
                           n_layers=m.n_layers)


def capacity_buffer_bytes(n_experts: int, capacity: int, d_model: int, dtype: str = "bf16") -> float:
    """E x kappa x D x bytes: what each of the two all-to-alls of an expert-parallel MoE layer moves per device when
    it sends a fixed-capacity dispatch buffer: kappa slots of D activations for every one of the E experts, filled or
    not (GShard, Lepikhin et al. 2021; Switch, Fedus et al. 2022: kappa = capacity factor x k T_dev / E). Tokens past
    an expert's kappa slots are dropped; kappa = T_dev, the tokens on the device, drops none.
    """
    E, kappa, D = (positive_int(name, value) for name, value in
                   (("n_experts", n_experts), ("capacity", capacity), ("d_model", d_model)))
    return E * kappa * D * bytes_per_element(dtype)


# TPU v5e slice sizes (Cloud TPU v5e documentation: topologies 1x1, 2x2, 2x4, 4x4, 4x8, 8x8, 8x16, 16x16).
V5E_SLICE_CHIPS = (1, 4, 8, 16, 32, 64, 128, 256)


def smallest_expert_sharded_slice(model, chip, slice_chips=V5E_SLICE_CHIPS, dtype: str = "bf16") -> int:
    """The fewest chips, among `slice_chips`, on which some expert sharding W_in[E_Z, D, F_Y] (Z dividing E, Z Y =
    chips) holds the weights (`expert_sharded_memory(...).fits`; the KV cache not counted). Scaling Book ch. 7,
    worked problem 6. ValueError when no listed slice holds them.

    Defined in the appendix *Worked problems*.
    """
    m, chip = get_model(model), get_chip(chip)
    bytes_per_element(dtype)
    if m.n_experts == 1:
        raise ValueError(f"{m.name} is dense (n_experts=1): it has no experts to shard; use moe.as_moe(model, E, k) "
                         "first")
    if isinstance(slice_chips, (str, bytes)) or not hasattr(slice_chips, "__iter__"):
        raise ValueError(f"slice_chips must be a list of chip counts, e.g. (8, 16, 32), got {slice_chips!r}")
    slice_chips = tuple(positive_int("slice_chips entry", n) for n in slice_chips)
    if not slice_chips:
        raise ValueError("slice_chips must list at least one slice size, got an empty list")
    for n in sorted(slice_chips):
        shared = math.gcd(n, m.n_experts)  # Z divides both the chips and the experts
        for z in (d for d in range(1, shared + 1) if shared % d == 0):
            if expert_sharded_memory(m, chip, z, n // z, dtype).fits:
                return n
    raise ValueError(f"no slice of {tuple(slice_chips)} chips holds {m.name}'s {dtype} weights; quantize them or "
                     "allow larger slices")
