"""Pope et al.'s layouts executed in shard_map on a 2x2x2 emulated mesh: equal to the unsharded block, and the
collective bytes in the compiled HLO equal to the cost model's (scaling_lib.layouts) prediction for that mesh. The
attention collectives' closed form by hand is tests/math/test_attention_sharding.py's."""

import jax
import numpy as np
import pytest

from scaling_lib import collectives, layouts
from scaling_lib.book.portable import FLOAT32_ROUNDING, relative_difference
from scaling_lib.tiny.layouts import (ATTENTION_SPECS, FFN_LAYOUTS, FFN_SPECS, attention_reference, block_model,
                                      ffn_reference, hlo_model_bytes, hlo_sent_bytes, predicted_attention,
                                      predicted_ffn, random_attention_inputs, random_ffn_inputs, run_attention, run_ffn)
from scaling_lib.tiny.xla import device_blocks, emulated_mesh

ATOL = 1e-4
T, D, F = 16, 32, 64  # tokens, d_model, d_ff: every split on 2x2x2 is even
B, N, S, H = 8, 8, 32, 16  # batch, query heads, context, head dim (one KV head)


@pytest.fixture(scope="module")
def mesh():
    return emulated_mesh((2, 2, 2), ("x", "y", "z"))


@pytest.fixture(scope="module")
def ffn_runs(mesh):
    args = random_ffn_inputs(T, D, F, seed=0)
    return args, {layout: run_ffn(layout, mesh, *args) for layout in FFN_LAYOUTS}


@pytest.fixture(scope="module")
def attention_runs(mesh):
    args = random_attention_inputs(B, N, S, H, seed=1)
    return args, {s: run_attention(s, mesh, *args) for s in ("heads", "batch")}


def _signature(ops):
    """(op, group size, per-chip bytes in the cost model's accounting), sorted."""
    return sorted(ops)


@pytest.mark.parametrize("layout", FFN_LAYOUTS)
def test_an_executed_ffn_layout_equals_the_unsharded_block_and_moves_the_bytes_the_cost_model_counts(
        ffn_runs, mesh, layout):
    args, runs = ffn_runs
    run = runs[layout]
    np.testing.assert_allclose(np.asarray(run.output), np.asarray(ffn_reference(*args)), atol=ATOL)
    # Chapter 8 prints "< FLOAT32_ROUNDING" of the largest output: it holds with 4x to spare.
    assert relative_difference(run.output, ffn_reference(*args)) <= FLOAT32_ROUNDING / 4
    predicted = predicted_ffn(layout, mesh, T, D, F)
    hlo = _signature((c.op, c.group_size, hlo_model_bytes(c)) for c in run.collectives)
    model = _signature((c.op, int(np.prod(c.group)), c.bytes_per_chip) for c in predicted)
    assert hlo == model  # exact: same ops, same groups, same bytes
    assert run.model_bytes == layouts.ffn_comm_volume(layout, block_model(D, F), T, (2, 2, 2), "fp32",
                                                      "fp32").total_bytes
    # With the ring factor (K-1)/K put back, the HLO and the model still agree collective by collective.
    assert run.sent_bytes == pytest.approx(sum(collectives.ring_bytes_sent(c) for c in predicted), rel=1e-12)


def test_what_the_executed_ffn_layouts_move_by_hand(ffn_runs):
    runs = ffn_runs[1]
    assert [c.op for c in runs["wg-xyz"].collectives] == ["all-gather", "all-gather"]  # W_in, W_out only
    # The weight-gathered layouts move more bytes than weight-stationary at 16 tokens (weights >> activations).
    assert runs["wg-xyz"].model_bytes > runs["wg-xy"].model_bytes > runs["wg-x"].model_bytes
    assert runs["wg-x"].model_bytes > runs["1d-ws"].model_bytes
    # F = 2D puts this mesh exactly at Pope's 1D/2D crossover n = 4F/D = 8: the two move the same bytes.
    assert layouts.ws_2d_crossover_chips(D, F) == 8
    assert runs["1d-ws"].model_bytes == runs["2d-ws"].model_bytes
    # 1D weight-stationary's reduce-scatter, as read off the HLO: its result is 1/8 of the [T, D] partial sums; the
    # model counts the unreduced input, and a ring sends 7/8 of it.
    reduce_scatter = [c for c in runs["1d-ws"].collectives if c.op == "reduce-scatter"][0]
    assert reduce_scatter.shape == (T, D // 8)
    assert hlo_model_bytes(reduce_scatter) == 4 * T * D
    assert hlo_sent_bytes(reduce_scatter) == 4 * T * D * 7 / 8


@pytest.mark.parametrize("sharding, kv_share", [("heads", 1), ("batch", 1 / 8)])
def test_executed_multiquery_attention_equals_unsharded_moves_the_bytes_the_cost_model_counts_and_stores_its_share(
        attention_runs, mesh, sharding, kv_share):
    """Multiquery attention has one KV head: split by heads, every chip holds the whole cache; split by batch, an
    eighth of it, at the price of two all-to-alls."""
    args, runs = attention_runs
    run = runs[sharding]
    np.testing.assert_allclose(np.asarray(run.output), np.asarray(attention_reference(*args)), atol=ATOL)
    assert relative_difference(run.output, attention_reference(*args)) <= FLOAT32_ROUNDING / 4  # ch. 8
    predicted = predicted_attention(sharding, mesh, B, N, H)
    hlo = _signature((c.op, c.group_size, hlo_model_bytes(c)) for c in run.collectives)
    assert hlo == _signature((c.op, int(np.prod(c.group)), c.bytes_per_chip) for c in predicted)
    assert len(hlo) == (2 if sharding == "batch" else 0)
    k = args[1]
    placed = jax.device_put(k, jax.NamedSharding(mesh, ATTENTION_SPECS[sharding][1]))
    assert placed.addressable_shards[0].data.nbytes == k.nbytes * kv_share


def test_layout_blocks_cover_each_tensor_once_per_replica(mesh):
    for layout, specs in FFN_SPECS.items():
        for spec, shape in ((specs.x, (T, D)), (specs.w_in, (D, F)), (specs.w_in_used, (D, F))):
            blocks = device_blocks(spec, shape, mesh=mesh)
            area = sum((b.rows[1] - b.rows[0]) * (b.cols[1] - b.cols[0]) for b in blocks)
            assert area == shape[0] * shape[1]  # distinct blocks tile the tensor
            assert sorted(d for b in blocks for d in b.devices) == list(range(8))  # one block per device
            assert {len(b.devices) for b in blocks} == {8 // len(blocks)}  # each block replicated evenly
    assert len(device_blocks(FFN_SPECS["wg-xyz"].w_in_used, (D, F), mesh=mesh)) == 1  # fully gathered


@pytest.mark.parametrize("call, message", [
    (lambda m: run_ffn("2d-ws", emulated_mesh((2, 4), ("x", "y")), *random_ffn_inputs(T, D, F)), "mesh axes"),
    (lambda m: run_ffn("1d-ws", m, *random_ffn_inputs(T, 36, F)), r"d_model=36.*mesh axes x\+y\+z"),
    (lambda m: run_ffn("2d-ws", m, *random_ffn_inputs(T, D, 34)), r"d_ff=34.*mesh axes z\+y"),
    (lambda m: run_ffn("wg-xyz", m, *random_ffn_inputs(12, D, F)), r"tokens=12.*mesh axes x\+y\+z"),
    (lambda m: run_ffn("wg-xy", m, *random_ffn_inputs(6, D, F)), r"tokens=6.*mesh axes x\+y "),
    (lambda m: run_ffn("3d-ws", m, *random_ffn_inputs(T, D, F)), "unknown layout"),
    (lambda m: run_attention("batch", m, *random_attention_inputs(4, N, S, H)), r"batch=4.*mesh axes x\+y\+z"),
    (lambda m: run_attention("heads", m, *random_attention_inputs(B, 6, S, H)), "n_heads=6"),
    (lambda m: run_attention("sequence", m, *random_attention_inputs(B, N, S, H)), "unknown attention_sharding"),
    (lambda m: run_ffn("1d-ws", m, *(a.astype("bfloat16") for a in random_ffn_inputs(T, D, F))), "float32"),
])
def test_layouts_that_do_not_divide_the_mesh_or_do_not_exist_are_refused(mesh, call, message):
    with pytest.raises(ValueError, match=message):
        call(mesh)
