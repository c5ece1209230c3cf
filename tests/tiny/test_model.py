"""scaling_lib.tiny.model: the cached decoder against a full recompute and against an independent NumPy reference.

Compilations dominate the run time, so every test uses prompts of B=2, T=8 and 8 new tokens (forward over 16), and
parameters are built once per config.
"""

from functools import lru_cache

import numpy as np
import pytest

from scaling_lib.models import Transformer
from scaling_lib.tiny import model

B, T, N_NEW = 2, 8, 8
CONFIGS = {
    "mha": model.tiny_config(n_kv_heads=4),
    "gqa": model.tiny_config(n_kv_heads=2),
    "mqa": model.tiny_config(n_kv_heads=1),
    "gqa-window4": model.tiny_config(n_kv_heads=2, sliding_window=4),
}
PROMPT = np.random.default_rng(0).integers(0, 256, size=(B, T), dtype=np.int32)


@lru_cache(maxsize=None)
def params_for(name):
    return model.init_params(CONFIGS[name], seed=0)


def reference_logits(params, tokens, window=None):
    """Plain multi-head attention in float64 NumPy, written without the library's helpers: each query head n reads
    KV head n // G; RoPE as multiplication by e^{i p theta_j} of the complex pairs (x_j, x_{j+H/2})."""
    p = {k: np.asarray(v, np.float64) for k, v in vars(params).items() if k != "config" and v is not None}
    cfg = params.config
    G, H, S = cfg.n_heads // cfg.n_kv_heads, cfg.head_dim, tokens.shape[1]
    pos = np.arange(S)

    def norm(x, g):
        return x / np.sqrt((x ** 2).mean(-1, keepdims=True) + 1e-6) * g

    def rotate(x):  # [B, S, heads, H]
        z = x[..., : H // 2] + 1j * x[..., H // 2:]
        z = z * np.exp(1j * pos[:, None, None] * 10000.0 ** (-np.arange(H // 2) * 2 / H))
        return np.concatenate([z.real, z.imag], -1)

    allowed = pos[:, None] >= pos[None, :]
    if window is not None:
        allowed &= pos[:, None] - pos[None, :] < window
    x = p["embed"][tokens]
    for i in range(cfg.n_layers):
        h = norm(x, p["attn_norm"][i])
        q = rotate(np.einsum("bsd,dnh->bsnh", h, p["wq"][i]))
        k = np.repeat(rotate(np.einsum("bsd,dkh->bskh", h, p["wk"][i])), G, axis=2)
        v = np.repeat(np.einsum("bsd,dkh->bskh", h, p["wv"][i]), G, axis=2)
        scores = np.where(allowed, np.einsum("bqnh,bsnh->bnqs", q, k) / np.sqrt(H), -np.inf)
        weights = np.exp(scores - scores.max(-1, keepdims=True))
        weights /= weights.sum(-1, keepdims=True)
        x = x + np.einsum("bqnh,nhd->bqd", np.einsum("bnqs,bsnh->bqnh", weights, v), p["wo"][i])
        h = norm(x, p["mlp_norm"][i])
        gate = h @ p["w_gate"][i]
        x = x + (gate / (1 + np.exp(-gate)) * (h @ p["w_up"][i])) @ p["w_down"][i]
    unembed = p.get("unembed", p["embed"].T)
    return norm(x, p["final_norm"]) @ unembed


@pytest.mark.parametrize("name", CONFIGS)
def test_forward_matches_independent_numpy_reference(name):
    params = params_for(name)
    tokens = np.concatenate([PROMPT, PROMPT[:, ::-1]], axis=1)  # [2, 16]: longer than the window of 4
    expected = reference_logits(params, tokens, CONFIGS[name].sliding_window)
    np.testing.assert_allclose(model.forward(params, tokens), expected, atol=1e-4)


@pytest.mark.parametrize("name", CONFIGS)
def test_cached_greedy_decode_equals_full_recompute(name):
    params = params_for(name)
    tokens, logits = model.greedy_with_logits(params, PROMPT, N_NEW)
    full = model.forward(params, np.concatenate([PROMPT, tokens], axis=1))  # [2, 16]
    recomputed = np.asarray(full)[:, T - 1: T - 1 + N_NEW]  # the logits that predict each new token
    np.testing.assert_array_equal(recomputed.argmax(-1), tokens)
    np.testing.assert_allclose(logits, recomputed, atol=1e-4)


def test_sliding_window_covering_the_context_equals_full_attention():
    tokens = np.concatenate([PROMPT, PROMPT], axis=1)  # 16 tokens, window 16
    windowed = model.init_params(model.tiny_config(n_kv_heads=2, sliding_window=16), seed=0)
    np.testing.assert_allclose(model.forward(windowed, tokens), model.forward(params_for("gqa"), tokens), atol=1e-6)


def test_sliding_window_shorter_than_the_context_changes_late_logits_only():
    tokens = np.concatenate([PROMPT, PROMPT], axis=1)
    full = np.asarray(model.forward(params_for("gqa"), tokens))
    windowed = np.asarray(model.forward(params_for("gqa-window4"), tokens))
    np.testing.assert_allclose(windowed[:, :4], full[:, :4], atol=1e-5)  # the first 4 positions see everything
    assert np.abs(windowed[:, 4:] - full[:, 4:]).max() > 1e-2


def test_ragged_batch_equals_each_sequence_alone():
    params, lengths = params_for("gqa"), [T, 5]
    prompt = PROMPT.copy()
    prompt[1, 5:] = 0  # padding: must not matter
    tokens, logits = model.greedy_with_logits(params, prompt, N_NEW, lengths=lengths)
    for b, n in enumerate(lengths):
        alone = np.asarray(model.forward(params, np.concatenate([prompt[b, :n], tokens[b]])[None]))[0]
        np.testing.assert_array_equal(alone[n - 1: n - 1 + N_NEW].argmax(-1), tokens[b])
        np.testing.assert_allclose(logits[b], alone[n - 1: n - 1 + N_NEW], atol=1e-4)


def test_decode_step_compiles_once_for_every_position():
    params = params_for("gqa")
    _, cache = model.prefill(params, PROMPT, lengths=[T, 3], cache_len=T + N_NEW)
    token = np.zeros(B, np.int32)
    _, cache = model.decode_step(params, token, cache)
    traced = model.TRACE_COUNTS["decode_step"]
    for _ in range(N_NEW - 1):
        _, cache = model.decode_step(params, token, cache)
    assert model.TRACE_COUNTS["decode_step"] == traced
    np.testing.assert_array_equal(cache.positions, [T + N_NEW, 3 + N_NEW])


def test_decode_step_writes_the_cache_in_place():
    params = params_for("gqa")
    _, cache = model.prefill(params, PROMPT, cache_len=T + N_NEW)
    assert cache.k.shape == (2, B, T + N_NEW, 2, 16)  # [L, B, S, K, H]
    old = cache
    _, cache = model.decode_step(params, np.zeros(B, np.int32), cache)
    assert old.k.is_deleted() and old.v.is_deleted()  # donated: the new cache reuses the buffers


def test_generate_greedy_matches_the_decode_loop_and_sampling_is_seeded():
    params = params_for("gqa")
    greedy = model.generate(params, PROMPT, N_NEW)
    np.testing.assert_array_equal(greedy, model.greedy_with_logits(params, PROMPT, N_NEW)[0])
    sample = model.generate(params, PROMPT, N_NEW, temperature=1.0, seed=1)
    np.testing.assert_array_equal(sample, model.generate(params, PROMPT, N_NEW, temperature=1.0, seed=1))
    assert not np.array_equal(sample, model.generate(params, PROMPT, N_NEW, temperature=1.0, seed=2))
    assert sample.shape == (B, N_NEW) and 0 <= int(sample.min()) and int(sample.max()) < 256


def test_init_params_is_deterministic_for_a_seed():
    cfg = CONFIGS["gqa"]
    a, b, c = model.init_params(cfg, 3), model.init_params(cfg, 3), model.init_params(cfg, 4)
    np.testing.assert_array_equal(a.wq, b.wq)
    assert not np.array_equal(a.wq, c.wq)


@pytest.mark.parametrize("changes, match", [
    (dict(sliding_window=0), "sliding_window"),
    (dict(sliding_window=-4), "sliding_window"),
    (dict(n_kv_heads=3), "does not divide"),
])
def test_bad_configs_raise(changes, match):
    with pytest.raises(ValueError, match=match):
        model.tiny_config(**changes)


@pytest.mark.parametrize("changes, match", [(dict(head_dim=15), "even"), (dict(n_experts=2), "dense")])
def test_configs_the_model_cannot_run_raise(changes, match):
    with pytest.raises(ValueError, match=match):
        model.init_params(CONFIGS["gqa"].with_(**changes))


def test_init_params_rejects_a_non_transformer():
    with pytest.raises(ValueError, match="Transformer"):
        model.init_params({"d_model": 64})


@pytest.mark.parametrize("kwargs, match", [
    (dict(cache_len=T - 1), "cache_len"),
    (dict(lengths=[0, T]), "lengths"),
    (dict(lengths=[T + 1, T]), "lengths"),
    (dict(lengths=[T]), "lengths"),
])
def test_bad_prefill_arguments_raise(kwargs, match):
    with pytest.raises(ValueError, match=match):
        model.prefill(params_for("gqa"), PROMPT, **kwargs)


@pytest.mark.parametrize("bad_token", [-1, 256])
def test_tokens_outside_the_vocabulary_raise(bad_token):
    prompt = PROMPT.copy()
    prompt[0, 3] = bad_token
    with pytest.raises(ValueError, match="vocab_size=256"):
        model.forward(params_for("gqa"), prompt)


def test_decode_step_on_a_full_cache_raises():
    params = params_for("gqa")
    _, cache = model.prefill(params, PROMPT)  # cache_len defaults to T: no room left
    with pytest.raises(ValueError, match="cache is full"):
        model.decode_step(params, np.zeros(B, np.int32), cache)


def test_transformer_without_window_is_accepted():
    assert isinstance(model.tiny_config(sliding_window=None), Transformer)


def test_cache_bytes_match_the_memory_formula():
    from scaling_lib.memory import kv_cache_bytes

    _, cache = model.prefill(params_for("mqa"), PROMPT, cache_len=T + N_NEW)
    assert cache.k.nbytes + cache.v.nbytes == kv_cache_bytes(CONFIGS["mqa"], T + N_NEW, batch=B, dtype="fp32")


@pytest.mark.parametrize("token", [np.array([2**40, 1]), np.array([2**32, 1], np.uint64), [1, 2**40],
                                   np.array([1, 2**63], np.uint64)])
def test_decode_step_checks_token_ids_before_the_int32_cast(token):
    """2**32 and 2**40 are 0 once cast to int32: they must be refused, not decoded as token 0."""
    params = params_for("gqa")
    _, cache = model.prefill(params, PROMPT, cache_len=T + 1)
    with pytest.raises(ValueError, match=r"token ids must lie in \[0, 256\)"):
        model.decode_step(params, token, cache)
    with pytest.raises(ValueError, match=r"token ids must lie in \[0, 256\)"):
        model.generate(params, np.asarray(token, np.uint64)[None], 1)


def test_a_cache_whose_k_and_v_differ_is_refused_when_it_is_made():
    _, cache = model.prefill(params_for("gqa"), PROMPT, cache_len=T + 1)
    with pytest.raises(ValueError, match="KVCache k is float32 but v is bfloat16"):
        model.KVCache(cache.k, cache.v.astype("bfloat16"), cache.positions)
    with pytest.raises(ValueError, match=r"KVCache k has shape \[2, 2, 9, 2, 16\] but v has \[2, 2, 8, 2, 16\]"):
        model.KVCache(cache.k, cache.v[:, :, :T], cache.positions)
    with pytest.raises(ValueError, match="positions must be integers"):
        model.KVCache(cache.k, cache.v, cache.positions.astype("float32"))


@pytest.mark.parametrize("kwargs, says", [(dict(seed=-1), "seed must be a non-negative integer"),
                                          (dict(seed=1.5), "seed"), (dict(seed=True), "seed"),
                                          (dict(dtype="int32"), "floating-point dtype"),
                                          (dict(dtype="nonsense"), "floating-point dtype")])
def test_init_params_refuses_bad_seeds_and_dtypes(kwargs, says):
    with pytest.raises(ValueError, match=says):
        model.init_params(CONFIGS["gqa"], **kwargs)


@pytest.mark.parametrize("kwargs, says", [(dict(seed=-1), "seed"), (dict(seed="0"), "seed"),
                                          (dict(temperature=float("nan")), "temperature"),
                                          (dict(temperature=float("inf")), "temperature"),
                                          (dict(temperature="1"), "temperature"), (dict(n_tokens=True), "n_tokens")])
def test_generate_refuses_bad_seeds_temperatures_and_counts(kwargs, says):
    with pytest.raises(ValueError, match=says):
        model.generate(params_for("gqa"), PROMPT, **{"n_tokens": 2, **kwargs})


def test_model_entrances_refuse_what_is_not_params():
    for call in (lambda: model.forward(None, PROMPT), lambda: model.prefill({}, PROMPT),
                 lambda: model.generate("params", PROMPT, 2)):
        with pytest.raises(ValueError, match="params must be tiny.model.Params"):
            call()


def test_a_layer_that_does_not_exist_is_refused_not_clamped_to_the_last():
    params = params_for("gqa")
    assert set(params.layer(1)) >= {"wq", "wk", "wv", "wo"}
    for i, says in ((2, "does not exist; the model has n_layers=2"), (-1, "non-negative"), (True, "got True")):
        with pytest.raises(ValueError, match=says):
            params.layer(i)
