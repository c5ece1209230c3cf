"""Qwix on the tiny model (scaling_lib.tiny.qwix_quant): what it intercepts, what it stores, and how far its outputs
may lie from the float model.

Oracles: `tiny.model.forward` (float and with the hand-written `tiny.quantize` path), NumPy absmax quantization of
the weights, and rigorous elementwise error bounds of symmetric absmax rounding."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from scaling_lib.book.portable import FLOAT32_ROUNDING, relative_difference
from scaling_lib.tiny import model as tiny
from scaling_lib.tiny import qwix_quant as qq
from scaling_lib.tiny.quantize import linear_weight_bytes, quantize_params

CONFIG = tiny.tiny_config()
PARAMS = tiny.init_params(CONFIG, seed=0)
TOKENS = np.random.default_rng(0).integers(0, CONFIG.vocab_size, (2, 12)).astype(np.int32)
LINEAR = ("wq", "wk", "wv", "wo", "w_gate", "w_up", "w_down")


@pytest.fixture(scope="module")
def weight_only():
    return qq.quantize(PARAMS, qq.rules("weight-only int8"), TOKENS)


def test_the_flax_model_is_the_tiny_model():
    # Within float32 rounding with 4x to spare: chapter 13 prints "below FLOAT32_ROUNDING of the largest logit".
    assert relative_difference(qq.logits(qq.TinyFlax(PARAMS), TOKENS), tiny.forward(PARAMS, TOKENS)) <= (
        FLOAT32_ROUNDING / 4)


def test_qwix_intercepts_every_einsum_and_quantizes_only_the_ones_the_rules_match_in_their_format(weight_only):
    seen = {(op.module_path, op.op): op.rule for op in weight_only.intercepted}
    for i in range(CONFIG.n_layers):
        assert all(seen[(f"layers/{i}/{name}", "einsum0")] == 0 for name in LINEAR)
        assert seen[(f"layers/{i}", "einsum0")] is None and seen[(f"layers/{i}", "einsum1")] is None  # q.k, p.v
    assert seen[("unembed", "einsum0")] is None
    assert len(seen) == CONFIG.n_layers * (len(LINEAR) + 2) + 1
    assert set(weight_only.quantized_weights) == {f"layers/{i}/{n}" for i in range(CONFIG.n_layers) for n in LINEAR}
    assert {dtype for dtype, _ in weight_only.quantized_weights.values()} == {"int8"}
    assert weight_only.unused_rules == ()
    mlp = qq.quantize(PARAMS, qq.rules("weight-only int8", r"layers/\d+/w_(gate|up|down)"), TOKENS)
    assert sorted(mlp.quantized_weights) == sorted(f"layers/{i}/w_{n}" for i in range(2)
                                                   for n in ("down", "gate", "up"))
    nothing = qq.quantize(PARAMS, qq.rules("weight-only int8", r"decoder/.*"), TOKENS)
    assert nothing.quantized_weights == {} and len(nothing.unused_rules) == 1  # an unmatched rule is reported
    for scheme, stored in (("int8 x int8", "int8"), ("fp8 x fp8", "float8_e4m3fn")):  # the dynamic-range schemes
        result = qq.quantize(PARAMS, qq.rules(scheme), TOKENS)
        assert {dtype for dtype, _ in result.quantized_weights.values()} == {stored}
        assert set(result.quantized_weights) == set(weight_only.quantized_weights)
        out = np.asarray(qq.logits(result.model, TOKENS))
        assert np.isfinite(out).all() and out.shape == np.asarray(tiny.forward(PARAMS, TOKENS)).shape


def test_stored_int8_values_are_absmax_per_output_channel_with_qwix_bound_127_5_in_the_hand_written_bytes(
        weight_only):
    kernel = weight_only.model.layers[0].w_gate.kernel
    qvalue, scale = sorted(jax.tree.leaves(kernel), key=lambda leaf: leaf.dtype == jnp.float32)
    w = np.asarray(PARAMS.w_gate[0], np.float64)
    expected = np.abs(w).max(axis=0, keepdims=True) / 127.5  # NumPy: one scale per output channel
    np.testing.assert_allclose(np.asarray(scale), expected, rtol=1e-6)
    assert np.all(np.abs(w - np.asarray(qvalue, np.float64) * expected) <= expected / 2 * (1 + 1e-5))
    assert weight_only.weight_bytes == linear_weight_bytes(quantize_params(PARAMS)) < linear_weight_bytes(PARAMS) / 3


def test_qwix_weight_only_is_the_hand_written_matmul_on_qwix_values(weight_only):
    ours = tiny.forward(qq.as_hand_written(weight_only, PARAMS), TOKENS)
    theirs = qq.logits(weight_only.model, TOKENS)
    scale = float(np.max(np.abs(np.asarray(tiny.forward(PARAMS, TOKENS)))))
    assert float(np.max(np.abs(np.asarray(ours) - np.asarray(theirs)))) <= FLOAT32_ROUNDING / 4 * scale  # ch. 13


def test_one_matmul_through_the_functional_api_stays_within_the_rounding_bound_and_int8_errs_less_than_fp8():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((16, 64)).astype(np.float32) * rng.uniform(0.1, 3.0, (16, 1)).astype(np.float32)
    w = rng.standard_normal((64, 96)).astype(np.float32) / 8
    exact = x.astype(np.float64) @ w.astype(np.float64)
    for scheme in qq.SCHEMES:
        y = np.asarray(qq.matmul(x, w, scheme), np.float64)
        bound = qq.matmul_error_bound(x, w, scheme)
        assert np.all(np.abs(y - exact) <= bound), scheme
        assert np.max(np.abs(y - exact)) > 0.05 * np.max(bound), scheme  # not vacuous: errors reach a fair part
    rng = np.random.default_rng(2)
    x, w = rng.standard_normal((32, 64)).astype(np.float32), rng.standard_normal((64, 64)).astype(np.float32)
    err = {s: float(np.max(np.abs(np.asarray(qq.matmul(x, w, s)) - x @ w))) for s in qq.SCHEMES}
    assert err["weight-only int8"] < err["int8 x int8"] < err["fp8 x fp8"]


@pytest.mark.parametrize("call, says", [
    pytest.param(lambda: qq.rules("int4"), "unknown scheme", id="a scheme Qwix is not set up for"),
    pytest.param(lambda: qq.rules("weight-only int8", "layers/("), "not a valid regex", id="a broken regex"),
    pytest.param(lambda: qq.quantize(PARAMS, [], TOKENS), "QuantizationRule", id="no rules"),
    pytest.param(lambda: qq.TinyFlax(quantize_params(PARAMS)), "float", id="a model already quantized"),
    pytest.param(lambda: qq.as_hand_written(qq.quantize(PARAMS, qq.rules("fp8 x fp8"), TOKENS), PARAMS), "int8",
                 id="fp8 weights on the int8 hand-written path"),
])
def test_bad_inputs_are_refused(call, says):
    with pytest.raises(ValueError, match=says):
        call()


def test_interception_stops_at_a_pallas_kernel_and_qwix_pallas_quantizes_inside_one():
    from flax import nnx

    rng = np.random.default_rng(3)

    class TwoLayers(nnx.Module):
        def __init__(self):
            self.plain = qq.Linear(jnp.asarray(rng.standard_normal((128, 128)).astype(np.float32) / 11), "bd,df->bf")
            self.fused = qq.PallasLinear(jnp.asarray(rng.standard_normal((128, 256)).astype(np.float32) / 11))

        def __call__(self, x):
            return self.fused(self.plain(x))

    x = jnp.asarray(rng.standard_normal((8, 128)).astype(np.float32))
    result = qq.quantize_module(TwoLayers(), qq.rules("weight-only int8", ".*"), x)
    assert [op.module_path for op in result.intercepted] == ["plain"]  # nothing inside the kernel was seen
    assert list(result.quantized_weights) == ["plain"]  # the kernel's weight stays float
    w = rng.standard_normal((128, 256)).astype(np.float32)
    inside = np.asarray(qq.pallas_quantized_matmul(x, w))
    assert relative_difference(inside, qq.matmul(x, w, "weight-only int8")) <= FLOAT32_ROUNDING / 4  # as ch. 13
    assert np.all(np.abs(inside - np.asarray(x) @ w) <= qq.matmul_error_bound(x, w, "weight-only int8"))
