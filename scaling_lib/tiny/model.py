"""A tiny decoder-only transformer in plain JAX, with a preallocated KV cache.

The config is a `models.Transformer`, so the shapes here are the shapes the book's formulas count.
Symbols (book/notation.md): B batch, T query length, S cache length, L layers, D model width, F feed-forward width,
N query heads, K key/value heads, G = N/K query heads per KV head, H head dimension, V vocabulary.

One layer (pre-norm, as in LLaMA):
    x = x + Attention(RMSNorm(x))        queries N heads, keys/values K heads, RoPE on q and k
    x = x + W_down (silu(x W_gate) * (x W_up))   on RMSNorm(x)   (SwiGLU, Shazeer 2020)

Three ways to run it, which must agree token for token:
  forward(params, tokens)            the whole sequence at once, no cache (the reference);
  prefill(params, tokens, ...)       the same pass, but it also writes every layer's K and V into a cache;
  decode_step(params, token, cache)  one new token per sequence, attending to the cache.
The cache is allocated once at its full length S and written in place (the jitted step donates it), and positions
are traced values, so `decode_step` compiles once for every position.

The building blocks and the two passes (`full_pass`, prefill's computation, and `cached_step`, decode's) are written
out in chapter 2's saved cells, which are their source (scaling_lib.book.saved): edit them there, then `make
generate`. The public entry points below them check their arguments on the host and call those passes.

Companions reuse the public building blocks (`qkv`, `attention`, `attention_out`, `mlp`, `finish`, `unembed`):
  scaling_lib.tiny.paged      a paged KV cache (block pool + block table), with int8/fp8 entries, prefix sharing and a
                              sliding window that frees blocks (chapter 6, "Shrinking the KV cache");
  scaling_lib.tiny.quantize   int8/fp8 quantize/dequantize and int8 weights (`quantize_params`), which every function
                              here accepts in place of float `Params`;
  scaling_lib.tiny.sharding   the same layers laid out over a device mesh (chapter 7).
"""

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.tree_util import register_dataclass

from .._validate import non_negative_int, positive, positive_int
from ..models import Transformer, tiny_transformer

ROPE_THETA = 10_000.0  # RoPE base frequency (Su et al. 2021; LLaMA-2 uses the same value)
NORM_EPS = 1e-6  # RMSNorm epsilon

# How many times JAX has traced each jitted function (the body of a jitted function runs only when tracing).
# `decode_step` compiling once for every position shows up here as a count that stops growing.
TRACE_COUNTS = Counter()


def tiny_config(n_kv_heads=2, sliding_window=None, n_heads=4, n_layers=2, vocab_size=256) -> Transformer:
    """A 2-layer, D=64 model (N=4 heads of H=16, F=128): n_kv_heads 4 is MHA, 2 is GQA, 1 is MQA
    (`models.tiny_transformer`, the same shape for the closed-form library)."""
    return tiny_transformer(n_kv_heads, sliding_window, n_heads, n_layers, vocab_size)


@register_dataclass
@dataclass(frozen=True)
class Params:
    """All weights, stacked over layers (leading axis L); `config` rides along as static metadata.

    wq [L,D,N,H]  wk, wv [L,D,K,H]  wo [L,N,H,D]  w_gate, w_up [L,D,F]  w_down [L,F,D]  norms [L,D]
    embed [V,D]; unembed [D,V] (None when tied: the output projection is embed^T).
    `quantize.quantize_params` swaps the seven linear weights for int8 `QuantizedWeight`s of the same layout.

    Defined in chapter 7, *Sharding prefill and generation*.
    """
    embed: jax.Array
    attn_norm: jax.Array
    wq: jax.Array
    wk: jax.Array
    wv: jax.Array
    wo: jax.Array
    mlp_norm: jax.Array
    w_gate: jax.Array
    w_up: jax.Array
    w_down: jax.Array
    final_norm: jax.Array
    unembed: jax.Array | None
    config: Transformer = field(metadata=dict(static=True))  # hashable metadata, not a leaf

    def layer(self, i):
        """Layer i's weights as a dict (a slice of the stacked arrays). i in [0, n_layers): JAX would clamp a larger
        index to the last layer, and a negative one counts from the end."""
        i = non_negative_int("i", i)
        if i >= self.config.n_layers:
            raise ValueError(f"layer i={i} does not exist; the model has n_layers={self.config.n_layers}")
        return {name: getattr(self, name)[i] for name in
                ("attn_norm", "wq", "wk", "wv", "wo", "mlp_norm", "w_gate", "w_up", "w_down")}


class _KVArrays(NamedTuple):
    k: jax.Array
    v: jax.Array
    positions: jax.Array


class KVCache(_KVArrays):
    """k, v: [L, B, S, K, H], preallocated to S = cache_len; positions: [B] int32, the number of tokens cached for
    each sequence, which is also the position the next token of that sequence is written to.

    Its size is B x S x 2 L K H x bytes, `memory.kv_cache_bytes(config, S, B)`. With a sliding window w this cache
    still keeps all S slots and masks the old ones; a ring buffer of w slots (what `kv_cache_bytes` assumes) would
    store only min(S, w).

    k and v of different dtypes or shapes are refused here, when the cache is made (a step would otherwise promote
    one of them silently). Leaves without a dtype (JAX's sharding specs, tree placeholders) pass unchecked.

    Defined in chapter 2, *Sampling and the KV cache*.
    """

    __slots__ = ()

    def __new__(cls, k, v, positions):
        k_dtype, v_dtype = getattr(k, "dtype", None), getattr(v, "dtype", None)
        if k_dtype is not None and v_dtype is not None:
            if k_dtype != v_dtype:
                raise ValueError(f"KVCache k is {k_dtype} but v is {v_dtype}; store keys and values in one dtype")
            if getattr(k, "shape", None) != getattr(v, "shape", None):
                raise ValueError(f"KVCache k has shape {list(k.shape)} but v has {list(v.shape)}; both are "
                                 "[L, B, S, K, H]")
        positions_dtype = getattr(positions, "dtype", None)
        if positions_dtype is not None and not jnp.issubdtype(positions_dtype, jnp.integer):
            raise ValueError(f"KVCache positions must be integers (tokens cached per sequence), got {positions_dtype}")
        return super().__new__(cls, k, v, positions)


def init_params(config: Transformer, seed: int = 0, dtype=jnp.float32) -> Params:
    """Random weights, deterministic for a seed: N(0, 1/fan_in) matrices, N(0, 1) embeddings, unit norm gains."""
    if not isinstance(config, Transformer):
        raise ValueError(f"config must be a scaling_lib.models.Transformer, got {type(config).__name__}")
    seed = non_negative_int("seed", seed)
    try:
        floating = jnp.issubdtype(jnp.dtype(dtype), jnp.floating)
    except TypeError:
        floating = False
    if not floating:
        raise ValueError(f"dtype must be a floating-point dtype such as jnp.float32 or jnp.bfloat16, got {dtype!r}")
    if config.n_experts != 1:
        raise ValueError(f"n_experts={config.n_experts}: this model is dense; use n_experts=1")
    unsupported = [name for name, value in (("kv_lora_rank", config.kv_lora_rank), ("v_head_dim", config.v_head_dim),
                                            ("global_every", config.global_every))
                   if value is not None]
    if unsupported:
        raise ValueError(f"the tiny model implements standard GQA attention on every layer; drop {unsupported} "
                         "from the config (the closed-form library costs those models)")
    if config.head_dim % 2:
        raise ValueError(f"head_dim={config.head_dim} must be even: RoPE rotates pairs of dimensions")
    c = config
    L, D, F, N, K, H, V = c.n_layers, c.d_model, c.d_ff, c.n_heads, c.n_kv_heads, c.head_dim, c.vocab_size
    rng = np.random.default_rng(seed)  # NumPy on the host: instant, where a dozen jax.random calls would compile

    def normal(shape, fan_in):
        return jnp.asarray(rng.standard_normal(shape, np.float32) / np.float32(math.sqrt(fan_in)), dtype)

    ones = jnp.ones((L, D), dtype)
    return Params(
        embed=normal((V, D), 1), attn_norm=ones, wq=normal((L, D, N, H), D), wk=normal((L, D, K, H), D),
        wv=normal((L, D, K, H), D), wo=normal((L, N, H, D), N * H), mlp_norm=ones, w_gate=normal((L, D, F), D),
        w_up=normal((L, D, F), D), w_down=normal((L, F, D), F), final_norm=jnp.ones((D,), dtype),
        unembed=None if c.tied_embeddings else normal((D, V), D), config=c)


# ---------------------------------------------------------------------------------------------- building blocks
def rms_norm(x, gain):
    """x / sqrt(mean(x^2) + eps) * gain, computed in fp32 (Zhang & Sennrich 2019).

    Defined in chapter 2, *Sampling and the KV cache*.
    """
    x32 = x.astype(jnp.float32)
    scale = jax.lax.rsqrt(jnp.mean(x32**2, axis=-1, keepdims=True) + NORM_EPS)
    return (x32 * scale).astype(x.dtype) * gain


def rope(x, positions):
    """Rotate pairs (x_i, x_{i+H/2}) by angle p * theta^(-2i/H) (RoPE, Su et al. 2021).

    x [B, T, heads, H]; positions p [B, T].

    Defined in chapter 2, *Sampling and the KV cache*.
    """
    half = x.shape[-1] // 2
    freq = ROPE_THETA ** (-jnp.arange(half, dtype=jnp.float32) * 2 / x.shape[-1])
    angle = positions[..., None, None].astype(jnp.float32) * freq  # [B, T, 1, H/2]
    cos, sin = jnp.cos(angle), jnp.sin(angle)
    x1, x2 = x[..., :half].astype(jnp.float32), x[..., half:].astype(jnp.float32)
    rotated = [x1 * cos - x2 * sin, x1 * sin + x2 * cos]
    return jnp.concatenate(rotated, axis=-1).astype(x.dtype)


def attention(q, k, v, q_pos, k_pos, window=None):
    """softmax(q k^T / sqrt(H) + mask) v, N query heads in K groups sharing a KV head.

    q [B,T,N,H]; k, v [B,S,K,H]; q_pos [B,T], k_pos [B,S] absolute positions. The query
    at position p sees the key at position s iff s <= p (causal) and p - s < w (a
    sliding window). That is all the masking padding needs: prompts are right-padded,
    so a real token never looks at the padding after it, and cache slots past a
    sequence's position (padding, or not yet written) lie in its future.

    Defined in chapter 2, *Sampling and the KV cache*.
    """
    B, T, N, H = q.shape
    K = k.shape[2]
    q = q.reshape(B, T, K, N // K, H)  # G = N / K query heads per KV head
    scores = jnp.einsum(
        "btkgh,bskh->bkgts", q, k, preferred_element_type=jnp.float32
    ) / math.sqrt(H)
    delta = q_pos[:, :, None] - k_pos[:, None, :]  # [B, T, S]
    mask = delta >= 0
    if window is not None:
        mask &= delta < window
    scores = jnp.where(mask[:, None, None], scores, -jnp.inf)
    probs = jax.nn.softmax(scores, axis=-1).astype(v.dtype)
    return jnp.einsum("bkgts,bskh->btkgh", probs, v).reshape(B, T, N, H)


def project(x, w, spec=None):
    """x times the weight w: einsum `spec`, or x @ w when None.

    A quantized weight (`quantize.QuantizedWeight`: int8 values with per-channel scales)
    does its own matmul; a plain array takes exactly this float path.

    Defined in chapter 2, *Sampling and the KV cache*.
    """
    if hasattr(w, "apply"):  # a quantized weight
        return w.apply(x)
    return x @ w if spec is None else jnp.einsum(spec, x, w)


def qkv(p, x, positions):
    """One layer's attention projections (p = `Params.layer(i)`): RMSNorm, then
    q [B,T,N,H] and k [B,T,K,H] with RoPE at `positions` [B,T], and v [B,T,K,H].

    Defined in chapter 2, *Sampling and the KV cache*.
    """
    h = rms_norm(x, p["attn_norm"])
    q = rope(project(h, p["wq"], "btd,dnh->btnh"), positions)
    k = rope(project(h, p["wk"], "btd,dkh->btkh"), positions)
    return q, k, project(h, p["wv"], "btd,dkh->btkh")


def attention_out(p, attn):
    """The output projection W_o: attention output [B,T,N,H] -> [B,T,D].

    Defined in chapter 2, *Sampling and the KV cache*.
    """
    return project(attn, p["wo"], "btnh,nhd->btd")


def mlp(p, x):
    """The gated MLP on RMSNorm(x): W_down(silu(h W_gate) * (h W_up)).

    Defined in chapter 2, *Sampling and the KV cache*.
    """
    h = rms_norm(x, p["mlp_norm"])
    gated = jax.nn.silu(project(h, p["w_gate"])) * project(h, p["w_up"])
    return project(gated, p["w_down"])


def finish(p, x, attn):
    """The rest of a layer after attention: x + W_o attn, then x + mlp(x).

    Defined in chapter 2, *Sampling and the KV cache*.
    """
    x = x + attention_out(p, attn)
    return x + mlp(p, x)


def unembed(params, x):
    """Final RMSNorm and the output projection (embed^T when tied): fp32 logits.

    Defined in chapter 2, *Sampling and the KV cache*.
    """
    weight = params.embed.T if params.unembed is None else params.unembed
    return (rms_norm(x, params.final_norm) @ weight).astype(jnp.float32)


# ---------------------------------------------------------------------------------------------- full passes
@jax.jit
def full_pass(params, tokens):
    """Prefill's computation: all T positions of tokens [B, T] at once. Returns the
    logits [B, T, V] and every layer's keys and values [L, B, T, K, H] for the cache.
    """
    TRACE_COUNTS["prefill"] += 1  # runs only while tracing: counts compilations
    B, T = tokens.shape
    positions = jnp.broadcast_to(jnp.arange(T), (B, T))
    x = params.embed[tokens]  # [B, T, D]
    window = params.config.sliding_window
    ks, vs = [], []
    for i in range(params.config.n_layers):
        p = params.layer(i)
        q, k, v = qkv(p, x, positions)
        x = finish(p, x, attention(q, k, v, positions, positions, window))
        ks.append(k)
        vs.append(v)
    return unembed(params, x), jnp.stack(ks), jnp.stack(vs)


def forward(params: Params, tokens) -> jax.Array:
    """Causal forward pass over full sequences, no cache: logits [B, T, V] (fp32). The reference for the cache.

    Defined in chapter 2, *Sampling and the KV cache*.
    """
    tokens = check_tokens(params, tokens)
    return full_pass(params, tokens)[0]


def prefill(params: Params, tokens, lengths=None, cache_len=None):
    """Run the prompt and fill a fresh cache of S = cache_len slots (default T: no room left to decode).

    tokens [B, T], right-padded; lengths [B] each prompt's true length (default T). Returns (logits [B,T,V], cache)
    with cache.positions = lengths; the next-token logits of sequence b are logits[b, lengths[b] - 1].

    Defined in chapter 2, *Sampling and the KV cache*.
    """
    tokens = check_tokens(params, tokens)
    B, T = tokens.shape
    lengths = check_lengths(lengths, B, T)
    cache_len = T if cache_len is None else positive_int("cache_len", cache_len)
    if cache_len < T:
        raise ValueError(f"cache_len={cache_len!r} is shorter than the prompt (T={T}); pass cache_len >= T "
                         "(prompt length plus the number of tokens to decode)")
    logits, ks, vs = full_pass(params, tokens)  # padding needs no mask: see `attention`
    pad = ((0, 0), (0, 0), (0, int(cache_len) - T), (0, 0), (0, 0))
    return logits, KVCache(jnp.pad(ks, pad), jnp.pad(vs, pad), lengths)


# ---------------------------------------------------------------------------------------------- decoding
def cached_step(params, token, cache):
    """Decode's computation: one new token per sequence, token [B]. Writes its key and
    value at slot positions[b] of the cache, attends to slots 0..positions[b], and
    returns the next-token logits [B, V] with the updated cache.

    Defined in chapter 2, *Sampling and the KV cache*.
    """
    TRACE_COUNTS["decode_step"] += 1  # runs only while tracing: counts compilations
    B, S = token.shape[0], cache.k.shape[2]
    pos = cache.positions[
        :, None
    ]  # [B, 1], traced: one compilation serves every position
    slots = jnp.broadcast_to(jnp.arange(S), (B, S))
    rows = jnp.arange(B)
    x = params.embed[token][:, None, :]  # [B, 1, D]
    window = params.config.sliding_window
    k_cache, v_cache = cache.k, cache.v
    for i in range(params.config.n_layers):
        p = params.layer(i)
        q, k, v = qkv(p, x, pos)
        k_cache = k_cache.at[i, rows, cache.positions].set(k[:, 0])  # the cache update
        v_cache = v_cache.at[i, rows, cache.positions].set(v[:, 0])
        attn = attention(
            q, k_cache[i], v_cache[i], pos, slots, window
        )  # over the cache
        x = finish(p, x, attn)
    return unembed(params, x)[:, 0], KVCache(k_cache, v_cache, cache.positions + 1)


decode_step_jit = jax.jit(cached_step, donate_argnums=2)  # the cache updated in place


def decode_step(params: Params, token, cache: KVCache):
    """Append one token per sequence (token [B]) and return (next-token logits [B, V], the updated cache).

    The cache passed in is donated: its buffers are reused for the result, so do not use it afterwards.

    Defined in chapter 7, *Sharding prefill and generation*.
    """
    token = check_step(params, token, cache)
    return decode_step_jit(params, token, cache)


@jax.jit
def _pick(logits, key, temperature):
    """Greedy (argmax) when temperature == 0, else a sample from softmax(logits / temperature)."""
    sampled = jax.random.categorical(key, logits / jnp.maximum(temperature, 1e-6), axis=-1)
    return jnp.where(temperature > 0, sampled, jnp.argmax(logits, axis=-1)).astype(jnp.int32)


def generate(params: Params, prompt, n_tokens: int, lengths=None, temperature: float = 0.0, seed: int = 0):
    """Prefill the (right-padded) prompts, then decode n_tokens new tokens per sequence: returns [B, n_tokens].

    Defined in chapter 2, *Sampling and the KV cache*.
    """
    n_tokens = positive_int("n_tokens", n_tokens)
    try:
        positive("temperature", temperature, allow_zero=True)
    except ValueError as err:
        raise ValueError(f"{err} (temperature 0 is greedy)") from None
    seed = non_negative_int("seed", seed)
    prompt = check_tokens(params, prompt)
    logits, cache = prefill(params, prompt, lengths, cache_len=prompt.shape[1] + n_tokens)
    last = logits[jnp.arange(prompt.shape[0]), cache.positions - 1]
    key, temperature = jax.random.key(seed), jnp.float32(temperature)
    out = []
    for step in range(n_tokens):
        token = _pick(last, jax.random.fold_in(key, step), temperature)
        out.append(token)
        if step + 1 < n_tokens:
            last, cache = decode_step_jit(params, token, cache)
    return jnp.stack(out, axis=1)


def greedy_with_logits(params: Params, prompt, n_tokens: int, lengths=None):
    """Greedy decoding through `prefill` and `decode_step`, keeping the logits that chose each token.

    Returns (tokens [B, n_tokens] int32, logits [B, n_tokens, V] float32) as NumPy arrays: tokens[:, j] is the argmax
    of logits[:, j]. Tokens equal `generate(params, prompt, n_tokens, lengths)`; the logits let a test or a chapter
    compare another cache (paged, quantized, sharded) with this one step by step.

    Defined in chapter 6, *Shrinking the KV cache*.
    """
    n_tokens = positive_int("n_tokens", n_tokens)
    prompt = check_tokens(params, prompt)
    logits, cache = prefill(params, prompt, lengths, cache_len=prompt.shape[1] + n_tokens)
    last = np.asarray(logits)[np.arange(prompt.shape[0]), np.asarray(cache.positions) - 1]
    tokens, chosen_by = [], []
    for step in range(n_tokens):
        token = last.argmax(-1).astype(np.int32)
        tokens.append(token)
        chosen_by.append(last)
        if step + 1 < n_tokens:
            last, cache = decode_step(params, token, cache)
            last = np.asarray(last)
    return np.stack(tokens, 1), np.stack(chosen_by, 1)


# ---------------------------------------------------------------------------------------------- host-side checks
def check_params(params) -> None:
    """ValueError unless `params` is a `Params` (from `init_params`, or `quantize.quantize_params`)."""
    if not isinstance(params, Params):
        raise ValueError(f"params must be tiny.model.Params (from init_params), got {type(params).__name__}")


def _array(values):
    """A JAX array (or tracer) as it is; anything else as a NumPy array, so no integer is cast to int32 unchecked."""
    return values if isinstance(values, (jax.Array, jax.core.Tracer)) else np.asarray(values)


def check_tokens(params, tokens):
    """tokens as an int32 [B, T] array whose ids lie in [0, vocab_size); ValueError naming the problem otherwise.

    The range is checked on the host in the tokens' own integer type, before the int32 cast, so an id such as 2**40
    is refused rather than wrapped to 0."""
    check_params(params)
    tokens = _array(tokens)
    if tokens.ndim != 2 or not jnp.issubdtype(tokens.dtype, jnp.integer):
        raise ValueError(f"tokens must be an integer array of shape [B, T], got {tokens.dtype}{list(tokens.shape)}")
    if tokens.size == 0:
        raise ValueError(f"tokens is empty (shape {list(tokens.shape)}); pass at least one token per sequence")
    if not isinstance(tokens, jax.core.Tracer):
        host = np.asarray(tokens)  # a copy to the host: checking there compiles nothing
        lo, hi, V = int(host.min()), int(host.max()), params.config.vocab_size
        if lo < 0 or hi >= V:
            raise ValueError(f"token ids must lie in [0, {V}) (vocab_size={V}), got min {lo}, max {hi}")
    return jnp.asarray(tokens, jnp.int32)


def check_cache(params, cache, batch: int):
    """A `KVCache` that fits these params and a step of `batch` tokens: ValueError naming the mismatch otherwise.

    Checked on the host before every step (JAX would not complain): the cache's layers, KV heads and head dimension
    against `params.config`, its dtype against the params' activations, its batch against the tokens, and that
    every sequence has a free slot (a write past the last slot is silently dropped by XLA)."""
    if not isinstance(cache, KVCache):
        raise ValueError(f"cache must be a model.KVCache (from prefill), got {type(cache).__name__}")
    if cache.v.dtype != cache.k.dtype or not jnp.issubdtype(cache.positions.dtype, jnp.integer):
        raise ValueError(f"cache k, v must share one dtype and positions be integers, got {cache.k.dtype}, "
                         f"{cache.v.dtype}, {cache.positions.dtype}")
    c = params.config
    L, B, S, K, H = cache.k.shape if cache.k.ndim == 5 else (None,) * 5
    if cache.k.ndim != 5 or cache.v.shape != cache.k.shape:
        raise ValueError(f"cache k and v must both be [L, B, S, K, H], got {list(cache.k.shape)} and "
                         f"{list(cache.v.shape)}")
    for what, have, want, config_field in (("layers", L, c.n_layers, "n_layers"),
                                           ("KV heads", K, c.n_kv_heads, "n_kv_heads"),
                                           ("head_dim", H, c.head_dim, "head_dim")):
        if have != want:
            amount = f"{what} {have}" if what == "head_dim" else f"{have} {what}"
            raise ValueError(f"the cache has {amount} but the params have {want} ({config_field}); the cache was built "
                             "for another config: prefill it with these params")
    activations = params.embed.dtype
    if cache.k.dtype != activations:
        raise ValueError(f"the cache holds {cache.k.dtype} but the params compute in {activations}; prefill the "
                         "cache with these params")
    if tuple(cache.positions.shape) != (B,):
        raise ValueError(f"cache.positions must hold one position per sequence ({B}), got shape "
                         f"{list(cache.positions.shape)}")
    if batch != B:
        raise ValueError(f"token has {batch} rows but the cache holds {B} sequence{'s' if B != 1 else ''}; pass one "
                         "token per cached sequence")
    if not isinstance(cache.positions, jax.core.Tracer):
        positions = np.asarray(cache.positions)
        if positions.min() < 0 or positions.max() >= S:
            raise ValueError(f"the cache is full (S={S} slots): a sequence would write at position "
                             f"{int(positions.max())}; call prefill with a larger cache_len")


def check_step(params, token, cache):
    """The host-side checks of one decode step: `token` [B] ids in the vocabulary and a cache that fits
    (`check_cache`). Returns the tokens as int32. Every decode step, sharded ones included, calls this."""
    token = _array(token)
    if token.ndim != 1:
        raise ValueError(f"token must be one id per sequence, shape [B], got shape {list(token.shape)}")
    token = check_tokens(params, token[:, None])[:, 0]
    check_cache(params, cache, token.shape[0])
    return token


def check_lengths(lengths, B, T):
    """Per-sequence prompt lengths [B] in [1, T] as int32 (all T when None); ValueError otherwise."""
    if lengths is None:
        return jnp.full((B,), T, jnp.int32)
    arr = np.asarray(lengths)
    if arr.shape != (B,) or not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"lengths must be {B} integers (one per sequence), got {arr.dtype}{list(arr.shape)}")
    if arr.min() < 1 or arr.max() > T:
        raise ValueError(f"lengths must lie in [1, T={T}] (the padded prompt length), got {arr.tolist()}")
    return jnp.asarray(arr, jnp.int32)
