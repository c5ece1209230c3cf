"""The slip audit: every family of slips typed into every sibling exercise, and what the checker says to each.

    .venv/bin/python tools/slip_audit.py [--list]

A family is one kind of mistake a student makes across exercises: keys without values, P for P_mm, bits for bytes,
the peak rate for the achieved one, one chip for n, a ratio upside down, rounding the wrong way, ... Its siblings are
the exercises where that mistake is possible and changes the answer by more than the accepted band. For each
sibling the audit computes what the mistaken student gets by its own route (the answer recomputed by scaling_lib
with the mistaken input, or the answer times the factor the mistake applies; never an exercise's own slip value),
types it as a student would (a number with the exercise's unit, or with the unit the mistake reads), grades it, and
sorts the verdict:

    named      the verdict names a slip whose name says this family's mistake (its `words`)
    misnamed   the verdict names a slip that does not say it (two slips that give one number must both be named)
    unnamed    wrong, with no slip named
    accepted   graded right: the slip passes for the answer

The checker's target: at least 90% named, none misnamed, none accepted (tests/book/test_verdicts.py). `--list`
prints every typed slip and its verdict. The families are a specification of what students get wrong, written
beside the exercises, not from them: a new exercise whose mistake no family covers is not audited until one does.
"""

import math
import re
import sys
from dataclasses import dataclass
from typing import Callable

from scaling_lib.book.claims.step_time import T2_INPUTS, T4_DEPLOYMENT
from scaling_lib.book.exercises import exercises, grade
from scaling_lib.book.exercises.exercise import Number
from scaling_lib.context_limits import max_context_length
from scaling_lib.flops import decode_step_flops, matmul_params
from scaling_lib.frontier import layout_cost
from scaling_lib.hardware import get_chip
from scaling_lib.inference import decode_step_time, decode_throughput, step_time_bound
from scaling_lib.memory import kv_cache_bytes, param_bytes
from scaling_lib.models import active_param_count, get_model, param_count
from scaling_lib.serving import prefill_saturating_batch
from scaling_lib.sharding import TORUS_SHAPES, decode_hops_per_layer
from scaling_lib.units import parse_unit

REGISTRY = exercises()


@dataclass(frozen=True)
class Typed:
    """One slip typed into one exercise part: the family, where, and the answer typed (in the part's unit, or a
    string with its own unit)."""

    family: str
    exercise: str
    part: str
    answer: object


@dataclass(frozen=True)
class Family:
    """A kind of mistake: `words` (a regular expression) that a slip's name must contain to name it, and its
    siblings, each (exercise id, part name, the slipped answer as a callable[, words of its own])."""

    name: str
    words: str
    siblings: tuple


def _part(eid: str, name: str = "") -> Number:
    parts = [p for p in REGISTRY[eid].parts if p.name == name]
    if len(parts) != 1 or not isinstance(parts[0], Number):
        raise ValueError(f"{eid} has no numeric part {name!r}")
    return parts[0]


def _expected(eid: str, name: str = "") -> float:
    return _part(eid, name).expected()


def _typed(eid: str, name: str, si_value: float):
    """How a student writes `si_value` (SI units) for this part: a whole number for a count, else five significant
    figures followed by the part's unit."""
    part = _part(eid, name)
    scaled = si_value / parse_unit(part.unit)[0]
    if part.integer:
        return round(scaled)
    return f"{scaled:.5g} {part.unit}".strip()


def times(eid: str, factor: float, name: str = "", words: str | None = None) -> tuple:
    """A sibling whose slip multiplies the answer by `factor` (the answer is linear in what the mistake changes)."""
    return eid, name, lambda: _typed(eid, name, _expected(eid, name) * factor), words


def value(eid: str, si_value: Callable[[], float], name: str = "", words: str | None = None) -> tuple:
    """A sibling whose slipped answer the mistaken inputs give (SI units), recomputed by scaling_lib."""
    return eid, name, lambda: _typed(eid, name, si_value()), words


def text(eid: str, answer: Callable[[], str], name: str = "", words: str | None = None) -> tuple:
    """A sibling typed as text with a unit of its own (a byte count written in bits, ...)."""
    return eid, name, answer, words


def _p_mm_over_p(model: str) -> float:
    return matmul_params(model) / active_param_count(model)


def _in_bits(eid: str, name: str = "") -> str:
    """The right number of bytes, written with a bit unit: '328 kbit' for 328 kB (a byte count labelled bits)."""
    part = _part(eid, name)
    scaled = _expected(eid, name) / parse_unit(part.unit)[0]
    prefix = part.unit[:-1] if part.unit.endswith("B") else part.unit[:-3]  # kB -> k, TB/s -> T
    unit = f"{prefix}bit" + ("/s" if part.unit.endswith("/s") else "")
    return f"{round(scaled)} {unit}" if part.integer else f"{scaled:.5g} {unit}"


def _half_kv(step) -> float:
    """A decode step's bound with its KV term halved (keys without values): kv / 2 + max(weights, FLOPs)."""
    return step.kv_s / 2 + max(step.weight_s, step.compute_s)


def _palm_context(hbm: float | None = None, key_bytes_only: bool = False) -> int:
    """ch8's longest context: 30% of a v4's HBM (32 GiB, or `hbm`) over the multiquery bf16 cache of 256 / 64
    sequences per chip, 2 L H b per token (L H b with keys only), rounded down."""
    palm = get_model("palm-540b")
    per_token = (1 if key_bytes_only else 2) * palm.n_layers * palm.n_kv_heads * palm.head_dim * 2
    capacity = get_chip("tpu-v4").hbm_capacity if hbm is None else hbm
    return math.floor(0.3 * capacity / (256 // 64 * per_token))


def _v5e16_70b(weight_bytes=None, hbm=None, keys_only=False, round_up=False) -> int:
    """ch4's largest batch (LLaMA-3-70B, 16 v5e, 8,192 tokens, bf16) with one input mistaken."""
    capacity = 16 * (get_chip("tpu-v5e").hbm_capacity if hbm is None else hbm)
    weights = param_bytes("llama3-70b") if weight_bytes is None else weight_bytes
    cache = kv_cache_bytes("llama3-70b", 8192) / (2 if keys_only else 1)
    return (math.ceil if round_up else math.floor)((capacity - weights) / cache)


def _worked_batch(kv_factor=1.0, hbm=None, round_up=False, n_kv_heads=8) -> int:
    """Worked problem 2 (the sb7-worked model on 16 v5e, 8,192 tokens, int8 weights and cache) with one input
    mistaken: the cache per sequence times `kv_factor`, another HBM per chip, rounding up, another KV head count."""
    model = get_model("sb7-worked").with_(n_kv_heads=n_kv_heads)
    capacity = 16 * (get_chip("tpu-v5e").hbm_capacity if hbm is None else hbm)
    cache = kv_cache_bytes(model, 8192, dtype="int8") * kv_factor
    return (math.ceil if round_up else math.floor)((capacity - param_bytes(model, "int8")) / cache)


GIB_FOR_GB = 2**30 / 1e9  # a capacity in GiB read as GB, or the reverse

FAMILIES = (
    Family("keys only", r"keys only", (
        times("ch2.kv-bytes-per-token-palm-62b", 0.5),
        times("ch4.kv-per-token-llama3-70b", 0.5),
        times("ch4.kv-32k-llama3-8b", 0.5, "cache"),
        value("ch4.max-batch-llama3-70b-v5e16", lambda: _v5e16_70b(keys_only=True)),
        times("ch6.mqa-or-local-global-llama3-70b", 0.5, "mqa"),
        times("ch6.mqa-or-local-global-llama3-70b", 0.5, "local_global"),
        times("ch6.cla-llama3-8b-b32", 0.5, "stored"),
        times("ch6.cla-llama3-8b-b32", 0.5, "read"),
        value("ch8.context-batch-sharded-b256", lambda: _palm_context(key_bytes_only=True)),
        times("ch9.kv-transfer-llama3-70b-32k-v5e16-dcn", 0.5),
        times("ch14.sequence-sharded-kv-palm-62b", 0.5),
        times("wp.q1-kv-per-token", 0.5),
        value("wp.q2-max-batch", lambda: _worked_batch(kv_factor=0.5)),
        # a step that reads the caches: only its KV term halves
        value("ch3.tpot-llama3-8b-h200-b32", lambda: _half_kv(decode_step_time("llama3-8b", "h200", 1, 32, 4096))),
        value("ch5.throughput-llama3-70b-v5e16-int8", lambda: 32 / _half_kv(decode_step_time(
            "llama3-70b", "tpu-v5e", 16, 32, 8192, "int8", "int8", "bf16")), "throughput"),
        value("ch6.t4-int8-kv-only", lambda: _half_kv(decode_step_time(**T4_DEPLOYMENT, kv_dtype="int8")), "step"),
        value("ch10.int4-fp8-step-llama3-70b-ironwood-16k", lambda: _half_kv(decode_step_time(
            "llama3-70b", "ironwood", 8, 32, 16384, weight_dtype="int4", kv_dtype="fp8"))),
    )),
    Family("the factor 2 of a multiply-add", r"factor 2|P FLOPs per token|1 FLOP", (
        times("ch2.decode-step-flops-llama3-70b", 0.5),
        times("ch3.ttft-llama3-8b-h100-4k", 0.5),
        times("ch5.kv-crossover-llama3-70b-b200", 0.5),
        times("ch8.mfu-at-bound-low-latency-decode", 0.5),
        times("ch9.prefill-llama3-70b-8k-v6e8", 0.5),
        times("ch9.prefill-per-decode-llama3-70b-b48", 0.5),
        times("ch12.mfu-palm-62b-decode-run", 0.5),
        times("ch14.prefill-llama3-8b-32k-ironwood", 0.5),
    )),
    Family("P for P_mm, or P_mm for P", r"P_mm|\b2P\b|embedding", (
        value("ch2.decode-step-flops-llama3-70b", lambda: decode_step_flops("llama3-70b", 8192, batch=32).total
              + 2 * 32 * (active_param_count("llama3-70b") - matmul_params("llama3-70b"))),
        times("ch3.ttft-llama3-8b-h100-4k", _p_mm_over_p("llama3-8b")),
        value("ch4.max-batch-llama3-70b-v5e16", lambda: _v5e16_70b(weight_bytes=2 * matmul_params("llama3-70b"))),
        times("ch9.prefill-llama3-70b-8k-v6e8", _p_mm_over_p("llama3-70b")),
        times("ch9.prefill-per-decode-llama3-70b-b48", _p_mm_over_p("llama3-70b")),
        times("ch14.prefill-llama3-8b-32k-ironwood", _p_mm_over_p("llama3-8b")),
        value("wp.q1-params", lambda: param_count(get_model("sb7-worked"))
              - get_model("sb7-worked").vocab_size * get_model("sb7-worked").d_model),
        times("wp.q3-weight-load", 1 - get_model("sb7-worked").vocab_size * get_model("sb7-worked").d_model
              / param_count(get_model("sb7-worked"))),
    )),
    Family("bits for bytes", r"bits?\b", (
        times("ch1.bcrit-v6e-int4", 8.0),  # int4's 4 bits read as 4 bytes
        text("ch2.kv-bytes-per-token-palm-62b", lambda: _in_bits("ch2.kv-bytes-per-token-palm-62b")),
        times("ch4.kv-per-token-llama3-70b", 8.0),  # the bits of the cache, labelled kB
        text("ch4.kv-per-token-llama3-70b", lambda: _in_bits("ch4.kv-per-token-llama3-70b")),
        times("ch4.kv-32k-llama3-8b", 8.0, "cache"),
        times("ch6.mqa-or-local-global-llama3-70b", 8.0, "mqa"),
        text("ch7.latency-bound-v5e-16", lambda: _in_bits("ch7.latency-bound-v5e-16")),
        times("ch8.2d-ws-bytes-palm-540b-512", 8.0),
        times("ch9.kv-transfer-llama3-70b-32k-v5e16-dcn", 1 / 8),  # the DCN's gigabits read as gigabytes
        text("ch14.sequence-sharded-kv-palm-62b", lambda: _in_bits("ch14.sequence-sharded-kv-palm-62b")),
        times("wp.q1-kv-per-token", 8.0),
        text("ch1.hbm-for-v5e-bcrit-h100", lambda: _in_bits("ch1.hbm-for-v5e-bcrit-h100")),
        value("ch7.fsdp-replicated-embedding", lambda: 8 * _expected("ch7.fsdp-replicated-embedding")),
        text("ch7.fsdp-replicated-embedding", lambda: _in_bits("ch7.fsdp-replicated-embedding")),
        text("ch6.mqa-or-local-global-llama3-70b", lambda: _in_bits("ch6.mqa-or-local-global-llama3-70b",
                                                                    "local_global"), "local_global"),
    )),
    Family("a unit prefix off by 1,000", r"power of 1,000|1,000", (
        times("ch1.matmul-time-v5e", 1e-3, "time"),  # seconds typed as ms
        times("ch9.prefill-llama3-70b-8k-v6e8", 1e3),  # ms typed as s
        times("ch7.latency-bound-v5e-16", 1e-3),  # bytes typed as kB
        times("ch14.sequence-sharded-kv-palm-62b", 1e3),  # MB typed as GB
    )),
    Family("GiB for GB", r"GiB|KiB|MiB|TiB", (
        times("ch2.kv-bytes-per-token-palm-62b", 1e3 / 2**10),
        times("ch4.kv-32k-llama3-8b", 1 / GIB_FOR_GB, "cache"),
        value("ch4.max-batch-llama3-70b-v5e16", lambda: _v5e16_70b(hbm=16 * 2**30)),
        times("ch6.cla-llama3-8b-b32", 1 / GIB_FOR_GB, "stored"),
        value("ch8.context-batch-sharded-b256", lambda: _palm_context(hbm=32e9)),
        times("ch4.kv-per-token-llama3-70b", 1e3 / 2**10),
        times("ch8.2d-ws-bytes-palm-540b-512", 1e6 / 2**20),
        times("ch14.sequence-sharded-kv-palm-62b", 1 / GIB_FOR_GB),
        value("wp.q2-max-batch", lambda: _worked_batch(hbm=16 * 2**30)),
        times("wp.q6-free-hbm", 1 / GIB_FOR_GB),
    )),
    Family("one direction of a link for both, or both for one", r"one-way|bidirectional|one direction|both "
                                                                 r"directions|one NVLink link", (
        value("ch7.max-mp-llama3-8b-ironwood-b64", lambda: _expected("ch7.max-mp-llama3-8b-ironwood-b64") // 2),
        times("ch7.latency-bound-v5e-16", 2.0),
        times("ch7.fsdp-slowdown-llama3-70b-ironwood4", 2.0),
        times("wp.q4-model-parallel-bound", 0.5),
    )),
    Family("one chip's share of the work, for all n", r"one chip|one device|not split|per chip|chip's", (
        times("ch5.pop-quiz-30b-batch64", 16.0, "step"),
        times("ch5.weight-floor-llama3-70b-v5e16-int4", 16.0),
        times("ch8.mfu-at-bound-low-latency-decode", 64.0),
        times("ch9.prefill-llama3-70b-8k-v6e8", 8.0),
        times("ch9.kv-transfer-llama3-70b-32k-v5e16-dcn", 16.0),
        times("ch14.prefill-llama3-8b-32k-ironwood", 4.0),
        times("ch14.sequence-sharded-kv-palm-62b", 16.0),
        times("wp.q3-weight-load", 16.0),
        times("ch4.gqa-throughput-largest-batch", 1 / 8),  # the whole server asked, one chip's share given
        times("ch5.throughput-llama3-70b-v5e16-int8", 1 / 16, "throughput"),
    )),
    Family("the peak rate for the achieved one (no MFU)", r"peak rate|no MFU|MFU", (
        times("ch3.ttft-llama3-8b-h100-4k", 0.4),
        times("ch9.prefill-llama3-70b-8k-v6e8", 0.4),
        times("ch9.prefill-per-decode-llama3-70b-b48", 0.4),
        times("ch14.prefill-llama3-8b-32k-ironwood", 0.4),
        value("ch14.prefill-saturating-batch-llama3-8b", lambda: prefill_saturating_batch(
            "llama3-8b", "tpu-v5e", 30, mfu=1.0)),
    )),
    Family("the ratio upside down", r"upside down|per prefill server", (
        value("ch1.bcrit-h200-vs-h100", lambda: 1 / _expected("ch1.bcrit-h200-vs-h100", "factor"), "factor"),
        value("ch2.naive-over-cached-llama3-8b", lambda: 1 / _expected("ch2.naive-over-cached-llama3-8b")),
        value("ch7.fsdp-slowdown-llama3-70b-ironwood4",
              lambda: 1 / _expected("ch7.fsdp-slowdown-llama3-70b-ironwood4")),
        value("ch9.prefill-per-decode-llama3-70b-b48", lambda: 1 / _expected("ch9.prefill-per-decode-llama3-70b-b48")),
    )),
    Family("a count rounded the wrong way", r"round", (
        value("ch4.max-batch-llama3-70b-v5e16", lambda: _v5e16_70b(round_up=True)),
        value("ch4.kv-32k-llama3-8b", lambda: _expected("ch4.kv-32k-llama3-8b", "outweigh") - 1, "outweigh"),
        value("ch7.max-mp-llama3-8b-ironwood-b64", lambda: _expected("ch7.max-mp-llama3-8b-ironwood-b64") + 1),
        value("ch8.context-batch-sharded-b256", lambda: _expected("ch8.context-batch-sharded-b256") + 1),
        value("ch14.prefill-saturating-batch-llama3-8b",
              lambda: _expected("ch14.prefill-saturating-batch-llama3-8b") - 1),
        value("wp.q2-max-batch", lambda: _worked_batch(round_up=True)),
        value("wp.q2-max-batch-mqa", lambda: _worked_batch(round_up=True, n_kv_heads=1)),
    )),
    Family("query heads for KV heads", r"query head|one KV head per|multi-head|G = 1|no grouping|every query", (
        times("ch2.kv-bytes-per-token-palm-62b", 32.0),
        times("ch4.kv-per-token-llama3-70b", 8.0),
        times("ch4.kv-32k-llama3-8b", 4.0, "cache"),
        times("ch5.kv-crossover-llama3-70b-b200", 1 / 8),
        times("wp.q1-kv-per-token", 4.0),
        value("wp.q2-max-batch", lambda: _worked_batch(n_kv_heads=32)),
        value("ch3.decode-attention-intensity-palm-62b", lambda: 1.0 * 2048 / (2048 + 1)),  # G = 1: S / (S + 1)
    )),
    Family("the weights in the neighbouring format", r"bf16|int8|int4|one byte|1 byte|2 bytes|counted as", (
        times("ch1.bcrit-v6e-int4", 2.0),  # int4 counted as one byte
        value("ch5.pop-quiz-30b-batch64", lambda: step_time_bound(
            batch=64, **(dict(T2_INPUTS) | {"param_bytes": 2 * T2_INPUTS["param_count"]})).total_s, "step"),
        times("ch5.weight-floor-llama3-70b-v5e16-int4", 2.0),
        value("ch6.int4-weights-llama3-70b-v5e16", lambda: decode_step_time(
            "llama3-70b", "tpu-v5e", 16, 16, 2048, weight_dtype="int8").total_s),
        value("ch10.int4-fp8-step-llama3-70b-ironwood-16k", lambda: decode_step_time(
            "llama3-70b", "ironwood", 8, 32, 16384, weight_dtype="int8", kv_dtype="fp8").total_s),
        value("ch12.step-palm-540b-decode-b128", lambda: layout_cost(
            "palm-540b", "tpu-v4", 64, "decode", 128, "2d-ws", "batch").total_s),
        value("ch14.prefill-saturating-batch-llama3-8b", lambda: prefill_saturating_batch(
            "llama3-8b", "tpu-v5e", 30, mfu=0.4, weight_dtype="int8")),
        times("wp.q3-weight-load", 2.0),
        times("wp.q6-weight-load", 0.5),  # bf16 stated: one byte used
    )),
    Family("a cache format other than the one stated", r"cache|KV", (
        value("ch5.throughput-llama3-70b-v5e16-int8", lambda: decode_throughput(
            "llama3-70b", "tpu-v5e", 16, 32, 8192, "int8", "bf16", "bf16"), "throughput"),
        value("ch6.t4-int8-kv-only", lambda: decode_step_time(**T4_DEPLOYMENT).total_s, "step"),
        value("ch10.int4-fp8-step-llama3-70b-ironwood-16k", lambda: decode_step_time(
            "llama3-70b", "ironwood", 8, 32, 16384, weight_dtype="int4", kv_dtype="bf16").total_s),
        value("wp.q2-max-batch", lambda: _worked_batch(kv_factor=2.0)),
        value("ch6.int4-weights-llama3-70b-v5e16", lambda: decode_step_time(
            "llama3-70b", "tpu-v5e", 16, 16, 2048, weight_dtype="int4", kv_dtype="int4").total_s),
    )),
    Family("hops miscounted", r"hops?\b|wraparound|n/2|layer", (
        times("ch7.latency-bound-v5e-16", 0.5),  # n/2 hops a pass at one direction's bandwidth: half the threshold
        value("ch12.torus-diameter-4x4x8", lambda: (4 - 1) + (4 - 1) + (8 - 1)),  # lines, no wraparound
        value("ch7.hop-crossing-llama3-8b-v5e-b32", lambda: next(
            n for n, torus in sorted(TORUS_SHAPES["tpu-v5e"].items())
            if decode_hops_per_layer("llama3-8b", n, 32, torus, chip="tpu-v5e") * 1e-6
            > param_bytes("llama3-8b") / (n * get_chip("tpu-v5e").hbm_bandwidth))),  # one layer's hops
    )),
    Family("one number, two slips: each must be named", r".", (
        # prefill attention's intensity taken as T/4 lands where the fp8 rate does (2 x ridge x 2)
        times("ch1.prefill-attention-crossover-h100", 2.0, words=r"T/4"),
        # half the batch doubles the context a cache fraction allows, as keys only does
        value("ch8.context-batch-sharded-b256", lambda: max_context_length(
            "palm-540b", "tpu-v4", 64, 128, "batch", 0.3), words=r"batch"),
        # one expert on each of 16 chips, whether or not it fits, lands where int8 weights do
        value("wp.q6-smallest-slice", lambda: 16, words=r"expert"),
        # attention over the K KV heads instead of the N query heads: within the band of the matmuls alone
        value("ch2.decode-step-flops-llama3-70b", lambda: decode_step_flops("llama3-70b", 8192, batch=32).matmul
              + decode_step_flops("llama3-70b", 8192, batch=32).attention * 8 / 64, words=r"KV heads"),
    )),
)


def _slip_words_match(words: str, slip: str | None) -> bool:
    return slip is not None and re.search(words, slip) is not None


@dataclass(frozen=True)
class Result:
    typed: Typed
    verdict: str  # "named", "misnamed", "unnamed" or "accepted"
    slip: str | None
    message: str


def audit(families=FAMILIES) -> tuple:
    """Every family's slip typed into every sibling: one `Result` each."""
    results = []
    for family in families:
        for eid, name, answer, words in family.siblings:
            typed = Typed(family.name, eid, name, answer())
            exercise = REGISTRY[eid]
            given = {name: typed.answer} if len(exercise.parts) > 1 else typed.answer
            verdict = grade(eid, given)
            part = next(v for v, p in zip(verdict.parts, exercise.parts) if p.name == name)
            if part.correct:
                kind = "accepted"
            elif part.slip is None:
                kind = "unnamed"
            else:
                kind = "named" if _slip_words_match(words or family.words, part.slip) else "misnamed"
            results.append(Result(typed, kind, part.slip, part.message))
    return tuple(results)


def summary(results) -> dict:
    counts = {kind: sum(r.verdict == kind for r in results) for kind in ("named", "misnamed", "unnamed", "accepted")}
    counts["typed"] = len(results)
    return counts


def main(argv=()) -> int:
    results = audit()
    if "--list" in argv:
        for r in results:
            where = f"{r.typed.exercise}:{r.typed.part}" if r.typed.part else r.typed.exercise
            print(f"{r.verdict:>9}  {r.typed.family:<45} {where:<48} {r.typed.answer!s:<16} {r.slip or ''}")
    counts = summary(results)
    print(f"{counts['typed']} slips typed in {len(FAMILIES)} families: {counts['named']} named "
          f"({counts['named'] / counts['typed']:.0%}), {counts['misnamed']} misnamed, {counts['unnamed']} unnamed, "
          f"{counts['accepted']} accepted")
    for family in FAMILIES:
        mine = [r for r in results if r.typed.family == family.name]
        print(f"  {family.name}: {sum(r.verdict == 'named' for r in mine)} / {len(mine)} named")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
