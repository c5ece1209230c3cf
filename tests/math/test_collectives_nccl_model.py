"""NCCL's latency model and the pipelined stages, worked by hand from the constants of NCCL's src/graph/tuning.cc
(base latency per algorithm and protocol, per-step NVLink and network latencies) and the NCCL maintainers'
application-level rates (370 of 450 GB/s on NVLink 4, 47 of 50 GB/s per 400 Gb/s NIC)."""

import dataclasses

import pytest

from scaling_lib.collectives import CollectiveTime, collective_time
from scaling_lib.hardware import get_chip

US = 1e-6


def test_collective_time_adds_latency_and_bandwidth_and_its_bound_is_the_larger_unless_a_floor_is_given():
    t = CollectiveTime("all-gather", 3.0, 2.0)
    assert (t.total_s, t.bound_s, t.expected_s, t.bound) == (5.0, 3.0, 5.0, "bandwidth")
    slow = CollectiveTime("all-gather", 3.0, 2.0, "ring-LL", 0.5, 1.5)
    assert (slow.expected_s, slow.bound_s) == (2.0 + 3.0 / 0.5, 1.5)


def test_a_ring_across_nodes_pays_the_network_step_and_at_least_the_network_overhead_inside_a_node():
    # All-gather of 1 GB over 16 H100 with the ring forced: Simple wins at this size. 15 steps, 1 between the nodes:
    # base 8.4 us + 14 x max(3.4 us NVLink step, 3 x 1 us network overhead) + 1 x 14 us network step.
    ring = collective_time("all-gather", 1e9, "h100", 16, algorithm="ring")
    assert ring.algorithm == "ring-Simple"
    assert ring.latency_s == pytest.approx((8.4 + 14 * 3.4 + 14.0) * US)
    # Stages at once: NVLink 15/16 of 1 GB at 450 GB/s (at 370/450 of it), each NIC an eighth of that at 50 GB/s
    # (at 47/50): the NIC carries less but the NVLink stage is slower once efficiencies apply.
    nvlink, nic = 15 / 16 * 1e9 / 450e9, 15 / 16 * 1e9 / 8 / 50e9
    assert ring.bandwidth_s == pytest.approx(max(nvlink, nic))
    assert ring.expected_s == pytest.approx(ring.latency_s + max(nvlink / (370 / 450), nic / (47 / 50)))


def test_a_small_all_reduce_across_nodes_picks_the_tree_and_its_latency_grows_with_log2_of_the_nodes():
    # Tree with LL: base 6.8 us + 2 x ((8 - 1) x 0.6 us on NVLink + log2(nodes) x 5 us on the network).
    for n, levels in ((16, 1), (32, 2)):
        t = collective_time("all-reduce", 8e3, "h100", n)
        assert t.algorithm == "tree-LL"
        assert t.latency_s == pytest.approx((6.8 + 2 * (7 * 0.6 + levels * 5.0)) * US)
        assert t.efficiency == pytest.approx(370 / 450 * 0.92 / 3.8)  # tree all-reduce 0.92, LL a further 1/3.8


def test_a_small_all_gather_in_one_node_takes_n_minus_1_ring_steps():
    t = collective_time("reduce-scatter", 1e6, "h100", 8)
    assert (t.algorithm, t.latency_s) == ("ring-LL", pytest.approx((6.6 + 7 * 0.6) * US))
    assert t.efficiency == pytest.approx(370 / 450 / 2)  # LL moves half the bytes of a line


def test_an_all_to_all_across_nodes_has_its_own_floor_and_keeps_its_name():
    swap = collective_time("all-to-all", 1e9, "h100", 16)
    assert swap.algorithm.startswith("all-to-all-")
    # Each GPU must send 8/16 of its 1/16 off the node through its NIC (and take in as much).
    assert swap.bound_s == pytest.approx(1e9 / 16 * 8 / 16 / 50e9)


def test_a_full_mesh_pays_ring_latency_and_moves_v_over_n_per_link():
    t = collective_time("all-reduce", 8e3, "mi300x", 8)
    assert t.algorithm == "mesh-LL"
    assert t.latency_s == pytest.approx((6.6 + 14 * 0.6) * US)
    assert t.bandwidth_s == pytest.approx(2 * 8e3 / 8 / 64e9)
    with pytest.raises(ValueError, match="full mesh has no switch"):
        collective_time("all-reduce", 8e3, "mi300x", 8, algorithm="nvls")


def test_a_torus_whose_pod_does_not_wrap_never_wraps():
    v5p = get_chip("tpu-v5p")
    flat = dataclasses.replace(v5p.topology, wraparound=False)
    assert flat.wraparound_axes((4, 4, 4)) == (False, False, False)
    assert not flat.axis_wraps(8) and v5p.topology.axis_wraps(8) and not v5p.topology.axis_wraps(6)
    v5e = get_chip("tpu-v5e").topology
    assert v5e.axis_wraps(16) and not v5e.axis_wraps(8) and not v5e.axis_wraps(32)
