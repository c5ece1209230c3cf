"""scaling_lib.flops: the FLOPs of a forward pass, a decode step, and naive vs cached generation (pure Python).

Expected values are the parameter count (two FLOPs per parameter a token passes through), hand counts of attention
pairs, and the scaling laws of the Scaling Book's chapter 7 (naive sampling's matmuls grow as n^2 and its attention as
n^3; a KV cache makes them n and n^2)."""

import pytest

from scaling_lib.flops import (FlopCount, attention_pairs, cached_generation_flops, decode_step_flops, forward_flops,
                               generation_flops_curve, matmul_params, naive_generation_flops)
from scaling_lib.models import get_model, param_count

from tests import for_each

LLAMA = get_model("llama3-8b")


# --- A forward pass and a decode step ---------------------------------------------------------------------------------
def test_matmul_flops_are_two_per_parameter_per_token_minus_the_input_embedding_lookup():
    # untied: every parameter but the input table multiplies each token once; tied (PaLM): the one table does
    m = LLAMA
    assert forward_flops(m, 100).matmul == pytest.approx(2 * 100 * (param_count(m) - m.vocab_size * m.d_model))
    palm = get_model("palm-8b")
    assert forward_flops(palm, 7, batch=3).matmul == pytest.approx(2 * 21 * param_count(palm))
    # a decode step's matmuls are one token of a forward pass
    assert decode_step_flops(LLAMA, 4096, batch=8).matmul == pytest.approx(forward_flops(LLAMA, 1, 8).matmul)
    # an MoE's token passes its active experts and the router
    moe = LLAMA.with_(n_experts=8, n_active_experts=2)
    extra = LLAMA.n_layers * (3 * LLAMA.d_model * LLAMA.d_ff + LLAMA.d_model * 8)
    assert matmul_params(moe) == matmul_params(LLAMA) + extra
    total = FlopCount(1.0, 2.0) + FlopCount(3.0, 4.0)
    assert (total.matmul, total.attention, total.total) == (4.0, 6.0, 10.0)


def test_attention_flops_scale_with_layers_context_and_batch_and_skip_masked_pairs_only_when_told():
    one_layer = LLAMA.with_(n_layers=1)
    per_layer = forward_flops(one_layer, 512).attention
    assert forward_flops(LLAMA, 512).attention == pytest.approx(LLAMA.n_layers * per_layer)
    # doubling the context doubles a decode step's attention and leaves its matmuls alone
    a, b = decode_step_flops(LLAMA, 1000), decode_step_flops(LLAMA, 2000)
    assert b.attention == pytest.approx(2 * a.attention) and b.matmul == a.matmul
    assert decode_step_flops("llama3-8b", 4096, batch=8).attention == 8 * decode_step_flops("llama3-8b", 4096).attention
    # skipping masked pairs about halves prefill attention: (T + 1) / 2T of the pairs
    dense, causal = forward_flops(LLAMA, 4096), forward_flops(LLAMA, 4096, skip_masked=True)
    assert causal.attention / dense.attention == pytest.approx(4097 / (2 * 4096), rel=1e-9)
    assert causal.matmul == dense.matmul
    # a sliding window caps decode attention only when masked pairs are skipped
    windowed = LLAMA.with_(sliding_window=1024)
    assert decode_step_flops(windowed, 8192, skip_masked=True).attention == pytest.approx(
        decode_step_flops(LLAMA, 1024).attention)
    assert decode_step_flops(windowed, 8192).attention == decode_step_flops(LLAMA, 8192).attention
    # DeepSeek-V3 (61 layers, 128 heads, H = 192 with RoPE, H_v = 128): a forward pass over 16 tokens scores 16 x 16
    # pairs per layer at 2 N (H + H_v) = 2 x 128 x 320 FLOPs each.
    assert forward_flops("deepseek-v3", 16).attention == pytest.approx(61 * 16 * 16 * 2 * 128 * 320, rel=1e-12)


def test_attention_pairs_count_causal_and_windowed_visibility_exactly():
    assert attention_pairs(4, 4, skip_masked=True) == 1 + 2 + 3 + 4
    assert attention_pairs(2, 5, skip_masked=True) == 4 + 5  # the last two of five positions
    assert attention_pairs(5, 5, window=2, skip_masked=True) == 1 + 2 + 2 + 2 + 2
    assert attention_pairs(5, 5, window=2) == 25  # a masked implementation computes them all
    # 10**9 queries over 10**9 keys: T (T + 1) / 2 = 500,000,000,500,000,000 pairs, past 2**53, where a float
    # division would round; a 4,096-key window keeps 4,096 x 4,097 / 2 on the ramp plus 4,096 per later query.
    t, w = 10**9, 4096
    assert attention_pairs(t, t, None, True) == 500_000_000_500_000_000
    windowed = attention_pairs(t, t, w, True)
    assert isinstance(windowed, int) and windowed == w * (w + 1) // 2 + (t - w) * w


# --- Generation: naive (recompute everything) against cached ----------------------------------------------------------
def test_sb7_naive_sampling_is_quadratic_in_matmuls_and_cubic_in_attention_and_a_kv_cache_one_power_less():
    # prompt of 1 token, n >> 1: doubling n multiplies naive matmul FLOPs by ~4 and attention by ~8 (rel 2%)
    small, big = naive_generation_flops(LLAMA, 1, 2000), naive_generation_flops(LLAMA, 1, 4000)
    assert big.matmul / small.matmul == pytest.approx(4, rel=0.02)
    assert big.attention / small.attention == pytest.approx(8, rel=0.02)
    small, big = cached_generation_flops(LLAMA, 1, 2000), cached_generation_flops(LLAMA, 1, 4000)
    assert big.matmul / small.matmul == pytest.approx(2, rel=0.02)
    assert big.attention / small.attention == pytest.approx(4, rel=0.02)


def test_the_cache_saves_nothing_for_one_token_and_matmuls_for_more():
    one_naive, one_cached = naive_generation_flops(LLAMA, 64, 1), cached_generation_flops(LLAMA, 64, 1)
    assert one_naive == one_cached == forward_flops(LLAMA, 64)
    naive, cached = naive_generation_flops(LLAMA, 64, 65), cached_generation_flops(LLAMA, 64, 65)
    assert cached.total < naive.total
    # tokens pushed through the weights: 65 passes of mean length 96, against a 64-token prefill plus 64 steps
    assert naive.matmul / cached.matmul == pytest.approx((64 + 128) / 2 * 65 / (64 + 64), rel=1e-9)


def test_a_fixed_size_cache_reads_every_slot_at_every_step():
    fixed = cached_generation_flops(LLAMA, 16, 10, cache_len=64)
    assert fixed.attention == pytest.approx(forward_flops(LLAMA, 16).attention
                                            + 9 * decode_step_flops(LLAMA, 64).attention)
    assert fixed.attention > cached_generation_flops(LLAMA, 16, 10).attention
    # 16 prompt tokens and 10 generated: the last decode step attends over 16 + 9 = 25 keys, the shortest cache taken
    curve = generation_flops_curve(LLAMA, 16, 10, cache_len=25)
    assert curve[-1].attention == pytest.approx(forward_flops(LLAMA, 16).attention
                                                + 9 * decode_step_flops(LLAMA, 25).attention)


def test_a_generation_curve_starts_at_the_prefill_ends_at_the_totals_and_grows_every_step():
    naive = generation_flops_curve(LLAMA, 32, 50, cached=False)
    cached = generation_flops_curve(LLAMA, 32, 50)
    assert naive[-1] == naive_generation_flops(LLAMA, 32, 50) and cached[-1] == cached_generation_flops(LLAMA, 32, 50)
    assert all(b.total > a.total for a, b in zip(cached, cached[1:]))
    assert naive[0] == cached[0]  # the first token costs one pass over the prompt either way
    curve = generation_flops_curve(LLAMA, 64, 3, skip_masked=True)
    assert curve[0] == forward_flops(LLAMA, 64, skip_masked=True)
    assert curve[0].attention < forward_flops(LLAMA, 64).attention


# --- Bad input: a ValueError naming the argument and the fix ---------------------------------------------------------
@for_each([
    (lambda: forward_flops(LLAMA, 0), "tokens"),
    (lambda: forward_flops(LLAMA, 8, batch=0), "batch"),
    (lambda: forward_flops("no-such-model", 8), "unknown model"),
    (lambda: decode_step_flops(LLAMA, -1), "context_len"),
    (lambda: attention_pairs(8, 4), "exceeds kv_len"),
    (lambda: attention_pairs(8, 4), "context, so kv_len must count them too"),
    (lambda: naive_generation_flops(LLAMA, 8, 0), "n_tokens"),
    (lambda: cached_generation_flops(LLAMA, 8, 10, cache_len=12), "cache_len"),
    (lambda: generation_flops_curve(LLAMA, 8, 4, cached=False, cache_len=16), "cached=True"),
    (lambda: generation_flops_curve(LLAMA, 16, 10, cache_len=24),
     r"\bcache_len=24\b.*\(16 \+ 9\); pass cache_len >= 25\b"),
], ids=str)
def test_bad_input_gets_a_value_error_naming_the_argument_and_the_fix(call, words):
    with pytest.raises(ValueError, match=words):
        call()
