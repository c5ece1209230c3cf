"""scaling_lib.tiny.model: the cached decoder against a full recompute and against an independent NumPy reference, and
its table of bad inputs.

Compilations dominate the run time, so every test uses prompts of B=2, T=8 and 8 new tokens (forward over 16), and
parameters are built once per config.
"""

from functools import lru_cache

import numpy as np
import pytest

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


def test_a_sliding_window_changes_only_the_positions_past_it_and_one_covering_the_context_is_full_attention():
    tokens = np.concatenate([PROMPT, PROMPT], axis=1)  # 16 tokens
    full = np.asarray(model.forward(params_for("gqa"), tokens))
    windowed = np.asarray(model.forward(params_for("gqa-window4"), tokens))
    np.testing.assert_allclose(windowed[:, :4], full[:, :4], atol=1e-5)  # the first 4 positions see everything
    assert np.abs(windowed[:, 4:] - full[:, 4:]).max() > 1e-2
    covering = model.init_params(model.tiny_config(n_kv_heads=2, sliding_window=16), seed=0)
    np.testing.assert_allclose(model.forward(covering, tokens), full, atol=1e-6)


def test_ragged_batch_equals_each_sequence_alone():
    params, lengths = params_for("gqa"), [T, 5]
    prompt = PROMPT.copy()
    prompt[1, 5:] = 0  # padding: must not matter
    tokens, logits = model.greedy_with_logits(params, prompt, N_NEW, lengths=lengths)
    for b, n in enumerate(lengths):
        alone = np.asarray(model.forward(params, np.concatenate([prompt[b, :n], tokens[b]])[None]))[0]
        np.testing.assert_array_equal(alone[n - 1: n - 1 + N_NEW].argmax(-1), tokens[b])
        np.testing.assert_allclose(logits[b], alone[n - 1: n - 1 + N_NEW], atol=1e-4)


def test_decode_step_compiles_once_for_every_position_and_writes_the_cache_in_place():
    params = params_for("gqa")
    _, cache = model.prefill(params, PROMPT, lengths=[T, 3], cache_len=T + N_NEW)
    assert cache.k.shape == (2, B, T + N_NEW, 2, 16)  # [L, B, S, K, H]
    token = np.zeros(B, np.int32)
    old = cache
    _, cache = model.decode_step(params, token, cache)
    assert old.k.is_deleted() and old.v.is_deleted()  # donated: the new cache reuses the buffers
    traced = model.TRACE_COUNTS["decode_step"]
    for _ in range(N_NEW - 1):
        _, cache = model.decode_step(params, token, cache)
    assert model.TRACE_COUNTS["decode_step"] == traced
    np.testing.assert_array_equal(cache.positions, [T + N_NEW, 3 + N_NEW])


def test_generation_and_parameters_are_deterministic_for_a_seed():
    params = params_for("gqa")
    greedy = model.generate(params, PROMPT, N_NEW)
    np.testing.assert_array_equal(greedy, model.greedy_with_logits(params, PROMPT, N_NEW)[0])
    sample = model.generate(params, PROMPT, N_NEW, temperature=1.0, seed=1)
    np.testing.assert_array_equal(sample, model.generate(params, PROMPT, N_NEW, temperature=1.0, seed=1))
    assert not np.array_equal(sample, model.generate(params, PROMPT, N_NEW, temperature=1.0, seed=2))
    assert sample.shape == (B, N_NEW) and 0 <= int(sample.min()) and int(sample.max()) < 256
    cfg = CONFIGS["gqa"]
    a, b, c = model.init_params(cfg, 3), model.init_params(cfg, 3), model.init_params(cfg, 4)
    np.testing.assert_array_equal(a.wq, b.wq)
    assert not np.array_equal(a.wq, c.wq)
    assert set(params.layer(1)) >= {"wq", "wk", "wv", "wo"}  # one layer's weights, by name


def _cache(cache_len=T + 1):
    return model.prefill(params_for("gqa"), PROMPT, cache_len=cache_len)[1]


def _with_token(token):
    prompt = PROMPT.copy()
    prompt[0, 3] = token
    return prompt


# Every refusal of scaling_lib.tiny.model: (the call, what its ValueError says). A decode step handed a cache that does
# not fit it is tests/tiny/test_input_checks.py's.
BAD_INPUTS = [
    pytest.param(lambda: model.tiny_config(sliding_window=0), "sliding_window", id="a window of 0"),
    pytest.param(lambda: model.tiny_config(sliding_window=-4), "sliding_window", id="a negative window"),
    pytest.param(lambda: model.tiny_config(n_kv_heads=3), "does not divide", id="KV heads that do not divide"),
    pytest.param(lambda: model.init_params(CONFIGS["gqa"].with_(head_dim=15)), "even", id="an odd head_dim: no RoPE"),
    pytest.param(lambda: model.init_params(CONFIGS["gqa"].with_(n_experts=2)), "dense", id="experts: dense only"),
    pytest.param(lambda: model.init_params({"d_model": 64}), "Transformer", id="a config that is no Transformer"),
    pytest.param(lambda: model.init_params(CONFIGS["gqa"], seed=-1), "seed must be a non-negative integer",
                 id="init: a negative seed"),
    pytest.param(lambda: model.init_params(CONFIGS["gqa"], seed=1.5), "seed", id="init: a fractional seed"),
    pytest.param(lambda: model.init_params(CONFIGS["gqa"], seed=True), "seed", id="init: a bool seed"),
    pytest.param(lambda: model.init_params(CONFIGS["gqa"], dtype="int32"), "floating-point dtype", id="int32 params"),
    pytest.param(lambda: model.init_params(CONFIGS["gqa"], dtype="nonsense"), "floating-point dtype",
                 id="no dtype at all"),
    pytest.param(lambda: model.prefill(params_for("gqa"), PROMPT, cache_len=T - 1), "cache_len",
                 id="a cache shorter than the prompt"),
    pytest.param(lambda: model.prefill(params_for("gqa"), PROMPT, lengths=[0, T]), "lengths", id="an empty sequence"),
    pytest.param(lambda: model.prefill(params_for("gqa"), PROMPT, lengths=[T + 1, T]), "lengths",
                 id="a length past the prompt"),
    pytest.param(lambda: model.prefill(params_for("gqa"), PROMPT, lengths=[T]), "lengths", id="one length for two"),
    pytest.param(lambda: model.forward(params_for("gqa"), _with_token(-1)), "vocab_size=256", id="a negative token"),
    pytest.param(lambda: model.forward(params_for("gqa"), _with_token(256)), "vocab_size=256",
                 id="a token past the vocabulary"),
    *(pytest.param(lambda token=token: model.generate(params_for("gqa"), np.asarray(token, np.uint64)[None], 1),
                   r"token ids must lie in \[0, 256\)", id=f"a token id that int32 wraps to 0: {name}")
      for name, token in (("2**40", np.array([2**40, 1])), ("2**32 as uint64", np.array([2**32, 1], np.uint64)),
                          ("a list", [1, 2**40]), ("2**63", np.array([1, 2**63], np.uint64)))),
    pytest.param(lambda: model.generate(params_for("gqa"), PROMPT, 2, seed=-1), "seed", id="generate: negative seed"),
    pytest.param(lambda: model.generate(params_for("gqa"), PROMPT, 2, seed="0"), "seed", id="generate: a string seed"),
    pytest.param(lambda: model.generate(params_for("gqa"), PROMPT, 2, temperature=float("nan")), "temperature",
                 id="generate: nan temperature"),
    pytest.param(lambda: model.generate(params_for("gqa"), PROMPT, 2, temperature=float("inf")), "temperature",
                 id="generate: infinite temperature"),
    pytest.param(lambda: model.generate(params_for("gqa"), PROMPT, 2, temperature="1"), "temperature",
                 id="generate: a string temperature"),
    pytest.param(lambda: model.generate(params_for("gqa"), PROMPT, n_tokens=True), "n_tokens",
                 id="generate: a bool count"),
    pytest.param(lambda: model.forward(None, PROMPT), "params must be tiny.model.Params", id="forward: no params"),
    pytest.param(lambda: model.prefill({}, PROMPT), "params must be tiny.model.Params", id="prefill: a dict"),
    pytest.param(lambda: model.generate("params", PROMPT, 2), "params must be tiny.model.Params",
                 id="generate: a string"),
    pytest.param(lambda: model.KVCache(_cache().k, _cache().v.astype("bfloat16"), _cache().positions),
                 "KVCache k is float32 but v is bfloat16", id="a cache whose k and v dtypes differ"),
    pytest.param(lambda: model.KVCache(_cache().k, _cache().v[:, :, :T], _cache().positions),
                 r"KVCache k has shape \[2, 2, 9, 2, 16\] but v has \[2, 2, 8, 2, 16\]",
                 id="a cache whose k and v shapes differ"),
    pytest.param(lambda: model.KVCache(_cache().k, _cache().v, _cache().positions.astype("float32")),
                 "positions must be integers", id="fractional positions"),
    pytest.param(lambda: params_for("gqa").layer(2), "does not exist; the model has n_layers=2",
                 id="a layer past the last, not clamped to it"),
    pytest.param(lambda: params_for("gqa").layer(-1), "non-negative", id="a negative layer"),
    pytest.param(lambda: params_for("gqa").layer(True), "got True", id="a bool layer"),
]


@pytest.mark.parametrize("call, says", BAD_INPUTS)
def test_bad_inputs_are_refused_with_a_value_error_naming_them(call, says):
    with pytest.raises(ValueError, match=says):
        call()
