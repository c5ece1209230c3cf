"""Claims M1-M5 of book/claims.md: LLaMA-2-13B's weights and KV cache on 8 x TPU v5e (tolerance: the ledger's REL).

The Scaling Book's tables label their memory column GiB but compute in 1e9 bytes; we compare in 1e9 bytes. Every
number a source publishes is read from the claims ledger (`published(key)`).
"""

import pytest

from scaling_lib.book.claims import REL, published
from scaling_lib.book.claims.memory import (GQA_KV_HEADS, M4_SOURCE_INPUTS, source_footprint, source_largest_batch,
                                            source_step)
from scaling_lib.hardware import get_chip
from scaling_lib.inference import decode_step_time, decode_step_time_kv_heads, decode_throughput
from scaling_lib.memory import kv_cache_bytes, max_batch_size, memory_footprint, memory_footprint_kv_heads, param_bytes
from scaling_lib.models import get_model, param_count

from tests import for_each

LLAMA2_13B = get_model("llama2-13b")
CONTEXT = 8192
V5E = get_chip("tpu-v5e")
N_CHIPS = 8


def test_m1_to_m3_llama2_13b_weighs_26e9_bytes_and_four_8k_caches_outweigh_it():
    # M1: 13e9 parameters, 26e9 bytes in bf16.
    assert param_count(LLAMA2_13B) == pytest.approx(published("M1 params"), rel=REL)
    assert param_bytes(LLAMA2_13B, "bf16") == pytest.approx(published("M1 bf16 bytes"), rel=REL)
    # M2: one 8k sequence's cache is 6.71e9 bytes, 6.25 GiB.
    one = kv_cache_bytes(LLAMA2_13B, CONTEXT, batch=1, dtype="bf16")
    assert one == pytest.approx(published("M2"), rel=REL)
    assert one == pytest.approx(published("M2 in GiB"), rel=REL)
    # M3: four caches exceed the weights, and batch 240 needs 1.6e12 bytes.
    assert 3 * one < param_bytes(LLAMA2_13B) < 4 * one
    assert kv_cache_bytes(LLAMA2_13B, CONTEXT, batch=240) == pytest.approx(published("M3 batch 240"), rel=REL)


@for_each([
    (1, "M4 batch 1 total", "M4 batch 1 step time", "M4 batch 1 throughput", True),
    (16, "M4 batch 16 total", "M4 batch 16 step time", None, False),
    (240, None, None, "M4 batch 240 throughput", False),
], ids=str)
def test_m4_memory_bound_step_table_mha(batch, total_key, step_key, throughput_key, fits):
    footprint = memory_footprint(LLAMA2_13B, V5E, N_CHIPS, batch, CONTEXT)
    # the source prices batches that do not fit (16, 240): priced as if they did, and refused by default
    step = decode_step_time(LLAMA2_13B, V5E, N_CHIPS, batch, CONTEXT, check_capacity=False)
    assert footprint.fits is fits
    if not fits:
        with pytest.raises(ValueError, match=r"does not fit: it needs .* GB .* but 8 x tpu-v5e have 128.0 GB"):
            decode_step_time(LLAMA2_13B, V5E, N_CHIPS, batch, CONTEXT)
    if total_key is not None:
        assert footprint.total_bytes == pytest.approx(published(total_key), rel=REL)
    if step_key is not None:
        assert step.total_s == pytest.approx(published(step_key), rel=REL)
    if throughput_key is not None:
        assert decode_throughput(LLAMA2_13B, V5E, N_CHIPS, batch, CONTEXT, check_capacity=fits) == pytest.approx(
            published(throughput_key), rel=REL)
    # The general step time equals the pure memory-bound one: the MLP FLOP term stays below the weight load.
    assert step.bound == "memory"


def test_m5_gqa_1_to_5_batch16_47e9_batch64_fits_batch240_4529_tokens_per_s():
    # The source's GQA 1:5 table shrinks only the KV cache (K = 40 -> 8) and keeps the 26e9 B of MHA weights.
    assert LLAMA2_13B.n_kv_heads // GQA_KV_HEADS == 5
    gqa = LLAMA2_13B.with_(n_kv_heads=GQA_KV_HEADS)

    def footprint(batch):
        return memory_footprint_kv_heads(LLAMA2_13B, GQA_KV_HEADS, V5E, N_CHIPS, batch, CONTEXT)

    assert footprint(16).total_bytes == pytest.approx(published("M5 batch 16 total"), rel=REL)
    # Hand derivation (an independent oracle): the MHA weights plus B caches of the K = 8 model.
    for batch in (16, 64):
        assert footprint(batch).total_bytes == pytest.approx(
            param_bytes(LLAMA2_13B) + kv_cache_bytes(gqa, CONTEXT, batch=batch), rel=1e-12)
    assert footprint(64).fits and not memory_footprint(LLAMA2_13B, V5E, N_CHIPS, 64, CONTEXT).fits
    step_240 = decode_step_time_kv_heads(LLAMA2_13B, GQA_KV_HEADS, V5E, N_CHIPS, 240, CONTEXT, check_capacity=False)
    with pytest.raises(ValueError, match="the largest batch that fits is 75"):  # the source's 240 does not fit
        decode_step_time_kv_heads(LLAMA2_13B, GQA_KV_HEADS, V5E, N_CHIPS, 240, CONTEXT)
    assert 240 / step_240.total_s == pytest.approx(published("M5 batch 240 throughput"), rel=REL)
    # Hand derivation: still memory-bound at batch 240, so the step is (weights + 240 caches) / (n W).
    assert step_240.bound == "memory"
    assert step_240.total_s == pytest.approx((param_bytes(LLAMA2_13B) + kv_cache_bytes(gqa, CONTEXT, batch=240))
                                             / (N_CHIPS * V5E.hbm_bandwidth), rel=1e-9)
    # LLaMA-3-8B ships grouped-query attention with 8 KV heads, but for 32 query heads: G = 4, not GQA 1:5's G = 5.
    assert get_model("llama3-8b").n_kv_heads == GQA_KV_HEADS
    assert get_model("llama3-8b").group_size == 4 != LLAMA2_13B.n_heads // GQA_KV_HEADS


# The source's tables print 4 significant digits; its rounded inputs must reproduce them to that precision, where
# the exact inputs land 0.1-0.2% away. Half a unit of the last printed digit of 4.98 ms is 0.1%.
PRINTED = 1e-3
SOURCE_ROWS = [  # (ledger key, the source-input computation)
    ("M4 batch 1 total", lambda: source_footprint(1).total_bytes),
    ("M4 batch 1 step time", lambda: source_step(1).total_s),
    ("M4 batch 1 throughput", lambda: 1 / source_step(1).total_s),
    ("M4 batch 16 total", lambda: source_footprint(16).total_bytes),
    ("M4 batch 16 step time", lambda: source_step(16).total_s),
    ("M4 batch 240 throughput", lambda: 240 / source_step(240).total_s),
    ("M5 batch 16 total", lambda: source_footprint(16, GQA_KV_HEADS).total_bytes),
    ("M5 batch 240 throughput", lambda: 240 / source_step(240, GQA_KV_HEADS).total_s),
]


@for_each(SOURCE_ROWS, ids=[key for key, _ in SOURCE_ROWS])
def test_m4_m5_the_sources_rounded_inputs_reproduce_its_tables_to_the_printed_digits(key, compute):
    assert compute() == pytest.approx(published(key), rel=PRINTED)


def test_m4_m5_rounded_inputs_are_26e9_weights_and_6_7e9_per_cache_and_hand_derivations_agree():
    # Hand derivations: (26 + 16 x 6.7) = 133.2; 240 / ((26 + 240 x 6.7) / 6560) = 963.5; GQA divides 6.7 by 5.
    assert M4_SOURCE_INPUTS["param_bytes"] == published("M1 bf16 bytes")
    assert M4_SOURCE_INPUTS["kv_bytes_per_sequence"] == pytest.approx(kv_cache_bytes(LLAMA2_13B, CONTEXT), rel=0.002)
    assert source_footprint(16).total_bytes == pytest.approx(133.2e9, rel=1e-12)
    assert 240 / source_step(240).total_s == pytest.approx(240 / ((26e9 + 240 * 6.7e9) / (8 * 8.2e11)), rel=1e-12)
    assert source_footprint(16, GQA_KV_HEADS).total_bytes == pytest.approx(26e9 + 16 * 6.7e9 / 5, rel=1e-12)
    # The exact inputs are 0.1-0.3% off the same rows: why chapter 4 shows both columns.
    for exact, key in ((memory_footprint(LLAMA2_13B, V5E, N_CHIPS, 16, CONTEXT).total_bytes, "M4 batch 16 total"),
                       (decode_throughput(LLAMA2_13B, V5E, N_CHIPS, 240, CONTEXT, check_capacity=False),
                        "M4 batch 240 throughput")):
        assert 1e-3 < abs(exact / published(key) - 1) < 3e-3
    with pytest.raises(ValueError, match="n_kv_heads"):
        source_step(1, n_kv_heads=4)


def test_m4_by_the_sources_own_numbers_batch_15_is_the_last_that_fits_and_gqa_batch_240_never_fits():
    # "Runs out of memory beyond batch 16" (the TPU inference chapter) contradicts the table it summarises: batch 16
    # needs 133.2e9 B of 128e9 B. Hand derivation: floor((128 - 26) / 6.7) = 15.
    capacity = N_CHIPS * V5E.hbm_capacity
    assert source_largest_batch() == 15 == max_batch_size(LLAMA2_13B, V5E, N_CHIPS, CONTEXT)
    assert source_footprint(15).fits and not source_footprint(16).fits
    # "With GQA throughput keeps rising toward batch 240": 26 + 240 x 1.34 = 347.6e9 B, 2.7 x the HBM.
    gqa_240 = source_footprint(240, GQA_KV_HEADS)
    assert gqa_240.total_bytes == pytest.approx(347.6e9, rel=1e-12) and not gqa_240.fits
    assert gqa_240.total_bytes / capacity > 2.5
    assert source_largest_batch(GQA_KV_HEADS) == 76  # floor((128 - 26) / 1.34)
    assert memory_footprint_kv_heads(LLAMA2_13B, GQA_KV_HEADS, V5E, N_CHIPS, 240, CONTEXT).total_bytes > capacity
