"""scaling_lib.sharding: the model-parallel decode step's components and the collective times it prices (the chapter 7
claims are in test_claims_sharding.py; hop counts in test_collective_latency.py)."""

import numpy as np
import pytest

from scaling_lib.inference import decode_step_time
from scaling_lib.collectives import collective_time
from scaling_lib.memory import param_bytes
from scaling_lib.sharding import (decode_hops_per_layer, decode_step_components, fsdp_decode_cost, fsdp_gather_bytes,
                                  kv_cache_sharding, max_decode_model_parallelism, max_prefill_model_parallelism)


def test_decode_step_components_price_the_matmuls_in_the_compute_dtype():
    parts = decode_step_components("llama3-70b", "tpu-7x", 8, 256, 8192, compute_dtype="fp8", check_capacity=False)
    assert parts.flops_s == decode_step_time("llama3-70b", "tpu-7x", 8, 256, 8192, compute_dtype="fp8",
                                             check_capacity=False).compute_s


def test_one_chip_has_no_collectives():
    one = decode_step_components("llama3-70b", "tpu-7x", 1, 256, 8192, check_capacity=False)
    assert (one.ici_s, one.ici_latency_s) == (0.0, 0.0)


def test_a_mesh_that_does_not_multiply_to_the_chips_says_so():
    with pytest.raises(ValueError, match="pass axis sizes that multiply to n_chips"):
        decode_step_components("llama3-70b", "tpu-7x", 8, 256, 8192, mesh_shape=(2, 2))


@pytest.mark.parametrize("mesh_shape", [(-2, -4), (0.5, 16), (2.0, 4.5)])
def test_decode_step_components_refuses_negative_or_fractional_mesh_axes(mesh_shape):
    # (-2) x (-4) and 0.5 x 16 both multiply to 8 chips: the product check alone let them through.
    with pytest.raises(ValueError, match=r"mesh_shape axis \d"):
        decode_step_components("llama3-70b", "tpu-v5e", 8, 16, 8192, mesh_shape=mesh_shape)


def test_collective_time_refuses_a_fractional_number_of_shards():
    with pytest.raises(ValueError, match="n_shards must be a positive integer, got 2.5"):
        collective_time("all-gather", 1e6, "tpu-v5e", 2.5)


def test_collective_time_accepts_numpy_numbers():
    assert collective_time("all-gather", np.float64(1e6), "tpu-v5e", np.int64(8)) == \
        collective_time("all-gather", 1e6, "tpu-v5e", 8)


def test_two_chips_split_a_multiquery_cache_by_batch_and_pay_its_all_to_alls():
    # PaLM 540B has one KV head, so on 2 chips the cache is split by batch: per layer 2 all-reduces over a ring of 2
    # (1 hop each way: 2 hops each) and 2 all-to-alls over the 2 batch shards (1 hop each): 2 x 2 + 2 x 1 = 6.
    assert decode_hops_per_layer("palm-540b", 2, 2) == 6


def test_fsdp_on_two_chips_gathers_half_the_weights():
    # Each chip holds 1/n of the weights and gathers the other (n - 1)/n: half on 2 chips, three quarters on 4.
    two, four = fsdp_decode_cost("llama3-8b", "tpu-v5e", 2), fsdp_decode_cost("llama3-8b", "tpu-v5e", 4)
    assert four.ici_s / two.ici_s == pytest.approx(1.5, rel=1e-12)
    assert two.hbm_s / four.hbm_s == pytest.approx(2.0, rel=1e-12)


# --- issue 21, third pass: each function by hand ----------------------------------------------------------------------
V5E_ICI = 45e9  # B/s one way per ICI link (so W_ici,bidi = 90 GB/s), 1 us per hop, 820 GB/s of HBM
LLAMA70 = dict(L=80, D=8192, N=64, H=128)


def test_a_ring_of_16_v5e_prices_two_all_reduces_and_two_all_to_alls_per_layer_by_hand():
    # LLaMA-3-70B (K = 8 KV heads) at batch 64 on a ring of 16 v5e: the cache splits 8 ways by heads, 2 by batch.
    # Per layer: 2 all-reduces of B D x 2 B over the wrapping ring (2 V / W_ici,bidi, 2 passes x 8 hops) and 2
    # all-to-alls of B N H x 2 B between the 2 batch shards (each chip sends half its V / 2 over one link: V / 4W_ici,
    # one hop).
    b, m = 64, LLAMA70
    reduce = 2 * b * m["D"] * 2 / (2 * V5E_ICI) + 16e-6
    swap = b * m["N"] * m["H"] * 2 / (4 * V5E_ICI) + 1e-6
    parts = decode_step_components("llama3-70b", "tpu-v5e", 16, b, 1024)
    assert parts.ici_s == pytest.approx(m["L"] * (2 * reduce + 2 * swap), rel=1e-12)
    assert parts.ici_latency_s == pytest.approx(m["L"] * (2 * 16 + 2 * 1) * 1e-6, rel=1e-12)
    assert decode_hops_per_layer("llama3-70b", 16, b) == 2 * 16 + 2 * 1  # the same hops, counted by the other function
    assert parts.total_s == pytest.approx(parts.kv_s + max(parts.weights_s, parts.flops_s) + parts.ici_s, rel=1e-15)
    assert not parts.ici_bound  # 7.4 ms of ICI against 10.8 ms of weights


def test_eight_chips_hold_every_kv_head_and_run_no_all_to_all():
    b, m = 64, LLAMA70
    parts = decode_step_components("llama3-70b", "tpu-7x", 8, b, 1024)  # Ironwood: 100 GB/s per link one way
    reduce = 2 * b * m["D"] * 2 / (2 * 100e9) + 8e-6  # a wrapping ring of 8: 2 passes x 4 hops
    assert parts.ici_s == pytest.approx(m["L"] * 2 * reduce, rel=1e-12)
    assert parts.ici_latency_s == pytest.approx(m["L"] * 16e-6, rel=1e-12)
    assert parts.ici_bound  # 2.96 ms of ICI against 2.39 ms of weights


def test_decode_step_components_read_weights_and_cache_in_their_dtypes():
    kwargs = dict(weight_dtype="int8", kv_dtype="int8", compute_dtype="int8")
    parts = decode_step_components("llama3-70b", "tpu-v5e", 16, 32, 4096, **kwargs)
    step = decode_step_time("llama3-70b", "tpu-v5e", 16, 32, 4096, **kwargs)
    assert (parts.weights_s, parts.kv_s, parts.flops_s) == (step.weight_s, step.kv_s, step.compute_s)


def test_int8_activations_halve_the_bandwidth_part_of_the_collectives():
    bf16 = decode_step_components("llama3-70b", "tpu-v5e", 16, 64, 1024)
    int8 = decode_step_components("llama3-70b", "tpu-v5e", 16, 64, 1024, activation_dtype="int8")
    assert int8.ici_latency_s == bf16.ici_latency_s
    assert int8.ici_s - int8.ici_latency_s == pytest.approx((bf16.ici_s - bf16.ici_latency_s) / 2, rel=1e-12)


def test_the_default_mesh_is_a_ring_of_the_chips():
    ring = decode_step_components("llama3-70b", "tpu-v5e", 16, 64, 1024)
    assert ring == decode_step_components("llama3-70b", "tpu-v5e", 16, 64, 1024, mesh_shape=(16,))
    assert ring != decode_step_components("llama3-70b", "tpu-v5e", 16, 64, 1024, mesh_shape=(4, 4))


def test_decode_step_components_refuse_a_batch_that_does_not_fit_unless_asked_to_price_it():
    with pytest.raises(ValueError, match=r"\bdoes not fit\b"):
        decode_step_components("llama3-70b", "tpu-v5e", 8, 64, 1024)
    assert decode_step_components("llama3-70b", "tpu-v5e", 8, 64, 1024, check_capacity=False).weights_s > 0


def test_decode_step_components_refuse_zero_chips_naming_them():
    with pytest.raises(ValueError, match=r"^n_chips must be a positive integer"):
        decode_step_components("llama3-70b", "tpu-v5e", 0, 64, 1024)


def test_decode_hops_by_hand_on_a_torus_a_ring_and_one_chip():
    assert decode_hops_per_layer("llama3-70b", 16, 64, (4, 4)) == 18  # the docstring's 2 x 2 x (2 + 2) + 2 x 1
    assert decode_hops_per_layer("llama3-70b", 8, 64) == 16  # 2 x (2 x 4), every KV head on its own chip
    assert decode_hops_per_layer("llama3-70b", 1, 64) == 0


@pytest.mark.parametrize("n_chips, mesh_shape, message", [
    (8, (2, 2), r"^mesh_shape \(2, 2\) has 4 chips, not n_chips=8; pass axis sizes that multiply to n_chips"),
    (0, None, r"^n_chips must be a positive integer"),
])
def test_decode_hops_refuse_a_mesh_of_other_chips(n_chips, mesh_shape, message):
    with pytest.raises(ValueError, match=message):
        decode_hops_per_layer("llama3-70b", n_chips, 64, mesh_shape)


def test_kv_heads_take_the_common_factor_of_the_shards_and_the_batch_the_rest():
    # 12 shards of 8 KV heads: gcd 4 ways by heads, 3 by batch, which then needs its two all-to-alls
    split = kv_cache_sharding(8, 6, 12)
    assert (split.head_shards, split.batch_shards, split.all_to_alls_per_attention_layer) == (4, 3, 2)
    assert kv_cache_sharding(8, 1, 4).all_to_alls_per_attention_layer == 0


def test_a_batch_that_does_not_split_names_the_split_and_the_fix():
    with pytest.raises(ValueError, match=r"\bbatch=7 does not split 3 ways: 12 shards use 4 for the 8 KV heads\b.*"
                                         r"\bdivisible by the remaining 3\b.*\bmultiple of 3\b"):
        kv_cache_sharding(8, 7, 12)


@pytest.mark.parametrize("name", ["n_kv_heads", "batch", "n_shards"])
def test_kv_cache_sharding_refuses_zero_naming_the_argument(name):
    kwargs = {"n_kv_heads": 8, "batch": 8, "n_shards": 8, name: 0}
    with pytest.raises(ValueError, match=rf"^{name} must be a positive integer"):
        kv_cache_sharding(**kwargs)


@pytest.mark.parametrize("chip, bandwidth, hbm", [("tpu-v5e", 2 * V5E_ICI, 8.2e11), ("h100", 4.5e11, 3.35e12)])
def test_fsdp_gathers_the_rest_of_the_weights_over_the_collective_bandwidth(chip, bandwidth, hbm):
    # 4 chips: each gathers 3/4 of the weights over W (ICI both ways on v5e, NVLink injection on H100) and would
    # otherwise read its quarter from HBM.
    for dtype in ("bf16", "int8"):
        weights = param_bytes("llama3-8b", dtype)
        cost = fsdp_decode_cost("llama3-8b", chip, 4, weight_dtype=dtype)
        assert cost.ici_s == pytest.approx(weights * 3 / 4 / bandwidth, rel=1e-12)
        assert cost.hbm_s == pytest.approx(weights / (4 * hbm), rel=1e-12)
        assert cost.slowdown == pytest.approx(3 * hbm / bandwidth, rel=1e-12)


@pytest.mark.parametrize("n_chips, message", [(1, r"\bFSDP needs at least 2 chips, got n_chips=1\b"),
                                              (0, r"^n_chips must be a positive integer")])
def test_fsdp_refuses_fewer_than_two_chips(n_chips, message):
    with pytest.raises(ValueError, match=message):
        fsdp_decode_cost("llama3-8b", "tpu-v5e", n_chips)


@pytest.mark.parametrize("args, name", [((0, 32, 8), "d_ff"), ((16384, 0, 8), "batch"), ((16384, 32, 0), "beta_value")])
def test_decode_model_parallelism_refuses_zero_naming_the_argument(args, name):
    with pytest.raises(ValueError, match=rf"^{name} must be positive"):
        max_decode_model_parallelism(*args)


def test_prefill_model_parallelism_by_hand_in_each_compute_dtype():
    # F W / C: 28,672 x 90 GB/s / 197 TFLOP/s (bf16) on v5e, half as many ways at int8's 394 TFLOP/s
    assert max_prefill_model_parallelism("tpu-v5e", 28672) == pytest.approx(28672 * 9e10 / 197e12, rel=1e-12)
    assert max_prefill_model_parallelism("tpu-v5e", 28672, "int8") == pytest.approx(28672 * 9e10 / 394e12, rel=1e-12)
    with pytest.raises(ValueError, match=r"^d_ff must be positive"):
        max_prefill_model_parallelism("tpu-v5e", 0)


@pytest.mark.parametrize("n_chips", [1, 8])
def test_decode_hops_refuse_an_empty_batch_on_any_chip_count(n_chips):
    # one chip has no collective, but a batch of 0 sequences is still no batch
    with pytest.raises(ValueError, match=r"^batch must be a positive integer"):
        decode_hops_per_layer("llama3-70b", n_chips, 0)


def test_two_chips_of_a_multiquery_model_pay_the_all_to_alls_of_their_batch_split():
    # PaLM 540B (one KV head) on 2 v5e: the batch splits 2 ways; per layer 2 all-reduces over a ring of 2 (2 hops
    # each) and 2 all-to-alls (1 hop each): the 6 hops of decode_hops_per_layer, 1 us each, over 118 layers.
    parts = decode_step_components("palm-540b", "tpu-v5e", 2, 8, 1024, check_capacity=False)
    assert parts.ici_latency_s == pytest.approx(118 * 6e-6, rel=1e-12)
    assert decode_hops_per_layer("palm-540b", 2, 8) == 6


def test_fsdp_gathers_llama3_8b_whole_with_its_norm_gains():
    # LLaMA-3-8B's checkpoint stores 8,030,261,248 numbers (Hugging Face's count for Meta-Llama-3-8B: the weights,
    # untied embeddings and the 2 L D + D = 266,240 RMSNorm gains), two bytes each in bf16.
    assert fsdp_gather_bytes("llama3-8b", "bf16") == 8_030_261_248 * 2
    table = 128_256 * 4_096  # the input embedding, V x D
    assert fsdp_gather_bytes("llama3-8b", "bf16", replicated="embed") == (8_030_261_248 - table) * 2


@pytest.mark.parametrize("replicated, problem", [("router", "router"), (("embed", 3), "tuple of names"),
                                                  (None, "tuple of names")])
def test_fsdp_gather_bytes_refuses_names_the_model_does_not_store(replicated, problem):
    with pytest.raises(ValueError, match=problem):
        fsdp_gather_bytes("llama3-8b", "bf16", replicated=replicated)
