"""The estimate set against published measurements: predictions per row, the fit of `estimate.TYPICAL`, its check.

Every published row (`measurements`) gets a prediction from `estimate`:

- a TensorRT-LLM row is an `estimate.offline_throughput` (fp8 weights and math; the KV-cache dtype is an assumption,
  fp8 by default, since the page does not state it);
- a Pope et al. row is a prefill (`estimate.prefill`) or 64 decode steps (`estimate.decode_time`) with the paper's
  chip count, batch, feed-forward layout and attention sharding.

Rows are compared as speeds (tokens/s, or 1 / latency), so `ratio` = predicted / measured is at least 1 for the
bound, and 1 / ratio is the fraction of the bound the system achieved.

Calibration (`fit_typical`) picks the `Efficiency` that minimises the sum of squared log ratios over the
calibration rows: TensorRT-LLM on H100 and Pope et al.'s PaLM 540B rows. The validation rows are the rest:
TensorRT-LLM on H200 (same engine, held-out chip) and PaLM 62B (same system, held-out model).
Used in chapter 11, *How close do real systems come?*.
"""

import functools
import math
import statistics
from dataclasses import dataclass

from ._validate import choice, fraction, positive_int
from .dtypes import bytes_per_element
from .estimate import (Deployment, Efficiency, decode_step, decode_time, offline_estimate, prefill,
                       resolve_efficiency)
from .measurements import PopeRow, ThroughputRow, pope_rows, trtllm_rows

SPLITS = ("calibration", "validation")


@dataclass(frozen=True)
class Comparison:
    """One published row beside its prediction, both as speeds (tokens/s, or 1 / seconds)."""

    label: str
    system: str  # "TensorRT-LLM" or "Pope et al."
    shape: str  # the workload: "128/2048" (input/output) or "prefill" / "decode"
    split: str  # "calibration" or "validation"
    measured: float
    predicted: float
    dominant: str  # the largest term of the predicted step: weights, kv, flops or communication
    row: object

    @property
    def ratio(self) -> float:
        """predicted / measured speed: >= 1 for a bound; 1 / ratio is the achieved fraction of the prediction."""
        return self.predicted / self.measured


def split_of(row) -> str:
    """Calibration rows: TensorRT-LLM on H100 and PaLM 540B; the rest validate."""
    if isinstance(row, ThroughputRow):
        return "calibration" if row.gpu == "h100" else "validation"
    return "calibration" if row.model == "palm-540b" else "validation"


@functools.lru_cache(maxsize=None)
def trtllm_deployment(row: ThroughputRow, kv_dtype: str = "fp8") -> Deployment:
    """The deployment of a TensorRT-LLM row: fp8 weights and math (ModelOpt FP8 checkpoints), `kv_dtype` cache."""
    return Deployment(row.model, row.gpu, row.n_gpus, weight_dtype=row.weight_dtype, kv_dtype=kv_dtype,
                      compute_dtype="fp8", tensor_parallel=row.tensor_parallel)


@functools.lru_cache(maxsize=None)
def pope_deployment(row: PopeRow) -> Deployment:
    """The deployment of a Pope et al. row: their layout, their attention sharding (over batch: a batch-split KV
    cache; over heads: the one multiquery KV head replicated on every chip), bf16 math."""
    placement = "batch-split" if row.attention_sharding == "batch" else "replicated"
    return Deployment(row.model, row.chip, row.chips, weight_dtype=row.weight_dtype, ffn_layout=row.ffn_layout,
                      kv_placement=placement)


def predicted_latency(row: PopeRow, efficiency=None) -> float:
    """Seconds the estimate gives for a Pope et al. row: one prefill of batch x context, or 64 decode steps."""
    d = pope_deployment(row)
    if row.phase == "prefill":
        return prefill(d, row.context_len, row.batch, efficiency).total_s
    return decode_time(d, row.batch, row.context_len, row.decode_steps, efficiency)


def compare(row, efficiency=None, kv_dtype: str = "fp8") -> Comparison:
    """A `Comparison` for one row of `measurements.trtllm_rows()` or `measurements.pope_rows()`.

    Used in chapter 11, *How close do real systems come?*.
    """
    bytes_per_element(kv_dtype)
    if isinstance(row, ThroughputRow):
        estimate = offline_estimate(trtllm_deployment(row, kv_dtype), row.input_len, row.output_len, efficiency)
        return Comparison(row.label, "TensorRT-LLM", f"{row.input_len}/{row.output_len}", split_of(row),
                          row.output_tokens_per_s, estimate.output_tokens_per_s, estimate.step.bound, row)
    d = pope_deployment(row)
    step = (prefill(d, row.context_len, row.batch, efficiency) if row.phase == "prefill"
            else decode_step(d, row.batch, row.context_len + 1, efficiency))
    return Comparison(row.label, "Pope et al.", row.phase, split_of(row), 1.0 / row.latency_s,
                      1.0 / predicted_latency(row, efficiency), step.bound, row)


def all_rows() -> tuple:
    """Every published row: the 40 TensorRT-LLM rows, then Pope et al.'s 8."""
    return trtllm_rows() + pope_rows()


def comparisons(efficiency=None, split: str | None = None, kv_dtype: str = "fp8") -> tuple:
    """`compare` for every row (or only those of `split`).

    Used in chapter 11, *How close do real systems come?*.
    """
    bytes_per_element(kv_dtype)
    if split is not None:
        choice("split", split, SPLITS)
    return tuple(compare(row, efficiency, kv_dtype) for row in all_rows() if split in (None, split_of(row)))


def fit_efficiency(ratio_of, fields=("mfu", "hbm", "network"), rounds: int = 3, low: float = 0.02) -> Efficiency:
    """The Efficiency minimising sum(log(ratio)^2), where `ratio_of(efficiency)` returns the predicted / measured
    ratios of the rows being fitted; fields not in `fields` stay 1.0. Rounded to 0.01.

    Coordinate descent: a golden-section search on each field in [low, 1] in turn, `rounds` times, from 0.5.
    Deterministic.

    Used in chapter 11, *How close do real systems come?*.
    """
    rounds = positive_int("rounds", rounds)
    fraction("low", low, "the smallest efficiency searched")
    values = {name: 0.5 for name in fields}
    golden = (math.sqrt(5) - 1) / 2

    def loss(candidate):
        return sum(math.log(r) ** 2 for r in ratio_of(Efficiency(**candidate)))

    for _ in range(rounds):
        for name in fields:
            a, b = low, 1.0
            c, d = b - golden * (b - a), a + golden * (b - a)
            fc, fd = loss({**values, name: c}), loss({**values, name: d})
            for _ in range(18):
                if fc < fd:
                    b, d, fd = d, c, fc
                    c = b - golden * (b - a)
                    fc = loss({**values, name: c})
                else:
                    a, c, fc = c, d, fd
                    d = a + golden * (b - a)
                    fd = loss({**values, name: d})
            values[name] = (a + b) / 2
    return Efficiency(**{name: round(value, 2) for name, value in values.items()})


def fit_typical() -> Efficiency:
    """`fit_efficiency` of mfu, hbm and network over the calibration rows (`split_of`); `estimate.TYPICAL` stores
    its result.

    Used in chapter 11, *How close do real systems come?*.
    """
    return _fit_typical()


@functools.cache  # a pure function of the published rows: fitted once per process
def _fit_typical() -> Efficiency:
    rows = [row for row in all_rows() if split_of(row) == "calibration"]
    return fit_efficiency(lambda efficiency: [compare(row, efficiency).ratio for row in rows], low=0.05)


@dataclass(frozen=True)
class RatioSummary:
    """Median and worst predicted / measured ratio of a set of comparisons (worst = farthest from 1 either way)."""

    n_rows: int
    median: float
    worst: float
    worst_label: str

    @property
    def worst_factor(self) -> float:
        """max(worst, 1 / worst): how many times off the worst row is."""
        return max(self.worst, 1.0 / self.worst)


def summarize(items) -> RatioSummary:
    """The median and the worst (farthest from 1 in log) measured / predicted ratio of some comparisons.

    Used in chapter 11, *How close do real systems come?*.
    """
    items = tuple(items)
    if not items:
        raise ValueError("no comparisons to summarize; pass at least one")
    worst = max(items, key=lambda c: abs(math.log(c.ratio)))
    return RatioSummary(len(items), statistics.median(c.ratio for c in items), worst.ratio, worst.label)


def validation_summary(efficiency="typical") -> RatioSummary:
    """Median and worst ratio of the `efficiency` estimate on the validation rows (chapter 11's headline).

    Used in chapter 11, *How close do real systems come?*.
    """
    return summarize(comparisons(resolve_efficiency(efficiency), "validation"))
