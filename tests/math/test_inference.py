"""scaling_lib.inference: explain_decode (chapter 5's explorer) and kv_compute_crossover_context (consistency,
crossovers, errors), and the step bounds' handling of dtypes and of numbers passed in other types."""

import itertools
import re

import numpy as np
import pytest

from scaling_lib.hardware import get_chip
from scaling_lib.inference import (decode_step_time, decode_throughput, explain_decode, kv_compute_crossover_context,
                                   prefill_time, step_time_bound)
from scaling_lib.memory import max_batch_size, memory_footprint
from scaling_lib.models import get_model, param_count
from scaling_lib.roofline import critical_batch_size

CONFIGS = [("llama2-13b", "tpu-v5e", 8), ("llama3-70b", "tpu-7x", 8), ("llama3-70b", "tpu-v5e", 16),
           ("llama3-8b", "h100", 1)]


@pytest.mark.parametrize("model, chip, n_chips", CONFIGS)
def test_report_agrees_with_step_time_throughput_and_memory(model, chip, n_chips):
    for batch, context in ((1, 1024), (16, 8192), (256, 32768)):
        report = explain_decode(model, chip, n_chips, batch, context)
        assert report.step == decode_step_time(model, chip, n_chips, batch, context, check_capacity=False)
        assert report.tokens_per_s == pytest.approx(decode_throughput(model, chip, n_chips, batch, context, check_capacity=False),
                                                    rel=1e-12)
        footprint = memory_footprint(model, chip, n_chips, batch, context)
        assert report.total_bytes == pytest.approx(footprint.total_bytes, rel=1e-12)
        assert report.fits is footprint.fits
        assert report.max_batch == max_batch_size(model, chip, n_chips, context)
        # fits exactly up to max_batch
        assert report.fits is (batch <= report.max_batch)
        assert report.critical_batch == critical_batch_size(chip)


def test_m4_report_llama2_13b_batch16_does_not_fit_and_says_so():
    report = explain_decode("llama2-13b", "tpu-v5e", 8, 16, 8192)
    assert not report.fits
    assert memory_footprint("llama2-13b", "tpu-v5e", 8, report.max_batch, 8192).fits
    assert not memory_footprint("llama2-13b", "tpu-v5e", 8, report.max_batch + 1, 8192).fits
    text = report.describe()
    assert "does NOT fit" in text and f"at most batch {report.max_batch}" in text
    assert f"{report.step.total_s * 1e3:.2f} ms" in text
    assert report.dominant_term == "kv"


def test_dominant_term_moves_from_weights_to_flops_to_kv():
    # Short context, small batch: loading the weights dominates.
    assert explain_decode("llama3-70b", "tpu-7x", 8, 1, 128).dominant_term == "weights"
    # Short context, batch well above B_crit: the matmul FLOPs dominate, and the bound says compute.
    big = explain_decode("llama3-70b", "tpu-7x", 8, 1024, 128)
    assert big.dominant_term == "flops" and big.step.bound == "compute"
    # Long context: the KV read dominates even at batch 1024.
    assert explain_decode("llama3-70b", "tpu-7x", 8, 1024, 32768).dominant_term == "kv"


@pytest.mark.parametrize("model, chip", [("llama3-70b", "tpu-v5e"), ("llama3-70b", "tpu-7x"),
                                         ("llama2-13b", "tpu-v5e"), ("palm-540b", "tpu-v4")])
def test_kv_term_equals_flop_term_exactly_at_the_crossover_context_for_any_batch_and_chip_count(model, chip):
    crossover = kv_compute_crossover_context(model, chip)
    below, above = int(crossover * 0.98), int(crossover * 1.02) + 1
    for batch, n_chips in itertools.product((1, 64, 4096), (1, 8, 64)):
        # decode_step_time takes integer contexts; compare the KV term per token of context instead.
        at = decode_step_time(model, chip, n_chips, batch, below, check_capacity=False)
        assert at.kv_s < at.compute_s
        at = decode_step_time(model, chip, n_chips, batch, above, check_capacity=False)
        assert at.kv_s > at.compute_s
        one_token = decode_step_time(model, chip, n_chips, batch, 1, check_capacity=False)
        assert one_token.kv_s * crossover == pytest.approx(one_token.compute_s, rel=1e-9)


def test_kv_overtakes_flops_at_1792_tokens_for_llama3_70b_and_132_for_mha_llama2_13b_on_v5e():
    # By hand, S* = 2 P W / (C x KV bytes per token) on v5e (W = 8.2e11 B/s, C = 1.97e14 FLOP/s):
    # LLaMA-3-70B, P = 80 x (8,192 x 128 x 144 + 3 x 8,192 x 28,672) + 2 x 128,256 x 8,192 = 70,552,387,584 and
    # 2 x 80 x 8 x 128 x 2 = 327,680 B per token: S* = 1,792.4 tokens.
    assert kv_compute_crossover_context("llama3-70b", "tpu-v5e") == pytest.approx(
        2 * 70_552_387_584 * 8.2e11 / (1.97e14 * 327_680), rel=1e-12)
    assert kv_compute_crossover_context("llama3-70b", "tpu-v5e") == pytest.approx(1792.4, rel=1e-4)
    # Multi-head LLaMA-2-13B, P = 40 x (5,120 x 128 x 160 + 3 x 5,120 x 13,824) + 2 x 32,000 x 5,120 =
    # 13,015,449,600 and 2 x 40 x 40 x 128 x 2 = 819,200 B per token: S* = 132.27 tokens.
    assert kv_compute_crossover_context("llama2-13b", "tpu-v5e") == pytest.approx(132.27, rel=1e-4)
    # S* is proportional to W / C: the chip with the highest ridge point (C / W) crosses first.
    base = get_chip("tpu-v5e").hbm_bandwidth / get_chip("tpu-v5e").peak_flops("bf16")
    for chip in ("tpu-v4", "tpu-v5p", "tpu-v6e", "tpu-7x", "h100", "h200", "b200"):
        ratio = get_chip(chip).hbm_bandwidth / get_chip(chip).peak_flops("bf16") / base
        assert kv_compute_crossover_context("llama3-70b", chip) == pytest.approx(1792.4184 * ratio, rel=1e-6)


def test_crossover_scales_with_kv_bytes_and_flop_rate():
    base = kv_compute_crossover_context("llama3-70b", "tpu-7x")
    # An fp8 cache is half the bytes: the crossover doubles.
    assert kv_compute_crossover_context("llama3-70b", "tpu-7x", kv_dtype="fp8") == pytest.approx(2 * base, rel=1e-12)
    # fp8 math is twice the rate as well: the two changes cancel.
    assert kv_compute_crossover_context("llama3-70b", "tpu-7x", "fp8", "fp8") == pytest.approx(base, rel=1e-12)
    # A model with fewer KV heads crosses later in proportion.
    mqa = get_model("llama3-70b").with_(n_kv_heads=1)
    # K = 8 -> 1 divides the KV bytes by 8, and the smaller W_K, W_V shave P (S* is proportional to P / KV bytes).
    shrink = param_count(mqa) / param_count("llama3-70b")
    assert 0.98 < shrink < 1
    assert kv_compute_crossover_context(mqa, "tpu-7x") == pytest.approx(8 * shrink * base, rel=1e-12)


def test_sliding_window_below_the_crossover_never_crosses():
    windowed = get_model("llama3-8b").with_(sliding_window=128)
    assert kv_compute_crossover_context(windowed, "tpu-v5e") == float("inf")
    wide = get_model("llama3-8b").with_(sliding_window=100_000)
    assert kv_compute_crossover_context(wide, "tpu-v5e") == kv_compute_crossover_context("llama3-8b", "tpu-v5e")


def test_throughput_rises_below_bcrit_is_flat_above_and_step_never_beats_the_weight_load():
    reports = [explain_decode("llama3-70b", "tpu-v5e", 16, batch, 4096, "int8", "int8", "bf16")
               for batch in (1, 2, 4, 16, 64, 119, 121, 256, 1024)]
    below = [r.tokens_per_s for r in reports if r.batch < r.critical_batch]
    above = [r.tokens_per_s for r in reports if r.batch > r.critical_batch]
    assert len(below) == 6 and all(b > a for a, b in zip(below, below[1:]))
    # Above B_crit both remaining terms grow in proportion to B: tokens per second saturate.
    assert above == pytest.approx([above[0]] * len(above), rel=1e-12) and above[0] > below[-1]
    for report in reports:
        assert report.step.total_s >= report.weight_bytes / (16 * get_chip("tpu-v5e").hbm_bandwidth)


@pytest.mark.parametrize("kwargs, message", [
    (dict(batch=0), "batch must be a positive integer"),
    (dict(context_len=0), "context_len must be a positive integer"),
    (dict(n_chips=2.5), "n_chips must be a positive integer"),
    (dict(chip="tpu-v9"), "unknown chip 'tpu-v9'"),
    (dict(model="gpt-9"), "unknown model 'gpt-9'"),
    (dict(kv_dtype="int3"), "unknown dtype 'int3'"),
    (dict(chip="ironwood", compute_dtype="int8"), "no native int8 matrix rate"),
])
def test_explain_decode_rejects_bad_input_with_the_fix(kwargs, message):
    args = dict(model="llama2-13b", chip="tpu-v5e", n_chips=8, batch=8, context_len=8192)
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        explain_decode(**args)


# --- dtypes, describe() and the inputs the bounds accept --------------------------------------------------------------
def test_decode_throughput_and_explain_decode_price_every_dtype_they_are_given():
    step = decode_step_time("llama3-70b", "h100", 8, 64, 4096, "int8", "fp8", "fp8")
    assert decode_throughput("llama3-70b", "h100", 8, 64, 4096, "int8", "fp8", "fp8") == 64 / step.total_s
    assert explain_decode("llama3-70b", "h100", 8, 64, 4096, "int8", "fp8", "fp8").step == step


def test_explain_decode_describe_prints_the_step_and_the_memory_in_five_lines():
    report = explain_decode("llama2-13b", "tpu-v5e", 8, 16, 8192)
    text = report.describe().splitlines()
    assert len(text) == 5
    assert f"FLOPs {report.step.compute_s * 1e3:.2f} ms)" in text[1]
    assert text[3].startswith(f"memory: {report.weight_bytes / 1e9:.1f} GB weights + {report.kv_bytes / 1e9:.1f} GB")


def test_prefill_time_refuses_an_mfu_of_zero_and_says_what_mfu_is():
    with pytest.raises(ValueError, match=r"it is the fraction of peak FLOP/s achieved"):
        prefill_time("llama3-70b", "tpu-v5e", 16, 8192, mfu=0)


def test_an_mfu_typed_as_a_string_says_to_drop_the_quotes():
    with pytest.raises(ValueError, match=r"mfu must be a number, got the string '0.4'; pass 0.4 without quotes"):
        prefill_time("llama3-70b", "tpu-v5e", 16, 8192, mfu="0.4")


def test_a_chip_count_typed_as_a_string_is_named():
    with pytest.raises(ValueError, match=r"n_chips must be a number, got the string '16'"):
        prefill_time("llama3-70b", "tpu-v5e", "16", 8192, mfu=0.4)


def test_decode_step_time_accepts_numpy_integers_and_floats_like_python_numbers():
    assert decode_step_time("llama3-70b", "tpu-v5e", np.int64(16), np.int64(32), np.float64(8192.0)) == \
        decode_step_time("llama3-70b", "tpu-v5e", 16, 32, 8192)


def test_prefill_time_accepts_numpy_integers_and_floats_like_python_numbers():
    assert prefill_time("llama3-70b", "tpu-v5e", np.int16(16), np.int64(8192), np.float32(0.5)) == \
        pytest.approx(prefill_time("llama3-70b", "tpu-v5e", 16, 8192, 0.5), rel=1e-7)


def test_step_time_bound_refusal_states_what_is_needed_what_there_is_and_the_batch_that_fits():
    # 26 GB of weights + 240 caches of 1 GB on 8 v5e chips of 16 GB: 266 GB needed, 128 GB there, and the 102 GB
    # left after the weights hold 102 caches.
    with pytest.raises(ValueError) as err:
        step_time_bound(batch=240, kv_bytes_per_sequence=1e9, param_bytes=26e9, param_count=13e9, chip="tpu-v5e",
                        n_chips=8)
    message = str(err.value)
    for part in (r"\bbatch 240 does not fit\b", r"\bneeds 266\.0 GB\b", r"\(26\.0 GB of weights \+ 240\.0 GB of KV cache\)",
                 r"\b8 x tpu-v5e have 128\.0 GB\b", r"\bat most 102 sequences fit\b"):
        assert re.search(part, message), (part, message)
    with pytest.raises(ValueError, match=r"\bneeds 130\.0 GB\b.*\bthe weights alone exceed it\b"):
        step_time_bound(batch=1, kv_bytes_per_sequence=1e9, param_bytes=129e9, param_count=64e9, chip="tpu-v5e",
                        n_chips=8)


def test_weights_that_exactly_fill_the_chips_leave_room_for_no_sequence_rather_than_exceeding_them():
    with pytest.raises(ValueError, match=r"\bat most 0 sequences fit\b"):  # 128 GB of weights on 8 x 16 GB
        step_time_bound(batch=1, kv_bytes_per_sequence=1e9, param_bytes=128e9, param_count=64e9, chip="tpu-v5e",
                        n_chips=8)
