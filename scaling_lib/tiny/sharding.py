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

The layouts (their PartitionSpecs), the shard_map bodies and the jitted programs are written out in chapter 7's
saved cells, which are their source (scaling_lib.book.saved): edit them there, then `make generate`. The public
entry points (`megatron_decode`, ...) check their arguments and call them.
"""

import functools
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
from ..sharding import weight_shapes
from ..sharding import KvSharding, kv_cache_sharding
from . import model
from .model import KVCache, attention, attention_out, cached_step, mlp, qkv, unembed
from .xla import emulated_mesh


# ---------------------------------------------------------------------------------------------- meshes and checks
def as_mesh(mesh, axis_names=None) -> Mesh:
    """`mesh` itself, or `emulated_mesh(shape, axis_names)` for a shape tuple such as (2, 4) (names default to
    x, y, z, ...). A shape needing more devices than are visible raises ValueError naming the axes and sizes.

    Defined in chapter 7, *Sharding prefill and generation*.
    """
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


def regroup(mesh, shape, names) -> Mesh:
    """The same devices, in the same order, viewed as a mesh of another shape and axis names (no data moves)."""
    return Mesh(np.asarray(mesh.devices).reshape(shape), names)


# ---------------------------------------------------------------------------------------------- the model's pieces
def param_tree(config, **specs):
    """A Params whose leaves are the given PartitionSpecs, by weight name; every weight
    not named is replicated (P()).

    Defined in chapter 7, *Sharding prefill and generation*.
    """
    leaves = {name: specs.get(name, P()) for name in weight_shapes(config)}
    leaves.setdefault(
        "unembed", None
    )  # tied embeddings: the output projection is embed^T
    return model.Params(**leaves, config=config)


def named(mesh, specs):
    """PartitionSpecs as NamedShardings on `mesh`, which jit and device_put take.

    Defined in chapter 7, *Sharding prefill and generation*.
    """
    is_spec = lambda leaf: isinstance(leaf, P)
    return jax.tree.map(lambda spec: NamedSharding(mesh, spec), specs, is_leaf=is_spec)


# ---------------------------------------------------------------------------------------------- a sharded decode step
class CheckedStep:
    """A jitted decode step that first checks its arguments on the host with `model.check_step`: token ids in the
    vocabulary, a cache that fits the params and the batch, and a free slot for every sequence (a write past the
    last slot would be dropped silently inside the sharded program). `lower` is the jitted function's, so
    `xla.collectives(step, ...)` and `step.lower(...).compile()` read the same program that runs."""

    def __init__(self, jitted: Callable):
        self.jitted = jitted

    def __call__(self, params, token, cache):
        model.check_step(params, token, cache)
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
    param_specs: model.Params
    cache_specs: model.KVCache
    token_spec: P
    step: Callable

    def shardings(self, specs):
        """NamedShardings on this layout's mesh for a tree of PartitionSpecs (e.g. `self.param_specs`)."""
        return named(self.mesh, specs)

    def place(self, params=None, token=None, cache=None):
        """device_put the weights, tokens and/or cache with this layout: returns (params, token, cache), the
        arguments of `step` in its order (None for what was not given)."""
        put = lambda value, specs: None if value is None else jax.device_put(value, self.shardings(specs))
        return put(params, self.param_specs), put(token, self.token_spec), put(cache, self.cache_specs)


def megatron_kv(config, batch, mesh) -> tuple:
    """(the mesh viewed as ("heads", "batch"), the KV cache's split): the checks of the Megatron layout. ValueError
    when n does not divide N or F, or the batch does not split over what is left after the KV heads."""
    _check_config(config)
    mesh = as_mesh(mesh)
    _require_divides(mesh, "n_heads", config.n_heads)
    _require_divides(mesh, "d_ff", config.d_ff)
    try:
        kv = kv_cache_sharding(config.n_kv_heads, batch, mesh.size)
    except ValueError as err:
        raise ValueError(f"{_describe(mesh)}: {err}") from None
    return regroup(mesh, (kv.head_shards, kv.batch_shards), ("heads", "batch")), kv


def megatron_specs(config):
    """Where the Megatron layout puts each array, on a mesh of axes ("heads", "batch").

    Query heads and F are split over both axes (all n devices), the K KV heads over
    "heads" only, and the KV cache [L, B, S, K, H] by KV head and by batch. Returns the
    PartitionSpecs of the weights (a Params) and of the cache (a KVCache).

    Defined in chapter 7, *Sharding prefill and generation*.
    """
    every = ("heads", "batch")  # both axes together: all n devices
    params = param_tree(
        config,
        wq=P(None, None, every, None),  # [L, D, N, H]: query heads
        wk=P(None, None, "heads", None),  # [L, D, K, H]: KV heads
        wv=P(None, None, "heads", None),
        wo=P(None, every, None, None),  # [L, N, H, D]
        w_gate=P(None, None, every),  # [L, D, F]: F
        w_up=P(None, None, every),
        w_down=P(None, every, None),  # [L, F, D]
    )
    kv = P(None, "batch", None, "heads", None)  # [L, B, S, K, H]
    return params, KVCache(kv, kv, P())


def megatron_body(params, token, cache):
    """One decode step on one device's shards, inside shard_map; comments give local
    shapes (n devices = hs along "heads" x bs along "batch").

    Defined in chapter 7, *Sharding prefill and generation*.
    """
    B, bs = token.shape[0], lax.axis_size("batch")
    b_local, S = B // bs, cache.k.shape[2]
    first = lax.axis_index("batch") * b_local  # this device's first sequence
    mine = lax.dynamic_slice_in_dim(cache.positions, first, b_local)  # [B/bs]
    slots = jnp.broadcast_to(jnp.arange(S), (b_local, S))
    rows = jnp.arange(b_local)
    k_cache, v_cache = cache.k, cache.v  # [L, B/bs, S, K/hs, H]
    x = params.embed[token][:, None, :]  # [B, 1, D], the same on every device
    window = params.config.sliding_window
    for i in range(params.config.n_layers):
        p = params.layer(i)
        q, k, v = qkv(p, x, cache.positions[:, None])  # q [B,1,N/n,H], k [B,1,K/hs,H]
        if bs > 1:  # all-to-all 1: queries from head- to (KV head x batch)-sharding
            q = lax.all_to_all(q, "batch", 0, 2, tiled=True)  # [B/bs, 1, N/hs, H]
            k = lax.dynamic_slice_in_dim(k, first, b_local)
            v = lax.dynamic_slice_in_dim(v, first, b_local)
        k_cache = k_cache.at[i, rows, mine].set(k[:, 0])
        v_cache = v_cache.at[i, rows, mine].set(v[:, 0])
        attn = attention(q, k_cache[i], v_cache[i], mine[:, None], slots, window)
        if bs > 1:  # all-to-all 2: the outputs back to head sharding, [B, 1, N/n, H]
            attn = lax.all_to_all(attn, "batch", 2, 0, tiled=True)
        x = x + lax.psum(attention_out(p, attn), ("heads", "batch"))  # all-reduce 1
        x = x + lax.psum(
            mlp(p, x), ("heads", "batch")
        )  # all-reduce 2: F/n partial sums
    return unembed(params, x)[:, 0], KVCache(k_cache, v_cache, cache.positions + 1)


def megatron_step(mesh, param_specs, cache_specs):
    """The Megatron decode step: `megatron_body` run by shard_map on every device of
    `mesh`, each argument split as its PartitionSpecs say, and jitted.

    Defined in chapter 7, *Sharding prefill and generation*.
    """
    step = jax.shard_map(
        megatron_body,
        mesh=mesh,
        in_specs=(param_specs, P(), cache_specs),
        out_specs=(P(), cache_specs),
    )
    return jax.jit(step)


def megatron_decode(config, batch: int, mesh) -> ShardedDecode:
    """Model-parallel (Megatron) decode with explicit collectives in `jax.shard_map`.

    Per layer: 2 all-reduces of [B, 1, D] (after W_o and after W_down), plus 2 all-to-alls of the queries and the
    attention outputs when n > gcd(K, n) forces the KV cache to be split by batch (Scaling Book ch. 7).
    mesh: a Mesh or a shape tuple; all its devices form the model-parallel group. ValueError when n does not divide
    N or F, or the batch does not split over what is left after the KV heads.

    Defined in chapter 7, *Sharding prefill and generation*.
    """
    group, kv = megatron_kv(config, batch, mesh)
    param_specs, cache_specs = megatron_specs(config)
    step = CheckedStep(megatron_step(group, param_specs, cache_specs))
    return ShardedDecode("megatron", group, kv, param_specs, cache_specs, P(), step)


def auto_step(mesh, param_specs, cache_specs):
    """The unsharded decode step (`model.cached_step`) given to jit with the layout as
    NamedShardings: XLA's partitioner chooses and inserts the collectives itself.

    Defined in chapter 7, *Sharding prefill and generation*.
    """
    everywhere = NamedSharding(mesh, P())  # tokens and logits: on every device
    return jax.jit(
        cached_step,
        in_shardings=(named(mesh, param_specs), everywhere, named(mesh, cache_specs)),
        out_shardings=(everywhere, named(mesh, cache_specs)),
    )


def auto_decode(config, batch: int, mesh) -> ShardedDecode:
    """The Megatron layout as `NamedSharding`s on the weights and cache, and the unsharded `model.cached_step` under
    `jit`: XLA's partitioner (GSPMD) chooses and inserts the collectives."""
    group, kv = megatron_kv(config, batch, mesh)
    param_specs, cache_specs = megatron_specs(config)
    step = CheckedStep(auto_step(group, param_specs, cache_specs))
    return ShardedDecode("auto", group, kv, param_specs, cache_specs, P(), step)


# ---------------------------------------------------------------------------------------------- FSDP, for contrast
def fsdp_dim(shape, n, stacked=True):
    """The dimension FSDP splits a weight of this shape along: its largest one that n
    divides, never the layer axis of a weight stacked over layers; None if none does.

    Defined in chapter 7, *Sharding prefill and generation*.
    """
    fits = [d for d in range(int(stacked), len(shape)) if shape[d] % n == 0]
    return max(fits, key=lambda d: shape[d]) if fits else None


def fsdp_specs(config, n):
    """FSDP on a one-axis mesh "all" of n devices: every weight split n ways along the
    dimension `fsdp_dim` picks, the batch and the KV cache split n ways by sequence.
    Returns the PartitionSpecs of the weights (a Params) and of the cache (a KVCache).

    Defined in chapter 7, *Sharding prefill and generation*.
    """
    specs = {}
    for name, shape in weight_shapes(config).items():
        stacked = name not in ("embed", "unembed", "final_norm")
        dim = fsdp_dim(shape, n, stacked)
        specs[name] = P(*["all" if d == dim else None for d in range(len(shape))])
    kv = P(None, "all")  # [L, B, S, K, H]: B/n sequences per device
    return param_tree(config, **specs), KVCache(kv, kv, P("all"))


def fsdp_body(params, token, cache, *, specs):
    """One FSDP decode step on one device, inside shard_map: it holds 1/n of every
    weight and B/n sequences, and all-gathers each weight when it is needed.

    Defined in chapter 7, *Sharding prefill and generation*.
    """

    def whole(w, spec, stacked=False):  # gather w along the axis its spec splits
        split = [d - stacked for d, axis in enumerate(spec) if axis == "all"]
        return lax.all_gather(w, "all", axis=split[0], tiled=True) if split else w

    b_local, S = token.shape[0], cache.k.shape[2]
    slots = jnp.broadcast_to(jnp.arange(S), (b_local, S))
    rows, pos = jnp.arange(b_local), cache.positions[:, None]
    window = params.config.sliding_window
    embed = whole(params.embed, specs.embed)
    x = embed[token][:, None, :]  # [B/n, 1, D]
    k_cache, v_cache = cache.k, cache.v  # [L, B/n, S, K, H]
    for i in range(params.config.n_layers):
        layer = params.layer(i).items()
        p = {name: whole(w, getattr(specs, name), stacked=True) for name, w in layer}
        q, k, v = qkv(p, x, pos)
        k_cache = k_cache.at[i, rows, cache.positions].set(k[:, 0])
        v_cache = v_cache.at[i, rows, cache.positions].set(v[:, 0])
        attn = attention(q, k_cache[i], v_cache[i], pos, slots, window)
        x = x + attention_out(p, attn)
        x = x + mlp(p, x)
    if (
        params.unembed is None
    ):  # tied: the output projection is the embedding's transpose
        out = embed.T
    else:
        out = whole(params.unembed, specs.unembed)
    h = model.rms_norm(x, whole(params.final_norm, specs.final_norm))
    logits = (h @ out).astype(jnp.float32)[:, 0]
    return logits, KVCache(k_cache, v_cache, cache.positions + 1)


def fsdp_step(mesh, param_specs, cache_specs):
    """The FSDP decode step: `fsdp_body` run by shard_map on the one-axis `mesh`,
    jitted; tokens and logits are split by sequence like the cache.

    Defined in chapter 7, *Sharding prefill and generation*.
    """
    body = functools.partial(fsdp_body, specs=param_specs)
    step = jax.shard_map(
        body,
        mesh=mesh,
        in_specs=(param_specs, P("all"), cache_specs),
        out_specs=(P("all"), cache_specs),
    )
    return jax.jit(step)


def fsdp_decode(config, batch: int, mesh) -> ShardedDecode:
    """FSDP-sharded decode: every weight split n ways (and gathered back every step), batch and KV cache split n ways.

    The all-gathers move all P_bytes of weights over ICI each step (`sharding.fsdp_decode_cost`); the Scaling Book
    (ch. 7) rules this out for decode. ValueError when the batch or some weight does not split n ways."""
    _check_config(config)
    mesh = as_mesh(mesh)
    _require_divides(mesh, "batch", batch)
    for name, shape in weight_shapes(config).items():
        stacked = name not in ("embed", "unembed", "final_norm")
        if fsdp_dim(shape, mesh.size, stacked) is None:
            raise ValueError(f"FSDP: no dimension of {name} {list(shape)} splits {mesh.size} ways; use a mesh whose "
                             f"size divides one of {list(shape[int(stacked):])}")
    flat = regroup(mesh, (mesh.size,), ("all",))
    param_specs, cache_specs = fsdp_specs(config, mesh.size)
    step = CheckedStep(fsdp_step(flat, param_specs, cache_specs))
    kv = KvSharding(head_shards=1, batch_shards=mesh.size)
    return ShardedDecode("fsdp", flat, kv, param_specs, cache_specs, P("all"), step)


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
        tokens = model.check_tokens(params, tokens)  # ids outside the vocabulary would be clamped by the gather
        B, T = tokens.shape
        cache_len = T if cache_len is None else cache_len
        if isinstance(cache_len, bool) or not isinstance(cache_len, (int, np.integer)) or cache_len < T:
            raise ValueError(f"cache_len={cache_len} is shorter than the prompt (T={T}); pass cache_len >= T")
        logits, ks, vs = self.run(params, tokens)
        pad = ((0, 0), (0, 0), (0, cache_len - T), (0, 0), (0, 0))
        return logits, model.KVCache(jnp.pad(ks, pad), jnp.pad(vs, pad), jnp.full((B,), T, jnp.int32))


def sequence_body(params, tokens):
    """Prefill on one device's T/n prompt positions, inside shard_map: every layer runs
    on those positions alone, except attention, which all-gathers every position's keys
    and values (each query needs all the keys before it).

    Defined in chapter 7, *Sharding prefill and generation*.
    """
    B, t_local = tokens.shape
    T = t_local * lax.axis_size("all")
    mine = lax.axis_index("all") * t_local + jnp.arange(t_local)
    positions = jnp.broadcast_to(mine, (B, t_local))
    every = jnp.broadcast_to(jnp.arange(T), (B, T))
    x = params.embed[tokens]  # [B, T/n, D]
    window = params.config.sliding_window
    ks, vs = [], []
    for i in range(params.config.n_layers):
        p = params.layer(i)
        q, k, v = qkv(p, x, positions)  # this device's T/n positions
        k_all = lax.all_gather(k, "all", axis=1, tiled=True)  # [B, T, K, H]
        v_all = lax.all_gather(v, "all", axis=1, tiled=True)
        attn = attention(q, k_all, v_all, positions, every, window)
        x = x + attention_out(p, attn)
        x = x + mlp(p, x)
        ks.append(k)
        vs.append(v)
    return unembed(params, x), jnp.stack(ks), jnp.stack(vs)


def sequence_step(mesh, config):
    """Sequence-parallel prefill: `sequence_body` run by shard_map on the one-axis
    `mesh` ("all"), the weights replicated; returns logits and k, v, split along T.

    Defined in chapter 7, *Sharding prefill and generation*.
    """
    along_t = P(None, "all")  # tokens and logits [B, T, ...]
    per_layer = P(None, None, "all")  # k, v [L, B, T, K, H]
    step = jax.shard_map(
        sequence_body,
        mesh=mesh,
        in_specs=(param_tree(config), along_t),
        out_specs=(along_t, per_layer, per_layer),
    )
    return jax.jit(step)


def sequence_parallel_prefill(config, mesh, prompt_len: int) -> ShardedPrefill:
    """Prefill with the T prompt positions split over all n devices of `mesh`; weights replicated.

    Everything but attention is per position, so only attention communicates: 2 all-gathers (K and V, each
    [B, T, K, H]) per layer. ValueError when n does not divide T.

    Defined in chapter 7, *Sharding prefill and generation*.
    """
    _check_config(config)
    mesh = as_mesh(mesh)
    _require_divides(mesh, "prompt_len", prompt_len)
    flat = regroup(mesh, (mesh.size,), ("all",))
    return ShardedPrefill(flat, sequence_step(flat, config))


# ---------------------------------------------------------------------------------------------- generation
def generate(decode: ShardedDecode, params, prompt, n_tokens: int, prefill: ShardedPrefill | None = None):
    """Greedy generation with a sharded decode step: prefill (sequence-parallel if given, else `model.prefill`),
    then n_tokens - 1 sharded steps. Returns tokens [B, n_tokens], to compare with `model.generate`.

    Defined in chapter 7, *Sharding prefill and generation*.
    """
    if isinstance(n_tokens, bool) or not isinstance(n_tokens, (int, np.integer)) or n_tokens < 1:
        raise ValueError(f"n_tokens must be a positive integer, got {n_tokens!r}")
    prompt = model.check_tokens(params, prompt)
    cache_len = prompt.shape[1] + n_tokens
    if prefill is None:
        logits, cache = model.prefill(params, prompt, cache_len=cache_len)
    else:
        logits, cache = prefill.prefill(params, prompt, cache_len=cache_len)
    placed, _, cache = decode.place(params, cache=cache)
    last = logits[:, -1]
    out = []
    for step in range(n_tokens):
        token = jnp.argmax(last, axis=-1).astype(jnp.int32)
        out.append(token)
        if step + 1 < n_tokens:
            last, cache = decode.step(placed, decode.place(token=token)[1], cache)
    return jnp.stack(out, axis=1)
