"""The critical-batch rule on this CPU (scaling_lib.tiny.critical_batch). Timings are noisy and machine-dependent, so
only what the roofline guarantees by a wide margin is checked: at small batch the layer takes about one read of its
weights, at a large batch its FLOPs dominate, and batching raises throughput."""

import numpy as np
import pytest

from scaling_lib.tiny.critical_batch import BatchRule, batch_rule


@pytest.fixture(scope="module")
def rule():
    return batch_rule(batches=(1, 4, 16, 64, 256), repeats=5)


def test_small_batches_cost_about_one_weight_read(rule):
    read = rule.weight_bytes / rule.bytes_per_s
    assert read / 4 < min(rule.seconds[:2]) < 4 * read


def test_large_batches_cost_their_flops_and_batching_pays(rule):
    t = np.asarray(rule.seconds)
    assert t[-1] > 3 * t.min()  # the FLOPs show at batch 256
    throughput = np.asarray(rule.batches) / t
    assert throughput[-1] > 3 * throughput[0]  # yet 256 tokens cost far less than 256 batch-1 steps
    assert rule.predicted_batch > 0 and 1 <= rule.knee <= 256


def test_knee_is_the_first_batch_from_which_every_time_is_slow():
    fake = BatchRule(batches=(1, 2, 4, 8, 16), seconds=(1.0, 1.8, 0.9, 1.0, 3.0), flops_per_s=1.0, bytes_per_s=1.0,
                     weight_bytes=1, layer_flops_per_token=1.0)
    assert fake.knee == 16  # the outlier at 2 does not count
    with pytest.raises(ValueError, match="increasing"):
        batch_rule(batches=(4, 2))
