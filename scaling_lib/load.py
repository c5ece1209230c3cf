"""Latency under load: TTFT and TPOT when requests arrive at a rate, or from a fixed number of clients.

One replica runs continuous batching with chunked prefill (vLLM, SGLang, TensorRT-LLM): every step decodes one token
for each running sequence and spends what is left of a token budget Q per step (decode tokens included) on waiting
prompts, first come first served. A request waits in a queue while the batch is full (the engine's cap on
sequences, or the KV memory); once admitted, its prompt goes through in chunks, and the step that finishes the prompt
makes its first token. So

    TTFT = front end + queueing + the rest of the step running when it arrives + prefill chunks (the last makes the
           first token)
    TPOT = the mean step at the batch a running request sees

The front end (`Efficiency.request_s`, f) is a served request's time outside every step: the HTTP request, its
tokenization and admission, its first token's stream back. It adds to each TTFT and, in a closed loop, to each
client's cycle; the engine's steps do not see it.

Symbols as in book/notation.md: T_0 prompt tokens and T_gen output tokens per request (the first from the prefill),
B the decode batch, B_max the largest, Q the token budget, lambda a rate of requests, U clients, nu prompts arriving
per step, T_step(B) the mean step at batch B. Every step is priced by a step-time model step_s(B, prompt tokens):
seconds of one step of one replica at the workload's mean context T_0 + T_gen / 2 (`estimate.step_estimate` behind
`load_estimate`).

- **The steady state at batch B.** nu = B / (T_gen - 1) requests finish per step and as many start. Prompts arrive
  whole, not spread over the steps: arriving Poisson, they leave a share pi = 1 - e^-nu of the steps carrying
  prompt tokens, T_0 nu / (1 - e^-nu) of them on average (at most Q - B), so T_step(B) = (1 - pi) step_s(B, 0) +
  pi step_s(B, that many): a lone prompt cannot hide under the weight read the way an even spread of its tokens
  would. The replica serves lambda(B) = B / ((T_gen - 1) T_step(B)) requests/s (Little's law on the decode phase).
- **The saturation rate** is lambda at B_max (memory and the engine's cap, `estimate.max_batch`, and what the budget
  carries, B (1 + T_0 / (T_gen - 1)) <= Q): lambda_sat = B_max / ((T_gen - 1) T_step(B_max)); where the step is
  linear in the prompt tokens near B_max it equals the offline throughput over T_gen (`estimate.offline_estimate`).
  Arrivals at or above it make the queue grow without bound: `load_estimate` then answers with what the replica
  serves (lambda_sat at B_max, TPOT = T_step(B_max)) and an infinite TTFT, queue and requests in flight
  (`Engine.overloaded`); at or above the bound's saturation rate no engine keeps up, and it refuses.
- **Open loop** (Poisson arrivals at lambda per replica, MLPerf's Server scenario). The number of requests in the
  replica is a birth-death chain: arrivals at lambda, departures at lambda(B) with B of them running, lambda_sat
  beyond B_max, where arrivals queue. Its stationary distribution, P(B) ~ prod_{B' <= B} lambda / lambda(B'), holds
  both limits: a Poisson occupancy while the step barely grows with the batch (bandwidth-bound, M/G/infinity) and
  an M/M/1-like one when it grows in proportion (compute-bound). TPOT = the mean of T_step(B + 1) over it: it
  levels off at T_step(B_max) at saturation. A request that finds B_max running waits for a slot: given a wait,
  exponential of mean 1 / (2 (lambda_sat - lambda)) (M/M/1's, halved by the Allen-Cunneen factor (1 + c_s^2) / 2
  for a deterministic service), which diverges as lambda -> lambda_sat: TTFT explodes while TPOT does not. Once
  admitted, a prompt lands in a running step (long ones, which carry prompts, in proportion to their length),
  shares its next step with the prompts that arrived during the same one (Poisson, each adding a prompt's cost),
  waits in an M/D/1 queue for the budget the decodes leave (Pollaczek-Khinchine: rho s / (2 (1 - rho)), rho the
  budget's utilisation, s one prompt's seconds of it), and takes ceil(T_0 / (Q - B)) chunk steps.
- **Closed loop** (U clients, each sending its next request when its last one ends, zero think time: genai-perf's
  and vLLM's `--max-concurrency`). Little's law fixes the throughput, lambda = U / (TTFT + (T_gen - 1) TPOT).
  While the U requests fit, B = U (T_gen - 1) TPOT / (TTFT + (T_gen - 1) TPOT) (a fixed point); past B_max the
  batch stays there, lambda = lambda_sat, and the rest queue: TTFT = U / lambda_sat - (T_gen - 1) T_step(B_max)
  grows linearly with U. Requests arrive as others finish, at the end of a step (no step to wait out); past a front
  end they reach the engine mid-step, as in an open loop.
- **p99.** TTFT: the 99th percentile of the mixture over the occupancy of (the residual step, uniform on its
  length) + (the two waits, each an atom at zero and an exponential tail) + the chunks, solved in closed form and by
  bisection; where waits are rarer than 1 in 100 it would sit below the mean, and the mean is reported. TPOT: a
  request averages T_gen - 1 steps; it starts at the batch it finds and its batch drifts back towards the mean over
  its life (two thirds of the variance of an M/G/infinity occupancy survive averaging over one service time), and
  the others' prompts that land in its steps add a Poisson term; its p99 is that mixture's.
- **The bound** prices the same load with every resource at peak (`estimate.BOUND`: all of HBM, no cap on
  sequences, no token budget): TPOT at the batch the load implies at peak, TTFT a prompt prefilled alone (plus, in a
  closed loop, the queue the memory alone forces), throughput by Little's law. No engine beats it.

The step times are priced at every batch up to 16, then at batches 20% apart, and at prompt-token counts 25% apart,
linear in between (the step is piecewise linear in both). `simulator.simulate_open_loop` and
`simulate_closed_loop` run the same engine step by step with the same step-time model: they check the queueing
formulas (tests/math/test_load.py); `simulator.burst_estimate` prices a burst, every request sent at once, and
`simulator.benchmark_estimate` a whole closed-loop benchmark whose clients start together (its first requests a
burst; identical requests may stay in waves), by running the same engine step by step, mixed or prefill-first. Used
in chapter 9, *Serving engines*.
"""

import functools
import math
from dataclasses import dataclass, field
from statistics import NormalDist

from ._validate import flag, positive, positive_int
from .estimate import BOUND, CUDA_GRAPH_MAX_BATCH, Deployment, max_batch, resolve_efficiency, step_estimate

# vLLM's default token budget per step for its OpenAI server on GPUs with at least 70 GiB (max_num_batched_tokens;
# vllm/engine/arg_utils.py, EngineArgs.get_batch_defaults: 8,192 there, 2,048 on smaller GPUs and A100s).
TOKEN_BUDGET = 8192
Z_99 = NormalDist().inv_cdf(0.99)  # the standard normal's 99th percentile, about 2.326
_RATE_TOLERANCE = 1e-3  # relative precision of max_request_rate's bisection


@dataclass(frozen=True)
class Engine:
    """One replica of a continuous-batching engine with chunked prefill, as the load model sees it.

    `step_s(decode_batch, prefill_tokens)`: seconds of one step at the workload's mean context (integers in, a
    float out; each pair is priced once). `max_batch`: the most sequences the replica decodes at once (memory and
    the engine's cap). `token_budget`: tokens per step, decode tokens included (None: no budget, whole prompts in
    one step). `bound`: price as the bound does (no queueing but what Little's law forces, a prompt alone).
    `request_s`: the front end's seconds per request, added to every TTFT (module docstring).

    Defined in chapter 9, *Serving engines*.
    """

    step_s: object
    input_len: int
    output_len: int
    max_batch: int
    token_budget: int | None = TOKEN_BUDGET
    bound: bool = False
    request_s: float = 0.0
    _steps: dict = field(default_factory=dict, init=False, repr=False, compare=False)
    _gridded: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self):
        if not callable(self.step_s):
            raise ValueError(f"step_s must be a function (decode_batch, prefill_tokens) -> seconds, got "
                             f"{self.step_s!r}")
        positive_int("input_len", self.input_len)
        if positive_int("output_len", self.output_len) < 2:
            raise ValueError(f"output_len={self.output_len}: a request under load needs at least 2 output tokens "
                             "(the first comes from the prefill, TPOT from the rest)")
        positive_int("max_batch", self.max_batch)
        if self.token_budget is not None and positive_int("token_budget", self.token_budget) < 2:
            raise ValueError(f"token_budget={self.token_budget}: a step must hold a decode token and a prompt token; "
                             f"use at least 2 (vLLM's default is {TOKEN_BUDGET:,})")
        flag("bound", self.bound)
        if isinstance(self.request_s, bool) or not isinstance(self.request_s, (int, float)) or \
                not 0 <= self.request_s < math.inf:
            raise ValueError(f"request_s={self.request_s!r}: the front end's seconds per request must be a "
                             "non-negative finite number (0 for an engine measured in process)")

    # ------------------------------------------------------------------------------------------- step times
    def step(self, decode_batch: int, prefill_tokens: int) -> float:
        """`step_s`, each (decode_batch, prefill_tokens) pair priced once."""
        key = (decode_batch, prefill_tokens)
        if key not in self._steps:
            self._steps[key] = float(self.step_s(decode_batch, prefill_tokens))
        return self._steps[key]

    def iteration(self, b: float) -> float:
        """T_step(B): the mean step with B sequences decoding in the steady state (B in [1, B_max]; linear between
        whole batches)."""
        table = self._table
        low = min(max(1, int(b)), len(table) - 1)
        if low == len(table) - 1 or b <= low:
            return table[low]
        return table[low] + (b - low) * (table[low + 1] - table[low])

    @property
    def _table(self) -> list:
        """T_step(B) for B = 0 .. B_max (index 0 unused)."""
        return self._pricing[1]

    @property
    def _priced(self) -> list:
        """The batches `_table` prices; it interpolates the others."""
        return self._pricing[0]

    @functools.cached_property
    def _pricing(self) -> tuple:
        """(priced batches, T_step(B) for B = 0 .. B_max): every batch up to 16 priced, then batches 20% apart and
        B_max, linear in between (the step is piecewise linear in the batch)."""
        limit = self.batch_limit
        priced = sorted({n for n in range(1, 17)} | {round(16 * 1.2**k) for k in range(64)} | {limit})
        priced = [n for n in priced if n <= limit]
        table = [0.0] * (limit + 1)
        for low, high in zip(priced, priced[1:] + [None]):
            t_low = table[low] = self._iteration_at(low)
            if high is not None:
                t_high = self._iteration_at(high)
                for n in range(low + 1, high):
                    table[n] = t_low + (n - low) / (high - low) * (t_high - t_low)
        return priced, table

    def _iteration_at(self, b: int) -> float:
        """The mean step at a whole batch B: prompts arrive nu = B / (T_gen - 1) per step, Poisson, so a fraction
        pi = 1 - e^-nu of the steps carries prompt tokens, T_0 nu / (1 - e^-nu) of them on average (at most the budget
        left, Q - B, and then pi = nu T_0 / that): T_step(B) = (1 - pi) step(B, 0) + pi step(B, that many). Prompts
        come whole, not spread over the steps, so a lone prompt cannot hide under the weight read."""
        lump = self._lump(b)
        share = b / (self.output_len - 1) * self.input_len / lump  # pi
        return (1 - share) * self.step(b, 0) + share * self.step(b, lump)

    def _lump(self, b: float, arrivals_per_step: float | None = None) -> int:
        """Prompt tokens in a step that carries some, with b decoding: T_0 nu / (1 - e^-nu) for nu prompts arriving
        per step (default b / (T_gen - 1)), capped by the budget left, Q - b."""
        x = b / (self.output_len - 1) if arrivals_per_step is None else arrivals_per_step
        lump = self.input_len * (x / -math.expm1(-x) if x > 0 else 1.0)
        if self.token_budget is not None:
            lump = min(lump, self.token_budget - b)
        return max(1, round(lump))

    @property
    def batch_limit(self) -> int:
        """B_max: the largest decode batch, `max_batch` or what the token budget carries,
        B (1 + T_0 / (T_gen - 1)) <= Q."""
        if self.token_budget is None:
            return self.max_batch
        per_sequence = 1 + self.input_len / (self.output_len - 1)
        return max(1, min(self.max_batch, int(self.token_budget / per_sequence)))

    def saturation_rate(self) -> float:
        """lambda_sat = B_max / ((T_gen - 1) T_step(B_max)), requests per second (module docstring)."""
        return self.batch_limit / ((self.output_len - 1) * self.iteration(self.batch_limit))

    # ------------------------------------------------------------------------------------------- one load
    def open_loop(self, rate: float, percentiles: bool = True) -> "LoadPoint":
        """Poisson arrivals at `rate` requests/s (module docstring). ValueError at or above the saturation rate.
        `percentiles` False leaves the p99 values at the means (`max_request_rate` without p99 targets)."""
        rate = positive("request_rate", rate)
        saturation = self.saturation_rate()
        if rate >= saturation:
            raise ValueError(f"request_rate={rate:.4g} per replica is at or above the saturation rate "
                             f"{saturation:.4g} requests/s (the offline throughput over output_len): the queue grows "
                             "without bound; lower the rate, add replicas, or ask for a closed loop (concurrency)")
        if self.bound:
            decoding = self._decoding_at(rate)
            return self._point(rate, self.step(0, self.input_len), 0.0, self.iteration(max(1.0, decoding)), decoding)
        occupancy, full = self._occupancy(rate)
        limit, table = self.batch_limit, self._table
        tpot = sum(p * table[n + 1] for n, p in enumerate(occupancy[:limit])) + full * table[limit]
        decoding = sum(n * p for n, p in enumerate(occupancy[:limit])) + full * limit
        parts, spread = [], []
        for weight, n in self._bins(occupancy, full):
            arrivals = rate * self.iteration(max(1, min(n + 1, limit)))  # prompts arriving per step
            residual, prefill_wait, chunks_s = self._arrival(n, arrivals)
            slot_wait = (1.0, 2.0 * (saturation - rate)) if n == limit else (0.0, 1.0)
            parts.append((weight, residual, slot_wait, prefill_wait, chunks_s))
            if percentiles:
                spread.append((weight, table[max(1, min(n + 1, limit))], self._prompt_noise(n, decoding)))
        ttft, ttft_p99 = _ttft(parts, percentile=percentiles)
        queue = ttft - sum(weight * part[-1] for weight, *part in parts)
        tpot_p99 = _tpot_p99(tpot, spread) if percentiles else tpot
        return self._point(rate, self.request_s + ttft, queue, tpot, decoding, self.request_s + ttft_p99, tpot_p99)

    def overloaded(self, rate: float) -> "LoadPoint":
        """Poisson arrivals at `rate` requests/s at or above the saturation rate: the batch stays full at B_max, the
        engine serves lambda_sat requests/s and the other rate - lambda_sat requests/s join a queue that grows without
        end, so the queue, TTFT (mean and p99) and the requests in flight are infinite; TPOT is the full batch's step,
        its p99 from the prompts' spread as in `closed_loop`; `request_rate` and the tokens/s are what is served.
        ValueError below the saturation rate (`open_loop` answers there)."""
        rate, saturation = positive("request_rate", rate), self.saturation_rate()
        if rate < saturation:
            raise ValueError(f"request_rate={rate:.4g} per replica is below the saturation rate {saturation:.4g} "
                             "requests/s: the queue settles; use open_loop")
        limit = self.batch_limit
        tpot = self.iteration(limit)
        tpot_p99 = tpot if self.bound else _tpot_p99(tpot, [(1.0, tpot, self._prompt_noise(limit, limit))])
        return LoadPoint(request_rate=saturation, ttft_s=math.inf, tpot_s=tpot, ttft_p99_s=math.inf,
                         tpot_p99_s=tpot_p99, queue_s=math.inf, requests_in_flight=math.inf, decode_batch=limit,
                         output_tokens_per_s=saturation * self.output_len, offered_rate=rate)

    def closed_loop(self, clients: int) -> "LoadPoint":
        """`clients` requests always in the system, each replaced as soon as it ends (module docstring)."""
        n = positive_int("concurrency", clients)
        o, limit = self.output_len, self.batch_limit
        decoding, tpot, engine_s = float(min(n, limit)), 0.0, 0.0
        for _ in range(200):  # B = U (T_gen - 1) TPOT / (TTFT + (T_gen - 1) TPOT), capped at B_max: a few rounds
            tpot = self.iteration(max(1.0, decoding))
            whole = round(decoding)
            # sent as another request ends, a prompt reaches the engine at a step's end; past a front end, mid-step
            # (into a running step only if another client decodes)
            others = round(decoding * (n - 1) / n)
            residual, (wait_p, wait_theta), chunks_s = self._arrival(whole, decoding / (o - 1),
                                                                     at_step_end=not (self.request_s and others))
            residual_s = sum(weight * length / 2 for weight, length in residual)
            engine_s = self.request_s + (self.step(0, self.input_len) if self.bound else
                                         residual_s + chunks_s + (wait_p and wait_p / wait_theta))
            updated = min(limit, n * (o - 1) * tpot / (engine_s + (o - 1) * tpot))
            if abs(updated - decoding) <= 1e-9 * updated:
                break
            decoding = 0.5 * (decoding + updated)
        throughput = decoding / ((o - 1) * tpot)
        queue = max(0.0, n / throughput - (o - 1) * tpot - engine_s)
        if self.bound:
            return self._point(throughput, queue + engine_s, queue, tpot, decoding, clients=n)
        ttft, ttft_p99 = _ttft([(1.0, residual, (0.0, 1.0), (wait_p, wait_theta), queue + chunks_s)])
        tpot_p99 = _tpot_p99(tpot, [(1.0, tpot, self._prompt_noise(whole, decoding))])
        return self._point(throughput, self.request_s + ttft, ttft - chunks_s, tpot, decoding,
                           self.request_s + ttft_p99, tpot_p99, clients=n)

    def lockstep(self, clients: int) -> "LoadPoint":
        """`clients` in a closed loop of fixed-length requests on an engine that prefills whole prompts, all those
        waiting at once, with decoding paused (no chunked prefill): the clients stay in step. They arrive together,
        their U prompts go through one prefill of U T_0 tokens, every first token comes at its end, and the U decode
        T_gen - 1 steps together and end together, so they arrive together again:

            TTFT = f + step(0, U T_0) for every client,  TPOT = step(U, 0),  lambda = U / (TTFT + (T_gen - 1) TPOT)

        (Little's law), the p99s equal to the means. The chunked engine of `closed_loop` breaks the step: a prompt's
        chunks share steps with the others' decodes, so its clients drift apart (run step by step, they stay in
        waves where a burst's prompts take only a few steps of a round: `simulator.simulate_benchmark`). At most
        `max_batch` clients (more would split into waves). Used in chapter 9, *Serving engines*, to read a published
        sweep."""
        n = positive_int("concurrency", clients)
        if n > self.max_batch:
            raise ValueError(f"concurrency={n} is more than the {self.max_batch} sequences the replica holds: the "
                             "clients would split into waves; use closed_loop, or at most max_batch clients")
        ttft, tpot = self.request_s + self.step(0, n * self.input_len), self.step(n, 0)
        rate = n / (ttft + (self.output_len - 1) * tpot)
        return self._point(rate, ttft, 0.0, tpot, rate * (self.output_len - 1) * tpot, clients=n)

    def closed_loops(self, clients: int, replicas: int) -> "LoadPoint":
        """`clients` over `replicas` copies of this engine, each a closed loop, as even as they divide (some get one
        more, some none): rates, tokens/s and requests in flight add up, means are weighted by the requests each
        copy serves, p99 the worse copy's."""
        clients, replicas = positive_int("concurrency", clients), positive_int("replicas", replicas)
        groups = [(count, self.closed_loop(n)) for count, n in spread(clients, replicas)]
        rate = sum(count * p.request_rate for count, p in groups)

        def mean(name):
            return sum(count * p.request_rate * getattr(p, name) for count, p in groups) / rate

        return LoadPoint(request_rate=rate, ttft_s=mean("ttft_s"), tpot_s=mean("tpot_s"),
                         ttft_p99_s=max(p.ttft_p99_s for _, p in groups),
                         tpot_p99_s=max(p.tpot_p99_s for _, p in groups), queue_s=mean("queue_s"),
                         requests_in_flight=float(clients), decode_batch=mean("decode_batch"),
                         output_tokens_per_s=sum(count * p.output_tokens_per_s for count, p in groups))

    def max_request_rate(self, *, ttft=None, tpot=None, ttft_p99=None, tpot_p99=None) -> float:
        """The highest Poisson rate (requests/s) whose mean and p99 TTFT and TPOT meet the targets given (None: no
        target), within a relative 1e-3. Each grows with the rate, so the rate is bracketed and the bracket narrowed
        by false position (Illinois' rule) on log(worst latency / its target) against -log(1 - rate / lambda_sat),
        in which the queue's divergence at saturation is about a straight line; a bisection step whenever that
        fails to halve the bracket. 0.0 when even a trickle misses one; the saturation rate (a supremum) when no
        target binds below it."""
        targets = [(name, float(positive(name, value))) for name, value in
                   (("ttft", ttft), ("tpot", tpot), ("ttft_p99", ttft_p99), ("tpot_p99", tpot_p99))
                   if value is not None]
        saturation = self.saturation_rate()
        percentiles = ttft_p99 is not None or tpot_p99 is not None

        def excess(x):  # above 0 where a target is missed, at rate lambda_sat (1 - e^-x)
            point = self.open_loop(-saturation * math.expm1(-x), percentiles)
            return math.log(max(getattr(point, f"{name}_s") / value for name, value in targets))

        if not targets:
            return saturation
        low, high = 1e-9, -math.log(_RATE_TOLERANCE)
        f_high = excess(high)
        if f_high <= 0:
            return saturation
        f_low = excess(low)
        if f_low > 0:
            return 0.0
        kept, halve = 0, False
        while math.exp(-low) - math.exp(-high) > _RATE_TOLERANCE * -math.expm1(-high):
            width = high - low
            if halve:
                middle = 0.5 * (low + high)
            else:  # false position, kept off the ends
                middle = (low * f_high - high * f_low) / (f_high - f_low)
                middle = min(max(middle, low + 1e-3 * width), high - 1e-3 * width)
            f_middle = excess(middle)
            if f_middle <= 0:
                low, f_low = middle, f_middle
                f_high, kept = (f_high / 2 if kept == 1 else f_high), 1  # Illinois: the same end kept twice
            else:
                high, f_high = middle, f_middle
                f_low, kept = (f_low / 2 if kept == -1 else f_low), -1
            halve = high - low > 0.5 * width
        return -saturation * math.expm1(-low)

    # ------------------------------------------------------------------------------------------- the parts
    def _occupancy(self, rate: float) -> tuple:
        """([P(u) for u = 0 .. B_max], P(u >= B_max)) for u requests in the replica: a birth-death chain with
        arrivals at `rate` and departures at lambda(u) = u / ((T_gen - 1) T_step(u)), the steady state's rate with u
        running (lambda_sat beyond B_max, where arrivals queue): P(u) ~ prod_{u' <= u} rate / lambda(u'), the states
        above B_max a geometric tail of ratio rate / lambda_sat (module docstring)."""
        limit, o, table = self.batch_limit, self.output_len, self._table
        log_weights, total = [0.0], 0.0
        for n in range(1, limit + 1):
            log_weights.append(log_weights[-1] + math.log(rate * (o - 1) * table[n] / n))
        top = max(log_weights)
        weights = [math.exp(value - top) for value in log_weights]
        ratio = rate / self.saturation_rate()
        tail = weights[limit] * ratio / (1 - ratio)
        total = sum(weights) + tail
        return [w / total for w in weights], (weights[limit] + tail) / total

    def _decoding_at(self, rate: float) -> float:
        """B with B = rate (T_gen - 1) T_step(B) (Little's law on the decode phase; at least one sequence), by
        bisection."""
        low, high = 0.0, float(self.batch_limit)
        while high - low > 1e-9 * high:
            middle = 0.5 * (low + high)
            if rate * (self.output_len - 1) * self.iteration(max(1.0, middle)) > middle:
                low = middle
            else:
                high = middle
        return 0.5 * (low + high)

    def _bins(self, occupancy: list, full: float) -> list:
        """(probability, decode batch) pairs that stand for the occupancy: the batches between two priced batches
        of `_table` gathered at the nearer end (so every step is priced once for all rates), and the full engine
        (B running, arrivals queue) on its own. Bins below 1e-9 are dropped."""
        limit = self.batch_limit
        priced = [0] + self._priced + [limit]
        gathered = {}
        for low, high in zip(priced, priced[1:]):
            for n in range(low, high):
                if occupancy[n] > 0:
                    at = low if n - low <= high - n else high
                    at = min(at, limit - 1) if at == limit else at
                    gathered[at] = gathered.get(at, 0.0) + occupancy[n]
        gathered[limit] = full
        return [(weight, n) for n, weight in sorted(gathered.items()) if weight > 1e-9]

    def _arrival(self, decoding: int, arrivals: float, at_step_end: bool = False) -> tuple:
        """What a prompt meets when it arrives with `decoding` sequences decoding and `arrivals` prompts arriving
        per step: ((weight, length) of the step it lands in), (probability it waits, that wait's exponential rate),
        seconds of its own chunks (ceil(T_0 / (Q - B)) steps).

        The step it lands in carries prompts (length L_long, share pi of the steps) or not; arrivals fall in the
        long ones in proportion to their length. The wait gathers two delays: the prompts that arrive during the
        same step share its next step (Poisson, nu times the landing step over the mean step, each adding a prompt's
        cost to that step), and the M/D/1 queue for the budget left by the decodes, Q - B (Pollaczek-Khinchine mean
        rho s / (2 (1 - rho)),
        s the seconds of one prompt's share of the budget). A request sent `at_step_end` (a closed loop's, as another
        finishes) waits out no running step and shares its step with the nu prompts sent at the same end."""
        i = self.input_len
        budget = math.inf if self.token_budget is None else max(1, self.token_budget - decoding)
        own = min(budget, i)
        chunk_s = self._step_p(decoding, own)
        chunks = 1 if budget == math.inf else math.ceil(i / budget)
        residual, companions = (), arrivals
        if decoding and not at_step_end:
            lump = min(budget, i * arrivals / -math.expm1(-arrivals))
            carrying = min(1.0, arrivals * i / lump)
            short, long = self._step_p(decoding, 0), self._step_p(decoding, lump)
            mean_step = carrying * long + (1 - carrying) * short
            landing = carrying * long / mean_step
            residual = ((landing, long), (1 - landing, short))
            companions = arrivals * (landing * long + (1 - landing) * short) / mean_step
        extra = self._step_p(decoding, min(budget, own + i)) - chunk_s  # one more prompt in the same step
        wait_p, wait_s = -math.expm1(-companions) if extra > 0 else 0.0, companions * extra
        if budget != math.inf:
            utilisation = min(arrivals * i / budget, 1 - 1e-9)
            service_s = i / budget * chunk_s  # one prompt's share of the budget, in seconds
            wait_p = 1 - (1 - wait_p) * (1 - utilisation)
            wait_s += utilisation * service_s / (2 * (1 - utilisation))
        return residual, (wait_p, wait_p / wait_s if wait_s > 0 else 1.0), chunks * chunk_s

    def _step_p(self, decoding: int, prompt_tokens: float) -> float:
        """step(decoding, prompt_tokens) with the prompt tokens on a grid 25% apart, linear in between (the step is
        piecewise linear in them), so that every rate reuses the same priced steps."""
        if prompt_tokens <= 0:
            return self.step(decoding, 0)
        key = (decoding, prompt_tokens)
        if key not in self._gridded:  # the same prompt at the same batch is met at every rate tried
            if len(self._gridded) >= 65536:  # a long sweep of rates: keep the memory bounded
                self._gridded.clear()
            self._gridded[key] = self._step_on_grid(decoding, prompt_tokens)
        return self._gridded[key]

    def _step_on_grid(self, decoding: int, prompt_tokens: float) -> float:
        k = math.log(prompt_tokens) / math.log(1.25)
        low, high = round(1.25 ** math.floor(k)), round(1.25 ** math.ceil(k))
        if high <= low:
            return self.step(decoding, low)
        t_low, t_high = self.step(decoding, low), self.step(decoding, high)
        return t_low + (prompt_tokens - low) / (high - low) * (t_high - t_low)

    def _prompt_noise(self, decoding: int, mean_decoding: float) -> float:
        """The spread of a request's TPOT that its life's prompts add: the others arriving during its life,
        Poisson with mean B-bar, each adds its prompt's cost to one of its T_gen - 1 steps."""
        b = max(1, decoding)
        lump = self._lump(b)
        per_prompt = (self._step_p(b, lump) - self._step_p(b, 0)) / lump * self.input_len / (self.output_len - 1)
        return math.sqrt(max(0.0, mean_decoding)) * per_prompt

    def _point(self, rate, ttft, queue, tpot, decoding, ttft_p99=None, tpot_p99=None, clients=None):
        o = self.output_len
        in_flight = clients if clients is not None else rate * (ttft + (o - 1) * tpot)  # Little's law
        return LoadPoint(request_rate=rate, ttft_s=ttft, tpot_s=tpot,
                         ttft_p99_s=ttft if ttft_p99 is None else ttft_p99,
                         tpot_p99_s=tpot if tpot_p99 is None else tpot_p99, queue_s=queue,
                         requests_in_flight=in_flight, decode_batch=decoding, output_tokens_per_s=rate * o)


def _ttft(parts: list, percentile: bool = True) -> tuple:
    """(mean, p99) of TTFT, a mixture over `parts` (probability, residual, slot wait, prefill wait, fixed seconds):
    fixed + U + W_slot + W_prefill. U is the rest of the step running when the request arrives: uniform on
    [0, length] with probability weight for each (weight, length) of `residual` (none: it starts at once). Each W
    is zero with probability 1 - p and else exponential of rate theta ((p, theta) pairs). The survival of
    W_slot + W_prefill is A_s e^{-theta_s w} + A_p e^{-theta_p w}; with U it integrates in closed form, and the 99th
    percentile is found by bisection (never reported below the mean: module docstring); without `percentile` it is
    the mean."""
    mean, components = 0.0, []
    for probability, residual, (p_s, theta_s), (p_p, theta_p), fixed in parts:
        mean += probability * (fixed + sum(weight * length / 2 for weight, length in residual) +
                               (p_s / theta_s if p_s else 0.0) + (p_p / theta_p if p_p else 0.0))
        if p_s and p_p and abs(theta_s - theta_p) <= 1e-9 * theta_s:
            theta_p *= 1 + 1e-6  # equal rates: the sum's survival is the limit of the distinct-rate formula
        terms = []
        if p_s:
            terms.append((p_s * (1 - p_p) + (p_s * p_p * theta_p / (theta_p - theta_s) if p_p else 0.0), theta_s))
        if p_p:
            terms.append((p_p * (1 - p_s) - (p_s * p_p * theta_s / (theta_p - theta_s) if p_s else 0.0), theta_p))
        components.append((probability, [(w, length) for w, length in residual if w > 0], terms, fixed))
    if not percentile:
        return mean, mean

    def survival(t):  # P(TTFT > t)
        total = 0.0
        for probability, residual, terms, fixed in components:
            s = t - fixed
            if s < 0:
                total += probability
            elif not residual:
                total += probability * sum(a * math.exp(-theta * s) for a, theta in terms)
            else:
                for weight, length in residual:
                    inside = min(s, length)  # U <= s: W must exceed s - U >= 0
                    tail = sum(a / theta * (math.exp(-theta * (s - inside)) - math.exp(-theta * s))
                               for a, theta in terms)
                    total += probability * weight * (tail + max(0.0, length - s)) / length
        return total

    high = max(fixed + max([length for _, length in residual], default=0.0) +
               sum(math.log(100 * max(a, 1e-300) + 1) / theta for a, theta in terms)
               for _, residual, terms, fixed in components) + 1e-12
    while survival(high) > 0.01:
        high *= 2
    low = 0.0
    for _ in range(200):
        if high - low <= 1e-6 * high:
            break
        middle = 0.5 * (low + high)
        low, high = (middle, high) if survival(middle) > 0.01 else (low, middle)
    return mean, max(high, mean)


def _tpot_p99(mean: float, spread: list) -> float:
    """The 99th percentile of a request's TPOT: a mixture over the batches it may start with ((probability, T at
    that batch, sigma of the prompts' noise) in `spread`) of normals centred a fraction sqrt(2/3) of the way from
    the mean to T at that batch (the batch drifts back during its life: two thirds of the variance of an
    M/G/infinity occupancy averaged over one service time remain), at least the mean."""
    shrink = math.sqrt(2 / 3)
    normals = [(p, mean + shrink * (t - mean), sigma) for p, t, sigma in spread]

    def survival(x):
        return sum(p * (1 - NormalDist(m, sigma).cdf(x)) if sigma > 0 else (p if m > x else 0.0)
                   for p, m, sigma in normals)

    low = min(m for _, m, _ in normals)
    high = max(m + 4 * sigma for _, m, sigma in normals) + 1e-12
    for _ in range(100):
        if high - low <= 1e-6 * high:
            break
        middle = 0.5 * (low + high)
        low, high = (middle, high) if survival(middle) > 0.01 else (low, middle)
    return max(high, mean)


@dataclass(frozen=True)
class LoadPoint:
    """One replica under one load: means and p99 in seconds, `request_rate` served (requests/s),
    `requests_in_flight` (queued and running: Little's law), `queue_s` (mean time from arrival to the request's
    first prefill chunk), `decode_batch` (mean sequences decoding), `output_tokens_per_s`."""

    request_rate: float
    ttft_s: float
    tpot_s: float
    ttft_p99_s: float
    tpot_p99_s: float
    queue_s: float
    requests_in_flight: float
    decode_batch: float
    output_tokens_per_s: float
    offered_rate: float | None = None  # arrivals past the saturation rate (`Engine.overloaded`); None below it

    @property
    def saturated(self) -> bool:
        """True when arrivals exceed what the replica serves: the queue grows without end."""
        return self.offered_rate is not None

    def replicated(self, replicas: int) -> "LoadPoint":
        """The same point on `replicas` identical replicas, each with its share of the load: rates, tokens/s and
        requests in flight times the replicas, times and the batch per replica unchanged."""
        return LoadPoint(request_rate=self.request_rate * replicas, ttft_s=self.ttft_s, tpot_s=self.tpot_s,
                         ttft_p99_s=self.ttft_p99_s, tpot_p99_s=self.tpot_p99_s, queue_s=self.queue_s,
                         requests_in_flight=self.requests_in_flight * replicas, decode_batch=self.decode_batch,
                         output_tokens_per_s=self.output_tokens_per_s * replicas,
                         offered_rate=None if self.offered_rate is None else self.offered_rate * replicas)


@dataclass(frozen=True)
class LoadBound:
    """The same load with every resource at peak: no engine beats these (module docstring)."""

    ttft_s: float
    tpot_s: float
    output_tokens_per_s: float


@dataclass(frozen=True)
class LoadEstimate:
    """A deployment under a load (`load_estimate`): means (the plain names) and p99 of TTFT and TPOT, output
    tokens/s, requests in flight and queueing time, over all replicas, beside the bound. `concurrency` or
    `request_rate` is the load asked for, or `requests` sent at once (a burst, `simulator.burst_estimate`), or both
    `concurrency` and `requests`: a benchmark of that many requests whose clients start together
    (`simulator.benchmark_estimate`). `saturation_rate` is the most requests/s the deployment sustains; `front_end_s`
    the part of each TTFT spent in the server's front end.

    Arrivals at or above the saturation rate (`offered_rate`, `saturated`): the deployment serves its saturation
    rate at the full batch and the queue grows without end, so TTFT, its p99, the queueing time and the requests in
    flight are infinite (null in the JSON); TPOT and the tokens/s are those of the full batch (`Engine.overloaded`).
    """

    concurrency: int | None
    request_rate: float  # served, requests/s (the rate asked for in an open loop)
    ttft_s: float
    tpot_s: float
    ttft_p99_s: float
    tpot_p99_s: float
    output_tokens_per_s: float
    requests_in_flight: float
    queue_s: float
    decode_batch: float  # mean sequences decoding per replica
    max_batch: int  # per replica: the most sequences it decodes at once (`estimate.max_batch`, the token budget)
    saturation_rate: float
    token_budget: int | None
    bound: LoadBound
    offered_rate: float | None = None  # requests/s asked for when they exceed the saturation rate; None otherwise
    front_end_s: float = 0.0  # of each TTFT, the server's front end (`Efficiency.request_s`)
    requests: int | None = None  # sent in all: a burst's (at once) or a benchmark's (with `concurrency`); None in
    # the steady state
    schedule: str = "mixed"  # how a step is shared by prompts and decodes (`simulator.SCHEDULES`)

    @property
    def saturated(self) -> bool:
        """True when the arrivals asked for exceed what the deployment serves (the queue grows without end)."""
        return self.offered_rate is not None

    def as_dict(self) -> dict:
        """The JSON of `python -m scaling_lib estimate --concurrency | --request-rate` (SI units; an unbounded
        quantity of a saturated deployment is null)."""
        def finite(value):
            return None if math.isinf(value) else value
        return {"concurrency": self.concurrency, "requests": self.requests, "request_rate": self.request_rate,
                "ttft_s": finite(self.ttft_s),
                "tpot_s": self.tpot_s, "ttft_p99_s": finite(self.ttft_p99_s), "tpot_p99_s": self.tpot_p99_s,
                "output_tokens_per_s": self.output_tokens_per_s,
                "requests_in_flight": finite(self.requests_in_flight), "queue_s": finite(self.queue_s),
                "front_end_s": self.front_end_s, "saturated": self.saturated, "offered_rate": self.offered_rate,
                "decode_batch_per_replica": self.decode_batch,
                "max_batch_per_replica": self.max_batch, "saturation_rate": self.saturation_rate,
                "token_budget": self.token_budget, "schedule": self.schedule,
                "bound": {"ttft_s": self.bound.ttft_s, "tpot_s": self.bound.tpot_s,
                          "output_tokens_per_s": self.bound.output_tokens_per_s}}

    def _load_words(self) -> str:
        """The load in words: a benchmark, a steady closed loop, a burst or Poisson arrivals."""
        if self.requests is None:
            return (f"{self.concurrency:,} clients (closed loop)" if self.concurrency is not None
                    else f"{self.request_rate:,.4g} requests/s (Poisson arrivals)")
        run = (f"served at {self.request_rate:,.4g} requests/s until the last ends after "
               f"{self.requests / self.request_rate:,.1f} s")
        if self.concurrency is not None:
            return (f"a benchmark of {self.requests:,} requests from {self.concurrency:,} clients (closed loop) that "
                    f"start together, {run}")
        return f"{self.requests:,} request{'s' if self.requests > 1 else ''} sent at once, {run}"

    def rows(self) -> list:
        """(name, value) pairs in words, one per quantity: what `describe` prints."""
        if self.saturated:
            return self._saturated_rows()
        load = self._load_words()
        if self.schedule != "mixed":
            load += f", {self.schedule} (waiting prompts run alone while the decodes wait)"
        return [("load", f"{load}; the deployment saturates at {self.saturation_rate:,.4g} requests/s"
                         f"{self._fuller_batch_words()}"),
                ("TTFT under load", f"{self.ttft_s * 1e3:,.1f} ms mean, {self.ttft_p99_s * 1e3:,.1f} ms p99 "
                                    f"({self.queue_s * 1e3:,.1f} ms of the mean waiting "
                                    f"{'behind the other requests' if self.requests else 'for a prefill step'}, "
                                    f"{self.front_end_s * 1e3:,.0f} ms in the server's front end); bound "
                                    f"{self.bound.ttft_s * 1e3:,.1f} ms"),
                ("TPOT under load", f"{self.tpot_s * 1e3:,.2f} ms mean, {self.tpot_p99_s * 1e3:,.2f} ms p99; bound "
                                    f"{self.bound.tpot_s * 1e3:,.2f} ms"),
                ("output tokens/s under load", f"{self.output_tokens_per_s:,.0f} (bound "
                                               f"{self.bound.output_tokens_per_s:,.0f})"),
                ("requests in flight", f"{self.requests_in_flight:,.1f}, queued or running (Little's law); "
                                       f"{self.decode_batch:,.1f} decoding per replica of at most {self.max_batch:,} "
                                       "(at the workload's mean context)")]

    def _fuller_batch_words(self) -> str:
        """Why a closed loop can be served faster than the saturation rate: the saturation rate is that of the full
        batch (where an open loop's queue ends up), and on a GPU a decode batch past `CUDA_GRAPH_MAX_BATCH` runs
        outside a CUDA graph, so a full batch there can serve fewer requests per second than these clients' smaller
        one. "" when the loop is served below the saturation rate."""
        if self.concurrency is None or self.request_rate <= self.saturation_rate:
            return ""
        why = (f", past the {CUDA_GRAPH_MAX_BATCH} sequences a GPU engine runs in a CUDA graph"
               if self.decode_batch <= CUDA_GRAPH_MAX_BATCH < self.max_batch else "")
        return (f" with its batch full ({self.max_batch:,} per replica{why}); these clients keep "
                f"{self.decode_batch:,.0f} decoding per replica and are served faster")

    def _saturated_rows(self) -> list:
        growth = self.offered_rate - self.request_rate
        return [("load", f"{self.offered_rate:,.4g} requests/s (Poisson arrivals), more than the deployment serves: "
                         f"it saturates at {self.saturation_rate:,.4g} requests/s, so the queue grows by "
                         f"{growth:,.4g} requests every second"),
                ("TTFT under load", f"unbounded: each request waits behind a queue that never stops growing; "
                                    f"bound {self.bound.ttft_s * 1e3:,.1f} ms"),
                ("TPOT under load", f"{self.tpot_s * 1e3:,.2f} ms mean, {self.tpot_p99_s * 1e3:,.2f} ms p99, the "
                                    f"full batch's step; bound {self.bound.tpot_s * 1e3:,.2f} ms"),
                ("output tokens/s under load", f"{self.output_tokens_per_s:,.0f}, all the deployment serves (bound "
                                               f"{self.bound.output_tokens_per_s:,.0f})"),
                ("requests in flight", f"unbounded; {self.decode_batch:,.0f} decoding per replica, the most it holds "
                                       "(at the workload's mean context)")]

    def describe(self) -> str:
        """The same in words, one line per quantity."""
        rows = self.rows()
        width = max(len(name) for name, _ in rows)
        return "\n".join(f"{name:<{width}}  {value}" for name, value in rows)


def spread(n: int, replicas: int) -> list:
    """(replicas, share) pairs: n clients or requests dealt over `replicas` copies of an engine as evenly as they
    divide, some getting one more and pairs with none left out. Used by `Engine.closed_loops` and the simulator's
    estimates over replicas."""
    base, extra = divmod(positive_int("n", n), positive_int("replicas", replicas))
    return [(count, size) for count, size in ((replicas - extra, base), (extra, base + 1)) if count and size]


def deployment_engine(deployment: Deployment, input_len: int, output_len: int, efficiency="typical",
                      token_budget: int | None = TOKEN_BUDGET) -> Engine:
    """The `Engine` of one replica of `deployment`: steps priced by `estimate.step_estimate` at the mean context
    T_0 + T_gen / 2 (prompts of T_0 tokens), the batch capped by `estimate.max_batch` at that context (the engine
    settings for an estimate, all of HBM for the bound), the front end's seconds per request from the efficiency
    (`Efficiency.request_s`). The bound (efficiency None or BOUND) has no token budget and no front end.

    Defined in chapter 9, *Serving engines*.
    """
    if not isinstance(deployment, Deployment):
        raise ValueError(f"deployment must be an estimate.Deployment, got {deployment!r}")
    i, o = positive_int("input_len", input_len), positive_int("output_len", output_len)
    eff = resolve_efficiency(efficiency)
    context = i + o / 2
    per_replica = max_batch(deployment, context, eff) // deployment.replicas
    if per_replica < 1:
        needed = deployment.weight_bytes_per_chip + deployment.kv_bytes_per_chip(1, context)
        raise ValueError(f"one request of {i:,} + {o:,} tokens does not fit on {deployment.describe()}: it needs "
                         f"{needed / 1e9:.1f} GB per chip; quantize the weights or the KV cache, or add "
                         "chips")

    def step_s(decode_batch, prefill_tokens):
        extra = dict(prefill_tokens=prefill_tokens, prefill_len=i) if prefill_tokens else {}
        return step_estimate(deployment, decode_batch=decode_batch, decode_context=context,
                             held_sequences=decode_batch, held_tokens_each=context, efficiency=eff,
                             **extra).total_s

    front_end = 0.0 if eff.overlap else eff.for_chip(deployment.chip).request_s
    return Engine(step_s, i, o, per_replica, None if eff.overlap else token_budget, bound=eff.overlap,
                  request_s=front_end)


def engine_and_bound(deployment: Deployment, input_len: int, output_len: int, efficiency="typical",
                     token_budget: int | None = TOKEN_BUDGET) -> tuple:
    """(the `Engine` of one replica of `deployment` at `efficiency`, the same at the bound): what a load is priced
    on, the bound reported beside it. ValueError for the bound's own efficiency (None or BOUND), which every load
    estimate reports anyway."""
    if resolve_efficiency(efficiency).overlap:
        raise ValueError("efficiency=None prices the bound, which a load estimate reports beside the estimate; "
                         "pass 'typical' or an Efficiency with overlap=False")
    return (deployment_engine(deployment, input_len, output_len, efficiency, token_budget),
            deployment_engine(deployment, input_len, output_len, BOUND))


def load_estimate(deployment: Deployment, input_len: int, output_len: int, *, concurrency: int | None = None,
                  request_rate: float | None = None, efficiency="typical",
                  token_budget: int | None = TOKEN_BUDGET) -> LoadEstimate:
    """TTFT and TPOT (mean and p99), output tokens/s, requests in flight and queueing time of `deployment` serving
    requests of `input_len` prompt and `output_len` output tokens under a load: `concurrency` clients in a closed
    loop, or Poisson arrivals at `request_rate` requests/s over all replicas (give exactly one). Beside it the bound:
    the same load with every resource at peak. `efficiency`: "typical" (calibrated, chapter 11) or an
    `estimate.Efficiency`; `token_budget`: tokens per step (vLLM's max_num_batched_tokens), None for whole prompts.
    The model: module docstring. Concurrency spreads over the replicas as evenly as it divides. Behind
    `python -m scaling_lib estimate --concurrency N | --request-rate R`.

    Defined in chapter 9, *Serving engines*.
    """
    if (concurrency is None) == (request_rate is None):
        raise ValueError("give exactly one load: concurrency=<clients> (closed loop) or request_rate=<requests per "
                         f"second> (Poisson arrivals), got concurrency={concurrency!r}, request_rate={request_rate!r}")
    engine, peak = engine_and_bound(deployment, input_len, output_len, efficiency, token_budget)
    replicas = deployment.replicas
    if concurrency is not None:
        concurrency = positive_int("concurrency", concurrency)
        estimate, bound = (model.closed_loops(concurrency, replicas) for model in (engine, peak))
    else:
        rate = float(positive("request_rate", request_rate)) / replicas
        if rate >= peak.saturation_rate():
            raise ValueError(f"request_rate={request_rate:.4g} requests/s is at or above what these chips serve with "
                             f"every resource at peak ({peak.saturation_rate() * replicas:.4g} requests/s, the "
                             "bound's saturation rate): no engine keeps up; lower the rate or add chips")
        point = engine.overloaded(rate) if rate >= engine.saturation_rate() else engine.open_loop(rate)
        estimate, bound = point.replicated(replicas), peak.open_loop(rate).replicated(replicas)
    return LoadEstimate(concurrency=concurrency, request_rate=estimate.request_rate, ttft_s=estimate.ttft_s,
                        tpot_s=estimate.tpot_s, ttft_p99_s=estimate.ttft_p99_s, tpot_p99_s=estimate.tpot_p99_s,
                        output_tokens_per_s=estimate.output_tokens_per_s,
                        requests_in_flight=estimate.requests_in_flight, queue_s=estimate.queue_s,
                        decode_batch=estimate.decode_batch, max_batch=engine.batch_limit,
                        saturation_rate=engine.saturation_rate() * replicas, token_budget=engine.token_budget,
                        bound=LoadBound(ttft_s=bound.ttft_s, tpot_s=bound.tpot_s,
                                        output_tokens_per_s=bound.output_tokens_per_s),
                        offered_rate=estimate.offered_rate, front_end_s=engine.request_s)


