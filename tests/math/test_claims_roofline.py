"""Claims R1-R5 of book/claims.md: rooflines and the critical batch size (default tolerance 2%)."""

import pytest

from scaling_lib.roofline import (attention_bytes, attention_flops, attention_intensity, critical_batch_size,
                                  moe_critical_batch_size, ridge_point)

REL = 0.02


def test_r1_critical_batch_v5e_bf16_is_240_tokens():
    # Scaling Book ch. 7: B_crit = C / W_hbm = 1.97e14 / 8.2e11 ~ 240 tokens.
    assert critical_batch_size("tpu-v5e", "bf16", "bf16") == pytest.approx(240, rel=REL)


def test_r2_critical_batch_h100_bf16_between_280_and_300():
    # Ch. 1 of the Scaling Book computes 9.89e14 / 3.35e12 = 295; ch. 7 rounds to ~280.
    bcrit = critical_batch_size("h100")
    assert bcrit == pytest.approx(295, rel=REL)
    assert 280 * (1 - REL) <= bcrit <= 300


def test_r3_int8_weights_halve_bcrit_and_int8_math_restores_it():
    assert critical_batch_size("tpu-v5e", "int8", "bf16") == pytest.approx(120, rel=REL)
    assert critical_batch_size("tpu-v5e", "int8", "int8") == pytest.approx(240, rel=REL)


def test_r4_attention_intensity_prefill_half_T_decode_about_one_gqa_about_G():
    # Prefill: S = T gives T / 2, compute-bound on v5e above 2 x the ridge point (~480 tokens).
    for tokens in (128, 1024, 8192):
        assert attention_intensity(tokens, tokens) == pytest.approx(tokens / 2, rel=1e-12)
    assert 2 * ridge_point("tpu-v5e") == pytest.approx(480, rel=REL)
    # Generation: T = 1 gives ~1 for multi-head attention, whatever the batch.
    for batch in (1, 16, 256):
        flops = attention_flops(1, 8192, n_heads=40, head_dim=128, batch=batch)
        bytes_moved = attention_bytes(1, 8192, n_heads=40, n_kv_heads=40, head_dim=128, batch=batch)
        assert flops / bytes_moved == pytest.approx(1.0, rel=REL)
    # Grouped-query attention with G = N / K query heads per KV head: ~G.
    flops = attention_flops(1, 8192, n_heads=64, head_dim=128, batch=8)
    bytes_moved = attention_bytes(1, 8192, n_heads=64, n_kv_heads=8, head_dim=128, batch=8)
    assert flops / bytes_moved == pytest.approx(8.0, rel=REL)
    assert attention_intensity(1, 8192, group_size=8) == pytest.approx(flops / bytes_moved, rel=1e-12)


def test_r5_moe_16_experts_top2_needs_1920_tokens_on_v5e():
    assert moe_critical_batch_size("tpu-v5e", n_experts=16, n_active_experts=2) == pytest.approx(1920, rel=REL)
