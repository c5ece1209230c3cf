"""Claims T1-T3 of book/claims.md: the general decode step-time bound (T4 is in test_kv_levers.py).

Published numbers are read from the claims ledger; T1's literals are its inputs and hand derivations from them.
"""

import itertools

import pytest

from scaling_lib.book.claims import REL, published
from scaling_lib.book.claims.step_time import T2_INPUTS
from scaling_lib.hardware import get_chip
from scaling_lib.inference import decode_step_time, step_time_bound
from scaling_lib.memory import param_bytes
from scaling_lib.models import get_model
from scaling_lib.roofline import critical_batch_size

from tests import for_each


def test_t1_general_step_time_limits_slope_and_switch_at_bcrit():
    chip = get_chip("tpu-v5e")
    # a property of the formula at any batch: 240 caches of 1e9 B do not fit in 8 x 16 GB, so priced as if they did
    kwargs = dict(kv_bytes_per_sequence=1e9, param_bytes=26e9, param_count=13e9, chip=chip, n_chips=8,
                  check_capacity=False)
    # B -> 0: only the weight load remains.
    assert step_time_bound(batch=0, **kwargs).total_s == pytest.approx(26e9 / (8 * chip.hbm_bandwidth))
    # Below B_crit the step grows only by each sequence's KV read.
    small = [step_time_bound(batch=b, **kwargs).total_s for b in (1, 2)]
    assert small[1] - small[0] == pytest.approx(1e9 / (8 * chip.hbm_bandwidth), rel=1e-9)
    # The MLP turns compute-bound exactly at the critical batch size of chapter 1 (bf16 weights: 2 B per param).
    bcrit = critical_batch_size(chip, "bf16", "bf16")
    assert step_time_bound(batch=bcrit * 0.999, **kwargs).bound == "memory"
    assert step_time_bound(batch=bcrit * 1.001, **kwargs).bound == "compute"
    # Far above B_crit the slope is KV read plus 2 P FLOPs per sequence.
    big = [step_time_bound(batch=b, **kwargs).total_s for b in (1000, 1001)]
    slope = 1e9 / (8 * chip.hbm_bandwidth) + 2 * 13e9 / (8 * chip.peak_flops("bf16"))
    assert big[1] - big[0] == pytest.approx(slope, rel=1e-9)


@for_each([(4, "T2 batch 4"), (256, "T2 batch 256")], ids=str)
def test_t2_pop_quiz_30b_int8_weights_v5e_4x4(batch, key):
    # 30B dense, int8 weights (1 B each), bf16 math, 16 v5e chips, 8,192 context, 100 kB of KV per token.
    step = step_time_bound(batch=batch, **T2_INPUTS)
    assert step.total_s == pytest.approx(published(key), rel=REL)


def test_t3_step_never_faster_than_reading_the_weights_once():
    for model, chip, n_chips in (("llama2-13b", "tpu-v5e", 8), ("llama3-70b", "tpu-7x", 8), ("llama3-8b", "h100", 1)):
        floor = param_bytes(model, "bf16") / (n_chips * get_chip(chip).hbm_bandwidth)
        for batch, context in itertools.product((0, 1, 32, 1024), (0, 128, 32768)):
            step = decode_step_time(get_model(model), chip, n_chips, batch, context, check_capacity=False)
            assert step.total_s >= floor
        assert decode_step_time(model, chip, n_chips, 0, 0).total_s == pytest.approx(floor, rel=1e-12)
