"""scaling_lib.quantization: symmetric absmax rounding (absmax_scale, rounding_bound, dot_error_bound), checked
against NumPy/ml_dtypes rounding of real values (the bounds hold and are reached), and the quantization table's
arguments (the chapter 10 claims are in test_claims_serving.py)."""

import ml_dtypes
import numpy as np
import pytest

from scaling_lib.quantization import absmax_scale, dot_error_bound, quantization_table, rounding_bound, step_ratio_grid

from tests import for_each


def test_int8_uses_a_whole_top_bucket_and_errs_by_at_most_half_a_step():
    v = np.linspace(-2.54, 2.54, 100_001)
    step = absmax_scale(2.54, "int8")
    assert step == pytest.approx(2.54 / 127.5)
    q = np.clip(np.round(v / step), -128, 127)
    err = np.abs(v - q * step)
    assert err.max() <= rounding_bound(2.54, "int8") * (1 + 1e-9)
    assert err.max() > 0.99 * rounding_bound(2.54, "int8")  # reached, not loose
    assert absmax_scale(1.0, "int4") == pytest.approx(1 / 7.5)


def test_fp8_e4m3_rounding_errs_by_at_most_one_sixteenth_of_the_largest_value():
    amax = 3.0
    v = np.linspace(-amax, amax, 200_001)
    scale = absmax_scale(amax, "fp8")
    q = (v / scale).astype(ml_dtypes.float8_e4m3fn).astype(np.float64) * scale
    assert np.abs(v - q).max() <= rounding_bound(amax, "fp8")
    normal = np.abs(v / scale) >= 2.0**-6
    assert np.max(np.abs(v - q)[normal] / np.abs(v[normal])) <= 2.0**-4 * (1 + 1e-9)


def test_dot_error_bound_holds_for_adversarial_weights_and_rounds_the_activations_in_their_own_format():
    k, amax = 4096, 0.05
    step = absmax_scale(amax)
    w = np.full(k, (100.5 - 1e-3) * step)  # every weight sits just under a rounding midpoint
    x = np.ones(k)
    q = np.clip(np.round(w / step), -128, 127) * step
    worst = abs(x @ w - x @ q)
    assert worst <= dot_error_bound(k, 1.0, amax) and worst > 0.9 * dot_error_bound(k, 1.0, amax)
    assert dot_error_bound(k, 1.0, amax, "int8", "int8") > dot_error_bound(k, 1.0, amax)
    # int8 weights of absmax 1 (a step of 1/127.5, so dw = 1/127.5/2) and int4 activations of absmax 1 (a step of
    # 1/7.5, dx = 1/7.5/2), 10 terms: 10 (dw + dx + dx dw).
    dw, dx = 1 / 127.5 / 2, 1 / 7.5 / 2
    assert dot_error_bound(10, 1.0, 1.0, "int8", "int4") == pytest.approx(10 * (dw + dx + dx * dw), rel=1e-12)


# --- Bad input: a ValueError naming the argument and the fix ---------------------------------------------------------
@for_each([
    (lambda: absmax_scale(1.0, "bf16"), "int8"),
    (lambda: quantization_table("llama3-8b", "h100", 1, 1024, 8, schemes=[]), "schemes must list at least 1 entry"),
    (lambda: quantization_table("llama3-8b", "h100", 1, 1024, 8, schemes=[("int3", "bf16", "bf16")]), "unknown dtype"),
    (lambda: step_ratio_grid("llama3-8b", "h100", 1, (), (1024,)), "batches must list at least 1 entry"),
    (lambda: step_ratio_grid("llama3-8b", "h100", 1, (8,), (1024,), scheme=("fp8", "fp8")),
     r"scheme is a \(weight_dtype, kv_dtype, compute_dtype\) triple"),
    (lambda: step_ratio_grid("llama3-8b", "h100", 1, (0,), (1024,)), "batches entry must be a positive integer"),
], ids=str)
def test_bad_input_gets_a_value_error_naming_the_argument_and_the_fix(call, words):
    with pytest.raises(ValueError, match=words):
        call()
