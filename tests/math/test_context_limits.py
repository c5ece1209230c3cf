"""context_limits: the KV cache against the weights, and the longest context each attention sharding lets fit
(Pope et al. 2022, sec. 3.3 and Table 1). The published cells of Table 1 are claims P2 and P3, tested in
test_claims_layouts.py against the ledger; these are the limits and the hand derivations.
"""

import math

import numpy as np
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


# --- moved from test_layouts.py with the functions (issue 22) --------------------------------------------------
def test_heads_sharded_context_of_multihead_palm_on_8_chips_by_hand():
    # 48 KV heads of 128 on 8 chips: 6 per chip; 2 x 118 x 6 x 128 x 2 B = 362,496 B per token for each of the 16
    # sequences; 0.3 x 32 GiB / (16 x 362,496 B) = 1,777.2 -> 1,777 tokens.
    assert max_context_length("palm-540b-multihead", "tpu-v4", 8, 16, "heads") == 1777
    assert math.floor(0.3 * 32 * 2**30 / (16 * 362_496)) == 1777


def test_an_empty_context_holds_no_kv_cache():
    assert kv_versus_weights("palm-540b", 8, 0).kv_bytes == 0.0


def test_context_length_table_lists_the_multihead_model_then_palm_per_sharding():
    rows = context_length_table("tpu-v4", 64, (128,))
    assert [(r.model, r.head_dim) for r in rows] == [("palm-540b-multihead", 128), ("palm-540b", 256),
                                                      ("palm-540b", 256)]


def test_context_length_table_refuses_a_batch_of_zero():
    with pytest.raises(ValueError, match="batches entry must be a positive integer"):
        context_length_table("tpu-v4", 64, (0,))


def test_max_context_length_refuses_a_kv_fraction_of_zero_and_says_what_it_is():
    with pytest.raises(ValueError, match=r"kv_fraction must be in \(0, 1\], got 0: it is the share of HBM kept"):
        max_context_length("palm-540b", "tpu-v4", 64, 128, "batch", kv_fraction=0)


def test_a_numpy_array_of_batches_is_read_as_the_list_it_holds():
    # A notebook reader's batches often come from np.arange or an array; any sized iterable of sizes is a list.
    assert context_length_table(batches=np.array([128, 512])) == context_length_table(batches=(128, 512))
