"""Chapter 6, shrinking the KV cache, run on the tiny model: the paged, quantized, prefix-shared and windowed caches
against the contiguous float cache, and int8 weights (the closed-form levers are in tests/math/test_kv_levers.py).

JAX results are computed once per configuration (lru_cache) and shared by the tests; every model is the 2-layer tiny
decoder with B=2 prompts of T=8 tokens and 8 new tokens, like tests/tiny/test_model.py.
"""

import math
from functools import lru_cache

import jax.numpy as jnp
import numpy as np
import pytest

from scaling_lib.inference import decode_step_time
from scaling_lib.kv_levers import ragged_kv_reads
from scaling_lib.memory import kv_bytes_per_token, param_bytes
from scaling_lib.roofline import attention_flops, attention_intensity, critical_batch_size
from scaling_lib.tiny import model, paged
from scaling_lib.tiny import quantize as qz
from scaling_lib.tiny.xla import compiled_cost

B, T, N_NEW, BLOCK = 2, 8, 8, 4
LENGTHS = (T, 5)  # a ragged batch
PROMPT = np.random.default_rng(0).integers(0, 256, size=(B, T), dtype=np.int32)
PROMPT[1, LENGTHS[1]:] = 0  # padding


@lru_cache(maxsize=None)
def params_for(n_kv_heads=2, sliding_window=None):
    return model.init_params(model.tiny_config(n_kv_heads=n_kv_heads, sliding_window=sliding_window), seed=0)


@lru_cache(maxsize=None)
def contiguous_greedy(sliding_window=None):
    """Greedy tokens [B, N_NEW] and the logits that chose them, through model.prefill / model.decode_step."""
    return model.greedy_with_logits(params_for(sliding_window=sliding_window), PROMPT, N_NEW, list(LENGTHS))


@lru_cache(maxsize=None)
def paged_greedy(kv_dtype="fp32", sliding_window=None, n_blocks=16):
    cache = paged.PagedKVCache(params_for(sliding_window=sliding_window).config, B, n_blocks, BLOCK,
                               max_blocks_per_seq=(T + N_NEW) // BLOCK, kv_dtype=kv_dtype)
    tokens, logits = paged.paged_generate(params_for(sliding_window=sliding_window), PROMPT, N_NEW, cache,
                                          list(LENGTHS))
    return np.asarray(tokens), np.asarray(logits), cache


def first_divergence(a, b):
    """Index of the first decode step where any sequence's token differs, or None."""
    differ = np.nonzero((a != b).any(axis=0))[0]
    return int(differ[0]) if differ.size else None












# ------------------------------------------------------------------------------------------------- the tiny model
def test_paged_equals_contiguous_decoding_for_a_ragged_batch():
    tokens, logits = contiguous_greedy()
    p_tokens, p_logits, cache = paged_greedy()
    np.testing.assert_array_equal(p_tokens, tokens)
    np.testing.assert_allclose(p_logits, logits, atol=1e-5)
    final = [n + N_NEW - 1 for n in LENGTHS]  # the last sampled token is not fed back
    np.testing.assert_array_equal(cache.lengths, final)
    held = [cache.blocks_held(b) for b in range(B)]
    assert held == [math.ceil(n / BLOCK) for n in final]  # a new block exactly at each boundary
    assert sum(held) * BLOCK == ragged_kv_reads(final, BLOCK).paged_slots


def test_int8_kv_error_bound_and_greedy_tokens_match_the_float_cache():
    """Bound: the prompt's teacher-forced logits stay within 0.05 of fp32 with int8 KV (the logits have standard
    deviation about 1) and within 0.3 with fp8 (e4m3 keeps 3 mantissa bits), int8 closer than fp8; over 8 greedy
    steps int8 KV picks exactly the fp32 tokens."""
    params = params_for()
    reference = np.asarray(model.forward(params, PROMPT))
    real = np.arange(T)[None, :] < np.array(LENGTHS)[:, None]  # positions that are not padding
    errors = {}
    for kv_dtype in ("int8", "fp8"):
        cache = paged.PagedKVCache(params.config, B, 16, BLOCK, (T + N_NEW) // BLOCK, kv_dtype=kv_dtype)
        logits = np.asarray(paged.paged_prefill(params, PROMPT, cache, list(LENGTHS))[0])
        errors[kv_dtype] = float(np.abs(logits - reference)[real].max())
    assert 0 < errors["int8"] < 0.05 < errors["fp8"] < 0.3
    tokens, _ = contiguous_greedy()
    assert first_divergence(paged_greedy("int8")[0], tokens) is None  # all 8 greedy steps identical


def test_quantized_kv_cache_halves_the_bytes_of_bf16():
    config = params_for().config
    caches = {d: paged.PagedKVCache(config, B, 16, BLOCK, 4, kv_dtype=d) for d in ("bf16", "int8", "fp8")}
    for d in ("int8", "fp8"):
        assert caches[d].pool.k.nbytes * 2 == caches["bf16"].pool.k.nbytes
        scales = caches[d].pool.k_scale.nbytes + caches[d].pool.v_scale.nbytes
        assert caches[d].nbytes == caches["bf16"].nbytes / 2 + scales  # one fp32 scale per token and head
        assert scales / caches["bf16"].nbytes == pytest.approx(4 / (2 * config.head_dim))
    per_token = caches["bf16"].nbytes / (16 * BLOCK)
    assert per_token == kv_bytes_per_token(config, "bf16")


def test_prefix_caching_continuation_equals_prefilling_the_full_prompt():
    """Request 0 prefills a 6-token prefix (one full block of 4 + 2), request 1 shares it, both append their own
    suffix in one step; each equals a forward pass over its full prompt. (Shapes match the other tests' [2, 8]
    steps, so nothing new compiles.)"""
    params = params_for()
    prefix, suffixes = PROMPT[0, :6], (PROMPT[1, :2], PROMPT[1, 2:5])
    cache = paged.PagedKVCache(params.config, B, 16, BLOCK, (T + N_NEW) // BLOCK)
    rows = np.zeros((B, T), np.int32)
    rows[0, :6] = prefix
    paged.paged_extend(params, rows, cache, n_new=[6, 0])
    cache.share_prefix(0, 1, 6)
    assert cache.refcount[cache.block_table[0, 0]] == 2  # the full block is shared
    assert cache.block_table[1, 1] != cache.block_table[0, 1]  # the partial block was copied
    assert cache.n_free_blocks == 16 - 1 - 2 - 1
    rows = np.zeros((B, T), np.int32)
    rows[0, :2], rows[1, :3] = suffixes
    logits, _ = paged.paged_extend(params, rows, cache, n_new=[2, 3])
    full_prompts = np.zeros((B, T), np.int32)
    full_prompts[0] = np.concatenate([prefix, suffixes[0]])
    full_prompts[1] = np.concatenate([prefix, suffixes[1]])[:T]
    full = np.asarray(model.forward(params, full_prompts))
    np.testing.assert_allclose(np.asarray(logits)[:, :2], full[:, 6:8], atol=1e-5)
    free = cache.n_free_blocks
    cache.release(1)  # its shared block stays (one user left); its own blocks go back to the pool
    assert cache.refcount[cache.block_table[0, 0]] == 1 and cache.n_free_blocks == free + 2


def test_sliding_window_paged_cache_frees_blocks_and_matches_full_recompute():
    window, params = 4, params_for(sliding_window=4)
    # 5 blocks in the pool (4 usable): without freeing, the two sequences would need 4 + 3 blocks
    tokens, logits, cache = paged_greedy(sliding_window=window, n_blocks=5)
    assert max(cache.blocks_held(b) for b in range(B)) <= math.ceil(window / BLOCK) + 1
    for b, n in enumerate(LENGTHS):  # each sequence alone, recomputed from scratch with the same window
        sequence = np.zeros((1, T + N_NEW - 1), np.int32)
        sequence[0, :n + N_NEW - 1] = np.concatenate([PROMPT[b, :n], tokens[b, :-1]])
        full = np.asarray(model.forward(params, sequence))[0, n - 1:n - 1 + N_NEW]
        np.testing.assert_array_equal(full.argmax(-1), tokens[b])
        np.testing.assert_allclose(logits[b], full, atol=1e-5)


def test_int8_weights_close_to_float_and_greedy_tokens():
    """Tolerance: every logit within 5% of the largest |logit| for both int8 modes; weight-only int8 keeps all 8
    greedy tokens of both prompts (int8 x int8 matmuls are allowed to diverge: the first divergence is reported)."""
    params = params_for()
    reference = np.asarray(model.forward(params, PROMPT))
    float_tokens = np.asarray(model.generate(params, PROMPT, N_NEW))
    for mode in qz.WEIGHT_MODES:
        quantized = qz.quantize_params(params, mode)
        error = np.abs(np.asarray(model.forward(quantized, PROMPT)) - reference).max()
        assert 0 < error < 0.05 * np.abs(reference).max(), mode
    weight_only = np.asarray(model.generate(qz.quantize_params(params, "weight-only"), PROMPT, N_NEW))
    np.testing.assert_array_equal(weight_only, float_tokens)


def test_r3_int8_weights_halve_the_bytes_bcrit_and_the_weight_term():
    bf16 = model.init_params(params_for().config, seed=0, dtype=jnp.bfloat16)
    int8 = qz.quantize_params(bf16)
    values = sum(getattr(int8, name).values.nbytes for name in qz.LINEAR_LAYERS)
    assert 2 * values == qz.linear_weight_bytes(bf16)
    assert critical_batch_size("tpu-v5e", "int8", "bf16") == pytest.approx(critical_batch_size("tpu-v5e") / 2)
    assert critical_batch_size("tpu-v5e", "int8", "int8") == pytest.approx(critical_batch_size("tpu-v5e"))
    step = dict(model="llama3-70b", chip="tpu-v5e", n_chips=16, batch=16, context_len=2048)
    assert decode_step_time(**step, weight_dtype="int8").weight_s == pytest.approx(
        decode_step_time(**step).weight_s / 2)
    assert param_bytes("llama3-70b", "int8") == pytest.approx(param_bytes("llama3-70b") / 2)


def test_gqa_decode_attention_intensity_measured_by_xla_grows_with_G():
    """One decode query per sequence against S = 1,024 cached bf16 keys and values (N = 8 heads of H = 128), MHA,
    GQA (K = 2) and MQA: XLA's flops / bytes rises with G = N / K, as `roofline.attention_intensity` says. (XLA on
    the CPU also counts the scores and converted copies it materializes, so its bytes exceed the K, V read.)"""
    S, N, H = 1024, 8, 128
    q_pos, k_pos = jnp.full((B, 1), S - 1), jnp.broadcast_to(jnp.arange(S), (B, S))
    measured = {}
    for K in (8, 2, 1):
        q, kv = jnp.zeros((B, 1, N, H), jnp.bfloat16), jnp.zeros((B, S, K, H), jnp.bfloat16)
        cost = compiled_cost(model.attention, q, kv, kv, q_pos, k_pos)
        assert cost.bytes_accessed >= 2 * kv.nbytes and cost.flops >= attention_flops(1, S, N, H, B)
        measured[N // K] = cost.flops / cost.bytes_accessed
    assert measured[1] < measured[4] < measured[8]
    assert measured[8] / measured[1] > 8 / 2  # at least half the predicted G ratio
    assert attention_intensity(1, S, 8) / attention_intensity(1, S, 1) == pytest.approx(8, rel=0.01)


def test_paged_cache_rejects_bad_input():
    config = params_for().config
    with pytest.raises(ValueError, match="format"):
        paged.PagedKVCache(config, B, 16, BLOCK, 4, kv_dtype="int3")
    with pytest.raises(ValueError, match="n_blocks"):
        paged.PagedKVCache(config, B, 1, BLOCK, 4)
    cache = paged.PagedKVCache(config, B, 3, BLOCK, 4)  # 2 usable blocks: 8 tokens in all
    with pytest.raises(ValueError, match="out of blocks"):
        paged.paged_prefill(params_for(), PROMPT, cache)
    with pytest.raises(ValueError, match="max_blocks_per_seq"):
        paged.paged_prefill(params_for(), np.zeros((B, 9), np.int32), paged.PagedKVCache(config, B, 8, 4, 2))
    with pytest.raises(ValueError, match="block_size"):
        ragged_kv_reads([3, 4], 0)
    with pytest.raises(ValueError, match="weight mode"):
        qz.quantize_params(params_for(), "int4")


def test_paged_cache_refuses_sequence_ids_that_numpy_would_count_from_the_end():
    """release(-1) used to free the last sequence and share_prefix(0, -1, 3) to write into it."""
    cache = paged.PagedKVCache(params_for().config, B, 16, BLOCK, 4)
    paged.paged_prefill(params_for(), PROMPT, cache)
    table, lengths = cache.block_table.copy(), cache.lengths.copy()
    for call, says in ((lambda: cache.release(-1), "b must be a non-negative integer, got -1"),
                       (lambda: cache.release(B), f"b={B} is not a sequence of this cache; it holds {B}"),
                       (lambda: cache.release(True), "got True"), (lambda: cache.release(0.5), "fractional"),
                       (lambda: cache.share_prefix(0, -1, 3), "dst must be a non-negative integer"),
                       (lambda: cache.share_prefix(-1, 1, 3), "src must be a non-negative integer"),
                       (lambda: cache.share_prefix(0, 0, 3), "both sequence 0"),
                       (lambda: cache.share_prefix(0, 1, 2.5), "n_tokens"),
                       (lambda: cache.blocks_held(-1), "b must be a non-negative integer")):
        with pytest.raises(ValueError, match=says):
            call()
    np.testing.assert_array_equal(cache.block_table, table)  # nothing was released or written
    np.testing.assert_array_equal(cache.lengths, lengths)


def test_paged_entrances_check_tokens_before_the_int32_cast_and_their_arguments():
    cache = paged.PagedKVCache(params_for().config, B, 16, BLOCK, 4)
    with pytest.raises(ValueError, match=r"token ids must lie in \[0, 256\)"):
        paged.paged_prefill(params_for(), PROMPT.astype(np.int64) + 2**40, cache)
    with pytest.raises(ValueError, match=r"token ids must lie in \[0, 256\)"):
        paged.paged_decode_step(params_for(), np.array([2**32, 0]), cache)  # 2**32 is 0 in int32
    with pytest.raises(ValueError, match=r"token must be one id per sequence"):
        paged.paged_decode_step(params_for(), np.zeros((B, 1), np.int32), cache)
    with pytest.raises(ValueError, match="cache must be a PagedKVCache"):
        paged.paged_extend(params_for(), PROMPT, None)
    with pytest.raises(ValueError, match="config must be a scaling_lib.models.Transformer"):
        paged.PagedKVCache(None, B, 16, BLOCK, 4)
    with pytest.raises(ValueError, match=r"lengths must lie in \[1, T=8\]"):  # a 0 would pick logits[-1]
        paged.paged_generate(params_for(), PROMPT, 2, cache, lengths=[0, 5])
    assert not cache.lengths.any()  # every refusal left the cache as it was


def test_paged_cache_and_steps_name_a_bad_format_or_cache():
    with pytest.raises(ValueError, match="kv_dtype must be a format name"):
        paged.PagedKVCache(params_for().config, B, 16, BLOCK, 4, kv_dtype=["int8"])
    for call in (lambda: paged.paged_prefill(params_for(), PROMPT, None),
                 lambda: paged.paged_generate(params_for(), PROMPT, 2, "cache")):
        with pytest.raises(ValueError, match="cache must be a PagedKVCache"):
            call()
