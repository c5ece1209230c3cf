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

from tests import for_each

PALM = "palm-540b"


# --- The longest context: batch sharding divides the sequences, head sharding the heads ---
def test_the_longest_context_by_hand_under_each_sharding():
    # PaLM 540B's one KV head of 256 over 118 layers is 2 x 118 x 256 x 2 = 120,832 B per token in bf16. Batch
    # sharding over 64 chips leaves ceil(128 / 64) = 2 sequences per chip; head sharding cannot split one KV head and
    # keeps all 128.
    per_token = 2 * 118 * 256 * 2
    assert kv_bytes_per_token(get_model(PALM), "bf16") == per_token
    hbm = get_chip("tpu-v4").hbm_capacity
    assert max_context_length(PALM, "tpu-v4", 64, 128, "batch") == math.floor(0.3 * hbm / (2 * per_token))
    assert max_context_length(PALM, "tpu-v4", 64, 128, "heads") == math.floor(0.3 * hbm / (128 * per_token))
    # 48 KV heads of 128 on 8 chips: 6 per chip; 2 x 118 x 6 x 128 x 2 B = 362,496 B per token for each of the 16
    # sequences; 0.3 x 32 GiB / (16 x 362,496 B) = 1,777.2 -> 1,777 tokens.
    assert max_context_length("palm-540b-multihead", "tpu-v4", 8, 16, "heads") == 1777
    assert math.floor(0.3 * 32 * 2**30 / (16 * 362_496)) == 1777


def test_one_chip_makes_head_and_batch_sharding_coincide_and_the_limit_scales_with_the_hbm_share():
    assert max_context_length(PALM, "tpu-v4", 1, 8, "heads") == max_context_length(PALM, "tpu-v4", 1, 8, "batch")
    half = max_context_length(PALM, "tpu-v4", 64, 128, "batch", kv_fraction=0.15)
    assert max_context_length(PALM, "tpu-v4", 64, 128, "batch", kv_fraction=0.3) == pytest.approx(2 * half, abs=1)
    assert kv_versus_weights(PALM, 8, 0).kv_bytes == 0.0  # an empty context holds no cache


def test_table_1_lists_the_multihead_model_then_palm_per_sharding_for_any_sized_list_of_batches():
    rows = context_length_table("tpu-v4", 64, (128,))
    assert [row.variant for row in rows] == ["multihead", "baseline multiquery", "optimized multiquery"]
    assert [(r.model, r.head_dim) for r in rows] == [("palm-540b-multihead", 128), ("palm-540b", 256),
                                                      ("palm-540b", 256)]
    # A notebook reader's batches often come from np.arange or an array; any sized iterable of sizes is a list.
    assert context_length_table(batches=np.array([128, 512])) == context_length_table(batches=(128, 512))


# --- Bad input: a ValueError naming the argument and the fix ---------------------------------------------------------
@for_each([
    (lambda: max_context_length(PALM, "tpu-v4", 64, 128, "sequence"), "unknown attention_sharding"),
    (lambda: max_context_length(PALM, "tpu-v4", 64, 0, "batch"), "batch must be a positive integer"),
    (lambda: max_context_length(PALM, "tpu-v4", 64, 128, "batch", kv_fraction=1.5), "kv_fraction"),
    (lambda: max_context_length(PALM, "tpu-v4", 64, 128, "batch", kv_fraction=0),
     r"kv_fraction must be in \(0, 1\], got 0: it is the share of HBM kept"),
    (lambda: kv_versus_weights(PALM, 8, -1), "context_len"),
    (lambda: context_length_table("tpu-v4", 64, ()), "batches"),
    (lambda: context_length_table("tpu-v4", 64, (0,)), "batches entry must be a positive integer"),
], ids=str)
def test_bad_input_gets_a_value_error_naming_the_argument_and_the_fix(call, words):
    with pytest.raises(ValueError, match=words):
        call()
