"""Claims P1-P5 of the ledger: Partitioning layouts (Pope et al. 2022).

Each row below is a published number and the scaling_lib call that recomputes it; the helpers sit beside
the rows that use them.
"""

import math
from types import MappingProxyType

from ...collectives import CONVENTIONS
from ...context_limits import context_length_table, kv_versus_weights
from ...hardware import get_chip
from ...layouts import comm_volume_curves, ffn_comm_volume, layout_switch_points, ws_2d_crossover_chips
from ...measurements import POPE_HEADLINE_RUNS
from ...models import get_model, param_count
from ...units import format_quantity
from ...utilization import decode_latency_gap, mfu
from .framework import POPE, REL, SB7, Claim, Finding, between, holds_that, within

_PALM = "palm-540b"
_SLICE = (4, 4, 4)
_TOKENS = tuple(64 * 2**k for k in range(15))


def _volume(layout, tokens, mesh):
    return ffn_comm_volume(layout, _PALM, tokens, mesh).total_bytes


def _p1_1d_flat():
    volumes = [_volume("1d-ws", 4096, mesh) for mesh in ((2, 2, 2), (2, 2, 4), (4, 4, 4), (4, 8, 8), (8, 8, 16))]
    spread = max(volumes) / min(volumes)
    return Finding(spread, math.isclose(spread, 1.0, rel_tol=1e-12),
                   "largest / smallest 1D weight-stationary volume per chip over 8 to 1,024 chips")


def _p1_2d_ratio():
    return _volume("2d-ws", 4096, (2, 2, 4)) / _volume("2d-ws", 4096, (16, 8, 8))


def _p1_wg_ratio():
    f = get_model(_PALM).d_ff
    t_x, t_xy = 4**2 * f / 64, 16**2 * f / 64  # optimal gather size sqrt(T n / F) = X = 4 and X Y = 16
    return _volume("wg-xy", t_xy, _SLICE) / _volume("wg-x", t_x, _SLICE)


def _p1_switch():
    curves = comm_volume_curves(_PALM, _SLICE, _TOKENS)
    best = curves.best()
    path = [curves.switch_points[0].from_layout] + [p.to_layout for p in curves.switch_points]
    ok = best[0] == "2d-ws" and best[-1] == "wg-xyz" and "1d-ws" not in best
    first = curves.switch_points[0].tokens
    return Finding(" → ".join(path), ok, f"PaLM 540B on 4x4x4 TPU v4; first switch at {first:,.0f} tokens per batch")


def _p1_batch1_prefill():
    best = comm_volume_curves(_PALM, _SLICE, (2048, 8192)).best()
    first = comm_volume_curves(_PALM, _SLICE, _TOKENS).switch_points[0]
    ok = best == ("2d-ws", "2d-ws") and first.from_layout == "2d-ws" and first.tokens > 8192
    return Finding(best[0], ok, f"cheapest at 2,048 and 8,192 tokens: {' and '.join(best)}; weight-gathered "
                                f"({first.to_layout}) only above {first.tokens:,.0f} tokens per batch")


def _p2():
    return kv_versus_weights(get_model("palm-540b-multihead"), batch=512, context_len=2048)


def _p3_table():
    return {row.variant: row.context_lengths for row in context_length_table("tpu-v4", 64, P3_BATCHES, 0.3)}


# Pope et al.'s Table 1, cell by cell: the ledger keys of each variant of context_limits.context_length_table at batches 128
# and 512 (chapter 8 shows published(key) beside our value).
P3_PUBLISHED_KEYS = MappingProxyType({
    "multihead": ("P3 multihead b128", "P3 multihead b512"),
    "baseline multiquery": ("P3 baseline MQ b128", "P3 baseline MQ b512"),
    "optimized multiquery": ("P3 optimized MQ b128", "P3 optimized MQ b512"),
})
P3_BATCHES = (128, 512)


def _p3_ratio():
    rows = _p3_table()
    ratios = [rows["optimized multiquery"][i] / rows["multihead"][i] for i in range(2)]
    ok = all(abs(r / 32 - 1) <= REL for r in ratios) and all(
        rows["baseline multiquery"][i] < rows["multihead"][i] for i in range(2))
    return Finding(ratios[0], ok, f"optimized multiquery / multihead: {ratios[0]:.1f}x at batch 128, "
                                  f"{ratios[1]:.1f}x at batch 512; multiquery sharded over heads is shorter than "
                                  f"multihead")


def _p4_mfu():
    run = POPE_HEADLINE_RUNS["prefill-high-throughput"]
    return mfu(param_count(get_model(_PALM)), run.tokens, run.seconds, "tpu-v4", 64)


def _p4_decode_mfu():
    run = POPE_HEADLINE_RUNS["decode-low-latency"]
    return mfu(param_count(get_model(_PALM)), run.tokens, run.seconds, "tpu-v4", 64)


def _v4_ici_per_chip():
    chip = get_chip("tpu-v4")
    return chip.ici_link_bandwidth * chip.ici_links


def _p4_decode_gap():
    run = POPE_HEADLINE_RUNS["decode-low-latency"]
    gap = decode_latency_gap(_PALM, "tpu-v4", 64, run.batch, run.context_len, run.seconds_per_step,
                             weight_dtype=run.weight_dtype)
    return Finding(gap.bound_s, gap.bound_s <= gap.measured_s,
                   f"roofline lower bound {format_quantity(gap.bound_s, 'ms', 3)} ≤ measured "
                   f"{format_quantity(gap.measured_s, 'ms', 3)} (Table 2: 1.82 s / 64 steps): the real step is "
                   f"{gap.ratio:.1f}x the bound")


def _p5_crossover(convention):
    m = get_model(_PALM)
    return ws_2d_crossover_chips(m.d_model, m.d_ff, convention)


def _p5_switch_to_wg():
    paths = {}
    for convention in CONVENTIONS:
        points = layout_switch_points(_PALM, "tpu-v4", _SLICE, convention, tokens_range=(64, 2**20))
        paths[convention] = (points[0].from_layout, points[-1].to_layout)
    ok = paths["pope"] == ("2d-ws", "wg-xyz") and paths["scaling-book"] == ("1d-ws", "wg-xyz")
    return Finding("; ".join(f"{c}: {a} → … → {b}" for c, (a, b) in paths.items()), ok,
                   "PaLM 540B on 4x4x4 TPU v4, 64 to 2^20 tokens per batch")


CLAIMS = (
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
    Claim("P1", "batch-1 prefill", "a batch-1 prefill (2,048 tokens, or an 8,192-token prompt) is cheapest in 2D "
                                   "weight-stationary: only large-batch prefill wants weight-gathered",
          f"{POPE}, Table 2", "2D WS (low-latency prefill, batch 1)", None, "", _p1_batch1_prefill,
          holds_that("2d-ws cheapest at 2,048 and 8,192 tokens; first switch above 8,192")),
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
    Claim("P4", "14% MFU decode", "low-latency decode MFU, int8 weights, batch 64 x 64 steps in 1.82 s on 64 TPU v4",
          f"{POPE}, Table 2", "14%", 0.14, "%", _p4_decode_mfu),
    Claim("P4", "29 ms decode", "low-latency decode step with int8 weights (measured)", f"{POPE}, Table 2",
          "29 ms (measured)", 29e-3, "ms", _p4_decode_gap, holds_that("roofline bound ≤ measured step"),
          "The 29 ms is measured; the roofline gives only a lower bound, shown with the gap."),
    Claim("P5", "v4 ICI per chip", "TPU v4's ICI bandwidth per chip, one direction, all links (Pope et al.'s "
                                   "accounting)", POPE, "270 GB/s", 270e9, "GB/s", _v4_ici_per_chip,
          note="The hardware table stores 45 GB/s per link, one direction, x 6 links."),
    Claim("P5", "Pope 2D crossover", "2D beats 1D weight-stationary above n = 4F / E chips (Pope et al. accounting)",
          POPE, "16 chips", 16, "chips", lambda: _p5_crossover("pope"),
          note="Pope et al. count 2D bandwidth per axis pair; the Scaling Book counts it differently (next row)."),
    Claim("P5", "Scaling Book 2D crossover", "the same crossover under the Scaling Book's accounting (F = 4D)", SB7,
          "72 chips", 72, "chips", lambda: _p5_crossover("scaling-book"),
          note="Same model, different bandwidth accounting: 16 vs 72 chips."),
    Claim("P5", "switch to weight-gathered", "under both accountings the best layout becomes weight-gathered as "
                                             "tokens grow", POPE, "weight-gathered at large batch", None, "",
          _p5_switch_to_wg, holds_that("both end at wg-xyz")),
)
