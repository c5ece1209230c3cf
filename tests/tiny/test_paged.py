"""Chapter 6, shrinking the KV cache, run on the tiny model: the paged, quantized, prefix-shared and windowed caches
against the contiguous float cache, and int8 weights (the closed-form levers are in tests/math/test_kv_levers.py).

JAX results are computed once per configuration (lru_cache) and shared by the tests; every model is the 2-layer tiny
decoder with B=2 prompts of T=8 tokens and 8 new tokens, like tests/tiny/test_model.py.
"""

import math
from functools import lru_cache

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from scaling_lib.inference import decode_step_time
from scaling_lib.kv_levers import ragged_kv_reads
from scaling_lib.memory import kv_bytes_per_token, param_bytes
from scaling_lib.roofline import critical_batch_size
from scaling_lib.tiny import model, paged
from scaling_lib.tiny import quantize as qz

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


def test_int8_weights_stay_close_to_float_keep_the_greedy_tokens_and_halve_the_bytes():
    """Every logit within 5% of the largest |logit| for both int8 modes; weight-only int8 keeps all 8 greedy tokens
    of both prompts (int8 x int8 matmuls are allowed to diverge: the chapter reports the first divergence). The int8
    values (absmax / 127 per output channel) take half the bytes of the bf16 weights, which halves the weight term of the step and, with bf16 math,
    B_crit (claim R3; its closed form is tests/math/test_claims_roofline.py's)."""
    params = params_for()
    reference = np.asarray(model.forward(params, PROMPT))
    float_tokens = np.asarray(model.generate(params, PROMPT, N_NEW))
    for mode in qz.WEIGHT_MODES:
        quantized = qz.quantize_params(params, mode)
        error = np.abs(np.asarray(model.forward(quantized, PROMPT)) - reference).max()
        assert 0 < error < 0.05 * np.abs(reference).max(), mode
    weight_only = np.asarray(model.generate(qz.quantize_params(params, "weight-only"), PROMPT, N_NEW))
    np.testing.assert_array_equal(weight_only, float_tokens)
    # The hand-written rule: one scale per layer and output channel, max |w| over the contracted D axis / 127, so each
    # channel's largest weight takes the full int8 range.
    w_gate, stored = np.asarray(params.w_gate, np.float32), qz.quantize_params(params).w_gate  # [L, D, F]
    np.testing.assert_allclose(np.asarray(stored.scale), np.abs(w_gate).max(axis=1, keepdims=True) / 127, rtol=1e-6)
    np.testing.assert_array_equal(np.abs(np.asarray(stored.values, np.int32)).max(axis=1), 127)
    bf16 = model.init_params(params.config, seed=0, dtype=jnp.bfloat16)
    int8 = qz.quantize_params(bf16)
    values = sum(getattr(int8, name).values.nbytes for name in qz.LINEAR_LAYERS)
    assert 2 * values == qz.linear_weight_bytes(bf16)
    assert critical_batch_size("tpu-v5e", "int8", "bf16") == pytest.approx(critical_batch_size("tpu-v5e") / 2)
    assert critical_batch_size("tpu-v5e", "int8", "int8") == pytest.approx(critical_batch_size("tpu-v5e"))
    step = dict(model="llama3-70b", chip="tpu-v5e", n_chips=16, batch=16, context_len=2048)
    assert decode_step_time(**step, weight_dtype="int8").weight_s == pytest.approx(
        decode_step_time(**step).weight_s / 2)
    assert param_bytes("llama3-70b", "int8") == pytest.approx(param_bytes("llama3-70b") / 2)


def test_quantize_works_under_jit_where_it_cannot_look_at_values():
    x = jnp.arange(8.0).reshape(2, 4)
    values, scale = jax.jit(lambda x: qz.quantize(x, "int8", -1))(x)
    np.testing.assert_allclose(np.asarray(qz.dequantize(values, scale)), np.asarray(x), atol=float(scale.max()) / 2)


def _cache(n_blocks=16, **kwargs):
    return paged.PagedKVCache(params_for().config, B, n_blocks, BLOCK, 4, **kwargs)


def _filled():
    """A paged cache holding the two prompts (the refusals must leave it as it was)."""
    cache = _cache()
    paged.paged_prefill(params_for(), PROMPT, cache)
    return cache


def on_empty(call):
    """Run `call` on an empty cache instead (a prefill needs one), and check it stays empty."""
    def on_a_fresh_cache(_):
        cache = _cache()
        try:
            call(cache)
        finally:
            assert not cache.lengths.any()
    return on_a_fresh_cache


def _non_finite(bad):
    x = np.array([[1.0, 2.0, bad, 4.0], [1.0, 2.0, 3.0, 4.0]], np.float32)
    w = np.ones((4, 3), np.float32)
    w[1, 2] = bad
    return jnp.asarray(x), w


# Every refusal of scaling_lib.tiny.paged and scaling_lib.tiny.quantize: (the call on a cache that holds the two
# prompts, or on an empty one, what its ValueError says).
BAD_INPUTS = [
    pytest.param(lambda c: _cache(kv_dtype="int3"), "format", id="a KV format with no kernel"),
    pytest.param(lambda c: _cache(kv_dtype=["int8"]), "kv_dtype must be a format name", id="a format in a list"),
    pytest.param(lambda c: _cache(n_blocks=1), "n_blocks", id="a pool of one block (the null block)"),
    pytest.param(lambda c: paged.PagedKVCache(None, B, 16, BLOCK, 4), "config must be a scaling_lib.models.Transformer",
                 id="no config"),
    pytest.param(lambda c: paged.paged_prefill(params_for(), PROMPT, _cache(n_blocks=3)), "out of blocks",
                 id="two usable blocks for 13 tokens"),
    pytest.param(lambda c: paged.paged_prefill(params_for(), np.zeros((B, 9), np.int32),
                                               paged.PagedKVCache(params_for().config, B, 8, 4, 2)),
                 "max_blocks_per_seq", id="a sequence longer than its block table"),
    pytest.param(lambda c: ragged_kv_reads([3, 4], 0), "block_size", id="ragged reads: blocks of 0"),
    pytest.param(lambda c: qz.quantize_params(params_for(), "int4"), "weight mode", id="an int4 weight mode"),
    *(pytest.param(lambda c, bad=bad, dtype=dtype: qz.quantize(_non_finite(bad)[0], dtype, -1),
                   r"quantize: x has 1 non-finite value", id=f"quantize {dtype}: {bad}")
      for bad in (np.inf, -np.inf, np.nan) for dtype in ("int8", "fp8")),
    *(pytest.param(lambda c, bad=bad: qz.quantize_weight(_non_finite(bad)[1], 1, 1), "non-finite",
                   id=f"quantize_weight: {bad}") for bad in (np.inf, -np.inf, np.nan)),
    pytest.param(lambda c: c.release(-1), "b must be a non-negative integer, got -1",
                 id="release(-1), which NumPy would count from the end"),
    pytest.param(lambda c: c.release(B), f"b={B} is not a sequence of this cache; it holds {B}", id="release(B)"),
    pytest.param(lambda c: c.release(True), "got True", id="release(True)"),
    pytest.param(lambda c: c.release(0.5), "fractional", id="release(0.5)"),
    pytest.param(lambda c: c.share_prefix(0, -1, 3), "dst must be a non-negative integer", id="share into -1"),
    pytest.param(lambda c: c.share_prefix(-1, 1, 3), "src must be a non-negative integer", id="share from -1"),
    pytest.param(lambda c: c.share_prefix(0, 0, 3), "both sequence 0", id="share with itself"),
    pytest.param(lambda c: c.share_prefix(0, 1, 2.5), "n_tokens", id="share 2.5 tokens"),
    pytest.param(lambda c: c.blocks_held(-1), "b must be a non-negative integer", id="blocks_held(-1)"),
    pytest.param(on_empty(lambda c: paged.paged_prefill(params_for(), PROMPT.astype(np.int64) + 2**40, c)),
                 r"token ids must lie in \[0, 256\)", id="prefill: token ids past int32"),
    pytest.param(lambda c: paged.paged_decode_step(params_for(), np.array([2**32, 0]), c),
                 r"token ids must lie in \[0, 256\)", id="decode: 2**32, which int32 wraps to 0"),
    pytest.param(lambda c: paged.paged_decode_step(params_for(), np.zeros((B, 1), np.int32), c),
                 r"token must be one id per sequence", id="decode: a column of tokens"),
    pytest.param(lambda c: paged.paged_generate(params_for(), PROMPT, 2, c, lengths=[0, 5]),
                 r"lengths must lie in \[1, T=8\]", id="a length of 0, which would pick logits[-1]"),
    pytest.param(lambda c: paged.paged_extend(params_for(), PROMPT, None), "cache must be a PagedKVCache",
                 id="extend: no cache"),
    pytest.param(lambda c: paged.paged_prefill(params_for(), PROMPT, None), "cache must be a PagedKVCache",
                 id="prefill: no cache"),
    pytest.param(lambda c: paged.paged_generate(params_for(), PROMPT, 2, "cache"), "cache must be a PagedKVCache",
                 id="generate: a string for a cache"),
]


@pytest.mark.parametrize("call, says", BAD_INPUTS)
def test_bad_inputs_are_refused_and_leave_the_cache_as_it_was(call, says):
    cache = _filled()
    table, lengths, free = cache.block_table.copy(), cache.lengths.copy(), cache.n_free_blocks
    with pytest.raises(ValueError, match=says):
        call(cache)
    np.testing.assert_array_equal(cache.block_table, table)  # nothing was released or written
    np.testing.assert_array_equal(cache.lengths, lengths)
    assert cache.n_free_blocks == free
