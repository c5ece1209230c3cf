"""A tiny top-k mixture-of-experts feed-forward layer in JAX: a dense reference and an expert-parallel version.

Symbols (book/notation.md): T tokens, D model width, F expert width, E experts, k experts per token, n devices on
the expert axis, κ capacity (slots per expert per sending device; the argument `capacity`).

Router: p = softmax(x W_router) over the E experts; each token keeps its k most probable experts, with weights
renormalised to sum to 1 over those k (as in Switch / Mixtral-style top-k routing). Each expert is a gated FFN,
W_down(silu(x W_gate) * x W_up), so a token's output is  sum over its k experts of weight x expert(x).

`moe_dense` runs every expert on every token and masks the combine: simple, E / k times the FLOPs, the reference.
`moe_expert_parallel` splits the experts E / n per device and the tokens T / n per device (`jax.shard_map`):
  1. route the local tokens and pack each (token, expert) pair into a dispatch buffer [E, κ, D] (slot = the pair's
     rank among this device's pairs for that expert; pairs past κ are dropped);
  2. all-to-all #1: expert block j of every device's buffer goes to device j, which now holds [n, E/n, κ, D];
  3. each device runs its E/n experts on the n κ slots it received;
  4. all-to-all #2 sends the results back to the devices the tokens came from;
  5. each token sums its k results with its routing weights.
Two all-to-alls per MoE layer, each moving the dispatch buffer, E κ D elements per device (Scaling Book ch. 7).
With κ = T / n (the default) no token can be dropped: a device never sends one expert more than its T / n tokens.
"""

import functools
import math
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import PartitionSpec as P
from jax.tree_util import register_dataclass

from .._validate import positive_int
from ..moe import capacity_buffer_bytes


@register_dataclass
@dataclass(frozen=True)
class MoeParams:
    """router [D, E]; w_gate, w_up [E, D, F]; w_down [E, F, D]."""

    router: jax.Array
    w_gate: jax.Array
    w_up: jax.Array
    w_down: jax.Array

    @property
    def n_experts(self) -> int:
        return self.router.shape[1]



def init_moe(d_model: int, d_ff: int, n_experts: int, seed: int = 0, dtype=jnp.float32) -> MoeParams:
    """Random weights, N(0, 1/fan_in), deterministic for a seed (NumPy on the host).

    Defined in chapter 10, *Speculative decoding, mixture of experts and quantization*.
    """
    D, F, E = (positive_int(n, v) for n, v in (("d_model", d_model), ("d_ff", d_ff), ("n_experts", n_experts)))
    rng = np.random.default_rng(seed)

    def normal(shape, fan_in):
        return jnp.asarray(rng.standard_normal(shape, np.float32) / np.float32(math.sqrt(fan_in)), dtype)

    return MoeParams(router=normal((D, E), D), w_gate=normal((E, D, F), D), w_up=normal((E, D, F), D),
                     w_down=normal((E, F, D), F))


def _check_k(params, k):
    k = positive_int("k", k)
    if k > params.n_experts:
        raise ValueError(f"k={k} exceeds the number of experts E={params.n_experts}; pick k <= E")
    return k


def _check_x(params, x):
    if x.ndim != 2 or x.shape[1] != params.router.shape[0]:
        raise ValueError(f"x must be [T, D={params.router.shape[0]}], got shape {list(x.shape)}")
    return x


def route(router, x, k):
    """(weights [T, k], experts [T, k]): each token's k most probable experts under
    softmax(x W_router), their probabilities renormalised to sum to 1 over those k.

    Defined in chapter 10, *Speculative decoding, mixture of experts and quantization*.
    """
    probs = jax.nn.softmax((x @ router).astype(jnp.float32), axis=-1)  # [T, E]
    top, experts = lax.top_k(probs, k)
    return (top / jnp.sum(top, axis=-1, keepdims=True)).astype(x.dtype), experts


def expert_ffn(w_gate, w_up, w_down, x):
    """One expert's gated FFN on x [..., D]: W_down(silu(x W_gate) * x W_up).

    Defined in chapter 10, *Speculative decoding, mixture of experts and quantization*.
    """
    return (jax.nn.silu(x @ w_gate) * (x @ w_up)) @ w_down


def moe_dense(params: MoeParams, x, k: int):
    """Reference: every expert on every token ([E, T, D]), combined with the top-k weights (zero elsewhere).

    Defined in chapter 10, *Speculative decoding, mixture of experts and quantization*.
    """
    k = _check_k(params, k)
    return _moe_dense(params, _check_x(params, jnp.asarray(x)), k)


@functools.partial(jax.jit, static_argnums=2)
def _moe_dense(params, x, k):
    weights, experts = route(params.router, x, k)
    combine = jnp.sum(jax.nn.one_hot(experts, params.n_experts, dtype=x.dtype) * weights[..., None], axis=1)  # [T,E]
    every = jax.vmap(expert_ffn, in_axes=(0, 0, 0, None))(params.w_gate, params.w_up, params.w_down, x)
    return jnp.einsum("te,etd->td", combine, every)


def dispatch_mask(experts, n_experts, capacity):
    """[T, k, E, κ] one-hot: pair (t, j) goes to slot c of expert experts[t, j], where c
    is its rank, in token order, among the pairs sent to that expert. A pair of rank
    >= capacity gets no slot: it is dropped.

    Defined in chapter 10, *Speculative decoding, mixture of experts and quantization*.
    """
    T, k = experts.shape
    onehot = jax.nn.one_hot(experts.reshape(T * k), n_experts, dtype=jnp.int32)
    rank = jnp.cumsum(onehot, axis=0) - 1  # [Tk, E]: pairs to each expert so far, - 1
    slot = jnp.sum(rank * onehot, axis=-1)  # [Tk]: this pair's rank at its expert
    in_slot = jax.nn.one_hot(slot, capacity, dtype=jnp.int32)  # all zero past κ
    return (onehot[..., None] * in_slot[:, None, :]).reshape(T, k, n_experts, capacity)


def moe_expert_parallel(params: MoeParams, x, k: int, mesh, axis: str, capacity: int | None = None):
    """The MoE layer with experts and tokens split over mesh axis `axis`: two `lax.all_to_all`s (module docstring).

    x [T, D] is split into T / n tokens per device; capacity κ defaults to T / n (nothing dropped). Returns [T, D],
    equal to `moe_dense` when nothing is dropped. Other mesh axes, if any, replicate the computation.

    Defined in chapter 10, *Speculative decoding, mixture of experts and quantization*.
    """
    k = _check_k(params, k)
    x = _check_x(params, jnp.asarray(x))
    if axis not in mesh.axis_names:
        raise ValueError(f"axis {axis!r} is not an axis of the mesh {tuple(mesh.axis_names)}")
    n, E, T = mesh.shape[axis], params.n_experts, x.shape[0]
    if E % n:
        raise ValueError(f"n_experts={E} is not divisible by the {n} devices of axis {axis!r}; "
                         f"use a multiple of {n} experts or a smaller axis")
    if T % n:
        raise ValueError(f"T={T} tokens do not split over the {n} devices of axis {axis!r}; pad to a multiple of {n}")
    capacity = T // n if capacity is None else positive_int("capacity", capacity)
    return expert_parallel_program(mesh, axis, k, E, capacity)(params.router, params.w_gate, params.w_up, params.w_down, x)


@functools.lru_cache(maxsize=64)
def expert_parallel_program(mesh, axis, k, n_experts, capacity):
    """The MoE layer in shard_map, experts and tokens split n ways over mesh axis
    `axis`: route, pack a dispatch buffer, all-to-all, run the local experts,
    all-to-all back, combine. Jitted; built once per mesh, axis, k, E and capacity κ.
    """
    n, E = mesh.shape[axis], n_experts

    def local(router, w_gate, w_up, w_down, x):  # on each device: x [t = T/n, D]
        weights, experts = route(router, x, k)
        mask = dispatch_mask(experts, E, capacity).astype(x.dtype)  # [t, k, E, κ]
        dispatch = jnp.einsum("tkec,td->ecd", mask, x)  # [E, κ, D]: pairs in slots
        dispatch = dispatch.reshape(n, E // n, capacity, -1)  # grouped by owner
        received = lax.all_to_all(
            dispatch, axis, split_axis=0, concat_axis=0, tiled=True
        )
        ffn = jax.vmap(expert_ffn, in_axes=(0, 0, 0, 1), out_axes=1)  # over E/n experts
        out = ffn(w_gate, w_up, w_down, received)  # [n senders, E/n, κ, D]
        returned = lax.all_to_all(out, axis, split_axis=0, concat_axis=0, tiled=True)
        returned = returned.reshape(E, capacity, -1)  # every slot this device sent
        return jnp.einsum("tkec,tk,ecd->td", mask, weights, returned)

    specs = (P(), P(axis), P(axis), P(axis), P(axis))  # the router on every device
    return jax.jit(jax.shard_map(local, mesh=mesh, in_specs=specs, out_specs=P(axis)))


def dispatch_buffer_bytes(params: MoeParams, n_tokens: int, n_devices: int, capacity: int | None = None,
                          dtype: str = "fp32") -> float:
    """E x κ x D x bytes per element: what each of the two all-to-alls moves per device (κ defaults to T / n).

    Defined in chapter 10, *Speculative decoding, mixture of experts and quantization*.
    """
    capacity = positive_int("n_tokens", n_tokens) // positive_int("n_devices", n_devices) if capacity is None \
        else positive_int("capacity", capacity)
    return capacity_buffer_bytes(params.n_experts, capacity, params.router.shape[0], dtype)
