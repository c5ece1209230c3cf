"""What each efficiency does to a step (scaling_lib.efficiency through estimate.step_estimate), which platform a chip
belongs to, and the profiles' refusals."""

import pytest

from scaling_lib.efficiency import PHYSICAL_RANGES, PROFILES, TYPICAL, Calibrated, Efficiency, Profile, \
    platform_of_chip, resolve_efficiency
from scaling_lib.estimate import Deployment, decode_step, prefill

from tests import for_each


def test_the_cache_moves_at_kv_hbm_and_the_weights_at_hbm():
    # Halving kv_hbm doubles the cache read and leaves the weights alone; with kv_hbm unset the cache moves at hbm.
    d = Deployment("llama3-8b", "h100", 1)
    base, slow_cache = decode_step(d, 32, 4096, Efficiency(hbm=0.8)), decode_step(d, 32, 4096,
                                                                                    Efficiency(hbm=0.8, kv_hbm=0.4))
    assert slow_cache.kv_s == pytest.approx(2 * base.kv_s) and slow_cache.weights_s == base.weights_s
    assert Efficiency(hbm=0.8).kv_fraction == 0.8 and Efficiency(hbm=0.8, kv_hbm=0.5).kv_fraction == 0.5


def test_layer_s_costs_every_layer_of_a_tensor_parallel_step_and_nothing_on_one_chip():
    eff = Efficiency(layer_s=1e-4, overhead_s=2e-3)
    one, eight = Deployment("llama3-8b", "h100", 8, tensor_parallel=1), Deployment("llama3-8b", "h100", 8)
    step = decode_step(eight, 8, 1024, eff)
    assert step.layer_s == pytest.approx(32 * 1e-4) and step.overhead_s == pytest.approx(2e-3 + 32 * 1e-4)
    assert decode_step(one, 8, 1024, eff).layer_s == 0.0
    assert decode_step(eight, 8, 1024, Efficiency(overlap=True, layer_s=1e-4)).overhead_s == 0.0  # the bound: none
    assert prefill(eight, 128, 1, eff).layer_s == pytest.approx(32 * 1e-4)


@for_each([("h100", "gpu"), ("b200", "gpu"), ("a100", "gpu"), ("mi300x", "amd"),
                                            ("tpu-v5e", "tpu"), ("ironwood", "tpu")], ids=str)
def test_each_chip_belongs_to_the_platform_its_network_says(chip, platform):
    assert platform_of_chip(chip) == platform


def test_a_calibrated_pair_gives_amd_its_own_half_or_else_the_gpus():
    gpu, amd, tpu = Efficiency(mfu=0.5), Efficiency(mfu=0.4), Efficiency(mfu=0.3)
    assert Calibrated(gpu=gpu, tpu=tpu).for_chip("mi300x") is gpu
    assert Calibrated(gpu=gpu, tpu=tpu, amd=amd).for_chip("mi300x") is amd
    assert Calibrated(gpu=gpu, tpu=tpu, amd=amd).for_chip("h200") is gpu


def test_a_profile_prices_only_the_platforms_it_was_fitted_on_and_names_those_that_cover_the_chip(monkeypatch):
    gpu_only = Profile("gpu-only", "an engine", TYPICAL, ("gpu",), "its rows")
    assert gpu_only.for_chip("h100") == TYPICAL.gpu
    with pytest.raises(ValueError, match=r"'gpu-only'.*fitted on gpu rows only.*tpu-v5e is a tpu chip; use one of .*"
                                         r"typical"):
        gpu_only.for_chip("tpu-v5e")
    assert resolve_efficiency("typical") is TYPICAL and all(resolve_efficiency(n) is p for n, p in PROFILES.items()
                                                            if n != "typical")


def test_the_physical_ranges_are_ordered_and_the_fractions_stay_fractions():
    for name, (low, high) in PHYSICAL_RANGES.items():
        assert 0 <= low < high, name
        if name in ("mfu", "hbm", "kv_hbm", "network"):
            assert high <= 1


# --- bad input: a ValueError naming the argument and the fix -----------------------------------------------------------
BAD_INPUT = {
    "kv-hbm-zero": (lambda: Efficiency(kv_hbm=0), "kv_hbm must be a fraction of peak in \\(0, 1\\]"),
    "kv-hbm-above-one": (lambda: Efficiency(kv_hbm=1.5), "kv_hbm must be a fraction"),
    "layer-negative": (lambda: Efficiency(layer_s=-1e-6), "layer_s must be non-negative finite seconds per layer"),
    "layer-infinite": (lambda: Efficiency(layer_s=float("inf")), "layer_s must be non-negative"),
    "engine-unknown": (lambda: resolve_efficiency("fastest"), r"an engine profile \(typical"),
}


@for_each(BAD_INPUT.values(), ids=list(BAD_INPUT))
def test_bad_input_gets_a_value_error_naming_the_argument_and_the_fix(call, words):
    with pytest.raises(ValueError, match=words):
        call()
