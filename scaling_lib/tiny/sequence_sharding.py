"""Decode attention with the KV cache split along the sequence over an emulated mesh (runs `sequence_sharding`).

Each device holds S / n cache slots of every sequence and every KV head, attends with the full query to its slots,
and the partial softmaxes are combined with a `pmax` of the maxima and a `psum` of the rescaled outputs and sums
(the formulas of `scaling_lib.sequence_sharding`). The result equals `tiny.model.attention` on the whole cache; the
compiled program moves no key or value between devices, only the two small all-reduces.

Used in chapter 14, *Serving details*.
"""

import jax
import jax.numpy as jnp
from jax import lax
from jax.sharding import PartitionSpec as P

from .model import attention
from .xla import collectives

AXIS = "seq"


def _partial(q, k, v, q_pos, k_pos, window):
    """This device's slice: the maxima m [B, K, G, T], sums l, and unnormalised outputs o [B, T, K, G, H]."""
    B, T, N, H = q.shape
    K = k.shape[2]
    qg = q.reshape(B, T, K, N // K, H)
    scores = jnp.einsum("btkgh,bskh->bkgts", qg, k, preferred_element_type=jnp.float32) / jnp.sqrt(jnp.float32(H))
    delta = q_pos[:, :, None] - k_pos[:, None, :]
    mask = delta >= 0
    if window is not None:
        mask &= delta < window
    scores = jnp.where(mask[:, None, None], scores, -jnp.inf)
    m = jnp.max(scores, axis=-1)  # [B, K, G, T]; -inf where this slice holds nothing visible
    safe = jnp.where(jnp.isfinite(m), m, 0.0)
    weights = jnp.where(mask[:, None, None], jnp.exp(scores - safe[..., None]), 0.0)
    return m, jnp.sum(weights, axis=-1), jnp.einsum("bkgts,bskh->btkgh", weights, v.astype(jnp.float32))


def _combine(q, k, v, q_pos, k_pos, window):
    m, l, o = _partial(q, k, v, q_pos, k_pos, window)
    m_all = lax.pmax(m, AXIS)  # all-reduce 1: the [B, K, G, T] maxima
    scale = jnp.where(jnp.isfinite(m), jnp.exp(m - m_all), 0.0)
    l_all, o_all = lax.psum((l * scale, o * jnp.moveaxis(scale, -1, 1)[..., None]), AXIS)  # all-reduce 2
    out = o_all / jnp.moveaxis(l_all, -1, 1)[..., None]
    B, T, N, H = q.shape
    return out.reshape(B, T, N, H).astype(q.dtype)


def program(mesh, cache_len: int, window=None):
    """The jitted sharded attention for a one-axis mesh: (q, k, v, q_pos, k_pos) -> [B, T, N, H], with k, v
    [B, S, K, H] and k_pos [B, S] split along S and q replicated. ValueError when the axis does not divide S."""
    if len(mesh.axis_names) != 1:
        raise ValueError(f"use a one-axis mesh for the sequence (e.g. emulated_mesh((4,), ('seq',))), got "
                         f"axes {mesh.axis_names}")
    n = mesh.shape[mesh.axis_names[0]]
    if cache_len % n:
        raise ValueError(f"the cache's {cache_len} slots do not split over {n} devices; use a multiple of {n}")
    mesh = jax.sharding.Mesh(mesh.devices, (AXIS,))
    body = jax.shard_map(lambda q, k, v, qp, kp: _combine(q, k, v, qp, kp, window), mesh=mesh,
                         in_specs=(P(), P(None, AXIS), P(None, AXIS), P(), P(None, AXIS)), out_specs=P(),
                         check_vma=False)
    return jax.jit(body)


def sequence_sharded_attention(mesh, q, k, v, q_pos, k_pos, window=None):
    """`tiny.model.attention(q, k, v, q_pos, k_pos, window)` computed with the cache split along S (`program`).

    Defined in chapter 14, *Serving details*.
    """
    return program(mesh, k.shape[1], window)(q, k, v, q_pos, k_pos)


def sequence_sharded_collectives(mesh, q, k, v, q_pos, k_pos, window=None) -> list:
    """The collectives XLA compiles for `sequence_sharded_attention` (`tiny.xla.collectives`).

    Defined in chapter 14, *Serving details*.
    """
    return collectives(program(mesh, k.shape[1], window), q, k, v, q_pos, k_pos)


def reference(q, k, v, q_pos, k_pos, window=None):
    """The unsharded attention the sharded one must equal.

    Defined in chapter 14, *Serving details*.
    """
    return attention(q, k, v, q_pos, k_pos, window)
