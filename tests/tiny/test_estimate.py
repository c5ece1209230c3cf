"""This machine as a measured system (scaling_lib.tiny.estimate): conclusions that hold on any CPU, with wide
tolerances, since timings vary from run to run."""

import pytest

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
