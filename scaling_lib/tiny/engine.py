"""An inference engine for the tiny model with JetStream's interface, and a continuous-batching loop that drives it.

JetStream (google/JetStream, `engine_api.Engine`) asks a model for three operations, which an orchestrator calls:

    prefill(prompt)                  one prompt at batch 1 -> its KV cache and first token (a `Prefix`)
    insert(prefix, state, slot)      copy that cache into slot `slot` of the batched decode state
    generate(state)                  one decode step for every slot -> the next token of each

`Engine` implements them on `tiny.model`: prompts are right-padded to a power-of-two bucket so prefill compiles once
per bucket, the decode state is one `KVCache` of `max_batch` slots of `max_len` tokens (compiled once), and an
empty slot keeps computing (its output is ignored; its position is pinned at 0 so it never fills up). `serve`
is the orchestrator of `scaling_lib.simulator`'s "interleaved" engine for real: whenever a slot is free and a
request waits, prefill it and insert it; otherwise step every slot; a request leaves when it has its tokens.
Greedy decoding throughout, so every request's tokens equal `tiny.model.generate` on that prompt alone.

Used in chapter 14, *Serving details*.
"""

from collections import deque
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from .._validate import non_negative_int, positive_int
from .model import KVCache, Params, check_tokens, decode_step, prefill


@dataclass(frozen=True)
class Prefix:
    """What prefill hands to insert: one sequence's cache [L, 1, max_len, K, H], its length and its first token."""

    cache: KVCache
    length: int
    first_token: int


@dataclass(frozen=True)
class DecodeState:
    """The batched decode state: the cache of every slot, the token each slot feeds next, and which are busy."""

    cache: KVCache
    tokens: jax.Array  # [max_batch] int32
    active: tuple  # one bool per slot


def bucket(length: int, smallest: int = 8) -> int:
    """The power of two >= length (at least `smallest`): prompts padded to it share one prefill compilation."""
    length, smallest = positive_int("length", length), positive_int("smallest", smallest)
    return max(smallest, 1 << (length - 1).bit_length())


@jax.jit
def _insert(cache, tokens, prefix_cache, first_token, slot):
    k = cache.k.at[:, slot].set(prefix_cache.k[:, 0])
    v = cache.v.at[:, slot].set(prefix_cache.v[:, 0])
    positions = cache.positions.at[slot].set(prefix_cache.positions[0])
    return KVCache(k, v, positions), tokens.at[slot].set(first_token)


class Engine:
    """JetStream's engine interface on the tiny model (module docstring). `max_len` bounds prompt + generated.

    Defined in chapter 14, *Serving details*.
    """

    def __init__(self, params: Params, max_batch: int, max_len: int):
        if not isinstance(params, Params):
            raise ValueError(f"params must be tiny.model.Params, got {type(params).__name__}")
        self.params = params
        self.max_batch = positive_int("max_batch", max_batch)
        self.max_len = positive_int("max_len", max_len)

    def _cache_shape(self, batch: int) -> tuple:
        c = self.params.config
        return (c.n_layers, batch, self.max_len, c.n_kv_heads, c.head_dim)

    def _check_cache(self, what: str, cache, batch: int):
        """A KVCache of this engine's layers, KV heads, head_dim, max_len and dtype for `batch` sequences: one made
        by another model or engine would be broadcast into the decode state, or decoded with the wrong weights."""
        if not isinstance(cache, KVCache):
            raise ValueError(f"{what} must hold a tiny.model.KVCache, got {type(cache).__name__}")
        want, dtype = self._cache_shape(batch), self.params.embed.dtype
        if tuple(cache.k.shape) != want or cache.k.dtype != dtype or tuple(cache.positions.shape) != (batch,):
            raise ValueError(f"{what}'s cache is {cache.k.dtype}{list(cache.k.shape)} but this engine's is "
                             f"{dtype}{list(want)} ([layers, batch, max_len, KV heads, head_dim]); make it with this "
                             "engine (its prefill or init_decode_state), from the same params and max_len")

    def _check_state(self, state):
        if not isinstance(state, DecodeState):
            raise ValueError(f"state must be a DecodeState (from init_decode_state), got {type(state).__name__}")
        self._check_cache("state", state.cache, self.max_batch)
        if len(state.active) != self.max_batch or tuple(state.tokens.shape) != (self.max_batch,):
            raise ValueError(f"state has {len(state.active)} slots but this engine has max_batch={self.max_batch}; "
                             "use a state from this engine's init_decode_state")

    def _slot(self, slot) -> int:
        """A slot index: an integer in [0, max_batch) (True, 1.5, None and "0" are refused before JAX sees them)."""
        slot = non_negative_int("slot", slot)
        if slot >= self.max_batch:
            raise ValueError(f"slot={slot} is outside the {self.max_batch} decode slots (0 to {self.max_batch - 1})")
        return slot

    def init_decode_state(self) -> DecodeState:
        shape, dtype = self._cache_shape(self.max_batch), self.params.embed.dtype
        cache = KVCache(jnp.zeros(shape, dtype), jnp.zeros(shape, dtype), jnp.zeros((self.max_batch,), jnp.int32))
        return DecodeState(cache, jnp.zeros((self.max_batch,), jnp.int32), (False,) * self.max_batch)

    def prefill(self, prompt) -> Prefix:
        """Run one prompt (1-D token ids) at batch 1, padded to its bucket; return its cache and first token."""
        prompt = np.asarray(prompt)
        if prompt.ndim != 1:
            raise ValueError(f"prefill takes one prompt, a 1-D array of token ids; got shape {prompt.shape}")
        n = len(prompt)
        if n == 0:
            raise ValueError("prefill got an empty prompt; pass at least one token id")
        padded = bucket(n)
        if padded > self.max_len:
            raise ValueError(f"a {n}-token prompt pads to {padded} tokens, more than max_len={self.max_len}; "
                             "raise max_len")
        tokens = check_tokens(self.params, np.pad(prompt, (0, padded - n))[None])
        logits, cache = prefill(self.params, tokens, lengths=np.array([n]), cache_len=self.max_len)
        return Prefix(cache, n, int(jnp.argmax(logits[0, n - 1])))

    def insert(self, prefix: Prefix, state: DecodeState, slot: int) -> DecodeState:
        """Copy a prefix's cache into a free slot; that slot then feeds the prefix's first token."""
        if not isinstance(prefix, Prefix):
            raise ValueError(f"prefix must be a Prefix (from this engine's prefill), got {type(prefix).__name__}")
        self._check_state(state)
        self._check_cache("prefix", prefix.cache, 1)
        length, vocab = positive_int("prefix.length", prefix.length), self.params.config.vocab_size
        if length > self.max_len:
            raise ValueError(f"prefix.length={length} exceeds max_len={self.max_len}")
        if not 0 <= non_negative_int("prefix.first_token", prefix.first_token) < vocab:
            raise ValueError(f"prefix.first_token={prefix.first_token} is not a token id in [0, {vocab})")
        slot = self._slot(slot)
        if state.active[slot]:
            raise ValueError(f"slot {slot} is busy; insert into a free slot")
        cache, tokens = _insert(state.cache, state.tokens, prefix.cache, prefix.first_token, slot)
        active = tuple(a or i == slot for i, a in enumerate(state.active))
        return DecodeState(cache, tokens, active)

    def generate(self, state: DecodeState):
        """One decode step for every slot: returns (the new state, the token each slot produced [max_batch])."""
        self._check_state(state)
        busy = np.asarray(state.active)
        if np.any(np.asarray(state.cache.positions)[busy] >= self.max_len):
            raise ValueError(f"a busy slot has filled its {self.max_len} cache positions; raise max_len")
        logits, cache = decode_step(self.params, state.tokens, state.cache)
        nxt = jnp.argmax(logits, axis=-1).astype(jnp.int32)
        idle = jnp.asarray(~busy)
        cache = KVCache(cache.k, cache.v, jnp.where(idle, 0, cache.positions))  # empty slots stay at position 0
        return DecodeState(cache, nxt, state.active), np.asarray(nxt)

    def release(self, state: DecodeState, slot: int) -> DecodeState:
        """Mark a busy slot free (its cache is overwritten by the next insert)."""
        self._check_state(state)
        slot = self._slot(slot)
        if not state.active[slot]:
            raise ValueError(f"slot {slot} is not in use; release only a slot a prefix was inserted into")
        return DecodeState(state.cache, state.tokens, tuple(a and i != slot for i, a in enumerate(state.active)))


@dataclass(frozen=True)
class ServeResult:
    """Tokens of every request (in request order) and the engine's log of (step, event, request, slot)."""

    tokens: tuple  # one int32 array per request
    events: tuple
    steps: int  # generate calls

    @property
    def max_concurrent(self) -> int:
        live = peak = 0
        for _, event, _, _ in self.events:
            live += 1 if event == "insert" else -1 if event == "finish" else 0
            peak = max(peak, live)
        return peak


def serve(engine: Engine, prompts, max_new_tokens) -> ServeResult:
    """Continuous batching: admit waiting requests into free slots (prefill + insert), then step every slot.

    prompts: 1-D token arrays; max_new_tokens: one count per request (or an int for all). Requests are admitted in
    order; a finished request frees its slot before the next admission.

    Defined in chapter 14, *Serving details*.
    """
    if not isinstance(engine, Engine):
        raise ValueError(f"engine must be an Engine, got {type(engine).__name__}")
    if isinstance(prompts, (str, bytes)) or not np.iterable(prompts):
        raise ValueError(f"prompts must be a list of 1-D token arrays, got {type(prompts).__name__}")
    prompts = [np.asarray(p) for p in prompts]
    if not prompts:
        raise ValueError("serve needs at least one prompt")
    if isinstance(max_new_tokens, (str, bytes)) or not np.iterable(max_new_tokens):  # one count for every request
        counts = [max_new_tokens] * len(prompts)
    else:
        counts = list(max_new_tokens)
    if len(counts) != len(prompts):
        raise ValueError(f"{len(counts)} max_new_tokens for {len(prompts)} prompts; give one count per prompt")
    counts = [positive_int("max_new_tokens", c) for c in counts]
    for request, (prompt, count) in enumerate(zip(prompts, counts)):  # the last token generated is never cached
        if prompt.ndim == 1 and len(prompt) + count - 1 > engine.max_len:
            raise ValueError(f"request {request} needs {len(prompt)} prompt + {count - 1} generated cache "
                             f"positions, more than max_len={engine.max_len}; raise max_len or lower max_new_tokens")
    waiting, state = deque(range(len(prompts))), engine.init_decode_state()
    owner, out, events, step = {}, [[] for _ in prompts], [], 0
    while waiting or owner:
        while waiting and len(owner) < engine.max_batch:
            request = waiting.popleft()
            slot = next(i for i, busy in enumerate(state.active) if not busy)
            prefix = engine.prefill(prompts[request])
            state = engine.insert(prefix, state, slot)
            owner[slot] = request
            out[request].append(prefix.first_token)  # prefill makes the first token
            events.append((step, "insert", request, slot))
            if counts[request] == 1:
                state, _ = engine.release(state, slot), owner.pop(slot)
                events.append((step, "finish", request, slot))
        if not owner:
            continue
        state, produced = engine.generate(state)
        step += 1
        for slot, request in list(owner.items()):
            out[request].append(int(produced[slot]))
            if len(out[request]) == counts[request]:
                state = engine.release(state, slot)
                del owner[slot]
                events.append((step, "finish", request, slot))
    return ServeResult(tuple(np.array(tokens, np.int32) for tokens in out), tuple(events), step)
