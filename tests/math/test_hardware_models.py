"""The input tables: every chip and model of claims.md is present, sourced and self-consistent."""

import pytest

from scaling_lib.book.claims import published
from scaling_lib.hardware import chip_names, get_chip
from scaling_lib.models import get_model, model_names

REQUIRED_CHIPS = ("tpu-v4", "tpu-v5e", "tpu-v5p", "tpu-v6e", "tpu-7x", "h100", "h200", "b200")
REQUIRED_MODELS = ("llama2-13b", "llama3-8b", "llama3-70b", "palm-8b", "palm-62b", "palm-540b")


def test_every_required_chip_and_model_exists_with_a_source():
    assert set(REQUIRED_CHIPS) <= set(chip_names())
    assert set(REQUIRED_MODELS) <= set(model_names())
    for name in chip_names():
        assert get_chip(name).source
    for name in model_names():
        assert get_model(name).source


@pytest.mark.parametrize("name", chip_names())
def test_chip_rates_are_consistent(name):
    chip = get_chip(name)
    assert chip.ici_bidirectional == 2 * chip.ici_link_bandwidth
    assert "bf16" in chip.compute_dtypes
    for dtype in ("int8", "fp8"):
        if dtype in chip.compute_dtypes:  # narrower math is never slower than bf16 on these chips
            assert chip.peak_flops(dtype) >= chip.peak_flops("bf16")


def test_ironwood_ici_per_axis_and_v4_per_chip_match_the_sources():
    # Errata: the TPU inference chapter gives Ironwood "200 GB/s per axis" (not 1.2e12 B/s per chip). A chip sends
    # 2 links x 100 GB/s along one torus axis, which is also one link's two directions: the same number.
    ironwood = get_chip("ironwood")
    assert ironwood.topology.axis_bandwidth == pytest.approx(published("S2 Ironwood ICI per axis"))
    assert ironwood.topology.axis_bandwidth == ironwood.ici_bidirectional
    assert ironwood.ici_links == 2 * ironwood.topology.axes == 6
    # Pope et al.: 270 GB/s of ICI per TPU v4 chip (6 links x 45 GB/s one way).
    v4 = get_chip("tpu-v4")
    assert v4.ici_link_bandwidth * v4.ici_links == pytest.approx(published("P5 v4 ICI per chip"))


def test_ironwood_row_cites_what_its_sources_give_and_reproduces_beta():
    ironwood = get_chip("ironwood")
    assert f"{ironwood.hbm_bandwidth / 1e9:,.0f} GB/s of HBM against 200 GB/s per axis" in ironwood.source
    per_chip = ironwood.ici_bidirectional * ironwood.ici_links  # Google Cloud's per-chip figure
    assert f"{per_chip / 1e9:,.0f} GB/s bidirectional ICI per chip" in ironwood.source
    assert ironwood.hbm_bandwidth / ironwood.topology.axis_bandwidth == pytest.approx(published("S2 beta Ironwood"),
                                                                                       rel=0.01)


@pytest.mark.parametrize("name", ["h100", "h200", "b200"])
def test_gpus_are_switched_nvlink_domains_whose_injection_is_half_the_data_sheet_figure(name):
    # Data sheets state NVLink bandwidth per GPU counting both directions; a GPU injects half of it one way.
    chip = get_chip(name)
    topology = chip.topology
    assert topology.kind == "switch" and topology.domain_size == 8 and topology.links == 18
    both_ways = 2 * topology.injection_bandwidth
    assert (f"{both_ways / 1e9:,.0f} GB/s" in chip.source or f"{both_ways / 1e12:g} TB/s" in chip.source), chip.source
    assert 1e-6 <= topology.collective_latency <= 10e-6  # "a few microseconds" per collective
    assert f"{chip.dcn_bandwidth * 8 / 1e9:.0f} Gb/s" in chip.source  # one scale-out NIC per GPU


@pytest.mark.parametrize("name", ["tpu-v5e", "tpu-v5p", "tpu-v6e", "tpu-7x"])
def test_tpu_dcn_bandwidth_per_chip_is_the_one_its_source_states(name):
    chip = get_chip(name)
    assert chip.topology.kind == "torus" and chip.topology.wraparound
    assert f"{chip.dcn_bandwidth * 8 / 1e9:.0f} Gb/s DCN per" in chip.source
    assert chip.dcn_bandwidth < chip.ici_link_bandwidth / 5  # the DCN is far slower than one ICI link


def test_a_topology_value_missing_for_a_chip_is_a_value_error_naming_chip_field_and_fix():
    with pytest.raises(ValueError, match=r"tpu-v4: dcn_bandwidth is not in the hardware table.*pass the bandwidth"):
        get_chip("tpu-v4").dcn_bandwidth
    with pytest.raises(ValueError, match=r"h100: ici_hop_latency .*collective_latency"):
        get_chip("h100").ici_hop_latency
    assert get_chip("tpu-v5e").ici_hop_latency > 0
