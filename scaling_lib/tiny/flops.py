"""What XLA says the tiny JAX model's real programs cost: FLOPs and bytes of a forward pass, a decode step, attention.

Each function builds zero-filled inputs of the requested shape (costs do not depend on the values), compiles the
model's own code with `xla.compiled_cost`, and returns its `CompiledCost` (per device; one device here). Chapters 2
and 3 compare these with `flops` and `roofline`. Compiling takes about a second per shape on a laptop CPU, so callers
should ask for a handful of shapes, not a sweep.

What XLA counts: `flops` includes every elementwise op (norms, RoPE, softmax, the mask, residual adds), not only the
matmuls; `bytes_accessed` is the traffic of each fused op's operands and results, so an attention that is not fused
into one kernel also pays for writing and re-reading its score matrix and any transposed copies of K and V.
"""

import jax.numpy as jnp

from .._validate import positive_int
from . import model
from .xla import CompiledCost, compiled_cost, lowered_cost


def forward_cost(params, tokens: int, batch: int = 1, compile: bool = True) -> CompiledCost:
    """XLA's cost of `model.forward` on a [batch, tokens] prompt: the prefill pass without the cache write.

    compile=False reads the unoptimized program instead (`lowered_cost`): fast, FLOPs only.

    Defined in chapter 2, *Sampling and the KV cache*.
    """
    shape = (positive_int("batch", batch), positive_int("tokens", tokens))
    return (compiled_cost if compile else lowered_cost)(model.forward, params, jnp.zeros(shape, jnp.int32))


def decode_step_cost(params, cache_len: int, batch: int = 1, compile: bool = True) -> CompiledCost:
    """XLA's cost of one `model.decode_step` for `batch` sequences with a cache of `cache_len` slots (all read).

    compile=False reads the unoptimized program instead (`lowered_cost`): fast, FLOPs only.

    Defined in chapter 2, *Sampling and the KV cache*.
    """
    c = params.config
    shape = (c.n_layers, positive_int("batch", batch), positive_int("cache_len", cache_len), c.n_kv_heads,
             c.head_dim)
    dtype = params.wk.dtype
    cache = model.KVCache(jnp.zeros(shape, dtype), jnp.zeros(shape, dtype), jnp.zeros((batch,), jnp.int32))
    return (compiled_cost if compile else lowered_cost)(lambda p, t, kv: model.decode_step(p, t, kv), params,
                                                        jnp.zeros((batch,), jnp.int32), cache)


def attention_cost(config, query_len: int, kv_len: int, batch: int = 1, dtype=jnp.float32) -> CompiledCost:
    """XLA's cost of `model.attention` alone: q [B, T, N, H] against k, v [B, S, K, H], causal (and windowed).

    The T queries are the last T of the S positions, so T = S is prefill and T = 1 is a decode step.

    Defined in chapter 3, *Prefill and generation are different workloads*.
    """
    B, T, S = positive_int("batch", batch), positive_int("query_len", query_len), positive_int("kv_len", kv_len)
    if T > S:
        raise ValueError(f"query_len={T} exceeds kv_len={S}: the queries are the last positions of the context")
    N, K, H = config.n_heads, config.n_kv_heads, config.head_dim
    q_pos = jnp.broadcast_to(jnp.arange(S - T, S), (B, T))
    k_pos = jnp.broadcast_to(jnp.arange(S), (B, S))
    return compiled_cost(lambda q, k, v, qp, kp: model.attention(q, k, v, qp, kp, config.sliding_window),
                         jnp.zeros((B, T, N, H), dtype), jnp.zeros((B, S, K, H), dtype),
                         jnp.zeros((B, S, K, H), dtype), q_pos, k_pos)


def linear_cost(params, rows: int, weight: str = "w_gate", layer: int = 0) -> CompiledCost:
    """XLA's cost of one of the model's weight matmuls alone: x [rows, D_in] @ params.<weight>[layer].

    rows = B T tokens in prefill, B in a decode step. `weight` names a 2-D per-layer weight: w_gate, w_up ([D, F])
    or w_down ([F, D]). The matmul is the same one the model runs (`h @ w_gate` in its MLP block).

    Defined in chapter 3, *Prefill and generation are different workloads*.
    """
    positive_int("rows", rows)
    matrices = ("w_gate", "w_up", "w_down")
    if weight not in matrices:
        raise ValueError(f"weight={weight!r} is not a 2-D per-layer weight; use one of {', '.join(matrices)}")
    w = getattr(params, weight)
    if not 0 <= layer < w.shape[0]:
        raise ValueError(f"layer={layer} is outside the model's {w.shape[0]} layers")
    w = w[layer]
    return compiled_cost(lambda x, m: x @ m, jnp.zeros((rows, w.shape[0]), w.dtype), w)
