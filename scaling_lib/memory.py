"""Memory: weights and the KV cache, and how many sequences fit in HBM.

Every attention layer stores one key and one value vector per KV head for every token it has seen:
    KV bytes per token = 2 x L x K x H x bytes_per_element    (Scaling Book ch. 7)

Split over n chips, the cache is divided by KV heads up to K ways. Beyond K, where each chip's query heads share
fewer than one KV head, it is either split by batch ("batch-split", the Scaling Book's rule, at two all-to-alls per
attention layer: chapter 7) or each chip keeps a whole copy of its group's KV head ("replicated", what GPU
tensor-parallel engines do): `kv_replication` says how many copies that makes. Every capacity function here takes
the placement as `kv_placement` (default "batch-split", the sources' convention) rather than assuming it.
"""

import math
from dataclasses import dataclass

from ._validate import choice, non_negative_int, positive, positive_int
from .dtypes import MixedWeights, bytes_per_element
from .hardware import get_chip
from .models import get_model, param_breakdown, param_count


def kv_bytes_per_token(model, dtype: str = "bf16") -> float:
    """2 L K H x bytes: keys and values, every attention layer, every KV head, for one token of one sequence.

    With a value width H_v != H it is L K (H + H_v) x bytes. Multi-head latent attention (MLA, DeepSeek-V2/V3)
    caches one latent of r_kv values and one shared RoPE key of H_rope values per layer instead:
    L (r_kv + H_rope) x bytes (DeepSeek-V3 in bf16: 61 x 576 x 2 B = 70.3 kB); DeepSeek-V3.2's indexer adds its fp8
    key per layer (`mixers.SparseIndexer.key_bytes`, whatever `dtype`). L counts the attention layers only: a
    hybrid's state layers keep a fixed-size state instead (`state_bytes_per_sequence`), and layers without a token
    mixer keep nothing.

    Defined in chapter 2, *Sampling and the KV cache*.
    """
    m = get_model(model)
    if m.is_mla:
        per_layer = (m.kv_lora_rank + m.rope_head_dim) * bytes_per_element(dtype)
        return m.attention_layers * (per_layer + (m.indexer.key_bytes if m.indexer is not None else 0))
    return m.attention_layers * m.n_kv_heads * (m.head_dim + m.value_head_dim) * bytes_per_element(dtype)


def moe_elementwise_elements(d_model: int, d_expert: int, k: int, matrices: int = 3) -> float:
    """Activation elements one token moves through HBM in one mixture-of-experts layer's kernels between its matmuls
    (the MoE terms of `elementwise_bytes_per_token` on one chip, routed experts only; `kernels.expert_matmul_fraction`
    takes them off a timed layer): the activation function of each of its k experts, `matrices` x F (3 F gated), and
    the copies to the experts and back, 2 (k + 1) D:

        m k F + 2 (k + 1) D"""
    for name, value in (("d_model", d_model), ("d_expert", d_expert), ("k", k), ("matrices", matrices)):
        positive_int(name, value)
    return matrices * k * d_expert + 2 * (k + 1) * d_model


def elementwise_bytes_per_token(model, tensor_parallel: int = 1, activation_dtype: str = "bf16") -> float:
    """Bytes one token's activations move through HBM on one chip in a step, in the kernels between the matmuls:

        A = b_act [4 D (L_mix + L_ffn) + 2 (N + K) H L_attn / t + m F_sum / t + L_moe 2 (k + 1) D]

    - each token-mixer and each FFN sub-layer ends in a fused residual add and norm that reads the residual and the
      sub-layer's output and writes both back: 4 D (L_mix = attention and state layers, L_ffn = FFN layers);
    - rotary embedding rewrites the queries and keys of each attention layer: 2 (N + K) H (MLA: its RoPE parts,
      2 (N + 1) H_rope);
    - the activation function reads what the up-projection wrote and writes its input to the down-projection:
      3 F gated (gate and up read, product written), 2 F otherwise (`Transformer.ffn_matrices`): m F_sum, summed
      over every FFN's width, a mixture of experts counting the k routed and the shared experts of each token;
    - a mixture-of-experts layer copies each token to its k experts (D read, k D written) and sums them back (k D
      read, D written): 2 (k + 1) D.

    The head- and FFN-wide parts split over the `tensor_parallel` chips; the D-wide residual stream, the dispatch and
    the combine do not. b_act: bytes per activation (bf16, 2). An engine that fuses more moves less (the bound never
    charges it), and a TPU step moves none apart from the matmuls (XLA fuses elementwise work into them); a GPU
    step of many tokens cannot keep them on chip (2,048 tokens of a D = 8,192 model are 32 MiB per D-wide tensor,
    against an H100's 50 MB of L2). The estimate streams them at the weight-streaming rate (`Efficiency.hbm`).

    Defined in chapter 11, *How close do real systems come?*.
    """
    m = get_model(model)
    t = positive_int("tensor_parallel", tensor_parallel)
    d, k = m.d_model, m.n_active_experts
    rotary = 2 * ((m.n_heads + 1) * m.rope_head_dim if m.is_mla else (m.n_heads + m.n_kv_heads) * m.head_dim)
    if m.ffn_widths is not None:
        widths = sum(m.ffn_widths)
    else:
        moe_layers = m.n_moe_layers
        widths = (m.ffn_layers - moe_layers) * (m.d_ff_dense if moe_layers and m.d_ff_dense else m.d_ff)
        widths += moe_layers * (k + m.n_shared_experts) * m.d_ff
    elements = (4 * d * (m.attention_layers + m.n_state_layers + m.ffn_layers) + rotary * m.attention_layers / t
                + m.ffn_matrices * widths / t + m.n_moe_layers * 2 * (k + 1) * d)
    return elements * bytes_per_element(activation_dtype)


def local_tokens_kept(model, tokens: float) -> float:
    """Tokens a local layer keeps of a `tokens`-token sequence: min(S, w) under a sliding window w; under chunked
    attention (Llama 4) the tokens of the current chunk, S - c floor((S - 1) / c) for S >= 1 (c = the chunk);
    S on a layer without a window."""
    m = get_model(model)
    positive("tokens", tokens, allow_zero=True)
    w = m.sliding_window
    if w is None:
        return tokens
    if m.chunked_attention:
        return tokens - w * math.floor((tokens - 1) / w) if tokens >= 1 else tokens
    return min(tokens, w)


def kv_cache_bytes(model, tokens: int, batch: int = 1, dtype: str = "bf16") -> float:
    """KV cache of `batch` sequences of `tokens` tokens: B x S x 2 L K H x bytes.

    With a sliding window w, each sequence keeps at most w tokens on every local layer (all attention layers, or
    all but the global ones when the model mixes local and global layers); chunked attention keeps the current
    chunk (`local_tokens_kept`). Only attention layers cache keys and values: a hybrid's fixed-size state is
    `state_bytes_per_sequence`, apart.

    Defined in chapter 2, *Sampling and the KV cache*.
    """
    m = get_model(model)
    positive("tokens", tokens, allow_zero=True)
    non_negative_int("batch", batch)
    n_global, n_attention = m.n_global_layers, m.attention_layers
    if n_attention == 0:
        return 0.0
    kept = (n_global * tokens + (n_attention - n_global) * local_tokens_kept(m, tokens)) / n_attention
    return batch * kept * kv_bytes_per_token(m, dtype)


# The format a hybrid's recurrent state is kept in: the engines' default, the model's own bf16 (vLLM's
# mamba_ssm_cache_dtype "auto"), whatever format the KV cache uses.
STATE_DTYPE = "bf16"


def state_bytes_per_sequence(model, dtype: str = STATE_DTYPE) -> float:
    """Bytes of the fixed-size state one sequence keeps in a hybrid's state layers (linear attention, DeltaNet,
    Mamba): n_state_layers x `mixers.StateMixer.state_elements` x bytes; 0 for a model without state layers. It does
    not grow with the context: the lever that removes the cache's growth."""
    m = get_model(model)
    if m.state is None:
        bytes_per_element(dtype)
        return 0.0
    return m.n_state_layers * m.state.state_elements * bytes_per_element(dtype)


def kv_read_bytes(model, tokens: float, batch: int = 1, dtype: str = "bf16") -> float:
    """KV bytes one decode step reads for `batch` sequences at `tokens` of context: the cache it holds
    (`kv_cache_bytes`), except under DeepSeek's sparse attention, which reads every token's indexer key but only the
    top-k tokens' latents: B L (S x key_bytes + min(S, k) x latent bytes)."""
    m = get_model(model)
    held = kv_cache_bytes(m, tokens, batch, dtype)
    if m.indexer is None:
        return held
    latent = (m.kv_lora_rank + m.rope_head_dim) * bytes_per_element(dtype)
    return batch * m.attention_layers * (tokens * m.indexer.key_bytes + min(tokens, m.indexer.topk) * latent)


def sequence_cache_bytes(model, tokens: float, batch: int = 1, kv_dtype: str = "bf16") -> float:
    """What `batch` sequences of `tokens` tokens hold besides the weights: their KV caches (`kv_cache_bytes`) and,
    for a hybrid, their fixed-size states (`state_bytes_per_sequence`, in the engines' bf16)."""
    return kv_cache_bytes(model, tokens, batch, kv_dtype) + batch * state_bytes_per_sequence(model)


def _group_bytes(dtype, group: str) -> float:
    """Bytes per weight of `group` under `dtype`: a plain dtype stores every group alike; a `MixedWeights` says."""
    return dtype.group_bytes(group) if isinstance(dtype, MixedWeights) else bytes_per_element(dtype)


def weight_groups(model) -> dict:
    """Parameters by the groups a checkpoint's formats name (`dtypes.WEIGHT_GROUPS`): attention (MLA and the
    indexer included), state (a hybrid's recurrent mixers), experts (the routed experts), feed_forward (dense FFNs
    and shared experts), router, embeddings (the input table) and head (the output projection; 0 when tied, the
    table serving both). They add up to `param_count`."""
    m = get_model(model)
    blocks = param_breakdown(m)
    experts = m.n_moe_layers * m.ffn_matrices * m.d_model * m.d_ff * m.n_experts
    table = m.vocab_size * m.d_model
    return {"attention": blocks.attention, "state": blocks.state, "experts": experts,
            "feed_forward": blocks.feed_forward - experts, "router": blocks.router, "embeddings": table,
            "head": blocks.embeddings - table}


def weight_bytes_by_group(model, dtype: str = "bf16") -> dict:
    """Bytes of each weight group (`weight_groups`) in `dtype`: one format for all, or a `dtypes.MixedWeights`
    checkpoint's format per group (gpt-oss: experts in MXFP4, the rest in bf16)."""
    return {group: count * _group_bytes(dtype, group) for group, count in weight_groups(model).items()}


def param_bytes(model, dtype: str = "bf16") -> float:
    """Bytes of all weights: param_count x bytes_per_element, or for a mixed-precision checkpoint
    (`dtypes.MixedWeights`) the sum over its groups (`weight_bytes_by_group`)."""
    if isinstance(dtype, MixedWeights):
        return sum(weight_bytes_by_group(model, dtype).values())
    return param_count(get_model(model)) * bytes_per_element(dtype)


def weights_read_bytes(model, dtype: str = "bf16", experts_per_layer: float | None = None) -> float:
    """Bytes of the weights a step multiplies by: every group but the input embedding table (a lookup; when
    embeddings are tied the table is read as the output projection), with `experts_per_layer` routed experts on
    each MoE layer (default k, one token's) instead of all E. Each group at its own format (`weight_bytes_by_group`)."""
    m = get_model(model)
    groups = weight_groups(m)
    experts = m.n_active_experts if experts_per_layer is None else positive("experts_per_layer", experts_per_layer)
    read = dict(groups, experts=groups["experts"] / m.n_experts * experts if m.n_experts > 1 else 0,
                embeddings=0, head=groups["head"] or groups["embeddings"])
    return sum(count * _group_bytes(dtype, group) for group, count in read.items())


KV_PLACEMENTS = ("batch-split", "replicated")


def kv_head_groups(model) -> int:
    """How many ways the cache of one token splits by head: K, or 1 for multi-head latent attention, whose one
    latent per token and layer serves every head."""
    m = get_model(model)
    return 1 if m.is_mla else m.n_kv_heads


def kv_replication(model, n_chips: int, kv_placement: str = "batch-split") -> float:
    """Copies of the KV cache that n chips hold in total (1.0 means no duplication).

    "batch-split": 1 (heads split up to K ways, then the batch). "replicated": n x ceil(K / n) / K, i.e. n / K once
    n exceeds K (every chip holds one whole KV head, shared by its n / K peers), and 1 when n divides K. K is
    `kv_head_groups` (1 for MLA).
    """
    groups = kv_head_groups(model)
    positive_int("n_chips", n_chips)
    choice("kv_placement", kv_placement, KV_PLACEMENTS)
    if kv_placement == "batch-split":
        return 1.0
    return n_chips * math.ceil(groups / n_chips) / groups


@dataclass(frozen=True)
class MemoryFootprint:
    """HBM needed to serve `batch` sequences of `context_len` tokens (weights + KV cache), bytes."""

    weight_bytes: float
    kv_bytes: float
    capacity_bytes: float

    @property
    def total_bytes(self) -> float:
        return self.weight_bytes + self.kv_bytes

    @property
    def fits(self) -> bool:
        return self.total_bytes <= self.capacity_bytes


def memory_footprint(model, chip, n_chips: int, batch: int, context_len: int, weight_dtype: str = "bf16",
                     kv_dtype: str = "bf16", kv_placement: str = "batch-split") -> MemoryFootprint:
    """Weights + B sequences' KV caches (times `kv_replication`) and hybrid states, against n_chips x HBM capacity
    (activations ignored).

    Defined in chapter 4, *The KV cache dominates memory*.
    """
    chip = get_chip(chip)
    positive_int("n_chips", n_chips)
    non_negative_int("batch", batch)
    positive("context_len", context_len, allow_zero=True)
    copies = kv_replication(model, n_chips, kv_placement)
    return MemoryFootprint(weight_bytes=param_bytes(model, weight_dtype),
                           kv_bytes=copies * kv_cache_bytes(model, context_len, batch, kv_dtype)
                           + batch * state_bytes_per_sequence(model),
                           capacity_bytes=n_chips * chip.hbm_capacity)


def require_fit(model, chip, n_chips: int, batch: int, context_len: float, weight_dtype: str = "bf16",
                kv_dtype: str = "bf16", kv_placement: str = "batch-split", *, n_kv_heads: int | None = None,
                what: str = "") -> MemoryFootprint:
    """`memory_footprint`, or a ValueError when the weights and the B caches do not fit in n_chips x HBM.

    The closed-form step bounds (`inference.decode_step_time`, `speculative.roofline_step`, ...) call it so that a
    batch that cannot be held is refused rather than priced; the message gives what is needed, what there is and the
    fix, in the words of `estimate`'s capacity check. `what` names the configuration in the message; `n_kv_heads`
    rebuilds the cache with that many KV heads and keeps the weights (`memory_footprint_kv_heads`).
    """
    chip = get_chip(chip)
    if not isinstance(what, str):
        raise ValueError(f"what must be a string naming the configuration, got {what!r}")
    if n_kv_heads is None:
        footprint = memory_footprint(model, chip, n_chips, batch, context_len, weight_dtype, kv_dtype, kv_placement)
    else:
        choice("kv_placement", kv_placement, KV_PLACEMENTS)
        footprint = memory_footprint_kv_heads(model, n_kv_heads, chip, n_chips, batch, context_len, weight_dtype,
                                              kv_dtype)
    if footprint.fits:
        return footprint
    m = get_model(model)
    what = what or f"{m.name} at batch {batch} with {context_len:,} tokens of context each on {n_chips} x {chip.name}"
    gb = 1e9
    if footprint.weight_bytes > footprint.capacity_bytes:
        fix = (f"the weights alone ({footprint.weight_bytes / gb:,.1f} GB) exceed it: quantize them "
               "(a smaller weight_dtype) or add chips")
    else:
        largest = math.floor((footprint.capacity_bytes - footprint.weight_bytes) / (footprint.kv_bytes / batch))
        fix = (f"the largest batch that fits is {largest:,}; use fewer sequences (batch), a shorter context_len, a "
               "smaller kv_dtype (e.g. 'int8') or more chips (n_chips)")
    raise ValueError(f"{what} does not fit: it needs {footprint.total_bytes / gb:,.1f} GB "
                     f"({footprint.weight_bytes / gb:,.1f} GB of weights + {footprint.kv_bytes / gb:,.1f} GB of KV "
                     f"cache) but {n_chips} x {chip.name} {'has' if n_chips == 1 else 'have'} {footprint.capacity_bytes / gb:,.1f} GB; {fix}; or "
                     "pass check_capacity=False to price the step as if it fitted (to show what would not fit)")


def memory_footprint_kv_heads(model, n_kv_heads: int, chip, n_chips: int, batch: int, context_len: int,
                              weight_dtype: str = "bf16", kv_dtype: str = "bf16") -> MemoryFootprint:
    """`memory_footprint` with the KV cache of `model` rebuilt with `n_kv_heads` KV heads but its weights unchanged.

    The memory half of the Scaling Book's ch. 7 GQA 1:5 table (LLaMA-2-13B with K = 8 instead of 40, multi-head
    weights kept); `inference.decode_step_time_kv_heads` is its step time. Claim M5.

    Defined in chapter 4, *The KV cache dominates memory*.
    """
    m = get_model(model)
    chip = get_chip(chip)
    positive_int("n_chips", n_chips)
    n_kv_heads = positive_int("n_kv_heads", n_kv_heads)
    non_negative_int("batch", batch)
    positive("context_len", context_len, allow_zero=True)
    return MemoryFootprint(weight_bytes=param_bytes(m, weight_dtype),
                           kv_bytes=kv_cache_bytes(m.with_(n_kv_heads=n_kv_heads), context_len, batch, kv_dtype),
                           capacity_bytes=n_chips * chip.hbm_capacity)


def max_batch_size(model, chip, n_chips: int, context_len: int, weight_dtype: str = "bf16",
                   kv_dtype: str = "bf16", kv_placement: str = "batch-split") -> int:
    """floor((n_chips x HBM - weight bytes) / (KV bytes per sequence x copies)); 0 when the weights alone do not fit.

    `kv_placement` says how the cache is laid out once n_chips exceeds the K KV heads: "batch-split" (the default,
    the Scaling Book's rule: no copies) or "replicated" (n / K copies; see `kv_replication`).

    Defined in chapter 4, *The KV cache dominates memory*.
    """
    chip = get_chip(chip)
    positive_int("n_chips", n_chips)
    positive("context_len", context_len)
    free = n_chips * chip.hbm_capacity - param_bytes(model, weight_dtype)
    if free <= 0:
        return 0
    per_sequence = (kv_cache_bytes(model, context_len, 1, kv_dtype) * kv_replication(model, n_chips, kv_placement)
                    + state_bytes_per_sequence(model))
    return int(math.floor(free / per_sequence))
