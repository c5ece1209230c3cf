"""scaling_lib.sharding: the model-parallel decode step's components and the collective times it prices (the chapter 7
claims are in test_claims_sharding.py; hop counts in test_collective_latency.py)."""

import numpy as np
import pytest

from scaling_lib.inference import decode_step_time
from scaling_lib.collectives import collective_time
from scaling_lib.sharding import decode_hops_per_layer, decode_step_components, fsdp_decode_cost


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
