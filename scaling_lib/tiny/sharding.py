"""The tiny decoder of `scaling_lib.tiny.model`, sharded over a (possibly emulated) device mesh.

Four ways to lay one decode step, and one way to lay prefill, out over the n devices of a mesh (all of the mesh's
axes together form one group of n; Scaling Book ch. 7, "Sharding generation" and "General rules for sharding prefill"):

  megatron_decode(config, batch, mesh)   model parallelism written out with `jax.shard_map`: query heads and the
      feed-forward width F split n ways, each device reads 1/n of the weights, and two all-reduces per layer (after
      the attention output projection and after W_down) sum the partial results (Shoeybi et al. 2019). The KV cache
      is split by KV heads up to gcd(K, n) ways and the rest by batch (`sharding.kv_cache_sharding`); once the batch
      is split, two all-to-alls per attention layer move the queries from head- to batch-sharding and the attention
      outputs back.
  auto_decode(config, batch, mesh)       the same layout given to `jit` as `NamedSharding`s; XLA inserts the
      collectives itself.
  fsdp_decode(config, batch, mesh)       the contrast: weights split n ways and all-gathered every step, batch and
      KV cache split n ways (what training does; in decode it moves every weight byte over ICI each step).
  sequence_parallel_prefill(config, mesh) the prompt's T positions split n ways; attention all-gathers K and V.

Every variant computes the same function as the unsharded model (tests check logits and greedy tokens). Inside a
step the layers are unrolled, so the compiled HLO lists each layer's collectives once (read them with
`xla.collectives`).
"""

import math
from dataclasses import dataclass
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from ..models import Transformer
from ..sharding import KvSharding, kv_cache_sharding
from . import model as tiny
from .xla import emulated_mesh

_HEADS, _BATCH = "heads", "batch"  # the two axes a model-parallel group is viewed as (KV heads x batch)
_ALL = "all"  # the one axis of FSDP and sequence parallelism


# ---------------------------------------------------------------------------------------------- meshes and checks
def as_mesh(mesh, axis_names=None) -> Mesh:
    """`mesh` itself, or `emulated_mesh(shape, axis_names)` for a shape tuple such as (2, 4) (names default to
    x, y, z, ...). A shape needing more devices than are visible raises ValueError naming the axes and sizes."""
    if isinstance(mesh, Mesh):
        return mesh
    shape = tuple(mesh)
    names = tuple(axis_names) if axis_names is not None else tuple("xyzuvw"[:len(shape)])
    needed, visible = math.prod(shape), len(jax.devices())
    if needed > visible:
        axes = ", ".join(f"{name}={size}" for name, size in zip(names, shape))
        raise ValueError(f"mesh axes ({axes}) need {needed} devices but only {visible} are visible; use a smaller "
                         f"mesh or set XLA_FLAGS=--xla_force_host_platform_device_count={needed} before jax loads")
    return emulated_mesh(shape, names)


def _describe(mesh) -> str:
    return "mesh axes (" + ", ".join(f"{n}={s}" for n, s in mesh.shape.items()) + f") = {mesh.size} devices"


def _require_divides(mesh, what: str, size: int):
    if size % mesh.size:
        raise ValueError(f"{what}={size} does not split over {_describe(mesh)}; use a mesh whose axes multiply to a "
                         f"divisor of {size}")


def _check_config(config):
    if not isinstance(config, Transformer):
        raise ValueError(f"config must be a scaling_lib.models.Transformer, got {type(config).__name__}")


def _regroup(mesh, shape, names) -> Mesh:
    """The same devices, in the same order, viewed as a mesh of another shape (no data moves)."""
    return Mesh(np.asarray(mesh.devices).reshape(shape), names)


# ---------------------------------------------------------------------------------------------- the model's pieces
def _param_tree(config, **specs) -> tiny.Params:
    """A Params whose leaves are the given specs (default: replicated)."""
    names = ("embed", "attn_norm", "wq", "wk", "wv", "wo", "mlp_norm", "w_gate", "w_up", "w_down", "final_norm")
    leaves = {name: specs.get(name, P()) for name in names}
    leaves["unembed"] = None if config.tied_embeddings else specs.get("unembed", P())
    return tiny.Params(**leaves, config=config)


# ---------------------------------------------------------------------------------------------- a sharded decode step
class CheckedStep:
    """A jitted decode step that first checks its arguments on the host with `model.check_step`: token ids in the
    vocabulary, a cache that fits the params and the batch, and a free slot for every sequence (a write past the
    last slot would be dropped silently inside the sharded program). `lower` is the jitted function's, so
    `xla.collectives(step, ...)` and `step.lower(...).compile()` read the same program that runs."""

    def __init__(self, jitted: Callable):
        self.jitted = jitted

    def __call__(self, params, token, cache):
        tiny.check_step(params, token, cache)
        return self.jitted(params, token, cache)

    def lower(self, *args, **kwargs):
        return self.jitted.lower(*args, **kwargs)


@dataclass(frozen=True)
class ShardedDecode:
    """A decode step laid out over a mesh.

    kind: "megatron", "auto" or "fsdp". mesh: the devices, viewed with this layout's axis names. kv: how the KV cache
    is split (KV heads x batch). param_specs, cache_specs, token_spec: PartitionSpecs of the weights, the KVCache and
    the tokens. step(params, token, cache) -> (logits [B, V], cache): jitted; give it arguments placed with `place`
    (arguments placed differently still work, but compile the step again).
    """

    kind: str
    mesh: Mesh
    kv: KvSharding
    param_specs: tiny.Params
    cache_specs: tiny.KVCache
    token_spec: P
    step: Callable

    def shardings(self, specs):
        """NamedShardings on this layout's mesh for a tree of PartitionSpecs (e.g. `self.param_specs`)."""
        return jax.tree.map(lambda spec: NamedSharding(self.mesh, spec), specs,
                            is_leaf=lambda leaf: isinstance(leaf, P))

    def place(self, params=None, cache=None, token=None):
        """device_put the weights, cache and/or tokens with this layout: returns (params, cache, token)."""
        put = lambda value, specs: None if value is None else jax.device_put(value, self.shardings(specs))
        return put(params, self.param_specs), put(cache, self.cache_specs), put(token, self.token_spec)


def _megatron_layout(config, batch, mesh):
    _check_config(config)
    mesh = as_mesh(mesh)
    _require_divides(mesh, "n_heads", config.n_heads)
    _require_divides(mesh, "d_ff", config.d_ff)
    try:
        kv = kv_cache_sharding(config.n_kv_heads, batch, mesh.size)
    except ValueError as err:
        raise ValueError(f"{_describe(mesh)}: {err}") from None
    group = _regroup(mesh, (kv.head_shards, kv.batch_shards), (_HEADS, _BATCH))
    model_axes = (_HEADS, _BATCH)  # all n devices: query heads and F are split n ways
    params = _param_tree(config, wq=P(None, None, model_axes, None), wk=P(None, None, _HEADS, None),
                         wv=P(None, None, _HEADS, None), wo=P(None, model_axes, None, None),
                         w_gate=P(None, None, model_axes), w_up=P(None, None, model_axes),
                         w_down=P(None, model_axes, None))
    cache = tiny.KVCache(P(None, _BATCH, None, _HEADS, None), P(None, _BATCH, None, _HEADS, None), P())
    return group, kv, params, cache


def _megatron_body(params, token, cache, *, kv):
    """One decode step on one device's shards; the comments give local shapes (n = devices, hs x bs = n)."""
    config, split_batch = params.config, kv.batch_shards > 1
    B = token.shape[0]
    b_local = B // kv.batch_shards
    first = lax.axis_index(_BATCH) * b_local if split_batch else 0
    my_positions = lax.dynamic_slice_in_dim(cache.positions, first, b_local)  # [B/bs]
    slots = jnp.broadcast_to(jnp.arange(cache.k.shape[2]), (b_local, cache.k.shape[2]))
    rows = jnp.arange(b_local)
    k_cache, v_cache = cache.k, cache.v  # [L, B/bs, S, K/hs, H]
    x = params.embed[token][:, None, :]  # [B, 1, D], the same on every device
    for i in range(config.n_layers):
        p = params.layer(i)
        q, k, v = tiny.qkv(p, x, cache.positions[:, None])  # q [B, 1, N/n, H]; k, v [B, 1, K/hs, H]
        if split_batch:  # all-to-all 1: queries from head sharding to (KV head x batch) sharding
            q = lax.all_to_all(q, _BATCH, 0, 2, tiled=True)  # [B/bs, 1, N/hs, H]
            k = lax.dynamic_slice_in_dim(k, first, b_local)
            v = lax.dynamic_slice_in_dim(v, first, b_local)
        k_cache = k_cache.at[i, rows, my_positions].set(k[:, 0])
        v_cache = v_cache.at[i, rows, my_positions].set(v[:, 0])
        attn = tiny.attention(q, k_cache[i], v_cache[i], my_positions[:, None], slots, config.sliding_window)
        if split_batch:  # all-to-all 2: outputs back to head sharding
            attn = lax.all_to_all(attn, _BATCH, 2, 0, tiled=True)  # [B, 1, N/n, H]
        x = x + lax.psum(tiny.attention_out(p, attn), (_HEADS, _BATCH))  # all-reduce 1: [B, 1, D]
        x = x + lax.psum(tiny.mlp(p, x), (_HEADS, _BATCH))  # all-reduce 2: the F/n partial sums of W_down, [B, 1, D]
    return tiny.unembed(params, x)[:, 0], tiny.KVCache(k_cache, v_cache, cache.positions + 1)


def megatron_decode(config, batch: int, mesh) -> ShardedDecode:
    """Model-parallel (Megatron) decode with explicit collectives in `jax.shard_map`.

    Per layer: 2 all-reduces of [B, 1, D] (after W_o and after W_down), plus 2 all-to-alls of the queries and the
    attention outputs when n > gcd(K, n) forces the KV cache to be split by batch (Scaling Book ch. 7).
    mesh: a Mesh or a shape tuple; all its devices form the model-parallel group. ValueError when n does not divide
    N or F, or the batch does not split over what is left after the KV heads.

    Defined in chapter 7, *Sharding prefill and generation*.
    """
    group, kv, param_specs, cache_specs = _megatron_layout(config, batch, mesh)
    body = jax.shard_map(lambda params, token, cache: _megatron_body(params, token, cache, kv=kv), mesh=group,
                         in_specs=(param_specs, P(), cache_specs), out_specs=(P(), cache_specs), check_vma=True)
    return ShardedDecode("megatron", group, kv, param_specs, cache_specs, P(), CheckedStep(jax.jit(body)))


def auto_decode(config, batch: int, mesh) -> ShardedDecode:
    """The Megatron layout as `NamedSharding`s on the weights and cache, and the unsharded `model.decode_step` under
    `jit`: XLA's partitioner (GSPMD) chooses and inserts the collectives.

    Defined in chapter 7, *Sharding prefill and generation*.
    """
    group, kv, param_specs, cache_specs = _megatron_layout(config, batch, mesh)
    replicated = NamedSharding(group, P())
    shard = lambda specs: jax.tree.map(lambda s: NamedSharding(group, s), specs, is_leaf=lambda x: isinstance(x, P))
    step = jax.jit(tiny.decode_step, in_shardings=(shard(param_specs), replicated, shard(cache_specs)),
                   out_shardings=(replicated, shard(cache_specs)))
    return ShardedDecode("auto", group, kv, param_specs, cache_specs, P(), CheckedStep(step))


# ---------------------------------------------------------------------------------------------- FSDP, for contrast
def _fsdp_dim(name, shape, n):
    """The dimension FSDP splits: the largest one (not the layer axis of stacked weights) that n divides."""
    start = 0 if name in ("embed", "final_norm", "unembed") else 1
    fits = [d for d in range(start, len(shape)) if shape[d] % n == 0]
    if not fits:
        raise ValueError(f"FSDP: no dimension of {name} {list(shape)} splits {n} ways; use a mesh whose size "
                         f"divides one of {list(shape[start:])}")
    return max(fits, key=lambda d: shape[d])


def _fsdp_shapes(config):
    c = config
    L, D, F, N, K, H, V = c.n_layers, c.d_model, c.d_ff, c.n_heads, c.n_kv_heads, c.head_dim, c.vocab_size
    shapes = dict(embed=(V, D), attn_norm=(L, D), wq=(L, D, N, H), wk=(L, D, K, H), wv=(L, D, K, H), wo=(L, N, H, D),
                  mlp_norm=(L, D), w_gate=(L, D, F), w_up=(L, D, F), w_down=(L, F, D), final_norm=(D,))
    if not c.tied_embeddings:
        shapes["unembed"] = (D, V)
    return shapes


def _fsdp_body(params, token, cache, *, dims):
    """Each device holds 1/n of every weight and B/n sequences; every weight is all-gathered when it is needed."""
    config = params.config

    def gather(name, w, stacked=True):  # a layer's slice has lost the leading L axis
        return lax.all_gather(w, _ALL, axis=dims[name] - int(stacked), tiled=True)

    b_local, S = token.shape[0], cache.k.shape[2]
    slots = jnp.broadcast_to(jnp.arange(S), (b_local, S))
    rows = jnp.arange(b_local)
    pos = cache.positions[:, None]
    embed = gather("embed", params.embed, stacked=False)
    x = embed[token][:, None, :]  # [B/n, 1, D]
    k_cache, v_cache = cache.k, cache.v  # [L, B/n, S, K, H]
    for i in range(config.n_layers):
        p = {name: gather(name, w) for name, w in params.layer(i).items()}
        q, k, v = tiny.qkv(p, x, pos)
        k_cache = k_cache.at[i, rows, cache.positions].set(k[:, 0])
        v_cache = v_cache.at[i, rows, cache.positions].set(v[:, 0])
        attn = tiny.attention(q, k_cache[i], v_cache[i], pos, slots, config.sliding_window)
        x = x + tiny.attention_out(p, attn)
        x = x + tiny.mlp(p, x)
    unembed = embed.T if params.unembed is None else gather("unembed", params.unembed, stacked=False)
    h = tiny.rms_norm(x, gather("final_norm", params.final_norm, stacked=False))
    return (h @ unembed).astype(jnp.float32)[:, 0], tiny.KVCache(k_cache, v_cache, cache.positions + 1)


def fsdp_decode(config, batch: int, mesh) -> ShardedDecode:
    """FSDP-sharded decode: every weight split n ways (and gathered back every step), batch and KV cache split n ways.

    The all-gathers move all P_bytes of weights over ICI each step (`sharding.fsdp_decode_cost`); the Scaling Book
    (ch. 7) rules this out for decode. ValueError when the batch or some weight does not split n ways.

    Defined in chapter 7, *Sharding prefill and generation*.
    """
    _check_config(config)
    mesh = as_mesh(mesh)
    _require_divides(mesh, "batch", batch)
    flat = _regroup(mesh, (mesh.size,), (_ALL,))
    dims = {name: _fsdp_dim(name, shape, mesh.size) for name, shape in _fsdp_shapes(config).items()}
    specs = {name: P(*[_ALL if d == dim else None for d in range(len(_fsdp_shapes(config)[name]))])
             for name, dim in dims.items()}
    param_specs = _param_tree(config, **specs)
    cache_specs = tiny.KVCache(P(None, _ALL), P(None, _ALL), P(_ALL))
    body = jax.shard_map(lambda params, token, cache: _fsdp_body(params, token, cache, dims=dims), mesh=flat,
                         in_specs=(param_specs, P(_ALL), cache_specs), out_specs=(P(_ALL), cache_specs),
                         check_vma=True)
    step = CheckedStep(jax.jit(body))
    kv = KvSharding(head_shards=1, batch_shards=mesh.size)
    return ShardedDecode("fsdp", flat, kv, param_specs, cache_specs, P(_ALL), step)


# ------------------------------------------------------------------------------------------ sequence-parallel prefill
@dataclass(frozen=True)
class ShardedPrefill:
    """Prefill with the prompt's positions split over every device of `mesh` (axis "all").

    run(params, tokens) -> (logits [B, T, V], k, v [L, B, T, K, H]), all split along T; `prefill` wraps it into the
    model's (logits, KVCache) form.
    """

    mesh: Mesh
    run: Callable

    def prefill(self, params, tokens, cache_len=None):
        """Like `model.prefill` (full-length prompts): (logits [B, T, V], a KVCache of cache_len slots)."""
        tokens = tiny.check_tokens(params, tokens)  # ids outside the vocabulary would be clamped by the gather
        B, T = tokens.shape
        cache_len = T if cache_len is None else cache_len
        if isinstance(cache_len, bool) or not isinstance(cache_len, (int, np.integer)) or cache_len < T:
            raise ValueError(f"cache_len={cache_len} is shorter than the prompt (T={T}); pass cache_len >= T")
        logits, ks, vs = self.run(params, tokens)
        pad = ((0, 0), (0, 0), (0, cache_len - T), (0, 0), (0, 0))
        return logits, tiny.KVCache(jnp.pad(ks, pad), jnp.pad(vs, pad), jnp.full((B,), T, jnp.int32))


def _sequence_body(params, tokens):
    config = params.config
    B, t_local = tokens.shape
    T = t_local * lax.axis_size(_ALL)
    positions = jnp.broadcast_to(lax.axis_index(_ALL) * t_local + jnp.arange(t_local), (B, t_local))
    all_positions = jnp.broadcast_to(jnp.arange(T), (B, T))
    x = params.embed[tokens]  # [B, T/n, D]
    ks, vs = [], []
    for i in range(config.n_layers):
        p = params.layer(i)
        q, k, v = tiny.qkv(p, x, positions)  # this device's T/n positions
        k_all = lax.all_gather(k, _ALL, axis=1, tiled=True)  # every query needs every earlier key: [B, T, K, H]
        v_all = lax.all_gather(v, _ALL, axis=1, tiled=True)
        attn = tiny.attention(q, k_all, v_all, positions, all_positions, config.sliding_window)
        x = x + tiny.attention_out(p, attn)
        x = x + tiny.mlp(p, x)
        ks.append(k)
        vs.append(v)
    return tiny.unembed(params, x), jnp.stack(ks), jnp.stack(vs)


def sequence_parallel_prefill(config, mesh, prompt_len: int) -> ShardedPrefill:
    """Prefill with the T prompt positions split over all n devices of `mesh`; weights replicated.

    Everything but attention is per position, so only attention communicates: 2 all-gathers (K and V, each
    [B, T, K, H]) per layer. ValueError when n does not divide T.

    Defined in chapter 7, *Sharding prefill and generation*.
    """
    _check_config(config)
    mesh = as_mesh(mesh)
    _require_divides(mesh, "prompt_len", prompt_len)
    flat = _regroup(mesh, (mesh.size,), (_ALL,))
    seq = P(None, None, _ALL)
    run = jax.shard_map(_sequence_body, mesh=flat, in_specs=(_param_tree(config), P(None, _ALL)),
                        out_specs=(P(None, _ALL), seq, seq), check_vma=True)
    return ShardedPrefill(flat, jax.jit(run))


# ---------------------------------------------------------------------------------------------- generation
def generate(decode: ShardedDecode, params, prompt, n_tokens: int, prefill: ShardedPrefill | None = None):
    """Greedy generation with a sharded decode step: prefill (sequence-parallel if given, else `model.prefill`),
    then n_tokens - 1 sharded steps. Returns tokens [B, n_tokens], to compare with `model.generate`.

    Defined in chapter 7, *Sharding prefill and generation*.
    """
    if isinstance(n_tokens, bool) or not isinstance(n_tokens, (int, np.integer)) or n_tokens < 1:
        raise ValueError(f"n_tokens must be a positive integer, got {n_tokens!r}")
    prompt = tiny.check_tokens(params, prompt)
    cache_len = prompt.shape[1] + n_tokens
    if prefill is None:
        logits, cache = tiny.prefill(params, prompt, cache_len=cache_len)
    else:
        logits, cache = prefill.prefill(params, prompt, cache_len=cache_len)
    placed, cache, _ = decode.place(params, cache)
    last = logits[:, -1]
    out = []
    for step in range(n_tokens):
        token = jnp.argmax(last, axis=-1).astype(jnp.int32)
        out.append(token)
        if step + 1 < n_tokens:
            last, cache = decode.step(placed, decode.place(token=token)[2], cache)
    return jnp.stack(out, axis=1)
