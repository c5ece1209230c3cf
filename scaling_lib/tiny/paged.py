"""A paged KV cache for the tiny decoder: a pool of fixed-size blocks and a block table per sequence.

A contiguous cache (`model.KVCache`) gives every sequence S_max slots up front, so a ragged batch stores, and a plain
attention kernel reads, B x S_max slots. A paged cache (PagedAttention, {cite}`kwon2023paged`) cuts the cache into
blocks of `block_size` tokens kept in one pool; sequence b owns the blocks listed in row b of a block table, and
grows by one block whenever it crosses a block boundary. Only ceil(len / block_size) blocks per sequence exist.

    pool k, v        [L, n_blocks, block_size, K, H]   (int8 / fp8 entries carry scales [L, n_blocks, block_size, K])
    block_table      [B, max_blocks_per_seq]  int32, block ids; 0 (NULL_BLOCK, never handed out) where unallocated
    lengths          [B] tokens cached per sequence

Token t of sequence b lives in block block_table[b, t // block_size], slot t % block_size. Attention gathers each
sequence's blocks through its table row, so its keys come back in position order and `model.attention` masks them
exactly as it masks a contiguous cache. (This gather still touches max_blocks_per_seq blocks for every sequence; a
paged-attention kernel such as vLLM's or a TPU ragged kernel reads only the allocated ones: see
`kv_levers.ragged_kv_reads`.)

The block allocator is host-side Python, as in a serving engine: `PagedKVCache` keeps the free list, reference
counts and the table in NumPy, and the device pool in a `KVPool` that the jitted step donates. On top of paging:
  - int8 / fp8 entries: `kv_dtype="int8"` or `"fp8"` quantizes each new key and value per (token, head) on write
    and dequantizes on read (`scaling_lib.tiny.quantize`);
  - prefix caching: `share_prefix` points a new sequence at another's full prompt blocks (reference-counted, never
    written again) and copies the partly filled last block (copy-on-write);
  - a sliding window that caps memory: with `config.sliding_window = w`, blocks whose every token has left the
    window are returned to the pool, so a sequence holds at most ceil(w / block_size) + 1 blocks.
"""

import math
from dataclasses import dataclass, field, replace

import jax
import jax.numpy as jnp
import numpy as np
from jax.tree_util import register_dataclass

from .._validate import non_negative_int, positive_int
from ..models import Transformer
from .model import TRACE_COUNTS, Params, attention, check_lengths, check_tokens, finish, qkv, unembed
from .quantize import QUANTIZED, STORAGE_DTYPES, check_format, dequantize, quantize

NULL_BLOCK = 0  # block 0 is reserved: unallocated table entries point at it, padding writes land in it


@register_dataclass
@dataclass(frozen=True)
class KVPool:
    """The device side of the cache: k, v [L, n_blocks, block_size, K, H] in the storage dtype of `kv_dtype`;
    k_scale, v_scale [L, n_blocks, block_size, K] float32 for int8 / fp8 entries, else None.

    Defined in chapter 6, *Shrinking the KV cache*.
    """
    k: jax.Array
    v: jax.Array
    k_scale: jax.Array | None
    v_scale: jax.Array | None
    kv_dtype: str = field(metadata=dict(static=True))



class PagedKVCache:
    """A block pool, a block table and a host-side allocator for `batch` sequences (see the module docstring).

    Mutable on purpose: `paged_extend` / `paged_decode_step` allocate blocks, replace `pool` with the updated
    (donated) arrays and advance `lengths`; `share_prefix` and `release` edit the table.

    Defined in chapter 6, *Shrinking the KV cache*.
    """

    def __init__(self, config, batch: int, n_blocks: int, block_size: int, max_blocks_per_seq: int,
                 kv_dtype: str = "fp32"):
        if not isinstance(config, Transformer):
            raise ValueError(f"config must be a scaling_lib.models.Transformer (params.config), got "
                             f"{type(config).__name__}")
        if not isinstance(kv_dtype, str):
            raise ValueError(f"kv_dtype must be a format name such as 'fp32' or 'int8', got {kv_dtype!r}")
        check_format(kv_dtype)
        batch, block_size = positive_int("batch", batch), positive_int("block_size", block_size)
        max_blocks_per_seq = positive_int("max_blocks_per_seq", max_blocks_per_seq)
        if positive_int("n_blocks", n_blocks) < 2:
            raise ValueError(f"n_blocks={n_blocks}: block {NULL_BLOCK} is reserved, so the pool needs at least 2")
        self.config, self.block_size, self.kv_dtype = config, block_size, kv_dtype
        shape = (config.n_layers, n_blocks, block_size, config.n_kv_heads, config.head_dim)
        scale = jnp.ones(shape[:-1], jnp.float32) if kv_dtype in QUANTIZED else None
        zeros = jnp.zeros(shape, STORAGE_DTYPES[kv_dtype])
        self.pool = KVPool(zeros, jnp.zeros_like(zeros), scale, None if scale is None else jnp.ones_like(scale),
                           kv_dtype)
        self.block_table = np.full((batch, max_blocks_per_seq), NULL_BLOCK, np.int32)
        self.lengths = np.zeros(batch, np.int32)
        self.refcount = np.zeros(n_blocks, np.int32)
        self.refcount[NULL_BLOCK] = 1  # never free
        self._free = list(range(n_blocks - 1, NULL_BLOCK, -1))  # pop() hands out the lowest id first

    # ------------------------------------------------------------------------------------------ bookkeeping
    @property
    def batch(self) -> int:
        return self.block_table.shape[0]

    @property
    def capacity_tokens(self) -> int:
        """Longest sequence the table can address: max_blocks_per_seq x block_size."""
        return self.block_table.size // self.batch * self.block_size

    @property
    def n_free_blocks(self) -> int:
        return len(self._free)

    def _sequence(self, name: str, b) -> int:
        """A sequence index in [0, batch): negative ones (which NumPy would count from the end) and others refused."""
        b = non_negative_int(name, b)
        if b >= self.batch:
            raise ValueError(f"{name}={b} is not a sequence of this cache; it holds {self.batch} "
                             f"(0 to {self.batch - 1})")
        return b

    def blocks_held(self, b: int) -> int:
        """Blocks sequence b points at (shared ones included)."""
        return int(np.count_nonzero(self.block_table[self._sequence("b", b)] != NULL_BLOCK))

    @property
    def nbytes(self) -> int:
        """Bytes of the whole pool: k and v values plus any scales."""
        return int(sum(a.nbytes for a in (self.pool.k, self.pool.v, self.pool.k_scale, self.pool.v_scale)
                       if a is not None))

    def _take_block(self) -> int:
        if not self._free:
            raise ValueError(f"the pool is out of blocks ({self.pool.k.shape[1]} blocks of {self.block_size} "
                             "tokens); create the cache with a larger n_blocks or release finished sequences")
        block = self._free.pop()
        self.refcount[block] = 1
        return block

    def _drop(self, block: int):
        self.refcount[block] -= 1
        if self.refcount[block] == 0:
            self._free.append(block)

    def _reserve(self, b: int, new_len: int):
        """Allocate the blocks sequence b needs to hold new_len tokens; refuse to write into a shared block."""
        if new_len > self.capacity_tokens:
            raise ValueError(f"sequence {b} would hold {new_len} tokens but the block table addresses "
                             f"{self.capacity_tokens}; create the cache with a larger max_blocks_per_seq")
        first = self.lengths[b] // self.block_size
        for j in range(first, math.ceil(new_len / self.block_size)):
            if self.block_table[b, j] == NULL_BLOCK:
                self.block_table[b, j] = self._take_block()
            elif self.refcount[self.block_table[b, j]] > 1 and new_len > self.lengths[b]:
                raise ValueError(f"sequence {b} would write into block {self.block_table[b, j]}, which is shared")

    def _reserve_all(self, new_lengths):
        """`_reserve` for every sequence, all or nothing: if any allocation fails (out of blocks, table too short,
        a shared block) the table, reference counts and free list are put back as they were, then the error raised."""
        saved = (self.block_table.copy(), self.refcount.copy(), list(self._free))
        try:
            for b, new_len in enumerate(new_lengths):
                self._reserve(b, new_len)
        except ValueError:
            self.block_table, self.refcount, self._free = saved
            raise

    def release(self, b: int):
        """Sequence b is finished: return its blocks (shared ones when their last user lets go)."""
        b = self._sequence("b", b)
        for block in self.block_table[b]:
            if block != NULL_BLOCK:
                self._drop(int(block))
        self.block_table[b] = NULL_BLOCK
        self.lengths[b] = 0

    def share_prefix(self, src: int, dst: int, n_tokens: int):
        """Start sequence dst with the first n_tokens of sequence src without recomputing them (prefix caching).

        Full blocks are shared (reference-counted; neither sequence writes them again); a partly filled last block
        is copied, because src and dst would each write their next tokens into it (copy-on-write)."""
        src, dst = self._sequence("src", src), self._sequence("dst", dst)
        n_tokens = positive_int("n_tokens", n_tokens)
        if src == dst:
            raise ValueError(f"src and dst are both sequence {src}; share a prefix into another sequence")
        if not 0 < n_tokens <= self.lengths[src]:
            raise ValueError(f"n_tokens={n_tokens} must lie in [1, {self.lengths[src]}] (sequence {src}'s length)")
        if self.lengths[dst] or self.blocks_held(dst):
            raise ValueError(f"sequence {dst} is in use; call release({dst}) first")
        full, rest = divmod(n_tokens, self.block_size)
        for j in range(full):
            block = int(self.block_table[src, j])
            self.block_table[dst, j] = block
            self.refcount[block] += 1
        if rest:
            old, new = int(self.block_table[src, full]), self._take_block()
            self.pool = jax.tree.map(lambda a: a.at[:, new].set(a[:, old]), self.pool)
            self.block_table[dst, full] = new
        self.lengths[dst] = n_tokens

    def _free_out_of_window(self, window: int):
        """Return blocks no future query can see: every token in them is at least `window` positions back."""
        for b in range(self.batch):
            for j in range(max(0, (self.lengths[b] - window + 1) // self.block_size)):
                if self.block_table[b, j] != NULL_BLOCK:
                    self._drop(int(self.block_table[b, j]))
                    self.block_table[b, j] = NULL_BLOCK


# ---------------------------------------------------------------------------------------------- the jitted step
# (written out in chapter 6: write_kv, gather_kv, extend_step)
def write_kv(pool: KVPool, layer, blocks, slots, k, v) -> KVPool:
    """Store k, v [B, T, K, H] at (blocks, slots) [B, T] of one layer of the pool,
    quantized per (token, head) when the pool holds int8 or fp8 entries.

    Defined in chapter 6, *Shrinking the KV cache*.
    """
    at = (layer, blocks, slots)
    if pool.kv_dtype in QUANTIZED:
        k, k_scale = quantize(k, pool.kv_dtype, -1)
        v, v_scale = quantize(v, pool.kv_dtype, -1)
        return replace(
            pool,
            k=pool.k.at[at].set(k),
            v=pool.v.at[at].set(v),
            k_scale=pool.k_scale.at[at].set(k_scale[..., 0]),
            v_scale=pool.v_scale.at[at].set(v_scale[..., 0]),
        )
    dtype = STORAGE_DTYPES[pool.kv_dtype]
    k, v = k.astype(dtype), v.astype(dtype)
    return replace(pool, k=pool.k.at[at].set(k), v=pool.v.at[at].set(v))


def gather_kv(pool: KVPool, layer, table, dtype):
    """Every sequence's keys and values in position order, read through its row of the
    block table [B, M]: k, v [B, M x block_size, K, H], dequantized to `dtype`.

    Defined in chapter 6, *Shrinking the KV cache*.
    """

    def read(values, scale):
        x = values[layer][table]  # [B, M, block_size, K, H]: row b's blocks, in order
        if scale is None:
            x = x.astype(dtype)
        else:
            x = dequantize(x, scale[layer][table][..., None], dtype)
        return x.reshape(x.shape[0], -1, *x.shape[3:])  # the blocks end to end

    return read(pool.k, pool.k_scale), read(pool.v, pool.v_scale)


def extend_step(params, tokens, pool, table, start, n_new):
    """Append tokens [B, T] at positions start[b], start[b] + 1, ... (the first n_new[b]
    of row b are real): each layer writes its keys and values into the pool through the
    block table, then attends over the gathered cache. Returns logits [B, T, V], pool.

    Defined in chapter 6, *Shrinking the KV cache*.
    """
    TRACE_COUNTS["paged_extend"] += 1  # runs only while tracing: counts compilations
    B, T = tokens.shape
    block_size, M = pool.k.shape[2], table.shape[1]
    positions = start[:, None] + jnp.arange(T)  # [B, T]
    # token t of sequence b: block table[b, t // block_size], slot t % block_size
    column = jnp.minimum(positions // block_size, M - 1)
    blocks = jnp.take_along_axis(table, column, axis=1)
    real = jnp.arange(T) < n_new[:, None]
    blocks = jnp.where(real, blocks, NULL_BLOCK)  # padding lands in the null block
    slots = positions % block_size
    key_positions = jnp.broadcast_to(jnp.arange(M * block_size), (B, M * block_size))
    x = params.embed[tokens]
    window = params.config.sliding_window
    for i in range(params.config.n_layers):
        p = params.layer(i)
        q, k, v = qkv(p, x, positions)
        pool = write_kv(pool, i, blocks, slots, k, v)
        k_all, v_all = gather_kv(pool, i, table, q.dtype)
        x = finish(p, x, attention(q, k_all, v_all, positions, key_positions, window))
    return unembed(params, x), pool


extend_step_jit = jax.jit(extend_step, donate_argnums=2)  # the pool updated in place


def _check_paged(cache) -> PagedKVCache:
    if not isinstance(cache, PagedKVCache):
        raise ValueError(f"cache must be a PagedKVCache, got {type(cache).__name__}")
    return cache


def paged_extend(params: Params, tokens, cache: PagedKVCache, n_new=None):
    """Append up to T tokens to every sequence of the cache at once (prefill, chunked prefill, or decode when T=1).

    tokens [B, T] right-padded; n_new [B] how many of each row are real (default T; 0 leaves a sequence alone).
    Allocates the blocks needed, runs one jitted step, and returns (logits [B, T, V], cache): the next-token logits
    of sequence b are logits[b, n_new[b] - 1]. The cache is updated in place (its pool is donated) and returned.

    Defined in chapter 6, *Shrinking the KV cache*.
    """
    tokens = check_tokens(params, tokens)
    _check_paged(cache)
    B, T = tokens.shape
    if B != cache.batch:
        raise ValueError(f"tokens has {B} rows but the cache holds {cache.batch} sequences; pass one row each")
    n_new = np.full(B, T, np.int32) if n_new is None else np.asarray(n_new)
    if n_new.shape != (B,) or not np.issubdtype(n_new.dtype, np.integer) or n_new.min() < 0 or n_new.max() > T:
        raise ValueError(f"n_new must be {B} integers in [0, T={T}], got {n_new.tolist()}")
    for what, config_field in (("layers", "n_layers"), ("KV heads", "n_kv_heads"), ("head_dim", "head_dim")):
        have, want = getattr(cache.config, config_field), getattr(params.config, config_field)
        if have != want:
            amount = f"{what} {have}" if what == "head_dim" else f"{have} {what}"
            raise ValueError(f"the cache has {amount} but the params have {want} ({config_field}); build the "
                             "cache from params.config")
    cache._reserve_all([int(cache.lengths[b] + n_new[b]) for b in range(B)])
    logits, cache.pool = extend_step_jit(params, tokens, cache.pool, jnp.asarray(cache.block_table),
                                     jnp.asarray(cache.lengths), jnp.asarray(n_new, jnp.int32))
    cache.lengths = cache.lengths + n_new.astype(np.int32)
    if params.config.sliding_window is not None:
        cache._free_out_of_window(params.config.sliding_window)
    return logits, cache


def paged_prefill(params: Params, tokens, cache: PagedKVCache, lengths=None):
    """Prefill empty sequences with right-padded prompts [B, T] of true lengths `lengths` (default T).

    Defined in chapter 6, *Shrinking the KV cache*.
    """
    if _check_paged(cache).lengths.any():
        raise ValueError("paged_prefill needs an empty cache; use paged_extend to add tokens to cached sequences")
    return paged_extend(params, tokens, cache, lengths)


def paged_decode_step(params: Params, token, cache: PagedKVCache):
    """One new token per sequence (token [B]): returns (next-token logits [B, V], cache).

    Defined in chapter 6, *Shrinking the KV cache*.
    """
    token = token if isinstance(token, jax.Array) else np.asarray(token)  # no int32 cast before the vocabulary check
    if token.ndim != 1:
        raise ValueError(f"token must be one id per sequence, shape [B], got shape {list(token.shape)}")
    logits, cache = paged_extend(params, token[:, None], cache)
    return logits[:, 0], cache


def paged_generate(params: Params, prompt, n_tokens: int, cache: PagedKVCache, lengths=None):
    """Greedy decoding through the paged cache: prefill the prompts, then n_tokens steps; returns ([B, n_tokens]
    tokens, [B, n_tokens, V] the logits that chose them).

    Defined in chapter 6, *Shrinking the KV cache*.
    """
    n_tokens = positive_int("n_tokens", n_tokens)
    prompt = check_tokens(params, prompt)
    lengths = None if lengths is None else check_lengths(lengths, *prompt.shape)  # each >= 1: a first token to pick
    logits, cache = paged_prefill(params, prompt, cache, lengths)
    n = np.asarray(cache.lengths)  # = lengths
    last = logits[jnp.arange(len(n)), jnp.asarray(n) - 1]
    tokens, chosen_by = [], []
    for step in range(n_tokens):
        token = jnp.argmax(last, axis=-1).astype(jnp.int32)
        tokens.append(token)
        chosen_by.append(last)
        if step + 1 < n_tokens:
            last, cache = paged_decode_step(params, token, cache)
    return jnp.stack(tokens, axis=1), jnp.stack(chosen_by, axis=1)
