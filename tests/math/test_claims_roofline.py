"""Claims R1-R5 of book/claims.md: rooflines and the critical batch size (tolerance: the ledger's REL, 2%).

Every number a source publishes is read from the claims ledger (`published(key)`); the literals left here are
hand derivations (T / 2 for S = T), each an independent oracle.
"""

import pytest

from scaling_lib.book.claims import REL, published, published_range
from scaling_lib.hardware import chip_names, get_chip
from scaling_lib.roofline import (attention_bytes, attention_flops, attention_intensity, critical_batch_from_rates,
                                  critical_batch_size, moe_critical_batch_size, ridge_point)


def test_r1_r3_critical_batch_v5e_bf16_is_240_tokens_int8_weights_halve_it_and_int8_math_restores_it():
    # Scaling Book ch. 7: B_crit = C / W_hbm = 1.97e14 / 8.2e11 ~ 240 tokens.
    assert critical_batch_size("tpu-v5e", "bf16", "bf16") == pytest.approx(published("R1"), rel=REL)
    assert critical_batch_size("tpu-v5e", "int8", "bf16") == pytest.approx(published("R3 int8 weights, bf16 math"),
                                                                           rel=REL)
    assert critical_batch_size("tpu-v5e", "int8", "int8") == pytest.approx(published("R3 int8 weights, int8 math"),
                                                                           rel=REL)


def test_r2_critical_batch_h100_bf16_between_280_and_300():
    # Ch. 1 of the Scaling Book computes 9.89e14 / 3.35e12 = 295; ch. 7 rounds to ~280.
    bcrit = critical_batch_size("h100")
    assert bcrit == pytest.approx(published("R2 ch. 1 value"), rel=REL)
    low, high = published_range("R2 range")
    assert low <= bcrit <= high


def test_r4_attention_intensity_prefill_half_T_decode_about_one_gqa_about_G():
    # Prefill: S = T gives T / 2 (hand derivation), compute-bound on v5e above 2 x the ridge point (~480 tokens).
    for tokens in (128, 1024, 8192):
        assert attention_intensity(tokens, tokens) == pytest.approx(tokens / 2, rel=1e-12)
    assert attention_intensity(8192, 8192) == pytest.approx(published("R4 prefill T/2"), rel=REL)
    assert 2 * ridge_point("tpu-v5e") == pytest.approx(published("R4 prefill compute-bound"), rel=REL)
    # Generation: T = 1 gives ~1 for multi-head attention, whatever the batch.
    for batch in (1, 16, 256):
        flops = attention_flops(1, 8192, n_heads=40, head_dim=128, batch=batch)
        bytes_moved = attention_bytes(1, 8192, n_heads=40, n_kv_heads=40, head_dim=128, batch=batch)
        assert flops / bytes_moved == pytest.approx(published("R4 MHA decode about 1"), rel=REL)
    # Grouped-query attention with G = N / K = 64 / 8 query heads per KV head: ~G.
    flops = attention_flops(1, 8192, n_heads=64, head_dim=128, batch=8)
    bytes_moved = attention_bytes(1, 8192, n_heads=64, n_kv_heads=8, head_dim=128, batch=8)
    assert flops / bytes_moved == pytest.approx(published("R4 GQA decode about G"), rel=REL)
    assert attention_intensity(1, 8192, group_size=8) == pytest.approx(flops / bytes_moved, rel=1e-12)


def test_r5_moe_16_experts_top2_needs_1920_tokens_on_v5e():
    assert moe_critical_batch_size("tpu-v5e", n_experts=16, n_active_experts=2) == pytest.approx(published("R5"),
                                                                                                 rel=REL)


def test_critical_batch_from_measured_rates_is_the_chip_formula_for_any_machine():
    for name in chip_names():
        chip = get_chip(name)
        assert critical_batch_from_rates(chip.peak_flops("bf16"), chip.hbm_bandwidth) == critical_batch_size(name)
    # Hand derivation for chapter 1's CPU: float32 weights (4 B), 2e11 FLOP/s, 2e10 B/s: 10 x 4 / 2 = 20 rows.
    assert critical_batch_from_rates(2e11, 2e10, "fp32") == pytest.approx(20.0)
