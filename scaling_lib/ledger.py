"""The claims ledger: every claim of the book's sources, the number the source publishes, and ours.

One frozen `Claim` row per claim of shared/claims.md (R1-R5, M1-M6, T1-T4, S1-S6, P1-P5, V1-V6), split into
sub-rows where a claim states several numbers ("M4 batch 1 step time"). Each row holds

- what the source publishes, as it states it (`published`, a string) and, where it is a number, the same number
  in SI units (`published_value`): these are the *sources'* numbers, kept here only to be compared against;
- a zero-argument callable `compute` that asks scaling_lib for OUR value (the same library calls the claim tests
  make; nothing is re-derived here);
- a `Tolerance`: relative (default 2%), a range ("about 280-300", "3-4"), or a property check for qualitative
  claims, where `compute` returns a `Finding` (our value, whether the property holds, and what was checked);
- a `note` where the sources disagree (GiB vs 1e9 B, the GQA 1:5 table keeping MHA weights, beta 9.1 rounded to 8,
  H100 280 vs 295, Pope et al. vs the Scaling Book 2D crossover) or where the source gives no configuration.

`evaluate(claim)` returns a `ClaimResult(ours, holds, detail)`; `evaluate_all()` evaluates every row. The book's
appendix "Claims ledger" is generated from `evaluate_all()`, and tests/test_claims_ledger.py asserts every row holds.
"""

import itertools
import math
from dataclasses import dataclass
from typing import Callable

from .hardware import get_chip
from .units import format_quantity, parse_unit

REL = 0.02

# Source labels (bibliography keys in book/references.bib: scalingbook, pope2022, tpuinference).
SB1 = "Scaling Book ch. 1"
SB7 = "Scaling Book ch. 7"
SB8 = "Scaling Book ch. 8"
POPE = "Pope et al. 2022"
TPUI = "TPU inference chapter"


@dataclass(frozen=True)
class Tolerance:
    """How our value is compared with the published one.

    kind "rel": |ours / published - 1| <= rel; "range": low <= ours <= high (either bound may be None);
    "property": `compute` returns a `Finding` that says itself whether the property holds.
    """

    kind: str = "rel"
    rel: float = REL
    low: float | None = None
    high: float | None = None
    unit: str = ""  # display unit of low / high
    text: str = ""  # the property checked, in words (kind "property")

    def __post_init__(self):
        if self.kind not in ("rel", "range", "property"):
            raise ValueError(f"unknown tolerance kind {self.kind!r}; use 'rel', 'range' or 'property'")
        if self.kind == "rel" and not 0 <= self.rel < 1:
            raise ValueError(f"rel must be in [0, 1), got {self.rel!r}")
        if self.kind == "range" and self.low is None and self.high is None:
            raise ValueError("a range tolerance needs low, high or both")

    def describe(self) -> str:
        if self.kind == "rel":
            return f"±{self.rel:.0%}" if self.rel >= 0.01 else f"±{self.rel:.0e}"
        if self.kind == "property":
            return self.text or "property"

        def show(value):
            return format_quantity(value, self.unit, 4) if self.unit else f"{value:g}"

        if self.low is None:
            return f"≤ {show(self.high)}"
        if self.high is None:
            return f"≥ {show(self.low)}"
        return f"{show(self.low)} to {show(self.high)}"


def within(rel: float = REL) -> Tolerance:
    return Tolerance("rel", rel=rel)


def between(low: float | None, high: float | None, unit: str = "") -> Tolerance:
    return Tolerance("range", low=low, high=high, unit=unit)


def holds_that(text: str) -> Tolerance:
    return Tolerance("property", text=text)


@dataclass(frozen=True)
class Finding:
    """What a property check found: our value (a number in the claim's unit, or a short text), and whether it holds."""

    value: object
    holds: bool
    detail: str = ""


@dataclass(frozen=True)
class Claim:
    """One row of the ledger. `key` = id plus the sub-row's part, e.g. "M4 batch 1 step time"."""

    id: str
    part: str
    statement: str
    source: str
    published: str
    published_value: float | None
    unit: str
    compute: Callable[[], object]
    tolerance: Tolerance = Tolerance()
    note: str = ""

    @property
    def key(self) -> str:
        return f"{self.id} {self.part}".strip()


@dataclass(frozen=True)
class ClaimResult:
    """Our value (SI number or text), whether the claim holds within its tolerance, and how it was judged."""

    ours: object
    holds: bool
    detail: str
    claim: Claim | None = None

    @property
    def ours_text(self) -> str:
        if isinstance(self.ours, (int, float)) and not isinstance(self.ours, bool) and self.claim is not None:
            return show(float(self.ours), self.claim.unit)
        return str(self.ours)


def show(value: float, unit: str) -> str:
    """`units.format_quantity` to 4 digits, but 12,345 rather than 1.234e+04 (and 1.302e10 for huge counts)."""
    text = format_quantity(value, unit, 4)
    if "e+" in text:
        scaled = value / parse_unit(unit)[0]
        text = f"{scaled:,.0f} {unit}".strip() if abs(scaled) < 1e9 else text.replace("e+", "e")
    return text


def evaluate(claim: Claim) -> ClaimResult:
    """Compute our value for `claim` and judge it against the published value with the claim's tolerance."""
    tol = claim.tolerance
    try:
        value = claim.compute()
    except Exception as error:  # a broken computation is a claim that does not hold, with the reason shown
        return ClaimResult(f"error: {error}", False, f"{type(error).__name__}: {error}", claim)
    if tol.kind == "property":
        if not isinstance(value, Finding):
            return ClaimResult(value, False, "a property check must return a Finding", claim)
        return ClaimResult(value.value, bool(value.holds), value.detail, claim)
    if isinstance(value, Finding) or isinstance(value, bool) or not isinstance(value, (int, float)):
        return ClaimResult(value, False, f"expected a number for a {tol.kind} tolerance, got {value!r}", claim)
    value = float(value)
    shown = show(value, claim.unit)
    if tol.kind == "rel":
        if claim.published_value is None:
            return ClaimResult(value, False, "a relative tolerance needs a published value", claim)
        off = value / claim.published_value - 1.0
        ok = math.isfinite(off) and abs(off) <= tol.rel * (1 + 1e-12)
        detail = (f"{shown} vs published {show(claim.published_value, claim.unit)}: "
                  f"{off:+.2%} ({'within' if ok else 'outside'} {tol.describe()})")
        return ClaimResult(value, ok, detail, claim)
    ok = (tol.low is None or value >= tol.low) and (tol.high is None or value <= tol.high)
    return ClaimResult(value, ok, f"{shown} {'in' if ok else 'outside'} {tol.describe()}", claim)


def evaluate_all(claims=None) -> tuple:
    """`evaluate` every row of the ledger (or of `claims`), in ledger order."""
    return tuple(evaluate(claim) for claim in (CLAIMS if claims is None else claims))


def claims_holding(results) -> dict:
    """{claim id: whether every row of that claim holds}, in ledger order, from `evaluate_all()`'s results."""
    status = {}
    for result in results:
        key = result.claim.id if result.claim is not None else "?"
        status[key] = status.get(key, True) and bool(result.holds)
    return status


def claim_ids(claims=None) -> tuple:
    """The distinct claim ids (R1, ..., V6) covered, in ledger order."""
    return tuple(dict.fromkeys(claim.id for claim in (CLAIMS if claims is None else claims)))


# ==================================================================================================== computations
# Each helper below is the library call a claim test makes (tests/test_claims_*.py, tests/test_kv_levers.py).

def _bcrit(chip, weight_dtype="bf16", compute_dtype="bf16"):
    from .roofline import critical_batch_size
    return critical_batch_size(chip, weight_dtype, compute_dtype)


def _r4_prefill_intensity():
    from .roofline import attention_intensity
    return attention_intensity(8192, 8192)


def _r4_prefill_threshold():
    from .roofline import ridge_point
    return 2 * ridge_point("tpu-v5e")


def _r4_decode_intensity(n_heads, n_kv_heads, batch):
    from .roofline import attention_bytes, attention_flops
    return (attention_flops(1, 8192, n_heads=n_heads, head_dim=128, batch=batch)
            / attention_bytes(1, 8192, n_heads=n_heads, n_kv_heads=n_kv_heads, head_dim=128, batch=batch))


def _r4_mha_any_batch():
    values = [_r4_decode_intensity(40, 40, batch) for batch in (1, 16, 256)]
    spread = max(values) / min(values) - 1
    ok = all(abs(v - 1) <= REL for v in values) and spread < 1e-9
    return Finding(values[0], ok, "batch 1, 16, 256: " + ", ".join(f"{v:.3f}" for v in values) + " FLOPs/B")


def _r5():
    from .roofline import moe_critical_batch_size
    return moe_critical_batch_size("tpu-v5e", n_experts=16, n_active_experts=2)


_CONTEXT = 8192


def _m_params():
    from .models import get_model, param_count
    return param_count(get_model("llama2-13b"))


def _m_param_bytes():
    from .memory import param_bytes
    return param_bytes("llama2-13b", "bf16")


def _m_kv(batch=1):
    from .memory import kv_cache_bytes
    return kv_cache_bytes("llama2-13b", _CONTEXT, batch=batch, dtype="bf16")


def _m3_four_caches():
    caches = _m_param_bytes() / _m_kv()
    return Finding(caches, 3 < caches < 4, f"the weights hold {caches:.2f} caches' worth of bytes: 3 fit below "
                                           f"them, a 4th exceeds them")


def _m4_footprint(batch):
    from .memory import memory_footprint
    return memory_footprint("llama2-13b", "tpu-v5e", 8, batch, _CONTEXT)


def _m4_step(batch):
    from .inference import decode_step_time
    return decode_step_time("llama2-13b", "tpu-v5e", 8, batch, _CONTEXT)


def _m4_throughput(batch):
    from .inference import decode_throughput
    return decode_throughput("llama2-13b", "tpu-v5e", 8, batch, _CONTEXT)


def _m4_batch16_does_not_fit():
    footprint = _m4_footprint(16)
    capacity = 8 * get_chip("tpu-v5e").hbm_capacity
    return Finding(footprint.total_bytes, not footprint.fits,
                   f"{format_quantity(footprint.total_bytes, 'GB', 4)} against "
                   f"{format_quantity(capacity, 'GB', 4)} of HBM: fits = {footprint.fits}")


def _m4_memory_bound_at_240():
    step = _m4_step(240)
    return Finding(step.bound, step.bound == "memory",
                   f"decode_step_time(batch=240).bound = {step.bound!r}: the MLP FLOP term stays below the "
                   f"weight load, so the general step time equals the pure memory-bound table")


def _gqa_1_to_5():
    from .models import get_model
    return get_model("llama2-13b").with_(n_kv_heads=8)


def _m5_total(batch):
    from .memory import kv_cache_bytes, param_bytes
    return param_bytes("llama2-13b") + kv_cache_bytes(_gqa_1_to_5(), _CONTEXT, batch=batch)


def _m5_batch64_fits():
    from .memory import kv_cache_bytes, param_bytes
    capacity = 8 * get_chip("tpu-v5e").hbm_capacity
    gqa = _m5_total(64)
    mha = param_bytes("llama2-13b") + kv_cache_bytes("llama2-13b", _CONTEXT, batch=64)
    return Finding(gqa, gqa <= capacity < mha,
                   f"GQA {format_quantity(gqa, 'GB', 4)} ≤ {format_quantity(capacity, 'GB', 4)} of HBM < "
                   f"MHA {format_quantity(mha, 'GB', 4)}")


def _m5_throughput(batch):
    from .inference import step_time_bound
    from .memory import kv_cache_bytes, param_bytes
    from .models import param_count
    step = step_time_bound(batch=batch, kv_bytes_per_sequence=kv_cache_bytes(_gqa_1_to_5(), _CONTEXT),
                           param_bytes=param_bytes("llama2-13b"), param_count=param_count(_m_model()),
                           chip="tpu-v5e", n_chips=8)
    return batch / step.total_s


def _m_model():
    from .models import get_model
    return get_model("llama2-13b")


_M6_ORDER = ("GQA", "local attention", "cross-layer sharing", "KV quantization", "paged attention")


def _m6_levers():
    from .kv_levers import kv_lever_table
    rows = {row.lever: row for row in kv_lever_table("llama2-13b", _CONTEXT, batch=64)}
    savings = [rows[name].stored_saving for name in _M6_ORDER]
    ranked = all(a >= b for a, b in zip(savings, savings[1:]))
    shrink = all(r.stored_bytes < r.baseline_stored and r.read_bytes <= r.baseline_read for r in rows.values())
    cross = rows["cross-layer sharing"]
    ok = ranked and shrink and math.isclose(cross.read_saving, 1.0) and rows["MQA"].stored_saving >= savings[0]
    text = " ≥ ".join(f"{name} {s:.2f}x" for name, s in zip(_M6_ORDER, savings))
    return Finding(text, ok, f"stored-bytes savings (MQA {rows['MQA'].stored_saving:.0f}x); cross-layer sharing "
                             f"saves {cross.stored_saving:.1f}x of memory and {cross.read_saving:.1f}x of reads; "
                             f"all levers together {rows['all of the above'].stored_saving:.0f}x")


_T1_INPUTS = dict(kv_bytes_per_sequence=1e9, param_bytes=26e9, param_count=13e9, n_chips=8)


def _t1_switch():
    from .inference import step_time_bound
    bcrit = _bcrit("tpu-v5e")
    below = step_time_bound(batch=bcrit * 0.999, chip="tpu-v5e", **_T1_INPUTS).bound
    above = step_time_bound(batch=bcrit * 1.001, chip="tpu-v5e", **_T1_INPUTS).bound
    empty = step_time_bound(batch=0, chip="tpu-v5e", **_T1_INPUTS)
    ok = below == "memory" and above == "compute" and empty.kv_s == 0
    return Finding(bcrit, ok, f"step_time_bound is {below}-bound just below B_crit = {bcrit:.1f} and {above}-bound "
                              f"just above it; at batch 0 only the weight load remains")


def _t2(batch):
    from .inference import step_time_bound
    return step_time_bound(batch=batch, kv_bytes_per_sequence=8192 * 100e3, param_bytes=30e9 * 1,
                           param_count=30e9, chip="tpu-v5e", n_chips=16, compute_dtype="bf16").total_s


def _t3_floor():
    from .inference import decode_step_time
    from .memory import param_bytes
    from .models import get_model
    worst = math.inf
    for model, chip, n_chips in (("llama2-13b", "tpu-v5e", 8), ("llama3-70b", "tpu-7x", 8), ("llama3-8b", "h100", 1)):
        floor = param_bytes(model, "bf16") / (n_chips * get_chip(chip).hbm_bandwidth)
        for batch, context in itertools.product((0, 1, 32, 1024), (0, 128, 32768)):
            worst = min(worst, decode_step_time(get_model(model), chip, n_chips, batch, context).total_s / floor)
    return Finding(worst, worst >= 1.0, f"smallest step / weight-read time over 3 models x 12 (batch, context) "
                                        f"points: {worst:.6f}")


_T4 = dict(model="llama3-70b", chip="ironwood", n_chips=8, batch=64, context_len=32768)


def _t4(dtype):
    from .inference import decode_step_time
    if dtype == "bf16":
        return decode_step_time(**_T4).total_s
    return decode_step_time(**_T4, weight_dtype=dtype, kv_dtype=dtype, compute_dtype=dtype).total_s


def _beta(chip):
    from .sharding import beta
    return beta(chip)


def _max_mp(d_ff, batch, beta_value):
    from .sharding import max_decode_model_parallelism
    return max_decode_model_parallelism(d_ff, batch, beta_value)


def _s2_ways():
    from .models import get_model
    return _max_mp(get_model("llama3-70b").d_ff, 32, _beta("ironwood"))


def _latency_bound(chip):
    from .sharding import latency_bound_bytes
    return latency_bound_bytes(chip, 8)


def _s3_latency_bound_collective():
    from .dtypes import bytes_per_element
    from .sharding import collective_time
    payload = 16 * 8192 * bytes_per_element("int8")  # B = 16 activations of D = 8,192 in int8
    timing = collective_time("all-gather", payload, "tpu-v5e", 8)
    return Finding(payload, timing.bound == "latency",
                   f"an 8-way all-gather of {format_quantity(payload, 'kB', 4)} on v5e is {timing.bound}-bound")


def _s4_slowdown():
    from .sharding import fsdp_decode_cost
    return fsdp_decode_cost("llama3-70b", "tpu-v5e", 8).slowdown


def _s5_kv_sharding():
    from .models import get_model
    from .sharding import kv_cache_sharding
    split = kv_cache_sharding(get_model("llama3-70b").n_kv_heads, 32, 16)
    count = split.all_to_alls_per_attention_layer
    unsplit = kv_cache_sharding(get_model("llama3-70b").n_kv_heads, 32, 8)
    ok = (split.head_shards, split.batch_shards, count) == (8, 2, 2) and unsplit.all_to_alls_per_attention_layer == 0
    return Finding(count, ok, f"LLaMA-3-70B (K = 8) on 16 shards: {split.head_shards} by heads x "
                              f"{split.batch_shards} by batch, {count} all-to-alls per attention layer (8 shards: "
                              f"{unsplit.all_to_alls_per_attention_layer})")


def _s6():
    from .sharding import max_prefill_model_parallelism
    return max_prefill_model_parallelism("tpu-v5e", 28672)


_PALM = "palm-540b"
_SLICE = (4, 4, 4)
_TOKENS = tuple(64 * 2**k for k in range(15))


def _volume(layout, tokens, mesh):
    from .layouts import ffn_comm_volume
    return ffn_comm_volume(layout, _PALM, tokens, mesh).total_bytes


def _p1_1d_flat():
    volumes = [_volume("1d-ws", 4096, mesh) for mesh in ((2, 2, 2), (2, 2, 4), (4, 4, 4), (4, 8, 8), (8, 8, 16))]
    spread = max(volumes) / min(volumes)
    return Finding(spread, math.isclose(spread, 1.0, rel_tol=1e-12),
                   "largest / smallest 1D weight-stationary volume per chip over 8 to 1,024 chips")


def _p1_2d_ratio():
    return _volume("2d-ws", 4096, (2, 2, 4)) / _volume("2d-ws", 4096, (16, 8, 8))


def _p1_wg_ratio():
    from .models import get_model
    f = get_model(_PALM).d_ff
    t_x, t_xy = 4**2 * f / 64, 16**2 * f / 64  # optimal gather size sqrt(T n / F) = X = 4 and X Y = 16
    return _volume("wg-xy", t_xy, _SLICE) / _volume("wg-x", t_x, _SLICE)


def _p1_switch():
    from .layouts import comm_volume_curves
    curves = comm_volume_curves(_PALM, _SLICE, _TOKENS)
    best = curves.best()
    path = [curves.switch_points[0].from_layout] + [p.to_layout for p in curves.switch_points]
    ok = best[0] == "2d-ws" and best[-1] == "wg-xyz" and "1d-ws" not in best
    first = curves.switch_points[0].tokens
    return Finding(" → ".join(path), ok, f"PaLM 540B on 4x4x4 TPU v4; first switch at {first:,.0f} tokens per batch")


def _p2():
    from .layouts import kv_versus_weights
    from .models import get_model
    return kv_versus_weights(get_model("palm-540b-multihead"), batch=512, context_len=2048)


def _p3_table():
    from .layouts import context_length_table
    return {row.variant: row.context_lengths for row in context_length_table("tpu-v4", 64, (128, 512), 0.3)}


def _p3_ratio():
    rows = _p3_table()
    ratios = [rows["optimized multiquery"][i] / rows["multihead"][i] for i in range(2)]
    ok = all(abs(r / 32 - 1) <= REL for r in ratios) and all(
        rows["baseline multiquery"][i] < rows["multihead"][i] for i in range(2))
    return Finding(ratios[0], ok, f"optimized multiquery / multihead: {ratios[0]:.1f}x at batch 128, "
                                  f"{ratios[1]:.1f}x at batch 512; multiquery sharded over heads is shorter than "
                                  f"multihead")


def _p4_mfu():
    from .layouts import POPE_HEADLINE_RUNS, mfu
    from .models import get_model, param_count
    run = POPE_HEADLINE_RUNS["prefill-high-throughput"]
    return mfu(param_count(get_model(_PALM)), run.tokens, run.seconds, "tpu-v4", 64)


def _p4_decode_gap():
    from .layouts import POPE_HEADLINE_RUNS, decode_latency_gap
    run = POPE_HEADLINE_RUNS["decode-low-latency"]
    gap = decode_latency_gap(_PALM, "tpu-v4", 64, run.batch, run.context_len, run.seconds_per_step,
                             weight_dtype=run.weight_dtype)
    return Finding(gap.bound_s, gap.bound_s <= gap.measured_s,
                   f"roofline lower bound {format_quantity(gap.bound_s, 'ms', 3)} ≤ measured "
                   f"{format_quantity(gap.measured_s, 'ms', 3)} (Table 2: 1.82 s / 64 steps): the real step is "
                   f"{gap.ratio:.1f}x the bound")


def _p5_crossover(convention):
    from .layouts import ws_2d_crossover_chips
    from .models import get_model
    m = get_model(_PALM)
    return ws_2d_crossover_chips(m.d_model, m.d_ff, convention)


def _p5_switch_to_wg():
    from .layouts import CONVENTIONS, layout_switch_points
    paths = {}
    for convention in CONVENTIONS:
        points = layout_switch_points(_PALM, "tpu-v4", _SLICE, convention, tokens_range=(64, 2**20))
        paths[convention] = (points[0].from_layout, points[-1].to_layout)
    ok = paths["pope"] == ("2d-ws", "wg-xyz") and paths["scaling-book"] == ("1d-ws", "wg-xyz")
    return Finding("; ".join(f"{c}: {a} → … → {b}" for c, (a, b) in paths.items()), ok,
                   "PaLM 540B on 4x4x4 TPU v4, 64 to 2^20 tokens per batch")


def _prefill(chip, n_chips):
    from .serving import prefill_latency
    return prefill_latency("llama3-70b", chip, n_chips, 8192, mfu=0.4)


def _v2_ratio():
    from .serving import prefill_to_decode_ratio
    return prefill_to_decode_ratio(0.91, 0.019, 32, 512)  # the source's inputs (Scaling Book ch. 8)


def _v2_from_model():
    from .serving import server_ratio
    return server_ratio("llama3-70b", "tpu-v5e", prompt_len=8192, output_len=512, decode_batch=32,
                        n_prefill_chips=16, n_decode_chips=16).prefill_per_decode


def _v3_engines():
    from .serving import ServingConfig, poisson_workload, simulate
    config = ServingConfig("llama3-70b", "tpu-v5e", n_chips=16, max_batch=32, max_context_len=8192)
    mixed = dict(prompt_len=(512, 4096), output_len=(64, 512))

    def run(engine, workload):
        if engine == "disaggregated":
            return simulate(config, workload, engine, n_prefill_servers=2, n_decode_servers=1)
        return simulate(config, workload, engine, n_servers=3)

    low = poisson_workload(0.5, 300, **mixed, seed=5)
    naive_low, inter_low = run("naive", low), run("interleaved", low)
    high = poisson_workload(3.0, 300, **mixed, seed=5)
    naive, inter, disagg = run("naive", high), run("interleaved", high), run("disaggregated", high)
    ok = (inter_low.p99_ttft_s < 0.5 * naive_low.p99_ttft_s and disagg.p99_tpot_s <= inter.p99_tpot_s
          and naive.p99_tpot_s <= inter.p99_tpot_s and naive.p50_ttft_s > 5 * inter.p50_ttft_s)
    text = (f"p99 TTFT {naive_low.p99_ttft_s:.2f} s naive vs {inter_low.p99_ttft_s:.2f} s interleaved (0.5 req/s); "
            f"p99 TPOT {inter.p99_tpot_s * 1e3:.1f} ms interleaved vs {disagg.p99_tpot_s * 1e3:.1f} ms "
            f"disaggregated (3 req/s)")
    return Finding(text, ok, "serving.simulate, LLaMA-3-70B on 3 x 16 v5e, 300 Poisson requests, seed 5: "
                             "interleaving cuts TTFT, disaggregation removes the decode stalls")


def _v4_cost_ratio():
    from .inference import step_time_bound
    draft = step_time_bound(batch=1, kv_bytes_per_sequence=0, param_bytes=2 * 4e9, param_count=4e9, chip="tpu-v5e")
    target = step_time_bound(batch=1, kv_bytes_per_sequence=0, param_bytes=2 * 70e9, param_count=70e9,
                             chip="tpu-v5e")
    return draft.total_s / target.total_s


def _v4_best_lookahead():
    from .speculative import best_lookahead
    return best_lookahead(0.6, _v4_cost_ratio())


def _v4_gains_shrink():
    from .speculative import roofline_speedup
    gains = [roofline_speedup("llama3-70b", "tpu-v5e", 16, b, 2048, 4, 0.6, 4 / 70) for b in (1, 16, 32, 64, 128, 256)]
    ok = all(x >= y - 1e-12 for x, y in zip(gains, gains[1:])) and gains[-1] < gains[0]
    return Finding(f"{gains[0]:.2f}x → {gains[-1]:.2f}x", ok,
                   "roofline speedup, k = 4, acceptance 0.6, batch 1 → 256 (LLaMA-3-70B, 16 v5e, 2,048 tokens)")


def _v5_weight_ratio():
    from .moe import moe_weights
    return moe_weights("sb7-worked", 16, 2).weight_ratio


def _v5_weight_bound():
    from .inference import decode_step_time
    from .moe import as_moe, routing_all_to_all
    moe = as_moe("sb7-worked", 16, 2)
    bound = decode_step_time(moe, "tpu-v5e", 128, 32, 0).bound
    routing = routing_all_to_all(moe, "tpu-v5e", batch=16, expert_shards=8, activation_dtype="int8")
    ok = bound == "memory" and routing.per_layer == 2 and routing.latency_bound
    return Finding(routing.per_layer, ok, f"decode at batch 32 is {bound}-bound; {routing.per_layer} routing "
                                          f"all-to-alls per layer, latency-bound = {routing.latency_bound}")


def _v6_rows():
    from .quantization import quantization_table
    return {(r.weight_dtype, r.kv_dtype): r for r in quantization_table("llama3-70b", "ironwood", 8, 32768, 64)}


def _v6_fewer_bytes():
    rows = _v6_rows()
    ordered = [rows[key] for key in (("bf16", "bf16"), ("int8", "int8"), ("int4", "int8"))]
    ok = ([r.step_s for r in ordered] == sorted((r.step_s for r in ordered), reverse=True)
          and [r.max_batch for r in ordered] == sorted(r.max_batch for r in ordered))
    return Finding(" → ".join(format_quantity(r.step_s, "ms", 3) for r in ordered), ok,
                   "LLaMA-3-70B, 8 Ironwood, batch 64, 32,768 tokens: bf16 → int8 → int4 weights (int8 KV); "
                   "max batch " + " → ".join(str(r.max_batch) for r in ordered))


def _v6_fp8_halves():
    rows = _v6_rows()
    return rows[("fp8", "fp8")].step_s / rows[("bf16", "bf16")].step_s


# ========================================================================================================= the rows

_GIB = "The source labels the column GiB but computes in 1e9 B; we compare in 1e9 B."
_GQA = ("The source's GQA 1:5 table shrinks only the KV cache (K = 40 -> 8) and keeps the 26e9 B of multi-head "
        "weights; so do we.")
_T4_NOTE = ("The source gives no configuration; 8 Ironwood chips, 32,768-token context, batch 64, bf16 -> fp8 "
            "(weights, KV and math) reproduces it.")

CLAIMS = (
    # --- 1. Rooflines and the critical batch size ---------------------------------------------------------------
    Claim("R1", "", "B_crit on TPU v5e, bf16 weights and math", SB7, "240 tokens", 240, "tokens",
          lambda: _bcrit("tpu-v5e")),
    Claim("R2", "range", "B_crit on H100 (bf16)", SB7, "about 280-300 tokens", None, "tokens",
          lambda: _bcrit("h100"), between(280 * (1 - REL), 300, "tokens"),
          "Ch. 7 says about 280; ch. 1 computes 9.89e14 / 3.35e12 = 295. Both are shown."),
    Claim("R2", "ch. 1 value", "B_crit on H100 (bf16), ch. 1's arithmetic", SB1, "295 tokens", 295, "tokens",
          lambda: _bcrit("h100"), note="Ch. 7 rounds the same ratio to about 280."),
    Claim("R3", "int8 weights, bf16 math", "int8 weights with bf16 math halve B_crit on v5e", SB7, "120 tokens", 120,
          "tokens", lambda: _bcrit("tpu-v5e", "int8", "bf16")),
    Claim("R3", "int8 weights, int8 math", "int8 math restores B_crit on v5e", SB7, "240 tokens", 240, "tokens",
          lambda: _bcrit("tpu-v5e", "int8", "int8")),
    Claim("R4", "prefill T/2", "prefill attention intensity S T / (S + T) = T / 2 (T = S = 8,192)", SB7,
          "T/2 = 4,096 FLOPs/B at T = 8,192", 4096, "FLOPs/B", _r4_prefill_intensity),
    Claim("R4", "prefill compute-bound", "prefill attention is compute-bound on v5e above about 480 tokens", SB7,
          "about 480 tokens", 480, "tokens", _r4_prefill_threshold),
    Claim("R4", "MHA decode about 1", "decode attention intensity is about 1 for MHA, whatever the batch", SB7,
          "about 1 FLOP/B", 1.0, "FLOPs/B", _r4_mha_any_batch,
          holds_that("within 2% of 1 at batch 1, 16, 256")),
    Claim("R4", "GQA decode about G", "with GQA the decode intensity is about G = N / K (N = 64, K = 8)", SB7,
          "about G = 8 FLOPs/B", 8.0, "FLOPs/B", lambda: _r4_decode_intensity(64, 8, 8)),
    Claim("R5", "", "a 16-expert, top-2 MoE needs E / k x B_crit on v5e (bf16)", SB7, "1,920 tokens", 1920,
          "tokens", _r5),
    # --- 2. KV cache and memory ---------------------------------------------------------------------------------
    Claim("M1", "params", "LLaMA-2-13B has about 13e9 parameters", SB7, "13e9", 13e9, "", _m_params),
    Claim("M1", "bf16 bytes", "LLaMA-2-13B's bf16 weights take 26e9 B", SB7, "26e9 B", 26e9, "GB", _m_param_bytes),
    Claim("M2", "", "KV cache of one 8,192-token LLaMA-2-13B sequence in bf16", SB7, "6.7 GiB (= 6.71e9 B)", 6.71e9,
          "GB", _m_kv, note="The source prints 6.7 GiB but computes 6.71e9 B; in GiB it is 6.25 (next row)."),
    Claim("M2", "in GiB", "the same cache in GiB (2^30 B)", "claims.md note", "6.25 GiB", 6.25 * 2**30, "GiB",
          _m_kv, note="The unit correction of shared/claims.md, not a source number."),
    Claim("M3", "four caches", "four 8k caches exceed the bf16 weights", SB7, "4 caches > weights", None, "",
          _m3_four_caches, holds_that("3 < weights / one cache < 4")),
    Claim("M3", "batch 240", "batch 240 of 8k sequences needs about 1.6e12 B of KV cache", SB7, "1.6e12 B", 1.6e12,
          "TB", lambda: _m_kv(240)),
    Claim("M4", "batch 1 total", "weights + KV at batch 1, 8 x v5e", SB7, "32.7 GiB (1e9 B)", 32.7e9, "GB",
          lambda: _m4_footprint(1).total_bytes, note=_GIB),
    Claim("M4", "batch 1 step time", "memory-bound step at batch 1", SB7, "4.98 ms", 4.98e-3, "ms",
          lambda: _m4_step(1).total_s),
    Claim("M4", "batch 1 throughput", "decode throughput at batch 1", SB7, "200.6 tok/s", 200.6, "tok/s",
          lambda: _m4_throughput(1)),
    Claim("M4", "batch 16 total", "weights + KV at batch 16", SB7, "133.2 GiB (1e9 B)", 133.2e9, "GB",
          lambda: _m4_footprint(16).total_bytes, note=_GIB),
    Claim("M4", "batch 16 does not fit", "batch 16 does not fit 8 x 16e9 B of HBM", SB7, "does not fit", None, "GB",
          _m4_batch16_does_not_fit, holds_that("total > 8 x HBM capacity")),
    Claim("M4", "batch 16 step time", "memory-bound step at batch 16", SB7, "20.30 ms", 20.30e-3, "ms",
          lambda: _m4_step(16).total_s),
    Claim("M4", "batch 240 throughput", "decode throughput at batch 240", SB7, "963.5 tok/s", 963.5, "tok/s",
          lambda: _m4_throughput(240)),
    Claim("M4", "general = memory-bound", "the general step time gives the memory-bound table's numbers", SB7,
          "memory-bound at batch 240", None, "", _m4_memory_bound_at_240, holds_that("bound == 'memory'"),
          "The MLP FLOP term stays just below the weight-load term even at batch 240."),
    Claim("M5", "batch 16 total", "GQA 1:5 (K = 8): weights + KV at batch 16", SB7, "47.44 GiB (1e9 B)", 47.44e9,
          "GB", lambda: _m5_total(16), note=_GQA),
    Claim("M5", "batch 64 fits", "with GQA 1:5 batch 64 fits on 8 v5e (MHA does not)", SB7, "fits", None, "GB",
          _m5_batch64_fits, holds_that("GQA total ≤ HBM < MHA total"), _GQA),
    Claim("M5", "batch 240 throughput", "GQA 1:5 throughput at batch 240", SB7, "4,529 tok/s", 4529, "tok/s",
          lambda: _m5_throughput(240), note=_GQA),
    Claim("M6", "", "KV-cache levers in the source's order: GQA/MQA, local attention, cross-layer sharing, "
                    "int8/fp8 KV, paged attention", SB7, "ranked list", None, "", _m6_levers,
          holds_that("stored savings non-increasing in that order; cross-layer saves memory, not reads"),
          "Settings are illustrative (kv_levers.kv_lever_table on LLaMA-2-13B, 8k, batch 64); the source ranks "
          "without numbers."),
    # --- 3. Step time -------------------------------------------------------------------------------------------
    Claim("T1", "", "general decode step: B KV / W + max(2 B P / C, P_bytes / W), switching at B_crit", SB7,
          "switches at B_crit", None, "tokens", _t1_switch,
          holds_that("memory-bound below B_crit, compute-bound above")),
    Claim("T2", "batch 4", "pop quiz: 30B, int8 weights, bf16 math, 16 v5e, 8k context, 100 kB/token, batch 4",
          SB7, "about 2.5 ms (2.54 ms)", 2.54e-3, "ms", lambda: _t2(4)),
    Claim("T2", "batch 256", "the same at batch 256", SB7, "about 21 ms (20.86 ms)", 20.86e-3, "ms",
          lambda: _t2(256)),
    Claim("T3", "", "a decode step is never faster than reading the weights once", SB7, "step ≥ weight read", 1.0,
          "x", _t3_floor, holds_that("min step / weight-read time ≥ 1")),
    Claim("T4", "bf16", "LLaMA-3-70B decode step in bf16 at batch 64", TPUI, "14.0 ms", 14.0e-3, "ms",
          lambda: _t4("bf16"), note=_T4_NOTE),
    Claim("T4", "fp8", "the same with fp8 weights and KV", TPUI, "7.0 ms", 7.0e-3, "ms", lambda: _t4("fp8"),
          note=_T4_NOTE),
    # --- 4. Sharding --------------------------------------------------------------------------------------------
    Claim("S1", "beta v5e", "beta = HBM / bidirectional ICI per link on v5e", SB7, "about 8 (9.1 unrounded)", 9.1,
          "", lambda: _beta("tpu-v5e"), note="The source rounds 9.1 to 8 for the 64-way example."),
    Claim("S1", "64 ways", "F = 16,384 at B = 32 can be model-sharded F / (B beta) ways (beta = 8)", SB7, "64 ways",
          64, "ways", lambda: _max_mp(16384, 32, 8), note="With the source's rounded beta = 8; the unrounded beta allows a little fewer ways."),
    Claim("S2", "beta Ironwood", "beta on Ironwood = 7.38e12 / 2e11", TPUI, "about 37", 36.9, "",
          lambda: _beta("ironwood")),
    Claim("S2", "24 ways", "LLaMA-3-70B at batch 32 splits about 24 ways on Ironwood", TPUI, "about 24 ways", 24,
          "ways", _s2_ways),
    Claim("S3", "131 kB latency-bound", "B = 16, D = 8,192 in int8: 131 kB per collective, latency-bound", SB7,
          "131 kB, latency-bound", 131e3, "kB", _s3_latency_bound_collective,
          holds_that("collective_time(...).bound == 'latency'")),
    Claim("S3", "v5e threshold", "an 8-way collective is latency-bound below this size on v5e", SB7,
          "about 360 kB", 360e3, "kB", lambda: _latency_bound("tpu-v5e")),
    Claim("S3", "Ironwood threshold", "the same on Ironwood", TPUI, "about 800 kB", 800e3, "kB",
          lambda: _latency_bound("ironwood")),
    Claim("S4", "", "FSDP in decode is an order-of-magnitude regression (LLaMA-3-70B, 8 v5e)", SB7,
          "order of magnitude", None, "x", _s4_slowdown, between(10, None, "x"),
          "Slowdown = weight all-gather over ICI / weight read from HBM, about (n - 1) beta."),
    Claim("S5", "", "KV cache sharded by KV heads up to K ways, then by batch, with two all-to-alls per layer", SB7,
          "two AllToAlls", 2, "", _s5_kv_sharding, holds_that("8 x 2 split, 2 all-to-alls (0 unsplit)")),
    Claim("S6", "", "prefill model parallelism up to about F / 2200 per axis on v5e (F = 28,672)", SB7,
          "about F / 2200", 28672 / 2200, "ways", _s6),
    # --- 5. Partitioning layouts --------------------------------------------------------------------------------
    Claim("P1", "1D flat", "1D weight-stationary FFN communication is flat in chip count", POPE, "flat", 1.0, "x",
          _p1_1d_flat, holds_that("max / min volume over 8-1,024 chips = 1")),
    Claim("P1", "2D 1/sqrt(n)", "2D weight-stationary falls as 1 / sqrt(n): 16 -> 1,024 chips", POPE,
          "1/sqrt(n): 8x less", 8.0, "x", _p1_2d_ratio),
    Claim("P1", "weight-gathered sqrt(T)", "weight-gathered grows as sqrt(tokens): 16x the tokens", POPE,
          "sqrt(T): sqrt(16) = 4x more", 4.0, "x", _p1_wg_ratio, within(1e-9),
          "Compared at the token counts where the optimal gather group is exactly X and XY."),
    Claim("P1", "crossover", "the best layout switches from 2D weight-stationary to weight-gathered as tokens grow "
                             "(PaLM 540B, 4x4x4 TPU v4)", f"{POPE}, Fig. 3", "2D WS → weight-gathered", None, "",
          _p1_switch, holds_that("starts 2d-ws, ends wg-xyz, never 1d-ws")),
    Claim("P2", "3 TB", "multihead KV cache of a 540B model at batch 512, context 2,048", POPE, "about 3 TB", 3e12,
          "TB", lambda: _p2().kv_bytes,
          note="The multihead comparison model keeps PaLM 540B's size with 48 heads x 128."),
    Claim("P2", "3x weights", "that cache is about 3x the weights", POPE, "about 3x", None, "x",
          lambda: _p2().ratio, between(2.5, 3.5, "x")),
    Claim("P3", "multihead b128", "max context, multihead, batch 128, 64 chips, 30% HBM", f"{POPE}, Table 1",
          "1,320 tokens", 1320, "tokens", lambda: _p3_table()["multihead"][0],
          note="TPU v4 HBM is 32 GiB; multihead heads padded to 64 for sharding."),
    Claim("P3", "multihead b512", "the same at batch 512", f"{POPE}, Table 1", "330 tokens", 330, "tokens",
          lambda: _p3_table()["multihead"][1]),
    Claim("P3", "baseline MQ b128", "multiquery sharded over heads (one KV head replicated), batch 128",
          f"{POPE}, Table 1", "660 tokens", 660, "tokens", lambda: _p3_table()["baseline multiquery"][0]),
    Claim("P3", "baseline MQ b512", "the same at batch 512", f"{POPE}, Table 1", "165 tokens", 165, "tokens",
          lambda: _p3_table()["baseline multiquery"][1]),
    Claim("P3", "optimized MQ b128", "multiquery sharded over batch, batch 128", f"{POPE}, Table 1",
          "43,000 tokens", 43000, "tokens", lambda: _p3_table()["optimized multiquery"][0]),
    Claim("P3", "optimized MQ b512", "the same at batch 512", f"{POPE}, Table 1", "10,700 tokens", 10700, "tokens",
          lambda: _p3_table()["optimized multiquery"][1]),
    Claim("P3", "32x", "multiquery over batch allows about 32x the context of multihead", POPE, "up to 32x", 32,
          "x", _p3_ratio, holds_that("ratio within 2% of 32 at both batches")),
    Claim("P4", "76% MFU", "prefill MFU, PaLM 540B, batch 512 x 2,048 tokens in 85.2 s on 64 TPU v4",
          f"{POPE}, Table 2", "76%", 0.76, "%", _p4_mfu),
    Claim("P4", "29 ms decode", "low-latency decode step with int8 weights (measured)", f"{POPE}, Table 2",
          "29 ms (measured)", 29e-3, "ms", _p4_decode_gap, holds_that("roofline bound ≤ measured step"),
          "The 29 ms is measured; the roofline gives only a lower bound, shown with the gap."),
    Claim("P5", "Pope 2D crossover", "2D beats 1D weight-stationary above n = 4F / E chips (Pope et al. accounting)",
          POPE, "16 chips", 16, "chips", lambda: _p5_crossover("pope"),
          note="Pope et al. count 2D bandwidth per axis pair; the Scaling Book counts it differently (next row)."),
    Claim("P5", "Scaling Book 2D crossover", "the same crossover under the Scaling Book's accounting (F = 4D)", SB7,
          "72 chips", 72, "chips", lambda: _p5_crossover("scaling-book"),
          note="Same model, different bandwidth accounting: 16 vs 72 chips."),
    Claim("P5", "switch to weight-gathered", "under both accountings the best layout becomes weight-gathered as "
                                             "tokens grow", POPE, "weight-gathered at large batch", None, "",
          _p5_switch_to_wg, holds_that("both end at wg-xyz")),
    # --- 6. Serving ---------------------------------------------------------------------------------------------
    Claim("V1", "16 v5e", "8,192-token prefill of LLaMA-3-70B on 16 v5e at 40% MFU", SB8, "about 0.91 s", 0.91, "s",
          lambda: _prefill("tpu-v5e", 16)),
    Claim("V1", "8 Ironwood", "the same on 8 Ironwood chips", TPUI, "about 157 ms", 0.157, "ms",
          lambda: _prefill("ironwood", 8)),
    Claim("V2", "source inputs", "prefill servers per decode server: 0.91 s prefill, 19 ms step, batch 32, 512 tokens",
          SB8, "P ≈ 3 G", 3.0, "x", _v2_ratio),
    Claim("V2", "from the model", "the same ratio with the prefill and step times from scaling_lib", SB8, "about 3",
          None, "x", _v2_from_model, between(2.5, 3.5, "x"),
          "Our roofline step (about 17.5 ms at the mean context) is a bit faster than the source's 19 ms."),
    Claim("V3", "", "engines on a Pareto: interleaving beats naive TTFT; disaggregation removes decode stalls", SB7,
          "naive / interleaved / disaggregated trade-offs", None, "", _v3_engines,
          holds_that("TTFT and TPOT orderings of a seeded simulation")),
    Claim("V4", "best lookahead", "best lookahead for a 70B target with a 4B drafter", SB7, "about 3-4 tokens", None,
          "tokens", _v4_best_lookahead, between(3, 4, "tokens"),
          "Acceptance 0.6 and a draft costing 4/70 of a target step are our assumptions; the source gives none. "
          "Greedy output equality is checked on the tiny JAX model in tests/test_speculative_jax.py."),
    Claim("V4", "gains shrink with batch", "speculation's gain shrinks as the batch grows", SB7, "gains shrink", None,
          "", _v4_gains_shrink, holds_that("speedup non-increasing in batch")),
    Claim("V5", "12x weights", "the ch. 7 model as a 16-expert top-2 MoE has about 12x the weight bytes", SB7,
          "about 12x", None, "x", _v5_weight_ratio, between(11.5, 12.5, "x"),
          "11.5x exactly; the source rounds to 12."),
    Claim("V5", "weight-bound, two all-to-alls", "MoE decode is weight-bandwidth-bound with two routing all-to-alls "
                                                 "per layer", SB7, "two AllToAlls per layer", 2, "",
          _v5_weight_bound, holds_that("memory-bound at batch 32; 2 latency-bound all-to-alls")),
    Claim("V6", "fp8 halves the step", "fp8 weights and KV halve LLaMA-3-70B's step (T4's configuration)", TPUI,
          "halves", 0.5, "x", _v6_fp8_halves, note=_T4_NOTE),
    Claim("V6", "fewer bytes, faster", "fewer bytes per weight and KV entry is the most direct decode lever", TPUI,
          "fewer bytes → faster step", None, "", _v6_fewer_bytes,
          holds_that("step falls and max batch grows with fewer bytes")),
)
