"""scaling_lib.sharding: how a model-parallel decode step splits the KV cache, how many hops its collectives take,
what its components cost, where more chips stop paying, and what FSDP gathers (the chapter 7 claims are in
test_claims_sharding.py). The expected values are worked by hand from the model shapes and the chips' links."""

import itertools

import pytest

from scaling_lib.inference import decode_step_time
from scaling_lib.memory import param_bytes
from scaling_lib.models import get_model
from scaling_lib.sharding import (TORUS_SHAPES, beta, decode_hops_per_layer, decode_step_components,
                                  fsdp_decode_cost, fsdp_gather_bytes, kv_cache_sharding, max_decode_model_parallelism,
                                  max_prefill_model_parallelism)

from tests import for_each

V5E_ICI = 45e9  # B/s one way per ICI link (so W_ici,bidi = 90 GB/s), 1 us per hop, 820 GB/s of HBM
LLAMA70 = dict(L=80, D=8192, N=64, H=128)


# --- The KV cache's split: by KV heads as far as they go, the batch the rest ----------------------------------------
def reference_kv_split(n_kv_heads, n_shards):
    """Try every way to split n shards as (heads h) x (batch n / h): the KV heads must split evenly over h, and the
    rule takes the largest such h (head sharding is free; batch sharding costs two all-to-alls per layer)."""
    best = max(h for h in range(1, n_shards + 1) if n_shards % h == 0 and n_kv_heads % h == 0)
    return best, n_shards // best


@for_each(list(itertools.product((1, 2, 3, 5, 6, 8, 12, 40), range(1, 25))), ids=str)
def test_kv_cache_sharding_matches_brute_force_non_power_of_two_head_and_mesh_counts_included(n_kv_heads, n_shards):
    head, batch = reference_kv_split(n_kv_heads, n_shards)
    rule = kv_cache_sharding(n_kv_heads, batch=n_shards * 2, n_shards=n_shards)
    assert (rule.head_shards, rule.batch_shards) == (head, batch)
    assert rule.all_to_alls_per_attention_layer == (2 if batch > 1 else 0)


@for_each([
    (8, 12, 6, (4, 3)),  # 12 chips, 8 KV heads: 4 heads-ways (8 / 4 = 2 heads each), the other 3 ways by batch
    (6, 9, 18, (3, 3)),
    (5, 10, 20, (5, 2)),
    (3, 8, 16, (1, 8)),  # nothing in common: all batch
    (40, 16, 32, (8, 2)),  # LLaMA-2-13B's 40 heads on 16 chips
    (8, 4, 1, (4, 1)),  # K = 8 over 4 chips: all by heads, no all-to-all
], ids=str)
def test_kv_heads_take_the_common_factor_of_the_shards_and_the_batch_the_rest_by_hand(n_kv_heads, n_shards, batch,
                                                                                      expected):
    rule = kv_cache_sharding(n_kv_heads, batch, n_shards)
    assert (rule.head_shards, rule.batch_shards) == expected
    assert rule.all_to_alls_per_attention_layer == (2 if expected[1] > 1 else 0)


# --- Hops per layer: two all-reduces over the torus, two all-to-alls over the batch shards --------------------------
@for_each([
    ("llama3-70b", 8, 64, (8,), None, 2 * 2 * 4),  # ring of 8: 2 all-reduces of 8 hops; K = 8 = n: no batch split
    ("llama3-70b", 8, 64, None, None, 16),  # the default mesh is that ring
    ("llama3-70b", 8, 64, (2, 2, 2), None, 2 * 2 * (1 + 1 + 1)),  # K = 8 = n: no all-to-all
    ("llama3-70b", 16, 64, (4, 4), None, 2 * 2 * (2 + 2) + 2 * 1),  # batch split 2 ways, two all-to-alls of 1 hop
    ("llama3-70b", 64, 64, (8, 8), None, 2 * 2 * (4 + 4) + 2 * 4),  # batch split 8 ways, two all-to-alls of 4 hops
    ("llama3-70b", 1, 64, None, None, 0),  # one chip: no collective
    # v5e axes wrap only at 16 chips: its 4 x 2 slice is two lines of 3 and 1 hops a pass; 12 if both were rings
    ("llama3-70b", 8, 64, (4, 2), "tpu-v5e", 2 * 2 * (3 + 1)),
    ("llama3-70b", 8, 64, (4, 2), None, 2 * 2 * (2 + 1)),
    # PaLM 540B has one KV head: on 2 chips the batch splits 2 ways; 2 all-reduces over a ring of 2 (2 hops each)
    # and 2 all-to-alls between the 2 batch shards (1 hop each)
    ("palm-540b", 2, 2, None, None, 2 * 2 + 2 * 1),
    ("palm-540b", 2, 8, None, None, 6),
], ids=str)
def test_decode_hops_per_layer_by_hand(model, n_chips, batch, mesh, chip, hops):
    assert decode_hops_per_layer(model, n_chips, batch, mesh, chip=chip) == hops


# --- The decode step's components, by hand --------------------------------------------------------------------------
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
    # The default mesh is a ring of the chips.
    assert parts == decode_step_components("llama3-70b", "tpu-v5e", 16, 64, 1024, mesh_shape=(16,))
    assert parts != decode_step_components("llama3-70b", "tpu-v5e", 16, 64, 1024, mesh_shape=(4, 4))


def test_the_collectives_of_llama3_70b_at_batch_32_on_16_v5e_in_a_ring_or_a_4x4_slice_by_hand():
    # 16 chips in a ring (a v5e axis of 16 wraps), K = 8: the KV cache splits 8 ways by heads and 2 ways by batch.
    # Per layer, 2 all-reduces of B D bf16 = 32 x 8,192 x 2 = 524,288 B over 16 chips, each latency + bandwidth:
    #   2 rounds x 8 hops x 1 us = 16 us, plus 2 x 524,288 / 9e10 = 11.65 us.
    # and 2 all-to-alls of B N H bf16 = 32 x 64 x 128 x 2 = 524,288 B over the 2 batch shards, an axis of 2 that does
    # not wrap: one link between them, each sends a quarter of the array one way at 4.5e10: 524,288 / 4 / 4.5e10,
    # plus 1 hop.
    all_reduce = 16e-6 + 2 * 524_288 / 9e10
    all_to_all = 1e-6 + 524_288 / 4 / 4.5e10
    parts = decode_step_components("llama3-70b", "tpu-v5e", 16, 32, 8192)
    assert parts.ici_s == pytest.approx(80 * (2 * all_reduce + 2 * all_to_all), rel=1e-12)  # 5.05 ms
    assert parts.ici_latency_s == pytest.approx(80 * 2 * (16e-6 + 1e-6), rel=1e-12)
    # With 8 chips the KV heads absorb the whole split: no all-to-all, only the two all-reduces. An axis of 8 v5e
    # chips is a line: 2 passes of 7 hops, and each end chip takes in 7/8 of the array over its one link, per pass.
    eight = decode_step_components("llama3-70b", "tpu-v5e", 8, 32, 8192, check_capacity=False)  # 227 GB > 128 GB
    assert eight.ici_s == pytest.approx(80 * 2 * (14e-6 + 2 * 7 / 8 * 524_288 / 4.5e10), rel=1e-12)
    assert eight.ici_latency_s == pytest.approx(80 * 2 * 14e-6, rel=1e-12)
    # The same step on a 4 x 4 v5e slice, which has no wraparound (no axis spans 16 chips). Per axis (a line of 4)
    # the all-reduce's bandwidth term is 2 x 3/4 x 524,288 / 4.5e10 = 17.48 us; the two axes' links run at once, so
    # half of it, 8.74 us; its latency is 2 rounds x 3 hops per axis, over 2 axes one after the other = 12 us.
    square = decode_step_components("llama3-70b", "tpu-v5e", 16, 32, 8192, mesh_shape=(4, 4))
    square_reduce = 12e-6 + 2 * 3 / 4 * 524_288 / 4.5e10 / 2
    assert square.ici_s == pytest.approx(80 * (2 * square_reduce + 2 * all_to_all), rel=1e-12)


def test_eight_chips_hold_every_kv_head_and_run_no_all_to_all_and_one_chip_runs_no_collective():
    b, m = 64, LLAMA70
    parts = decode_step_components("llama3-70b", "tpu-7x", 8, b, 1024)  # Ironwood: 100 GB/s per link one way
    reduce = 2 * b * m["D"] * 2 / (2 * 100e9) + 8e-6  # a wrapping ring of 8: 2 passes x 4 hops
    assert parts.ici_s == pytest.approx(m["L"] * 2 * reduce, rel=1e-12)
    assert parts.ici_latency_s == pytest.approx(m["L"] * 16e-6, rel=1e-12)
    assert parts.ici_bound  # 2.96 ms of ICI against 2.39 ms of weights
    one = decode_step_components("llama3-70b", "tpu-7x", 1, 256, 8192, check_capacity=False)
    assert (one.ici_s, one.ici_latency_s) == (0.0, 0.0)
    # PaLM 540B (one KV head) on 2 v5e: the 6 hops of its batch split, 1 us each, over 118 layers.
    palm = decode_step_components("palm-540b", "tpu-v5e", 2, 8, 1024, check_capacity=False)
    assert palm.ici_latency_s == pytest.approx(118 * 6e-6, rel=1e-12)


def test_the_components_read_weights_and_cache_and_multiply_in_their_own_dtypes():
    kwargs = dict(weight_dtype="int8", kv_dtype="int8", compute_dtype="int8")
    parts = decode_step_components("llama3-70b", "tpu-v5e", 16, 32, 4096, **kwargs)
    step = decode_step_time("llama3-70b", "tpu-v5e", 16, 32, 4096, **kwargs)
    assert (parts.weights_s, parts.kv_s, parts.flops_s) == (step.weight_s, step.kv_s, step.compute_s)
    fp8 = decode_step_components("llama3-70b", "tpu-7x", 8, 256, 8192, compute_dtype="fp8", check_capacity=False)
    assert fp8.flops_s == decode_step_time("llama3-70b", "tpu-7x", 8, 256, 8192, compute_dtype="fp8",
                                           check_capacity=False).compute_s
    # int8 activations halve the bandwidth part of the collectives, not their hops.
    bf16 = decode_step_components("llama3-70b", "tpu-v5e", 16, 64, 1024)
    int8 = decode_step_components("llama3-70b", "tpu-v5e", 16, 64, 1024, activation_dtype="int8")
    assert int8.ici_latency_s == bf16.ici_latency_s
    assert int8.ici_s - int8.ici_latency_s == pytest.approx((bf16.ici_s - bf16.ici_latency_s) / 2, rel=1e-12)


def test_a_batch_that_does_not_fit_is_refused_unless_asked_to_price_it():
    with pytest.raises(ValueError, match=r"\bdoes not fit\b"):
        decode_step_components("llama3-70b", "tpu-v5e", 8, 64, 1024)
    assert decode_step_components("llama3-70b", "tpu-v5e", 8, 64, 1024, check_capacity=False).weights_s > 0


# --- Where more chips stop paying (chapter 7's figure) --------------------------------------------------------------
def _first_ici_bound(chip, batch):
    tori = TORUS_SHAPES[chip]
    return next(n for n in sorted(tori)
                if decode_step_components("llama3-70b", chip, n, batch, 8192, mesh_shape=tori[n],
                                          check_capacity=False).ici_bound)  # chapter 7's figure: every n


def _first_past_hop_latency(chip, batch):
    """The first chip count whose hop latency alone (the latency part of the ICI term) exceeds its weight read."""
    tori = TORUS_SHAPES[chip]
    return next(n for n in sorted(tori)
                if (p := decode_step_components("llama3-70b", chip, n, batch, 8192, mesh_shape=tori[n],
                                                check_capacity=False)).ici_latency_s > p.weights_s)


@for_each(["tpu-v5e", "ironwood"], ids=str)
def test_chapter_7_crossing_stays_put_with_the_batch_unlike_f_over_b_beta(chip):
    # Where the figure's ICI line overtakes the weight line stays put as the batch goes from 32 to 128, while the
    # bandwidth estimate F / (B beta) moves 4-fold; hop latency alone gets there at most one torus later.
    crossings = {batch: _first_ici_bound(chip, batch) for batch in (32, 64, 128)}
    assert len(set(crossings.values())) == 1
    sizes = sorted(TORUS_SHAPES[chip])
    assert sizes.index(_first_past_hop_latency(chip, 64)) - sizes.index(crossings[64]) in (0, 1)
    f_over_b_beta = {b: max_decode_model_parallelism(get_model("llama3-70b").d_ff, b, beta(chip)) for b in (32, 128)}
    assert f_over_b_beta[32] == pytest.approx(4 * f_over_b_beta[128])


def test_prefill_model_parallelism_by_hand_in_each_compute_dtype():
    # F W / C: 28,672 x 90 GB/s / 197 TFLOP/s (bf16) on v5e, half as many ways at int8's 394 TFLOP/s
    assert max_prefill_model_parallelism("tpu-v5e", 28672) == pytest.approx(28672 * 9e10 / 197e12, rel=1e-12)
    assert max_prefill_model_parallelism("tpu-v5e", 28672, "int8") == pytest.approx(28672 * 9e10 / 394e12, rel=1e-12)


# --- FSDP: each chip gathers the weights it does not hold -------------------------------------------------------------
@for_each([("tpu-v5e", 2 * V5E_ICI, 8.2e11), ("h100", 4.5e11, 3.35e12)], ids=str)
def test_fsdp_gathers_the_rest_of_the_weights_over_the_collective_bandwidth(chip, bandwidth, hbm):
    # 4 chips: each gathers 3/4 of the weights over W (ICI both ways on v5e, NVLink injection on H100) and would
    # otherwise read its quarter from HBM.
    for dtype in ("bf16", "int8"):
        weights = param_bytes("llama3-8b", dtype)
        cost = fsdp_decode_cost("llama3-8b", chip, 4, weight_dtype=dtype)
        assert cost.ici_s == pytest.approx(weights * 3 / 4 / bandwidth, rel=1e-12)
        assert cost.hbm_s == pytest.approx(weights / (4 * hbm), rel=1e-12)
        assert cost.slowdown == pytest.approx(3 * hbm / bandwidth, rel=1e-12)
    # 2 chips gather half: 2/3 of what 4 gather, and each reads twice as much of its own.
    two, four = fsdp_decode_cost("llama3-8b", chip, 2), fsdp_decode_cost("llama3-8b", chip, 4)
    assert four.ici_s / two.ici_s == pytest.approx(1.5, rel=1e-12)
    assert two.hbm_s / four.hbm_s == pytest.approx(2.0, rel=1e-12)


def test_fsdp_gathers_llama3_8b_whole_with_its_norm_gains():
    # LLaMA-3-8B's checkpoint stores 8,030,261,248 numbers (Hugging Face's count for Meta-Llama-3-8B: the weights,
    # untied embeddings and the 2 L D + D = 266,240 RMSNorm gains), two bytes each in bf16.
    assert fsdp_gather_bytes("llama3-8b", "bf16") == 8_030_261_248 * 2
    table = 128_256 * 4_096  # the input embedding, V x D
    assert fsdp_gather_bytes("llama3-8b", "bf16", replicated="embed") == (8_030_261_248 - table) * 2


# --- Bad input: a ValueError naming the argument and the fix ---------------------------------------------------------
@for_each([
    (lambda: decode_step_components("llama3-70b", "tpu-7x", 8, 256, 8192, mesh_shape=(2, 2)),
     "pass axis sizes that multiply to n_chips"),
    # (-2) x (-4) and 0.5 x 16 both multiply to 8 chips: the product check alone would let them through
    *[(lambda mesh=mesh: decode_step_components("llama3-70b", "tpu-v5e", 8, 16, 8192, mesh_shape=mesh),
       r"mesh_shape axis \d") for mesh in [(-2, -4), (0.5, 16), (2.0, 4.5)]],
    (lambda: decode_step_components("llama3-70b", "tpu-v5e", 0, 64, 1024), r"^n_chips must be a positive integer"),
    (lambda: decode_hops_per_layer("llama3-70b", 8, 64, (2, 2)),
     r"^mesh_shape \(2, 2\) has 4 chips, not n_chips=8; pass axis sizes that multiply to n_chips"),
    (lambda: decode_hops_per_layer("llama3-70b", 0, 64), r"^n_chips must be a positive integer"),
    # one chip has no collective, but a batch of 0 sequences is still no batch
    (lambda: decode_hops_per_layer("llama3-70b", 1, 0), r"^batch must be a positive integer"),
    (lambda: decode_hops_per_layer("llama3-70b", 8, 0), r"^batch must be a positive integer"),
    (lambda: kv_cache_sharding(8, 7, 12),
     r"\bbatch=7 does not split 3 ways: 12 shards use 4 for the 8 KV heads\b.*\bdivisible by the remaining 3\b.*"
     r"\bmultiple of 3\b"),
    (lambda: kv_cache_sharding(8, 7, 16), r"batch=7 does not split 2 ways.*multiple of 2"),
    (lambda: kv_cache_sharding(0, 8, 8), r"^n_kv_heads must be a positive integer"),
    (lambda: kv_cache_sharding(8, 0, 8), r"^batch must be a positive integer"),
    (lambda: kv_cache_sharding(8, 8, 0), r"^n_shards must be a positive integer"),
    (lambda: fsdp_decode_cost("llama3-8b", "tpu-v5e", 1), r"\bFSDP needs at least 2 chips, got n_chips=1\b"),
    (lambda: fsdp_decode_cost("llama3-8b", "tpu-v5e", 0), r"^n_chips must be a positive integer"),
    (lambda: fsdp_decode_cost("llama3-8b", "tpu-v5e", 1), "at least 2 chips"),
    (lambda: fsdp_gather_bytes("llama3-8b", "bf16", replicated="router"), "router"),
    (lambda: fsdp_gather_bytes("llama3-8b", "bf16", replicated=("embed", 3)), "tuple of names"),
    (lambda: fsdp_gather_bytes("llama3-8b", "bf16", replicated=None), "tuple of names"),
    (lambda: max_decode_model_parallelism(0, 32, 8), r"^d_ff must be positive"),
    (lambda: max_decode_model_parallelism(16384, 0, 8), r"^batch must be positive"),
    (lambda: max_decode_model_parallelism(16384, 32, 0), r"^beta_value must be positive"),
    (lambda: max_prefill_model_parallelism("tpu-v5e", 0), r"^d_ff must be positive"),
], ids=str)
def test_bad_input_gets_a_value_error_naming_the_argument_and_the_fix(call, words):
    with pytest.raises(ValueError, match=words):
        call()
