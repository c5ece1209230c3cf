"""Pope et al.'s partitioning layouts executed: the feed-forward and multiquery attention blocks in `jax.shard_map`.

`scaling_lib.layouts` predicts how many bytes each chip moves per layer under each layout (Pope et al. 2022,
sec. 3.2-3.3, Fig. 2, App. A). This module runs the same blocks on an emulated X x Y x Z mesh (axes named "x", "y",
"z"; the book uses 2 x 2 x 2), checks them against an unsharded run, and reads the collectives XLA compiled, so that
the prediction can be compared with a real program.

Feed-forward block, f32: y = gelu(x @ W_in) @ W_out with x [T, D], W_in [D, F], W_out [F, D]. Stored layouts
(PartitionSpecs over the mesh axes; F is split over ("z", "y"), so the F-block a weight gather leaves on a chip is
contiguous -- for the arithmetic any order works, as long as W_in and W_out use the same one):
    "1d-ws"   x [T, D_xyz]   W_in [D, F_xyz]    all-gather x over xyz; matmul; gelu; matmul; reduce-scatter over xyz
    "2d-ws"   x [T, D_xyz]   W_in [D_x, F_zy]   all-gather x over yz -> [T, D_x]; matmul (partial sums over x);
                                                reduce-scatter over x -> [T, F_xyz]; gelu; all-gather over x;
                                                matmul (partial over yz); reduce-scatter over yz -> [T, D_xyz]
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
from ..models import Transformer
from .xla import parse_collectives

AXES = ("x", "y", "z")
FFN_LAYOUTS = layouts.LAYOUTS
_GATHER = {"wg-x": ("x",), "wg-xy": ("x", "y"), "wg-xyz": ("x", "y", "z")}
_ALL = ("x", "y", "z")


@dataclass(frozen=True)
class FfnSpecs:
    """Where each tensor lives: as stored between layers, and (x_used, w_in_used) as multiplied in the first matmul."""

    x: P
    w_in: P
    w_out: P
    x_used: P
    w_in_used: P


FFN_SPECS = {
    "1d-ws": FfnSpecs(P(None, _ALL), P(None, _ALL), P(_ALL, None), P(), P(None, _ALL)),
    "2d-ws": FfnSpecs(P(None, _ALL), P("x", ("z", "y")), P(("z", "y"), "x"), P(None, "x"), P("x", ("z", "y"))),
    "wg-x": FfnSpecs(P("x", ("y", "z")), P("x", ("z", "y")), P(("z", "y"), "x"), P("x"), P(None, ("z", "y"))),
    "wg-xy": FfnSpecs(P(("x", "y"), "z"), P("x", ("z", "y")), P(("z", "y"), "x"), P(("x", "y")), P(None, "z")),
    "wg-xyz": FfnSpecs(P(_ALL, None), P("x", ("z", "y")), P(("z", "y"), "x"), P(_ALL), P()),
}
ATTENTION_SPECS = {"heads": (P(None, _ALL), P(), P()), "batch": (P(None, _ALL), P(_ALL), P(_ALL))}


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


# --- the sharded bodies (run once per device inside shard_map) ------------------------------------------------------

def _gather_weights(w_in, w_out, group, sizes):
    """One all-gather per matrix over the axes in `group`, stacked, then reordered locally (no communication)."""
    g = {axis: (sizes[axis] if axis in group else 1) for axis in AXES}
    d_x, f_zy = w_in.shape
    stacked = lax.all_gather(w_in, group, axis=0, tiled=False).reshape(g["x"], g["y"], g["z"], d_x, f_zy)
    w_in = stacked.transpose(0, 3, 2, 1, 4).reshape(g["x"] * d_x, g["z"] * g["y"] * f_zy)
    stacked = lax.all_gather(w_out, group, axis=0, tiled=False).reshape(g["x"], g["y"], g["z"], f_zy, d_x)
    w_out = stacked.transpose(2, 1, 3, 0, 4).reshape(g["z"] * g["y"] * f_zy, g["x"] * d_x)
    return w_in, w_out


def _ffn_body(layout, sizes):
    if layout == "1d-ws":
        def body(x, w_in, w_out):
            h = jax.nn.gelu(lax.all_gather(x, _ALL, axis=1, tiled=True) @ w_in)
            return lax.psum_scatter(h @ w_out, _ALL, scatter_dimension=1, tiled=True)
    elif layout == "2d-ws":
        def body(x, w_in, w_out):
            h = lax.all_gather(x, ("y", "z"), axis=1, tiled=True) @ w_in  # [T, F_zy], partial over x
            h = jax.nn.gelu(lax.psum_scatter(h, "x", scatter_dimension=1, tiled=True))  # [T, F_xyz]
            h = lax.all_gather(h, "x", axis=1, tiled=True) @ w_out  # [T, D_x], partial over yz
            return lax.psum_scatter(h, ("y", "z"), scatter_dimension=1, tiled=True)  # [T, D_xyz]
    else:
        group = _GATHER[layout]
        rest = tuple(axis for axis in AXES if axis not in group)

        def body(x, w_in, w_out):
            w_in, w_out = _gather_weights(w_in, w_out, group, sizes)
            if rest:
                x = lax.all_gather(x, rest, axis=1, tiled=True)
            y = jax.nn.gelu(x @ w_in) @ w_out  # partial sums over the rest of the mesh
            return lax.psum_scatter(y, rest, scatter_dimension=1, tiled=True) if rest else y
    return body


def _attention_body(sharding):
    def body(q, k, v):
        if sharding == "batch":
            q = lax.all_to_all(q, _ALL, 0, 1, tiled=True)  # [B, N_xyz, H] -> [B_xyz, N, H]
        out = attention_reference(q, k, v)
        if sharding == "batch":
            out = lax.all_to_all(out, _ALL, 1, 0, tiled=True)  # back to [B, N_xyz, H]
        return out
    return body


# --- validation -----------------------------------------------------------------------------------------------------

def _mesh_sizes(mesh) -> dict:
    names = tuple(mesh.axis_names)
    if names != AXES:
        raise ValueError(f"mesh axes {names} are not ('x', 'y', 'z'); build the mesh with "
                         "scaling_lib.tiny.xla.emulated_mesh((2, 2, 2), ('x', 'y', 'z'))")
    return dict(mesh.shape)


def _split(spec):
    return [(entry,) if isinstance(entry, str) else tuple(entry or ()) for entry in spec]


def _check_divides(specs, shapes, names, sizes, what):
    for spec, shape, tensor in zip(specs, shapes, names):
        for dim, (axes, size, label) in enumerate(zip(_split(spec), shape, tensor)):
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


# --- running a block and reading its collectives ---------------------------------------------------------------------

@dataclass(frozen=True)
class Execution:
    """One sharded block, compiled once: its output (a global array) and the collectives in its HLO."""

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


def _execute(name, body, mesh, in_specs, out_spec, arrays) -> Execution:
    fn = jax.shard_map(body, mesh=mesh, in_specs=in_specs, out_specs=out_spec, check_vma=False)
    placed = [jax.device_put(a, NamedSharding(mesh, s)) for a, s in zip(arrays, in_specs)]
    compiled = jax.jit(fn).lower(*placed).compile()
    found = parse_collectives(compiled.as_text(), n_devices=mesh.devices.size)
    return Execution(name, compiled(*placed), tuple(found))


def run_ffn(layout: str, mesh, x, w_in, w_out) -> Execution:
    """The feed-forward block under `layout` (see the module docstring) on a mesh with axes x, y, z.

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
        checks.append((P(None, _ALL), (t, f), ("tokens", "d_ff")))
    _check_divides(*zip(*checks), sizes, f"layout {layout}")
    return _execute(layout, _ffn_body(layout, sizes), mesh, (specs.x, specs.w_in, specs.w_out), specs.x,
                    (x, w_in, w_out))


def run_attention(attention_sharding: str, mesh, q, k, v) -> Execution:
    """Multiquery decode attention sharded over "heads" or "batch" (module docstring) on a mesh with axes x, y, z.

    Defined in chapter 8, *Partitioning layouts*.
    """
    choice("attention_sharding", attention_sharding, ATTENTION_SHARDINGS)
    sizes = _mesh_sizes(mesh)
    _check_arrays((q, k, v), (3, 3, 3), ("q", "k", "v"))
    if k.shape != v.shape or k.shape[0] != q.shape[0] or k.shape[2] != q.shape[2]:
        raise ValueError(f"q {q.shape}, k {k.shape}, v {v.shape} do not match; need q [B, N, H], k, v [B, S, H]")
    specs = ATTENTION_SPECS[attention_sharding]
    labels = ("batch", "n_heads", "head_dim"), ("batch", "context_len", "head_dim")
    checks = [(specs[0], q.shape, labels[0]), (specs[1], k.shape, labels[1])]
    if attention_sharding == "batch":  # the all-to-all splits the batch and gathers the heads
        checks.append((P(_ALL), q.shape, labels[0]))
    _check_divides(*zip(*checks), sizes, f"attention sharded over {attention_sharding}")
    return _execute(attention_sharding, _attention_body(attention_sharding), mesh, specs, specs[0], (q, k, v))


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

def block_model(d_model: int, d_ff: int) -> Transformer:
    """A one-layer `Transformer` with the feed-forward shape of the block, to pass to `layouts.ffn_collectives`.

    Defined in chapter 8, *Partitioning layouts*.
    """
    return Transformer(n_layers=1, d_model=d_model, d_ff=d_ff, n_heads=1, n_kv_heads=1, head_dim=d_model,
                       vocab_size=1, name=f"ffn-block-{d_model}x{d_ff}")


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
