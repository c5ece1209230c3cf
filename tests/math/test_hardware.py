"""scaling_lib.hardware: every chip is present, sourced and self-consistent, its memory and network are what its
sources publish, its compute rates follow its formats, and a chip checks its own fields (the models' table is in
test_models.py)."""

import dataclasses

import pytest

from scaling_lib.book.claims import published
from scaling_lib.collectives import collective_bandwidth, collective_time
from scaling_lib.estimate import report
from scaling_lib.hardware import chip_names, get_chip

from tests import for_each

REQUIRED_CHIPS = ("tpu-v4", "tpu-v5e", "tpu-v5p", "tpu-v6e", "tpu-7x", "h100", "h200", "b200")


# --- The table: every chip sourced and self-consistent ----------------------------------------------------------------
def test_every_required_chip_exists_and_every_chip_has_a_source():
    assert set(REQUIRED_CHIPS) <= set(chip_names())
    for name in chip_names():
        assert get_chip(name).source


@for_each(chip_names(), ids=str)
def test_chip_rates_are_consistent(name):
    chip = get_chip(name)
    assert chip.ici_bidirectional == 2 * chip.ici_link_bandwidth
    assert "bf16" in chip.compute_dtypes
    for dtype in ("int8", "fp8"):
        if dtype in chip.compute_dtypes:  # narrower math is never slower than bf16 on these chips
            assert chip.peak_flops(dtype) >= chip.peak_flops("bf16")


# Every chip's HBM as its source publishes it, in the source's own unit (SI: GB = 10^9 B; IEC: GiB = 2^30 B,
# MiB = 2^20 B), and the words of the row's source that state it (None: the Scaling Book's ch. 2 spec table, cited
# by name: v5p 96GB, v6e 32GB). Hopper's figures are what nvidia-smi reports (85.5e9 and 150.8e9 B), not the labels'
# 80 GB and 141 GB; B200 is an eighth of a DGX B200, GB200 a 72nd of an NVL72 rack.
HBM_AS_PUBLISHED = [
    ("tpu-v4", 32 * 2**30, "32 GiB HBM"),  # Pope et al. 2022
    ("tpu-v5e", 16 * 10**9, "16 GB"),  # Scaling Book ch. 7
    ("tpu-v5p", 96 * 10**9, None),
    ("tpu-v6e", 32 * 10**9, None),
    ("tpu-7x", 192 * 2**30, "192 GiB of HBM per chip"),  # Google Cloud's TPU7x page
    ("h100", 81559 * 2**20, "81559 MiB"),
    ("h200", 143771 * 2**20, "143771 MiB"),
    ("b200", 183359 * 2**20, "183359 MiB"),
    ("gb200", 189471 * 2**20, "189471 MiB"),
    ("a100", 81920 * 2**20, "81920 MiB"),
    ("mi300x", 192 * 2**30, "192 GiB of VRAM"),  # ROCm's MI300 documentation
]


@for_each(HBM_AS_PUBLISHED, ids=[row[0] for row in HBM_AS_PUBLISHED])
def test_every_chips_hbm_is_its_sources_figure_in_its_sources_unit(name, capacity, quoted):
    chip = get_chip(name)
    assert chip.hbm_capacity == pytest.approx(capacity, rel=1e-12)
    assert (quoted or "Scaling Book ch. 2 spec table") in chip.source
    assert {row[0] for row in HBM_AS_PUBLISHED} == set(chip_names())  # no chip left unpinned


# --- Networks as their sources give them ------------------------------------------------------------------------------
def test_ironwood_ici_per_axis_and_v4_per_chip_match_the_sources_and_reproduce_beta():
    # Errata: the TPU inference chapter gives Ironwood "200 GB/s per axis" (not 1.2e12 B/s per chip). A chip sends
    # 2 links x 100 GB/s along one torus axis, which is also one link's two directions: the same number.
    ironwood = get_chip("ironwood")
    assert ironwood.topology.axis_bandwidth == pytest.approx(published("S2 Ironwood ICI per axis"))
    assert ironwood.topology.axis_bandwidth == ironwood.ici_bidirectional
    assert ironwood.ici_links == 2 * ironwood.topology.axes == 6
    assert f"{ironwood.hbm_bandwidth / 1e9:,.0f} GB/s of HBM against 200 GB/s per axis" in ironwood.source
    per_chip = ironwood.ici_bidirectional * ironwood.ici_links  # Google Cloud's per-chip figure
    assert f"{per_chip / 1e9:,.0f} GB/s bidirectional ICI per chip" in ironwood.source
    assert ironwood.hbm_bandwidth / ironwood.topology.axis_bandwidth == pytest.approx(published("S2 beta Ironwood"),
                                                                                       rel=0.01)
    # Pope et al.: 270 GB/s of ICI per TPU v4 chip (6 links x 45 GB/s one way).
    v4 = get_chip("tpu-v4")
    assert v4.ici_link_bandwidth * v4.ici_links == pytest.approx(published("P5 v4 ICI per chip"))
    assert get_chip("tpu-v5e").ici_hop_latency > 0


@for_each(["h100", "h200", "b200"], ids=str)
def test_gpus_are_switched_nvlink_domains_whose_injection_is_half_the_data_sheet_figure(name):
    # Data sheets state NVLink bandwidth per GPU counting both directions; a GPU injects half of it one way.
    chip = get_chip(name)
    topology = chip.topology
    assert topology.kind == "switch" and topology.domain_size == 8 and topology.links == 18
    both_ways = 2 * topology.injection_bandwidth
    assert (f"{both_ways / 1e9:,.0f} GB/s" in chip.source or f"{both_ways / 1e12:g} TB/s" in chip.source), chip.source
    assert 1e-6 <= topology.collective_latency <= 10e-6  # "a few microseconds" per collective
    assert f"{chip.dcn_bandwidth * 8 / 1e9:.0f} Gb/s" in chip.source  # one scale-out NIC per GPU


@for_each(["tpu-v5e", "tpu-v5p", "tpu-v6e", "tpu-7x"], ids=str)
def test_tpu_dcn_bandwidth_per_chip_is_the_one_its_source_states(name):
    chip = get_chip(name)
    assert chip.topology.kind == "torus" and chip.topology.wraparound
    assert f"{chip.dcn_bandwidth * 8 / 1e9:.0f} Gb/s DCN per" in chip.source
    assert chip.dcn_bandwidth < chip.ici_link_bandwidth / 5  # the DCN is far slower than one ICI link


def test_an_nvlink_domain_is_a_node_of_8_or_a_gb200_nvl72_rack_of_72_which_a_collective_never_leaves():
    # GB200's domain is the rack (18 compute trays of 4 GPUs); an HGX/DGX node's is its 8 GPUs
    gb200, b200 = get_chip("gb200").topology, get_chip("b200").topology
    assert (gb200.domain_size, gb200.domain) == (72, "NVL72 rack") and (b200.domain_size, b200.domain) == (8, "node")
    assert gb200.in_switch_reduction
    small = collective_time("all-reduce", 8e3, "gb200", 72)
    large = collective_time("all-reduce", 1e9, "gb200", 72)
    assert small.latency_s == pytest.approx(25e-6)  # NVLS inside one domain: no network step
    assert large.bound_s == pytest.approx(1e9 / 900e9)  # NVLink 5 injection, in-switch reduction


def test_a100_has_no_in_switch_reduction_and_300_gb_per_s_of_nvlink():
    a100 = get_chip("a100")
    assert collective_bandwidth("a100") == pytest.approx(300e9)  # "300 + 300 GB/s" in its source
    assert "300 + 300 GB/s" in a100.source
    reduce = collective_time("all-reduce", 1e9, "a100", 8)
    assert not reduce.algorithm.startswith("nvls")
    assert reduce.bound_s == pytest.approx(2 * 7 / 8 * 1e9 / 300e9)


def test_mi300x_is_a_full_mesh_whose_peers_each_get_one_seventh_of_the_injection():
    mesh = get_chip("mi300x").topology
    assert mesh.kind == "mesh" and mesh.peers == 7 == mesh.domain_size - 1
    assert mesh.injection_bandwidth == pytest.approx(7 * 64e9)
    # 8 GPUs: every link busy, the switch formula at 448 GB/s. 2 GPUs: one link, a seventh of the injection.
    eight = collective_time("all-gather", 1e9, "mi300x", 8)
    assert eight.bandwidth_s == pytest.approx(7 / 8 * 1e9 / 448e9)
    two = collective_time("all-gather", 1e9, "mi300x", 2)
    assert two.bandwidth_s == pytest.approx(1e9 / 2 / 64e9)
    assert two.bandwidth_s == pytest.approx(7 * (1 / 2) * 1e9 / 448e9)
    assert two.bound_s <= two.total_s


# --- Compute rates by format -----------------------------------------------------------------------------------------
def test_fp4_runs_at_twice_fp8_on_blackwell_and_fp16_at_the_bf16_rate_on_nvidia_and_amd():
    # Blackwell's tensor cores run FP4 at twice FP8 (brendanjameslynskey.github.io, NVIDIA GPU presentation 38).
    for name in ("b200", "gb200"):
        chip = get_chip(name)
        for fp4 in ("nvfp4", "mxfp4"):
            assert chip.peak_flops(fp4) == pytest.approx(2 * chip.peak_flops("fp8"))
    # Data sheets (H100, H200, B200, GB200): dense FP16 and BF16 tensor-core rates are the same figure, so fp16 math
    # is priced, not refused.
    for name in ("h100", "h200", "b200", "gb200", "a100", "mi300x"):
        chip = get_chip(name)
        assert chip.peak_flops("fp16") == chip.peak_flops("bf16")
    fp16 = report("llama3-8b", "h100", 1, context_len=4096, compute_dtype="fp16")
    bf16 = report("llama3-8b", "h100", 1, context_len=4096)
    assert fp16.decode_step_bound_s == bf16.decode_step_bound_s
    assert get_chip("tpu-v5e").peak_flops() == get_chip("tpu-v5e").peak_flops("bf16")  # bf16 by default


# --- Bad input: a ValueError naming the chip, the field and the fix ---------------------------------------------------
V5E = get_chip("tpu-v5e")


def _v5e_topology(**changes):
    return dataclasses.replace(V5E, topology=dataclasses.replace(V5E.topology, **changes))


@for_each([
    (lambda: get_chip("tpu-v9"), "aliases: ironwood"),
    (lambda: get_chip("tpu-v4").dcn_bandwidth,
     r"tpu-v4: dcn_bandwidth is not in the hardware table.*pass the bandwidth"),
    (lambda: get_chip("h100").ici_hop_latency, r"h100: ici_hop_latency .*collective_latency"),
    (lambda: collective_time("all-reduce", 1e9, "gb200", 144),
     "gb200: scale_out_bandwidth is not in the hardware table"),
    (lambda: collective_time("all-reduce", 1e9, "a100", 8, algorithm="nvls"), "algorithm='nvls'"),
    (lambda: get_chip("h100").peak_flops("nvfp4"),
     r"h100 has no native nvfp4 matrix rate.*'bf16', 'fp16', 'fp8', 'int8'"),
    (lambda: get_chip("tpu-v5e").peak_flops("mxfp4"), r"tpu-v5e has no native mxfp4"),
    *[(lambda field=field: dataclasses.replace(V5E, **{field: 0}), rf"tpu-v5e: {field} must be positive, got 0")
      for field in ["hbm_bandwidth", "hbm_capacity"]],
    (lambda: dataclasses.replace(V5E, peak_flops_table=(("bf16", 0.0),)), r"FLOP/s for bf16 must be positive"),
    (lambda: _v5e_topology(link_bandwidth=0), "tpu-v5e: topology link_bandwidth must be positive or None, got 0"),
    *[(lambda field=field: _v5e_topology(**{field: -1.0}),
       rf"\btpu-v5e: topology {field} must be positive or None, got -1\.0$")
      for field in ["hop_latency", "dcn_bandwidth"]],
], ids=str)
def test_bad_input_gets_a_value_error_naming_the_chip_the_field_and_the_fix(call, words):
    with pytest.raises(ValueError, match=words):
        call()
