"""Claims of the ledger added with chapter 12 (*Choosing a layout by the metric*) and the serving details:
P4 for the rows of Pope et al.'s Tables 2 and 3 the `layouts` family does not already hold (MFU recomputed from the
published latency), P6 (layouts chosen by
the cost model against the tables' layouts), P7 (the parallel block and looped collective einsums), S7 (TPU 8i's
hop count) and V7 (speculative decoding at long context).

The tables' numbers come from `scaling_lib/data/pope2022_tables.csv` through `measurements.pope_rows`; the other
published numbers are typed here, once.
"""

from ...frontier import choose_for, layout_cost, measured_mfu, measured_step_s
from ...hops import cube_torus, torus_diameter
from ...layouts import comm_volume_curves
from ...measurements import pope_row, pope_rows
from ...memory import max_batch_size
from ...prefix_cache import cached_prefill_cost
from ...speculative import roofline_speedup
from .framework import POPE, TPUI, Claim, Finding, between, holds_that, within

TPU8 = "Google Cloud blog, eighth-generation TPUs (2026)"
PARALLEL_BLOCK_GAIN = 0.14  # Pope et al. sec. 4.3: the serial block's step is 14% longer (540B decode, 64 chips)
PARALLEL_BLOCK_BATCH = 512  # ... at batch 512, 2D weight-stationary: the configuration the 14% was measured in
LOOPED_EINSUM_GAIN = 1.4  # Pope et al. sec. 3.5: looped collective einsums, about 1.4x over compiler partitioning
CHATBOT_TURN_S = 1.9  # Pope et al. sec. 1: PaLM 540B, int8, 64 TPU v4: 64 new tokens, 1,920 cached, 64 generated
CHATBOT = dict(new_tokens=64, cached_tokens=1920, reply_tokens=64)  # ... the turn that 1.9 s prices
TORUS_1024_DIAMETER = 16  # TPU 8 blog: a 1,024-chip 3D torus is 16 hops across (Boardfly: 7)


def _row_cost(row, **options):
    # Pope et al. padded the query heads to a multiple of the chips (PaLM 540B: 48 to 64 on 64 chips)
    return layout_cost(row.model, row.chip, row.chips, row.phase, row.batch, row.ffn_layout, row.attention_sharding,
                       weight_dtype=row.weight_dtype, context_len=row.context_len, **{"pad_heads": True, **options})


def _p6_agreement():
    rows = pope_rows()
    agree, explained = [], []
    for row in rows:
        decision = choose_for(row)
        if decision.accepts(row.ffn_layout, row.attention_sharding):
            agree.append(row.label)
            continue
        # The one known disagreement: weight-gathered over XY vs XYZ at 2^20 prefill tokens. Under the paper's own
        # two-matrix accounting (layouts.comm_volume_curves) the paper's layout wins; in ours it is within 2%.
        paper = comm_volume_curves(row.model, decision.costs[0].mesh_shape, (row.tokens,)).best()[0]
        margin = decision.margin(row.ffn_layout, row.attention_sharding)
        if paper == row.ffn_layout and margin < 0.02:
            explained.append(f"{row.label}: ours {decision.best.ffn_layout} by {margin:.1%}")
    ok = len(agree) + len(explained) == len(rows)
    return Finding(f"{len(agree)} of {len(rows)} agree", ok, "; ".join(explained) or "every row agrees")


def _p6_measured_slower():
    ratios = [measured_step_s(row) / choose_for(row).best.total_s for row in pope_rows()]
    return Finding(min(ratios), min(ratios) >= 1.0,
                   f"measured / model step on the 8 rows: {min(ratios):.2f}x to {max(ratios):.2f}x")


def _gains(options):
    gains = []
    for row in pope_rows():
        base = _row_cost(row)
        other = _row_cost(row, **options)
        gains.append(other.total_s / base.total_s)
    return gains


def chatbot_turn() -> tuple:
    """Pope et al.'s chatbot turn priced by the cost model: (the prefill of the user's 64 new tokens against the
    1,920 cached ones, in the layout of Table 2's low-latency prefill row; one step of the low-latency decode row,
    which the reply repeats 64 times)."""
    pre, dec = pope_row("palm-540b", "low latency", "prefill"), pope_row("palm-540b", "low latency", "decode")
    prefill = cached_prefill_cost(pre.model, pre.chip, pre.chips, CHATBOT["new_tokens"], CHATBOT["cached_tokens"],
                                  pre.ffn_layout, pre.attention_sharding, weight_dtype=pre.weight_dtype,
                                  pad_heads=True)  # Pope et al. padded the 48 heads to 64
    return prefill, _row_cost(dec)


def _p6_chatbot():
    prefill, step = chatbot_turn()
    model = prefill.total_s + CHATBOT["reply_tokens"] * step.total_s
    measured_decode = pope_row("palm-540b", "low latency", "decode").latency_s  # its 64 steps are the reply's
    left = CHATBOT_TURN_S - measured_decode
    ok = model < CHATBOT_TURN_S and 0 < prefill.total_s < left
    return Finding(model, ok, f"model: {prefill.total_s * 1e3:.1f} ms prefill + {CHATBOT['reply_tokens']} x "
                              f"{step.total_s * 1e3:.1f} ms; the measured decode row ({measured_decode:g} s) leaves "
                              f"{left * 1e3:.0f} ms of the 1.9 s for the prefill")


def _p7_parallel_block():
    # The paper's 14% is one configuration (sec. 4.3): PaLM 540B decode, 2D weight-stationary, 64 chips, batch 512,
    # which is Table 2's high-throughput decode row. Compare the model there, not its range over all rows.
    row = next(r for r in pope_rows() if (r.model, r.phase, r.chips, r.batch, r.ffn_layout) ==
               ("palm-540b", "decode", 64, PARALLEL_BLOCK_BATCH, "2d-ws"))
    increase = _row_cost(row, parallel_block=False).total_s / _row_cost(row).total_s - 1
    others = [g - 1 for g in _gains({"parallel_block": False}) if g > 1]
    ok = 0 < increase <= PARALLEL_BLOCK_GAIN
    return Finding(increase, ok, f"serial block on {row.label}: {increase:.0%} longer step (other weight-stationary "
                                 f"rows: {min(others):.0%} to {max(others):.0%})")


def _p7_looped_einsum():
    gains = [1 / g for g in _gains({"overlap": True})]
    best = max(gains)
    return Finding(best, abs(best / LOOPED_EINSUM_GAIN - 1) <= 0.1,
                   f"hiding every collective behind the matmuls gains {min(gains):.2f}x to {best:.2f}x; the most "
                   "communication-bound row is the low-latency decode")


V7_CASE = dict(model="llama3-70b", chip="ironwood", n_chips=64, batch=256, lookahead=4, acceptance=0.7,
               draft_cost_ratio=0.05)  # our assumptions: the source states the effect, not a configuration


def _v7_long_context():
    case = dict(V7_CASE)
    model, chip, n, batch = case.pop("model"), case.pop("chip"), case.pop("n_chips"), case.pop("batch")
    short = roofline_speedup(model, chip, n, batch, 1024, **case)
    long = roofline_speedup(model, chip, n, batch, 32768, **case)
    fits = max_batch_size(model, chip, n, 32768 + case["lookahead"]) >= batch
    return Finding(long, short < 1.0 < long and fits,
                   f"LLaMA-3-70B, 64 Ironwood, batch {batch} (fits at 32k), k = 4, acceptance 0.7: speedup "
                   f"{short:.2f}x at 1k context, {long:.2f}x at 32k")


_PARALLEL_NOTE = ("The model prices only the collectives the shared block saves, so it should find less than the "
                  "paper: the paper's block also fuses the input matmuls and runs one layer norm instead of two.")
_LOOPED_NOTE = ("Not like-for-like: the paper gives one figure for its whole implementation against the "
                "compiler-partitioned one it started from, naming no configuration, and that baseline misses other "
                "overlaps too. The model's comparable number is the most that hiding the collectives can buy, on its "
                "most communication-bound row; on the others hiding buys less, least on the large prefills.")

# Two rows of Table 2 already have ledger rows of their own in `layouts` (P4 "76% MFU", P4 "14% MFU decode").
LEDGER_ROWS_ELSEWHERE = {("palm-540b", "high throughput", "prefill"): "P4 76% MFU",
                         ("palm-540b", "low latency", "decode"): "P4 14% MFU decode"}

def _p4_row(row) -> Claim:
    """Claim P4 for one row of the tables: its MFU recomputed from its latency."""
    work = f"{row.context_len:,}-token prompts" if row.phase == "prefill" else f"{row.decode_steps} decode steps"
    table = 2 if row.model == "palm-540b" else 3
    statement = f"MFU of {row.label}: {row.batch} x {work} in {row.latency_s:g} s on {row.chips} TPU v4"
    return Claim("P4", f"MFU {row.label}", statement, f"{POPE}, Table {table}", f"{row.mfu:.0%}", row.mfu, "%",
                 lambda: measured_mfu(row), between(row.mfu - 0.01, row.mfu + 0.01, "%"),
                 "±1 point: the tables round MFU to a whole percent and latency to two or three digits.")


CLAIMS = tuple(_p4_row(row) for row in pope_rows()
               if (row.model, row.scenario, row.phase) not in LEDGER_ROWS_ELSEWHERE
) + (
    Claim("P6", "layouts agree", "the cost model picks the layout and attention sharding of each row of Tables 2-3",
          f"{POPE}, Tables 2-3", "8 layouts", None, "", _p6_agreement,
          holds_that("each row agrees, or the difference is explained"),
          "1D and 2D weight-stationary tie at 8-16 chips for PaLM 62B (2D with X = 1 is 1D)."),
    Claim("P6", "measured is slower", "every measured step is slower than the cost model's", f"{POPE}, Tables 2-3",
          "measured", None, "x", _p6_measured_slower, holds_that("measured / model ≥ 1 on all 8 rows")),
    Claim("P6", "chatbot turn", "PaLM 540B (int8, 64 TPU v4) reads 64 new tokens against a 1,920-token cached "
                                "history and writes 64 tokens in 1.9 s", POPE, "1.9 s", CHATBOT_TURN_S, "s",
          _p6_chatbot, holds_that("the model's turn is faster than 1.9 s, and its 64-token prefill fits in what "
                                  "the measured 64-step decode row leaves of the 1.9 s"),
          "Not the sum of the low-latency prefill and decode rows: that prefill re-reads the whole 2,048 tokens."),
    Claim("P7", "parallel block", "a serial attention/feed-forward block makes the decode step of PaLM 540B (2D "
                                  "weight-stationary, 64 chips, batch 512) 14% longer than the parallel one", POPE,
          "14%", PARALLEL_BLOCK_GAIN, "%", _p7_parallel_block,
          holds_that("the model's increase at that configuration is above 0 and at most 14%"), _PARALLEL_NOTE),
    Claim("P7", "looped einsums", "looped collective einsums are about 1.4x faster than compiler partitioning",
          POPE, "about 1.4x", LOOPED_EINSUM_GAIN, "x", _p7_looped_einsum,
          holds_that("the model's largest gain within 10% of 1.4x"), _LOOPED_NOTE),
    Claim("S7", "16-hop torus", "a 1,024-chip 3D torus (8 x 8 x 16) is 16 hops across", TPU8, "16 hops",
          TORUS_1024_DIAMETER, "", lambda: torus_diameter(cube_torus(1024)), within(1e-9),
          "TPU 8i's Boardfly network is 7 hops across; no source states its Collectives Acceleration Engine's cost."),
    Claim("V7", "long context", "speculation helps throughput at long context, where verification shares the KV "
                                "read", TPUI, "helps at long context", None, "x", _v7_long_context,
          holds_that("speedup < 1 at 1k context, > 1 at 32k (batch 256)"),
          "Acceptance 0.7 and a draft costing 5% of a target step are our assumptions."),
)
