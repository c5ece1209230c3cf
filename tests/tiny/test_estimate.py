"""This machine as a measured system (scaling_lib.tiny.estimate), tested without trusting any clock.

What the timings show on a real CPU (chapter 11's decode sweep) depends on the machine and on whatever else it runs,
so it is printed by `bench/bench_cpu_roofline.py`, never asserted here. These tests run the same code on synthetic
machines whose answers are known by construction: decode steps that take exactly what `estimate.decode_step` predicts
at a known `Efficiency`. The oracle is the construction (and the hand derivations in the comments), not the code's
own output on this machine. The microbenchmarks that measure the machine are tested in test_measure.py.
"""

import math

import pytest

from scaling_lib.estimate import Deployment, Efficiency, decode_step
from scaling_lib.tiny import estimate as bench
from scaling_lib.tiny import model


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


def test_an_efficiency_fitted_on_the_short_caches_recovers_the_machines_and_predicts_the_long_ones():
    timings = synthetic_timings()
    by = {(t.batch, t.cache_len): t.predicted for t in timings}  # the synthetic machine exercises both terms:
    assert by[1, 256].flops_s < by[1, 256].weights_s  # batch 1: the weight read dominates
    assert by[32, 256].flops_s > by[32, 256].weights_s  # batch 32: the FLOPs do
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


def test_decode_sweep_times_every_batch_and_cache_length_beside_its_estimate_with_the_real_step(monkeypatch):
    # The one real timing: only that it ran and returned a duration (no bound on how long it took).
    seconds = bench.time_decode_step(model.init_params(model.tiny_config(), seed=0), batch=2, cache_len=16, repeats=1)
    assert math.isfinite(seconds) and seconds > 0
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


def test_a_lone_device_has_no_network():
    chip = bench.machine_chip(1e10, 1e11)
    assert chip.interconnect == "none"
    assert chip.hbm_bandwidth == 1e10 and chip.peak_flops("fp32") == 1e11
    with pytest.raises(ValueError, match="this-cpu: topology is not in the hardware table"):
        chip.ici_link_bandwidth
    with pytest.raises(ValueError, match="no timings to fit"):
        bench.fit_machine_efficiency(())
