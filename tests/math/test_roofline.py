"""scaling_lib.roofline: the FLOPs and bytes of a matmul and of attention, the roofline time, the critical batch,
explain_matmul, and the fits to a measured roofline.

Expected values are worked by hand from the hardware table and the shapes, or come from another public function than
the one under test (the claims of chapter 2 live in test_claims_roofline.py). hardware.py: TPU v5e 197 TFLOP/s bf16,
394 TFLOP/s int8, 820 GB/s; H100 989 TFLOP/s bf16, 1,979 TFLOP/s fp8, 3.35 TB/s."""

import re

import pytest

from scaling_lib.hardware import chip_names, get_chip
from scaling_lib.roofline import (arithmetic_intensity, attainable_flops, attention_bytes, attention_flops,
                                  attention_intensity, critical_batch_from_rates, critical_batch_size, explain_matmul,
                                  fit_batch_roofline, matmul_bytes, matmul_flops, matmul_intensity, matmul_time,
                                  moe_critical_batch_size, ridge_point, roofline_time, slowdown_knee)

from tests import for_each


# --- Closed forms, by hand -------------------------------------------------------------------------------------------
@for_each([
    # a matmul X [3, 5] x W [5, 7]: 2 x 3 x 5 x 7 = 210 FLOPs; X, W and the output each in its own format
    (lambda: matmul_flops(3, 5, 7), 210),
    (lambda: matmul_bytes(3, 5, 7), 2 * 3 * 5 + 2 * 5 * 7 + 2 * 3 * 7),  # bf16 throughout
    (lambda: matmul_bytes(3, 5, 7, activation_dtype="fp32", weight_dtype="int8"), 4 * 15 + 1 * 35 + 4 * 21),
    (lambda: matmul_bytes(3, 5, 7, weight_dtype="int4"), 2 * 15 + 0.5 * 35 + 2 * 21),  # activations bf16 by default
    (lambda: matmul_intensity(3, 5, 7), 210 / 142),
    (lambda: matmul_intensity(3, 5, 7, "fp32", "int8"), 210 / (4 * 15 + 35 + 4 * 21)),
    # attention: 4 B T S N H FLOPs (batch 1 by default); Q and O of B T N H, K and V of B S K H elements
    (lambda: attention_flops(3, 5, n_heads=2, head_dim=4, batch=7), 4 * 7 * 3 * 5 * 2 * 4),
    (lambda: attention_flops(3, 5, n_heads=2, head_dim=4), 4 * 3 * 5 * 2 * 4),
    # Q and O: 7 x 3 x 4 x 8 = 672 elements each; K and V: 7 x 5 x 2 x 8 = 560 each; fp32: 4 B
    (lambda: attention_bytes(3, 5, n_heads=4, n_kv_heads=2, head_dim=8, batch=7, dtype="fp32"),
     4 * (2 * 672 + 2 * 560)),
    (lambda: attention_bytes(3, 5, n_heads=4, n_kv_heads=2, head_dim=8), 2 * (2 * 3 * 4 * 8 + 2 * 5 * 2 * 8)),
    # G S T / (G T + S): T = 4, S = 12, G = 2: 96 / 20; prefill (S = T, G = 1): T / 2; decode (T = 1): G S / (G + S)
    (lambda: attention_intensity(4, 12, 2), 4.8), (lambda: attention_intensity(8, 8), 4.0),
    (lambda: attention_intensity(1, 8190, 8), 8 * 8190 / 8198),
    # intensity and the roofline: I x W_hbm under the ridge, the compute format's peak above it
    (lambda: arithmetic_intensity(6.0, 3.0), 2.0), (lambda: arithmetic_intensity(0, 3.0), 0.0),
    (lambda: attainable_flops(0, "h100"), 0.0), (lambda: attainable_flops(10.0, "h100"), 10 * 3.35e12),
    (lambda: attainable_flops(1e6, "h100", "fp8"), 1979e12), (lambda: attainable_flops(1e6, "h100"), 989e12),
    (lambda: ridge_point("tpu-v5e"), 197e12 / 820e9),
    # a CPU at 200 GFLOP/s and 10 GB/s with float32 weights (4 B): 200 / 10 x 4 / 2 = 40 tokens; bf16 by default 20
    (lambda: critical_batch_from_rates(200e9, 10e9, "fp32"), 40.0),
    (lambda: critical_batch_from_rates(200e9, 10e9), 20.0),
], ids=str)
def test_closed_forms_by_hand(call, expected):
    assert call() == pytest.approx(expected, rel=1e-12)


# --- The roofline time: max(FLOPs / C, bytes / W) over the chips ------------------------------------------------------
@for_each(chip_names(), ids=str)
def test_the_roofline_crosses_over_at_the_ridge_point_and_flattens_at_peak(name):
    chip = get_chip(name)
    ridge = ridge_point(chip)
    at_ridge = roofline_time(ridge * 1e9, 1e9, chip)
    assert at_ridge.compute_s == pytest.approx(at_ridge.memory_s, rel=1e-12)
    assert roofline_time(ridge * 0.9e9, 1e9, chip).bound == "memory"
    assert roofline_time(ridge * 1.1e9, 1e9, chip).bound == "compute"
    assert attainable_flops(ridge, chip) == pytest.approx(chip.peak_flops("bf16"), rel=1e-12)
    intensities = [2.0**k for k in range(-2, 14)]
    rates = [attainable_flops(i, chip) for i in intensities]
    assert all(b >= a for a, b in zip(rates, rates[1:]))
    assert max(rates) == chip.peak_flops("bf16")
    assert rates[0] == pytest.approx(intensities[0] * chip.hbm_bandwidth)


def test_intensities_tend_to_their_limits_and_a_weight_dominated_matmul_turns_compute_bound_at_b_crit():
    for batch in (1, 8, 64):  # weights dominate: a matmul's intensity tends to its batch
        assert matmul_intensity(batch, 65536, 65536) == pytest.approx(batch, rel=0.01)
    # ...and to twice that when each weight is one byte.
    assert matmul_intensity(8, 65536, 65536, weight_dtype="int8") == pytest.approx(16, rel=0.01)
    bcrit = critical_batch_size("tpu-v5e")
    assert matmul_time(int(bcrit * 0.8), 32768, 32768, "tpu-v5e").bound == "memory"
    assert matmul_time(int(bcrit * 1.25), 32768, 32768, "tpu-v5e").bound == "compute"
    # attention: 1 for one query or one key, G for decode, rising with a square prefill
    assert attention_intensity(1, 10**9) == pytest.approx(1.0, rel=1e-6)
    assert attention_intensity(10**9, 1) == pytest.approx(1.0, rel=1e-6)
    assert attention_intensity(1, 10**9, group_size=8) == pytest.approx(8.0, rel=1e-6)
    values = [attention_intensity(t, t) for t in (16, 64, 256)]
    assert values == sorted(values)


def test_roofline_time_splits_flops_and_bytes_over_the_chips_at_the_compute_formats_rate():
    # 4 s of int8 math and 3 s of HBM traffic on one chip: 2 s and 1.5 s on two
    t = roofline_time(4 * 394e12, 3 * 820e9, "tpu-v5e", 2, "int8")
    assert t.compute_s == pytest.approx(2.0, rel=1e-12) and t.memory_s == pytest.approx(1.5, rel=1e-12)
    assert t.total_s == t.compute_s and t.bound == "compute"
    t = roofline_time(197e12, 2 * 820e9, "tpu-v5e")  # bf16 by default, one chip: 1 s of math, 2 s of traffic
    assert (t.compute_s, t.memory_s) == pytest.approx((1.0, 2.0), rel=1e-12)
    assert t.total_s == t.memory_s and t.bound == "memory"
    tie = roofline_time(197e12, 820e9, "tpu-v5e")  # 1 s each: a tie counts as compute-bound
    assert tie.compute_s == tie.memory_s and tie.bound == "compute"
    assert roofline_time(0, 1e9, "tpu-v5e").compute_s == 0.0 and roofline_time(1e9, 0, "tpu-v5e").memory_s == 0.0


def test_matmul_time_is_the_roofline_of_its_flops_and_bytes_over_the_chips():
    # 2 x 3 x 5 x 7 = 210 FLOPs at int8's 394 TFLOP/s; 179 bytes (fp32 X and output, int8 W) at 820 GB/s; two chips
    t = matmul_time(3, 5, 7, "tpu-v5e", n_chips=2, activation_dtype="fp32", weight_dtype="int8",
                    compute_dtype="int8")
    assert t.compute_s == pytest.approx(210 / (2 * 394e12), rel=1e-12)
    assert t.memory_s == pytest.approx(179 / (2 * 820e9), rel=1e-12)
    t = matmul_time(3, 5, 7, "tpu-v5e")  # one chip, bf16 throughout: 2 x (15 + 35 + 21) bytes
    assert (t.compute_s, t.memory_s) == pytest.approx((210 / 197e12, 142 / 820e9), rel=1e-12)


def test_moe_critical_batch_scales_the_dense_one_by_experts_over_active_experts():
    # the Scaling Book's example: 16 experts, top-2 on a v5e: 8 x 240 ~ 1,920 tokens
    assert moe_critical_batch_size("tpu-v5e", 16, 2) == pytest.approx(1920, rel=0.002)
    assert moe_critical_batch_size("tpu-v5e", 16, 2) == pytest.approx(8 * 197e12 / 820e9, rel=1e-12)
    # int8 weights halve B_crit, int8 math doubles it back
    assert moe_critical_batch_size("tpu-v5e", 16, 2, "int8") == pytest.approx(4 * 197e12 / 820e9, rel=1e-12)
    assert moe_critical_batch_size("tpu-v5e", 16, 2, "int8", "int8") == pytest.approx(4 * 394e12 / 820e9, rel=1e-12)
    assert moe_critical_batch_size("tpu-v5e", 4, 4) == critical_batch_size("tpu-v5e")  # k = E: every expert busy


# --- explain_matmul: one matmul's roofline, explained -----------------------------------------------------------------
def test_explain_matmul_reports_every_field_of_an_fp8_matmul_on_an_h100_by_hand():
    # fp8 math keeps activations in fp8 (1 B); int8 weights (1 B): 2 x 4 x 16 x 32 = 4,096 FLOPs over
    # 64 + 512 + 128 = 704 bytes; the ridge at fp8 is 1,979e12 / 3.35e12; B_crit = ridge x 1 B / 2
    r = explain_matmul("h100", 4, 16, 32, weight_dtype="int8", compute_dtype="fp8")
    assert (r.chip, r.batch, r.d_in, r.d_out, r.weight_dtype, r.compute_dtype) == ("h100", 4, 16, 32, "int8", "fp8")
    assert r.intensity == pytest.approx(4096 / 704, rel=1e-12)
    assert r.ridge == pytest.approx(1979e12 / 3.35e12, rel=1e-12)
    assert r.critical_batch == pytest.approx(1979e12 / 3.35e12 / 2, rel=1e-12)
    assert (r.time.compute_s, r.time.memory_s) == pytest.approx((4096 / 1979e12, 704 / 3.35e12), rel=1e-12)
    assert r.attainable_flops == pytest.approx(4096 / 704 * 3.35e12, rel=1e-12)  # far below the ridge
    assert r.fraction_of_peak == pytest.approx(4096 / 704 * 3.35e12 / 1979e12, rel=1e-12)
    fast = explain_matmul("h100", 8192, compute_dtype="fp8")  # 8,192 tokens: far past fp8's ridge of ~591
    assert fast.time.bound == "compute" and fast.attainable_flops == 1979e12
    assert fast.fraction_of_peak == pytest.approx(1.0)


def test_explain_matmul_defaults_to_an_8192_square_bf16_matmul_and_prices_every_dtype_it_is_given():
    # B = 4,096 tokens on a v5e: 2 B D F / (2 B D + 2 D F + 2 B F) = 2 x 4096 x 8192 x 8192 / (2 x 8192 x 16384)
    r = explain_matmul("tpu-v5e", 4096)
    assert (r.d_in, r.d_out, r.weight_dtype, r.compute_dtype) == (8192, 8192, "bf16", "bf16")
    assert r.intensity == pytest.approx(2 * 4096 * 8192 * 8192 / (2 * 8192 * 16384), rel=1e-12)
    assert r.ridge == pytest.approx(197e12 / 820e9, rel=1e-12) and r.critical_batch == pytest.approx(r.ridge)
    assert r.time.bound == "compute" and r.attainable_flops == 197e12 and r.fraction_of_peak == pytest.approx(1.0)
    # bf16 math on an int8 checkpoint: activations stay bf16 (2 B), weights 1 B
    w8 = explain_matmul("tpu-v5e", 4, 16, 32, weight_dtype="int8")
    assert w8.intensity == pytest.approx(4096 / (2 * 64 + 512 + 2 * 128), rel=1e-12)
    int8 = explain_matmul("tpu-v5e", 64, 8192, 8192, "int8", "int8")
    assert int8.ridge == ridge_point("tpu-v5e", "int8")
    assert int8.time == matmul_time(64, 8192, 8192, "tpu-v5e", 1, "int8", "int8", "int8")
    assert int8.attainable_flops == attainable_flops(int8.intensity, "tpu-v5e", "int8")
    weights = explain_matmul("tpu-v5e", 64, weight_dtype="int8")
    assert weights.weight_dtype == "int8" and weights.critical_batch == critical_batch_size("tpu-v5e", "int8", "bf16")
    small = explain_matmul("tpu-v5e", 64, 8192, 8192)
    assert small.time == matmul_time(64, 8192, 8192, "tpu-v5e")
    assert small.critical_batch == critical_batch_size("tpu-v5e")
    assert small.time.bound == "memory" and small.fraction_of_peak < 0.3 and "memory-bound" in small.describe()
    assert int8.intensity == pytest.approx(2 * small.intensity, rel=0.01)  # every byte halved


def test_describe_states_the_shape_the_bound_the_share_of_peak_the_time_and_the_critical_batch_in_four_lines():
    text = explain_matmul("h100", 4, 16, 32, weight_dtype="int8", compute_dtype="fp8").describe()
    lines = text.split("\n")
    assert len(lines) == 4
    assert lines[0] == "[4, 16] x [16, 32] on h100 (weights int8, math fp8)"
    # intensity 5.8 FLOPs/B against a ridge of 591: memory-bound at 5.8 x 3.35e12 / 1979e12 = 1% of peak
    assert lines[1] == "intensity 5.8 FLOPs/B vs ridge 591: memory-bound, 1% of peak"
    assert lines[3] == "critical batch size for these dtypes: 295 tokens"  # 591 x 1 B / 2
    big = explain_matmul("tpu-v5e", 4096).describe().split("\n")
    # 2 x 4096 x 8192^2 FLOPs / 197 TFLOP/s = 2,790.6 us; 2 x 8192 x 16384 B / 820 GB/s = 327.4 us
    assert big[1] == "intensity 2,048.0 FLOPs/B vs ridge 240: compute-bound, 100% of peak"
    assert big[2] == "time >= 2,790.6 us (math 2,790.6 us, memory 327.4 us)"
    int8 = explain_matmul("tpu-v5e", 64, 4096, 4096, weight_dtype="int8", compute_dtype="int8")
    assert int8.compute_dtype == "int8" and "math int8" in int8.describe().splitlines()[0]
    matmul = explain_matmul("tpu-v5e", 64)
    t = matmul.time
    assert (f"time >= {t.total_s * 1e6:,.1f} us (math {t.compute_s * 1e6:,.1f} us, memory {t.memory_s * 1e6:,.1f} us)"
            in matmul.describe())


def test_a_long_matmuls_time_is_printed_in_microseconds_to_a_tenth():
    # 2 x 2^20 x 2^16 x 2^16 FLOPs at 197 TFLOP/s (about 45.7 s); 2 x (2 x 2^36 + 2^32) bytes at 820 GB/s (0.35 s)
    line = explain_matmul("tpu-v5e", 2**20, 2**16, 2**16).describe().split("\n")[2]
    shown = re.fullmatch(r"time >= ([\d,.]+) us \(math ([\d,.]+) us, memory ([\d,.]+) us\)", line)
    compute_us, memory_us = 2 * 2**20 * 2**32 / 197e12 * 1e6, 2 * (2 * 2**36 + 2**32) / 820e9 * 1e6
    for text, expected in zip(shown.groups(), (compute_us, compute_us, memory_us)):
        assert float(text.replace(",", "")) == pytest.approx(expected, abs=0.051)


# --- A measured roofline: its floor and its knee ----------------------------------------------------------------------
@for_each([
    ([1, 2, 4, 8], [1.0, 3.0, 5.0, 8.0], 2, 2.0),  # the mean of the middle two
    ([1, 2, 4, 8], [1.0, 3.0, 5.0, 8.0], 3, 3.0),
    ([1, 2, 4, 8], [1.0, 3.0, 5.0, 8.0], 3.0, 3.0),  # a whole float is a count too
    ([1, 2, 4, 8], [1.0, 1.0, 2.0, 4.0], 3, 1.0),  # four points: at most three make the floor, one is the slope
    ([1, 2, 4], [1.0, 2.0, 4.0], 1, 1.0),  # one point: that point
    ([1, 2, 4, 8, 16], [4.0, 1.0, 2.0, 3.0, 16.0], None, 2.0),  # default: the median of the three smallest batches
    ([1, 2, 4, 8, 16, 32], [4.0, 1.0, 3.0, 2.0, 5.0, 64.0], 4, 2.5),  # sorted 1, 2, 3, 4: mean of 2 and 3
    ([1, 2, 4, 8, 16, 32], [4.0, 1.0, 3.0, 2.0, 5.0, 64.0], 5, 3.0),  # sorted 1, 2, 3, 4, 5
], ids=str)
def test_fit_batch_roofline_floor_is_the_median_of_the_smallest_batches(batches, seconds, n_floor, floor):
    kwargs = {} if n_floor is None else dict(n_floor=n_floor)
    assert fit_batch_roofline(batches, seconds, **kwargs).floor_s == floor


def test_fit_batch_roofline_recovers_a_synthetic_knee():
    # Synthetic machine: 2 ms to load the weights, 10 us per row -> knee at 200 rows.
    batches = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
    seconds = [max(2e-3, b * 1e-5) for b in batches]
    assert fit_batch_roofline(batches, seconds).knee_batch == pytest.approx(200, rel=1e-9)


# On a roofline t(B) = max(t_0, B t_0 / B_crit) the time first reaches 1.5 t_0 at B = 1.5 B_crit (hand derivation), so
# the knee is the first grid batch at or above it: B_crit = 100 -> 150 -> 192 on the H200 run's grid.
@for_each([(100, 192), (170, 256), (2, 16), (5000, float("inf"))], ids=str)
def test_slowdown_knee_of_a_roofline_is_the_first_batch_at_one_and_a_half_times_the_critical_batch(critical, knee):
    grid = (1, 16, 64, 128, 192, 256, 384, 512, 1024, 2048, 4096)
    assert slowdown_knee(grid, [max(1.0, b / critical) for b in grid]) == knee


# --- Bad input: a ValueError naming the argument and the fix ---------------------------------------------------------
def _attention_bytes(**kwargs):
    return attention_bytes(**(dict(query_len=3, kv_len=5, n_heads=4, n_kv_heads=2, head_dim=8, batch=1) | kwargs))


@for_each([
    (lambda: roofline_time(-1.0, 1.0, "tpu-v5e"), r"\bflops\b"),
    (lambda: roofline_time(1.0, -1.0, "tpu-v5e"), r"\bbytes_moved\b"),
    (lambda: roofline_time(1.0, 1.0, "tpu-v5e", 0), r"\bn_chips\b"),
    (lambda: roofline_time(1.0, 1.0, "tpu-v5e", 1.5), r"\bn_chips\b"),
    *[(lambda f=f, args=args: f(*args), rf"\b{name}\b") for f in (matmul_bytes, matmul_flops)
      for args, name in [((0, 5, 7), "batch"), ((3, -5, 7), "d_in"), ((3, 5, 0), "d_out")]],
    (lambda: arithmetic_intensity(-1.0, 1.0), r"\bflops\b"),
    (lambda: arithmetic_intensity(1.0, 0.0), r"\bbytes_moved\b"),  # no bytes: no intensity
    (lambda: attainable_flops(-1.0, "h100"), r"\bintensity\b"),
    (lambda: critical_batch_from_rates(0.0, 1.0), r"\bflops_per_s\b"),
    (lambda: critical_batch_from_rates(1.0, -1.0), r"\bbytes_per_s\b"),
    (lambda: critical_batch_from_rates(2e11, 0.0, "fp32"), r"\bbytes_per_s\b"),
    *[(lambda experts=experts, active=active: moe_critical_batch_size("tpu-v5e", experts, active), words)
      for experts, active, words in [(0, 1, r"\bn_experts\b"), (4, 0, r"\bn_active_experts\b"),
                                     (2.5, 1, r"\bn_experts\b"), (4, 1.5, r"\bn_active_experts\b"),
                                     (2, 3, r"\bn_active_experts=3 exceeds n_experts=2\b")]],
    *[(lambda kwargs=kwargs: _attention_bytes(**kwargs), rf"\b{name}\b") for kwargs, name in [
        (dict(query_len=0), "query_len"), (dict(kv_len=-1), "kv_len"), (dict(n_heads=0), "n_heads"),
        (dict(head_dim=0), "head_dim"), (dict(batch=0), "batch")]],
    (lambda: attention_bytes(1, 8, n_heads=4, n_kv_heads=3, head_dim=8), r"\bn_kv_heads=3 does not divide n_heads=4\b"),
    (lambda: attention_bytes(1, 8192, n_heads=64, n_kv_heads=7, head_dim=128),
     "n_kv_heads=7 does not divide n_heads=64"),
    *[(lambda args=args: attention_intensity(*args), rf"\b{name}\b")
      for args, name in [((0, 8), "query_len"), ((8, 0), "kv_len"), ((8, 8, 0), "group_size")]],
    (lambda: explain_matmul("tpu-v5e", 64, compute_dtype="fp8"), r"\bfp8\b"),
    (lambda: fit_batch_roofline([1, 2], [1.0, -2.0]), "seconds entry must be positive"),
    (lambda: fit_batch_roofline([4, 2, 1], [1.0, 1.0, 1.0], n_floor=1), "increasing"),
    (lambda: fit_batch_roofline([1], [1.0]), "at least two"),
    (lambda: fit_batch_roofline("abc", [1.0, 2.0, 3.0]), "batches must be a sequence of numbers"),
    (lambda: fit_batch_roofline([1, 2, 4, 8], [1.0, 1.0, 2.0, 4.0], n_floor=4), r"\bn_floor must be between 1 and 3\b"),
    *[(lambda args=args: slowdown_knee(*args), words) for args, words in [
        (([1, 2], [1.0], 1.5), "must pair up"), (([2, 1], [1.0, 1.0], 1.5), "increasing"),
        (([1, 1], [1.0, 1.0], 1.5), "distinct"), (([1, 2], [1.0, 0.0], 1.5), "seconds entry"),
        (([1, 2], [1.0, 2.0], 1.0), "must exceed 1"), (("ab", [1.0, 2.0], 1.5), "sequence")]],
], ids=str)
def test_bad_input_gets_a_value_error_naming_the_argument_and_the_fix(call, words):
    with pytest.raises(ValueError, match=words):
        call()
