"""scaling_lib.tiny.xla against XLA on 8 emulated CPU devices (conftest sets the flag)."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.sharding import AxisType, Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from scaling_lib.tiny.xla import Collective, collectives, compiled_cost, emulated_mesh, parse_collectives


def test_the_emulated_mesh_has_the_eight_devices_conftest_asks_for_auto_axes_and_the_requested_shape():
    assert len(jax.devices()) == 8
    mesh = emulated_mesh((2, 4), ("x", "y"))
    assert dict(mesh.shape) == {"x": 2, "y": 4}
    assert mesh.axis_types == (AxisType.Auto, AxisType.Auto)


def _rows_split_8_ways():
    return jax.device_put(jnp.ones((64, 128)), jax.NamedSharding(emulated_mesh((8,), ("x",)), P("x", None)))


@pytest.mark.parametrize("fn, args, flops", [
    pytest.param(jnp.matmul, lambda: (jnp.ones((64, 128)), jnp.ones((128, 256))), 2 * 64 * 128 * 256,
                 id="a matmul: 2 m k n"),
    pytest.param(jnp.matmul, lambda: (_rows_split_8_ways(), jnp.ones((128, 256))), 2 * 64 * 128 * 256 / 8,
                 id="per device, for rows split 8 ways"),
    pytest.param(lambda x: x.T, lambda: (jnp.ones((8, 4)),), 0, id="no arithmetic: zero"),
])
def test_compiled_cost_counts_the_flops_of_one_device(fn, args, flops):
    cost = compiled_cost(fn, *args())
    assert cost.flops == pytest.approx(flops, rel=0.01)
    if fn is jnp.matmul and flops == 2 * 64 * 128 * 256:  # reads both operands and writes the result
        assert cost.bytes_accessed >= 4 * (64 * 128 + 128 * 256 + 64 * 256)


def mesh_groups(devices, axes) -> set:
    """The oracle: the groups a mesh implies for a collective over `axes` (indices into the device array's
    dimensions): the device array with those dimensions moved last, read off in rows of their product. Each group
    is a frozenset of device ids (membership, not ring order)."""
    devices = np.vectorize(lambda d: getattr(d, "id", d))(np.asarray(devices))
    rest = [d for d in range(devices.ndim) if d not in axes]
    size = int(np.prod([devices.shape[a] for a in axes]))
    return {frozenset(g) for g in devices.transpose(rest + list(axes)).reshape(-1, size).tolist()}


def as_sets(collective) -> set:
    return {frozenset(g) for g in collective.groups}


# Two 2 x 4 meshes of the 8 emulated devices: row-major, and one whose devices are laid out column-major (device 1 is
# at x=1, y=0), so that XLA's logical device numbers and the devices' ids differ.
MESHES = {"row-major": lambda: emulated_mesh((2, 4), ("x", "y")),
          "column-major": lambda: Mesh(np.array(jax.devices()).reshape(4, 2).T, ("x", "y"),
                                       axis_types=(AxisType.Auto, AxisType.Auto))}


@pytest.mark.parametrize("mesh_name", MESHES)
@pytest.mark.parametrize("axis, group_size", [("y", 4), ("x", 2), (("x", "y"), 8), (("y", "x"), 8)])
def test_a_jitted_matmul_split_over_a_mesh_axis_all_reduces_among_that_axis(mesh_name, axis, group_size):
    # x @ w with the contraction split over `axis`: each device holds a partial sum, and XLA all-reduces it among the
    # devices that share the other axis. JAX 0.10 prints these groups as a named mesh (mesh[...] {'axis_1'}, with
    # device_ids when the axis is not the minor one): the book once read that as every device (group_size 8).
    mesh = MESHES[mesh_name]()
    x = jax.device_put(jnp.ones((16, 64)), NamedSharding(mesh, P(None, axis)))
    w = jax.device_put(jnp.ones((64, 32)), NamedSharding(mesh, P(axis, None)))
    (found,) = collectives(lambda a, b: a @ b, x, w)
    assert (found.op, found.group_size, found.shape) == ("all-reduce", group_size, (16, 32))
    axes = [mesh.axis_names.index(a) for a in ((axis,) if isinstance(axis, str) else axis)]
    assert as_sets(found) == mesh_groups(mesh.devices, axes)


@pytest.mark.parametrize("mesh_name", MESHES)
def test_every_kind_of_collective_in_shard_map_groups_the_devices_of_its_axis(mesh_name):
    mesh = MESHES[mesh_name]()

    def every_kind(x):
        return (lax.psum(x, "x"), lax.all_gather(x, "y", tiled=True),
                lax.psum_scatter(x, "y", scatter_dimension=1, tiled=True), lax.all_to_all(x, "y", 0, 1, tiled=True),
                lax.ppermute(x, "y", [(i, (i + 1) % 4) for i in range(4)]))

    program = jax.shard_map(every_kind, mesh=mesh, in_specs=P("x", "y"), out_specs=P("x", "y"), check_vma=False)
    # f32: XLA's CPU backend promotes bf16 collectives to f32, which would double the bytes seen here
    found = {c.op: c for c in collectives(program, jnp.ones((16, 32), jnp.float32))}  # blocks of [8, 8]
    assert set(found) == {"all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute"}
    assert found["all-gather"].shape == (32, 8) and found["all-gather"].bytes == 32 * 8 * 4
    assert found["reduce-scatter"].bytes == 8 * 2 * 4
    assert found["all-to-all"].bytes == 8 * 8 * 4  # whatever tuple form XLA picks, one block's worth in total
    assert found["collective-permute"].bytes == 8 * 8 * 4
    assert as_sets(found.pop("all-reduce")) == mesh_groups(mesh.devices, [0])
    for op, collective in found.items():  # a ring on y: its pairs connect the devices of one row
        assert collective.group_size == 4 and as_sets(collective) == mesh_groups(mesh.devices, [1]), op
    # A psum over all 8 devices of a 1-D mesh: one all-reduce of each device's own [8, 16] f32 block.
    summed = jax.shard_map(lambda x: lax.psum(x, "x"), mesh=emulated_mesh((8,), ("x",)), in_specs=P("x"),
                           out_specs=P())
    (reduced,) = collectives(summed, jnp.ones((64, 16), jnp.float32))
    assert (reduced.op, reduced.shape, reduced.dtype, reduced.bytes, reduced.group_size) == (
        "all-reduce", (8, 16), "f32", 8 * 16 * 4, 8)


# Every spelling of replica_groups XLA prints, written for the row-major 2 x 4 mesh (device x * 4 + y), with the mesh
# axes its groups span; sub-axes split y (size 4) into a major and a minor half: y = 2 y_major + y_minor.
ROW_MAJOR = np.arange(8).reshape(2, 4)
Y_HALVES = ROW_MAJOR.reshape(2, 2, 2)  # [x, y_major, y_minor]
SPELLINGS = [
    ("{{0,1,2,3},{4,5,6,7}}", ROW_MAJOR, [1]),
    ("{{0,4},{1,5},{2,6},{3,7}}", ROW_MAJOR, [0]),
    ("{}", ROW_MAJOR, [0, 1]),
    ("[2,4]<=[8]", ROW_MAJOR, [1]),
    ("[4,2]<=[2,4]T(1,0)", ROW_MAJOR, [0]),
    ("[1,8]<=[8]", ROW_MAJOR, [0, 1]),
    ("mesh['x'=2,'y'=4] {'y'}", ROW_MAJOR, [1]),
    ("mesh['x'=2,'y'=4] {'x'}", ROW_MAJOR, [0]),
    ("mesh['x'=2,'y'=4] {'y','x'}", ROW_MAJOR, [0, 1]),
    # the same mesh named y-major: mesh[y, x] holds device x * 4 + y, an iota transposed or a list of ids
    ("mesh['y'=4,'x'=2], device_ids=([2,4]T(1,0)) {'y'}", ROW_MAJOR, [1]),
    ("mesh['y'=4,'x'=2], device_ids=(0,4,1,5,2,6,3,7) {'x'}", ROW_MAJOR, [0]),
    ("mesh['axis_0'=1,'axis_1'=4,'axis_2'=2], device_ids=([2,4]T(1,0)) {'axis_1'}", ROW_MAJOR, [1]),  # from jit
    ("mesh['x'=2,'y'=4] {'y':(1)2}", Y_HALVES, [1]),
    ("mesh['x'=2,'y'=4] {'y':(2)2}", Y_HALVES, [2]),
    ("mesh['x'=2,'y'=4] {'x','y':(2)2}", Y_HALVES, [0, 2]),
]


@pytest.mark.parametrize("spelling, devices, axes", SPELLINGS)
def test_every_spelling_of_replica_groups_reads_as_the_groups_its_mesh_implies(spelling, devices, axes):
    line = f"  %ar = f32[4]{{0}} all-reduce(f32[4]{{0}} %p), channel_id=1, replica_groups={spelling}, to_apply=%add"
    (found,) = parse_collectives(f"HloModule m, num_partitions=8\n{line}")
    assert as_sets(found) == mesh_groups(devices, axes)
    assert found.group_size == 8 // len(mesh_groups(devices, axes))
    # The spelling is XLA's own: its HLO parser reads it and prints it back unchanged.
    hlo = pytest.importorskip("jaxlib.xla_client").hlo  # jaxlib's HLO parser
    module = hlo.hlo_module_from_text(XLA_MODULE.format(groups=spelling))
    assert f"replica_groups={spelling}," in module.to_string()


XLA_MODULE = """HloModule m, num_partitions=8

%add (a: f32[], b: f32[]) -> f32[] {{
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}}

ENTRY %main (p: f32[4]) -> f32[4] {{
  %p = f32[4]{{0}} parameter(0)
  ROOT %ar = f32[4]{{0}} all-reduce(%p), channel_id=1, replica_groups={groups}, use_global_device_ids=true, to_apply=%add
}}
"""


def all_reduce(groups: str) -> str:
    return f"%ar = f32[4]{{0}} all-reduce(%p), replica_groups={groups}, to_apply=%add"


@pytest.mark.parametrize("call, problem", [
    pytest.param(lambda: parse_collectives(all_reduce("mesh['x'=2,'y'=4] {'z'}")), "names no axis",
                 id="an axis the mesh lacks"),
    pytest.param(lambda: parse_collectives(all_reduce("mesh['x'=2,'y'=4], device_ids=(0,1,2,3,4,5,6,6) {'y'}")),
                 "not a permutation", id="device ids repeated"),
    pytest.param(lambda: parse_collectives(all_reduce("mesh['x'=2,'y'=4] {'y':(3)2}")), "does not tile",
                 id="a sub-axis that does not tile"),
    pytest.param(lambda: parse_collectives(all_reduce("maximal_mesh[device_id=0]")),
                 "cannot read replica_groups='maximal_mesh", id="a spelling it cannot read"),
    pytest.param(lambda: parse_collectives(all_reduce("[2,4]<=[2,4]T(1,1)")), "not a permutation",
                 id="an iota transposed onto itself"),
    pytest.param(lambda: parse_collectives(all_reduce("{{0,1,2},{3,4}}")), "different sizes",
                 id="groups of different sizes"),
    pytest.param(lambda: parse_collectives(all_reduce("{}")), "pass n_devices", id="every device, of an unknown count"),
    pytest.param(lambda: parse_collectives("%ag = f32[8]{0} all-gather(%p), dimensions={0}", 8), "no replica_groups",
                 id="no groups at all"),
    pytest.param(lambda: parse_collectives("  %ag = f4e2m1fn[16]{0} all-gather(%c), replica_groups={{0,1}}, "
                                           "dimensions={0}\n", n_devices=2),
                 "unknown HLO element type 'f4e2m1fn'", id="an element type it does not know"),
    pytest.param(lambda: parse_collectives("  %ag = f4e2m1fn[16]{0} all-gather(%c), replica_groups={{0,1}}, "
                                           "dimensions={0}\n", n_devices=2),
                 "_HLO_BYTES", id="and the table to add it to"),
    pytest.param(lambda: emulated_mesh((4, 4), ("x", "y")), "16 devices", id="a mesh larger than the devices"),
    pytest.param(lambda: emulated_mesh((4, 4), ("x", "y")), "8 are visible", id="which says how many there are"),
    pytest.param(lambda: emulated_mesh((4, 4), ("x", "y")), "--xla_force_host_platform_device_count",
                 id="and which flag to set"),
    pytest.param(lambda: emulated_mesh((2, 4), ("x",)), "axis_names", id="one name for two axes"),
])
def test_what_cannot_be_read_or_built_is_an_error_naming_it_never_every_device(call, problem):
    with pytest.raises(ValueError, match=re.escape(problem)):
        call()


def test_parse_collectives_reads_iota_groups_and_tuple_results():
    hlo = """
  %all-to-all.3 = (f32[2,4]{1,0}, bf16[2,4]{1,0}) all-to-all(%a, %b), channel_id=1, replica_groups=[2,4]<=[8]
  %all-gather.1 = s8[16]{0} all-gather(%c), replica_groups={{0,1},{2,3},{4,5},{6,7}}, dimensions={0}
  %ar = f32[] all-reduce(%d), replica_groups={}, to_apply=%add
  %ar-done = f32[4]{0} all-reduce-done(%e)
  %fusion = f32[4]{0} fusion(%all-gather.1), kind=kLoop
  %cp = u8[8]{0} collective-permute(%f), source_target_pairs={{0,1},{1,0},{2,3},{3,2}}
"""
    pairs = ((0, 1), (2, 3), (4, 5), (6, 7))
    assert parse_collectives(hlo, n_devices=8) == [
        Collective("all-to-all", ((2, 4), (2, 4)), ("f32", "bf16"), 2 * 4 * 4 + 2 * 4 * 2, 4,
                   ((0, 1, 2, 3), (4, 5, 6, 7))),
        Collective("all-gather", (16,), "s8", 16.0, 2, pairs),
        Collective("all-reduce", (), "f32", 4.0, 8, (tuple(range(8)),)),
        Collective("collective-permute", (8,), "u8", 8.0, 2, pairs[:2]),
    ]
    # {} is every device of the program the header describes, not every device visible.
    (every,) = parse_collectives("HloModule m, num_partitions=4\n" + all_reduce("{}"), n_devices=8)
    assert every.groups == ((0, 1, 2, 3),)
    # With the program's device assignment the groups are in device ids: logical device k is device_ids[k].
    (permute,) = parse_collectives(hlo.splitlines()[-1], device_ids=[5, 6, 7, 0, 1, 2, 3, 4])
    assert permute.groups == ((5, 6), (7, 0))
