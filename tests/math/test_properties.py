"""Properties of the core math that would catch a wrong formula: limits, monotonicity, crossovers."""

import math

import pytest

from scaling_lib.hardware import chip_names, get_chip
from scaling_lib.inference import decode_step_time, decode_throughput, prefill_time
from scaling_lib.memory import kv_bytes_per_token, kv_cache_bytes, max_batch_size, memory_footprint
from scaling_lib.models import active_param_count, get_model, model_names, param_breakdown, param_count
from scaling_lib.roofline import (attainable_flops, attention_intensity, critical_batch_size, explain_matmul,
                                  fit_batch_roofline, matmul_intensity, matmul_time, ridge_point, roofline_time)


@pytest.mark.parametrize("name", chip_names())
def test_roofline_crossover_sits_at_the_ridge_point(name):
    chip = get_chip(name)
    ridge = ridge_point(chip)
    at_ridge = roofline_time(ridge * 1e9, 1e9, chip)
    assert at_ridge.compute_s == pytest.approx(at_ridge.memory_s, rel=1e-12)
    assert roofline_time(ridge * 0.9e9, 1e9, chip).bound == "memory"
    assert roofline_time(ridge * 1.1e9, 1e9, chip).bound == "compute"
    assert attainable_flops(ridge, chip) == pytest.approx(chip.peak_flops("bf16"), rel=1e-12)


@pytest.mark.parametrize("name", chip_names())
def test_attainable_flops_rises_then_flattens_at_peak(name):
    chip = get_chip(name)
    intensities = [2.0**k for k in range(-2, 14)]
    rates = [attainable_flops(i, chip) for i in intensities]
    assert all(b >= a for a, b in zip(rates, rates[1:]))
    assert max(rates) == chip.peak_flops("bf16")
    assert rates[0] == pytest.approx(intensities[0] * chip.hbm_bandwidth)


def test_matmul_intensity_tends_to_batch_when_weights_dominate():
    for batch in (1, 8, 64):
        assert matmul_intensity(batch, 65536, 65536) == pytest.approx(batch, rel=0.01)
    # ...and to twice that when each weight is one byte.
    assert matmul_intensity(8, 65536, 65536, weight_dtype="int8") == pytest.approx(16, rel=0.01)
    # A weight-dominated matmul turns compute-bound near B_crit.
    bcrit = critical_batch_size("tpu-v5e")
    assert matmul_time(int(bcrit * 0.8), 32768, 32768, "tpu-v5e").bound == "memory"
    assert matmul_time(int(bcrit * 1.25), 32768, 32768, "tpu-v5e").bound == "compute"


def test_attention_intensity_limits():
    assert attention_intensity(1, 10**9) == pytest.approx(1.0, rel=1e-6)
    assert attention_intensity(10**9, 1) == pytest.approx(1.0, rel=1e-6)
    assert attention_intensity(1, 10**9, group_size=8) == pytest.approx(8.0, rel=1e-6)
    values = [attention_intensity(t, t) for t in (16, 64, 256)]
    assert values == sorted(values)


@pytest.mark.parametrize("name", [n for n in model_names() if get_model(n).n_experts == 1])
def test_param_count_parts_and_active_equals_total_for_dense(name):
    model = get_model(name)
    parts = param_breakdown(model)
    assert parts.total == param_count(model) == active_param_count(model)
    assert parts.embeddings == model.vocab_size * model.d_model * (1 if model.tied_embeddings else 2)


def test_moe_total_vs_active_params():
    dense = get_model("llama3-8b")
    moe = dense.with_(n_experts=16, n_active_experts=2)
    assert param_count(moe) > active_param_count(moe) > active_param_count(dense)
    ffn_dense = param_breakdown(dense).feed_forward
    assert param_breakdown(moe).feed_forward == 16 * ffn_dense
    assert param_breakdown(moe, active_only=True).feed_forward == 2 * ffn_dense


def test_kv_cache_scales_linearly_and_window_caps_it():
    model = get_model("llama3-8b")
    assert kv_cache_bytes(model, 2000, batch=3) == pytest.approx(3 * 2000 * kv_bytes_per_token(model))
    assert kv_bytes_per_token(model, "int8") == kv_bytes_per_token(model, "bf16") / 2
    local = model.with_(sliding_window=1024)
    assert kv_cache_bytes(local, 8192) == kv_cache_bytes(model, 1024)
    assert kv_cache_bytes(local, 512) == kv_cache_bytes(model, 512)


@pytest.mark.parametrize("model, chip, n_chips, context", [
    ("llama2-13b", "tpu-v5e", 8, 8192), ("llama3-70b", "tpu-7x", 8, 32768), ("llama3-8b", "h100", 1, 4096)])
def test_max_batch_size_is_the_last_batch_that_fits(model, chip, n_chips, context):
    batch = max_batch_size(model, chip, n_chips, context)
    assert batch >= 1
    assert memory_footprint(model, chip, n_chips, batch, context).fits
    assert not memory_footprint(model, chip, n_chips, batch + 1, context).fits


def test_max_batch_size_is_zero_when_weights_do_not_fit():
    assert max_batch_size("llama3-70b", "tpu-v5e", 1, 4096) == 0
    assert max_batch_size("llama3-70b", "tpu-v5e", 1, 4096, weight_dtype="int4") == 0
    assert max_batch_size("llama3-70b", "tpu-v5e", 16, 4096) > 0


def test_step_time_and_throughput_monotone_in_batch_and_context():
    model = get_model("llama3-70b")
    # a property of the formula, past the 171 sequences that fit too
    times = [decode_step_time(model, "tpu-v5e", 16, b, 4096, check_capacity=False).total_s
             for b in (1, 4, 16, 64, 256, 1024)]
    assert times == sorted(times)
    rates = [decode_throughput(model, "tpu-v5e", 16, b, 4096, check_capacity=False) for b in (1, 4, 16, 64, 256, 1024)]
    assert rates == sorted(rates)
    by_context = [decode_step_time(model, "tpu-v5e", 16, 32, s, check_capacity=False).total_s for s in (128, 1024, 8192, 32768)]
    assert by_context == sorted(by_context)
    # Halving the bytes of weights and KV at most halves the step (FLOP term unchanged).
    bf16 = decode_step_time(model, "tpu-7x", 8, 64, 32768, check_capacity=False)
    fp8 = decode_step_time(model, "tpu-7x", 8, 64, 32768, "fp8", "fp8", "fp8")
    assert fp8.total_s == pytest.approx(bf16.total_s / 2, rel=0.01)


def test_prefill_time_scales_with_tokens_and_inversely_with_chips_and_mfu():
    base = prefill_time("llama3-70b", "tpu-v5e", 16, 8192, mfu=0.4)
    assert prefill_time("llama3-70b", "tpu-v5e", 16, 16384, mfu=0.4) == pytest.approx(2 * base)
    assert prefill_time("llama3-70b", "tpu-v5e", 32, 8192, mfu=0.4) == pytest.approx(base / 2)
    assert prefill_time("llama3-70b", "tpu-v5e", 16, 8192, mfu=0.8) == pytest.approx(base / 2)
    assert math.isfinite(base) and base > 0


def test_fit_batch_roofline_recovers_a_synthetic_knee_and_rejects_bad_input():
    # Synthetic machine: 2 ms to load the weights, 10 us per row -> knee at 200 rows.
    batches = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
    seconds = [max(2e-3, b * 1e-5) for b in batches]
    assert fit_batch_roofline(batches, seconds).knee_batch == pytest.approx(200, rel=1e-9)
    with pytest.raises(ValueError, match="increasing"):
        fit_batch_roofline([4, 2, 1], [1.0, 1.0, 1.0], n_floor=1)
    with pytest.raises(ValueError, match="at least two"):
        fit_batch_roofline([1], [1.0])


def test_explain_matmul_agrees_with_the_roofline_pieces():
    report = explain_matmul("tpu-v5e", 64, 8192, 8192)  # its speed (the explorer's slider): bench/bench_report.py
    assert report.time == matmul_time(64, 8192, 8192, "tpu-v5e")
    assert report.critical_batch == critical_batch_size("tpu-v5e")
    assert report.time.bound == "memory" and report.fraction_of_peak < 0.3
    big = explain_matmul("tpu-v5e", 4096, 8192, 8192)
    assert big.time.bound == "compute" and big.fraction_of_peak == pytest.approx(1.0)
    int8 = explain_matmul("tpu-v5e", 64, 8192, 8192, "int8", "int8")
    assert int8.intensity == pytest.approx(2 * report.intensity, rel=0.01)  # every byte halved
    assert "memory-bound" in report.describe()
