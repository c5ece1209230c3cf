"""scaling_lib.tiny.xla against XLA on 8 emulated CPU devices (conftest sets the flag)."""

import jax
import jax.numpy as jnp
import pytest
from jax import lax
from jax.sharding import AxisType
from jax.sharding import PartitionSpec as P

from scaling_lib.tiny.xla import Collective, collectives, compiled_cost, emulated_mesh, parse_collectives


def test_conftest_gives_eight_devices():
    assert len(jax.devices()) == 8


def test_emulated_mesh_has_auto_axes_and_the_requested_shape():
    mesh = emulated_mesh((2, 4), ("x", "y"))
    assert dict(mesh.shape) == {"x": 2, "y": 4}
    assert mesh.axis_types == (AxisType.Auto, AxisType.Auto)


def test_emulated_mesh_too_many_devices_says_how_many_and_which_flag():
    with pytest.raises(ValueError) as err:
        emulated_mesh((4, 4), ("x", "y"))
    message = str(err.value)
    assert "16 devices" in message and "8 are visible" in message
    assert "--xla_force_host_platform_device_count" in message


def test_emulated_mesh_rejects_mismatched_axis_names():
    with pytest.raises(ValueError, match="axis_names"):
        emulated_mesh((2, 4), ("x",))


def test_compiled_cost_of_a_matmul_is_2mkn_flops():
    a, b = jnp.ones((64, 128)), jnp.ones((128, 256))
    cost = compiled_cost(jnp.matmul, a, b)
    assert cost.flops == pytest.approx(2 * 64 * 128 * 256, rel=0.01)
    assert cost.bytes_accessed >= 4 * (64 * 128 + 128 * 256 + 64 * 256)  # read both operands, write the result


def test_compiled_cost_is_per_device_for_a_sharded_matmul():
    mesh = emulated_mesh((8,), ("x",))
    a = jax.device_put(jnp.ones((64, 128)), jax.NamedSharding(mesh, P("x", None)))  # rows split 8 ways
    cost = compiled_cost(jnp.matmul, a, jnp.ones((128, 256)))
    assert cost.flops == pytest.approx(2 * 64 * 128 * 256 / 8, rel=0.01)


def test_compiled_cost_of_a_program_without_arithmetic_is_zero_flops():
    assert compiled_cost(lambda x: x.T, jnp.ones((8, 4))).flops == 0.0


def test_psum_in_shard_map_is_one_all_reduce_over_eight_devices():
    mesh = emulated_mesh((8,), ("x",))
    summed = jax.shard_map(lambda x: lax.psum(x, "x"), mesh=mesh, in_specs=P("x"), out_specs=P())
    found = collectives(summed, jnp.ones((64, 16), jnp.float32))
    assert [c.op for c in found] == ["all-reduce"]
    assert found[0].shape == (8, 16) and found[0].dtype == "f32"
    assert found[0].bytes == 8 * 16 * 4  # each device reduces its own [8, 16] block
    assert found[0].group_size == 8


def test_collectives_on_a_2x4_mesh_use_groups_of_four():
    mesh = emulated_mesh((2, 4), ("x", "y"))

    def every_kind(x):
        return (lax.all_gather(x, "y", tiled=True), lax.psum_scatter(x, "y", scatter_dimension=1, tiled=True),
                lax.all_to_all(x, "y", 0, 1, tiled=True), lax.ppermute(x, "y", [(i, (i + 1) % 4) for i in range(4)]))

    program = jax.shard_map(every_kind, mesh=mesh, in_specs=P("x", "y"), out_specs=P("x", "y"), check_vma=False)
    # f32: XLA's CPU backend promotes bf16 collectives to f32, which would double the bytes seen here
    found = {c.op: c for c in collectives(program, jnp.ones((16, 32), jnp.float32))}  # blocks of [8, 8]
    assert set(found) == {"all-gather", "reduce-scatter", "all-to-all", "collective-permute"}
    assert found["all-gather"].shape == (32, 8) and found["all-gather"].bytes == 32 * 8 * 4
    assert found["reduce-scatter"].bytes == 8 * 2 * 4
    assert found["all-to-all"].bytes == 8 * 8 * 4  # whatever tuple form XLA picks, one block's worth in total
    assert found["collective-permute"].bytes == 8 * 8 * 4
    assert {c.group_size for c in found.values()} == {4}


def test_parse_collectives_reads_iota_groups_and_tuple_results():
    hlo = """
  %all-to-all.3 = (f32[2,4]{1,0}, bf16[2,4]{1,0}) all-to-all(%a, %b), channel_id=1, replica_groups=[2,4]<=[8]
  %all-gather.1 = s8[16]{0} all-gather(%c), replica_groups={{0,1},{2,3},{4,5},{6,7}}, dimensions={0}
  %ar = f32[] all-reduce(%d), replica_groups={}, to_apply=%add
  %ar-done = f32[4]{0} all-reduce-done(%e)
  %fusion = f32[4]{0} fusion(%all-gather.1), kind=kLoop
  %cp = u8[8]{0} collective-permute(%f), source_target_pairs={{0,1},{1,0},{2,3},{3,2}}
"""
    assert parse_collectives(hlo, n_devices=8) == [
        Collective("all-to-all", ((2, 4), (2, 4)), ("f32", "bf16"), 2 * 4 * 4 + 2 * 4 * 2, 4),
        Collective("all-gather", (16,), "s8", 16.0, 2),
        Collective("all-reduce", (), "f32", 4.0, 8),
        Collective("collective-permute", (8,), "u8", 8.0, 2),
    ]
