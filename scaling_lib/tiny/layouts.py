"""Pope et al.'s partitioning layouts executed: the feed-forward and multiquery attention blocks in `jax.shard_map`.

`scaling_lib.layouts` predicts how many bytes each chip moves per layer under each layout (Pope et al. 2022,
sec. 3.2-3.3, Fig. 2, App. A). This module runs the same blocks on an emulated X x Y x Z mesh (axes named "x", "y",
"z"; the book uses 2 x 2 x 2), checks them against an unsharded run, and reads the collectives XLA compiled, so that
the prediction can be compared with a real program. Chapter 8 writes out the specs and the per-chip bodies (saved
cells: `scaling_lib.book.saved`); `run_ffn` and `run_attention` check their arguments and run them.

Feed-forward block, f32: y = gelu(x @ W_in) @ W_out with x [T, D], W_in [D, F], W_out [F, D]. Each layout is a set of
PartitionSpecs (`FfnSpecs`, built by `ws_1d_specs`, `ws_2d_specs`, `wg_specs`) and a body that runs on one chip's
blocks and reads the mesh axes of its collectives from those specs. F is split over ("z", "y"), so the F-block a
weight gather leaves on a chip is contiguous (for the arithmetic any order works, as long as W_in and W_out agree):
    "1d-ws"   x [T, D_xyz]   W_in [D, F_xyz]    all-gather x over xyz; matmul; gelu; matmul; reduce-scatter over xyz
    "2d-ws"   x [T, D_xzy]   W_in [D_x, F_zy]   all-gather x over zy -> [T, D_x]; matmul (partial sums over x);
                                                reduce-scatter over x -> [T, F_zyx]; gelu; all-gather over x;
                                                matmul (partial over zy); reduce-scatter over zy -> [T, D_xzy]
    "wg-x", "wg-xy", "wg-xyz"  weights stored as in 2d-ws and all-gathered over G = x, xy or xyz (one all-gather
              per matrix); tokens split over G, x [T_G, D_rest]; the rest of the mesh runs 1d-ws on its slice.
Multiquery attention in decode (one new query token per sequence; the cache already holds it), f32:
    q [B, N, H] sharded over heads everywhere (as the projections leave it), KV cache k, v [B, S, H] (one KV head):
    "heads"  the cache is replicated on every chip; each chip attends with its N/n heads: no communication.
    "batch"  the cache is split over the batch; an all-to-all turns q into [B_xyz, N, H], each chip attends for
             its sequences, a second all-to-all returns the output to head sharding [B, N_xyz, H].

What the HLO reports, and how it maps onto the cost model (`hlo_model_bytes`). `scaling_lib.tiny.xla.collectives` gives
each collective's RESULT bytes on one device:
    all-gather       the gathered output (K x the input block)            = the cost model's bytes, as is;
    reduce-scatter   the scattered output (1/K of the unreduced input)    -> x K: the model counts the input;
    all-to-all       the resharded block (same size as the input block)   = the cost model's bytes, as is;
    all-reduce       the reduced array                                    -> x 2 (a reduce-scatter + an all-gather).
The cost model (Pope et al. App. A) then drops the ring factor (K-1)/K: in a ring over K chips each chip actually
sends (K-1)/K of those bytes (2 (K-1)/K for an all-reduce); `hlo_sent_bytes` applies it, matching
`collectives.ring_bytes_sent` on the prediction. On CPU, bf16 collectives are compiled as f32, hence f32 throughout.
"""

import functools
import math
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from .. import layouts
from ..attention_sharding import ATTENTION_SHARDINGS, attention_collectives
from .._validate import choice
from ..layouts import block_model  # noqa: F401 - chapter 8's exercise imports it from here
from .xla import parse_collectives

AXES = ("x", "y", "z")
FFN_LAYOUTS = layouts.LAYOUTS


# --- the layouts as PartitionSpecs (written out in chapter 8) -------------------------------------------------------

@dataclass(frozen=True)
class FfnSpecs:
    """Where the feed-forward block's tensors live on the mesh: x [T, D], W_in [D, F]
    and W_out [F, D] as stored between layers; x and W_in as the first matmul uses them.

    Defined in chapter 8, *Partitioning layouts*.
    """

    x: P
    w_in: P
    w_out: P
    x_used: P
    w_in_used: P


F_SPLIT = ("z", "y")


def ws_1d_specs(axes):
    """1D weight-stationary: F split over `axes`, x stored with D split the same way.

    Defined in chapter 8, *Partitioning layouts*.
    """
    return FfnSpecs(P(None, axes), P(None, axes), P(axes, None), P(), P(None, axes))


def ws_2d_specs(d_axes, f_axes):
    """2D weight-stationary: W_in's D split over d_axes, its F over f_axes; x stored
    with D split over d_axes then f_axes, so gathering f_axes leaves W_in's D block.

    Defined in chapter 8, *Partitioning layouts*.
    """
    x = P(None, d_axes + f_axes)
    return FfnSpecs(
        x, P(d_axes, f_axes), P(f_axes, d_axes), P(None, d_axes), P(d_axes, f_axes)
    )


def wg_specs(group):
    """Weight-gathered over the axes `group`: weights stored as 2d-ws (D over x, F over
    F_SPLIT); the tokens split over `group`, their D over the rest of the mesh.

    Defined in chapter 8, *Partitioning layouts*.
    """
    rest = tuple(axis for axis in AXES if axis not in group)
    # once gathered, W_in's F stays split over the axes of F_SPLIT outside the group
    f_left = tuple(axis for axis in F_SPLIT if axis not in group)
    return FfnSpecs(
        P(group, rest), P("x", F_SPLIT), P(F_SPLIT, "x"), P(group), P(None, f_left)
    )


FFN_SPECS = {
    "1d-ws": ws_1d_specs(AXES),
    "2d-ws": ws_2d_specs(("x",), F_SPLIT),
    "wg-x": wg_specs(("x",)),
    "wg-xy": wg_specs(("x", "y")),
    "wg-xyz": wg_specs(AXES),
}


# --- the unsharded blocks ------------------------------------------------------------------------------------------

def ffn_reference(x, w_in, w_out):
    """gelu(x @ W_in) @ W_out on one device: the two-matrix feed-forward block of the cost model.

    Defined in chapter 8, *Partitioning layouts*.
    """
    return jax.nn.gelu(x @ w_in) @ w_out


def attention_reference(q, k, v):
    """Multiquery decode attention on one device: softmax(q k^T / sqrt(H)) v for q [B, N, H], k, v [B, S, H].

    Defined in chapter 8, *Partitioning layouts*.
    """
    scores = jnp.einsum("bnh,bsh->bns", q, k) / math.sqrt(q.shape[-1])
    return jnp.einsum("bns,bsh->bnh", jax.nn.softmax(scores, axis=-1), v)


# --- the per-chip bodies (run once per device inside shard_map; written out in chapter 8) ---------------------------

def spec_axes(spec):
    """The mesh axes that split each dimension, as tuples: P("x", ("z", "y"), None)
    -> [("x",), ("z", "y"), ()].

    Defined in chapter 8, *Partitioning layouts*.
    """
    return [
        (entry,) if isinstance(entry, str) else tuple(entry or ()) for entry in spec
    ]


def ws_1d(x, w_in, w_out, specs):
    """1D weight-stationary on one chip: x [T, D_n], W_in [D, F_n], W_out [F_n, D].

    Defined in chapter 8, *Partitioning layouts*.
    """
    _, axes = spec_axes(specs.w_in)  # the axes F is split over: all n chips
    x = lax.all_gather(x, axes, axis=1, tiled=True)  # [T, D]
    h = jax.nn.gelu(x @ w_in)  # [T, F_n]
    y = h @ w_out  # [T, D], a partial sum over the n chips
    return lax.psum_scatter(y, axes, scatter_dimension=1, tiled=True)  # [T, D_n]


def ws_2d(x, w_in, w_out, specs):
    """2D weight-stationary on one chip: W_in [D_d, F_f], W_out [F_f, D_d], x [T, D_df]
    for the axes d and f that split W_in's D and F.

    Defined in chapter 8, *Partitioning layouts*.
    """
    d, f = spec_axes(specs.w_in)  # the axes D and F are split over
    h = lax.all_gather(x, f, axis=1, tiled=True) @ w_in  # [T, F_f], partial over d
    # sum the partial [T, F_f] over d, keep [T, F_fd]
    h = jax.nn.gelu(lax.psum_scatter(h, d, scatter_dimension=1, tiled=True))
    h = lax.all_gather(h, d, axis=1, tiled=True) @ w_out  # [T, D_d], partial over f
    return lax.psum_scatter(h, f, scatter_dimension=1, tiled=True)  # [T, D_df]


def gather_weights(w_in, w_out, group):
    """All-gather W_in [D_x, F_zy] and W_out [F_zy, D_x] over the axes `group`, one
    collective per matrix, then put the gathered blocks in place (no communication).

    Defined in chapter 8, *Partitioning layouts*.
    """
    # blocks gathered along each mesh axis (1 along an axis outside the group)
    g = [lax.axis_size(axis) if axis in group else 1 for axis in AXES]
    d_x, f_zy = w_in.shape
    blocks = lax.all_gather(w_in, group, tiled=False).reshape(*g, d_x, f_zy)
    w_in = blocks.transpose(0, 3, 2, 1, 4).reshape(g[0] * d_x, g[2] * g[1] * f_zy)
    blocks = lax.all_gather(w_out, group, tiled=False).reshape(*g, f_zy, d_x)
    w_out = blocks.transpose(2, 1, 3, 0, 4).reshape(g[2] * g[1] * f_zy, g[0] * d_x)
    return w_in, w_out


def weight_gathered(x, w_in, w_out, specs):
    """Weight-gathered on one chip: gather the weights over the axes that split the
    tokens, then run 1D weight-stationary over the rest of the mesh on x [T_g, D_rest].

    Defined in chapter 8, *Partitioning layouts*.
    """
    group, rest = spec_axes(specs.x)
    w_in, w_out = gather_weights(w_in, w_out, group)
    if rest:
        x = lax.all_gather(x, rest, axis=1, tiled=True)  # [T_group, D]
    y = jax.nn.gelu(x @ w_in) @ w_out  # a partial sum over the rest of the mesh
    return lax.psum_scatter(y, rest, scatter_dimension=1, tiled=True) if rest else y


FFN_BODIES = {
    "1d-ws": ws_1d,
    "2d-ws": ws_2d,
    "wg-x": weight_gathered,
    "wg-xy": weight_gathered,
    "wg-xyz": weight_gathered,
}
ATTENTION_SPECS = {
    "heads": (P(None, AXES), P(), P()),
    "batch": (P(None, AXES), P(AXES), P(AXES)),
}


def attention_over_heads(q, k, v):
    """Each chip: its N/n heads against the whole (replicated) cache; no collective.

    Defined in chapter 8, *Partitioning layouts*.
    """
    return attention_reference(q, k, v)


def attention_over_batch(q, k, v):
    """Each chip holds the cache of B/n sequences: q goes from head to batch sharding
    and the output back, one all-to-all each.

    Defined in chapter 8, *Partitioning layouts*.
    """
    q = lax.all_to_all(q, AXES, 0, 1, tiled=True)  # [B, N_n, H] -> [B_n, N, H]
    out = attention_reference(q, k, v)  # this chip's sequences, every head
    return lax.all_to_all(out, AXES, 1, 0, tiled=True)  # back to [B, N_n, H]


ATTENTION_BODIES = {"heads": attention_over_heads, "batch": attention_over_batch}


# --- running a block and reading its collectives ---------------------------------------------------------------------

@dataclass(frozen=True)
class Execution:
    """One sharded block, compiled once: its output (a global array) and the collectives in its HLO.

    Defined in chapter 8, *Partitioning layouts*.
    """

    name: str
    output: jax.Array
    collectives: tuple  # scaling_lib.tiny.xla.Collective, in program order

    @property
    def model_bytes(self) -> float:
        """Per-chip bytes in the cost model's accounting (`hlo_model_bytes`, summed)."""
        return sum(hlo_model_bytes(c) for c in self.collectives)

    @property
    def sent_bytes(self) -> float:
        """Per-chip bytes a ring actually sends ((K-1)/K of `model_bytes`, per collective)."""
        return sum(hlo_sent_bytes(c) for c in self.collectives)


def compile_sharded(name, body, mesh, in_specs, out_spec, arrays) -> Execution:
    """Run `body` on each chip's blocks (shard_map), compile once, run, and read the
    collectives XLA put in the compiled program.

    Defined in chapter 8, *Partitioning layouts*.
    """
    sharded = jax.shard_map(
        body, mesh=mesh, in_specs=in_specs, out_specs=out_spec, check_vma=False
    )
    placed = [
        jax.device_put(a, NamedSharding(mesh, s)) for a, s in zip(arrays, in_specs)
    ]
    compiled = jax.jit(sharded).lower(*placed).compile()
    found = parse_collectives(compiled.as_text(), n_devices=mesh.devices.size)
    return Execution(name, compiled(*placed), tuple(found))


def ffn_execution(layout, mesh, x, w_in, w_out, specs=None) -> Execution:
    """The feed-forward block under `layout` (its FFN_SPECS, or `specs`) on the mesh.

    Defined in chapter 8, *Partitioning layouts*.
    """
    specs = FFN_SPECS[layout] if specs is None else specs
    body = functools.partial(FFN_BODIES[layout], specs=specs)
    in_specs = (specs.x, specs.w_in, specs.w_out)
    return compile_sharded(layout, body, mesh, in_specs, specs.x, (x, w_in, w_out))


def attention_execution(sharding, mesh, q, k, v) -> Execution:
    """Multiquery decode attention sharded over "heads" or "batch" on the mesh.

    Defined in chapter 8, *Partitioning layouts*.
    """
    specs = ATTENTION_SPECS[sharding]
    body = ATTENTION_BODIES[sharding]
    return compile_sharded(sharding, body, mesh, specs, specs[0], (q, k, v))


# --- validation -----------------------------------------------------------------------------------------------------

def _mesh_sizes(mesh) -> dict:
    names = tuple(mesh.axis_names)
    if names != AXES:
        raise ValueError(f"mesh axes {names} are not ('x', 'y', 'z'); build the mesh with "
                         "scaling_lib.tiny.xla.emulated_mesh((2, 2, 2), ('x', 'y', 'z'))")
    return dict(mesh.shape)


def _check_divides(specs, shapes, names, sizes, what):
    for spec, shape, tensor in zip(specs, shapes, names):
        for dim, (axes, size, label) in enumerate(zip(spec_axes(spec), shape, tensor)):
            ways = math.prod(sizes[a] for a in axes)
            if size % ways:
                where = f"axis {axes[0]}" if len(axes) == 1 else f"axes {'+'.join(axes)}"
                raise ValueError(f"{label}={size} ({what}) does not split over mesh {where} "
                                 f"({ways} ways); use a {label} that is a multiple of {ways}")


def _check_arrays(arrays, ranks, names):
    for array, rank, name in zip(arrays, ranks, names):
        if getattr(array, "ndim", None) != rank:
            raise ValueError(f"{name} must be a {rank}-d array, got shape {getattr(array, 'shape', None)}")
        if array.dtype != jnp.float32:
            raise ValueError(f"{name} has dtype {array.dtype}; use float32 (the CPU backend compiles bf16 "
                             "collectives as f32, so only f32 keeps the HLO bytes comparable)")


def run_ffn(layout: str, mesh, x, w_in, w_out) -> Execution:
    """The feed-forward block under `layout` (see the module docstring) on a mesh with axes x, y, z: the arguments
    checked, then `ffn_execution`.

    Defined in chapter 8, *Partitioning layouts*.
    """
    choice("layout", layout, FFN_LAYOUTS)
    sizes = _mesh_sizes(mesh)
    _check_arrays((x, w_in, w_out), (2, 2, 2), ("x", "w_in", "w_out"))
    (t, d), f = x.shape, w_in.shape[1]
    if w_in.shape != (d, f) or w_out.shape != (f, d):
        raise ValueError(f"shapes x {x.shape}, w_in {w_in.shape}, w_out {w_out.shape} do not chain; "
                         "need x [T, D], w_in [D, F], w_out [F, D]")
    specs = FFN_SPECS[layout]
    # Every stored tensor must split evenly, and so must the intermediate [T, F_xyz] of 2d-ws.
    checks = [(specs.x, x.shape, ("tokens", "d_model")), (specs.w_in, w_in.shape, ("d_model", "d_ff")),
              (specs.w_out, w_out.shape, ("d_ff", "d_model"))]
    if layout == "2d-ws":
        checks.append((P(None, AXES), (t, f), ("tokens", "d_ff")))
    _check_divides(*zip(*checks), sizes, f"layout {layout}")
    return ffn_execution(layout, mesh, x, w_in, w_out)


def run_attention(attention_sharding: str, mesh, q, k, v) -> Execution:
    """Multiquery decode attention sharded over "heads" or "batch" (module docstring) on a mesh with axes x, y, z:
    the arguments checked, then `attention_execution`."""
    choice("attention_sharding", attention_sharding, ATTENTION_SHARDINGS)
    sizes = _mesh_sizes(mesh)
    _check_arrays((q, k, v), (3, 3, 3), ("q", "k", "v"))
    if k.shape != v.shape or k.shape[0] != q.shape[0] or k.shape[2] != q.shape[2]:
        raise ValueError(f"q {q.shape}, k {k.shape}, v {v.shape} do not match; need q [B, N, H], k, v [B, S, H]")
    specs = ATTENTION_SPECS[attention_sharding]
    labels = ("batch", "n_heads", "head_dim"), ("batch", "context_len", "head_dim")
    checks = [(specs[0], q.shape, labels[0]), (specs[1], k.shape, labels[1])]
    if attention_sharding == "batch":  # the all-to-all splits the batch and gathers the heads
        checks.append((P(AXES), q.shape, labels[0]))
    _check_divides(*zip(*checks), sizes, f"attention sharded over {attention_sharding}")
    return attention_execution(attention_sharding, mesh, q, k, v)


def hlo_model_bytes(collective) -> float:
    """One HLO collective's per-chip bytes in the cost model's accounting (see the module docstring).

    all-gather: result bytes (gathered output); reduce-scatter: result x group size (the unreduced input);
    all-to-all, collective-permute: result bytes; all-reduce: 2 x result bytes (reduce-scatter + all-gather).
    """
    factor = {"reduce-scatter": collective.group_size, "all-reduce": 2}.get(collective.op, 1)
    return collective.bytes * factor


def hlo_sent_bytes(collective) -> float:
    """Bytes one chip sends in a ring over the group: (K-1)/K x `hlo_model_bytes` (a permute sends all of it)."""
    if collective.op == "collective-permute":
        return collective.bytes
    k = collective.group_size
    return hlo_model_bytes(collective) * (k - 1) / k


# --- the cost model's prediction for the same shapes -----------------------------------------------------------------

def predicted_ffn(layout: str, mesh, tokens: int, d_model: int, d_ff: int) -> tuple:
    """`layouts.ffn_collectives` for this mesh and these shapes in f32: the cost model's per-chip collectives.

    Defined in chapter 8, *Partitioning layouts*.
    """
    shape = tuple(_mesh_sizes(mesh)[axis] for axis in AXES)
    return layouts.ffn_collectives(layout, block_model(d_model, d_ff), tokens, shape, "fp32", "fp32")


def predicted_attention(attention_sharding: str, mesh, batch: int, n_heads: int, head_dim: int) -> tuple:
    """`attention_sharding.attention_collectives` for this mesh and these shapes in f32.

    Defined in chapter 8, *Partitioning layouts*.
    """
    shape = tuple(_mesh_sizes(mesh)[axis] for axis in AXES)
    return attention_collectives(attention_sharding, batch, n_heads, head_dim, shape, "fp32")


def random_ffn_inputs(tokens: int, d_model: int, d_ff: int, seed: int = 0) -> tuple:
    """Seeded f32 x [T, D], W_in [D, F], W_out [F, D] (NumPy's generator), weights scaled by 1/sqrt(fan-in).

    Defined in chapter 8, *Partitioning layouts*.
    """
    rng = np.random.default_rng(seed)
    return (jnp.asarray(rng.standard_normal((tokens, d_model), np.float32)),
            jnp.asarray(rng.standard_normal((d_model, d_ff), np.float32) / np.float32(math.sqrt(d_model))),
            jnp.asarray(rng.standard_normal((d_ff, d_model), np.float32) / np.float32(math.sqrt(d_ff))))


def random_attention_inputs(batch: int, n_heads: int, context_len: int, head_dim: int, seed: int = 0) -> tuple:
    """Seeded f32 q [B, N, H] and a one-head KV cache k, v [B, S, H] (NumPy's generator).

    Defined in chapter 8, *Partitioning layouts*.
    """
    rng = np.random.default_rng(seed)
    return tuple(jnp.asarray(rng.standard_normal(shape, np.float32)) for shape in
                 ((batch, n_heads, head_dim), (batch, context_len, head_dim), (batch, context_len, head_dim)))
