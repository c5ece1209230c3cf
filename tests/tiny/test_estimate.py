"""This machine as a measured system (scaling_lib.tiny.estimate): conclusions that hold on any CPU, with wide
tolerances, since timings vary from run to run."""

import jax
import jax.numpy as jnp
import pytest

from scaling_lib.roofline import critical_batch_from_rates, fit_batch_roofline, matmul_flops
from scaling_lib.tiny import estimate as bench


@pytest.fixture(scope="module")
def sweep():
    bandwidth = bench.measure_memory_bandwidth(n_bytes=128e6, repeats=3)
    flops = bench.measure_matmul_flops(n=768, repeats=3)
    chip = bench.machine_chip(bandwidth, flops)
    return bandwidth, flops, bench.decode_sweep(chip, batches=(1, 32), cache_lens=(256, 2048), repeats=4)


def test_the_micro_benchmarks_measure_plausible_constants(sweep):
    bandwidth, flops, _ = sweep
    assert 1e8 < bandwidth < 1e13  # B/s: between a slow disk and an HBM stack
    assert 1e8 < flops < 1e15


def test_no_decode_step_beats_the_bound_priced_with_this_machines_constants_by_more_than_noise(sweep):
    *_, timings = sweep
    for t in timings:
        assert t.measured_s >= 0.5 * t.predicted.total_s, (t.batch, t.cache_len, t.ratio)


def test_the_step_grows_with_batch_and_cache_length_at_least_as_the_estimate_says(sweep):
    *_, timings = sweep
    by = {(t.batch, t.cache_len): t for t in timings}
    small, large = by[(1, 256)], by[(32, 2048)]
    assert large.predicted.total_s > 2 * small.predicted.total_s
    assert large.measured_s > 2 * small.measured_s
    # The estimate does not overstate what a bigger batch and a longer cache cost (on a CPU the attention over a
    # long cache runs far below the bandwidth the estimate gives it, so the measured growth is often larger).
    measured_growth = large.measured_s / small.measured_s
    predicted_growth = large.predicted.total_s / small.predicted.total_s
    assert measured_growth > predicted_growth / 2


def test_an_efficiency_fitted_on_short_caches_fits_them_and_does_not_overstate_the_long_ones(sweep):
    *_, timings = sweep
    efficiency = bench.fit_machine_efficiency(timings)
    assert efficiency.network == 1.0 and 0 < efficiency.mfu <= 1 and 0 < efficiency.hbm <= 1
    shortest = min(t.cache_len for t in timings)
    for t in timings:
        ratio = t.predicted_with(efficiency).total_s / t.measured_s
        if t.cache_len == shortest:
            assert 1 / 1.5 < ratio < 1.5, (t.batch, t.cache_len, ratio)  # the points it was fitted on
        else:
            assert ratio < 2, (t.batch, t.cache_len, ratio)  # held out: the long caches are never much faster


def test_a_lone_device_has_no_network():
    chip = bench.machine_chip(1e10, 1e11)
    assert chip.interconnect == "none"
    with pytest.raises(ValueError, match="this-cpu: topology is not in the hardware table"):
        chip.ici_link_bandwidth
    with pytest.raises(ValueError, match="no timings to fit"):
        bench.fit_machine_efficiency(())


# Chapter 1's experiment: the knee of a timed matmul against the knee predicted from W and C measured apart. Timings
# on a shared CPU are noisy, so the tolerance is wide (KNEE_FACTOR) and the check gets a few attempts: a real
# disagreement (a wrong byte count, a weight that sits in a cache, a C that is not the matmul's) persists across
# attempts, a busy neighbour does not.
KNEE_D = KNEE_F = 4096  # a 64 MiB float32 weight: larger than the CPU's last-level cache, so its floor is a memory read
KNEE_BATCHES = [2**k for k in range(10)]  # 1 .. 512
KNEE_ATTEMPTS = 3


def test_cpu_matmul_knee_agrees_with_the_knee_predicted_from_measured_bandwidth_and_flop_rate():
    factor = bench.KNEE_FACTOR
    w = jax.random.normal(jax.random.key(0), (KNEE_D, KNEE_F), jnp.float32)
    ratios = []
    for _ in range(KNEE_ATTEMPTS):
        bandwidth, flops = bench.measure_memory_bandwidth(repeats=10), bench.measure_matmul_flops()
        fit = fit_batch_roofline(KNEE_BATCHES, bench.time_batched_matmul(w, KNEE_BATCHES))
        # Neither branch of the fit beats the rates measured apart by more than the tolerance.
        assert 4 * KNEE_D * KNEE_F / fit.floor_s < factor * bandwidth
        assert matmul_flops(1, KNEE_D, KNEE_F) / fit.per_row_s < factor * flops
        ratios.append(fit.knee_batch / critical_batch_from_rates(flops, bandwidth, "fp32"))
        if 1 / factor <= ratios[-1] <= factor:
            return
    pytest.fail(f"measured knee / predicted knee = {ratios} in {KNEE_ATTEMPTS} attempts, outside 1/{factor:g} to "
                f"{factor:g}")


def test_time_batched_matmul_refuses_bad_input():
    with pytest.raises(ValueError, match="2-D"):
        bench.time_batched_matmul(jnp.ones(4), [1])
    with pytest.raises(ValueError, match="batch"):
        bench.time_batched_matmul(jnp.ones((4, 4)), [0])
    with pytest.raises(ValueError, match="empty"):
        bench.time_batched_matmul(jnp.ones((4, 4)), [])
    assert all(t > 0 for t in bench.time_batched_matmul(jnp.ones((8, 8)), [1, 2], repeats=1))
