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
_GROUPS_LIST = re.compile(r"replica_groups=\{(\{[0-9,]*\})")          # {{0,1,2,3},{4,5,6,7}}: first group
_GROUPS_IOTA = re.compile(r"replica_groups=\[(?P<dims>[0-9,]+)\]<=")   # [2,4]<=[8]: 2 groups of 4
_PAIRS = re.compile(r"source_target_pairs=\{(?P<pairs>[0-9,{}]*)\}")


@dataclass(frozen=True)
class Collective:
    """One collective in the compiled HLO (per device).

    op: all-gather, all-reduce, reduce-scatter, all-to-all or collective-permute. shape, dtype: of the result; for
    a tuple result (e.g. a multi-operand all-to-all), a tuple of shapes and a tuple of dtypes. bytes: of the result
    on one device, summed over tuple elements. group_size: devices in each replica group (for collective-permute,
    the devices its source-target pairs connect to the first source, e.g. 4 for a ring on one axis of 4; for empty
    replica_groups, all devices).
    """
    op: str
    shape: tuple
    dtype: str | tuple
    bytes: float
    group_size: int


def _group_size(line, n_devices):
    if m := _GROUPS_IOTA.search(line):
        return int(m["dims"].split(",")[-1])
    if m := _GROUPS_LIST.search(line):
        return len([d for d in m.group(1).strip("{}").split(",") if d])
    if m := _PAIRS.search(line):  # the devices linked (directly or not) to the first pair's source
        pairs = [tuple(map(int, p.split(","))) for p in re.findall(r"\{(\d+,\d+)\}", m["pairs"])]
        group = {pairs[0][0]} if pairs else set()
        while grown := {d for p in pairs if group & set(p) for d in p} - group:
            group |= grown
        return len(group)
    return n_devices  # replica_groups={} means one group of every device


def parse_collectives(hlo_text: str, n_devices: int = 1) -> list:
    """The collectives in HLO text, in program order (see `Collective`); `n_devices` sizes empty replica groups."""
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
        found.append(Collective(m["op"], shape, dtype, float(nbytes), _group_size(line, n_devices)))
    return found


def collectives(fn, *args, **kwargs) -> list:
    """The collectives XLA compiled into jit(fn)(*args): a list of `Collective`, one per op in the HLO text.

    `fn` may already be jitted (e.g. a sharded step with its in/out shardings): it is lowered as it is, and an
    executable jit has already built is reused. The one HLO reader of the book is `parse_collectives`.

    Each op is listed once where it appears in the program (an op inside a loop body is not multiplied by the trip
    count). On CPU the automatic partitioner may emit all-reduce + slice where a TPU would emit reduce-scatter."""
    return parse_collectives(_compile(fn, *args, **kwargs).as_text(), n_devices=len(jax.devices()))
