"""Claims M1-M5 of book/claims.md: LLaMA-2-13B's weights and KV cache on 8 x TPU v5e (tolerance: the ledger's REL).

The Scaling Book's tables label their memory column GiB but compute in 1e9 bytes; we compare in 1e9 bytes. Every
number a source publishes is read from the claims ledger (`published(key)`).
"""

import pytest

from scaling_lib.book.claims import REL, published
from scaling_lib.book.claims.memory import GQA_KV_HEADS
from scaling_lib.hardware import get_chip
from scaling_lib.inference import decode_step_time, decode_step_time_kv_heads, decode_throughput
from scaling_lib.memory import kv_cache_bytes, memory_footprint, memory_footprint_kv_heads, param_bytes
from scaling_lib.models import get_model, param_count

LLAMA2_13B = get_model("llama2-13b")
CONTEXT = 8192
V5E = get_chip("tpu-v5e")
N_CHIPS = 8


def test_m1_llama2_13b_has_13e9_params_and_26e9_bf16_bytes():
    assert param_count(LLAMA2_13B) == pytest.approx(published("M1 params"), rel=REL)
    assert param_bytes(LLAMA2_13B, "bf16") == pytest.approx(published("M1 bf16 bytes"), rel=REL)


def test_m2_one_8k_sequence_kv_cache_is_6_71e9_bytes_6_25_gib():
    kv = kv_cache_bytes(LLAMA2_13B, CONTEXT, batch=1, dtype="bf16")
    assert kv == pytest.approx(published("M2"), rel=REL)
    assert kv == pytest.approx(published("M2 in GiB"), rel=REL)


def test_m3_four_caches_exceed_weights_and_batch_240_needs_1_6e12_bytes():
    one = kv_cache_bytes(LLAMA2_13B, CONTEXT)
    assert 3 * one < param_bytes(LLAMA2_13B) < 4 * one
    assert kv_cache_bytes(LLAMA2_13B, CONTEXT, batch=240) == pytest.approx(published("M3 batch 240"), rel=REL)


@pytest.mark.parametrize("batch, total_key, step_key, throughput_key, fits", [
    (1, "M4 batch 1 total", "M4 batch 1 step time", "M4 batch 1 throughput", True),
    (16, "M4 batch 16 total", "M4 batch 16 step time", None, False),
    (240, None, None, "M4 batch 240 throughput", False),
])
def test_m4_memory_bound_step_table_mha(batch, total_key, step_key, throughput_key, fits):
    footprint = memory_footprint(LLAMA2_13B, V5E, N_CHIPS, batch, CONTEXT)
    step = decode_step_time(LLAMA2_13B, V5E, N_CHIPS, batch, CONTEXT)
    assert footprint.fits is fits
    if total_key is not None:
        assert footprint.total_bytes == pytest.approx(published(total_key), rel=REL)
    if step_key is not None:
        assert step.total_s == pytest.approx(published(step_key), rel=REL)
    if throughput_key is not None:
        assert decode_throughput(LLAMA2_13B, V5E, N_CHIPS, batch, CONTEXT) == pytest.approx(published(throughput_key),
                                                                                            rel=REL)
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
    step_240 = decode_step_time_kv_heads(LLAMA2_13B, GQA_KV_HEADS, V5E, N_CHIPS, 240, CONTEXT)
    assert 240 / step_240.total_s == pytest.approx(published("M5 batch 240 throughput"), rel=REL)
    # Hand derivation: still memory-bound at batch 240, so the step is (weights + 240 caches) / (n W).
    assert step_240.bound == "memory"
    assert step_240.total_s == pytest.approx((param_bytes(LLAMA2_13B) + kv_cache_bytes(gqa, CONTEXT, batch=240))
                                             / (N_CHIPS * V5E.hbm_bandwidth), rel=1e-9)
    # LLaMA-3-8B ships grouped-query attention with 8 KV heads.
    assert get_model("llama3-8b").n_kv_heads == GQA_KV_HEADS
