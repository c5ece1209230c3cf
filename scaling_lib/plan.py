"""Plan a deployment: the cheapest way to serve a model that meets latency targets, and what tighter targets cost.

`plan(model, chips, max_chips, input_len, output_len, ttft=..., tpot=..., prices=...)` searches

    chip x tensor parallelism x weight format x KV-cache format x batch

with the estimate of `estimate` (the calibrated `TYPICAL` efficiencies by default) and returns the deployment with
the lowest cost per request that meets the targets, plus the Pareto frontier of cost against time per output token.
This is the question chapter 12 answers for one model on a TPU torus (Pope et al.'s frontier of cost against
latency), asked for any model, chip and workload; NVIDIA's AIConfigurator, GenZ and Vidur search the same space.

**The workload** is the offline steady state of `estimate.OfflineEstimate`: identical requests of I prompt tokens
and O output tokens, continuous batching, each replica keeping b sequences decoding. One iteration of a replica
decodes one token for each of its b sequences (at the mean context I + O/2) and prefills the b I / (O - 1) prompt
tokens of the requests that replace the b / (O - 1) that finish; it takes T_iter (`estimate.step_estimate`).

- **TPOT** (time per output token) = T_iter: every running sequence gets one token per iteration.
- **TTFT** (time to first token) = the iteration that prefills a request's whole prompt: the b decodes plus
  max(I, b I / (O - 1)) prompt tokens. It counts no queueing (a request that arrives as an iteration starts).
- **Output tokens/s** = replicas x b x O / (O - 1) / T_iter (the first token of each request comes from its
  prefill), as `estimate.offline_estimate` with `slots=b`.

**Pricing.** A replica of t chips at p dollars per chip-hour costs p t / 3600 dollars per second. Its chip time is
split between the two kinds of work by what each adds to the iteration: the decode pays for T_decode, the iteration
it would run with no prompts to prefill (the same b sequences, the same contexts), and the prefill pays for the
rest, T_iter - T_decode, the time its prompt tokens add. Per iteration a replica produces b O / (O - 1) output
tokens and reads b I / (O - 1) input tokens, so

    $ per million output tokens = p t / 3600 x T_decode / (b O / (O - 1)) x 1e6
    $ per million input tokens  = p t / 3600 x (T_iter - T_decode) / (b I / (O - 1)) x 1e6

and I x (input price) + O x (output price) is the whole cost of a request. `plan` minimises that whole cost,
reported as `dollars_per_million_output_tokens_all_in` (= cost per request / O x 1e6: every chip-second, prefill
included, charged to the output tokens).

**The search, pruned.** Replicas are independent copies, so TTFT, TPOT and the cost per token of a design (chip,
tensor parallelism t, formats, batch per replica) do not depend on how many replicas run it; more replicas only
multiply the throughput. Each design is therefore priced once on one replica and served on as many replicas as
`max_chips` holds (replicas = max_chips // t, n_chips = replicas x t). TTFT and TPOT grow with the batch, so the
largest batch meeting the targets is found by bisection (about log2(2,048) = 11 steps instead of 2,048), and a
design whose batch of 1 misses a target cannot meet it. The cost per token falls as the batch grows (each term of
the step is fixed, shared by more sequences, or grows in proportion to the batch) except where the estimate switches
a collective to another algorithm (it prices the one NCCL would pick for the message size, whose latency is then
scaled by the calibrated factor), where it can jump up by some percent: the cheapest batch of a design is the largest
meeting the targets or the last one before a switch below it, and the switches are found by bisection on the
collectives' latency. Designs are visited from the least cost they could reach at any batch up, and the search stops
at the first that cannot beat the best found (branch and bound). The frontier is drawn from batches 1, 2, 4, ... up
to the largest that fits, the largest, and the best, skipping designs whose every point is beaten on both axes.
Tensor parallelism takes the divisors of the query heads up to `max_chips` (Megatron's rule, `estimate.Deployment`),
within one node where no source gives the network between nodes (`estimate.largest_tensor_parallel`: MI300X).

**Formats.** The weights are tried in each of `weight_dtypes` and the KV cache in each of `kv_dtypes`,
independently (an int4-weight deployment keeps a bf16 or fp8 cache). The matmuls run in the weight format when
the chip has a native rate for it and it is an 8- or 4-bit float or int8 (fp8 or int8 weights with 8-bit
activations, fp4 on Blackwell), else in bf16 (int4 weights are upcast: W4A16). The plan does not model accuracy:
list only the formats your model's quality allows.

From a terminal: `python -m scaling_lib plan` (and `estimate --input-len ... --output-len ...` for one deployment).
"""

import math
from dataclasses import asdict, dataclass, replace

from ._validate import MAX_CHIPS, at_most, choice, hourly_price, instances, positive, positive_int
from .dtypes import bytes_per_element
from .estimate import MEMORY_UTILIZATION, Deployment, largest_tensor_parallel, max_batch, offline_estimate
from .estimate import resolve_efficiency, step_estimate
from .formats import matmul_dtype, own_weight_dtype, quality_caveat, searchable
from .hardware import get_chip
from .load import TOKEN_BUDGET, Engine
from .models import get_model

# The weight formats a serving engine most often runs (bf16, fp8, int4): a search the reader can ask for with
# weight_dtypes=WEIGHT_DTYPES; by default `plan` keeps the model's own precision (`formats.own_weight_dtype`). The KV
# cache is tried in bf16 and fp8 (4-bit caches are rare in production).
WEIGHT_DTYPES = ("bf16", "fp8", "int4")
KV_DTYPES = ("bf16", "fp8")
# How a mixture of experts may be laid on a tensor-parallel group (`estimate.Deployment`): "tp" splits every expert
# and attention by heads (Megatron), "ep" puts whole experts on each chip, "dp" runs attention data-parallel, "ep+dp"
# both. -> (expert_parallel, attention_data_parallel).
MOE_LAYOUTS = {"tp": (False, False), "ep": (True, False), "dp": (False, True), "ep+dp": (True, True)}


class TargetUnreachable(ValueError):
    """No deployment searched meets a target: `target` ("ttft", "tpot", "ttft_p99", "tpot_p99", or "request_rate"
    when no deployment serves the load), the `requested` seconds (requests/s), and the `closest` value the best
    deployment reached (`deployment`, a `PlannedDeployment`)."""

    def __init__(self, target: str, requested: float, closest: float, deployment, condition: str = ""):
        self.target, self.requested, self.closest, self.deployment = target, requested, closest, deployment
        if target == "request_rate":
            super().__init__(
                f"request_rate={requested:g} requests/s is out of reach: the most any deployment searched serves "
                f"is {closest:.4g} requests/s{condition}, by {deployment.describe()}; lower the rate, raise "
                "max_chips, or add chips or faster formats to the search")
            return
        label = {"ttft": "time to first token", "tpot": "time per output token",
                 "ttft_p99": "99th-percentile time to first token",
                 "tpot_p99": "99th-percentile time per output token"}[target]
        super().__init__(
            f"{target}={requested:g} s is out of reach: the lowest {label} of any deployment searched{condition} is "
            f"{closest:.4g} s ({closest / requested:.2f}x the target), by {deployment.describe()}; relax {target}, "
            "raise max_chips, or add chips or faster formats to the search")


@dataclass(frozen=True)
class PlannedDeployment:
    """One deployment the plan priced: `replicas` copies of the model, each on `tensor_parallel` chips, each
    decoding `batch_per_replica` sequences (`batch` over the whole deployment). Seconds, tokens/s and dollars;
    the module docstring defines TTFT, TPOT and the two prices."""

    model: str
    chip: str
    n_chips: int
    tensor_parallel: int
    replicas: int
    batch: int
    batch_per_replica: int
    weight_dtype: str
    kv_dtype: str
    compute_dtype: str
    kv_placement: str
    ttft_s: float
    tpot_s: float
    output_tokens_per_s: float
    input_tokens_per_s: float
    price_per_chip_hour: float | None  # None (from price_deployment without a price): the dollars are None too
    dollars_per_million_input_tokens: float | None
    dollars_per_million_output_tokens: float | None
    dollars_per_million_output_tokens_all_in: float | None  # the whole cost of a request over its output tokens
    # Under load (`load`): the highest Poisson rate, requests/s of the whole deployment, at which it meets every
    # target of the plan (its saturation rate when there is none); p99 TTFT and TPOT at the load the plan was given
    # (or at that rate), None for the offline steady state; the one-line caveat of a weight format below 8 bits.
    max_request_rate: float | None = None
    ttft_p99_s: float | None = None
    tpot_p99_s: float | None = None
    quality_caveat: str | None = None
    # A mixture of experts served with whole experts per chip and/or attention data-parallel (`estimate.Deployment`).
    expert_parallel: bool = False
    attention_data_parallel: bool = False

    def as_dict(self) -> dict:
        """Every field, for JSON."""
        return asdict(self)

    def describe(self) -> str:
        """One line: chips, the split, the batch, the formats (a format below 8 bits with its caveat's mark, *)."""
        layout = ("; experts whole on each chip" if self.expert_parallel else "") + \
            ("; attention data-parallel" if self.attention_data_parallel else "")
        return (f"{self.replicas} replica(s) of {self.tensor_parallel}-way tensor parallelism{layout} on "
                f"{self.n_chips} x {self.chip}, batch {self.batch_per_replica} per replica, weights "
                f"{self.weight_dtype}{'*' if self.quality_caveat else ''}, KV {self.kv_dtype}")


@dataclass(frozen=True)
class Plan:
    """What `plan` found: the cheapest deployment meeting the targets (`best`), the frontier of cost
    (`dollars_per_million_output_tokens_all_in`) against TPOT over the deployments meeting the TTFT target, sorted
    by TPOT, and how many steps the search priced (`evaluated`: each an `estimate.step_estimate`). With p99 targets
    or a load (`concurrency`, `request_rate`), TTFT and TPOT are those under the load (module docstring)."""

    best: PlannedDeployment
    frontier: tuple
    input_len: int
    output_len: int
    ttft: float | None
    tpot: float | None
    evaluated: int
    ttft_p99: float | None = None
    tpot_p99: float | None = None
    concurrency: int | None = None
    request_rate: float | None = None

    def as_dict(self) -> dict:
        return {"input_len": self.input_len, "output_len": self.output_len, "ttft": self.ttft, "tpot": self.tpot,
                "ttft_p99": self.ttft_p99, "tpot_p99": self.tpot_p99, "concurrency": self.concurrency,
                "request_rate": self.request_rate, "best": self.best.as_dict(),
                "frontier": [point.as_dict() for point in self.frontier]}

    def describe(self) -> str:
        """The best deployment as a table, then the frontier, for a terminal or a notebook."""
        b = self.best
        targets = (("TTFT", self.ttft), ("TPOT", self.tpot), ("p99 TTFT", self.ttft_p99), ("p99 TPOT", self.tpot_p99))
        load = (f"{self.concurrency:,} clients (closed loop)" if self.concurrency is not None else
                f"{self.request_rate:,.4g} requests/s (Poisson arrivals)" if self.request_rate is not None else
                "as many requests as it serves (the offline steady state)")
        rows = [("model", b.model),
                ("workload", f"{self.input_len:,} prompt + {self.output_len:,} output tokens per request"),
                ("load", load),
                ("targets", ", ".join(f"{name} <= {value:g} s" for name, value in targets if value is not None)
                 or "none"),
                ("best deployment", b.describe()),
                ("time to first token (TTFT)", f"{b.ttft_s * 1e3:,.1f} ms"
                 + (f" mean, {b.ttft_p99_s * 1e3:,.1f} ms p99" if b.ttft_p99_s is not None else "")),
                ("time per output token (TPOT)", f"{b.tpot_s * 1e3:,.2f} ms"
                 + (f" mean, {b.tpot_p99_s * 1e3:,.2f} ms p99" if b.tpot_p99_s is not None else "")),
                ("output tokens/s", f"{b.output_tokens_per_s:,.0f} (all replicas)"),
                ("highest request rate", f"{b.max_request_rate:,.3g} requests/s meeting the targets (Poisson "
                                         "arrivals)" if b.max_request_rate is not None else "not computed"),
                ("$ per million input tokens", f"{b.dollars_per_million_input_tokens:,.3f}"),
                ("$ per million output tokens", f"{b.dollars_per_million_output_tokens:,.3f} (decode), "
                                                f"{b.dollars_per_million_output_tokens_all_in:,.3f} with the "
                                                f"prefill's share (at ${b.price_per_chip_hour:g} per chip-hour)")]
        width = max(len(name) for name, _ in rows)
        lines = [f"{name:<{width}}  {value}" for name, value in rows]
        lines.append(f"\nfrontier (the cheapest for each TPOT; {self.evaluated:,} iterations priced):")
        lines.append(f"  {'TPOT ms':>9}  {'TTFT ms':>9}  {'$/M out':>9}  {'max req/s':>9}  deployment")
        for p in self.frontier:
            rate = "" if p.max_request_rate is None else f"{p.max_request_rate:,.3g}"
            lines.append(f"  {p.tpot_s * 1e3:9.2f}  {p.ttft_s * 1e3:9.1f}  "
                         f"{p.dollars_per_million_output_tokens_all_in:9.3f}  {rate:>9}  {p.describe()}")
        caveats = dict.fromkeys(p.quality_caveat for p in (b, *self.frontier) if p.quality_caveat)
        lines += [f"* {caveat}" for caveat in caveats]
        return "\n".join(lines)


# ----------------------------------------------------------------------------------------------- the arguments
def _names(kind: str, values, check) -> tuple:
    """A non-empty tuple of distinct names from a string or a sequence, each accepted by `check`; a ValueError
    naming `kind` otherwise."""
    if isinstance(values, str):
        values = (values,)
    if not isinstance(values, (tuple, list)) or not values:
        raise ValueError(f"{kind} must be a name or a non-empty list of names, got {values!r}")
    try:
        return tuple(dict.fromkeys(check(value) for value in values))
    except ValueError as error:
        raise ValueError(f"{kind}: {error}") from None


def _chip_list(chips) -> tuple:
    if not isinstance(chips, (str, tuple, list)):
        chips = (chips,)  # a Chip
    return _names("chips", chips, get_chip)


def _dtype(value) -> str:
    bytes_per_element(value)
    return value


def _prices(prices, chips: tuple) -> dict:
    """{chip name: $ per chip-hour}: one number for every chip, or a mapping that names each chip searched."""
    if isinstance(prices, dict):
        table, spelled = {}, {}
        for name, price in prices.items():
            try:
                chip = get_chip(name)
            except ValueError as error:
                raise ValueError(f"prices: {error}") from None
            if chip.name in table:  # an alias and the name ('v5e' and 'tpu-v5e'): which price was meant?
                raise ValueError(f"prices names {chip.name} twice, as {spelled[chip.name]!r} and {name!r}; give each "
                                 "chip one price")
            table[chip.name], spelled[chip.name] = hourly_price(f"prices[{name!r}]", price), name
        missing = [chip.name for chip in chips if chip.name not in table]
        if missing:
            raise ValueError(f"prices has no price for {', '.join(missing)}; give every chip searched a price in $ "
                             "per chip-hour, e.g. prices={'h100': 2.5}")
        return {chip.name: float(table[chip.name]) for chip in chips}
    price = hourly_price("prices", prices)
    return {chip.name: float(price) for chip in chips}


def _target(name: str, value):
    return None if value is None else float(positive(name, value))


# ----------------------------------------------------------------------------------------------- pricing one design
class _Design:
    """One replica of one design (chip, tensor parallelism, formats), priced at any batch b, each step once."""

    def __init__(self, model, chip, tp: int, weight_dtype: str, kv_dtype: str, input_len: int, output_len: int,
                 efficiency, price: float | None, max_chips: int, compute_dtype: str | None = None,
                 memory_utilization: float = MEMORY_UTILIZATION, token_budget: int | None = TOKEN_BUDGET,
                 expert_parallel: bool = False, attention_data_parallel: bool = False):
        compute_dtype = matmul_dtype(chip, weight_dtype) if compute_dtype is None else compute_dtype
        self.deployment = Deployment(model, chip, tp, weight_dtype=weight_dtype, kv_dtype=kv_dtype,
                                     compute_dtype=compute_dtype, tensor_parallel=tp,
                                     memory_utilization=memory_utilization, expert_parallel=expert_parallel,
                                     attention_data_parallel=attention_data_parallel)
        self.i, self.o, self.eff, self.price = input_len, output_len, efficiency, price
        self.replicas = max_chips // tp
        self.mean_context = input_len + output_len / 2
        self.max_batch = max_batch(self.deployment, self.mean_context, efficiency)  # per replica (one replica)
        self.per_second = (1.0 if price is None else price) * tp / 3600.0  # dollars per second of one replica
        # breaks ties between equal costs; a mixture of experts' layout last (tensor parallelism first)
        self.order = (tp, get_chip(chip).name, weight_dtype, kv_dtype, (expert_parallel, attention_data_parallel))
        self.token_budget = token_budget
        self._steps = {}
        self._engines = {}

    def engine(self, cap: int) -> Engine:
        """The `load.Engine` of one replica admitting at most `cap` sequences, its steps priced (and cached) here."""
        if cap not in self._engines:
            front_end = 0.0 if self.eff.overlap else self.eff.for_chip(self.deployment.chip).request_s
            self._engines[cap] = Engine(lambda b, p: self._step(b, p).total_s, self.i, self.o, cap,
                                        None if self.eff.overlap else self.token_budget, bound=self.eff.overlap,
                                        request_s=front_end)
        return self._engines[cap]

    def _step(self, b: int, prefill_tokens: float):
        """One iteration of one replica (`estimate.StepEstimate`): b decodes at the mean context plus
        `prefill_tokens`."""
        key = (b, prefill_tokens)
        if key not in self._steps:
            extra = dict(prefill_tokens=prefill_tokens, prefill_len=self.i) if prefill_tokens else {}
            self._steps[key] = step_estimate(self.deployment, decode_batch=b, decode_context=self.mean_context,
                                             held_sequences=b, held_tokens_each=self.mean_context,
                                             efficiency=self.eff, **extra)
        return self._steps[key]

    def tpot(self, b: int) -> float:
        """T_iter: b decodes and the b I / (O - 1) prompt tokens of the steady state."""
        return self._step(b, b * self.i / (self.o - 1)).total_s

    def latency_s(self, b: int) -> float:
        """The collectives' latency in T_iter: constant while the same algorithms carry them."""
        return self._step(b, b * self.i / (self.o - 1)).comm_latency_s

    def ttft(self, b: int) -> float:
        """The iteration that prefills a whole prompt: b decodes and max(I, b I / (O - 1)) prompt tokens."""
        return self._step(b, max(self.i, b * self.i / (self.o - 1))).total_s

    def cost(self, b: int) -> float:
        """The whole cost of the work over its output tokens, $ per million (module docstring)."""
        return self.per_second * self.tpot(b) / (b * self.o / (self.o - 1)) * 1e6

    def key(self, b: int) -> tuple:
        """Cheapest first; among equal costs the faster, then fewer chips per replica, then by name."""
        return (self.cost(b), self.tpot(b)) + self.order

    def meets(self, b: int, ttft, tpot) -> bool:
        return (tpot is None or self.tpot(b) <= tpot) and (ttft is None or self.ttft(b) <= ttft)

    def record(self, b: int) -> PlannedDeployment:
        d, i, o = self.deployment, self.i, self.o
        iteration, decode = self.tpot(b), self._step(b, 0.0).total_s

        def priced(dollars):
            return None if self.price is None else dollars

        out_per_iteration, in_per_iteration = b * o / (o - 1), b * i / (o - 1)
        return PlannedDeployment(
            model=d.model.name, chip=d.chip.name, n_chips=self.replicas * d.tensor_parallel,
            tensor_parallel=d.tensor_parallel, replicas=self.replicas, batch=self.replicas * b, batch_per_replica=b,
            weight_dtype=d.weight_dtype, kv_dtype=d.kv_dtype, compute_dtype=d.compute_dtype,
            kv_placement=d.kv_placement, ttft_s=self.ttft(b), tpot_s=iteration,
            output_tokens_per_s=self.replicas * out_per_iteration / iteration,
            input_tokens_per_s=self.replicas * in_per_iteration / iteration, price_per_chip_hour=self.price,
            dollars_per_million_input_tokens=priced(self.per_second * (iteration - decode) / in_per_iteration * 1e6),
            dollars_per_million_output_tokens=priced(self.per_second * decode / out_per_iteration * 1e6),
            dollars_per_million_output_tokens_all_in=priced(self.cost(b)),
            quality_caveat=quality_caveat(d.weight_dtype), expert_parallel=d.expert_parallel,
            attention_data_parallel=d.attention_data_parallel)

    def record_under_load(self, replicas: int, point, max_rate: float) -> PlannedDeployment:
        """The deployment of `replicas` replicas admitting `max_batch` sequences each, at a load whose
        `load.LoadPoint` over all of them is `point`, meeting the targets up to `max_rate` requests/s per replica. Its chips are paid
        for all the time and make only the tokens the load asks for; the dollars split between prompt and output
        tokens as the steady state at the load's mean batch splits its step (module docstring)."""
        d, i, o, b = self.deployment, self.i, self.o, self.max_batch
        rate, per_second = point.request_rate, replicas * self.per_second
        mean = max(1, round(point.decode_batch))
        decode_share = self._step(mean, 0.0).total_s / self.tpot(mean)

        def priced(dollars):
            return None if self.price is None else dollars

        return PlannedDeployment(
            model=d.model.name, chip=d.chip.name, n_chips=replicas * d.tensor_parallel,
            tensor_parallel=d.tensor_parallel, replicas=replicas, batch=replicas * b, batch_per_replica=b,
            weight_dtype=d.weight_dtype, kv_dtype=d.kv_dtype, compute_dtype=d.compute_dtype,
            kv_placement=d.kv_placement, ttft_s=point.ttft_s, tpot_s=point.tpot_s,
            output_tokens_per_s=rate * o, input_tokens_per_s=rate * i, price_per_chip_hour=self.price,
            dollars_per_million_input_tokens=priced(per_second * (1 - decode_share) / (rate * i) * 1e6),
            dollars_per_million_output_tokens=priced(per_second * decode_share / (rate * o) * 1e6),
            dollars_per_million_output_tokens_all_in=priced(per_second / (rate * o) * 1e6),
            max_request_rate=replicas * max_rate, ttft_p99_s=point.ttft_p99_s, tpot_p99_s=point.tpot_p99_s,
            quality_caveat=quality_caveat(d.weight_dtype), expert_parallel=d.expert_parallel,
            attention_data_parallel=d.attention_data_parallel)

    def largest_batch_meeting(self, ttft, tpot) -> int:
        """The largest b in [1, max_batch] that meets both targets (0 if none): a bisection, since TTFT and TPOT
        grow with b."""
        if not self.meets(1, ttft, tpot):
            return 0
        low, high = 1, self.max_batch  # meets(low) holds
        if self.meets(high, ttft, tpot):
            return high
        while high - low > 1:
            middle = (low + high) // 2
            if self.meets(middle, ttft, tpot):
                low = middle
            else:
                high = middle
        return low

    def switches(self, low: int, high: int) -> list:
        """The batches b in [low, high) after which the collectives' latency changes (the estimate prices each
        collective with the algorithm NCCL would pick for its size, and a larger batch can switch it), found by
        bisection, assuming each switch happens once as the batch grows."""
        if high <= low or self.latency_s(low) == self.latency_s(high):
            return []
        if high - low == 1:
            return [low]
        middle = (low + high) // 2
        return self.switches(low, middle) + self.switches(middle, high)

    def least_cost(self) -> float:
        """The least cost per million output tokens at any batch that fits: at the largest batch, or just before a
        switch of the collectives (between switches the cost never rises with the batch; `cheapest_batch_meeting`).
        It bounds the design's cost from below in `plan`'s search."""
        return min(self.cost(b) for b in self.switches(1, self.max_batch) + [self.max_batch])

    def cheapest_batch_meeting(self, ttft, tpot) -> int:
        """The batch of least cost meeting both targets (0 if none). Between two switches of the collectives'
        algorithms, every term of the step either stays fixed or grows in proportion to the batch, so the cost
        per token never rises with the batch: the cheapest batch is the largest that meets the targets, or the
        last batch before a switch below it."""
        largest = self.largest_batch_meeting(ttft, tpot)
        if not largest:
            return 0
        return min(self.switches(1, largest) + [largest], key=self.key)

    @property
    def evaluated(self) -> int:
        return len(self._steps)


def pareto_frontier(points) -> tuple:
    """The `PlannedDeployment`s no other beats on both TPOT and cost (`dollars_per_million_output_tokens_all_in`),
    sorted by TPOT: sweep by increasing TPOT and keep each point cheaper than every point before it."""
    points = instances("points", points, PlannedDeployment, "plan.PlannedDeployment records (what plan() prices)")
    frontier, cheapest = [], math.inf
    for point in sorted(points, key=lambda p: (p.tpot_s, p.dollars_per_million_output_tokens_all_in,
                                                p.tensor_parallel, p.chip, p.weight_dtype, p.kv_dtype,
                                                p.expert_parallel, p.attention_data_parallel)):
        if point.dollars_per_million_output_tokens_all_in < cheapest:
            frontier.append(point)
            cheapest = point.dollars_per_million_output_tokens_all_in
    return tuple(frontier)


def tensor_parallel_sizes(model, max_chips: int) -> tuple:
    """The tensor-parallel group sizes `plan` tries: divisors of the model's query heads, at most `max_chips`."""
    model = get_model(model)
    max_chips = positive_int("max_chips", max_chips)
    return tuple(t for t in range(1, min(model.n_heads, max_chips) + 1) if model.n_heads % t == 0)


def plan(model, chips, max_chips: int, input_len: int, output_len: int, *, ttft: float | None = None,
         tpot: float | None = None, prices, weight_dtypes=None, kv_dtypes=KV_DTYPES, efficiency="typical",
         ttft_p99: float | None = None, tpot_p99: float | None = None, concurrency: int | None = None,
         request_rate: float | None = None, token_budget: int | None = TOKEN_BUDGET, moe_layouts=("tp",)) -> Plan:
    """The cheapest deployment of `model` on at most `max_chips` of one of `chips` that serves requests of
    `input_len` prompt and `output_len` output tokens within `ttft` seconds to the first token and `tpot` seconds
    per output token (None: no target), and the frontier of cost against TPOT (module docstring: the workload, the
    two prices, the search).

    `chips`: a chip name or a list of them. `prices`: dollars per chip-hour, one number for every chip or a dict
    {chip: price} naming each chip searched (no price is built in). `weight_dtypes`: the formats to try (None: the
    model's own precision, `formats.own_weight_dtype`; nvfp4 and mxfp4 only on chips that compute them);
    `kv_dtypes` likewise. `efficiency`: "typical" (the calibrated estimate, chapter 11), None (the bound) or an
    `estimate.Efficiency`. Under load (module docstring, *Under load*): `ttft_p99`, `tpot_p99` (MLPerf-style
    percentile targets), and the load, `concurrency` clients or Poisson arrivals at `request_rate` requests/s
    (at most one); `token_budget`: the engine's tokens per step (`load.TOKEN_BUDGET`). `moe_layouts`: for a mixture
    of experts, the layouts to try on each tensor-parallel group (`MOE_LAYOUTS`: "tp", "ep", "dp", "ep+dp"; "ep"
    where the group size divides the routed experts; the others only on groups of 2 or more chips); a dense model
    takes "tp" alone. Every deployment returned
    carries `max_request_rate`. Raises `TargetUnreachable` (a ValueError) naming the target no deployment meets and
    how close the best came; ValueError for a bad argument or a model that fits nowhere.

    Defined in the appendix *Apply the book to your model*.
    """
    model = get_model(model)
    chip_list = _chip_list(chips)
    max_chips = at_most("max_chips", positive_int("max_chips", max_chips), MAX_CHIPS, "more chips than any machine "
                        "has")
    input_len = positive_int("input_len", input_len)
    output_len = positive_int("output_len", output_len)
    if output_len < 2:
        raise ValueError(f"output_len={output_len}: the plan prices continuous batching, which needs at least 2 "
                         "output tokens per request (the first comes from the prefill)")
    ttft, tpot = _target("ttft", ttft), _target("tpot", tpot)
    ttft_p99, tpot_p99 = _target("ttft_p99", ttft_p99), _target("tpot_p99", tpot_p99)
    if concurrency is not None and request_rate is not None:
        raise ValueError(f"give one load, concurrency={concurrency!r} (closed loop) or request_rate={request_rate!r} "
                         "(Poisson arrivals), not both")
    concurrency = None if concurrency is None else positive_int("concurrency", concurrency)
    request_rate = _target("request_rate", request_rate)
    if token_budget is not None:
        positive_int("token_budget", token_budget)
    price_of = _prices(prices, chip_list)
    weights = (own_weight_dtype(model),) if weight_dtypes is None else _names("weight_dtypes", weight_dtypes, _dtype)
    caches = _names("kv_dtypes", kv_dtypes, _dtype)
    eff = resolve_efficiency(efficiency)
    layouts = _names("moe_layouts", moe_layouts, lambda name: choice("moe_layouts", name, tuple(MOE_LAYOUTS)))
    if model.n_experts == 1 and set(layouts) != {"tp"}:
        raise ValueError(f"moe_layouts={layouts!r}: {model.name} is dense, with no experts to lay out; use "
                         "moe_layouts=('tp',)")
    designs = []
    for chip in chip_list:
        domain = largest_tensor_parallel(chip)  # a group across nodes whose network no source gives is not searched
        for tp in (t for t in tensor_parallel_sizes(model, max_chips) if domain is None or t <= domain):
            for layout in (name for name in layouts if _lays_out(model, tp, name)):
                for weight_dtype in (w for w in weights if searchable(chip, w)):
                    for kv_dtype in caches:
                        design = _Design(model, chip, tp, weight_dtype, kv_dtype, input_len, output_len, eff,
                                         price_of[chip.name], max_chips, token_budget=token_budget,
                                         expert_parallel=MOE_LAYOUTS[layout][0],
                                         attention_data_parallel=MOE_LAYOUTS[layout][1])
                        if design.max_batch >= 1:
                            designs.append(design)
    if not designs:
        raise ValueError(f"max_chips={max_chips}: {model.name} does not fit on {max_chips} x "
                         f"{' or '.join(chip.name for chip in chip_list)} with weights in any of {', '.join(weights)} "
                         f"(nvfp4 and mxfp4 only on chips that compute them) and a {input_len + output_len:,}-token "
                         "request; raise max_chips or add a smaller format")
    common = dict(input_len=input_len, output_len=output_len, ttft=ttft, tpot=tpot, ttft_p99=ttft_p99,
                  tpot_p99=tpot_p99, concurrency=concurrency, request_rate=request_rate)
    if ttft_p99 is not None or tpot_p99 is not None or concurrency is not None or request_rate is not None:
        targets = dict(ttft=ttft, tpot=tpot, ttft_p99=ttft_p99, tpot_p99=tpot_p99)
        best, frontier = _under_load(designs, targets, concurrency, request_rate)
        return Plan(best=best, frontier=frontier, evaluated=sum(design.evaluated for design in designs), **common)
    _check_reachable(designs, ttft, tpot)
    best, best_batch = _cheapest(designs, ttft, tpot)
    by_name = {design.order: design for design in designs}
    frontier = tuple(_with_rate(by_name[p.tensor_parallel, p.chip, p.weight_dtype, p.kv_dtype,
                                        (p.expert_parallel, p.attention_data_parallel)], p.batch_per_replica, ttft, tpot)
                     for p in _frontier(designs, ttft, {id(best): best_batch}))
    return Plan(best=_with_rate(best, best_batch, ttft, tpot), frontier=frontier,
                evaluated=sum(design.evaluated for design in designs), **common)


def _lays_out(model, tp: int, layout: str) -> bool:
    """Whether `plan` tries `layout` (`MOE_LAYOUTS`) on a tensor-parallel group of `tp` chips: tensor parallelism
    always; the others on 2 chips or more (on one chip they are tensor parallelism), whole experts only where the
    group divides the routed experts."""
    expert, data = MOE_LAYOUTS[layout]
    return not (expert or data) or (tp > 1 and (not expert or model.n_experts % tp == 0))


def _with_rate(design, batch: int, ttft, tpot) -> PlannedDeployment:
    """`design.record(batch)` with its `max_request_rate`: the highest Poisson rate at which `batch` sequences per
    replica meet the mean targets under load (`load.Engine.max_request_rate`), over all replicas."""
    rate = design.engine(batch).max_request_rate(ttft=ttft, tpot=tpot)
    return replace(design.record(batch), max_request_rate=design.replicas * rate)


def _cheapest(designs, ttft, tpot) -> tuple:
    """(design, batch) of the least `_Design.key` meeting the targets. Branch and bound: a design's least cost
    (`_Design.least_cost`) bounds its cost under the targets from below; designs are visited from the lowest bound
    up, and the search stops at the first whose bound is above the best deployment found."""
    feasible = sorted((design for design in designs if design.meets(1, ttft, tpot)), key=_Design.least_cost)
    best, best_batch = None, 0
    for design in feasible:
        if best is not None and design.least_cost() > best.cost(best_batch):
            break
        batch = design.cheapest_batch_meeting(ttft, tpot)
        if best is None or design.key(batch) < best.key(best_batch):
            best, best_batch = design, batch
    return best, best_batch


def _frontier(designs, ttft, known: dict) -> tuple:
    """The Pareto frontier of cost against TPOT over each design's batches 1, 2, 4, ... and the largest that fits
    (those meeting the TTFT target), plus the best deployment. A design whose every point is beaten on both axes by
    a point already found (one with a lower TPOT than the design's batch of 1 and a lower cost than its least,
    `_Design.least_cost`) is skipped."""
    points = []  # (tpot, cost, design, batch)
    for design, batch in ((d, b) for d in designs for b in (1, d.max_batch, known.get(id(d), 0)) if b):
        if design.meets(batch, ttft, None):
            points.append((design.tpot(batch), design.cost(batch), design, batch))
    for design in sorted(designs, key=lambda design: design.tpot(1)):
        fastest, cheapest = design.tpot(1), design.least_cost()
        if any(tpot < fastest and cost < cheapest for tpot, cost, _, _ in points):
            continue
        for k in range(1, design.max_batch.bit_length()):
            batch = 1 << k
            if batch < design.max_batch and design.meets(batch, ttft, None):
                points.append((design.tpot(batch), design.cost(batch), design, batch))
    unique = {(id(design), batch): (design, batch) for _, _, design, batch in points}
    return pareto_frontier(design.record(batch) for design, batch in unique.values())


# ----------------------------------------------------------------------------------------------- under load
def _under_load(designs, targets: dict, concurrency, request_rate) -> tuple:
    """(best, frontier) when the targets include percentiles or the plan is given a load (module docstring, *Under
    load*). Each design admits the largest batch that fits. Without a load it runs at the highest Poisson rate
    meeting the targets, and its chips' cost is shared by the tokens that rate makes; with a load it runs the
    fewest replicas (at most max_chips / t) that meet the targets at that load, and the load's tokens share their
    cost. Branch and bound on the cost at the saturation rate (a floor: no design runs faster). The frontier: each
    design at that operating point, and with a load at more replicas too (1, 2, 4, ... times as many), faster and
    dearer."""
    found = []  # (cost, tpot, order, record)
    for design in sorted(designs, key=lambda d: _cost_floor(d, concurrency, request_rate)):
        if found and _cost_floor(design, concurrency, request_rate) > min(found)[0]:
            break
        for record in _operating_points(design, targets, concurrency, request_rate, first_only=True):
            found.append((record.dollars_per_million_output_tokens_all_in, record.tpot_s, design.order, record))
    if not found:
        raise _unreachable_under_load(designs, targets, concurrency, request_rate)
    best = min(found, key=lambda entry: entry[:3])[3]
    points, seen = [entry[3] for entry in found], {id(entry[3]) for entry in found}
    for design in sorted(designs, key=lambda d: d.engine(d.max_batch).iteration(1)):
        fastest, floor = design.engine(design.max_batch).iteration(1), _cost_floor(design, concurrency, request_rate)
        if any(p.tpot_s < fastest and p.dollars_per_million_output_tokens_all_in < floor for p in points):
            continue
        points += [p for p in _operating_points(design, targets, concurrency, request_rate) if id(p) not in seen]
    return best, pareto_frontier(points)


def _cost_floor(design, concurrency, request_rate) -> float:
    """The least $ per million output tokens `design` could reach under load: its replicas at their saturation
    rate (with a Poisson load, as many replicas as that load needs at least)."""
    saturation = design.engine(design.max_batch).saturation_rate()
    replicas = 1 if request_rate is None else max(1, math.ceil(request_rate / saturation))
    rate = saturation if request_rate is None else request_rate / replicas
    return design.per_second / (min(rate, saturation) * design.o) * 1e6


def _operating_points(design, targets: dict, concurrency, request_rate, first_only: bool = False) -> list:
    """The records of `design` meeting `targets` under the load: without a load, at its highest rate meeting
    them on all its replicas; with one, at the fewest replicas that do (and, unless `first_only`, at 2, 4, ... times
    as many, up to max_chips / t)."""
    engine = design.engine(design.max_batch)
    per_replica = engine.max_request_rate(**targets)
    if concurrency is None and request_rate is None:
        if per_replica <= 0:
            return []
        point = engine.open_loop(per_replica * (1 - 1e-9)) if per_replica >= engine.saturation_rate() else \
            engine.open_loop(per_replica)
        return [design.record_under_load(design.replicas, point.replicated(design.replicas), per_replica)]
    fewest = _fewest_replicas(design, engine, targets, concurrency, request_rate, per_replica)
    if fewest is None:
        return []
    counts = [fewest] if first_only else sorted({min(fewest * 2**k, design.replicas) for k in range(31)})
    records = []
    for replicas in counts:
        point = engine.closed_loops(concurrency, replicas) if concurrency is not None else \
            engine.open_loop(request_rate / replicas).replicated(replicas)
        records.append(design.record_under_load(replicas, point, per_replica))
    return records


def _fewest_replicas(design, engine, targets, concurrency, request_rate, per_replica) -> int | None:
    """The fewest replicas (at most max_chips / t) meeting `targets` at the load; None if none does."""
    if request_rate is not None:
        if per_replica <= 0:
            return None
        fewest = max(1, math.ceil(request_rate / per_replica * (1 - 1e-12)))
        while fewest <= design.replicas and not _meets(engine.open_loop(request_rate / fewest)
                                                       if request_rate / fewest < engine.saturation_rate() else None,
                                                       targets):
            fewest += 1
        return fewest if fewest <= design.replicas else None
    low, high = 0, design.replicas  # more replicas, fewer clients each: every latency falls
    if not _meets(engine.closed_loops(concurrency, high), targets):
        return None
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if _meets(engine.closed_loops(concurrency, middle), targets) else (middle, high)
    return high


def _meets(point, targets: dict) -> bool:
    return point is not None and all(value is None or getattr(point, f"{name}_s") <= value
                                     for name, value in targets.items())


def _unreachable_under_load(designs, targets: dict, concurrency, request_rate) -> "TargetUnreachable":
    """TargetUnreachable for the first target (in the order ttft, tpot, ttft_p99, tpot_p99) that no design meets
    at a trickle of requests (or at the load, when one is given), with the closest any design came."""
    serving = [d for d in designs
               if request_rate is None or request_rate / d.replicas < d.engine(d.max_batch).saturation_rate()]
    if not serving:
        fastest = max(designs, key=lambda d: d.replicas * d.engine(d.max_batch).saturation_rate())
        most = fastest.replicas * fastest.engine(fastest.max_batch).saturation_rate()
        return TargetUnreachable("request_rate", request_rate, most, fastest.record(fastest.max_batch),
                                 " at saturation")
    points = []
    for design in serving:
        engine = design.engine(design.max_batch)
        if concurrency is not None:
            point, replicas = engine.closed_loops(concurrency, design.replicas), design.replicas
        elif request_rate is not None:
            point = engine.open_loop(request_rate / design.replicas).replicated(design.replicas)
            replicas = design.replicas
        else:
            point, replicas = engine.open_loop(engine.saturation_rate() * 1e-6), 1
        points.append((point, design, replicas))
    given = {name: value for name, value in targets.items() if value is not None}

    def worst(entry):  # the target this point misses most, and by how much
        return max((getattr(entry[0], f"{name}_s") / value, name) for name, value in given.items())

    closest, design, replicas = min(points, key=worst)
    name = worst((closest, design, replicas))[1]
    load = " at the load" if concurrency is not None or request_rate is not None else ""
    front_end = design.engine(design.max_batch).request_s
    if name.startswith("ttft") and front_end:
        load += f" ({front_end * 1e3:.0f} ms of each first token in the server's front end, which no chip shortens)"
    return TargetUnreachable(name, given[name], getattr(closest, f"{name}_s"),
                             design.record_under_load(replicas, closest, 0.0), load)

def price_deployment(model, chip, n_chips: int, input_len: int, output_len: int, *,
                     tensor_parallel: int | None = None, batch: int | None = None, weight_dtype: str = "bf16",
                     kv_dtype: str = "bf16", compute_dtype: str | None = None,
                     price_per_chip_hour: float | None = None, efficiency="typical",
                     memory_utilization: float = MEMORY_UTILIZATION, expert_parallel: bool = False,
                     attention_data_parallel: bool = False) -> PlannedDeployment:
    """One deployment priced as `plan` prices each it searches: TTFT, TPOT, output tokens/s and the two prices
    (module docstring), for n_chips / tensor_parallel replicas (tensor_parallel None: one replica of all n_chips)
    decoding `batch` sequences in all (None: the most that fit at the mean context, `estimate.max_batch`).
    compute_dtype None: `plan`'s rule (the weight format where native and 8 bits or fewer, else bf16). Without a
    price the dollar fields are None. `expert_parallel`, `attention_data_parallel`: a mixture of experts served as
    `estimate.Deployment` says. Behind `python -m scaling_lib estimate --input-len ... --output-len ...`.
    """
    chip = get_chip(chip)
    n_chips = positive_int("n_chips", n_chips)
    tp = n_chips if tensor_parallel is None else positive_int("tensor_parallel", tensor_parallel)
    if price_per_chip_hour is not None:
        price_per_chip_hour = float(hourly_price("price_per_chip_hour", price_per_chip_hour))
    whole = Deployment(model, chip, n_chips, weight_dtype=weight_dtype, kv_dtype=kv_dtype, tensor_parallel=tp,
                       compute_dtype=matmul_dtype(chip, _dtype(weight_dtype)) if compute_dtype is None
                       else compute_dtype, memory_utilization=memory_utilization, expert_parallel=expert_parallel,
                       attention_data_parallel=attention_data_parallel)
    per_replica = None
    if batch is not None:
        per_replica = positive_int("batch", batch) // whole.replicas
        if per_replica * whole.replicas != batch:
            raise ValueError(f"batch={batch} does not split over {whole.replicas} replicas; use a multiple of "
                             f"{whole.replicas}")
    # validates the workload, the batch and its memory, with the estimate's own messages
    run = offline_estimate(whole, input_len, output_len, efficiency, slots=per_replica)
    design = _Design(whole.model, chip, tp, whole.weight_dtype, whole.kv_dtype, run.input_len, run.output_len,
                     resolve_efficiency(efficiency), price_per_chip_hour, n_chips, whole.compute_dtype,
                     whole.memory_utilization, expert_parallel=expert_parallel,
                     attention_data_parallel=attention_data_parallel)
    return _with_rate(design, run.batch, None, None)


def _check_reachable(designs, ttft, tpot):
    """TargetUnreachable when no design meets the targets at batch 1 (where TTFT and TPOT are smallest): the TTFT
    target if no design meets it, else the TPOT target among the designs that meet the TTFT one."""
    if any(design.meets(1, ttft, tpot) for design in designs):
        return
    fastest = min(designs, key=lambda design: design.ttft(1))
    if ttft is not None and fastest.ttft(1) > ttft:
        raise TargetUnreachable("ttft", ttft, fastest.ttft(1), fastest.record(1))
    within = [design for design in designs if design.meets(1, ttft, None)]
    closest = min(within, key=lambda design: design.tpot(1))
    condition = "" if ttft is None else f" with a time to first token within {ttft:g} s"
    raise TargetUnreachable("tpot", tpot, closest.tpot(1), closest.record(1), condition)
