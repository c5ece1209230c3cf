"""The estimate set against published measurements: predictions per row, the fit of `estimate.TYPICAL`, its check.

Every published row (`measurements`) gets a prediction from `estimate`:

- a TensorRT-LLM offline row is an `estimate.offline_estimate` (the engine picks the batch; the older table's
  KV-cache dtype is an assumption, fp8 by default, since its page does not state it); a JetStream row
  (`offline_b`) the same at the stated slots;
- a static-batch row is one prefill of the batch, then output_len - 1 decode steps (`estimate.prefill`,
  `estimate.decode_time`); a first-token row is one prefill at batch 1;
- a Pope et al. row is a prefill or 64 decode steps with the paper's chip count, batch, feed-forward layout and
  attention sharding.

Rows are compared as speeds (tokens/s, or 1 / seconds), so `ratio` = predicted / measured is at least 1 for the
bound, and 1 / ratio is the fraction of the bound the system achieved.

**The split** (`split_of`), fixed before any fit: the project's earlier rows keep their roles (TensorRT-LLM on H100
and PaLM 540B calibrate; TensorRT-LLM on H200 and PaLM 62B validate). The published runs are grouped by
(GPU or TPU, tensor-parallel degree, dense or MoE, weight precision); within each group, in a stable order (model,
chip, kind, input and output length, batch, engine), every third row starting with the second is held out for
validation, so every group of two rows or more has validation rows.

**The fit** (`fit_typical`) picks, separately for NVIDIA GPUs, AMD GPUs and TPUs, the efficiencies of
`estimate.Efficiency` (`FIELDS`: the matmul, weight-streaming, KV and collective rates, the collective latency scale,
the host's cost per step and per sequence, the tensor-parallel layers' cost and an eager step's launches) that
minimise the sum of squared log ratios over the calibration rows only, those measured apart held
(`measured_efficiencies`); `uncertainty` bootstraps their joint spread. `validation_metrics` reports the fitted
estimate on the validation rows.

Used in chapter 11, *How close do real systems come?*.
"""

import functools
import math
import random
import statistics
from dataclasses import dataclass, replace

from ._validate import at_most, choice, fraction, positive_int
from .collectives import bus_bandwidth, collective_time
from .dtypes import bytes_per_element
from .efficiency import PHYSICAL_RANGES, PLATFORMS
from .efficiency import platform_of_chip as _platform_of_chip
from .estimate import (MAX_SEQUENCES, MEMORY_UTILIZATION, Calibrated, Deployment, Efficiency, decode_step, decode_time,
                       max_batch, offline_estimate, prefill, resolve_efficiency, step_estimate)
from .hardware import get_chip
from ._least_squares import Solution, bounded_least_squares
from .load import deployment_engine
from .measurements import (EXPERT_PARALLELISM_ALONE, PopeRow, RunRow, ThroughputRow, collective_rows, decode_step_rows,
                           gathered_runs, nccl_rows, pope_rows, published_runs, sweep_rows, trtllm_rows,
                           validation_runs)
from .memory import param_bytes
from .models import get_model

SPLITS = ("calibration", "validation")
# The efficiencies the fit moves, and the physical range each is searched in (`efficiency.PHYSICAL_RANGES`, with the
# evidence for each end).
FIELDS = ("mfu", "hbm", "kv_hbm", "network", "latency", "overhead_s", "layer_s", "launch_s", "sequence_s")
RANGES = PHYSICAL_RANGES
TIME_FIELDS = ("overhead_s", "layer_s", "launch_s", "sequence_s")  # fixed times: searched from zero as well
_ROUND = {"mfu": 2, "hbm": 2, "kv_hbm": 2, "network": 2, "latency": 2, "overhead_s": 5, "layer_s": 6, "launch_s": 6,
          "sequence_s": 7, "request_s": 3}
ROW_TYPES = (ThroughputRow, PopeRow, RunRow)


@dataclass(frozen=True)
class Comparison:
    """One published row beside its prediction, both as speeds (tokens/s, or 1 / seconds)."""

    label: str
    system: str  # "TensorRT-LLM", "vLLM", "JetStream" or "Pope et al."
    shape: str  # the workload: "128/2048" (input/output) or "prefill" / "decode"
    split: str  # "calibration" or "validation"
    measured: float
    predicted: float
    dominant: str  # the largest term of the predicted step: weights, kv, flops or communication
    row: object
    step: object = None  # the StepEstimate `dominant` was read from

    @property
    def ratio(self) -> float:
        """predicted / measured speed: >= 1 for a bound; 1 / ratio is the achieved fraction of the prediction."""
        return self.predicted / self.measured


def _check_row(row, function: str):
    if not isinstance(row, ROW_TYPES):
        raise ValueError(f"row must be a published row (measurements.trtllm_rows(), pope_rows() or published_runs()) "
                         f"for calibration.{function}, got {row!r}")
    return row


def platform_of(row) -> str:
    """"tpu" for a row measured on a TPU torus, "amd" on an AMD GPU, "gpu" on an NVIDIA GPU
    (`efficiency.platform_of_chip`).

    Defined in chapter 11, *How close do real systems come?*.
    """
    _check_row(row, "platform_of")
    return _platform_of_chip(row.gpu if isinstance(row, ThroughputRow) else row.chip)


def group_of(row) -> tuple:
    """(platform, tensor-parallel degree, "dense" or "moe", weight precision): the strata of the split and of the
    validation report.

    Defined in chapter 11, *How close do real systems come?*.
    """
    _check_row(row, "group_of")
    if isinstance(row, ThroughputRow):
        model, tp, weights = row.model, row.tensor_parallel, row.weight_dtype
    elif isinstance(row, PopeRow):
        model, tp, weights = row.model, row.chips, row.weight_dtype
    else:
        model, tp, weights = row.model, row.tensor_parallel, row.weights
    kind = "moe" if get_model(model).n_experts > 1 else "dense"
    return platform_of(row), tp, kind, weights


def _stable_key(row: RunRow) -> tuple:
    return (row.model, row.chip, row.kind, row.input_len, row.output_len, row.batch or 0, row.n_chips, row.engine,
            row.measured)


@functools.cache
def _run_splits() -> dict:
    """label -> split for the published runs: every third row of each group, from the second, validates."""
    groups = {}
    for row in published_runs() + gathered_runs():
        groups.setdefault(group_of(row), []).append(row)
    splits = {}
    for rows in groups.values():
        for index, row in enumerate(sorted(rows, key=_stable_key)):
            splits[row.label] = "validation" if index % 3 == 1 else "calibration"
    return splits


def split_of(row) -> str:
    """"calibration" or "validation" (module docstring): TensorRT-LLM's earlier H100 rows and PaLM 540B calibrate,
    its H200 rows and PaLM 62B validate; the published runs by the stratified every-third rule.

    Defined in chapter 11, *How close do real systems come?*.
    """
    _check_row(row, "split_of")
    if isinstance(row, ThroughputRow):
        return "calibration" if row.gpu == "h100" else "validation"
    if isinstance(row, PopeRow):
        return "calibration" if row.model == "palm-540b" else "validation"
    splits = _run_splits()
    if row.label not in splits:
        raise ValueError(f"row {row.label!r} is not one of measurements.published_runs() or gathered_runs(), so it has "
                         "no split; pass a row of either (a run of validation_runs() is scored by "
                         "calibration.out_of_sample(); any other run is priced by calibration.row_model(row))")
    return splits[row.label]


# TensorRT-LLM gives its KV cache a fraction of the memory left free once the weights are loaded
# (`kv_cache_free_gpu_mem_fraction`, default 0.9: TensorRT-LLM documentation, "Useful runtime options"), where vLLM
# takes a fraction of all of HBM. As a `Deployment.memory_utilization` that is (weights + 0.9 x free) / HBM.
TRTLLM_FREE_FRACTION = 0.9
# Before it sizes the cache, the engine holds its activations, runtime buffers and the CUDA context. TensorRT-LLM's
# memory documentation (docs/source/reference/memory.md, "How to debug the memory usage") prints an example: a
# 6,695 MiB engine on a GPU with 79.10 GiB in all leaves 70.48 GiB available for the cache, so the runtime held the
# difference, about 2.1 GiB, besides the weights.
_EXAMPLE_TOTAL, _EXAMPLE_ENGINE, _EXAMPLE_AVAILABLE = 79.10 * 2**30, 6695 * 2**20, 70.48 * 2**30
TRTLLM_RUNTIME_BYTES = _EXAMPLE_TOTAL - _EXAMPLE_ENGINE - _EXAMPLE_AVAILABLE


def trtllm_memory_utilization(model, chip, weight_dtype: str, tensor_parallel: int) -> float:
    """`memory_utilization` equivalent to TensorRT-LLM's rule: (W + 0.9 (C - W - R)) / C for W weight bytes per chip,
    C bytes of HBM and R the runtime's own bytes (`TRTLLM_RUNTIME_BYTES`); 1.0 when the weights alone fill the chip
    (the deployment is then refused anyway).

    Defined in chapter 11, *How close do real systems come?*.
    """
    capacity = get_chip(chip).hbm_capacity
    weights = param_bytes(get_model(model), weight_dtype) / positive_int("tensor_parallel", tensor_parallel)
    free = max(0.0, capacity - weights - TRTLLM_RUNTIME_BYTES)
    return min(1.0, (weights + TRTLLM_FREE_FRACTION * free) / capacity)


@functools.lru_cache(maxsize=None)
def trtllm_deployment(row: ThroughputRow, kv_dtype: str = "fp8") -> Deployment:
    """The deployment of a TensorRT-LLM row: fp8 weights and math (ModelOpt FP8 checkpoints), `kv_dtype` cache,
    TensorRT-LLM's memory rule (`trtllm_memory_utilization`)."""
    return Deployment(row.model, row.gpu, row.n_gpus, weight_dtype=row.weight_dtype, kv_dtype=kv_dtype,
                      compute_dtype="fp8", tensor_parallel=row.tensor_parallel,
                      memory_utilization=trtllm_memory_utilization(row.model, row.gpu, row.weight_dtype,
                                                                   row.tensor_parallel))


@functools.lru_cache(maxsize=None)
def pope_deployment(row: PopeRow) -> Deployment:
    """The deployment of a Pope et al. row: their layout, their attention sharding (over batch: a batch-split KV
    cache; over heads: the one multiquery KV head replicated on every chip), bf16 math."""
    placement = "batch-split" if row.attention_sharding == "batch" else "replicated"
    return Deployment(row.model, row.chip, row.chips, weight_dtype=row.weight_dtype, ffn_layout=row.ffn_layout,
                      kv_placement=placement)


# A run's note says how its page served a mixture of experts (TensorRT-LLM v1.0's MoE options).
SERVED_WITH_DATA_PARALLEL_ATTENTION_AND_EXPERTS = "attention data parallelism and expert parallelism"


@functools.lru_cache(maxsize=None)
def run_deployment(row: RunRow) -> Deployment:
    """The deployment of a published run: its chips, tensor-parallel degree and number formats (FP16 engines priced
    as bf16: the same bytes and peak); TensorRT-LLM's memory rule (`trtllm_memory_utilization`) for its in-flight
    batching rows, all of HBM for a static batch or a first token (the run held exactly its batch, so it fit),
    `Deployment`'s defaults otherwise; attention data-parallel with expert parallelism where the run's note says its
    page served it so, expert parallelism alone where the note says that."""
    _check_row(row, "run_deployment")
    utilization = MEMORY_UTILIZATION
    if row.kind in ("static", "ttft", "latency", "tpot"):
        utilization = 1.0
    elif row.engine.startswith("TensorRT-LLM"):
        utilization = trtllm_memory_utilization(row.model, row.chip, row.weights, row.tensor_parallel)
    cap = max(MAX_SEQUENCES, row.batch or 0)  # a run's stated batch is what its engine allowed
    served = SERVED_WITH_DATA_PARALLEL_ATTENTION_AND_EXPERTS in row.note
    experts = served or EXPERT_PARALLELISM_ALONE in row.note  # measurements.EXPERT_PARALLELISM_ALONE
    return Deployment(row.model, row.chip, row.n_chips, weight_dtype=row.weights, kv_dtype=row.kv_cache,
                      compute_dtype=row.compute, tensor_parallel=row.tensor_parallel, memory_utilization=utilization,
                      max_sequences=cap, expert_parallel=experts, attention_data_parallel=served)


def predicted_latency(row: PopeRow, efficiency=None) -> float:
    """Seconds the estimate gives for a Pope et al. row: one prefill of batch x context, or 64 decode steps."""
    if not isinstance(row, PopeRow):
        raise ValueError(f"row must be a Pope et al. row (measurements.pope_rows()) for calibration.predicted_latency, "
                         f"got {row!r}")
    d = pope_deployment(row)
    if row.phase == "prefill":
        return prefill(d, row.context_len, row.batch, efficiency).total_s
    return decode_time(d, row.batch, row.context_len, row.decode_steps, efficiency)


def offline_slots(row, deployment: Deployment, efficiency=None) -> int | None:
    """The sequences each replica of an offline row decodes at once, when the engine fixes them: JetStream's stated
    slots (`offline_b`), or for TensorRT-LLM the requests whose whole length (input + output tokens) fits in the KV
    memory, since its default scheduler (`GUARANTEED_NO_EVICT`) admits a request only with room reserved for all its
    tokens (TensorRT-LLM documentation, "Useful Runtime Options"; vLLM instead allocates as tokens arrive, the mean
    context of `estimate.offline_estimate`). None: the largest batch at the mean context. The bound ignores the
    engine's policy (all of HBM, the mean context).

    Defined in chapter 11, *How close do real systems come?*.
    """
    _check_row(row, "offline_slots")
    if not isinstance(deployment, Deployment):
        raise ValueError(f"deployment must be the row's estimate.Deployment (calibration.run_deployment(row)), got "
                         f"{deployment!r}")
    if isinstance(row, RunRow) and row.kind == "offline_b":
        return row.batch
    eff = resolve_efficiency(efficiency)
    if eff.overlap or not engine_of(row).startswith("TensorRT-LLM"):
        return None
    whole = max_batch(deployment, row.input_len + row.output_len, eff) // deployment.replicas
    return whole or None


def _run_prediction(row: RunRow, efficiency) -> tuple:
    """(predicted speed, the step whose largest term is reported) of a published run at `efficiency`."""
    d = run_deployment(row)
    if row.kind in ("offline", "offline_b"):
        est = offline_estimate(d, row.input_len, row.output_len, efficiency,
                               slots=offline_slots(row, d, efficiency))
        return est.output_tokens_per_s, est.step
    if row.kind == "tpot":
        step = _tpot_step(d, row, efficiency)
        return 1.0 / step.total_s, step
    if row.kind == "ttft":
        step = prefill(d, row.input_len, d.replicas, efficiency)
        return 1.0 / step.total_s, step
    batch = row.batch * d.replicas  # static: one batch, prefill then output_len - 1 decode steps
    first = prefill(d, row.input_len, batch, efficiency)
    rest = decode_time(d, batch, row.input_len, row.output_len - 1, efficiency) if row.output_len > 1 else 0.0
    return batch * row.output_len / (first.total_s + rest), first


def _measured_speed(row: RunRow) -> float:
    """The published figure as a speed: 1 / seconds for a first token or a time per output token, output tokens / s
    of the batch for a batch's end-to-end latency, the figure itself otherwise (it is already tokens/s)."""
    if row.kind in ("ttft", "tpot"):
        return 1.0 / row.measured
    if row.kind == "latency":
        return row.batch * row.n_chips // row.tensor_parallel * row.output_len / row.measured
    return row.measured


def compare(row, efficiency=None, kv_dtype: str = "fp8") -> Comparison:
    """A `Comparison` for one row of `measurements.trtllm_rows()`, `pope_rows()` or `published_runs()`
    (`kv_dtype` applies to the first, whose page does not state it).

    Defined in chapter 11, *How close do real systems come?*.
    """
    _check_row(row, "compare")
    bytes_per_element(kv_dtype)
    if isinstance(row, ThroughputRow):
        d = trtllm_deployment(row, kv_dtype)
        estimate = offline_estimate(d, row.input_len, row.output_len, efficiency,
                                    slots=offline_slots(row, d, efficiency))
        return Comparison(row.label, "TensorRT-LLM", f"{row.input_len}/{row.output_len}", split_of(row),
                          row.output_tokens_per_s, estimate.output_tokens_per_s, estimate.step.bound, row,
                          estimate.step)
    if isinstance(row, RunRow):
        predicted, step = _run_prediction(row, efficiency)
        return Comparison(row.label, _system_of(row), f"{row.input_len}/{row.output_len}", split_of(row),
                          _measured_speed(row), predicted, step.bound, row, step)
    d = pope_deployment(row)
    step = (prefill(d, row.context_len, row.batch, efficiency) if row.phase == "prefill"
            else decode_step(d, row.batch, row.context_len + 1, efficiency))
    return Comparison(row.label, "Pope et al.", row.phase, split_of(row), 1.0 / row.latency_s,
                      1.0 / predicted_latency(row, efficiency), step.bound, row, step)


def all_rows() -> tuple:
    """Every published row the fits may use: the 40 earlier TensorRT-LLM rows, Pope et al.'s 8, the 263 published
    runs, then the runs gathered for the engine and hardware profiles (`measurements.gathered_runs`).

    Defined in chapter 11, *How close do real systems come?*.
    """
    return trtllm_rows() + pope_rows() + published_runs() + gathered_runs()


def comparisons(efficiency=None, split: str | None = None, kv_dtype: str = "fp8") -> tuple:
    """`compare` for every row (or only those of `split`)."""
    bytes_per_element(kv_dtype)
    if split is not None:
        choice("split", split, SPLITS)
    return tuple(compare(row, efficiency, kv_dtype) for row in all_rows() if split in (None, split_of(row)))


# ------------------------------------------------------------------------------------------------------ the fit
def _ratios_or_raise(ratio_of, efficiency) -> list:
    ratios = ratio_of(efficiency)
    try:
        if isinstance(ratios, (str, bytes)):
            raise TypeError("a string is not a list of ratios")
        ratios = [float(r) for r in ratios]
    except (TypeError, ValueError) as err:
        raise ValueError(f"ratio_of must return the predicted / measured ratios of the rows (a list of positive "
                         f"numbers), got {ratios!r}") from err
    if not ratios:
        raise ValueError("ratio_of returned no ratios: there is nothing to fit; give it the rows' predicted / "
                         "measured ratios")
    bad = [r for r in ratios if not (math.isfinite(r) and r > 0)]
    if bad:
        raise ValueError(f"ratio_of returned {bad[0]!r} among its ratios at {efficiency}: every predicted / measured "
                         "ratio must be a positive finite number")
    return ratios


def fit_efficiency(ratio_of, fields=("mfu", "hbm", "network"), rounds: int = 3, low: float = 0.02) -> Efficiency:
    """The Efficiency minimising sum(log(ratio)^2), where `ratio_of(efficiency)` returns the predicted / measured
    ratios of the rows being fitted; fields not in `fields` keep `Efficiency`'s defaults. Rounded (0.01 for the
    rates and the latency scale, 10 us for the overhead).

    Coordinate descent: a golden-section search on each field in its range (`RANGES`; the rates from `low` to 1) in
    turn, `rounds` times, from the middle of each range. Deterministic. A `ratio_of` that returns no ratios, or a
    NaN, infinite or non-positive one, is a ValueError."""
    if not callable(ratio_of):
        raise ValueError(f"ratio_of must be a function of an Efficiency returning the rows' predicted / measured "
                         f"ratios, got {ratio_of!r}")
    rounds = at_most("rounds", positive_int("rounds", rounds), 1000, "each round searches every field again")
    fraction("low", low, "the smallest efficiency searched")
    if isinstance(fields, (str, bytes)) or not isinstance(fields, (tuple, list)) or not fields:
        raise ValueError(f"fields must be a non-empty list of efficiency fields among {FIELDS}, got {fields!r}")
    fields = tuple(choice("fields entry", name, FIELDS) for name in fields)
    if len(set(fields)) != len(fields):
        raise ValueError(f"fields names a field twice: {fields!r}; list each once")
    ranges = {name: ((low, 1.0) if name in ("mfu", "hbm", "network") else RANGES[name]) for name in fields}
    values = _descend(lambda candidate: _loss(ratio_of, candidate), {n: sum(r) / 2 for n, r in ranges.items()},
                      ranges, rounds)
    return Efficiency(**{name: round(value, _ROUND[name]) for name, value in values.items()})


def _loss(ratio_of, candidate: dict) -> float:
    return sum(math.log(r) ** 2 for r in _ratios_or_raise(ratio_of, Efficiency(**candidate)))


def _descend(loss, start: dict, ranges: dict, rounds: int, iterations: int = 20) -> dict:
    """Coordinate descent by golden-section search, each field within its range."""
    values, golden = dict(start), (math.sqrt(5) - 1) / 2
    for _ in range(rounds):
        for name in values:
            a, b = ranges[name]
            c, d = b - golden * (b - a), a + golden * (b - a)
            fc, fd = loss({**values, name: c}), loss({**values, name: d})
            for _ in range(iterations):
                if fc < fd:
                    b, d, fd = d, c, fc
                    c = b - golden * (b - a)
                    fc = loss({**values, name: c})
                else:
                    a, c, fc = c, d, fd
                    d = a + golden * (b - a)
                    fd = loss({**values, name: d})
            values[name] = (a + b) / 2
    return values


# Fast pricing for the fit: every serial step is fixed + max(kv/h_kv, attn/m) + max(w/h, mm/min(m, c)) + act/h + lat*l
# + bw/n (c: the kernel ceiling), so a row's prediction at any efficiency follows from its step components at peak
# (computed once, by `estimate` itself).
def _components(step) -> tuple:
    # at PEAK each fixed cost is 1 s per unit, so the step's parts count its tensor-parallel layers, its eagerly
    # launched layers and its sequences
    # at PEAK (mfu 1) the matmuls already run at their kernel ceiling c (the narrow experts' part at bf16's): their
    # seconds at any mfu are the part's seconds at peak x c / min(mfu, c)
    other = step.matmul_s - step.expert_matmul_s
    return (step.kv_s, step.attention_s, step.weights_s, other * step.kernel_ceiling, step.comm_latency_s,
            step.comm_bandwidth_s, 1.0 if step.tokens else 0.0, step.layer_s / PEAK_LAYER_S,
            step.launch_s / PEAK_LAYER_S, step.sequence_s / PEAK_LAYER_S, step.elementwise_s, step.kernel_ceiling,
            step.expert_matmul_s * step.expert_kernel_ceiling, step.expert_kernel_ceiling, step.moe_floor_s)


def _seconds(parts: tuple, eff: Efficiency) -> float:
    (kv, attention, weights, matmul, latency, bandwidth, active, layers, launched, sequences, elementwise, ceiling,
     expert, expert_ceiling, moe_floor) = parts
    matmuls = matmul / min(eff.mfu, ceiling) + (expert / min(eff.mfu, expert_ceiling) if expert else 0.0)
    return (active * eff.overhead_s + layers * eff.layer_s + launched * eff.launch_s + sequences * eff.sequence_s
            + moe_floor + max(kv / eff.kv_fraction, attention / eff.mfu) + max(weights / eff.hbm, matmuls)
            + elementwise / eff.hbm
            + latency * eff.latency + bandwidth / eff.network)


@dataclass(frozen=True)
class RowModel:
    """A row's prediction as numerator / sum(count x step seconds): each step's components at peak, serial."""

    row: object
    measured: float  # speed
    numerator: float
    steps: tuple  # ((count, components), ...)

    def predicted(self, efficiency: Efficiency) -> float:
        return self.numerator / sum(count * _seconds(parts, efficiency) for count, parts in self.steps)


# Every rate at peak, serial, no host overhead per step, one second per tensor-parallel layer, per eagerly launched
# layer and per sequence (so a step's `layer_s`, `launch_s` and `sequence_s` count them): the components a RowModel
# scales.
PEAK_LAYER_S = 1.0
PEAK = Efficiency(layer_s=PEAK_LAYER_S, launch_s=PEAK_LAYER_S, sequence_s=PEAK_LAYER_S)


def row_model(row) -> RowModel:
    """The `RowModel` of a row under the estimate's engine settings (the batch does not depend on the efficiencies,
    only on `memory_utilization` and `max_sequences`). `RowModel.predicted(eff)` equals `compare(row, eff).predicted`
    for any serial `eff` (a test checks it).

    Defined in chapter 11, *How close do real systems come?*.
    """
    _check_row(row, "row_model")
    if isinstance(row, (ThroughputRow, RunRow)) and (isinstance(row, ThroughputRow) or row.kind.startswith("offline")):
        if isinstance(row, ThroughputRow):
            d, measured = trtllm_deployment(row), row.output_tokens_per_s
        else:
            d, measured = run_deployment(row), row.measured
        est = offline_estimate(d, row.input_len, row.output_len, PEAK, slots=offline_slots(row, d, PEAK))
        o = row.output_len
        return RowModel(row, measured, d.replicas * est.batch * o / (o - 1), ((1, _components(est.step)),))
    if isinstance(row, PopeRow):
        d = pope_deployment(row)
        if row.phase == "prefill":
            return RowModel(row, 1.0 / row.latency_s, 1.0, ((1, _components(prefill(d, row.context_len, row.batch,
                                                                                     PEAK))),))
        return RowModel(row, 1.0 / row.latency_s, 1.0, ((row.decode_steps, _decode_mean(d, row.batch, row.context_len,
                                                                                         row.decode_steps)),))
    d = run_deployment(row)
    if row.kind == "ttft":
        return RowModel(row, 1.0 / row.measured, 1.0, ((1, _components(prefill(d, row.input_len, d.replicas,
                                                                               PEAK))),))
    if row.kind == "tpot":
        return RowModel(row, 1.0 / row.measured, 1.0, ((1, _components(_tpot_step(d, row, PEAK))),))
    batch = row.batch * d.replicas  # a static batch or a batch's latency: one prefill, then output_len - 1 steps
    steps = [(1, _components(prefill(d, row.input_len, batch, PEAK)))]
    if row.output_len > 1:
        steps.append((row.output_len - 1, _decode_mean(d, batch, row.input_len, row.output_len - 1)))
    return RowModel(row, _measured_speed(row), batch * row.output_len, tuple(steps))


def _tpot_step(d: Deployment, row: RunRow, efficiency):
    """A time-per-output-token row: one decode step of `batch` sequences per replica at the mean context of a
    request, input_len + output_len / 2 (the closed-loop reading of a concurrency sweep)."""
    context = max(1, round(row.input_len + row.output_len / 2))
    return decode_step(d, row.batch * d.replicas, context, efficiency)


def _decode_mean(d: Deployment, batch: int, context_len: int, steps: int) -> tuple:
    """The components of `estimate.decode_time`'s mean step (it checks that the last step fits)."""
    decode_step(d, batch, context_len + steps, PEAK)
    per_replica = batch // d.replicas
    return _components(step_estimate(d, decode_batch=per_replica, decode_context=context_len + (steps + 1) / 2,
                                     held_sequences=per_replica, held_tokens_each=context_len + steps,
                                     efficiency=PEAK))


@functools.cache
def _row_models(platform: str, split: str, profile: str = "typical") -> tuple:
    return tuple(row_model(row) for row in all_rows() if platform_of(row) == platform and split_of(row) == split
                 and in_profile(row, profile))


def _residuals(models, eff: Efficiency) -> list:
    return [math.log(m.predicted(eff) / m.measured) for m in models]


def _fast_loss(models, values: dict) -> float:
    return sum(r * r for r in _residuals(models, Efficiency(**values)))


def loss(models, efficiency) -> float:
    """The fit's loss: sum(log(predicted / measured)^2) of some `RowModel`s at a serial `Efficiency`."""
    models = _as_row_models(models, "loss")
    if not isinstance(efficiency, Efficiency) or efficiency.overlap:
        raise ValueError(f"efficiency must be a serial Efficiency (overlap=False), got {efficiency!r}")
    return sum(r * r for r in _residuals(models, efficiency))


def _as_row_models(models, who: str) -> tuple:
    """`models` as a tuple of RowModel, or a ValueError naming the argument."""
    if isinstance(models, (str, bytes)) or not hasattr(models, "__iter__"):
        models = None
    else:
        models = tuple(models)
    if not models or not all(isinstance(m, RowModel) for m in models):
        raise ValueError(f"models: {who} wants a non-empty sequence of RowModel (calibration.row_model(row)), got "
                         f"{models!r}")
    return models


def _check_fixed(fixed) -> dict:
    if fixed is not None and not isinstance(fixed, dict):
        raise ValueError(f"fixed must be a dict of efficiency field -> value (or None), got {fixed!r}")
    fixed = dict(fixed or {})
    for name in fixed:
        choice("fixed field", name, FIELDS)
    try:
        Efficiency(**fixed)
    except ValueError as error:
        raise ValueError(f"fixed={fixed!r}: {error}") from None
    return fixed


def _solve(models, fixed: dict, start: dict | None = None, iterations: int = 60) -> Solution:
    """The least-squares solution (`Solution`: values, loss, fields on an edge) over the free fields of some
    `RowModel`s, each inside `RANGES`, those in `fixed` held, from `start` (default: the middle of each range, and
    from the low ends of the fixed times, whichever ends lower). `fit_rows` rounds it into an `Efficiency`."""
    models = _as_row_models(models, "solve_rows")
    fixed = _check_fixed(fixed)
    free = [name for name in FIELDS if name not in fixed]
    if start is not None:
        return bounded_least_squares(lambda v: _residuals(models, Efficiency(**fixed, **v)), RANGES,
                                     {n: start[n] for n in free}, iterations)
    best = None
    for times in (0.5, 0.0):  # the fixed times from the middle and from zero: the max() terms make several minima
        begin = {n: RANGES[n][0] + (times if n in TIME_FIELDS else 0.5) * (RANGES[n][1] - RANGES[n][0])
                 for n in free}
        found = bounded_least_squares(lambda v: _residuals(models, Efficiency(**fixed, **v)), RANGES, begin,
                                      iterations)
        best = found if best is None or found.loss < best.loss else best
    return best


def _rounded(values: dict) -> dict:
    return {name: round(value, _ROUND[name]) for name, value in values.items()}


def fit_rows(models, rounds: int = 60, fixed: dict | None = None) -> Efficiency:
    """The efficiencies (`FIELDS`) minimising sum(log(predicted / measured)^2) over some `RowModel`s, each inside its
    physical range (`RANGES`), those in `fixed` held at the values given (`fit_profile` on the calibration rows; tests
    give it rows with planted efficiencies). Bounded Levenberg-Marquardt (`least_squares`), at most `rounds`
    iterations; rounded (0.01 for fractions and scales, 10 us for the host overhead, 1 us for the per-layer time).

    Defined in chapter 11, *How close do real systems come?*.
    """
    models = _as_row_models(models, "fit_rows")
    fixed = _check_fixed(fixed)
    rounds = at_most("rounds", positive_int("rounds", rounds), 1000, "each round takes one Levenberg-Marquardt step")
    return Efficiency(**fixed, **_rounded(_solve(models, fixed, iterations=rounds).values))


def collective_latency_scale(platform: str) -> float:
    """How much longer small collectives take than `collectives` prices them, measured apart from any throughput
    row: the median over the project's published collectives whose priced latency exceeds their bandwidth term
    (`measurements.collective_rows`) of measured / priced time, on GPUs (NCCL's model: 6 us measured on 2 H100 against
    7.8 priced, 20 us on 8 against 15) or on TPUs (8 us measured for a 4-chip v5e all-gather of 128 kB against 3 hops
    and the bandwidth, 5.2 us). AMD GPUs have no such row and take the GPUs'. Rounded to 0.01."""
    choice("platform", platform, PLATFORMS)
    wanted = "gpu" if platform == "amd" else platform
    ratios = []
    for row in collective_rows():
        if _platform_of_chip(row.chip) != wanted:
            continue
        priced = collective_time(row.collective, row.array_bytes, row.chip, row.n_chips)
        if priced.latency_s > priced.bandwidth_s:
            ratios.append(row.seconds / priced.expected_s)
    if not ratios:
        raise ValueError(f"no published collective on {platform} is small enough to measure its latency; add one to "
                         "scaling_lib/data/collective_measurements.csv")
    return round(statistics.median(ratios), _ROUND["latency"])


def measured_weight_streaming() -> float:
    """The fraction of HBM bandwidth at which an engine-grade decode streams its weights, measured on this project's
    H200 (`measurements.decode_step_rows`): at batch 1, where the matmuls are pure weight reads, the weight bytes
    over the step's time less its attention calls, over the data sheet's bandwidth; the median over the contexts
    measured (0.67-0.77 of 4.8e12 B/s). NVIDIA GPUs' `hbm` is held at it: the throughput rows, batched, barely see
    the weights. Rounded to 0.01."""
    fractions = [row.matmul_weight_bytes / (row.best_s - row.attention_only_s) / get_chip(row.chip).hbm_bandwidth
                 for row in decode_step_rows() if row.batch == 1]
    if not fractions:
        raise ValueError("no batch-1 decode step in scaling_lib/data/h200_decode_step.csv measures weight streaming")
    return round(statistics.median(fractions), _ROUND["hbm"])


# Host costs the fit cannot see on a platform, held at zero there. A TPU step is one compiled XLA program: no kernel is
# launched eagerly (`estimate.runs_in_cuda_graph`), so `launch_s` prices nothing; and the handful of TPU rows cannot
# tell a cost per sequence from one per step. AMD's rows are two vLLM tables (batches of 1-256 at 128 input tokens,
# and offline runs of 1,500-3,200 slots): fitted free, `sequence_s` ends on its 10 us edge, `network` on 1.0 and
# `launch_s` on 0, the per-sequence cost standing in for the rates; so on both platforms the host's work stays in
# `overhead_s` and the per-layer cost in `layer_s`, as before those two terms existed.
HOST_COSTS_HELD = {"tpu": {"launch_s": 0.0, "sequence_s": 0.0}, "amd": {"launch_s": 0.0, "sequence_s": 0.0}}


def measured_efficiencies(platform: str) -> dict:
    """The efficiencies measured apart from the throughput rows, which the fit holds: the collective latency scale
    (`collective_latency_scale`) everywhere, on NVIDIA GPUs the weight streaming (`measured_weight_streaming`), and on
    TPUs and AMD GPUs the two host costs the fit cannot see there (`HOST_COSTS_HELD`).

    Defined in chapter 11, *How close do real systems come?*.
    """
    choice("platform", platform, PLATFORMS)
    held = {"latency": collective_latency_scale(platform)}
    if platform == "gpu":
        held["hbm"] = measured_weight_streaming()
    held.update(HOST_COSTS_HELD.get(platform, {}))
    return held


def gpu_network_efficiency() -> float:
    """The GPU collective bandwidth efficiency NCCL itself reaches at large sizes: the project's published NCCL
    bus bandwidth (`measurements.nccl_rows`) of the algorithm `collectives` picks at that size, over the bus bandwidth
    of its line-rate bandwidth term (480 GB/s of NVLS on 8 H100 against 700 at line rate: 0.69). Rounded to 0.01. The
    upper reference for the fitted `network`, which prices an engine's far smaller per-layer collectives."""
    ratios = []
    for row in nccl_rows():
        priced = collective_time(row.collective, row.array_bytes_min, row.gpu, row.n_gpus)
        if priced.algorithm == row.algorithm:
            line_rate = bus_bandwidth(row.collective, row.array_bytes_min, priced.bandwidth_s, row.n_gpus)
            ratios.append(row.bus_bandwidth / line_rate)
    if not ratios:
        raise ValueError("no NCCL row measures the algorithm collectives picks for a large all-reduce; add one to "
                         "scaling_lib/data/nccl_allreduce_busbw.csv")
    return round(statistics.median(ratios), _ROUND["network"])


# ------------------------------------------------------------------------------------------------ the profiles
# Which rows each profile is fitted on: an engine's own rows, or a hardware family's. "typical" takes them all.
# SGLang publishes serving runs under a load (`measurements.sweep_rows`), not the offline, static-batch or
# first-token rows the step fit prices, so its profile's steps are the typical fit's on every platform and only its
# front end is its own (`fit_request_s`, on its runs at a light load); vLLM's step rows are mostly on AMD GPUs (the
# "mi300x" family's), with three small batches on H200.
PROFILE_ENGINES = {"typical": None, "tensorrt-llm": ("TensorRT-LLM",), "vllm": ("vLLM",),
                   "jetstream": ("JetStream", "Pope et al."), "mi300x": None, "sglang": ("SGLang",)}
# The engine whose measured MoE layer (`kernels.moe_layer_model`) prices a profile's MoE layers on NVIDIA GPUs
# (`Efficiency.moe_kernels`): measured kernel timings, not fitted on the published runs; the others price them by
# `hbm` and `kernels.moe_layer_floor`.
PROFILE_MOE_KERNELS = {"sglang": "SGLang"}
# An engine profile with fewer rows than this on a platform refits only its per-step costs (`overhead_s`, `layer_s`),
# the rates held at the typical fit's: two numbers from a handful of rows, not six.
RATES_NEED_ROWS = 12


def engine_of(row) -> str:
    """The engine a row was measured on: "TensorRT-LLM" for the earlier table, "Pope et al." for their TPU runs, and a
    published run's own engine field (with its release)."""
    _check_row(row, "engine_of")
    if isinstance(row, ThroughputRow):
        return "TensorRT-LLM v1.0 (trtllm-bench)"
    return "Pope et al." if isinstance(row, PopeRow) else row.engine


def in_profile(row, profile: str) -> bool:
    """Whether `profile` is fitted on (or judged by) `row`: every row for "typical", the AMD rows for "mi300x", the
    rows of the profile's engine otherwise."""
    choice("profile", profile, tuple(PROFILE_ENGINES))
    _check_row(row, "in_profile")
    if profile == "typical":
        return True
    if profile == "mi300x":
        return platform_of(row) == "amd"
    return engine_of(row).startswith(PROFILE_ENGINES[profile])


def _fit_platform(platform: str, profile: str) -> Efficiency | None:
    models = _row_models(platform, "calibration", profile)
    if not models:
        return None
    fixed = measured_efficiencies(platform)
    if profile != "typical" and len(models) < RATES_NEED_ROWS:
        typical = getattr(_fit_steps("typical"), platform)
        fixed.update({name: getattr(typical, name) for name in FIELDS if name not in ("overhead_s", "layer_s")})
    return fit_rows(models, fixed=fixed)


def fit_profile(profile: str = "typical") -> Calibrated:
    """The stored values of `estimate.PROFILES[profile]`: for each platform with calibration rows of that profile
    (`in_profile`), the efficiencies minimising the sum of squared log ratios over them, each inside its physical
    range, the measured efficiencies held (`measured_efficiencies`); with fewer than `RATES_NEED_ROWS` rows only the
    per-step costs are fitted, the rates held at the typical fit's. A platform with no rows takes the typical fit's
    values. The front end (`request_s`, host work that no accelerator changes) is one value for every platform:
    `fit_request_s(profile)`, or the typical fit's where the profile's engine has too few published runs at a light
    load. On NVIDIA GPUs a profile in `PROFILE_MOE_KERNELS` prices MoE layers by its engine's measured layer."""
    choice("profile", profile, tuple(PROFILE_ENGINES))
    return _fit_profile(profile)


@functools.cache  # a pure function of the published rows: fitted once per process
def _fit_profile(profile: str) -> Calibrated:
    steps = _fit_steps(profile)
    front_end = _fit_request_s(profile)
    if front_end is None:
        front_end = _fit_profile("typical").gpu.request_s
    fitted = {platform: replace(getattr(steps, platform), request_s=front_end)
              for platform in PLATFORMS if getattr(steps, platform) is not None}
    fitted["gpu"] = replace(fitted["gpu"], moe_kernels=PROFILE_MOE_KERNELS.get(profile, ""))
    return Calibrated(**fitted)


@functools.cache
def _fit_steps(profile: str) -> Calibrated:
    """`fit_profile` without the front end: the step efficiencies of each platform."""
    fits = {platform: _fit_platform(platform, profile) for platform in PLATFORMS}
    typical = _fit_steps("typical") if profile != "typical" else None
    if typical and not any(fits.values()):  # no step rows of the profile's engine anywhere: the typical steps
        return typical
    gpu = fits["gpu"] or (typical.gpu if typical else None)
    tpu = fits["tpu"] or (typical.tpu if typical else None)
    return Calibrated(gpu=gpu, tpu=tpu, amd=fits["amd"])


# The front end (`Efficiency.request_s`) is fitted apart from the steps, on the published serving runs at a light
# load (`measurements.sweep_rows`: at most FRONT_END_CLIENTS clients, lengths varied so the clients drift apart as
# the load model assumes; fixed lengths can keep them in step, a queue the model does not price): there the first
# token's measured time less the load model's TTFT without a front end is the request's time outside the steps, with
# the prefill's own pricing error (the median keeps one long prompt's from setting it). Runs of models with
# fine-grained experts are left out: the estimate prices their steps too fast (chapter 11; their decode runs a
# median 1.8x slower than estimated at these loads), so their first tokens would fold that error into the front end,
# one knob for two effects. A profile whose engine has fewer than FRONT_END_RUNS such runs takes the typical fit's.
FRONT_END_CLIENTS = 4
FRONT_END_RUNS = 3


def front_end_residuals(profile: str = "typical", sources: tuple | None = None) -> tuple:
    """(row, seconds) for each published serving run of `profile`'s engine at a light load, fine-grained experts
    left out (comment above): its measured mean TTFT less the load model's TTFT at its clients with `profile`'s step
    efficiencies and no front end. `sources`: only the runs whose source starts with one of these (None: all).

    Defined in chapter 11, *How close do real systems come?*.
    """
    choice("profile", profile, tuple(PROFILE_ENGINES))
    sources = _sources(sources)
    steps = _fit_steps(profile)
    engines = PROFILE_ENGINES[profile]
    out = []
    for row in sweep_rows():
        if row.concurrency > FRONT_END_CLIENTS or row.lengths != "varied" or \
                (engines and not row.engine.startswith(engines)) or get_model(row.model).fine_grained_experts:
            continue
        if profile == "mi300x" and _platform_of_chip(row.chip) != "amd":
            continue
        if sources is not None and not row.source.startswith(sources):
            continue
        engine = deployment_engine(row.deployment(), row.input_len, row.output_len, steps)
        out.append((row, row.ttft_s - engine.closed_loop(row.concurrency).ttft_s))
    return tuple(out)


def _fit_request_s(profile: str, sources: tuple | None = None) -> float | None:
    residuals = [seconds for _, seconds in front_end_residuals(profile, sources)]
    if len(residuals) < (1 if profile == "typical" else FRONT_END_RUNS):
        return None
    low, high = RANGES["request_s"]
    return round(min(high, max(low, statistics.median(residuals))), _ROUND["request_s"])


def fit_request_s(profile: str = "typical", sources: tuple | None = None) -> float | None:
    """The front end's seconds per request of `profile`: the median of `front_end_residuals` inside its physical
    range, rounded to the millisecond; None where the profile's engine has fewer than `FRONT_END_RUNS` runs at a
    light load (its profile then takes the typical fit's). `sources` restricts the runs (to fit on some and judge on
    the others).

    Defined in chapter 11, *How close do real systems come?*.
    """
    choice("profile", profile, tuple(PROFILE_ENGINES))
    return _fit_request_s(profile, _sources(sources))


def _sources(sources) -> tuple | None:
    if sources is None:
        return None
    if isinstance(sources, str) or not isinstance(sources, (tuple, list)) or not sources or \
            not all(isinstance(s, str) and s for s in sources):
        raise ValueError(f"sources must be None (every run) or a tuple of the sources' first words, e.g. "
                         f"('gpustack/gpustack',), got {sources!r}")
    return tuple(sources)


def fit_typical() -> Calibrated:
    """`estimate.TYPICAL`'s values: `fit_profile("typical")`, every engine's calibration rows.

    Defined in chapter 11, *How close do real systems come?*.
    """
    return _fit_profile("typical")


@dataclass(frozen=True)
class Range:
    """One fitted efficiency with its joint uncertainty: `value` fitted on all the calibration rows, [low, high] the
    central `level` of its values refitted on bootstrap resamples of the rows' configurations (every free efficiency
    refitted together each time); `at_edge` says whether the full fit ended on an edge of its physical range."""

    field: str
    platform: str
    value: float
    low: float
    high: float
    level: float
    at_edge: bool


def uncertainty(platform: str, profile: str = "typical", replicates: int = 40, level: float = 0.9) -> tuple:
    """A `Range` for each efficiency of `profile`'s fit on `platform`: a bootstrap over configurations (the rows of
    one model, chip, parallelism, format and engine move together, since they share their errors), `replicates`
    resamples drawn with a fixed seed, each refitted on all free efficiencies at once from the full fit. The latency
    scale is measured, not fitted: its range is its value.

    Defined in chapter 11, *How close do real systems come?*.
    """
    choice("platform", platform, PLATFORMS)
    choice("profile", profile, tuple(PROFILE_ENGINES))
    replicates = int(at_most("replicates", positive_int("replicates", replicates), 1000,
                             "each resample refits every efficiency"))
    level = float(fraction("level", level, "the central share of the resampled fits the range covers"))
    return _uncertainty(platform, profile, replicates, level)


def _configuration(row) -> tuple:
    group = group_of(row)
    model = getattr(row, "model", "")
    return (getattr(model, "name", model), getattr(row, "chip", getattr(row, "gpu", "")), group, engine_of(row))


@functools.cache
def _uncertainty(platform: str, profile: str, replicates: int, level: float) -> tuple:
    models = _row_models(platform, "calibration", profile)
    if not models:
        raise ValueError(f"profile {profile!r} has no calibration rows on {platform}: nothing to resample")
    fixed = measured_efficiencies(platform)
    full = _solve(models, fixed)
    clusters = {}
    for m in models:
        clusters.setdefault(_configuration(m.row), []).append(m)
    keys = sorted(clusters, key=str)
    draw = random.Random(20261204)
    samples = []
    for _ in range(replicates):
        chosen = [m for _ in keys for m in clusters[keys[draw.randrange(len(keys))]]]
        samples.append(_solve(chosen, fixed, start=full.values, iterations=20).values)
    ranges = []
    tail = (1 - level) / 2
    for name in FIELDS:
        if name in fixed:
            ranges.append(Range(name, platform, fixed[name], fixed[name], fixed[name], level, False))
            continue
        values = sorted(s[name] for s in samples)
        low, high = values[int(tail * (len(values) - 1))], values[int(round((1 - tail) * (len(values) - 1)))]
        ranges.append(Range(name, platform, round(full.values[name], _ROUND[name]), low, high, level,
                            name in full.at_edge))
    return tuple(ranges)


# --------------------------------------------------------------------------------------------- the validation
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


def _comparisons(items, what: str) -> tuple:
    """`items` as a non-empty tuple of `Comparison`, or a ValueError naming the argument."""
    if isinstance(items, (str, bytes)) or not hasattr(items, "__iter__"):
        raise ValueError(f"items must be a list of Comparison (calibration.compare(row)) to {what}, got {items!r}")
    items = tuple(items)
    if not items:
        raise ValueError(f"items: no comparisons to {what}; pass at least one")
    if not all(isinstance(c, Comparison) for c in items):
        raise ValueError(f"items must hold Comparison objects (calibration.compare(row)) to {what}, got {items!r}")
    return items


def summarize(items) -> RatioSummary:
    """The median and the worst (farthest from 1 in log) measured / predicted ratio of some comparisons."""
    items = _comparisons(items, "summarize")
    worst = max(items, key=lambda c: abs(math.log(c.ratio)))
    return RatioSummary(len(items), statistics.median(c.ratio for c in items), worst.ratio, worst.label)


def validation_summary(efficiency="typical") -> RatioSummary:
    """Median and worst ratio of the `efficiency` estimate on the validation rows."""
    return summarize(comparisons(resolve_efficiency(efficiency), "validation"))


@dataclass(frozen=True)
class Metrics:
    """How a set of comparisons scores: rows, the share within 1.5x and within 2x (either way), and the median of
    measured / predicted speed (above 1: the system is faster than predicted)."""

    name: str
    n_rows: int
    within_1_5: float
    within_2: float
    median_measured_over_predicted: float


def metrics(items, name: str = "all") -> Metrics:
    """`Metrics` of some comparisons."""
    if not isinstance(name, str):
        raise ValueError(f"name must be a string (the group's label), got {name!r}")
    items = _comparisons(items, f"score {name!r}")
    factors = [max(c.ratio, 1.0 / c.ratio) for c in items]
    return Metrics(name, len(items), sum(f <= 1.5 for f in factors) / len(items),
                   sum(f <= 2.0 for f in factors) / len(items), statistics.median(1.0 / c.ratio for c in items))


def validation_metrics(efficiency="typical") -> dict:
    """`Metrics` of the `efficiency` estimate on the validation rows: "all", then by group: "TP<n>", "gpu"/"tpu",
    "dense"/"moe", and each weight precision.

    Defined in chapter 11, *How close do real systems come?*.
    """
    return _validation_metrics(resolve_efficiency(efficiency))


@functools.lru_cache(maxsize=8)
def _validation_metrics(efficiency) -> dict:
    items = comparisons(efficiency, "validation")
    keyed = [(group_of(c.row), c) for c in items]
    result = {"all": metrics(items)}
    for position, prefix in ((1, "TP"), (0, ""), (2, ""), (3, "")):
        for value in sorted({key[position] for key, _ in keyed}, key=str):
            name = f"{prefix}{value}"
            result[name] = metrics([c for key, c in keyed if key[position] == value], name)
    return result


# ------------------------------------------------------------------------------ the out-of-sample check
# `measurements.validation_runs()`: published runs no fit has seen (other TensorRT-LLM releases, B200/GB200 and
# NVFP4, A100, more TPU v5e rows). They are priced exactly as the published runs are (`run_deployment`,
# `_run_prediction`) and only scored: nothing here feeds `fit_typical`.
OUT_OF_SAMPLE = "out-of-sample"


def _system_of(row: RunRow) -> str:
    """A published run's engine family, as a `Comparison` names it: "JetStream", "vLLM" or "TensorRT-LLM"."""
    return next((name for name in ("JetStream", "vLLM") if row.engine.startswith(name)), "TensorRT-LLM")


def release_of(row: RunRow) -> str:
    """The engine and release of a run without the parenthesised details ("TensorRT-LLM v0.17", "JetStream-PyTorch",
    "JetStream + MaxText").

    Defined in chapter 11, *How close do real systems come?*.
    """
    if not isinstance(row, RunRow):
        raise ValueError(f"row must be a published run (measurements.validation_runs()), got {row!r}")
    return row.engine.split(" (")[0]


def out_of_sample(efficiency="typical") -> tuple:
    """A `Comparison` (split "out-of-sample") for every row of `measurements.validation_runs()` at `efficiency`
    (None or "bound": the bound, whose ratio predicted / measured is at least 1 on every real run), priced once per
    efficiency and cached.

    Defined in chapter 11, *How close do real systems come?*.
    """
    return _out_of_sample(resolve_efficiency(efficiency))


@functools.lru_cache(maxsize=8)
def _out_of_sample(efficiency) -> tuple:
    items = []
    for row in validation_runs():
        predicted, step = _run_prediction(row, efficiency)
        items.append(Comparison(row.label, _system_of(row), f"{row.input_len}/{row.output_len}", OUT_OF_SAMPLE,
                                _measured_speed(row), predicted, step.bound, row, step))
    return tuple(items)


def out_of_sample_summary(efficiency="typical") -> dict:
    """`Metrics` of `efficiency` on the out-of-sample rows: "all", then by group: "TP<n>", "gpu"/"tpu",
    "dense"/"moe", each weight precision, each chip and each engine release (`release_of`).

    Defined in chapter 11, *How close do real systems come?*.
    """
    items = out_of_sample(efficiency)
    keys = [(c, (*group_of(c.row), c.row.chip, release_of(c.row))) for c in items]
    result = {"all": metrics(items)}
    for position, prefix in ((1, "TP"), (0, ""), (2, ""), (3, ""), (4, ""), (5, "")):
        for value in sorted({key[position] for _, key in keys}, key=str):
            name = f"{prefix}{value}"
            result[name] = metrics([c for c, key in keys if key[position] == value], name)
    return result
