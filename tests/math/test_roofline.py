"""scaling_lib.roofline: matmul and attention counts, the roofline time, explain_matmul and the measured-roofline fit.

Expected values are worked by hand from the hardware table and the shapes, or come from another public function than
the one under test (the claims of chapter 2 live in test_claims_roofline.py)."""

import pytest

from scaling_lib.roofline import (attainable_flops, attention_bytes, attention_flops, critical_batch_size,
                                  explain_matmul, fit_batch_roofline, matmul_bytes, matmul_time,
                                  moe_critical_batch_size, ridge_point, roofline_time)


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


def test_a_matmul_report_keeps_the_compute_format_and_prints_four_lines():
    report = explain_matmul("tpu-v5e", 64, 4096, 4096, weight_dtype="int8", compute_dtype="int8")
    assert report.compute_dtype == "int8"
    lines = report.describe().splitlines()
    assert len(lines) == 4 and "math int8" in lines[0]
    assert [line.split()[0] for line in lines[1:]] == ["intensity", "time", "critical"]
