"""This machine as a measured system (scaling_lib.tiny.estimate), tested without trusting any clock.

What the timings show on a real CPU (chapter 1's knee, chapter 11's decode sweep) depends on the machine and on
whatever else it runs, so it is printed by `bench/bench_cpu_roofline.py`, never asserted here. These tests run the
same code on synthetic machines whose answers are known by construction: a fake clock with known durations, and
decode steps that take exactly what `estimate.decode_step` predicts at a known `Efficiency`. The oracle is the
construction (and the hand derivations in the comments), not the code's own output on this machine.
"""

import math

import jax.numpy as jnp
import pytest

from scaling_lib.estimate import Deployment, Efficiency, decode_step
from scaling_lib.roofline import critical_batch_from_rates, fit_batch_roofline, matmul_flops
from scaling_lib.tiny import estimate as bench
from scaling_lib.tiny import model


class FakeClock:
    """Stands in for the `time` module inside scaling_lib.tiny.estimate: each timed call lasts the next of
    `durations` seconds (perf_counter is read once before and once after every timed call)."""

    def __init__(self, durations):
        self.durations, self.now, self.reads = list(durations), 0.0, 0

    def perf_counter(self):
        if self.reads % 2:  # the read after a timed call: that call took the next duration
            self.now += self.durations.pop(0)
        self.reads += 1
        return self.now


def test_best_seconds_is_the_fastest_timed_call_after_an_untimed_warm_up(monkeypatch):
    calls = []
    monkeypatch.setattr(bench, "time", FakeClock([0.3, 0.1, 0.2]))
    assert bench._best_seconds(lambda: calls.append(1) or 0.0, repeats=3) == pytest.approx(0.1)
    assert len(calls) == 4  # one warm-up (it compiles) + 3 timed


def test_the_micro_benchmarks_divide_the_work_they_do_by_the_best_time(monkeypatch):
    # A sum over n_bytes reads each byte once: W = n_bytes / t. Here 64 MB read in 2 ms (best of 3) = 32 GB/s.
    monkeypatch.setattr(bench, "time", FakeClock([3e-3, 2e-3, 2.5e-3]))
    assert bench.measure_memory_bandwidth(n_bytes=64e6, repeats=3) == pytest.approx(32e9, rel=1e-12)
    # A square matmul of side n does 2 n^3 FLOPs: 2 x 256^3 = 33,554,432 in 1 ms = 33.55 GFLOP/s.
    monkeypatch.setattr(bench, "time", FakeClock([1e-3, 4e-3]))
    assert bench.measure_matmul_flops(n=256, repeats=2) == pytest.approx(2 * 256**3 / 1e-3, rel=1e-12)


# Chapter 1's experiment on a synthetic roofline machine: reading the [D, F] float32 weight takes 4 D F / W, each row
# of the batch 2 D F / C; a call takes the larger. The knee fitted to the curve must then be (C / W) x 4 / 2, the
# prediction from the two rates (hand derivation: t_0 / t_1 = (4 D F / W) / (2 D F / C) = 2 C / W).
KNEE_BATCHES = [2**k for k in range(10)]  # 1 .. 512, as in chapter 1


@pytest.mark.parametrize("flops_per_s, bytes_per_s", [(2e11, 2e10), (1e11, 4e10), (5e11, 1e10)])
def test_the_knee_of_a_roofline_machine_is_the_critical_batch_from_its_rates(monkeypatch, flops_per_s, bytes_per_s):
    d, f = 64, 32
    w = jnp.ones((d, f), jnp.float32)
    per_call = [max(4 * d * f / bytes_per_s, matmul_flops(b, d, f) / flops_per_s) for b in KNEE_BATCHES]
    repeats = 2
    monkeypatch.setattr(bench, "time", FakeClock([t for t in per_call for _ in range(repeats)]))
    seconds = bench.time_batched_matmul(w, KNEE_BATCHES, repeats=repeats)
    assert seconds == pytest.approx(per_call, rel=1e-9)
    fit = fit_batch_roofline(KNEE_BATCHES, seconds)
    assert fit.knee_batch == pytest.approx(critical_batch_from_rates(flops_per_s, bytes_per_s, "fp32"), rel=1e-9)
    assert fit.knee_batch == pytest.approx(2 * flops_per_s / bytes_per_s, rel=1e-9)
    # The floor and the slope give back the machine's own W and C (chapter 1 prints both beside the measured ones).
    assert w.nbytes / fit.floor_s == pytest.approx(bytes_per_s, rel=1e-9)
    assert matmul_flops(1, d, f) / fit.per_row_s == pytest.approx(flops_per_s, rel=1e-9)


def test_time_batched_matmul_refuses_bad_input():
    with pytest.raises(ValueError, match="2-D"):
        bench.time_batched_matmul(jnp.ones(4), [1])
    with pytest.raises(ValueError, match="batch"):
        bench.time_batched_matmul(jnp.ones((4, 4)), [0])
    with pytest.raises(ValueError, match="empty"):
        bench.time_batched_matmul(jnp.ones((4, 4)), [])
    assert all(t > 0 for t in bench.time_batched_matmul(jnp.ones((8, 8)), [1, 2], repeats=1))


# Chapter 11's fit on a synthetic machine: every decode step takes exactly the estimate at TRUE, so the fit on the
# shortest caches must find TRUE (to the 0.01 it rounds to) and then predict the held-out long caches.
# The rates make both terms matter: C / W = 4 FLOPs per byte, so a batch-1 float32 step (about 0.5 FLOP per weight
# byte) is bound by memory and a batch-32 step (about 16) by its FLOPs, and the fit sees both mfu and hbm.
TRUE = Efficiency(mfu=0.3, hbm=0.6)
RATES = dict(memory_bandwidth=1e10, matmul_flops=4e10)


def synthetic_deployment(config=None):
    chip = bench.machine_chip(**RATES)
    return Deployment(config or bench.bench_config(), chip, 1, weight_dtype="fp32", kv_dtype="fp32",
                      compute_dtype="fp32", activation_dtype="fp32")


def synthetic_timings(batches=(1, 32), cache_lens=(256, 2048)):
    deployment = synthetic_deployment()
    return tuple(bench.DecodeTiming(b, s, decode_step(deployment, b, s, TRUE).total_s, deployment)
                 for b in batches for s in cache_lens)


def test_the_synthetic_machine_exercises_both_terms_of_the_fit():
    by = {(t.batch, t.cache_len): t.predicted for t in synthetic_timings()}
    assert by[1, 256].flops_s < by[1, 256].weights_s  # batch 1: the weight read dominates
    assert by[32, 256].flops_s > by[32, 256].weights_s  # batch 32: the FLOPs do


def test_an_efficiency_fitted_on_the_short_caches_recovers_the_machines_and_predicts_the_long_ones():
    timings = synthetic_timings()
    fitted = bench.fit_machine_efficiency(timings)
    assert fitted.network == 1.0
    assert fitted.mfu == pytest.approx(TRUE.mfu, abs=0.011) and fitted.hbm == pytest.approx(TRUE.hbm, abs=0.011)
    for t in timings:  # held out (cache 2048) as well as fitted (cache 256): only the 0.01 rounding remains
        assert t.predicted_with(fitted).total_s / t.measured_s == pytest.approx(1.0, abs=0.04), (t.batch, t.cache_len)
        assert t.ratio > 1  # measured / bound: a machine below peak is slower than the bound


def test_the_fit_sees_only_the_shortest_caches():
    # Corrupt the long-cache steps (10x slower): the fit must not move, since it never looks at them.
    timings = synthetic_timings()
    shortest = min(t.cache_len for t in timings)
    corrupted = tuple(t if t.cache_len == shortest else
                      bench.DecodeTiming(t.batch, t.cache_len, 10 * t.measured_s, t.deployment) for t in timings)
    assert bench.fit_machine_efficiency(corrupted) == bench.fit_machine_efficiency(timings)


def test_decode_sweep_times_every_batch_and_cache_length_beside_its_estimate(monkeypatch):
    seen = []

    def fake_step(params, batch, cache_len, repeats):
        seen.append((batch, cache_len, repeats))
        return 1e-3 * batch + 1e-6 * cache_len

    monkeypatch.setattr(bench, "time_decode_step", fake_step)
    config = model.tiny_config()
    chip = bench.machine_chip(**RATES)
    timings = bench.decode_sweep(chip, batches=(1, 4), cache_lens=(16, 64), repeats=2, config=config)
    assert seen[0] == (1, 16, 2)  # the untimed first step
    assert [(t.batch, t.cache_len) for t in timings] == [(1, 16), (1, 64), (4, 16), (4, 64)]
    assert [t.measured_s for t in timings] == [pytest.approx(1e-3 * b + 1e-6 * s) for b, s in
                                               [(1, 16), (1, 64), (4, 16), (4, 64)]]
    assert all(t.deployment.chip.name == "this-cpu" and t.deployment.model is config for t in timings)


def test_time_decode_step_runs_the_real_decode_step():
    # The one real timing here: only that it ran and returned a duration (no bound on how long it took).
    params = model.init_params(model.tiny_config(), seed=0)
    seconds = bench.time_decode_step(params, batch=2, cache_len=16, repeats=1)
    assert math.isfinite(seconds) and seconds > 0


def test_a_lone_device_has_no_network():
    chip = bench.machine_chip(1e10, 1e11)
    assert chip.interconnect == "none"
    assert chip.hbm_bandwidth == 1e10 and chip.peak_flops("fp32") == 1e11
    with pytest.raises(ValueError, match="this-cpu: topology is not in the hardware table"):
        chip.ici_link_bandwidth
    with pytest.raises(ValueError, match="no timings to fit"):
        bench.fit_machine_efficiency(())
