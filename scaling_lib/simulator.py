"""A discrete-event simulator of serving engines, every step priced by `inference` and `memory`.

Prefill is compute-bound, decode is bandwidth-bound (Scaling Book ch. 7), so an engine must decide how to mix the
two on its chips. Four designs are simulated here, every step priced by `inference` and `memory`:

    naive          batch whatever is queued, prefill it together (padded to the longest prompt), then decode
                   that batch until its last sequence finishes (Scaling Book ch. 7, "the simplest method")
    interleaved    continuous batching: a batch-1 prefill whenever a decode slot is free, between decode steps;
                   every running sequence stalls while it runs (Scaling Book ch. 7, "interleaved")
    chunked        continuous batching where every step carries the decode batch plus up to
                   `prefill_chunk_tokens` prompt tokens, so prefill never stalls decode for a whole prompt
    disaggregated  R_p prefill servers and R_d decode servers; each KV cache crosses the network once
                   (Scaling Book ch. 7, "disaggregated")

`simulate` runs the three co-located engines on n copies of one server; `simulate_disaggregated` takes what only the
disaggregated engine has (the two server counts, the network between them, a prefill server of its own).

Time is simulated from event to event, not step by step: between two events (an arrival that can be admitted, a
sequence finishing) the decode batch is fixed and its step time grows linearly with context, so a whole run of
steps is one vectorised sum. A decode step costs `decode_step_time(B, mean context)`; that bound is linear in the
total context of the batch, so the simulator reads it from a table of `decode_step_time(b, 0)` for every batch b
plus `decode_step_time(1, 1).kv_s` per cached token. A prefill of T tokens costs `prefill_latency` (FLOPs at the
configured MFU, never less than one read of the weights).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

from ._numpy import np
from ._validate import (MAX_REQUESTS, at_most, choice, fraction, non_negative_int, positive, positive_int,
                        probability)
from .hardware import get_chip
from .inference import decode_step_time, prefill_time
from .load import TOKEN_BUDGET, Engine, LoadBound, LoadEstimate, engine_and_bound, spread
from .memory import max_batch_size
from .models import get_model
from .serving import default_transfer_bandwidth, kv_transfer_bytes, prefill_latency

ENGINES = ("naive", "interleaved", "chunked", "disaggregated")
# How a chunked engine shares a step between prompts and decodes: "mixed" runs the decodes and fills the rest of the
# token budget with prompts (vLLM's V1 scheduler, TensorRT-LLM's in-flight batching); "prefill-first" runs a step of
# waiting prompts alone, up to the whole budget, while the decodes wait (SGLang's default, vLLM's V0 scheduler).
SCHEDULES = ("mixed", "prefill-first")
# Longest prompt or output a workload may hold: far beyond any context window, and small enough that no sum of
# lengths in the simulator can overflow int64.
MAX_REQUEST_TOKENS = 2**31 - 1
MAX_BATCH = 2**16  # sequences one server decodes together: engines run hundreds to thousands

# ---------------------------------------------------------------------------------------------------------------
# Inputs of the simulator: a server configuration and a workload
# ---------------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ServingConfig:
    """One server: `n_chips` chips holding one copy of `model`, up to `max_batch` sequences of `max_context_len`.

    Validated on construction: the weights and max_batch KV caches of max_context_len tokens must fit in HBM
    (`memory.max_batch_size`). `mfu` prices prefill (40% is the Scaling Book's ch. 8 assumption);
    `prefill_chunk_tokens` is the prompt-token budget per step of the "chunked" engine.

    Defined in chapter 9, *Serving engines*.
    """

    model: object
    chip: object
    n_chips: int
    max_batch: int
    max_context_len: int
    mfu: float = 0.4
    weight_dtype: str = "bf16"
    kv_dtype: str = "bf16"
    compute_dtype: str = "bf16"
    prefill_chunk_tokens: int = 512

    def __post_init__(self):
        model, chip = get_model(self.model), get_chip(self.chip)
        for name in ("n_chips", "max_batch", "max_context_len", "prefill_chunk_tokens"):
            positive_int(name, getattr(self, name))
        # the simulator tabulates one decode step per batch size, so the batch is bounded (engines run thousands)
        at_most("max_batch", self.max_batch, MAX_BATCH, "the simulator tabulates a decode step for every batch size")
        fraction("mfu", self.mfu, "the fraction of peak FLOP/s achieved")
        chip.peak_flops(self.compute_dtype)  # the chip must have this matrix rate
        fit = max_batch_size(model, chip, self.n_chips, self.max_context_len, self.weight_dtype, self.kv_dtype)
        if fit == 0 and max_batch_size(model, chip, self.n_chips, 1, self.weight_dtype, self.kv_dtype) == 0:
            raise ValueError(f"the {self.weight_dtype} weights of {model.name} do not fit in {self.n_chips} x "
                             f"{chip.name} HBM; add chips or quantize the weights")
        if self.max_batch > fit:
            raise ValueError(
                f"max_batch={self.max_batch} does not fit in HBM: {self.n_chips} x {chip.name} hold the "
                f"{self.weight_dtype} weights of {model.name} and at most {fit} KV caches of {self.max_context_len} "
                f"tokens in {self.kv_dtype} (memory.max_batch_size); lower max_batch or max_context_len, or add chips"
            )


def _float_array(name: str, values) -> np.ndarray:
    """`values` as a float array, or a ValueError naming the argument (a string or an object is not seconds)."""
    try:
        return np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must hold numbers of seconds, one per request, got {values!r}") from None


def _readonly(values, dtype):
    array = np.array(values, dtype=dtype)
    array.setflags(write=False)
    return array


@dataclass(frozen=True)
class Workload:
    """Requests: arrival time (s), prompt length and output length (tokens, the first one made by prefill).

    cached_len (optional, default 0): the leading prompt tokens whose KV cache is already on the server (prefix
    caching, e.g. a shared system prompt); prefill computes only the other prompt_len - cached_len tokens, while
    decode still reads the whole prompt's cache. At least one prompt token must be new: cached_len < prompt_len.
    cache_load_s (optional, default 0): seconds to bring that cached prefix into HBM before prefill (a prefix kept
    in host DRAM, `prefix_cache`); it adds to the request's prefill.
    """

    arrival_s: np.ndarray
    prompt_len: np.ndarray
    output_len: np.ndarray
    cached_len: np.ndarray | None = None
    cache_load_s: np.ndarray | None = None

    def __post_init__(self):
        arrival = _float_array("arrival_s", self.arrival_s)
        prompt, output = np.asarray(self.prompt_len), np.asarray(self.output_len)
        if not (arrival.ndim == prompt.ndim == output.ndim == 1) or not (len(arrival) == len(prompt) == len(output)):
            raise ValueError(f"arrival_s, prompt_len and output_len must be 1-D of one length, got shapes "
                             f"{arrival.shape}, {prompt.shape}, {output.shape}")
        if len(arrival) == 0:
            raise ValueError("a workload needs at least one request")
        at_most("the number of requests", len(arrival), MAX_REQUESTS, "the simulator runs each one in Python")
        if not np.all(np.isfinite(arrival)) or np.any(arrival < 0):
            raise ValueError("arrival_s must be finite and non-negative")
        for name, lengths in (("prompt_len", prompt), ("output_len", output)):
            if not (np.issubdtype(lengths.dtype, np.integer) or np.issubdtype(lengths.dtype, np.floating)) or \
                    not np.all(np.isfinite(lengths)) or not np.all(np.mod(lengths, 1) == 0):
                raise ValueError(f"{name} must hold whole numbers of tokens, got dtype {lengths.dtype}")
            if np.any(lengths < 1):
                raise ValueError(f"{name} must be at least 1 token, got min {int(lengths.min())}")
            if np.any(lengths > MAX_REQUEST_TOKENS):
                raise ValueError(f"{name} holds {int(lengths.max())} tokens, more than any context window; every "
                                 f"length must be at most {MAX_REQUEST_TOKENS} (2**31 - 1)")
        if np.any(prompt.astype(object) + output.astype(object) > MAX_REQUEST_TOKENS):
            raise ValueError(f"prompt_len + output_len must be at most {MAX_REQUEST_TOKENS} tokens per request")
        object.__setattr__(self, "arrival_s", _readonly(arrival, float))
        object.__setattr__(self, "prompt_len", _readonly(prompt, np.int64))
        object.__setattr__(self, "output_len", _readonly(output, np.int64))
        cached = np.zeros(len(prompt), np.int64) if self.cached_len is None else np.asarray(self.cached_len)
        if cached.shape != prompt.shape:
            raise ValueError(f"cached_len must have one entry per request, got shape {cached.shape}")
        if not (np.issubdtype(cached.dtype, np.integer) or np.issubdtype(cached.dtype, np.floating)) or \
                not np.all(np.isfinite(cached)) or not np.all(np.mod(cached, 1) == 0):
            raise ValueError("cached_len must hold whole numbers of tokens")
        if np.any(cached < 0) or np.any(cached >= prompt):
            raise ValueError("cached_len must lie in [0, prompt_len - 1]: prefill needs at least one new token")
        object.__setattr__(self, "cached_len", _readonly(cached, np.int64))
        load = np.zeros(len(prompt)) if self.cache_load_s is None else _float_array("cache_load_s", self.cache_load_s)
        if load.shape != prompt.shape or not np.all(np.isfinite(load)) or np.any(load < 0):
            raise ValueError("cache_load_s must hold one finite, non-negative number of seconds per request")
        object.__setattr__(self, "cache_load_s", _readonly(load, float))

    @property
    def n_requests(self) -> int:
        return len(self.arrival_s)


def _lengths(spec, rng, n, name):
    """An int (every request), a (low, high) pair (uniform integers, both ends included) or f(rng, n) -> lengths."""
    if callable(spec):
        lengths = np.asarray(spec(rng, n))
        if lengths.shape != (n,):
            raise ValueError(f"{name}: the function gave shape {lengths.shape}, not one length per request ({n},)")
        return lengths
    if isinstance(spec, tuple) and len(spec) == 2:
        low, high = (positive_int(f"{name} bound", v) for v in spec)
        if low > high:
            raise ValueError(f"{name}=({low}, {high}): the low bound exceeds the high bound")
        return rng.integers(low, high + 1, size=n)
    return np.full(n, positive_int(name, spec))


def poisson_workload(rate_per_s: float, n_requests: int, prompt_len=1024, output_len=256, seed: int = 0,
                     shared_prefix_len: int = 0, shared_prefix_fraction: float = 0.0) -> Workload:
    """Poisson arrivals at `rate_per_s` (exponential gaps, numpy Generator seeded with `seed`).

    prompt_len and output_len: an int, a (low, high) range drawn uniformly, or a function (rng, n) -> lengths.
    Prefix caching: a random `shared_prefix_fraction` of the requests start with a shared prefix of
    `shared_prefix_len` tokens already cached (`Workload.cached_len`); a prompt no longer than the prefix reuses all
    but its last token. With the defaults (no sharing) the random stream, hence the workload, is unchanged.

    Defined in chapter 9, *Serving engines*.
    """
    try:
        positive("rate_per_s", rate_per_s)
    except ValueError as err:
        raise ValueError(f"rate_per_s must be a positive, finite number of requests per second ({err})") from None
    n = at_most("n_requests", positive_int("n_requests", n_requests), MAX_REQUESTS,
                "the simulator runs each one in Python")
    rng = np.random.default_rng(non_negative_int("seed", seed))
    try:
        probability("shared_prefix_fraction", shared_prefix_fraction)
    except ValueError as err:
        raise ValueError(f"shared_prefix_fraction must be a fraction of requests in [0, 1] ({err})") from None
    shared_prefix_len = non_negative_int("shared_prefix_len", shared_prefix_len)
    arrival = np.cumsum(rng.exponential(1.0 / rate_per_s, size=n))
    prompt, output = _lengths(prompt_len, rng, n, "prompt_len"), _lengths(output_len, rng, n, "output_len")
    cached = None
    if shared_prefix_fraction > 0 and shared_prefix_len > 0:
        hit = rng.random(n) < shared_prefix_fraction
        cached = np.where(hit, np.minimum(shared_prefix_len, np.asarray(prompt) - 1), 0)
    return Workload(arrival, prompt, output, cached)


def trace_workload(trace) -> Workload:
    """A workload from a list of (arrival_s, prompt_len, output_len) tuples."""
    rows = list(trace) if hasattr(trace, "__iter__") and not isinstance(trace, (str, bytes)) else []
    if not rows or any(not isinstance(row, (tuple, list)) or len(row) != 3 for row in rows):
        raise ValueError(f"trace must be a non-empty list of (arrival_s, prompt_len, output_len) tuples, got "
                         f"{trace!r}")
    arrival, prompt, output = zip(*rows)
    try:
        return Workload(_float_array("arrival_s", arrival), np.array(prompt), np.array(output))
    except ValueError as err:
        raise ValueError(f"trace: {err}") from None


# ---------------------------------------------------------------------------------------------------------------
# The result
# ---------------------------------------------------------------------------------------------------------------

def _percent(q) -> float:
    """A percentile rank in [0, 100]."""
    if not 0 <= positive("q", q, allow_zero=True) <= 100:
        raise ValueError(f"q must be a percentile in [0, 100] (50 for the median), got {q!r}")
    return q


@dataclass(frozen=True)
class SimulationResult:
    """Per-request times (s) of one simulation, and summaries.

    ttft_s = first token - arrival (the first token comes out of prefill); tpot_s = (finish - first token) /
    (output_len - 1), NaN for one-token outputs; start_s = when prefill began (or the request joined a batch).
    """

    engine: str
    n_chips: int  # all chips of all servers
    arrival_s: np.ndarray
    start_s: np.ndarray
    first_token_s: np.ndarray
    finish_s: np.ndarray
    output_len: np.ndarray
    generated_tokens: np.ndarray  # counted by the simulator, token by token
    total_tokens: int  # counted by the simulator, step by step
    ttft_s: np.ndarray
    tpot_s: np.ndarray

    @property
    def makespan_s(self) -> float:
        """From the first arrival to the last token."""
        return float(self.finish_s.max() - self.arrival_s.min())

    @property
    def throughput_per_chip(self) -> float:
        """Generated tokens per second per chip, over the makespan."""
        return self.total_tokens / (self.makespan_s * self.n_chips) if self.makespan_s > 0 else float("inf")

    def ttft_percentile(self, q: float) -> float:
        return float(np.nanpercentile(self.ttft_s, _percent(q)))

    def tpot_percentile(self, q: float) -> float:
        q = _percent(q)
        return float(np.nanpercentile(self.tpot_s, q)) if np.any(np.isfinite(self.tpot_s)) else float("nan")

    @property
    def p50_ttft_s(self) -> float:
        return self.ttft_percentile(50)

    @property
    def p99_ttft_s(self) -> float:
        return self.ttft_percentile(99)

    @property
    def p50_tpot_s(self) -> float:
        return self.tpot_percentile(50)

    @property
    def p99_tpot_s(self) -> float:
        return self.tpot_percentile(99)

    def queue_length(self):
        """(times, lengths): requests that have arrived but not started, as a step function of time."""
        times = np.concatenate([self.arrival_s, self.start_s])
        delta = np.concatenate([np.ones(len(self.arrival_s)), -np.ones(len(self.start_s))])
        order = np.argsort(times, kind="stable")
        times, lengths = times[order], np.cumsum(delta[order]).astype(int)
        last = np.append(times[1:] != times[:-1], True)  # the length once every event at that time has happened
        return times[last], lengths[last]

    @property
    def max_queue_length(self) -> int:
        return int(self.queue_length()[1].max())

    @property
    def mean_queue_length(self) -> float:
        """Time-averaged queue length from the first arrival to the last start."""
        times, lengths = self.queue_length()
        span = times[-1] - times[0]
        return float(np.sum(lengths[:-1] * np.diff(times)) / span) if span > 0 else 0.0


# ---------------------------------------------------------------------------------------------------------------
# Step costs, from inference.decode_step_time and prefill_latency
# ---------------------------------------------------------------------------------------------------------------

class _Costs:
    """Step prices of one server configuration, tabulated once per simulation."""

    def __init__(self, cfg: ServingConfig):
        self.cfg = cfg
        self.model, self.chip = get_model(cfg.model), get_chip(cfg.chip)
        dtypes = (cfg.weight_dtype, cfg.kv_dtype, cfg.compute_dtype)
        steps = [decode_step_time(self.model, self.chip, cfg.n_chips, b, 0, *dtypes) for b in range(cfg.max_batch + 1)]
        self.base_s = np.array([s.total_s for s in steps])  # max(weight read, matmul FLOPs) at batch b
        self.decode_compute_s = np.array([s.compute_s for s in steps])
        self.weight_s = steps[0].weight_s
        self.kv_s_per_token = decode_step_time(self.model, self.chip, cfg.n_chips, 1, 1, *dtypes).kv_s
        self.window = self.model.sliding_window
        self._prefill, self._prefill_compute = {}, {}

    def prefill_s(self, tokens: int, batch: int = 1) -> float:
        key = (int(tokens), int(batch))
        if key not in self._prefill:
            c = self.cfg
            self._prefill[key] = prefill_latency(self.model, self.chip, c.n_chips, key[0], c.mfu, key[1],
                                                 c.weight_dtype, c.compute_dtype)
        return self._prefill[key]

    def prefill_compute_s(self, tokens: int) -> float:
        """FLOP time of `tokens` prompt tokens at the configured MFU (the chunked engine adds the weight read)."""
        key = int(tokens)
        if key not in self._prefill_compute:
            c = self.cfg
            self._prefill_compute[key] = prefill_time(self.model, self.chip, c.n_chips, key, c.mfu, 1,
                                                      c.compute_dtype)
        return self._prefill_compute[key]

    @property
    def max_batch(self) -> int:
        return self.cfg.max_batch

    def prefill_budget(self, decode_batch: int) -> int:
        """Prompt tokens the chunked engine adds to a step: `prefill_chunk_tokens`, whatever the decodes."""
        return self.cfg.prefill_chunk_tokens

    def mixed_step_s(self, batch, prefix_tokens: float, prefill_tokens: int) -> float:
        """A chunked step: the batch's decodes plus `prefill_tokens` prompt tokens that attend to `prefix_tokens`
        cached ones: the KV reads, then the weights or the FLOPs, whichever is longer."""
        kv_s = self.kv_s_per_token * (self.kv_tokens(batch) + prefix_tokens)
        flops_s = self.decode_compute_s[len(batch)] + self.prefill_compute_s(prefill_tokens)
        return kv_s + max(self.weight_s, flops_s)

    def kv_tokens(self, batch) -> float:
        """Cached tokens one step of the batch reads (a sliding window caps each sequence)."""
        if self.window is None:
            return float(batch.context_sum)
        return float(sum(min(c, self.window) for c in batch.contexts()))

    def decode_cumulative_s(self, batch, n_steps: int) -> np.ndarray:
        """End times of the next n_steps decode steps of a fixed batch, each context growing by one per step."""
        b = len(batch)
        i = np.arange(n_steps, dtype=float)
        if self.window is None:
            kv = batch.context_sum + b * i
        else:  # sum_j min(c_j + i, w): sequence j saturates after w - c_j steps
            c = np.asarray(batch.contexts(), dtype=float)
            order = np.argsort(self.window - c)
            saturate_at = np.maximum(self.window - c[order], 0.0)
            c_prefix = np.concatenate([[0.0], np.cumsum(c[order])])
            k = np.searchsorted(saturate_at, i, side="right")  # sequences already at the window
            kv = self.window * k + (c_prefix[-1] - c_prefix[k]) + i * (b - k)
        return np.cumsum(self.base_s[b] + self.kv_s_per_token * kv)


class _EngineCosts:
    """Step prices of a `load.Engine`: every step from its `step_s(decode batch, prompt tokens)` at the workload's
    mean context (the analytic model's own step times, so the two differ only in how they queue), a token budget
    per step shared by the decodes and the prompts (vLLM's max_num_batched_tokens)."""

    window = None  # the step model prices the mean context; chunks' prefixes are in it

    def __init__(self, engine):
        self.engine = engine
        self.max_batch = engine.max_batch

    def prefill_budget(self, decode_batch: int):
        budget = self.engine.token_budget
        return float("inf") if budget is None else max(0, budget - decode_batch)

    def mixed_step_s(self, batch, prefix_tokens: float, prefill_tokens: int) -> float:
        return self.engine.step(len(batch), int(prefill_tokens))

    def decode_cumulative_s(self, batch, n_steps: int) -> np.ndarray:
        return self.engine.step(len(batch), 0) * np.arange(1, n_steps + 1, dtype=float)


class _Record:
    def __init__(self, n, on_finish=None):
        self.on_finish = on_finish  # called with the time each request finishes (a closed loop's next arrival)
        self.start = np.full(n, np.nan)
        self.first = np.full(n, np.nan)
        self.finish = np.full(n, np.nan)
        self.generated = np.zeros(n, dtype=np.int64)
        self.total = 0

    def first_token(self, i, t):
        """Request i's prefill finished at t: its first token exists (prefill makes it)."""
        self.first[i] = t
        self.generated[i] += 1
        self.total += 1

    def done(self, i, t):
        """Request i made its last token at t."""
        self.finish[i] = t
        if self.on_finish is not None:
            self.on_finish(t)


class _Batch:
    """The running decode batch. Each step adds one token to every context, so contexts are stored as
    (context - clock) with `clock` the batch's step count, and finishing times as clock values in a heap."""

    def __init__(self):
        self.clock = 0
        self.finish_heap = []  # (clock at which the sequence has made its last token, id)
        self.offset = {}  # id -> context - clock
        self.joined = {}  # id -> clock when it joined
        self.offset_sum = 0

    def __len__(self):
        return len(self.offset)

    def join(self, i, prompt_len, output_len, t, rec):
        if output_len <= 1:  # prefill made the only token
            rec.done(i, t)
            return
        self.offset[i] = prompt_len + 1 - self.clock  # the first decode step reads the prompt and its own token
        self.offset_sum += self.offset[i]
        self.joined[i] = self.clock
        heapq.heappush(self.finish_heap, (self.clock + output_len - 1, i))

    @property
    def min_remaining(self) -> int:
        return self.finish_heap[0][0] - self.clock

    @property
    def context_sum(self) -> int:
        return self.offset_sum + len(self.offset) * self.clock

    def contexts(self) -> list:
        return [o + self.clock for o in self.offset.values()]

    def advance(self, steps, t, rec):
        """Every sequence makes `steps` tokens; those that are done leave at time t."""
        rec.total += steps * len(self.offset)
        self.clock += steps
        while self.finish_heap and self.finish_heap[0][0] == self.clock:
            _, i = heapq.heappop(self.finish_heap)
            rec.done(i, t)
            rec.generated[i] += self.clock - self.joined.pop(i)
            self.offset_sum -= self.offset.pop(i)


def _decode_run(costs, batch, t, next_ready, rec):
    """Decode until a sequence finishes or, when next_ready is given, until the first step ending after it."""
    n_max = batch.min_remaining
    cum = costs.decode_cumulative_s(batch, n_max)
    steps = n_max
    if next_ready is not None:
        steps = min(n_max, int(np.searchsorted(cum, next_ready - t, side="left")) + 1)
    t += float(cum[steps - 1])
    batch.advance(steps, t, rec)
    return t


# ---------------------------------------------------------------------------------------------------------------
# Engines: each simulates one server over the requests it is given (ids in the order they become ready)
# ---------------------------------------------------------------------------------------------------------------

def _naive_server(costs, ids, ready, prompt, output, rec, cached, load):
    t, q, n, cap = 0.0, 0, len(ids), costs.max_batch
    while q < n:
        t = max(t, ready[ids[q]])
        group = []
        while q < n and len(group) < cap and ready[ids[q]] <= t:
            group.append(ids[q])
            q += 1
        rec.start[group] = t
        t += max(load[i] for i in group)  # cached prefixes brought in from host memory
        t += costs.prefill_s(max(prompt[i] - cached[i] for i in group), len(group))  # padded to the longest prompt
        rec.first[group] = t
        rec.generated[group] += 1
        rec.total += len(group)
        batch = _Batch()
        for i in group:
            batch.join(i, prompt[i], output[i], t, rec)
        while len(batch):
            t = _decode_run(costs, batch, t, None, rec)


def _continuous_server(costs, ids, ready, prompt, output, rec, cached, load, prefill=True):
    """Interleaved engine; with prefill=False, the decode side of a disaggregated pair (KV arrives ready)."""
    t, q, n, cap = 0.0, 0, len(ids), costs.max_batch
    batch = _Batch()
    while q < n or len(batch):
        if q < n and len(batch) < cap and ready[ids[q]] <= t:
            i = ids[q]
            q += 1
            if prefill:  # batch-1 prefill; the whole decode batch waits for it
                rec.start[i] = t
                t += load[i] + costs.prefill_s(prompt[i] - cached[i])  # a cached prefix needs no prefill
                rec.first_token(i, t)
            batch.join(i, prompt[i], output[i], t, rec)
        elif len(batch):
            next_ready = ready[ids[q]] if q < n and len(batch) < cap else None
            t = _decode_run(costs, batch, t, next_ready, rec)
        else:
            t = ready[ids[q]]


def _chunked_server(costs, ids, ready, prompt, output, rec, cached, load, prefill_first=False):
    t, q, n = 0.0, 0, len(ids)
    cap = costs.max_batch
    batch = _Batch()
    filling = []  # [id, prompt tokens already prefilled], first come first served
    while q < n or len(batch) or filling:
        while q < n and len(batch) + len(filling) < cap and ready[ids[q]] <= t:
            rec.start[ids[q]] = t
            t += load[ids[q]]  # bringing a host-memory prefix into HBM stalls the step that admits it
            filling.append([ids[q], cached[ids[q]]])  # a cached prefix counts as already prefilled
            q += 1
        budget = costs.prefill_budget(0 if prefill_first else len(batch))
        if filling and budget > 0:
            prefilled, prefix, pieces = 0, 0, []
            for entry in filling:
                if budget == 0:
                    break
                take = min(budget, prompt[entry[0]] - entry[1])
                # the chunk attends to the tokens of its sequence already cached (at most a window of them)
                prefix += entry[1] if costs.window is None else min(entry[1], costs.window)
                pieces.append((entry, take))
                budget -= take
                prefilled += take
            if prefill_first:  # the prompts' step alone: the decodes wait
                t += costs.mixed_step_s(_Batch(), prefix, prefilled)
            else:
                t += costs.mixed_step_s(batch, prefix, prefilled)
                if len(batch):
                    batch.advance(1, t, rec)
            for entry, take in pieces:
                entry[1] += take
                if entry[1] == prompt[entry[0]]:
                    i = entry[0]
                    rec.first_token(i, t)
                    batch.join(i, prompt[i], output[i], t, rec)
            filling = [entry for entry in filling if entry[1] < prompt[entry[0]]]
        elif len(batch):
            next_ready = ready[ids[q]] if q < n and len(batch) + len(filling) < cap else None
            if filling:  # the decodes take the whole budget: one step, then the budget is looked at again
                next_ready = t
            t = _decode_run(costs, batch, t, next_ready, rec)
        else:
            t = ready[ids[q]]


def _prefill_pool(costs, n_servers, order, arrival, prompt, rec, cached, load):
    """R_p batch-1 prefill servers fed first come, first served; returns when each prefill finished."""
    free = [(0.0, s) for s in range(min(n_servers, len(order)))]  # more servers than requests: each gets its own
    done = np.empty(len(arrival))
    for i in order:
        free_at, server = heapq.heappop(free)
        start = max(free_at, arrival[i])
        rec.start[i] = start
        done[i] = start + load[i] + costs.prefill_s(prompt[i] - cached[i])
        rec.first_token(i, done[i])
        heapq.heappush(free, (done[i], server))
    return done


def _checked(config, workload) -> None:
    """The checks every engine makes: a ServingConfig, a Workload, and every request within max_context_len."""
    if not isinstance(config, ServingConfig):
        raise ValueError(f"config must be a ServingConfig, got {type(config).__name__}")
    if not isinstance(workload, Workload):
        raise ValueError(f"workload must be a Workload (see poisson_workload, trace_workload), got "
                         f"{type(workload).__name__}")
    longest = int((workload.prompt_len + workload.output_len).max())
    if longest > config.max_context_len:
        raise ValueError(f"a request needs {longest} tokens of context but max_context_len="
                         f"{config.max_context_len}; raise max_context_len (if it still fits) or shorten requests")


def _columns(workload: Workload) -> tuple:
    """The per-request lists the servers read (prompt, output, cached tokens, load seconds) and the arrival order."""
    return (workload.prompt_len.tolist(), workload.output_len.tolist(), workload.cached_len.tolist(),
            workload.cache_load_s.tolist(), np.argsort(workload.arrival_s, kind="stable").tolist())


def _result(engine: str, n_chips: int, workload: Workload, rec: _Record) -> SimulationResult:
    """The timings `rec` recorded, as the result of one run of `engine` on n_chips."""
    arrival = workload.arrival_s
    out = workload.output_len
    # every request has finished, and the divisor is at least 1: nothing here divides by zero or makes a NaN
    tpot = np.where(out > 1, (rec.finish - rec.first) / np.maximum(out - 1, 1), np.nan)
    return SimulationResult(
        engine=engine, n_chips=n_chips, arrival_s=_readonly(arrival, float), start_s=_readonly(rec.start, float),
        first_token_s=_readonly(rec.first, float), finish_s=_readonly(rec.finish, float),
        output_len=_readonly(out, np.int64), generated_tokens=_readonly(rec.generated, np.int64),
        total_tokens=int(rec.total), ttft_s=_readonly(rec.first - arrival, float), tpot_s=_readonly(tpot, float))


def simulate(config: ServingConfig, workload: Workload, engine: str = "interleaved",
             n_servers: int | None = None) -> SimulationResult:
    """Run `workload` through a co-located engine and time every request (the engines: module docstring).

    "naive", "interleaved" and "chunked" run `n_servers` copies of `config` (default 1); requests are dealt to them in
    turn (round robin, in arrival order). `engine="disaggregated"` is `simulate_disaggregated` with one prefill and
    one decode server; that function takes the server counts, the transfer bandwidth and a prefill configuration.
    Prefix caching: a request's `workload.cached_len` prompt tokens skip prefill (their cache is already there, after
    `workload.cache_load_s` to bring it from host memory). Deterministic: the same inputs give the same result.

    Defined in chapter 9, *Serving engines*.
    """
    choice("engine", engine, ENGINES)
    if engine == "disaggregated":
        if n_servers is not None:
            raise ValueError("n_servers applies to the co-located engines (naive, interleaved, chunked); the "
                             "'disaggregated' engine takes n_prefill_servers and n_decode_servers: call "
                             "simulate_disaggregated(config, workload, n_prefill_servers, n_decode_servers)")
        return simulate_disaggregated(config, workload)
    _checked(config, workload)
    n_servers = positive_int("n_servers", 1 if n_servers is None else n_servers)
    prompt, output, cached, load, order = _columns(workload)
    rec, costs = _Record(workload.n_requests), _Costs(config)
    server = {"naive": _naive_server, "interleaved": _continuous_server, "chunked": _chunked_server}[engine]
    ready = workload.arrival_s.tolist()
    for s in range(min(n_servers, len(order))):  # servers past the requests get none
        server(costs, order[s::n_servers], ready, prompt, output, rec, cached, load)
    return _result(engine, n_servers * config.n_chips, workload, rec)


def simulate_disaggregated(config: ServingConfig, workload: Workload, n_prefill_servers: int = 1,
                           n_decode_servers: int = 1, transfer_bandwidth: float | None = None,
                           prefill_config: ServingConfig | None = None) -> SimulationResult:
    """Run `workload` through the disaggregated engine: `n_prefill_servers` prefill servers (`prefill_config`, default
    `config`) fed first come, first served, and `n_decode_servers` decode servers of `config` dealt to in turn.

    Each request's KV cache takes `kv_transfer_time` (bandwidth `transfer_bandwidth`, default
    `default_transfer_bandwidth` of the prefill server) to move, and the prefill server does not wait for it.
    Prefix caching as in `simulate`; the whole prompt's cache is still shipped to the decode server. Deterministic.

    Defined in chapter 9, *Serving engines*.
    """
    _checked(config, workload)
    n_prefill_servers = positive_int("n_prefill_servers", n_prefill_servers)
    n_decode_servers = positive_int("n_decode_servers", n_decode_servers)
    pcfg = config if prefill_config is None else prefill_config
    if not isinstance(pcfg, ServingConfig):
        raise ValueError(f"prefill_config must be a ServingConfig, got {type(pcfg).__name__}")
    costs = _Costs(config)
    if get_model(pcfg.model) != costs.model:
        raise ValueError("prefill_config and config must serve the same model")
    if transfer_bandwidth is None:
        transfer_bandwidth = default_transfer_bandwidth(pcfg.chip, pcfg.n_chips)
    positive("transfer_bandwidth", transfer_bandwidth)
    prompt, output, cached, load, order = _columns(workload)
    rec = _Record(workload.n_requests)
    prefill_done = _prefill_pool(_Costs(pcfg), n_prefill_servers, order, workload.arrival_s, prompt, rec, cached,
                                 load)
    lengths, which = np.unique(workload.prompt_len, return_inverse=True)
    kv_bytes = np.array([kv_transfer_bytes(costs.model, int(p), config.kv_dtype) for p in lengths])[which]
    ready = (prefill_done + kv_bytes / transfer_bandwidth).tolist()
    decode_order = np.argsort(ready, kind="stable").tolist()
    for s in range(min(n_decode_servers, len(decode_order))):  # servers past the requests get none
        _continuous_server(costs, decode_order[s::n_decode_servers], ready, prompt, output, rec, cached, load,
                           prefill=False)
    return _result("disaggregated", n_prefill_servers * pcfg.n_chips + n_decode_servers * config.n_chips, workload,
                   rec)


# ---------------------------------------------------------------------------------------------------------------
# The load model's engine, step by step (`load.Engine`): the check on its queueing formulas
# ---------------------------------------------------------------------------------------------------------------

def _engine_run(engine, n_requests: int):
    if not isinstance(engine, Engine):
        raise ValueError(f"engine must be a load.Engine (load.deployment_engine builds one for a deployment), got "
                         f"{engine!r}")
    return at_most("n_requests", positive_int("n_requests", n_requests), MAX_REQUESTS,
                   "the simulator runs each one in Python")


def simulate_open_loop(engine, request_rate: float, n_requests: int, seed: int = 0) -> SimulationResult:
    """One replica of `engine` (a `load.Engine`) serving `n_requests` requests of its input and output lengths that
    arrive as a Poisson process at `request_rate` per second (`poisson_workload`, seeded), run step by step with
    the chunked engine: every step decodes the running sequences and fills what the token budget leaves with
    prompts, first come first served, at most `engine.max_batch` sequences admitted. Steps are priced by the
    engine's own step-time model, so this checks `load`'s queueing formulas and nothing else. A request reaches the
    engine `engine.request_s` after it is sent (the front end); its TTFT counts from the sending.

    Defined in chapter 9, *Serving engines*.
    """
    n = _engine_run(engine, n_requests)
    workload = poisson_workload(positive("request_rate", request_rate), n, engine.input_len, engine.output_len, seed)
    prompt, output, cached, load, order = _columns(workload)
    rec = _Record(n)
    at_engine = [t + engine.request_s for t in workload.arrival_s.tolist()]  # past the front end
    _chunked_server(_EngineCosts(engine), order, at_engine, prompt, output, rec, cached, load)
    return _result("chunked", 1, workload, rec)


def simulate_closed_loop(engine, concurrency: int, n_requests: int) -> SimulationResult:
    """One replica of `engine` (a `load.Engine`) serving `concurrency` clients, each sending its next request the
    moment its last one ends, until `n_requests` have been sent (as `simulate_open_loop` otherwise). Arrival times
    are those moments. The clients' first requests make 2, ..., O output tokens, spread evenly, so the clients start
    out of step as in a benchmark that has been running (identical requests sent at once would stay in lockstep);
    leave the first `concurrency` requests out of a steady-state statistic. Deterministic."""
    return _closed_loop(engine, concurrency, n_requests, lambda k, clients, o: 2 + (k * (o - 2)) // clients)


def simulate_benchmark(engine, concurrency: int, n_requests: int, schedule: str = "mixed") -> SimulationResult:
    """What a closed-loop benchmark of identical requests measures on one replica of `engine` (a `load.Engine`):
    its `concurrency` clients all send their first request at t = 0, as `vllm bench serve --max-concurrency` and
    genai-perf start them, and each sends its next the moment its last one ends, until `n_requests` have been sent.
    The first requests are a burst (`simulate_burst`); the loop settles after them. Every request counts, the
    first ones included, as in the benchmark's own statistics. `schedule`: how each step is shared (`SCHEDULES`).
    Mixed, the clients drift apart when a burst's prompts take many steps of a request's round, and stay in waves
    when they take few (the first to start decode through the slower steps and come back with the others);
    prefill-first keeps clients of identical requests in step. Deterministic."""
    return _closed_loop(engine, concurrency, n_requests, lambda k, clients, o: o, _prefill_first(schedule))


def _closed_loop(engine, concurrency: int, n_requests: int, first_output, prefill_first=False) -> SimulationResult:
    """A closed loop of `concurrency` clients on one replica of `engine` until `n_requests` have been sent, every
    client sending its first request at t = 0; the k-th of them makes first_output(k, clients, O) output tokens, every
    later request the engine's output_len O."""
    n = _engine_run(engine, n_requests)
    clients = at_most("concurrency", positive_int("concurrency", concurrency), n,
                      "each client sends at least one of the n_requests")
    output = [engine.output_len] * n
    for k in range(clients):
        output[k] = first_output(k, clients, engine.output_len)
    front = engine.request_s  # a request reaches the engine this long after its client sends it
    ready = [0.0] * clients + [float("inf")] * (n - clients)
    at_engine = [front] * clients + [float("inf")] * (n - clients)
    issued = [clients]

    def next_request(t):
        if issued[0] < n:
            ready[issued[0]], at_engine[issued[0]] = t, t + front
            issued[0] += 1

    rec = _Record(n, on_finish=next_request)
    prompt = [engine.input_len] * n
    _chunked_server(_EngineCosts(engine), list(range(n)), at_engine, prompt, output, rec, [0] * n, [0.0] * n,
                    prefill_first)
    return _result("chunked", 1, Workload(np.array(ready), np.array(prompt), np.array(output)), rec)


def simulate_burst(engine, n_requests: int, schedule: str = "mixed") -> SimulationResult:
    """`n_requests` requests of `engine`'s lengths sent all at once, at t = 0, to one replica of `engine` (a
    `load.Engine`): a benchmark run with no cap on concurrency and an infinite request rate (vLLM's `bench serve`
    default), or an offline batch job. They reach the engine `engine.request_s` later (the front end); the chunked
    engine admits them first come first served, up to `engine.max_batch` at once, and fills each step's token budget
    with their prompts, as `simulate_open_loop` does ("mixed"), or runs the waiting prompts' steps before any decode
    ("prefill-first"; `SCHEDULES`). TTFT counts from t = 0. Deterministic."""
    prefill_first = _prefill_first(schedule)
    n = _engine_run(engine, n_requests)
    prompt, output = [engine.input_len] * n, [engine.output_len] * n
    rec = _Record(n)
    _chunked_server(_EngineCosts(engine), list(range(n)), [engine.request_s] * n, prompt, output, rec, [0] * n,
                    [0.0] * n, prefill_first)
    return _result("chunked", 1, Workload(np.zeros(n), np.array(prompt), np.array(output)), rec)


def burst_estimate(deployment, input_len: int, output_len: int, requests: int, efficiency="typical",
                   token_budget: int | None = TOKEN_BUDGET, schedule: str = "mixed") -> LoadEstimate:
    """`requests` requests of `input_len` prompt and `output_len` output tokens sent at once to `deployment`, spread
    over its replicas as evenly as they divide, each replica run step by step (`simulate_burst`, its steps priced by
    `load.deployment_engine`): mean and p99 TTFT and TPOT over the requests, output tokens/s and requests/s over the
    whole run (from t = 0 to the last token), requests in flight on average (Little's law over the run), and `queue_s`
    the mean first token's wait behind the others (its TTFT less the first one's). The p99s are at least the means.

    The bound, every resource at peak: the k-th first token needs k prompts prefilled, at least one prefill of
    k * input_len tokens at peak (`Engine.step(0, k * input_len)` of the bound's engine, summed from below over a
    grid of k), with no front end; a TPOT at least a decode step of one sequence at peak; output tokens/s at most the
    bound's saturation rate times `output_len`. `efficiency` and `token_budget` as in `load.load_estimate`;
    `schedule` as in `simulate_burst`.

    Defined in chapter 9, *Serving engines*.
    """
    n = _requests(requests)
    _prefill_first(schedule)  # checked before the engines are priced
    engine, peak = engine_and_bound(deployment, input_len, output_len, efficiency, token_budget)
    runs = [(count, size, size, simulate_burst(engine, size, schedule))
            for count, size in spread(n, deployment.replicas)]
    return _run_estimate(engine, peak, deployment.replicas, runs, concurrency=None, requests=n, schedule=schedule)


def benchmark_estimate(deployment, input_len: int, output_len: int, concurrency: int, requests: int,
                       efficiency="typical", token_budget: int | None = TOKEN_BUDGET,
                       schedule: str = "mixed") -> LoadEstimate:
    """A closed-loop benchmark of `requests` identical requests from `concurrency` clients on `deployment`, the clients
    starting together (`simulate_benchmark`): every request counted, the first burst included, as the benchmark's
    own statistics count them. The clients are spread over the replicas as evenly as they divide, and the requests
    with them (each replica's share in proportion to its clients, at least one each). Reported as `burst_estimate`
    reports a burst: means and p99 over the requests, rates over the run (from t = 0 to the last token), requests in
    flight by Little's law over the run, `queue_s` the mean TTFT less the shortest.

    `load_estimate`'s closed loop prices the steady state whose clients have drifted apart. A run's first
    `concurrency` requests arrive together instead, and with few requests per client, or prompts that take the
    token budget many steps, they set the p99 of TTFT and part of its mean (chapter 9 reads one).

    `schedule` (`SCHEDULES`): "mixed" shares each step between the decodes and the prompts, and the clients drift
    apart unless a burst's prompts take only a few steps of a round (`simulate_benchmark`); "prefill-first"
    (SGLang's default, vLLM's V0) runs waiting prompts alone while the decodes wait, so
    clients of identical requests arrive, prefill, decode and finish together round after round, and each first
    token waits for the others' prompts (chapter 9 reads dstack's sweep so).

    The bound: each replica's first c first tokens are those of a burst of c (`burst_estimate`), every later one at
    least one prompt's prefill at peak; TPOT and output tokens/s as for a burst.

    Defined in chapter 9, *Serving engines*.
    """
    n = _requests(requests)
    clients = positive_int("concurrency", concurrency)
    _prefill_first(schedule)  # checked before the engines are priced
    if n < clients:
        raise ValueError(f"requests={n:,} is fewer than the {clients:,} clients: each client sends at least one; "
                         f"give at least {clients:,} requests, or fewer clients")
    engine, peak = engine_and_bound(deployment, input_len, output_len, efficiency, token_budget)
    runs = []
    for count, size in spread(clients, deployment.replicas):
        sent = max(size, round(n * size / clients))
        runs.append((count, size, sent, simulate_benchmark(engine, size, sent, schedule)))
    return _run_estimate(engine, peak, deployment.replicas, runs, concurrency=clients, requests=n,
                         schedule=schedule)


def _requests(requests) -> int:
    """A run's request count, checked: a positive integer the simulator can step through in Python."""
    return at_most("requests", positive_int("requests", requests), MAX_REQUESTS,
                   "the simulator runs each one in Python")


def _prefill_first(schedule: str) -> bool:
    """Whether `schedule` (one of `SCHEDULES`, else ValueError) runs waiting prompts in steps of their own."""
    return choice("schedule", schedule, SCHEDULES) == "prefill-first"


def _run_estimate(engine, peak, replicas: int, runs: list, concurrency, requests: int, schedule: str) -> LoadEstimate:
    """A `LoadEstimate` over simulated runs, `runs` holding (replicas alike, requests that start together, requests
    sent, SimulationResult) per kind of replica; the bound's TTFT is a burst's for those that start together and one
    prompt's prefill at peak for each later one."""
    def tiled(name):
        return np.concatenate([np.tile(getattr(run, name), count) for count, _, _, run in runs])

    ttft, tpot, finish, sent = tiled("ttft_s"), tiled("tpot_s"), tiled("finish_s"), tiled("arrival_s")
    decoding = sum(count * float(np.sum(run.finish_s - run.first_token_s)) for count, _, _, run in runs)
    makespan = float(finish.max())
    total = sum(count * m for count, _, m, _ in runs)
    ttft_mean, tpot_mean = float(ttft.mean()), float(tpot.mean())
    alone = peak.step(0, peak.input_len)
    first = sum(count * (c * _first_tokens_at_peak(peak, c) + (m - c) * alone) for count, c, m, _ in runs) / total
    bound = LoadBound(ttft_s=first, tpot_s=peak.step(1, 0),
                      output_tokens_per_s=peak.saturation_rate() * replicas * engine.output_len)
    return LoadEstimate(concurrency=concurrency, request_rate=total / makespan, ttft_s=ttft_mean, tpot_s=tpot_mean,
                        ttft_p99_s=max(ttft_mean, float(np.percentile(ttft, 99))),
                        tpot_p99_s=max(tpot_mean, float(np.percentile(tpot, 99))),
                        output_tokens_per_s=total * engine.output_len / makespan,
                        requests_in_flight=float(np.sum(finish - sent)) / makespan,
                        queue_s=max(0.0, ttft_mean - float(ttft.min())),
                        decode_batch=decoding / makespan / replicas,
                        max_batch=engine.batch_limit, saturation_rate=engine.saturation_rate() * replicas,
                        token_budget=engine.token_budget, bound=bound, front_end_s=engine.request_s,
                        requests=requests, schedule=schedule)


def _first_tokens_at_peak(peak, n: int) -> float:
    """A lower bound on the mean of n first tokens: (1/n) sum over k of peak.step(0, k T_0), each term read at the
    grid point at or below k (the step grows with its tokens), the grid every k up to 64, then 64 points."""
    points = sorted({*range(1, min(n, 64) + 1), *np.linspace(1, n, 64).astype(int).tolist(), n})
    total = sum((high - low) * peak.step(0, low * peak.input_len) for low, high in zip(points, points[1:]))
    return (total + peak.step(0, n * peak.input_len)) / n
