"""Prefix caching across conversation turns: two memory tiers, LRU eviction, and routing that keeps affinity.

A chat turn's prompt is the whole conversation so far plus the new message, so everything but the new message was
already prefilled last turn (Scaling Book ch. 7, "Prefix caching"). Keeping that KV cache skips its prefill, if the
follow-up reaches the replica that holds it and the cache is still there. Each replica keeps cached prefixes in

    HBM        what the decode batch does not need; a hit is free: the prefix is already where attention reads it;
    host DRAM  much larger (the source's 8 x v5e host: 128 GiB of HBM, about 450 GiB of DRAM) but a hit first
               copies the prefix into HBM: KV bytes / host-to-HBM bandwidth (no source gives that bandwidth here:
               it is an input, and the chapter says which value it assumes);

with least-recently-used eviction: a prefix pushed out of HBM is demoted to host DRAM, one pushed out of DRAM is
dropped. Routing decides whether a follow-up finds its prefix: "affinity" sends every turn of a conversation to the
replica of its first turn; "round-robin" spreads turns evenly and finds a prefix only by chance.

`route` replays a conversation workload through the caches (each turn's cache is stored when the turn ends, which
assumes the user's think time outlasts the turn) and `simulate_chat` prices each replica's requests with
`simulator.simulate`, the hits' prefill shortened and the host hits' load added. `cached_prefill_cost` prices one
such shortened prefill under a layout of chapter 12: the new tokens' FLOPs, weight read and collectives, plus the
read of the cached keys and values. Used in chapter 12, *Choosing a layout by the metric*, and chapter 14, *Serving
details*.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass, replace

from ._numpy import np
from ._validate import MAX_REQUESTS, choice, non_negative_int, positive, positive_int
from .frontier import LayoutCost, layout_cost
from .hardware import GIB, get_chip
from .memory import kv_bytes_per_token
from .models import get_model
from .simulator import ENGINES, ServingConfig, Workload, simulate

ROUTINGS = ("affinity", "round-robin")
TIERS = ("hbm", "host", "miss")
# Scaling Book ch. 7, "Prefix caching": an 8 x TPU v5e server has 128 GiB of HBM and about 450 GiB of host DRAM.
V5E_HOST_DRAM_BYTES = 450 * GIB  # per 8-chip host


@dataclass(frozen=True)
class CacheTiers:
    """Bytes one replica sets aside for cached prefixes in HBM and in host DRAM, and the host-to-HBM copy rate.

    Defined in chapter 14, *Serving details*.
    """

    hbm_bytes: float
    host_bytes: float
    host_bandwidth: float  # B/s

    def __post_init__(self):
        positive("hbm_bytes", self.hbm_bytes, allow_zero=True)
        positive("host_bytes", self.host_bytes, allow_zero=True)
        positive("host_bandwidth", self.host_bandwidth)


class TieredLru:
    """Two LRU tiers of one replica: `lookup` promotes a host hit to HBM; `store` evicts HBM -> host -> dropped."""

    def __init__(self, tiers: CacheTiers):
        if not isinstance(tiers, CacheTiers):
            raise ValueError(f"tiers must be a CacheTiers (HBM bytes, host bytes, host bandwidth), got {tiers!r}")
        self.tiers = tiers
        self.hbm, self.host = OrderedDict(), OrderedDict()  # key -> (tokens, bytes), least recent first

    def lookup(self, key):
        """(tier, tokens) of a cached prefix ("hbm", "host"), or ("miss", 0). A hit becomes most recent, in HBM."""
        _hashable_key(key)
        for name, tier in (("hbm", self.hbm), ("host", self.host)):
            if key in tier:
                tokens, size = tier.pop(key)
                self._put(key, tokens, size)
                return name, tokens
        return "miss", 0

    def store(self, key, tokens: int, size: float):
        """Keep `tokens` tokens (`size` bytes) of prefix under `key`, replacing an older entry. `size` must be a
        finite number of bytes >= 0 (a NaN would make every byte total NaN, and nothing would ever be evicted)."""
        _hashable_key(key)
        tokens = non_negative_int("tokens", tokens)
        size = positive("size", size, allow_zero=True)
        self.hbm.pop(key, None)
        self.host.pop(key, None)
        self._put(key, tokens, size)

    def _put(self, key, tokens, size):
        self.hbm[key] = (tokens, size)
        while self._bytes(self.hbm) > self.tiers.hbm_bytes:
            old, entry = self.hbm.popitem(last=False)  # demote the least recent to host DRAM
            self.host[old] = entry
        while self._bytes(self.host) > self.tiers.host_bytes:
            self.host.popitem(last=False)

    @staticmethod
    def _bytes(tier) -> float:
        return sum(size for _, size in tier.values())


def _hashable_key(key):
    try:
        hash(key)
    except TypeError:
        raise ValueError(f"key must be hashable (a conversation id such as an int or a string), got {key!r}") from None


@dataclass(frozen=True)
class ChatWorkload:
    """Requests of many conversations, in arrival order: which conversation and turn, and the token counts."""

    arrival_s: np.ndarray
    session: np.ndarray
    turn: np.ndarray
    prompt_len: np.ndarray
    output_len: np.ndarray
    user_len: int  # new tokens each turn (the rest of the prompt is the conversation so far)

    @property
    def n_requests(self) -> int:
        return len(self.arrival_s)


def chat_workload(n_sessions: int, turns: int, system_len: int, user_len: int, output_len: int, rate_per_s: float,
                  think_s: float, seed: int = 0) -> ChatWorkload:
    """Conversations starting as a Poisson process (rate_per_s), each of `turns` turns `think_s` seconds apart
    (exponential); turn t's prompt = system + t x (user + output) + user tokens.

    Defined in chapter 14, *Serving details*.
    """
    n, t = positive_int("n_sessions", n_sessions), positive_int("turns", turns)
    if n * t > MAX_REQUESTS:
        raise ValueError(f"n_sessions x turns = {n * t:,} requests, more than {MAX_REQUESTS:,}: the simulation runs "
                         "each one in Python; use fewer sessions or turns")
    for name, value in (("system_len", system_len), ("user_len", user_len), ("output_len", output_len)):
        positive_int(name, value)
    positive("rate_per_s", rate_per_s)
    positive("think_s", think_s)
    rng = np.random.default_rng(non_negative_int("seed", seed))
    starts = np.cumsum(rng.exponential(1.0 / rate_per_s, n))
    gaps = rng.exponential(think_s, (n, t))
    gaps[:, 0] = 0.0
    arrival = (starts[:, None] + np.cumsum(gaps, axis=1)).ravel()
    session, turn = np.repeat(np.arange(n), t), np.tile(np.arange(t), n)
    prompt = system_len + turn * (user_len + output_len) + user_len
    order = np.argsort(arrival, kind="stable")
    return ChatWorkload(arrival[order], session[order], turn[order], prompt[order],
                        np.full(n * t, output_len)[order], user_len)


@dataclass(frozen=True)
class Routed:
    """Per request: the replica it went to, the prefix tokens found cached, in which tier, and the load time."""

    replica: np.ndarray
    cached_len: np.ndarray
    tier: np.ndarray  # "hbm", "host" or "miss"
    load_s: np.ndarray

    def hit_rate(self, tier: str | None = None) -> float:
        """Fraction of follow-up-able requests served from a cached prefix (any tier, or the named one)."""
        hits = self.tier != "miss" if tier is None else self.tier == choice("tier", tier, TIERS)
        return float(np.mean(hits))


def route(workload: ChatWorkload, model, n_replicas: int, tiers: CacheTiers, routing: str = "affinity",
          kv_dtype: str = "bf16") -> Routed:
    """Send each request to a replica and look its conversation up in that replica's `TieredLru` (module docstring).

    A hit reuses the previous turn's whole context (at most prompt_len - 1 tokens: prefill makes the first token);
    after the turn, the replica stores its full context (prompt + output) for the next one."""
    if not isinstance(workload, ChatWorkload):
        raise ValueError(f"workload must be a ChatWorkload (see chat_workload), got {type(workload).__name__}")
    if not isinstance(tiers, CacheTiers):
        raise ValueError(f"tiers must be a CacheTiers (HBM bytes, host bytes, host bandwidth), got "
                         f"{type(tiers).__name__}")
    m = get_model(model)
    n = positive_int("n_replicas", n_replicas)
    choice("routing", routing, ROUTINGS)
    per_token = kv_bytes_per_token(m, kv_dtype)
    caches = {}  # replica -> TieredLru, made when it gets its first request (n may far exceed the requests)
    size = workload.n_requests
    replica, cached, tier, load = np.zeros(size, int), np.zeros(size, int), np.empty(size, object), np.zeros(size)
    for i in range(size):
        key, prompt = int(workload.session[i]), int(workload.prompt_len[i])
        r = key % n if routing == "affinity" else i % n
        if r not in caches:
            caches[r] = TieredLru(tiers)
        found, tokens = caches[r].lookup(key)
        replica[i], tier[i] = r, found
        cached[i] = min(tokens, prompt - 1)
        load[i] = cached[i] * per_token / tiers.host_bandwidth if found == "host" else 0.0
        context = prompt + int(workload.output_len[i])
        caches[r].store(key, context, context * per_token)
    return Routed(replica, cached, tier.astype(str), load)


@dataclass(frozen=True)
class ChatResult:
    """TTFT of every request (arrival order), with the tier its prefix came from."""

    ttft_s: np.ndarray
    routed: Routed

    def p50_ttft_s(self, tier: str | None = None) -> float:
        """Median TTFT of all requests, or of those whose prefix came from `tier`; ValueError if there are none."""
        mask = np.ones(len(self.ttft_s), bool) if tier is None else self.routed.tier == choice("tier", tier, TIERS)
        if not mask.any():
            raise ValueError(f"no request found its prefix in tier {tier!r}; pick another tier or None for all")
        return float(np.median(self.ttft_s[mask]))


def simulate_chat(config: ServingConfig, workload: ChatWorkload, n_replicas: int, tiers: CacheTiers,
                  routing: str = "affinity", engine: str = "interleaved") -> ChatResult:
    """`route` the workload, then simulate every replica's requests (`simulator.simulate`) with the cached prefixes
    skipping prefill and host-tier prefixes paying their copy into HBM.

    Defined in chapter 14, *Serving details*.
    """
    if not isinstance(config, ServingConfig):
        raise ValueError(f"config must be a ServingConfig, got {type(config).__name__}")
    n_replicas = positive_int("n_replicas", n_replicas)
    choice("engine", engine, ENGINES)
    routed = route(workload, config.model, n_replicas, tiers, routing, config.kv_dtype)
    ttft = np.full(workload.n_requests, np.nan)
    for r in np.unique(routed.replica):  # the replicas that got a request
        mine = np.flatnonzero(routed.replica == r)
        sub = Workload(workload.arrival_s[mine], workload.prompt_len[mine], workload.output_len[mine],
                       cached_len=routed.cached_len[mine], cache_load_s=routed.load_s[mine])
        ttft[mine] = simulate(config, sub, engine).ttft_s
    return ChatResult(ttft, routed)


def cached_prefill_cost(model, chip, n_chips: int, new_tokens: int, cached_tokens: int, ffn_layout: str,
                        attention_sharding: str, *, batch: int = 1, weight_dtype: str = "bf16",
                        kv_dtype: str = "bf16", mesh_shape=None, pad_heads: bool = False) -> LayoutCost:
    """Price a prefill of `new_tokens` per sequence that attends to `cached_tokens` already in the KV cache (a
    prefix-cache hit, or the next turn of a conversation), under a layout (`frontier.layout_cost`):

        step = max(2 P B T_new / (n C), weights + KV read) + network
        KV read = B_chip S_cached 2 L K_chip H b_kv / W_hbm

    The FLOPs, the weight read and the collectives are those of a prefill of T_new tokens; the cached tokens add only
    the read of their keys and values, with the same per-chip sequences and KV heads as a decode step under that
    attention sharding ("heads" replicates a multiquery head, so every chip reads every sequence's cache). As in
    the frontier's model, attention's own FLOPs are left out (for 64 queries against 2,048 keys of PaLM 540B they
    are about 1% of 2PT). cached_tokens = 0 is an ordinary prefill. pad_heads: as in `frontier.layout_cost` (heads
    sharded over chips that do not divide them are padded, as Pope et al. padded PaLM 540B's 48 heads to 64).

    Pope et al. 2022, sec. 1 (the chatbot turn: 64 new tokens against a 1,920-token history); chapter 12 prices that
    turn with it, through `book.claims.frontier.chatbot_turn`.
    """
    new_tokens = positive_int("new_tokens", new_tokens)
    cached = non_negative_int("cached_tokens", cached_tokens)
    base = layout_cost(model, chip, n_chips, "prefill", batch, ffn_layout, attention_sharding,
                       context_len=new_tokens, weight_dtype=weight_dtype, kv_dtype=kv_dtype, mesh_shape=mesh_shape,
                       pad_heads=pad_heads)
    m, c = get_model(model), get_chip(chip)
    kv_heads = math.ceil(m.n_kv_heads / base.n_chips) if attention_sharding == "heads" else m.n_kv_heads
    sequences = base.batch if attention_sharding == "heads" else base.batch // base.n_chips
    kv_bytes = sequences * cached * kv_bytes_per_token(m, kv_dtype) * kv_heads / m.n_kv_heads
    return replace(base, kv_s=kv_bytes / c.hbm_bandwidth, bytes_per_chip=base.bytes_per_chip + kv_bytes)
