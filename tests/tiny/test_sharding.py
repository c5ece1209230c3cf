"""scaling_lib.tiny.sharding on 8 emulated CPU devices: sharded decode and prefill equal the unsharded model, and the
collectives in their compiled HLO are the ones the formulas of scaling_lib.sharding count (claims S4, S5, S6).

Compilation dominates the run time, so each layout is compiled once (module-level fixtures) and its HLO is read off
the same executable that runs. Parameters are float32: XLA's CPU backend would turn bf16 collectives into f32.
"""


import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from scaling_lib import sharding

from scaling_lib.hardware import get_chip
from scaling_lib.inference import decode_step_time
from scaling_lib.memory import param_bytes
from scaling_lib.models import get_model
from scaling_lib.sharding import (beta, decode_step_components, fsdp_decode_cost, fsdp_gather_bytes, kv_cache_sharding,
                                  max_decode_model_parallelism)
from scaling_lib.tiny import model
from scaling_lib.tiny import sharding as sharded
from scaling_lib.tiny.xla import parse_collectives

ATOL = 1e-4  # f32 logits; sharding only reorders sums
B, T, N_NEW = 8, 8, 6
CONFIG = model.tiny_config(n_heads=8, n_kv_heads=2)  # N=8 splits 8 ways; K=2 forces the batch split beyond 2 ways
PROMPT = np.random.default_rng(0).integers(0, CONFIG.vocab_size, size=(B, T), dtype=np.int32)


@pytest.fixture(scope="module")
def params():
    return model.init_params(CONFIG, seed=0)


@pytest.fixture(scope="module")
def reference(params):
    """Unsharded: the prefilled cache, the first decoded token, and the logits of the step that follows it."""
    logits, cache = model.prefill(params, PROMPT, cache_len=T + N_NEW)
    token = jnp.argmax(logits[:, -1], axis=-1).astype(jnp.int32)
    step_logits, _ = model.decode_step(params, token, jax.tree.map(jnp.copy, cache))
    return cache, token, np.asarray(step_logits)


def run_compiled(decode, params, reference):
    """Place and run once: (logits, collectives of the executable that ran; lowering again hits jit's cache)."""
    placed = decode.place(params, reference[1], jax.tree.map(jnp.copy, reference[0]))
    logits, _ = decode.step(*placed)
    hlo = decode.step.lower(*placed).compile().as_text()
    return np.asarray(logits), parse_collectives(hlo)


@pytest.fixture(scope="module")
def megatron8(params, reference):
    decode = sharded.megatron_decode(CONFIG, B, (8,))
    return (decode, *run_compiled(decode, params, reference))


@pytest.fixture(scope="module")
def megatron2(params, reference):
    decode = sharded.megatron_decode(CONFIG, B, (1, 2))  # 2 ways = K: the cache splits by heads only
    return (decode, *run_compiled(decode, params, reference))


@pytest.fixture(scope="module")
def fsdp8(params, reference):
    decode = sharded.fsdp_decode(CONFIG, B, (2, 4))
    return (decode, *run_compiled(decode, params, reference))


def count(found, op):
    return sum(1 for c in found if c.op == op)


# --- every layout computes what the unsharded model computes ----------------------------------------------------------

@pytest.mark.parametrize("layout", ["megatron8", "megatron2", "fsdp8"])
def test_each_decode_layout_equals_the_unsharded_step(layout, request, reference):
    """Megatron on 8 devices (the cache split by KV heads x batch), Megatron on a 1 x 2 mesh (by heads only), and FSDP
    on a 2 x 4 mesh: the logits of the step after the first decoded token."""
    _, logits, _ = request.getfixturevalue(layout)
    np.testing.assert_allclose(logits, reference[2], atol=ATOL)


def test_auto_sharded_decode_equals_the_unsharded_step_and_reduces_what_megatron_reduces_and_gathers_besides(
        params, reference, megatron8):
    decode = sharded.auto_decode(CONFIG, B, (2, 4))
    cache, token, expected = reference
    placed, placed_token, placed_cache = decode.place(params, token, jax.tree.map(jnp.copy, cache))
    logits, new_cache = decode.step(placed, placed_token, placed_cache)
    np.testing.assert_allclose(np.asarray(logits), expected, atol=ATOL)
    assert new_cache.k.sharding.spec == decode.cache_specs.k  # the cache stays sharded by KV heads x batch
    # Structure, not counts: how many collectives XLA's partitioner emits is its own choice (chapter 7 prints these
    # booleans rather than the counts).
    _, found = run_compiled(decode, params, reference)
    _, _, mine = megatron8
    activations = (B, 1, CONFIG.d_model)
    assert any(c.op == "all-reduce" and c.shape == activations and c.group_size == 8 for c in mine)
    # The query heads are split over both axes of the 2 x 4 mesh; XLA reduces the activations in two stages, over
    # the batch axis (groups of 4) and over the heads axis (groups of 2, on a slice), which together join all 8.
    reduces = [c for c in found if c.op == "all-reduce"]
    assert any(c.shape == activations and c.group_size == 4 for c in reduces)
    assert {c.group_size for c in reduces} == {2, 4}
    joined = {0}
    for _ in range(8):
        joined |= {d for c in reduces for g in c.groups if joined & set(g) for d in g}
    assert joined == set(range(8))
    assert {c.op for c in mine} == {"all-reduce", "all-to-all"}
    assert {c.op for c in mine} < {c.op for c in found} and "all-gather" in {c.op for c in found}


def test_sequence_parallel_prefill_and_megatron_decode_generate_the_same_greedy_tokens(params, megatron8):
    prefill = sharded.sequence_parallel_prefill(CONFIG, (2, 2, 2), T)
    logits, cache = prefill.prefill(params, PROMPT, cache_len=T + N_NEW)
    ref_logits, ref_cache = model.prefill(params, PROMPT, cache_len=T + N_NEW)
    np.testing.assert_allclose(np.asarray(logits), np.asarray(ref_logits), atol=ATOL)
    np.testing.assert_allclose(np.asarray(cache.k), np.asarray(ref_cache.k), atol=ATOL)
    tokens = sharded.generate(megatron8[0], params, PROMPT, N_NEW, prefill=prefill)
    np.testing.assert_array_equal(np.asarray(tokens), np.asarray(model.generate(params, PROMPT, N_NEW)))


# --- the compiled collectives are the ones scaling_lib.sharding counts ------------------------------------------------

@pytest.mark.parametrize("layout, head_shards, batch_shards", [("megatron8", 2, 4), ("megatron2", 2, 1)])
def test_s5_megatron_all_reduces_b_x_d_twice_per_layer_and_all_to_alls_only_a_batch_sharded_cache(
        layout, head_shards, batch_shards, request):
    """8 devices split the 2 KV heads 2 ways and the batch 4 ways: two all-to-alls per attention layer, each moving one
    device's queries (or outputs), B x N/n heads x H floats, within groups of the batch shards. A 1 x 2 mesh splits
    the cache by heads only: no all-to-all. Either way two all-reduces of the [B, D] activations per layer (after W_o
    and after W_down), and the weights never move."""
    decode, _, found = request.getfixturevalue(layout)
    rule = kv_cache_sharding(CONFIG.n_kv_heads, B, decode.mesh.size)
    assert (decode.kv.head_shards, decode.kv.batch_shards) == (rule.head_shards, rule.batch_shards) == (
        head_shards, batch_shards)
    all_to_alls = [c for c in found if c.op == "all-to-all"]
    assert len(all_to_alls) == rule.all_to_alls_per_attention_layer * CONFIG.n_layers == (
        2 * CONFIG.n_layers if batch_shards > 1 else 0)
    assert {c.bytes for c in all_to_alls} <= {B * CONFIG.n_heads // 8 * CONFIG.head_dim * 4}
    assert {c.group_size for c in all_to_alls} <= {batch_shards}
    reduces = [c for c in found if c.op == "all-reduce"]
    assert len(reduces) == 2 * CONFIG.n_layers
    assert {c.bytes for c in reduces} == {B * CONFIG.d_model * 4}
    assert {c.group_size for c in reduces} == {decode.mesh.size}
    assert count(found, "all-gather") == 0


def test_s4_fsdp_decode_all_gathers_every_weight_byte_each_step_as_its_cost_counts(fsdp8):
    _, _, found = fsdp8
    gathered = sum(c.bytes for c in found if c.op == "all-gather")
    assert gathered == pytest.approx(param_bytes(CONFIG, "fp32"), rel=0.02)  # norm gains are the only extra
    assert gathered == fsdp_gather_bytes(CONFIG, "fp32")  # exactly: weights and norm gains, whole on every device
    assert count(found, "all-reduce") == 0 and count(found, "all-to-all") == 0
    n, chip = 8, get_chip("tpu-v5e")
    received = gathered * (n - 1) / n  # each device lacks 7/8 of it
    tiny_cost = fsdp_decode_cost(CONFIG, chip, n, weight_dtype="fp32")
    assert tiny_cost.ici_s * chip.ici_bidirectional == pytest.approx(received, rel=0.02)
    real = fsdp_decode_cost("llama3-70b", chip, n)
    assert real.slowdown > 10  # all-gathering 141 GB over ICI vs reading 1/8 of it from HBM
    assert real.hbm_s == pytest.approx(decode_step_time("llama3-70b", chip, n, 1, 0, check_capacity=False).weight_s,
                                       rel=1e-9)


def test_fsdp_gathers_the_weights_the_model_stores_whatever_a_layout_replicates(params, reference):
    stored = {name: tuple(getattr(params, name).shape) for name in sharding.weight_shapes(CONFIG)}
    assert stored == sharding.weight_shapes(CONFIG)  # the closed-form inventory is the arrays the model stores
    assert params.unembed is not None and "unembed" in stored  # untied: the output projection is its own table
    specs, cache_specs = sharded.fsdp_specs(CONFIG, 8)
    specs = dataclasses.replace(specs, embed=P())  # the embedding replicated: everything else is gathered
    mesh = sharded.as_mesh((8,), ("all",))
    step = sharded.fsdp_step(mesh, specs, cache_specs)
    shardings = (sharded.named(mesh, specs), NamedSharding(mesh, P("all")), sharded.named(mesh, cache_specs))
    args = jax.device_put((params, reference[1], jax.tree.map(jnp.copy, reference[0])), shardings)
    logits, _ = step(*args)
    assert np.allclose(logits, reference[2], atol=ATOL)  # the same step, whatever is replicated
    compiled = step.lower(*args).compile()
    gathered = sum(c.bytes for c in parse_collectives(compiled.as_text(), n_devices=8) if c.op == "all-gather")
    assert gathered == fsdp_gather_bytes(CONFIG, "fp32", replicated="embed")


def test_s6_sequence_parallel_prefill_all_gathers_k_and_v_once_per_layer(params):
    prefill = sharded.sequence_parallel_prefill(CONFIG, (8,), T)
    compiled = prefill.run.lower(params, jnp.asarray(PROMPT)).compile()
    found = parse_collectives(compiled.as_text(), n_devices=8)
    assert [c.op for c in found] == ["all-gather"] * 2 * CONFIG.n_layers
    assert {c.bytes for c in found} == {B * T * CONFIG.n_kv_heads * CONFIG.head_dim * 4}


# --- the step's components in closed form (scaling_lib.sharding): no JAX --------------------------------------------

def test_decode_step_components_are_the_step_time_bound_plus_ici_whose_share_grows_with_the_chips():
    # One chip: the bound without ICI (227 GB on one 192 GB chip, priced as if it fitted: a property of the formula).
    parts = decode_step_components("llama3-70b", "ironwood", 1, 32, 8192, check_capacity=False)
    step = decode_step_time("llama3-70b", "ironwood", 1, 32, 8192, check_capacity=False)
    assert (parts.weights_s, parts.kv_s, parts.flops_s, parts.ici_s) == (step.weight_s, step.kv_s, step.compute_s, 0)
    assert parts.total_s == pytest.approx(step.total_s)
    parts = {n: decode_step_components("llama3-70b", "tpu-v5e", n, 64, 8192, check_capacity=False)
             for n in (2, 4, 8, 16, 32)}  # (the small n do not fit: the terms are a property of the formula)
    for n in (4, 8, 16, 32):
        assert parts[n].weights_s == pytest.approx(parts[2].weights_s * 2 / n)
        # The ICI term does not fall as 1/n (an all-reduce moves the same bytes over more hops; a small v5e slice has
        # no wraparound, so 16 chips, which wrap, cost less than 8 in a line): its share of the step grows.
        assert parts[n].ici_s / parts[n].weights_s > parts[n // 2].ici_s / parts[n // 2].weights_s


def test_s1_ici_overtakes_the_weight_read_near_f_over_b_beta():
    # Bandwidth regime (large batch, so no collective is latency-bound): where the ICI term meets the weight read.
    model_, chip, batch = get_model("llama3-70b"), "ironwood", 256
    one = decode_step_components(model_, chip, 2, batch, 0)
    bandwidth_s = one.ici_s - one.ici_latency_s  # time = hop latency + bytes / bandwidth; the hops are a few %
    assert one.ici_latency_s < 0.05 * one.ici_s
    crossing = one.weights_s * 2 / bandwidth_s  # weights_s falls as 1/n, the bandwidth term is flat in n
    formula = max_decode_model_parallelism(model_.d_ff, batch, beta(chip))
    # By hand: the ICI term is L x 2 all-reduces x 2 B D bf16 / W_ici = 8 L B D / W_ici and the weight read 2 P / (n W),
    # so they meet at n = P / (4 L B D beta); the formula F / (B beta) counts one B D per FFN matmul and only the FFN.
    # Their ratio is P / (4 L D F), 70,552,387,584 / (4 x 80 x 8,192 x 28,672) = 0.9387 for LLaMA-3-70B.
    assert crossing / formula == pytest.approx(70_552_387_584 / (4 * 80 * 8192 * 28672), rel=1e-9)
    assert crossing / formula == pytest.approx(0.9387, rel=1e-4)


def test_s3_decode_collectives_of_a_small_batch_are_latency_bound():
    parts = decode_step_components("llama3-70b", "tpu-v5e", 8, 16, 8192, activation_dtype="int8",
                                   check_capacity=False)
    # each collective's time is its hops' latency plus its bytes over the links: here the hops are most of it
    assert parts.ici_latency_s > 2 * (parts.ici_s - parts.ici_latency_s) > 0


# --- layouts that do not divide -------------------------------------------------------------------------------------

@pytest.mark.parametrize("call, message", [
    pytest.param(lambda: sharded.megatron_decode(model.tiny_config(), B, (8,)),
                 r"n_heads=4 does not split over mesh axes \(x=8\)", id="heads over too many devices"),
    pytest.param(lambda: sharded.megatron_decode(CONFIG.with_(d_ff=130), B, (2, 2)),
                 r"d_ff=130 does not split over mesh axes \(x=2, y=2\) = 4 devices", id="d_ff"),
    pytest.param(lambda: sharded.megatron_decode(CONFIG, 6, (2, 4)),
                 r"mesh axes \(x=2, y=4\) = 8 devices: batch=6 does not split 4 ways.*2 for the 2 KV heads",
                 id="the batch beyond the KV heads"),
    pytest.param(lambda: sharded.fsdp_decode(CONFIG, 4, (8,)), r"batch=4 does not split over mesh axes \(x=8\)",
                 id="FSDP's batch"),
    pytest.param(lambda: sharded.megatron_decode(CONFIG, B, (4, 4)),
                 r"mesh axes \(x=4, y=4\) need 16 devices but only 8", id="more devices than there are"),
    pytest.param(lambda: sharded.sequence_parallel_prefill(CONFIG, (8,), 12),
                 r"prompt_len=12 does not split over mesh axes \(x=8\)", id="a prompt that does not split"),
    pytest.param(lambda: decode_step_components("llama3-70b", "tpu-v5e", 8, 16, 8192, mesh_shape=(4, 4)),
                 r"mesh_shape \(4, 4\) has 16 chips, not n_chips=8", id="a priced mesh of the wrong size"),
])
def test_layouts_that_do_not_divide_raise_naming_axis_and_sizes(call, message):
    with pytest.raises(ValueError, match=message):
        call()
