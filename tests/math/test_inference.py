"""scaling_lib.inference: the decode step's bounds by hand in every dtype, the context where the KV read overtakes
the FLOPs, the prefill time, and `explain_decode` (chapter 5's explorer), which must agree with the functions it
explains and print their numbers with their units."""

import dataclasses
import itertools
import math
import re

import numpy as np
import pytest

from scaling_lib.hardware import get_chip
from scaling_lib.inference import (decode_step_time, decode_step_time_kv_heads, decode_throughput, explain_decode,
                                   full_hbm_step_time, kv_compute_crossover_context, prefill_time, step_time_bound)
from scaling_lib.memory import max_batch_size, memory_footprint
from scaling_lib.models import Transformer, get_model, param_count
from scaling_lib.roofline import critical_batch_size

from tests import for_each

H100_W, H100_BF16, H100_FP8 = 3.35e12, 9.89e14, 1.979e15  # H100 SXM data sheet: HBM B/s, dense FLOP/s
# A 2-layer model whose parameters are counted by hand: attention 64 x 64 + 64 x 32 x 2 + 64 x 64 = 12,288 a layer,
# FFN 3 x 64 x 128 = 24,576 a layer, two 256 x 64 tables: P = 106,496, of which 90,112 in matmuls (the input table
# is a lookup); 2 x 2 x 2 x 16 x 2 = 256 B of bf16 cache a token.
SMALL = dict(n_layers=2, d_model=64, d_ff=128, n_heads=4, n_kv_heads=2, head_dim=16, vocab_size=256)


# --- The step bound: KV read + max(weight read, FLOPs), by hand -----------------------------------------------------
def test_step_time_bound_by_hand_on_two_h100s_in_fp8_and_for_an_empty_batch():
    step = step_time_bound(batch=10, kv_bytes_per_sequence=1e9, param_bytes=2e10, param_count=1e10, chip="h100",
                           n_chips=2, compute_dtype="fp8")
    assert step.kv_s == pytest.approx(10 * 1e9 / (2 * H100_W), rel=1e-12)
    assert step.weight_s == pytest.approx(2e10 / (2 * H100_W), rel=1e-12)
    assert step.compute_s == pytest.approx(2 * 10 * 1e10 / (2 * H100_FP8), rel=1e-12)
    assert step.total_s == pytest.approx(step.kv_s + step.weight_s) and step.bound == "memory"
    empty = step_time_bound(batch=0, kv_bytes_per_sequence=0, param_bytes=2e10, param_count=1e10, chip="h100")
    assert (empty.kv_s, empty.compute_s) == (0, 0) and empty.weight_s == pytest.approx(2e10 / H100_W, rel=1e-12)


def test_a_batch_that_exactly_fills_the_chips_is_priced_and_one_more_is_refused_saying_what_fits():
    # 2 x 81,559 MiB of HBM, exactly: 10 GiB of weights and 4 caches sharing the rest.
    capacity = 2 * 81559 * 2**20
    args = dict(kv_bytes_per_sequence=(capacity - 10 * 2**30) / 4, param_bytes=10 * 2**30, param_count=5e9,
                chip="h100", n_chips=2)
    step = step_time_bound(batch=4, **args)
    assert step.kv_s == pytest.approx((capacity - 10 * 2**30) / (2 * H100_W), rel=1e-12)
    with pytest.raises(ValueError, match=r"\bbatch 5 does not fit\b"):
        step_time_bound(batch=5, **args)
    assert step_time_bound(batch=5, **args, check_capacity=False).kv_s > step.kv_s
    # 26 GB of weights + 240 caches of 1 GB on 8 v5e chips of 16 GB: 266 GB needed, 128 GB there, and the 102 GB
    # left after the weights hold 102 caches.
    with pytest.raises(ValueError) as err:
        step_time_bound(batch=240, kv_bytes_per_sequence=1e9, param_bytes=26e9, param_count=13e9, chip="tpu-v5e",
                        n_chips=8)
    message = str(err.value)
    for part in (r"\bbatch 240 does not fit\b", r"\bneeds 266\.0 GB\b",
                 r"\(26\.0 GB of weights \+ 240\.0 GB of KV cache\)", r"\b8 x tpu-v5e have 128\.0 GB\b",
                 r"\bat most 102 sequences fit\b"):
        assert re.search(part, message), (part, message)
    with pytest.raises(ValueError, match=r"\bneeds 130\.0 GB\b.*\bthe weights alone exceed it\b"):
        step_time_bound(batch=1, kv_bytes_per_sequence=1e9, param_bytes=129e9, param_count=64e9, chip="tpu-v5e",
                        n_chips=8)
    # Weights that exactly fill the chips leave room for no sequence rather than exceeding them.
    with pytest.raises(ValueError, match=r"\bat most 0 sequences fit\b"):  # 128 GB of weights on 8 x 16 GB
        step_time_bound(batch=1, kv_bytes_per_sequence=1e9, param_bytes=128e9, param_count=64e9, chip="tpu-v5e",
                        n_chips=8)


def test_decode_step_time_by_hand_with_three_dtypes_spread_over_every_chip():
    # LLaMA-3-8B, 2 sequences of 1,000 tokens, int8 weights, fp8 cache, fp8 math on one H100. A token's cache is
    # 2 x 32 layers x 8 heads x 128 x 1 B = 65,536 B.
    p = param_count("llama3-8b")
    step = decode_step_time("llama3-8b", "h100", 1, 2, 1000, "int8", "fp8", "fp8")
    assert step.kv_s == pytest.approx(2 * 1000 * 65536 / H100_W, rel=1e-12)
    assert step.weight_s == pytest.approx(p / H100_W, rel=1e-12)
    assert step.compute_s == pytest.approx(2 * 2 * p / H100_FP8, rel=1e-12)
    # On 2 H100s, 3 sequences of 1,000 tokens in bf16: both chips' HBM and FLOP/s work on the step.
    for step in (decode_step_time("llama3-8b", "h100", 2, 3, 1000),
                 decode_step_time_kv_heads("llama3-8b", 8, "h100", 2, 3, 1000)):
        assert step.kv_s == pytest.approx(3 * 1000 * 131072 / (2 * H100_W), rel=1e-12)
        assert step.weight_s == pytest.approx(2 * p / (2 * H100_W), rel=1e-12)
        assert step.compute_s == pytest.approx(2 * 3 * p / (2 * H100_BF16), rel=1e-12)
    # An empty batch reads no cache; no context still multiplies the weights.
    assert decode_step_time("llama3-8b", "h100", 1, 0, 0).kv_s == 0
    assert decode_step_time("llama3-8b", "h100", 1, 3, 0).compute_s > 0
    # NumPy numbers price the same as Python ones.
    assert decode_step_time("llama3-70b", "tpu-v5e", np.int64(16), np.int64(32), np.float64(8192.0)) == \
        decode_step_time("llama3-70b", "tpu-v5e", 16, 32, 8192)


def test_decode_step_time_checks_capacity_with_the_dtypes_and_chips_it_is_given():
    # 141 GB of bf16 LLaMA-3-70B weights do not fit one 85.5 GB H100; in int8 (70.6 GB) or on two chips they do.
    with pytest.raises(ValueError, match=r"\bdoes not fit\b"):
        decode_step_time("llama3-70b", "h100", 1, 1, 1024)
    assert decode_step_time("llama3-70b", "h100", 1, 1, 1024, "int8").weight_s == pytest.approx(
        param_count("llama3-70b") / H100_W, rel=1e-12)
    assert decode_step_time("llama3-70b", "h100", 2, 1, 1024).weight_s > 0
    # 100 caches of 8,192 tokens of LLaMA-3-8B: 107 GB in bf16 (no room), 54 GB in int8 next to 16 GB of weights.
    with pytest.raises(ValueError, match=r"\bdoes not fit\b"):
        decode_step_time("llama3-8b", "h100", 1, 100, 8192)
    assert decode_step_time("llama3-8b", "h100", 1, 100, 8192, kv_dtype="int8").kv_s == pytest.approx(
        100 * 8192 * 65536 / H100_W, rel=1e-12)
    assert decode_step_time("llama3-8b", "h100", 1, 100, 8192, check_capacity=False).kv_s == pytest.approx(
        2 * 100 * 8192 * 65536 / H100_W, rel=1e-12)


def test_decode_step_time_kv_heads_reads_the_smaller_cache_and_the_unchanged_weights_by_hand():
    # LLaMA-2-13B (multi-head, K = 40) with K = 8: a token's cache 2 x 40 x 8 x 128 x 1 B (fp8) = 81,920 B; the
    # weights stay the multi-head model's, read in int8; fp8 math.
    p = param_count("llama2-13b")
    step = decode_step_time_kv_heads("llama2-13b", 8, "h100", 1, 3, 2000, "int8", "fp8", "fp8")
    assert step.kv_s == pytest.approx(3 * 2000 * 81920 / H100_W, rel=1e-12)
    assert step.weight_s == pytest.approx(p / H100_W, rel=1e-12)
    assert step.compute_s == pytest.approx(2 * 3 * p / H100_FP8, rel=1e-12)


def test_decode_step_time_kv_heads_checks_capacity_with_the_fewer_heads():
    # 20 caches of 4,096 tokens: 67 GB with 40 KV heads (26 GB of weights leave 59.5 GB), 13.4 GB with 8.
    assert decode_step_time_kv_heads("llama2-13b", 8, "h100", 1, 20, 4096).kv_s > 0
    with pytest.raises(ValueError, match=r"\bdoes not fit\b"):
        decode_step_time_kv_heads("llama2-13b", 40, "h100", 1, 20, 4096)
    assert decode_step_time_kv_heads("llama2-13b", 40, "h100", 1, 20, 4096, check_capacity=False).kv_s > 0
    # the weight dtype, the chip count and the KV dtype reach the check too: with 8 heads a cache of 16,384 tokens is
    # 2.68 GB; 24 of them (64.4 GB) fit next to int8 weights (13 GB) or on two chips, not next to bf16 weights (26 GB)
    # on one; 50 of them fit in int8 (67.1 GB) next to int8 weights, not in bf16.
    with pytest.raises(ValueError, match=r"\bdoes not fit\b"):
        decode_step_time_kv_heads("llama2-13b", 8, "h100", 1, 24, 16384)
    assert decode_step_time_kv_heads("llama2-13b", 8, "h100", 1, 24, 16384, "int8").kv_s > 0
    assert decode_step_time_kv_heads("llama2-13b", 8, "h100", 2, 24, 16384).kv_s > 0
    with pytest.raises(ValueError, match=r"\bdoes not fit\b"):
        decode_step_time_kv_heads("llama2-13b", 8, "h100", 1, 50, 16384, "int8", "bf16")
    assert decode_step_time_kv_heads("llama2-13b", 8, "h100", 1, 50, 16384, "int8", "int8").kv_s > 0


def test_decode_throughput_is_the_batch_over_the_step_in_the_dtypes_it_is_given():
    assert decode_throughput("llama3-8b", "h100", 1, 100, 8192, kv_dtype="int8") == pytest.approx(
        100 / decode_step_time("llama3-8b", "h100", 1, 100, 8192, kv_dtype="int8").total_s, rel=1e-12)
    with pytest.raises(ValueError, match=r"\bdoes not fit\b"):
        decode_throughput("llama3-8b", "h100", 1, 100, 8192)
    assert decode_throughput("llama3-8b", "h100", 1, 100, 8192, check_capacity=False) > 0
    step = decode_step_time("llama3-70b", "h100", 8, 64, 4096, "int8", "fp8", "fp8")
    assert decode_throughput("llama3-70b", "h100", 8, 64, 4096, "int8", "fp8", "fp8") == 64 / step.total_s
    # 400 sequences of 16 tokens: past B_crit (about 295 for bf16 weights on an H100), so the matmuls bound the
    # step and fp8 math (twice bf16's rate) raises the throughput.
    fp8 = decode_throughput("llama3-8b", "h100", 1, 400, 16, compute_dtype="fp8")
    assert fp8 == pytest.approx(400 / decode_step_time("llama3-8b", "h100", 1, 400, 16, compute_dtype="fp8").total_s,
                                rel=1e-12)
    assert fp8 > 1.2 * decode_throughput("llama3-8b", "h100", 1, 400, 16)


def test_throughput_rises_below_bcrit_is_flat_above_and_the_step_never_beats_the_weight_load():
    reports = [explain_decode("llama3-70b", "tpu-v5e", 16, batch, 4096, "int8", "int8", "bf16")
               for batch in (1, 2, 4, 16, 64, 119, 121, 256, 1024)]
    below = [r.tokens_per_s for r in reports if r.batch < r.critical_batch]
    above = [r.tokens_per_s for r in reports if r.batch > r.critical_batch]
    assert len(below) == 6 and all(b > a for a, b in zip(below, below[1:]))
    # Above B_crit both remaining terms grow in proportion to B: tokens per second saturate.
    assert above == pytest.approx([above[0]] * len(above), rel=1e-12) and above[0] > below[-1]
    for report in reports:
        assert report.step.total_s >= report.weight_bytes / (16 * get_chip("tpu-v5e").hbm_bandwidth)


def test_the_step_grows_with_batch_and_context_and_fp8_halves_a_memory_bound_one():
    model = get_model("llama3-70b")
    # a property of the formula, past the 171 sequences that fit too
    batches = (1, 4, 16, 64, 256, 1024)
    times = [decode_step_time(model, "tpu-v5e", 16, b, 4096, check_capacity=False).total_s for b in batches]
    assert times == sorted(times)
    rates = [decode_throughput(model, "tpu-v5e", 16, b, 4096, check_capacity=False) for b in batches]
    assert rates == sorted(rates)
    by_context = [decode_step_time(model, "tpu-v5e", 16, 32, s, check_capacity=False).total_s
                  for s in (128, 1024, 8192, 32768)]
    assert by_context == sorted(by_context)
    # Halving the bytes of weights and KV at most halves the step (FLOP term unchanged).
    bf16 = decode_step_time(model, "tpu-7x", 8, 64, 32768, check_capacity=False)
    fp8 = decode_step_time(model, "tpu-7x", 8, 64, 32768, "fp8", "fp8", "fp8")
    assert fp8.total_s == pytest.approx(bf16.total_s / 2, rel=0.01)


def test_full_hbm_step_time_is_capacity_over_bandwidth():
    assert full_hbm_step_time("h100") == pytest.approx(81559 * 2**20 / H100_W, rel=1e-12)  # 25.5 ms
    assert full_hbm_step_time("tpu-v5e") == pytest.approx(0.0195, rel=0.02)  # Scaling Book ch. 8: about 19 ms


# --- Prefill: 2 P T FLOPs at a fraction of peak ---------------------------------------------------------------------
@for_each([("all", 106_496), ("matmul", 90_112)], ids=str)
def test_prefill_time_by_hand_on_a_small_model(params, weights):
    small = Transformer(**SMALL)
    assert prefill_time(small, "h100", 2, 1000, 0.5, batch=3, compute_dtype="fp8", params=params) == pytest.approx(
        2 * weights * 3 * 1000 / (2 * H100_FP8 * 0.5), rel=1e-12)
    assert prefill_time(small, "h100", 1, 1000, 1.0, params=params) == pytest.approx(
        2 * weights * 1000 / H100_BF16, rel=1e-12)
    # Linear in tokens, inverse in chips and MFU.
    base = prefill_time("llama3-70b", "tpu-v5e", 16, 8192, mfu=0.4)
    assert math.isfinite(base) and base > 0
    assert prefill_time("llama3-70b", "tpu-v5e", 16, 16384, mfu=0.4) == pytest.approx(2 * base)
    assert prefill_time("llama3-70b", "tpu-v5e", 32, 8192, mfu=0.4) == pytest.approx(base / 2)
    assert prefill_time("llama3-70b", "tpu-v5e", 16, 8192, mfu=0.8) == pytest.approx(base / 2)
    # NumPy numbers price the same as Python ones (float32's MFU to its precision).
    assert prefill_time("llama3-70b", "tpu-v5e", np.int16(16), np.int64(8192), np.float32(0.5)) == \
        pytest.approx(prefill_time("llama3-70b", "tpu-v5e", 16, 8192, 0.5), rel=1e-7)


# --- Where the KV read overtakes the FLOPs ---------------------------------------------------------------------------
@for_each([("llama3-70b", "tpu-v5e"), ("llama3-70b", "tpu-7x"),
                                         ("llama2-13b", "tpu-v5e"), ("palm-540b", "tpu-v4")], ids=str)
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


def test_a_window_below_the_crossover_never_crosses_and_one_at_or_above_it_is_reached():
    assert kv_compute_crossover_context(get_model("llama3-8b").with_(sliding_window=128), "tpu-v5e") == float("inf")
    wide = get_model("llama3-8b").with_(sliding_window=100_000)
    assert kv_compute_crossover_context(wide, "tpu-v5e") == kv_compute_crossover_context("llama3-8b", "tpu-v5e")
    s_star = kv_compute_crossover_context("llama3-8b", "h100")
    assert kv_compute_crossover_context(get_model("llama3-8b").with_(sliding_window=math.ceil(s_star)),
                                        "h100") == s_star
    assert kv_compute_crossover_context(get_model("llama3-8b").with_(sliding_window=math.floor(s_star)),
                                        "h100") == float("inf")
    # SMALL: 256 B of bf16 cache a token and P = 106,496. On a chip of 2**40 B/s and 104 x 2**32 FLOP/s (chosen so
    # that every quotient is a power of two, exact in floating point), S* = 2 P W / (C x 256) = 2,048 tokens: a
    # window exactly there is reached, not skipped.
    chip = dataclasses.replace(get_chip("h100"), hbm_bandwidth=2.0**40, peak_flops_table=(("bf16", 104 * 2.0**32),))
    small = Transformer(**SMALL)
    assert kv_compute_crossover_context(small, chip) == 2048
    assert kv_compute_crossover_context(small.with_(sliding_window=2048), chip) == 2048
    assert kv_compute_crossover_context(small.with_(sliding_window=2047), chip) == float("inf")


# --- explain_decode: the step, the memory and the crossover of one configuration ---------------------------------
CONFIGS = [("llama2-13b", "tpu-v5e", 8), ("llama3-70b", "tpu-7x", 8), ("llama3-70b", "tpu-v5e", 16),
           ("llama3-8b", "h100", 1)]


@for_each(CONFIGS, ids=str)
def test_explain_decode_agrees_with_step_time_throughput_and_memory(model, chip, n_chips):
    for batch, context in ((1, 1024), (16, 8192), (256, 32768)):
        report = explain_decode(model, chip, n_chips, batch, context)
        assert report.step == decode_step_time(model, chip, n_chips, batch, context, check_capacity=False)
        assert report.tokens_per_s == pytest.approx(decode_throughput(model, chip, n_chips, batch, context,
                                                                      check_capacity=False), rel=1e-12)
        footprint = memory_footprint(model, chip, n_chips, batch, context)
        assert report.total_bytes == pytest.approx(footprint.total_bytes, rel=1e-12)
        assert report.fits is footprint.fits
        assert report.max_batch == max_batch_size(model, chip, n_chips, context)
        assert report.fits is (batch <= report.max_batch)  # fits exactly up to max_batch
        assert report.critical_batch == critical_batch_size(chip)


def test_explain_decode_gives_each_part_its_own_dtypes():
    # Three different dtypes, none the default, so a dtype left out or passed where another belongs shows.
    report = explain_decode("llama3-70b", "h100", 4, 8, 4096, "int8", "int4", "fp8")
    assert (report.model, report.chip, report.n_chips, report.batch, report.context_len) == \
        ("llama3-70b", "h100", 4, 8, 4096)
    assert (report.weight_dtype, report.kv_dtype, report.compute_dtype) == ("int8", "int4", "fp8")
    footprint = memory_footprint("llama3-70b", "h100", 4, 8, 4096, "int8", "int4")
    assert report.footprint == footprint
    assert report.weight_bytes == param_count("llama3-70b")  # int8: one byte a weight
    assert report.max_batch == max_batch_size("llama3-70b", "h100", 4, 4096, "int8", "int4")
    assert report.critical_batch == critical_batch_size("h100", "int8", "fp8")
    assert report.kv_crossover_context == kv_compute_crossover_context("llama3-70b", "h100", "int4", "fp8")
    assert report.step == decode_step_time("llama3-70b", "h100", 4, 8, 4096, "int8", "int4", "fp8")
    assert report.tokens_per_s == 8 / report.step.total_s
    assert explain_decode("llama3-70b", "h100", 8, 64, 4096, "int8", "fp8", "fp8").step == decode_step_time(
        "llama3-70b", "h100", 8, 64, 4096, "int8", "fp8", "fp8")


def test_a_batch_that_does_not_fit_is_reported_with_the_largest_that_does_not_refused():
    report = explain_decode("llama2-13b", "tpu-v5e", 8, 16, 8192)
    assert not report.fits
    assert memory_footprint("llama2-13b", "tpu-v5e", 8, report.max_batch, 8192).fits
    assert not memory_footprint("llama2-13b", "tpu-v5e", 8, report.max_batch + 1, 8192).fits
    text = report.describe()
    assert "does NOT fit" in text and f"at most batch {report.max_batch}" in text
    assert f"{report.step.total_s * 1e3:.2f} ms" in text
    assert report.dominant_term == "kv"
    weights_alone = explain_decode("llama3-70b", "h100", 1, 1, 1024)  # 141 GB of bf16 weights on one 86 GB chip
    assert not weights_alone.fits and weights_alone.max_batch == 0


@for_each([
    (1, 128, "weights", "loading the weights", "memory"),  # short context, small batch
    (1024, 128, "flops", "the matmul FLOPs", "compute"),  # batch well above B_crit
    (1024, 32768, "kv", "reading the KV cache", "compute"),  # long context: the KV read even at batch 1024
], ids=str)
def test_the_dominant_term_moves_from_weights_to_flops_to_kv_and_describe_names_it(batch, context, dominant, term,
                                                                                   bound):
    report = explain_decode("llama3-70b", "tpu-7x", 8, batch, context)
    assert report.dominant_term == dominant and report.step.bound == bound
    assert re.search(rf"\blargest term: {term}; the matmuls are {bound}-bound\b", report.describe())


def _numbers(text):
    return [float(x.replace(",", "")) for x in re.findall(r"\d[\d,]*(?:\.\d+)?", text)]


def test_describe_states_each_term_in_ms_the_throughput_in_tokens_per_s_and_the_memory_in_gb_in_five_lines():
    report = explain_decode("llama3-8b", "h100", 1, 4, 2048)  # fits: 16 GB of weights + 4 x 0.27 GB of KV on 86 GB
    head, step, rate, memory, bound = report.describe().splitlines()
    assert re.search(r"\bllama3-8b on 1 x h100, batch 4, context 2,048 tokens\b", head)
    assert re.search(r"\bweights bf16, KV bf16, math bf16\b", head)
    s = report.step
    assert re.search(rf"\b{s.total_s * 1e3:.2f} ms = KV {s.kv_s * 1e3:.2f} ms \+ max\(weights "
                     rf"{s.weight_s * 1e3:.2f} ms, FLOPs {s.compute_s * 1e3:.2f} ms\)", step)
    # The weights load dominates at batch 4: 16.06 GB over 3.35 TB/s is 4.79 ms.
    assert _numbers(step)[2] == pytest.approx(16.06e9 / 3.35e12 * 1e3, abs=0.01)
    assert re.search(rf"\b{report.tokens_per_s:,.0f} tokens/s \({report.tokens_per_s / 4:,.1f} per sequence\)",
                     rate)
    assert re.search(rf"\bmemory: {report.weight_bytes / 1e9:.1f} GB weights \+ {report.kv_bytes / 1e9:.1f} GB KV = "
                     rf"{report.total_bytes / 1e9:.1f} GB of 86 GB HBM: fits\b", memory)  # 81,559 MiB
    assert re.search(r"\bloading the weights\b.*\bmemory-bound \(B_crit = \d+\)", bound)
    assert re.search(rf"\babove {report.kv_crossover_context:,.0f} tokens of context\b", bound)


def test_describe_rounds_each_memory_figure_from_its_own_bytes():
    # Byte counts whose GB values sit exactly on a rounding tie (1.35, 0.45, 1.75, 85.5), so that a figure computed
    # from anything but its own bytes over 1e9 prints another digit.
    report = explain_decode("llama3-8b", "h100", 1, 4, 2048)
    tie = dataclasses.replace(report, footprint=dataclasses.replace(report.footprint, weight_bytes=1.35e9,
                                                                    kv_bytes=0.45e9, capacity_bytes=85.5e9))
    assert re.search(r"\b1\.4 GB weights \+ 0\.5 GB KV = 1\.8 GB of 86 GB HBM: fits\b", tie.describe())
    total = dataclasses.replace(tie, footprint=dataclasses.replace(tie.footprint, kv_bytes=0.4e9))
    assert re.search(r" = 1\.8 GB of 86 GB HBM\b", total.describe())  # 1.75 GB in all


# --- Bad input: a ValueError naming the argument and the fix ---------------------------------------------------------
def _explain(**kwargs):
    return explain_decode(**(dict(model="llama2-13b", chip="tpu-v5e", n_chips=8, batch=8, context_len=8192) | kwargs))


def _bound(**kwargs):
    return step_time_bound(**(dict(batch=1, kv_bytes_per_sequence=1e6, param_bytes=1e9, param_count=5e8,
                                   chip="h100") | kwargs))


def _decode(function, **kwargs):
    args = dict(model="llama3-8b", chip="h100", n_chips=1, batch=1, context_len=1024) | kwargs
    return function(**args) if function is decode_step_time else function(**args, n_kv_heads=2)


def _prefill(**kwargs):
    return prefill_time(**(dict(model="llama3-8b", chip="h100", n_chips=1, prompt_len=1024, mfu=0.5) | kwargs))


@for_each([
    (lambda: _explain(batch=0), r"\bbatch must be a positive integer\b"),
    (lambda: _explain(context_len=0), r"\bcontext_len must be a positive integer\b"),
    (lambda: _explain(context_len=10.5), r"\bcontext_len must be a positive integer\b"),
    (lambda: _explain(n_chips=2.5), r"\bn_chips must be a positive integer\b"),
    (lambda: _explain(n_chips=0), r"\bn_chips must be a positive integer\b"),
    (lambda: _explain(chip="tpu-v9"), "unknown chip 'tpu-v9'"),
    (lambda: _explain(model="gpt-9"), "unknown model 'gpt-9'"),
    (lambda: _explain(kv_dtype="int3"), "unknown dtype 'int3'"),
    (lambda: _explain(chip="ironwood", compute_dtype="int8"), "no native int8 matrix rate"),
    (lambda: _bound(batch=-1), r"\bbatch must be non-negative\b"),
    (lambda: _bound(kv_bytes_per_sequence=-1.0), r"\bkv_bytes_per_sequence must be non-negative\b"),
    (lambda: _bound(param_bytes=0), r"\bparam_bytes must be positive\b"),
    (lambda: _bound(param_count=0), r"\bparam_count must be positive\b"),
    (lambda: _bound(n_chips=0), r"\bn_chips must be a positive integer\b"),
    (lambda: _bound(check_capacity="no"), r"\bcheck_capacity\b"),
    *[(lambda f=f, kwargs=kwargs: _decode(f, **kwargs), rf"\b{words}\b")
      for f in (decode_step_time, decode_step_time_kv_heads) for kwargs, words in [
          (dict(batch=-1), "batch must be a non-negative integer"),
          (dict(context_len=-1), "context_len must be non-negative"),
          (dict(n_chips=0), "n_chips must be a positive integer")]],
    (lambda: decode_step_time_kv_heads("llama2-13b", 0, "h100", 1, 1, 1024),
     r"\bn_kv_heads must be a positive integer\b"),
    (lambda: decode_throughput("llama3-8b", "h100", 1, 0, 8192), r"\bbatch must be a positive integer\b"),
    *[(lambda f=f, args=args: f(*args, check_capacity="no"), r"\bcheck_capacity must be True or False\b")
      for f, args in [(decode_step_time, ("llama3-8b", "h100", 1, 1, 1024)),
                      (decode_step_time_kv_heads, ("llama3-8b", 4, "h100", 1, 1, 1024)),
                      (decode_throughput, ("llama3-8b", "h100", 1, 1, 1024))]],
    (lambda: _prefill(n_chips=0), r"\bn_chips must be a positive integer\b"),
    (lambda: _prefill(prompt_len=0), r"\bprompt_len must be positive\b"),
    (lambda: _prefill(batch=0), r"\bbatch must be a positive integer\b"),
    (lambda: _prefill(params="embeddings"), r"\bunknown params 'embeddings'; use one of all, matmul\b"),
    (lambda: _prefill(mfu=0), r"it is the fraction of peak FLOP/s achieved"),
    (lambda: _prefill(mfu="0.4"), r"mfu must be a number, got the string '0.4'; pass 0.4 without quotes"),
    (lambda: _prefill(n_chips="16"), r"n_chips must be a number, got the string '16'"),
], ids=str)
def test_bad_input_gets_a_value_error_naming_the_argument_and_the_fix(call, words):
    with pytest.raises(ValueError, match=words):
        call()
