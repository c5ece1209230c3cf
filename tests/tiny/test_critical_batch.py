"""The critical-batch rule (scaling_lib.tiny.critical_batch), tested on a synthetic roofline machine.

What the rule looks like on this CPU (how flat, where the knee falls) depends on the machine and on its load, so
`bench/bench_cpu_roofline.py` prints it and no test asserts on a timing. Here every timed program takes exactly its
roofline time on a machine with known rates C and W, so the answers follow by hand:
  a sum over n bytes:            n / W
  a square float32 matmul:       2 n^3 / C
  the layer x W_in W_out:        max(8 D F / W, 4 D F B / C)  (two [D, F] float32 weights; 2 matmuls of 2 D F B)
The measured rates are then C and W, the predicted critical batch C / W x 4 / 2 = 2 C / W, and the knee (the first
batch from which every time is at least 1.5x the fastest) the first grid batch at or above 1.5 x 2 C / W = 3 C / W.
"""

import numpy as np
import pytest

from scaling_lib.roofline import critical_batch_from_rates
from scaling_lib.tiny import critical_batch as cb
from scaling_lib.tiny.critical_batch import BatchRule, batch_rule


def roofline_machine(monkeypatch, flops_per_s, bytes_per_s):
    """Replace the timer with the roofline time of each program on a machine of these rates."""

    def seconds(fn, *args, repeats):
        if fn is cb._read:
            return args[0].nbytes / bytes_per_s
        if fn is cb._matmul:
            n = args[0].shape[0]
            return 2.0 * n**3 / flops_per_s
        assert fn is cb._layer
        x, w_in, w_out = args
        (batch, d), f = x.shape, w_in.shape[1]
        return max((w_in.nbytes + w_out.nbytes) / bytes_per_s, 4.0 * d * f * batch / flops_per_s)

    monkeypatch.setattr(cb, "_best_seconds", seconds)


@pytest.mark.parametrize("flops_per_s, bytes_per_s, knee", [
    (2e11, 2e10, 32),  # 2 C / W = 20, so 1.5 x that = 30: the first grid batch at or above is 32
    (6.7e10, 1.1e10, 32),  # the worked-problems run: 2 C / W = 12.2, 1.5 x = 18.3 -> 32
    (4e11, 1e10, 128),  # 2 C / W = 80, 1.5 x = 120 -> 128
])
def test_the_rule_on_a_roofline_machine_finds_its_rates_and_its_knee(monkeypatch, flops_per_s, bytes_per_s, knee):
    roofline_machine(monkeypatch, flops_per_s, bytes_per_s)
    d, f = 64, 256
    rule = batch_rule(d_model=d, d_ff=f, batches=(1, 2, 4, 8, 16, 32, 64, 128, 256), repeats=1)
    assert rule.flops_per_s == pytest.approx(flops_per_s, rel=1e-12)
    assert rule.bytes_per_s == pytest.approx(bytes_per_s, rel=1e-12)
    assert rule.weight_bytes == 2 * d * f * 4 and rule.layer_flops_per_token == 4.0 * d * f
    assert rule.predicted_batch == pytest.approx(critical_batch_from_rates(flops_per_s, bytes_per_s, "fp32"))
    assert rule.predicted_batch == pytest.approx(2 * flops_per_s / bytes_per_s)
    assert rule.knee == knee
    for batch, seconds in zip(rule.batches, rule.seconds):  # the measured curve is the roofline itself
        assert rule.predicted_seconds(batch) == pytest.approx(seconds, rel=1e-12)
    # Below the critical batch the layer costs one read of its weights; batching is nearly free there.
    read = rule.weight_bytes / rule.bytes_per_s
    assert all(t == pytest.approx(read) for b, t in zip(rule.batches, rule.seconds) if b <= rule.predicted_batch)


def test_a_machine_whose_time_never_grows_enough_has_no_knee(monkeypatch):
    roofline_machine(monkeypatch, 1e15, 1e9)  # 2 C / W = 2e6: far beyond the largest batch timed
    assert batch_rule(d_model=16, d_ff=32, batches=(1, 8, 64), repeats=1).knee == float("inf")


def test_best_seconds_takes_the_fastest_call_after_a_warm_up(monkeypatch):
    class Clock:
        reads = iter([0.0, 0.5, 1.0, 1.2, 2.0, 2.9])  # timed calls of 0.5, 0.2 and 0.9 s

        @classmethod
        def perf_counter(cls):
            return next(cls.reads)

    calls = []
    monkeypatch.setattr(cb, "time", Clock)
    assert cb._best_seconds(lambda x: calls.append(x) or x, 1.0, repeats=3) == pytest.approx(0.2)
    assert calls == [1.0] * 4  # one untimed call (it compiles), then three timed ones


def test_knee_is_the_first_batch_from_which_every_time_is_slow():
    fake = BatchRule(batches=(1, 2, 4, 8, 16), seconds=(1.0, 1.8, 0.9, 1.0, 3.0), flops_per_s=1.0, bytes_per_s=1.0,
                     weight_bytes=1, layer_flops_per_token=1.0)
    assert fake.knee == 16  # the outlier at 2 does not count
    with pytest.raises(ValueError, match="increasing"):
        batch_rule(batches=(4, 2))


def test_the_real_layer_runs_and_is_timed():
    # The one real timing: only that each batch was timed (no bound on how long it took).
    rule = batch_rule(d_model=32, d_ff=64, batches=(1, 4), repeats=1)
    assert len(rule.seconds) == 2 and all(np.isfinite(t) and t > 0 for t in rule.seconds)
