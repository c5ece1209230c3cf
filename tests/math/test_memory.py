"""scaling_lib.memory: the KV cache per token and per batch, its copies when replicated, the footprint of a batch and
the largest batch that fits, worked by hand (the chapter 3 claims are in test_claims_memory.py; the capacity refusals
of the step bounds are in test_capacity.py)."""

import dataclasses
import re

import numpy as np
import pytest

from scaling_lib.hardware import get_chip
from scaling_lib.memory import (elementwise_bytes_per_token, kv_bytes_per_token, kv_cache_bytes, kv_replication,
                                 max_batch_size, memory_footprint, memory_footprint_kv_heads, moe_elementwise_elements,
                                 param_bytes, require_fit)
from scaling_lib.models import Transformer, from_hf_config, get_model, param_count

from tests import REPO, for_each

# 4 layers, 2 KV heads of 16: a token's K and V on one layer are 2 x 2 x 16 x 2 B = 128 B in bf16 (512 B on 4 layers).
FOUR = Transformer(n_layers=4, d_model=64, d_ff=128, n_heads=4, n_kv_heads=2, head_dim=16, vocab_size=256)
H100_HBM = 81559 * 2**20  # nvidia-smi's memory.total of an H100 80GB, bytes
# 32 x (4,096 x 4,096 x 2 + 4,096 x 1,024 x 2 + 3 x 4,096 x 14,336) + 2 x 128,256 x 4,096
LLAMA3_8B_PARAMS = 8_029_995_008
LLAMA3_8B_TOKEN = 2 * 32 * 8 * 128 * 2  # bytes of one token's bf16 cache: K and V, 32 layers, 8 heads of 128


# --- The activations between the matmuls ---------------------------------------------------------------------------
def _layer_kernels(m, t):
    """One layer's elementwise kernels on one of t chips, kernel by kernel: (name, elements read, elements written,
    split over the chips) per token."""
    d, routed = m.d_model, m.n_active_experts if m.n_experts > 1 else 0
    copies = routed + m.n_shared_experts if routed else 1  # the FFNs a token passes through
    up = (2 if m.gated_ffn else 1) * m.d_ff * copies  # what the up (and gate) projections wrote
    kernels = [("add and norm after attention", 2 * d, 2 * d, False), ("add and norm after the FFN", 2 * d, 2 * d, False),
               ("rotary on queries and keys", (m.n_heads + m.n_kv_heads) * m.head_dim,
                (m.n_heads + m.n_kv_heads) * m.head_dim, True),
               ("activation function", up, m.d_ff * copies, True)]
    if routed:
        kernels += [("copy to the k experts", d, routed * d, False), ("sum the k outputs", routed * d, d, False)]
    return [(name, read / (t if split else 1), written / (t if split else 1)) for name, read, written, split in kernels]


@for_each([("llama3-8b", 1), ("llama3-8b", 4), ("mixtral-8x7b", 1), ("mixtral-8x7b", 2), ("qwen3-30b-a3b", 1),
           ("pythia-1b", 1)], ids=str)
def test_the_activations_between_the_matmuls_are_the_kernels_counted_one_by_one(model, t):
    # every layer of these has attention and an FFN of one width; bf16: 2 bytes per element
    m = from_hf_config(REPO / "book/data/hf_configs" / f"{model}.json") if model in ("qwen3-30b-a3b", "pythia-1b") \
        else get_model(model)
    per_layer = sum(read + written for _, read, written in _layer_kernels(m, t))
    assert elementwise_bytes_per_token(m, t) == pytest.approx(2 * m.n_layers * per_layer, rel=1e-12)
    assert elementwise_bytes_per_token(m, t, "fp8") == pytest.approx(m.n_layers * per_layer, rel=1e-12)


def test_a_moe_layers_share_of_those_kernels_is_the_one_the_kernel_timings_are_cleared_of():
    # Qwen3-30B-A3B (no shared experts) on one chip: its k experts' activation function and the copies to them and
    # back, kernel by kernel (above), are memory.moe_elementwise_elements' m k F + 2 (k + 1) D, what
    # kernels.expert_matmul_fraction takes off a timed layer
    m = from_hf_config(REPO / "book/data/hf_configs/qwen3-30b-a3b.json")
    moe = sum(read + written for name, read, written in _layer_kernels(m, 1)
              if name in ("activation function", "copy to the k experts", "sum the k outputs"))
    assert moe_elementwise_elements(m.d_model, m.d_ff, m.n_active_experts, m.ffn_matrices) == moe == 55_296


# --- The KV cache: per token, per batch ---------------------------------------------------------------------------
def test_the_kv_cache_by_hand_one_sequence_in_bf16_by_default():
    # FOUR: 512 B a token in bf16 (4 layers x 128 B); 4 x 12,288 attention + 4 x 24,576 FFN + 2 x 256 x 64 embedding
    # parameters = 180,224.
    assert kv_bytes_per_token(FOUR) == 512
    assert kv_cache_bytes(FOUR, 10) == 10 * 512
    assert param_bytes(FOUR) == 2 * 180_224
    assert kv_cache_bytes(FOUR, 0, 3) == 0 and kv_cache_bytes(FOUR, 10, 0) == 0
    # DeepSeek-V3 caches one 512-value latent and one 64-value RoPE key per layer: 61 x 576 values.
    assert kv_bytes_per_token("deepseek-v3") == 61 * 576 * 2
    assert kv_bytes_per_token("deepseek-v3", "fp8") == 61 * 576
    # Linear in tokens and batch, half in a one-byte format, capped by a window.
    model = get_model("llama3-8b")
    assert kv_cache_bytes(model, 2000, batch=3) == pytest.approx(3 * 2000 * kv_bytes_per_token(model))
    assert kv_bytes_per_token(model, "int8") == kv_bytes_per_token(model, "bf16") / 2
    local = model.with_(sliding_window=1024)
    assert kv_cache_bytes(local, 8192) == kv_cache_bytes(model, 1024)
    assert kv_cache_bytes(local, 512) == kv_cache_bytes(model, 512)
    # NumPy numbers count the same as Python ones.
    assert kv_cache_bytes("llama3-8b", np.int64(100), batch=np.int32(3)) == kv_cache_bytes("llama3-8b", 100, 3)


def test_kv_cache_bytes_of_a_local_global_model_by_hand():
    gemma_like = FOUR.with_(sliding_window=100, global_every=2)  # layers 1 and 3 global
    assert kv_cache_bytes(gemma_like, 1000, batch=3) == 3 * (2 * 1000 + 2 * 100) * 128
    assert kv_cache_bytes(FOUR.with_(sliding_window=100), 1000, 3) == 3 * 4 * 100 * 128  # every layer local
    assert kv_cache_bytes(gemma_like, 50, 3, "fp8") == 3 * 4 * 50 * 64  # within the window: every token kept


@for_each([
    (FOUR, 1, 1.0), (FOUR, 2, 1.0), (FOUR, 3, 1.5), (FOUR, 4, 2.0),  # K = 2: 3 chips hold 3 x ceil(2 / 3) heads
    ("llama3-8b", 3, 1.125), ("llama3-8b", 16, 2.0),  # K = 8: 3 x 3 / 8; 16 chips, each a whole head
    ("deepseek-v3", 8, 8.0),  # MLA: one latent for every head, copied on every chip
], ids=str)
def test_replicated_kv_copies_by_hand(model, n_chips, copies):
    assert kv_replication(model, n_chips, "replicated") == copies
    assert kv_replication(model, n_chips) == 1.0  # batch-split, the default: no copies


# --- A batch's footprint, and the largest batch that fits -----------------------------------------------------
def test_memory_footprint_by_hand_with_both_dtypes_and_both_placements():
    # LLaMA-3-8B on 16 H100s, 10 sequences of 1,000 tokens: int8 weights (1 B each), an fp8 cache replicated twice.
    fp = memory_footprint("llama3-8b", "h100", 16, 10, 1000, "int8", "fp8", "replicated")
    assert fp.weight_bytes == LLAMA3_8B_PARAMS
    assert fp.kv_bytes == 2 * 10 * 1000 * LLAMA3_8B_TOKEN / 2
    assert fp.capacity_bytes == 16 * H100_HBM
    assert memory_footprint("llama3-8b", "h100", 16, 10, 1000).kv_bytes == 10 * 1000 * LLAMA3_8B_TOKEN
    assert memory_footprint("llama3-8b", "h100", 1, 0, 0).kv_bytes == 0


def test_memory_footprint_kv_heads_keeps_the_weights_and_rebuilds_the_cache_by_hand():
    # LLaMA-2-13B with K = 8: a token's fp8 cache 2 x 40 layers x 8 x 128 x 1 B = 81,920 B; int8 weights.
    fp = memory_footprint_kv_heads("llama2-13b", 8, "h100", 2, 3, 1000, "int8", "fp8")
    assert fp.weight_bytes == param_count("llama2-13b")
    assert fp.kv_bytes == 3 * 1000 * 81920
    assert fp.capacity_bytes == 2 * H100_HBM
    assert memory_footprint_kv_heads("llama2-13b", 8, "tpu-v5e", 8, 16, 0).kv_bytes == 0.0  # no context, no cache


def test_max_batch_size_by_hand():
    # LLaMA-3-8B on one H100: 85.52 GB - 16.06 GB of bf16 weights = 69.46 GB, over 8,192 x 131,072 B = 1.07 GB a
    # sequence: 64.69, so 64.
    assert max_batch_size("llama3-8b", "h100", 1, 8192) == 64
    # 16 chips: 1,352.3 GB free, 1,259.4 caches; replicated twice (K = 8 on 16 chips) 629.7; an int8 cache 1,259.4.
    assert max_batch_size("llama3-8b", "h100", 16, 8192) == 1259
    assert max_batch_size("llama3-8b", "h100", 16, 8192, kv_placement="replicated") == 629
    assert max_batch_size("llama3-8b", "h100", 16, 8192, kv_dtype="int8", kv_placement="replicated") == 1259
    # int8 weights free 8.03 GB more: (85.52 - 8.03) / 1.07 = 72.2
    assert max_batch_size("llama3-8b", "h100", 1, 8192, weight_dtype="int8") == 72
    assert max_batch_size("llama3-70b", "h100", 1, 8192) == 0  # 141 GB of weights on 85.5 GB
    assert max_batch_size("llama3-70b", "tpu-v5e", 1, 4096) == 0
    assert max_batch_size("llama3-70b", "tpu-v5e", 1, 4096, weight_dtype="int4") == 0
    assert max_batch_size("llama3-70b", "tpu-v5e", 16, 4096) > 0


@for_each([
    ("llama2-13b", "tpu-v5e", 8, 8192), ("llama3-70b", "tpu-7x", 8, 32768), ("llama3-8b", "h100", 1, 4096)], ids=str)
def test_max_batch_size_is_the_last_batch_that_fits(model, chip, n_chips, context):
    batch = max_batch_size(model, chip, n_chips, context)
    assert batch >= 1
    assert memory_footprint(model, chip, n_chips, batch, context).fits
    assert not memory_footprint(model, chip, n_chips, batch + 1, context).fits


def test_one_byte_left_after_the_weights_holds_one_one_byte_cache():
    # The smallest model: every width 1, one layer, a one-token vocabulary: 4 attention + 3 FFN + 2 embedding weights,
    # 18 B in bf16. A one-token int4 cache is 1 layer x 1 head x (1 + 1) values x 0.5 B = 1 B. On a chip of 19 B of HBM
    # exactly one such sequence fits; on one of 18 B none does.
    unit = Transformer(n_layers=1, d_model=1, d_ff=1, n_heads=1, n_kv_heads=1, head_dim=1, vocab_size=1)
    assert param_count(unit) == 9 and kv_cache_bytes(unit, 1, 1, "int4") == 1
    for capacity, fits in ((19.0, 1), (18.0, 0), (20.0, 2)):
        chip = dataclasses.replace(get_chip("h100"), hbm_capacity=capacity)
        assert max_batch_size(unit, chip, 1, 1, kv_dtype="int4") == fits


# --- require_fit: what a configuration needs, what there is, and the batch that fits ------------------------------
def test_require_fit_states_the_weights_and_the_cache_it_needs_in_gb():
    # LLaMA-3-70B in bf16, by hand: 80 layers x (2 x 8,192 x 64 x 128 + 8,192 x 8 x 256 attention + 3 x 8,192 x 28,672
    # FFN) + 2 x 128,256 x 8,192 embeddings = 70,552,387,584 parameters x 2 B = 141.1 GB; 800 sequences x 8,192 tokens
    # x 327,680 B (2 x 80 layers x 8 KV heads x 128 x 2 B) = 2,147.5 GB of cache; 2,288.6 GB in all, on 16 x 16 GB.
    with pytest.raises(ValueError) as err:
        require_fit("llama3-70b", "tpu-v5e", 16, 800, 8192)
    message = str(err.value)
    assert re.match(r"llama3-70b at batch 800 with 8,192 tokens of context each on 16 x tpu-v5e does not fit\b",
                    message), message  # without `what`, the configuration is described
    assert re.search(r"\bneeds 2,288\.6 GB\b", message), message
    assert re.search(r"\b141\.1 GB of weights\b", message), message
    assert re.search(r"\b2,147\.5 GB of KV cache\b", message), message
    assert re.search(r"\bhave 256\.0 GB\b", message), message
    # What is left after the weights, 114.9 GB, holds 42 caches of 8,192 x 327,680 B = 2.68 GB each.
    assert re.search(r"\blargest batch that fits is 42\b", message), message
    # One layer, D = 1,000, one 1,000-wide head (4e6 attention weights), F = 2e6 (6e9), V = 998,000 untied (1.996e9):
    # 8e9 parameters, 16 GB in bf16, exactly one v5e's HBM: weights that exactly fill the chips leave no room rather
    # than exceeding them.
    exact = Transformer(n_layers=1, d_model=1000, d_ff=2_000_000, n_heads=1, n_kv_heads=1, head_dim=1000,
                        vocab_size=998_000)
    assert param_count(exact) == 8_000_000_000
    with pytest.raises(ValueError, match=r"\bthe largest batch that fits is 0\b"):
        require_fit(exact, "tpu-v5e", 1, 1, 1)


def test_require_fit_with_other_kv_heads_keeps_the_weight_dtype_and_prices_the_cache_in_the_kv_dtype():
    # LLaMA-2-13B's int8 weights (1 B per parameter) beside a K = 8 bf16 cache: 16 x 8,192 tokens x 2 x 40 layers x
    # 8 heads x 128 x 2 B = 26.8 GB.
    footprint = require_fit("llama2-13b", "tpu-v5e", 8, 16, 8192, weight_dtype="int8", n_kv_heads=8)
    assert footprint.weight_bytes == param_count("llama2-13b")
    assert footprint.kv_bytes == 16 * 8192 * 2 * 40 * 8 * 128 * 2
    # An int8 cache is half a bf16 one: 4 KV heads of 128 dims, K and V, 32 layers, 1 byte, 8 x 4,096 tokens.
    bf16 = require_fit("llama3-8b", "h100", 1, 8, 4096, kv_dtype="bf16", n_kv_heads=4)
    int8 = require_fit("llama3-8b", "h100", 1, 8, 4096, kv_dtype="int8", n_kv_heads=4)
    assert int8.kv_bytes == pytest.approx(bf16.kv_bytes / 2, rel=1e-12)
    assert int8.kv_bytes == pytest.approx(4 * 128 * 2 * 32 * 8 * 4096, rel=1e-12)


# --- Bad input: a ValueError naming the argument and the fix ---------------------------------------------------------
def _footprint(**kwargs):
    return memory_footprint(**dict(model="llama3-8b", chip="h100", n_chips=1, batch=1, context_len=10) | kwargs)


def _footprint_kv_heads(**kwargs):
    return memory_footprint_kv_heads(**dict(model="llama2-13b", n_kv_heads=8, chip="h100", n_chips=1, batch=1,
                                            context_len=10) | kwargs)


@for_each([
    (lambda: kv_cache_bytes(FOUR, -1), r"\btokens must be non-negative\b"),
    (lambda: kv_cache_bytes(FOUR, 10, batch=-1), r"\bbatch must be a non-negative integer\b"),
    (lambda: kv_cache_bytes(FOUR, 10, batch=1.5), r"\bbatch must be a non-negative integer\b"),
    (lambda: kv_replication(FOUR, 0), r"\bn_chips must be a positive integer\b"),
    (lambda: kv_replication(FOUR, 2, "copied"),
     r"\bunknown kv_placement 'copied'; use one of batch-split, replicated\b"),
    (lambda: _footprint(n_chips=0), r"\bn_chips must be a positive integer\b"),
    (lambda: _footprint(batch=-1), r"\bbatch must be a non-negative integer\b"),
    (lambda: _footprint(context_len=-1), r"\bcontext_len must be non-negative\b"),
    (lambda: _footprint(kv_placement="x"), r"\bunknown kv_placement 'x'"),
    (lambda: _footprint_kv_heads(n_chips=0), r"\bn_chips must be a positive integer\b"),
    (lambda: _footprint_kv_heads(n_kv_heads=0), r"\bn_kv_heads must be a positive integer\b"),
    (lambda: _footprint_kv_heads(batch=-1), r"\bbatch must be a non-negative integer\b"),
    (lambda: _footprint_kv_heads(context_len=-1), r"\bcontext_len must be non-negative\b"),
    (lambda: max_batch_size("llama3-8b", "h100", 1, 0), r"\bcontext_len must be positive\b"),
    (lambda: max_batch_size("llama3-8b", "h100", 1, 10, kv_placement="x"), r"\bunknown kv_placement 'x'"),
    (lambda: max_batch_size("llama3-8b", "h100", n_chips=0.5, context_len=4096),
     "n_chips must be a positive integer, got 0.5"),
    (lambda: require_fit("llama3-8b", "h100", 1, 1, 1000, kv_placement="bogus"),
     "unknown kv_placement 'bogus'; use one of batch-split, replicated"),
    (lambda: require_fit("llama2-13b", "tpu-v5e", 8, 16, 8192, kv_placement="bogus", n_kv_heads=8),
     r"\bunknown kv_placement 'bogus'"),
], ids=str)
def test_bad_input_gets_a_value_error_naming_the_argument_and_the_fix(call, words):
    with pytest.raises(ValueError, match=words):
        call()
