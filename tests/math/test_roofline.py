"""scaling_lib.roofline: matmul and attention counts, the roofline time, explain_matmul and the measured-roofline fit.

Expected values are worked by hand from the hardware table and the shapes, or come from another public function than
the one under test (the claims of chapter 2 live in test_claims_roofline.py)."""

import re

import pytest

from scaling_lib.roofline import (arithmetic_intensity, attainable_flops, attention_bytes, attention_flops,
                                  attention_intensity, critical_batch_from_rates, critical_batch_size, explain_matmul,
                                  fit_batch_roofline, matmul_bytes, matmul_flops, matmul_intensity, matmul_time,
                                  moe_critical_batch_size, ridge_point, roofline_time, slowdown_knee)


# --- closed forms by hand -------------------------------------------------------------------------------------------
def test_attention_flops_counts_every_query():
    # 4 B T S N H = 4 x 7 x 3 x 5 x 2 x 4
    assert attention_flops(3, 5, n_heads=2, head_dim=4, batch=7) == 3360


def test_matmul_bytes_read_the_input_and_the_weights_and_write_the_output():
    assert matmul_bytes(3, 5, 7) == 2 * 3 * 5 + 2 * 5 * 7 + 2 * 3 * 7  # X, W, output in bf16


def test_roofline_time_without_flops_has_no_compute_term():
    assert roofline_time(0, 1e9, "tpu-v5e").compute_s == 0.0


def test_roofline_time_without_bytes_has_no_memory_term():
    assert roofline_time(1e9, 0, "tpu-v5e").memory_s == 0.0


def test_moe_critical_batch_with_every_expert_active_is_the_dense_one():
    assert moe_critical_batch_size("tpu-v5e", 4, 4) == critical_batch_size("tpu-v5e")  # k = E: every expert busy


def test_attention_bytes_refuses_kv_heads_that_do_not_divide_the_query_heads():
    with pytest.raises(ValueError, match="n_kv_heads=7 does not divide n_heads=64"):
        attention_bytes(1, 8192, n_heads=64, n_kv_heads=7, head_dim=128)


# --- explain_matmul ---------------------------------------------------------------------------------------------------
def test_explain_matmul_prices_every_dtype_it_is_given():
    report = explain_matmul("tpu-v5e", 64, 8192, 8192, "int8", "int8")
    assert report.ridge == ridge_point("tpu-v5e", "int8")
    assert report.time == matmul_time(64, 8192, 8192, "tpu-v5e", 1, "int8", "int8", "int8")
    assert report.attainable_flops == attainable_flops(report.intensity, "tpu-v5e", "int8")


def test_explain_matmul_takes_the_critical_batch_of_its_weight_dtype():
    report = explain_matmul("tpu-v5e", 64, weight_dtype="int8")
    assert report.weight_dtype == "int8" and report.critical_batch == critical_batch_size("tpu-v5e", "int8", "bf16")


def test_explain_matmul_describe_prints_the_time_and_its_two_terms():
    matmul = explain_matmul("tpu-v5e", 64)
    t = matmul.time
    assert (f"time >= {t.total_s * 1e6:,.1f} us (math {t.compute_s * 1e6:,.1f} us, memory {t.memory_s * 1e6:,.1f} us)"
            in matmul.describe())


# --- fit_batch_roofline -----------------------------------------------------------------------------------------------
def test_fit_batch_roofline_floor_is_the_median_odd_or_even():
    batches, seconds = [1, 2, 4, 8], [1.0, 3.0, 5.0, 8.0]
    assert fit_batch_roofline(batches, seconds, n_floor=2).floor_s == 2.0  # mean of the middle two
    assert fit_batch_roofline(batches, seconds, n_floor=3).floor_s == 3.0
    assert fit_batch_roofline(batches, seconds, n_floor=3.0).floor_s == 3.0  # a whole float is a count too


def test_fit_batch_roofline_floor_of_one_point_is_that_point():
    assert fit_batch_roofline([1, 2, 4], [1.0, 2.0, 4.0], n_floor=1).floor_s == 1.0


def test_fit_batch_roofline_floor_defaults_to_the_median_of_the_three_smallest_batches():
    assert fit_batch_roofline([1, 2, 4, 8, 16], [4.0, 1.0, 2.0, 3.0, 16.0]).floor_s == 2.0


def test_fit_batch_roofline_refuses_a_negative_time():
    with pytest.raises(ValueError, match="seconds entry must be positive"):
        fit_batch_roofline([1, 2], [1.0, -2.0])


def test_fit_batch_roofline_refuses_a_string_of_batches():
    with pytest.raises(ValueError, match="batches must be a sequence of numbers"):
        fit_batch_roofline("abc", [1.0, 2.0, 3.0])


def test_fit_batch_roofline_names_the_largest_n_floor_it_takes():
    # Four points: at most three can make the floor, one must remain for the slope.
    with pytest.raises(ValueError, match=r"\bn_floor must be between 1 and 3\b"):
        fit_batch_roofline([1, 2, 4, 8], [1.0, 1.0, 2.0, 4.0], n_floor=4)
    assert fit_batch_roofline([1, 2, 4, 8], [1.0, 1.0, 2.0, 4.0], n_floor=3).floor_s == 1.0


def test_fit_batch_roofline_floor_of_four_or_five_points_is_their_median():
    batches, seconds = [1, 2, 4, 8, 16, 32], [4.0, 1.0, 3.0, 2.0, 5.0, 64.0]
    assert fit_batch_roofline(batches, seconds, n_floor=4).floor_s == 2.5  # sorted 1, 2, 3, 4: mean of 2 and 3
    assert fit_batch_roofline(batches, seconds, n_floor=5).floor_s == 3.0  # sorted 1, 2, 3, 4, 5


# --- slowdown_knee ----------------------------------------------------------------------------------------------------
# On a roofline t(B) = max(t_0, B t_0 / B_crit) the time first reaches 1.5 t_0 at B = 1.5 B_crit (hand derivation), so
# the knee is the first grid batch at or above it: B_crit = 100 -> 150 -> 192 on the H200 run's grid.
@pytest.mark.parametrize("critical, knee", [(100, 192), (170, 256), (2, 16), (5000, float("inf"))])
def test_slowdown_knee_of_a_roofline_is_the_first_batch_at_one_and_a_half_times_the_critical_batch(critical, knee):
    grid = (1, 16, 64, 128, 192, 256, 384, 512, 1024, 2048, 4096)
    assert slowdown_knee(grid, [max(1.0, b / critical) for b in grid]) == knee


@pytest.mark.parametrize("batches, seconds, factor, words", [
    ([1, 2], [1.0], 1.5, "must pair up"), ([2, 1], [1.0, 1.0], 1.5, "increasing"),
    ([1, 1], [1.0, 1.0], 1.5, "distinct"), ([1, 2], [1.0, 0.0], 1.5, "seconds entry"),
    ([1, 2], [1.0, 2.0], 1.0, "must exceed 1"), ("ab", [1.0, 2.0], 1.5, "sequence"),
])
def test_slowdown_knee_refuses_what_has_no_knee(batches, seconds, factor, words):
    with pytest.raises(ValueError, match=words):
        slowdown_knee(batches, seconds, factor)


def test_a_matmul_report_keeps_the_compute_format_and_prints_four_lines():
    report = explain_matmul("tpu-v5e", 64, 4096, 4096, weight_dtype="int8", compute_dtype="int8")
    assert report.compute_dtype == "int8"
    lines = report.describe().splitlines()
    assert len(lines) == 4 and "math int8" in lines[0]
    assert [line.split()[0] for line in lines[1:]] == ["intensity", "time", "critical"]


# --- every argument and branch, by hand ------------------------------------------------------------------------------
# hardware.py: TPU v5e 197 TFLOP/s bf16, 394 TFLOP/s int8, 820 GB/s; H100 989 TFLOP/s bf16, 1,979 TFLOP/s fp8, 3.35 TB/s


def test_roofline_time_splits_flops_and_bytes_over_the_chips_at_the_compute_formats_rate():
    # 4 s of int8 math and 3 s of HBM traffic on one chip: 2 s and 1.5 s on two
    t = roofline_time(4 * 394e12, 3 * 820e9, "tpu-v5e", 2, "int8")
    assert t.compute_s == pytest.approx(2.0, rel=1e-12) and t.memory_s == pytest.approx(1.5, rel=1e-12)
    assert t.total_s == t.compute_s and t.bound == "compute"
    t = roofline_time(197e12, 2 * 820e9, "tpu-v5e")  # bf16 by default, one chip: 1 s of math, 2 s of traffic
    assert (t.compute_s, t.memory_s) == pytest.approx((1.0, 2.0), rel=1e-12)
    assert t.total_s == t.memory_s and t.bound == "memory"


def test_a_roofline_tie_counts_as_compute_bound():
    t = roofline_time(197e12, 820e9, "tpu-v5e")  # 1 s each
    assert t.compute_s == t.memory_s and t.bound == "compute"


@pytest.mark.parametrize("args, name", [((-1.0, 1.0), "flops"), ((1.0, -1.0), "bytes_moved"),
                                        ((1.0, 1.0, "tpu-v5e", 0), "n_chips"),
                                        ((1.0, 1.0, "tpu-v5e", 1.5), "n_chips")])
def test_roofline_time_names_the_bad_argument(args, name):
    with pytest.raises((ValueError, TypeError), match=rf"\b{name}\b"):
        roofline_time(*args[:2], *(args[2:] or ("tpu-v5e",)))


def test_matmul_bytes_count_each_operand_in_its_own_format():
    # X [3, 5] and the output [3, 7] in fp32 (4 B), W [5, 7] in int8 (1 B)
    assert matmul_bytes(3, 5, 7, activation_dtype="fp32", weight_dtype="int8") == 4 * 15 + 1 * 35 + 4 * 21
    assert matmul_bytes(3, 5, 7, weight_dtype="int4") == 2 * 15 + 0.5 * 35 + 2 * 21  # activations bf16 by default


@pytest.mark.parametrize("args, name", [((0, 5, 7), "batch"), ((3, -5, 7), "d_in"), ((3, 5, 0), "d_out")])
def test_matmul_shapes_must_be_positive_and_the_error_names_which(args, name):
    for count in (matmul_bytes, matmul_flops):
        with pytest.raises(ValueError, match=rf"\b{name}\b"):
            count(*args)


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


@pytest.mark.parametrize("experts, active, words", [(0, 1, r"\bn_experts\b"), (4, 0, r"\bn_active_experts\b"),
                                                    (2.5, 1, r"\bn_experts\b"), (4, 1.5, r"\bn_active_experts\b"),
                                                    (2, 3, r"\bn_active_experts=3 exceeds n_experts=2\b")])
def test_moe_critical_batch_names_a_bad_expert_count(experts, active, words):
    with pytest.raises((ValueError, TypeError), match=words):
        moe_critical_batch_size("tpu-v5e", experts, active)


def test_attention_bytes_read_q_k_v_and_write_o_in_their_format():
    # Q and O: 7 x 3 x 4 x 8 = 672 elements each; K and V: 7 x 5 x 2 x 8 = 560 each; fp32: 4 B
    assert attention_bytes(3, 5, n_heads=4, n_kv_heads=2, head_dim=8, batch=7, dtype="fp32") == \
        4 * (2 * 672 + 2 * 560)
    # batch 1 and bf16 by default: 2 x (2 x 3 x 4 x 8 + 2 x 5 x 2 x 8)
    assert attention_bytes(3, 5, n_heads=4, n_kv_heads=2, head_dim=8) == 2 * (192 + 160)


@pytest.mark.parametrize("kwargs, name", [
    (dict(query_len=0), "query_len"), (dict(kv_len=-1), "kv_len"), (dict(n_heads=0), "n_heads"),
    (dict(head_dim=0), "head_dim"), (dict(batch=0), "batch"),
])
def test_attention_bytes_names_a_bad_size(kwargs, name):
    args = dict(query_len=3, kv_len=5, n_heads=4, n_kv_heads=2, head_dim=8, batch=1) | kwargs
    with pytest.raises(ValueError, match=rf"\b{name}\b"):
        attention_bytes(**args)


def test_attention_bytes_names_both_head_counts_when_they_do_not_divide():
    with pytest.raises(ValueError, match=r"\bn_kv_heads=3 does not divide n_heads=4\b"):
        attention_bytes(1, 8, n_heads=4, n_kv_heads=3, head_dim=8)


def test_attention_intensity_by_hand():
    # G S T / (G T + S): T = 4, S = 12, G = 2: 96 / 20; prefill (S = T, G = 1): T / 2; decode (T = 1): G S / (G + S)
    assert attention_intensity(4, 12, 2) == pytest.approx(4.8, rel=1e-12)
    assert attention_intensity(8, 8) == pytest.approx(4.0, rel=1e-12)
    assert attention_intensity(1, 8190, 8) == pytest.approx(8 * 8190 / 8198, rel=1e-12)


@pytest.mark.parametrize("args, name", [((0, 8), "query_len"), ((8, 0), "kv_len"), ((8, 8, 0), "group_size")])
def test_attention_intensity_names_a_bad_size(args, name):
    with pytest.raises(ValueError, match=rf"\b{name}\b"):
        attention_intensity(*args)


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


def test_explain_matmul_defaults_to_an_8192_square_bf16_matmul_with_bf16_activations():
    # B = 4,096 tokens on a v5e: 2 B D F / (2 B D + 2 D F + 2 B F) = 2 x 4096 x 8192 x 8192 / (2 x 8192 x 16384)
    r = explain_matmul("tpu-v5e", 4096)
    assert (r.d_in, r.d_out, r.weight_dtype, r.compute_dtype) == (8192, 8192, "bf16", "bf16")
    assert r.intensity == pytest.approx(2 * 4096 * 8192 * 8192 / (2 * 8192 * 16384), rel=1e-12)
    assert r.ridge == pytest.approx(197e12 / 820e9, rel=1e-12) and r.critical_batch == pytest.approx(r.ridge)
    assert r.time.bound == "compute" and r.attainable_flops == 197e12 and r.fraction_of_peak == pytest.approx(1.0)
    # bf16 math on an int8 checkpoint: activations stay bf16 (2 B), weights 1 B
    w8 = explain_matmul("tpu-v5e", 4, 16, 32, weight_dtype="int8")
    assert w8.intensity == pytest.approx(4096 / (2 * 64 + 512 + 2 * 128), rel=1e-12)


def test_explain_matmul_refuses_a_format_the_chip_has_no_rate_for():
    with pytest.raises(ValueError, match=r"\bfp8\b"):
        explain_matmul("tpu-v5e", 64, compute_dtype="fp8")


def test_a_matmul_report_states_its_shape_bound_share_of_peak_time_and_critical_batch_in_units():
    text = explain_matmul("h100", 4, 16, 32, weight_dtype="int8", compute_dtype="fp8").describe()
    lines = text.split("\n")
    assert lines[0] == "[4, 16] x [16, 32] on h100 (weights int8, math fp8)"
    # intensity 5.8 FLOPs/B against a ridge of 591: memory-bound at 5.8 x 3.35e12 / 1979e12 = 1% of peak
    assert lines[1] == "intensity 5.8 FLOPs/B vs ridge 591: memory-bound, 1% of peak"
    assert lines[3] == "critical batch size for these dtypes: 295 tokens"  # 591 x 1 B / 2
    big = explain_matmul("tpu-v5e", 4096).describe().split("\n")
    # 2 x 4096 x 8192^2 FLOPs / 197 TFLOP/s = 2,790.6 us; 2 x 8192 x 16384 B / 820 GB/s = 327.4 us
    assert big[1] == "intensity 2,048.0 FLOPs/B vs ridge 240: compute-bound, 100% of peak"
    assert big[2] == "time >= 2,790.6 us (math 2,790.6 us, memory 327.4 us)"


def test_arithmetic_intensity_is_flops_per_byte_and_names_a_bad_count():
    assert arithmetic_intensity(6.0, 3.0) == 2.0 and arithmetic_intensity(0, 3.0) == 0.0  # no FLOPs: intensity 0
    for args, name in (((-1.0, 1.0), "flops"), ((1.0, 0.0), "bytes_moved")):  # no bytes: no intensity
        with pytest.raises(ValueError, match=rf"\b{name}\b"):
            arithmetic_intensity(*args)


def test_attainable_flops_is_the_roofline_at_the_compute_formats_peak():
    assert attainable_flops(0, "h100") == 0.0
    assert attainable_flops(10.0, "h100") == pytest.approx(10 * 3.35e12, rel=1e-12)  # under the ridge: I x W_hbm
    assert attainable_flops(1e6, "h100", "fp8") == 1979e12 and attainable_flops(1e6, "h100") == 989e12
    with pytest.raises(ValueError, match=r"\bintensity\b"):
        attainable_flops(-1.0, "h100")


def test_critical_batch_from_measured_rates_and_its_refusals():
    # a CPU at 200 GFLOP/s and 10 GB/s with float32 weights (4 B): 200 / 10 x 4 / 2 = 40 tokens
    assert critical_batch_from_rates(200e9, 10e9, "fp32") == pytest.approx(40.0, rel=1e-12)
    assert critical_batch_from_rates(200e9, 10e9) == pytest.approx(20.0, rel=1e-12)  # bf16 by default
    for args, name in (((0.0, 1.0), "flops_per_s"), ((1.0, -1.0), "bytes_per_s")):
        with pytest.raises(ValueError, match=rf"\b{name}\b"):
            critical_batch_from_rates(*args)


def test_the_defaults_are_bf16_and_a_batch_of_one():
    assert ridge_point("tpu-v5e") == pytest.approx(197e12 / 820e9, rel=1e-12)
    # X [3, 5], W [5, 7], output [3, 7]: 210 FLOPs over 2 x (15 + 35 + 21) = 142 bytes in bf16
    assert matmul_intensity(3, 5, 7) == pytest.approx(210 / 142, rel=1e-12)
    assert matmul_intensity(3, 5, 7, "fp32", "int8") == pytest.approx(210 / (4 * 15 + 35 + 4 * 21), rel=1e-12)
    assert attention_flops(3, 5, n_heads=2, head_dim=4) == 4 * 3 * 5 * 2 * 4


def test_a_compute_bound_fp8_matmul_attains_the_fp8_peak():
    r = explain_matmul("h100", 8192, compute_dtype="fp8")  # 8,192 tokens: far past fp8's ridge of ~591
    assert r.time.bound == "compute" and r.attainable_flops == 1979e12 and r.fraction_of_peak == pytest.approx(1.0)


def test_a_long_matmuls_time_is_printed_in_microseconds_to_a_tenth():
    # 2 x 2^20 x 2^16 x 2^16 FLOPs at 197 TFLOP/s (about 45.7 s); 2 x (2 x 2^36 + 2^32) bytes at 820 GB/s (0.35 s)
    line = explain_matmul("tpu-v5e", 2**20, 2**16, 2**16).describe().split("\n")[2]
    shown = re.fullmatch(r"time >= ([\d,.]+) us \(math ([\d,.]+) us, memory ([\d,.]+) us\)", line)
    compute_us, memory_us = 2 * 2**20 * 2**32 / 197e12 * 1e6, 2 * (2 * 2**36 + 2**32) / 820e9 * 1e6
    for text, expected in zip(shown.groups(), (compute_us, compute_us, memory_us)):
        assert float(text.replace(",", "")) == pytest.approx(expected, abs=0.051)
