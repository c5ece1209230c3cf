"""context_limits: the KV cache against the weights, and the longest context each attention sharding lets fit
(Pope et al. 2022, sec. 3.3 and Table 1). The published cells of Table 1 are claims P2 and P3, tested in
test_claims_layouts.py against the ledger; these are the limits and the hand derivations.
"""

import math

import pytest

from scaling_lib.context_limits import context_length_table, kv_versus_weights, max_context_length
from scaling_lib.hardware import get_chip
from scaling_lib.memory import kv_bytes_per_token
from scaling_lib.models import get_model

PALM = "palm-540b"


def test_one_chip_makes_head_and_batch_sharding_coincide_and_the_limit_scales_with_the_hbm_share():
    assert max_context_length(PALM, "tpu-v4", 1, 8, "heads") == max_context_length(PALM, "tpu-v4", 1, 8, "batch")
    half = max_context_length(PALM, "tpu-v4", 64, 128, "batch", kv_fraction=0.15)
    assert max_context_length(PALM, "tpu-v4", 64, 128, "batch", kv_fraction=0.3) == pytest.approx(2 * half, abs=1)


def test_batch_sharding_divides_the_sequences_and_head_sharding_cannot_split_one_kv_head():
    # By hand: PaLM 540B's one KV head of 256 over 118 layers is 2 x 118 x 256 x 2 = 120,832 B per token in bf16.
    # Batch sharding over 64 chips leaves ceil(128 / 64) = 2 sequences per chip; head sharding keeps all 128.
    per_token = 2 * 118 * 256 * 2
    assert kv_bytes_per_token(get_model(PALM), "bf16") == per_token
    hbm = get_chip("tpu-v4").hbm_capacity
    assert max_context_length(PALM, "tpu-v4", 64, 128, "batch") == math.floor(0.3 * hbm / (2 * per_token))
    assert max_context_length(PALM, "tpu-v4", 64, 128, "heads") == math.floor(0.3 * hbm / (128 * per_token))


def test_an_empty_context_holds_no_cache_and_the_table_names_its_variants():
    assert kv_versus_weights(PALM, 8, 0).kv_bytes == 0.0
    rows = context_length_table("tpu-v4", 64, (128,))
    assert [row.variant for row in rows] == ["multihead", "baseline multiquery", "optimized multiquery"]


@pytest.mark.parametrize("call, message", [
    (lambda: max_context_length(PALM, "tpu-v4", 64, 128, "sequence"), "unknown attention_sharding"),
    (lambda: max_context_length(PALM, "tpu-v4", 64, 0, "batch"), "batch must be a positive integer"),
    (lambda: max_context_length(PALM, "tpu-v4", 64, 128, "batch", kv_fraction=1.5), "kv_fraction"),
    (lambda: kv_versus_weights(PALM, 8, -1), "context_len"),
    (lambda: context_length_table("tpu-v4", 64, ()), "batches"),
])
def test_context_limits_bad_input(call, message):
    with pytest.raises(ValueError, match=message):
        call()
