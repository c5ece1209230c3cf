"""Claims M1-M5 of book/claims.md: LLaMA-2-13B's weights and KV cache on 8 x TPU v5e (tolerance 2%).

The Scaling Book's tables label their memory column GiB but compute in 1e9 bytes; we compare in 1e9 bytes.
"""

import pytest

from scaling_lib.hardware import get_chip
from scaling_lib.inference import decode_step_time, decode_throughput, step_time_bound
from scaling_lib.memory import kv_cache_bytes, memory_footprint, param_bytes
from scaling_lib.models import get_model, param_count

REL = 0.02
LLAMA2_13B = get_model("llama2-13b")
CONTEXT = 8192
V5E = get_chip("tpu-v5e")
N_CHIPS = 8


def test_m1_llama2_13b_has_13e9_params_and_26e9_bf16_bytes():
    assert param_count(LLAMA2_13B) == pytest.approx(13e9, rel=REL)
    assert param_bytes(LLAMA2_13B, "bf16") == pytest.approx(26e9, rel=REL)


def test_m2_one_8k_sequence_kv_cache_is_6_71e9_bytes_6_25_gib():
    kv = kv_cache_bytes(LLAMA2_13B, CONTEXT, batch=1, dtype="bf16")
    assert kv == pytest.approx(6.71e9, rel=REL)
    assert kv / 2**30 == pytest.approx(6.25, rel=REL)


def test_m3_four_caches_exceed_weights_and_batch_240_needs_1_6e12_bytes():
    one = kv_cache_bytes(LLAMA2_13B, CONTEXT)
    assert 3 * one < param_bytes(LLAMA2_13B) < 4 * one
    assert kv_cache_bytes(LLAMA2_13B, CONTEXT, batch=240) == pytest.approx(1.6e12, rel=REL)


@pytest.mark.parametrize("batch, total_bytes, step_ms, tokens_per_s, fits", [
    (1, 32.7e9, 4.98, 200.6, True),
    (16, 133.2e9, 20.30, None, False),
    (240, None, None, 963.5, False),
])
def test_m4_memory_bound_step_table_mha(batch, total_bytes, step_ms, tokens_per_s, fits):
    footprint = memory_footprint(LLAMA2_13B, V5E, N_CHIPS, batch, CONTEXT)
    step = decode_step_time(LLAMA2_13B, V5E, N_CHIPS, batch, CONTEXT)
    assert footprint.fits is fits
    if total_bytes is not None:
        assert footprint.total_bytes == pytest.approx(total_bytes, rel=REL)
    if step_ms is not None:
        assert step.total_s * 1e3 == pytest.approx(step_ms, rel=REL)
    if tokens_per_s is not None:
        assert decode_throughput(LLAMA2_13B, V5E, N_CHIPS, batch, CONTEXT) == pytest.approx(tokens_per_s, rel=REL)
    # The general step time equals the pure memory-bound one: the MLP FLOP term stays below the weight load.
    assert step.bound == "memory"


def _gqa_1_to_5_step(batch):
    """The source shrinks only the KV cache (K = 8 of 40 heads) and keeps the 26e9 B of MHA weights."""
    gqa = LLAMA2_13B.with_(n_kv_heads=8)
    return step_time_bound(batch=batch, kv_bytes_per_sequence=kv_cache_bytes(gqa, CONTEXT),
                           param_bytes=param_bytes(LLAMA2_13B), param_count=param_count(LLAMA2_13B),
                           chip=V5E, n_chips=N_CHIPS), gqa


def test_m5_gqa_1_to_5_batch16_47e9_batch64_fits_batch240_4529_tokens_per_s():
    _, gqa = _gqa_1_to_5_step(16)
    assert gqa.group_size == 5
    total_16 = param_bytes(LLAMA2_13B) + kv_cache_bytes(gqa, CONTEXT, batch=16)
    assert total_16 == pytest.approx(47.44e9, rel=REL)
    capacity = N_CHIPS * V5E.hbm_capacity
    assert param_bytes(LLAMA2_13B) + kv_cache_bytes(gqa, CONTEXT, batch=64) <= capacity
    assert param_bytes(LLAMA2_13B) + kv_cache_bytes(LLAMA2_13B, CONTEXT, batch=64) > capacity
    step_240, _ = _gqa_1_to_5_step(240)
    assert 240 / step_240.total_s == pytest.approx(4529, rel=REL)
    # LLaMA-3-8B ships grouped-query attention with 8 KV heads.
    assert get_model("llama3-8b").n_kv_heads == 8
