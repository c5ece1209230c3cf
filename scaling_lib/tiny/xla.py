"""Emulated device meshes, and what XLA says a compiled program costs and communicates.

On a laptop, `XLA_FLAGS=--xla_force_host_platform_device_count=8` (set before JAX initialises its backend; see
`setup_devices`) makes the CPU look like 8 devices. Sharded programs then compile exactly as they would for 8 chips, so we can read two things off them:
  compiled_cost(fn, *args)   XLA's own count of FLOPs and bytes of memory traffic, PER DEVICE;
  collectives(fn, *args)     the communication ops in the compiled HLO, with their shapes, bytes and group sizes.
The timings on emulated devices mean nothing; the FLOPs, bytes and collectives are the real compiled program's.
"""

import math
import os
import re
from dataclasses import dataclass

import jax
import numpy as np
from jax.sharding import AxisType, Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

DEVICE_FLAG = "XLA_FLAGS=--xla_force_host_platform_device_count=8"
DEVICES_ENV = "SCALING_BOOK_DEVICES"  # "cpu" (default): emulated CPU devices; "accelerator": the visible TPUs/GPUs
_COUNT_FLAG = "--xla_force_host_platform_device_count"


def setup_devices(count: int = 8) -> str:
    """Ask JAX for `count` emulated CPU devices, the book's default, or keep real accelerators; returns the mode.

    With SCALING_BOOK_DEVICES=accelerator in the environment nothing is forced: JAX uses the TPUs or GPUs it sees,
    so every sharded demo runs on real chips. Otherwise XLA_FLAGS gets --xla_force_host_platform_device_count=count
    (unless it already sets a count) and JAX is pinned to the CPU. Both settings are read when JAX initialises its
    backend, so call this before the first `jax.devices()` or computation; importing jax before is fine.
    """
    mode = os.environ.get(DEVICES_ENV, "cpu").strip().lower()
    if mode not in ("cpu", "accelerator"):
        raise ValueError(f"{DEVICES_ENV}={mode!r}; use 'cpu' (emulated devices, the default) or 'accelerator'")
    if mode == "accelerator":
        return mode
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"count must be a positive integer number of devices, got {count!r}")
    flags = os.environ.get("XLA_FLAGS", "")
    if _COUNT_FLAG not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} {_COUNT_FLAG}={count}".strip()
    os.environ["JAX_PLATFORMS"] = "cpu"
    jax.config.update("jax_platforms", "cpu")
    return mode


def emulated_mesh(shape, axis_names) -> Mesh:
    """A mesh of prod(shape) devices with automatic (`AxisType.Auto`) axes, e.g. emulated_mesh((2, 4), ("x", "y")).

    Auto axes let `jit` propagate shardings by itself. (`jax.make_mesh` defaults to Explicit axes, where a matmul
    over a sharded contraction dimension raises `ShardingTypeError` unless you pass `out_sharding=`.)"""
    shape, axis_names = tuple(shape), tuple(axis_names)
    if len(shape) != len(axis_names):
        raise ValueError(f"shape {shape} has {len(shape)} axes but axis_names {axis_names} names {len(axis_names)}")
    if not all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in shape):
        raise ValueError(f"mesh shape must be positive integers, got {shape}")
    needed, devices = math.prod(shape), jax.devices()
    if needed > len(devices):
        raise ValueError(
            f"a {'x'.join(map(str, shape))} mesh needs {needed} devices but only {len(devices)} are visible "
            f"({devices[0].platform}); to emulate them on the CPU set {DEVICE_FLAG} (with a count >= {needed}) "
            "before jax is first imported, e.g. in the notebook's first cell")
    grid = np.array(devices[:needed]).reshape(shape)
    return Mesh(grid, axis_names, axis_types=(AxisType.Auto,) * len(shape))


@dataclass(frozen=True)
class Block:
    """A rectangle [row_start, row_stop) x [col_start, col_stop) of an array (along two of its dimensions) and the
    ids of the devices holding it."""

    rows: tuple
    cols: tuple
    devices: tuple


def device_blocks(sharding, shape, dims=(0, 1), mesh=None) -> tuple:
    """Which device holds which block: the distinct blocks of an array of `shape` along dimensions `dims`, each
    with the ids of the devices that hold it (several when the block is replicated), in row-major order.

    `sharding` is a `NamedSharding`, or a `PartitionSpec` together with `mesh`. Nothing is computed or moved; the
    layout is read from `sharding.devices_indices_map`. Chapters 7 and 8 draw these with `book.plotting`."""
    if isinstance(sharding, P):
        if mesh is None:
            raise ValueError("a PartitionSpec needs the mesh it refers to: pass mesh=...")
        sharding = NamedSharding(mesh, sharding)
    shape = tuple(shape)
    if len(dims) != 2 or not all(0 <= d < len(shape) for d in dims):
        raise ValueError(f"dims must name two of the array's {len(shape)} dimensions, got {dims!r}")
    owners = {}
    for device, index in sharding.devices_indices_map(shape).items():
        key = tuple((index[d].start or 0, shape[d] if index[d].stop is None else index[d].stop) for d in dims)
        owners.setdefault(key, set()).add(int(device.id))
    return tuple(Block(rows, cols, tuple(sorted(ids))) for (rows, cols), ids in sorted(owners.items()))


def _compile(fn, *args, **kwargs):
    """Compile fn for these arguments: an already-jitted function keeps its own shardings (and jit's cache)."""
    lower = fn.lower if hasattr(fn, "lower") else jax.jit(fn).lower
    return lower(*args, **kwargs).compile()


@dataclass(frozen=True)
class CompiledCost:
    """XLA's cost analysis of a compiled program, PER DEVICE (multiply by the device count for the whole mesh).

    flops: floating-point operations (a multiply-add counts 2); bytes_accessed: HBM/memory traffic in bytes, reads
    plus writes -- not interconnect traffic (see `collectives` for that).
    """
    flops: float
    bytes_accessed: float


def compiled_cost(fn, *args, **kwargs) -> CompiledCost:
    """Per-device FLOPs and bytes accessed of jit(fn)(*args), from `compile().cost_analysis()`.

    A matmul [M,K] x [K,N] on one device reports 2 M K N flops. Programs with no arithmetic have no 'flops' entry,
    which counts as 0. Older JAX returned a list with one dict per device program; the first is used."""
    analysis = _compile(fn, *args, **kwargs).cost_analysis()
    if isinstance(analysis, (list, tuple)):
        analysis = analysis[0] if analysis else {}
    analysis = analysis or {}
    return CompiledCost(flops=float(analysis.get("flops", 0.0)),
                        bytes_accessed=float(analysis.get("bytes accessed", 0.0)))


def lowered_cost(fn, *args) -> CompiledCost:
    """XLA's cost analysis of jit(fn)(*args) BEFORE optimization: no compilation, so about 50x faster than
    `compiled_cost`. Its FLOPs agree with the compiled program's to within a fraction of a percent (fusion does
    not change arithmetic); its bytes do not (fusion removes intermediate traffic), so use it for FLOP sweeps only."""
    analysis = jax.jit(fn).lower(*args).cost_analysis() or {}
    if isinstance(analysis, (list, tuple)):
        analysis = analysis[0] if analysis else {}
    return CompiledCost(flops=float(analysis.get("flops", 0.0)),
                        bytes_accessed=float(analysis.get("bytes accessed", 0.0)))


# Bytes per element of HLO element types (sub-byte types count fractional bytes).
_HLO_BYTES = {"pred": 1, "s4": 0.5, "u4": 0.5, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "s32": 4, "u32": 4, "s64": 8,
              "u64": 8, "f16": 2, "bf16": 2, "f32": 4, "f64": 8, "c64": 8, "c128": 16, "f8e4m3fn": 1, "f8e5m2": 1,
              "f8e4m3": 1, "f8e4m3fnuz": 1, "f8e5m2fnuz": 1, "f8e4m3b11fnuz": 1, "f8e8m0fnu": 1}
COLLECTIVE_OPS = ("all-gather", "all-reduce", "reduce-scatter", "all-to-all", "collective-permute")
# `%name = <result type> op(` ; async pairs appear as op-start(...) / op-done(...): only the start is counted.
_LINE = re.compile(r"=\s*(?P<type>.+?)\s(?P<op>" + "|".join(COLLECTIVE_OPS) + r")(?P<start>-start)?\(")
_ARRAY = re.compile(r"(?P<dtype>[a-z][a-z0-9]*)\[(?P<dims>[0-9,]*)\]")
_HEADER_COUNTS = re.compile(r"\b(?P<key>num_partitions|replica_count)=(?P<n>\d+)")

# The spellings of replica_groups that XLA prints (xla/hlo/ir/replica_group.cc, mesh_and_axis.cc, tile_assignment.cc):
#   {{0,1,2,3},{4,5,6,7}}                      explicit groups; {} is one group of every device of the program
#   [2,4]<=[8]  [2,4]<=[4,2]T(1,0)              iota: iota(8) reshaped to [4,2], transposed, read as 2 groups of 4
#   mesh['x'=2,'y'=4] {'y'}                     named mesh: the devices that differ only along the grouped axes;
#   mesh[...], device_ids=([2,4]T(1,0)) {...}   the mesh's device order as an iota (or an explicit list 0,4,1,5,...);
#   mesh[...] {'y':(2)2}                        a sub-axis: size 2 of axis y, after a pre-size of 2 (y = [2, 2, 1])
_INTS = r"[0-9]+(?:,[0-9]+)*"
_IOTA = rf"\[(?P<{{0}}dims>{_INTS})\](?:T\((?P<{{0}}perm>{_INTS})\))?"
_GROUPS = re.compile(
    r"replica_groups=(?:"
    r"(?P<list>\{(?:\{[0-9,]*\},?)*\})"
    rf"|\[(?P<shape>{_INTS})\]<={_IOTA.format('iota_')}"
    r"|mesh\[(?P<axes>[^\]]*)\]"
    rf"(?:,\s*device_ids=\((?:{_IOTA.format('ids_')}|(?P<ids_list>{_INTS}))\))?"
    r"\s*\{(?P<grouped>[^}]*)\})")
_MESH_AXIS = re.compile(r"^(?:'(?P<quoted>[^']*)'|(?P<bare>[A-Za-z_][\w.]*))=(?P<size>\d+)$")
_GROUPED_AXIS = re.compile(r"^(?:'(?P<quoted>[^']*)'|(?P<bare>[A-Za-z_][\w.]*))(?::\((?P<pre>\d+)\)(?P<size>\d+))?$")
_PAIRS = re.compile(r"source_target_pairs=\{(?P<pairs>(?:\{[0-9]+,[0-9]+\},?)*)\}")


@dataclass(frozen=True)
class Collective:
    """One collective in the compiled HLO (per device).

    op: all-gather, all-reduce, reduce-scatter, all-to-all or collective-permute. shape, dtype: of the result; for
    a tuple result (e.g. a multi-operand all-to-all), a tuple of shapes and a tuple of dtypes. bytes: of the result
    on one device, summed over tuple elements. groups: the devices that take part together, one tuple of device ids
    per replica group (`jax.Device.id` when the program's device assignment is known, as in `collectives`;
    otherwise the program's own logical ids, 0 .. n-1); for collective-permute, the sets of devices its
    source-target pairs connect (a ring on one mesh axis of 4 gives groups of 4). group_size: devices in each group
    (for collective-permute, in the largest).
    """
    op: str
    shape: tuple
    dtype: str | tuple
    bytes: float
    group_size: int
    groups: tuple = ()


def _ints(text) -> list:
    return [int(v) for v in text.split(",") if v]


def _iota(dims, perm, spelling) -> np.ndarray:
    """iota(prod(dims)) reshaped to dims and transposed by perm (identity if none), flattened."""
    dims = _ints(dims)
    perm = _ints(perm) if perm else list(range(len(dims)))
    if sorted(perm) != list(range(len(dims))):
        raise ValueError(f"replica_groups {spelling!r}: T({perm}) is not a permutation of the {len(dims)} "
                         "dimensions it transposes")
    return np.arange(math.prod(dims)).reshape(dims).transpose(perm).ravel()


def _axis_name(match) -> str:
    return match["quoted"] if match["quoted"] is not None else match["bare"]


def _mesh_groups(m, spelling) -> np.ndarray:
    """The groups of a named-mesh spelling: the mesh's devices, each mesh axis split into the factors its grouped
    (sub-)axes name, grouped axes moved last (in the order listed), read off in rows of the group size."""
    axes = []
    for item in filter(None, (a.strip() for a in m["axes"].split(","))):
        axis = _MESH_AXIS.match(item)
        if not axis:
            raise ValueError(f"replica_groups {spelling!r}: cannot read the mesh axis {item!r}")
        axes.append((_axis_name(axis), int(axis["size"])))
    n = math.prod(size for _, size in axes)
    if m["ids_dims"]:
        devices = _iota(m["ids_dims"], m["ids_perm"], spelling)
    elif m["ids_list"]:
        devices = np.array(_ints(m["ids_list"]))
    else:
        devices = np.arange(n)
    if sorted(devices.tolist()) != list(range(n)):
        raise ValueError(f"replica_groups {spelling!r}: device_ids are not a permutation of the mesh's {n} devices")
    grouped = []
    for item in filter(None, (a.strip() for a in m["grouped"].split(","))):
        ref = _GROUPED_AXIS.match(item)
        if not ref or _axis_name(ref) not in dict(axes):
            raise ValueError(f"replica_groups {spelling!r}: {item!r} names no axis of the mesh {dict(axes)}")
        full = dict(axes)[_axis_name(ref)]
        pre, size = (int(ref["pre"]), int(ref["size"])) if ref["pre"] else (1, full)
        grouped.append((_axis_name(ref), pre, size))
    factors, position = [], {}
    for name, full in axes:
        covered = 1  # the product of the factors of this axis so far
        for pre, size, index in sorted((p, s, i) for i, (g, p, s) in enumerate(grouped) if g == name):
            if pre % covered or full % (pre * size):
                raise ValueError(f"replica_groups {spelling!r}: the sub-axis ({pre}){size} of {name!r} does not "
                                 f"tile its size {full}")
            if pre > covered:
                factors.append(pre // covered)
            position[index] = len(factors)
            factors.append(size)
            covered = pre * size
        if covered < full:
            factors.append(full // covered)
    last = [position[i] for i in range(len(grouped))]
    order = [d for d in range(len(factors)) if d not in last] + last
    group_size = math.prod(size for _, _, size in grouped)
    return devices.reshape(factors or [1]).transpose(order or [0]).reshape(-1, group_size)


def _replica_groups(line, n_devices) -> tuple:
    """The replica groups of one HLO instruction, in the program's logical device ids (see `Collective`)."""
    if m := _PAIRS.search(line):  # collective-permute: the devices its pairs connect, directly or not
        components = []
        for pair in re.findall(r"\{(\d+),(\d+)\}", m["pairs"]):
            linked = {int(d) for d in pair}
            touching = [c for c in components if c & linked]
            components = [c for c in components if not c & linked] + [linked.union(*touching)]
        return tuple(sorted(tuple(sorted(c)) for c in components))
    if "replica_groups=" not in line:
        raise ValueError(f"no replica_groups or source_target_pairs in {line.strip()[:160]!r}: cannot tell which "
                         "devices this collective connects")
    m = _GROUPS.search(line)
    spelling = line[line.index("replica_groups=") + len("replica_groups="):][:100]
    if not m:
        raise ValueError(f"cannot read replica_groups={spelling!r}: scaling_lib.tiny.xla reads explicit lists "
                         "{{0,1},{2,3}}, iota [2,4]<=[4,2]T(1,0) and named meshes mesh[...] {...}; teach "
                         "_replica_groups this spelling rather than guessing the group")
    if m["list"] is not None:
        groups = [tuple(_ints(g)) for g in re.findall(r"\{([0-9,]*)\}", m["list"][1:-1])]
        if not groups:  # {}: one group of every device of the program
            if n_devices is None:
                raise ValueError("replica_groups={} means every device of the program, but the HLO has no "
                                 "num_partitions header and no n_devices was given: pass n_devices")
            return (tuple(range(n_devices)),)
        if len({len(g) for g in groups}) != 1:
            raise ValueError(f"replica_groups={m['list']} has groups of different sizes; one group_size cannot "
                             "describe it")
        return tuple(groups)
    if m["shape"] is not None:
        shape = _ints(m["shape"])
        ids = _iota(m["iota_dims"], m["iota_perm"], spelling)
        if len(shape) != 2 or math.prod(shape) != ids.size:
            raise ValueError(f"replica_groups={spelling!r}: expected [groups, group size] covering the "
                             f"{ids.size} devices of the iota")
        return tuple(map(tuple, ids.reshape(shape).tolist()))
    return tuple(map(tuple, _mesh_groups(m, spelling).tolist()))


def _program_devices(hlo_text):
    """num_partitions x replica_count from the HloModule header line, or None if the text has no header."""
    header = next((line for line in hlo_text.splitlines() if line.startswith("HloModule")), "")
    counts = {m["key"]: int(m["n"]) for m in _HEADER_COUNTS.finditer(header)}
    return counts.get("num_partitions", 1) * counts.get("replica_count", 1) if header else None


def parse_collectives(hlo_text: str, n_devices: int | None = None, device_ids=None) -> list:
    """The collectives in HLO text, in program order (see `Collective`).

    Every spelling of replica_groups XLA prints is read (explicit lists, iota, named mesh with device_ids and
    sub-axes); one it cannot read is an error, never a guess. An empty `replica_groups={}` is every device of the
    program: num_partitions x replica_count from the `HloModule` header, or `n_devices` for text without one
    (a program on 2 of 8 visible devices has groups of 2, whatever `n_devices` says). `device_ids`: the
    program's device assignment (`jax.Device.id` of logical device 0, 1, ...) to report groups in device ids."""
    program = _program_devices(hlo_text)
    n_devices = program if program is not None else n_devices  # the program's own count, not the visible devices
    ids = None if device_ids is None else tuple(int(d) for d in device_ids)
    found = []
    for line in hlo_text.splitlines():
        m = _LINE.search(line)
        if not m:
            continue
        arrays = [(a["dtype"], tuple(int(d) for d in a["dims"].split(",") if d)) for a in _ARRAY.finditer(m["type"])]
        if m["start"] and m["op"] == "collective-permute":
            arrays = arrays[1:2]  # async start returns (operand, result, context scalars)
        elif m["start"] and m["op"] == "all-gather" and len(arrays) > 1:
            arrays = arrays[len(arrays) // 2:]  # async start returns (operands, results)
        unknown = sorted({dtype for dtype, _ in arrays if dtype not in _HLO_BYTES})
        if unknown:
            raise ValueError(f"unknown HLO element type {unknown[0]!r} in {line.strip()[:120]!r}; add its bytes per "
                             "element to scaling_lib.tiny.xla._HLO_BYTES rather than counting it as 0 bytes")
        nbytes = sum(_HLO_BYTES[dtype] * math.prod(dims) for dtype, dims in arrays)
        is_tuple = m["type"].lstrip().startswith("(")
        shape = tuple(dims for _, dims in arrays) if is_tuple else arrays[0][1]
        dtype = tuple(dtype for dtype, _ in arrays) if is_tuple else arrays[0][0]
        groups = _replica_groups(line, n_devices)
        if ids is not None:
            if max(max(g) for g in groups) >= len(ids):
                raise ValueError(f"{m['op']} names device {max(max(g) for g in groups)} but device_ids lists "
                                 f"{len(ids)} devices")
            groups = tuple(tuple(ids[d] for d in g) for g in groups)
        found.append(Collective(m["op"], shape, dtype, float(nbytes), max(len(g) for g in groups), groups))
    return found


def collectives(fn, *args, **kwargs) -> list:
    """The collectives XLA compiled into jit(fn)(*args): a list of `Collective`, one per op in the HLO text, its
    groups in `jax.Device.id`s (the compiled program's device assignment maps XLA's logical ids to devices).

    `fn` may already be jitted (e.g. a sharded step with its in/out shardings): it is lowered as it is, and an
    executable jit has already built is reused. The one HLO reader of the book is `parse_collectives`.

    Each op is listed once where it appears in the program (an op inside a loop body is not multiplied by the trip
    count). On CPU the automatic partitioner may emit all-reduce + slice where a TPU would emit reduce-scatter."""
    compiled = _compile(fn, *args, **kwargs)
    devices = [d.id for d in compiled.runtime_executable().local_devices()]
    return parse_collectives(compiled.as_text(), device_ids=devices)
