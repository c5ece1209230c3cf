"""Claims P1-P5 of book/claims.md: Pope et al. 2022's partitioning layouts, attention sharding and MFU.

Every number a source publishes is read from the claims ledger (`published(key)`), and the paper's measured runs
from `measurements.POPE_HEADLINE_RUNS`; the literals left are hand derivations (marked), each an independent oracle.
"""

import math

import pytest

from scaling_lib.book.claims import REL, claim, evaluate, published, published_range
from scaling_lib.book.claims.layouts import P3_BATCHES, P3_PUBLISHED_KEYS
from scaling_lib.collectives import CONVENTIONS
from scaling_lib.context_limits import context_length_table, kv_versus_weights
from scaling_lib.layouts import (LAYOUTS, best_layout, comm_volume_curves, ffn_comm_time, ffn_comm_volume,
                                 layout_switch_points, optimal_2d_mesh, wg_switch_tokens,
                                 ws_2d_crossover_chips, ws_2d_optimal_x)
from scaling_lib.measurements import POPE_HEADLINE_RUNS
from scaling_lib.memory import kv_cache_bytes
from scaling_lib.models import get_model, param_count
from scaling_lib.utilization import decode_latency_gap, mfu

from tests import for_each

PALM = "palm-540b"
SLICE = (4, 4, 4)  # the 64-chip TPU v4 slice of the paper
TOKENS = tuple(64 * 2**k for k in range(15))  # 64 .. 1,048,576 tokens per batch
# Pope et al. 2022, Table 2: high-throughput prefill (bf16) and low-latency decode (int8 weights), as measured.
PREFILL, DECODE = POPE_HEADLINE_RUNS["prefill-high-throughput"], POPE_HEADLINE_RUNS["decode-low-latency"]


def _volume(layout, tokens, mesh):
    return ffn_comm_volume(layout, PALM, tokens, mesh).total_bytes


def test_p1_palm_540b_4x4x4_best_layout_switches_from_2d_ws_to_weight_gathered():
    curves = comm_volume_curves(PALM, SLICE, TOKENS)
    best = curves.best()
    assert best[0] == "2d-ws" and best[-1] == "wg-xyz"
    assert "1d-ws" not in best  # on 64 chips 2D always moves fewer bytes than 1D
    steps = [(p.from_layout, p.to_layout) for p in curves.switch_points]
    assert steps == [("2d-ws", "wg-x"), ("wg-x", "wg-xy"), ("wg-xy", "wg-xyz")]
    for point in curves.switch_points:  # at a switch point the two layouts move the same bytes
        assert _volume(point.from_layout, point.tokens, SLICE) == pytest.approx(
            _volume(point.to_layout, point.tokens, SLICE), rel=1e-9)
        assert _volume(point.to_layout, 1.1 * point.tokens, SLICE) < _volume(point.from_layout, 1.1 * point.tokens,
                                                                            SLICE)
    # The paper's high-throughput prefill (512 x 2048 tokens) sits in the weight-gathered XYZ region (Table 2).
    assert curves.switch_points[-1].tokens < PREFILL.tokens


def test_p1_1d_weight_stationary_is_flat_in_chip_count_and_one_chip_communicates_nothing():
    volumes = [_volume("1d-ws", 4096, mesh) for mesh in ((2, 2, 2), (2, 2, 4), (4, 4, 4), (4, 8, 8), (8, 8, 16))]
    assert max(volumes) == pytest.approx(min(volumes), rel=1e-12)
    assert volumes[0] == pytest.approx(2 * 2 * 4096 * get_model(PALM).d_model, rel=1e-12)  # hand: 2 a T D, bf16
    assert LAYOUTS == ("1d-ws", "2d-ws", "wg-x", "wg-xy", "wg-xyz")  # DESIGN.md's names
    assert all(ffn_comm_volume(name, PALM, 4096, (1,)).total_bytes == 0 for name in LAYOUTS)


def test_p1_2d_weight_stationary_falls_as_inverse_sqrt_chips():
    d, tokens = get_model(PALM).d_model, 4096
    for mesh in ((2, 2, 4), (4, 4, 4), (8, 4, 8), (16, 8, 8)):  # X = sqrt(n) / 2, the optimum for F = 4D
        n = math.prod(mesh)
        assert ws_2d_optimal_x(n, d, get_model(PALM).d_ff) == mesh[0]
        assert _volume("2d-ws", tokens, mesh) * math.sqrt(n) == pytest.approx(8 * 2 * tokens * d, rel=1e-12)  # hand
    # 16 -> 1,024 chips: sqrt(64) = 8x less.
    assert _volume("2d-ws", tokens, (2, 2, 4)) / _volume("2d-ws", tokens, (16, 8, 8)) == pytest.approx(
        published("P1 2D 1/sqrt(n)"), rel=REL)


def test_p1_weight_gathered_grows_as_sqrt_tokens():
    f = get_model(PALM).d_ff
    # Tokens where the optimal gather size sqrt(T n / F) is exactly X = 4 and X Y = 16 on the 4x4x4 slice.
    t_x, t_xy = 4**2 * f / 64, 16**2 * f / 64
    assert _volume("wg-xy", t_xy, SLICE) / _volume("wg-x", t_x, SLICE) == pytest.approx(math.sqrt(t_xy / t_x),
                                                                                     rel=1e-12)
    assert math.sqrt(t_xy / t_x) == pytest.approx(published("P1 weight-gathered sqrt(T)"), rel=1e-12)
    # Best weight-gathered volume over 16x the tokens grows at most 4x; weight-stationary grows 16x.
    best_wg = [min(_volume(name, t, SLICE) for name in ("wg-x", "wg-xy", "wg-xyz")) for t in (t_x, 16 * t_x)]
    assert best_wg[1] / best_wg[0] <= 4 * (1 + 1e-12)
    assert _volume("2d-ws", 16 * t_x, SLICE) / _volume("2d-ws", t_x, SLICE) == pytest.approx(16, rel=1e-12)


def test_p1_batch_1_prefill_is_cheapest_in_2d_weight_stationary_as_in_pope_low_latency_prefill():
    # Only large-batch prefill wants weight-gathered: the first switch (2D WS -> wg-x) on 4x4x4 is at T = D.
    # Hand derivation (F = 4D, X = Y = Z = 4, n = 64, 2 bytes): M_2D = 2 * 2 T (D/4 + 4D/16) = 2 T D and
    # M_wg-x = 2 * 2 D (4D) 4 / 64 + 2 * 2 T D / 4 = D^2 + T D, equal at T = D = 18,432 tokens.
    d = get_model(PALM).d_model
    first = comm_volume_curves(PALM, SLICE, TOKENS).switch_points[0]
    assert (first.from_layout, first.to_layout) == ("2d-ws", "wg-x")
    assert first.tokens == pytest.approx(d, rel=1e-9)
    # A batch-1 prompt of 2,048 tokens (Table 2's low-latency prefill, run 2D weight-stationary) or of 8,192 tokens
    # sits left of it: 2D weight-stationary moves the fewest bytes.
    assert comm_volume_curves(PALM, SLICE, (2048, 8192)).best() == ("2d-ws", "2d-ws")
    assert _volume("wg-x", 8192, SLICE) > _volume("2d-ws", 8192, SLICE)
    result = evaluate(claim("P1 batch-1 prefill"))
    assert result.holds, result.detail


def test_wg_switch_closed_form_is_16f_and_the_collectives_that_run_switch_at_12f():
    """The closed form M_WG(n_wg) = 2 b_w D F n_wg / n + 2 b_a T D / n_wg keeps an activation term at n_wg = n that no
    collective pays; at its switch point the executed wg-xy volume equals wg-xyz plus exactly that term."""
    for model in (PALM, "palm-62b"):
        m = get_model(model)
        formula = wg_switch_tokens(model, 16, 64, 64)
        assert formula == 16 * m.d_ff
        kept_term = 2 * 2 * formula * m.d_model / 64
        volume = {name: ffn_comm_volume(name, model, formula, SLICE).total_bytes for name in ("wg-xy", "wg-xyz")}
        assert volume["wg-xy"] == pytest.approx(volume["wg-xyz"] + kept_term, rel=1e-12)
        switch = comm_volume_curves(model, SLICE, (64, 2**22)).switch_points[-1]
        assert (switch.from_layout, switch.to_layout) == ("wg-xy", "wg-xyz")
        assert switch.tokens == pytest.approx(12 * m.d_ff, rel=1e-12)
        assert wg_switch_tokens(model, 4, 16, 64) == pytest.approx(comm_volume_curves(model, SLICE, (64, 2**22))
                                                                   .switch_points[-2].tokens, rel=1e-12)
    assert wg_switch_tokens(PALM, 16, 64, 64, weight_dtype="int8") == 8 * get_model(PALM).d_ff


def test_p1_best_layout_changes_as_tokens_grow():
    order = ("2d-ws", "wg-x", "wg-xy", "wg-xyz")
    choices = [best_layout(PALM, "tpu-v4", SLICE, t).best for t in TOKENS]
    assert choices[0] == "2d-ws" and choices[-1].startswith("wg-")
    assert [order.index(c) for c in choices] == sorted(order.index(c) for c in choices)
    # Decode (one token per sequence, batch 64, int8 weights) stays weight-stationary.
    decode = best_layout(PALM, "tpu-v4", SLICE, 64, "decode", context_len=2048, weight_dtype="int8")
    assert decode.best == "2d-ws"
    assert decode.time("2d-ws").kv_memory_s > 0
    prefill = best_layout(PALM, "tpu-v4", SLICE, PREFILL.tokens, "prefill")
    assert prefill.time(prefill.best).compute_s >= prefill.time(prefill.best).memory_s  # large prefill: compute-bound


def test_p2_multihead_540b_kv_cache_3tb_three_times_the_weights():
    multihead = get_model("palm-540b-multihead")
    assert param_count(multihead) == pytest.approx(param_count(get_model(PALM)), rel=0.01)  # same size
    cache = kv_versus_weights(multihead, batch=512, context_len=2048)
    assert cache.kv_bytes == pytest.approx(published("P2 3 TB"), rel=REL)
    low, high = published_range("P2 3x weights")
    assert low <= cache.ratio <= high  # 2.8: the paper's "3 times"
    # Multiquery (one 256-wide KV head instead of 48 x 128) shrinks the cache 24x.
    assert cache.kv_bytes / kv_cache_bytes(PALM, 2048, 512) == pytest.approx(24, rel=1e-12)


def test_p3_multiquery_sharded_over_batch_allows_32x_longer_context_cell_by_cell_of_table_1():
    rows = {row.variant: row for row in context_length_table("tpu-v4", 64, P3_BATCHES, 0.3)}
    for variant, keys in P3_PUBLISHED_KEYS.items():
        paper = [published(key) for key in keys]
        assert rows[variant].context_lengths == pytest.approx(paper, rel=REL)
    for i in range(2):
        ratio = rows["optimized multiquery"].context_lengths[i] / rows["multihead"].context_lengths[i]
        assert ratio == pytest.approx(published("P3 32x"), rel=REL)
        # Sharded over heads, the single KV head is replicated on every chip: worse than multihead.
        assert rows["baseline multiquery"].context_lengths[i] < rows["multihead"].context_lengths[i]
    # Chapter 8 prints the recomputed Table 1 with the paper's numbers beside it: every cell has a ledger key, and
    # ours is within 1% of it (the paper's values are rounded; ours are the formula's floor).
    table = context_length_table("tpu-v4", 64, P3_BATCHES, 0.3)
    assert [row.variant for row in table] == list(P3_PUBLISHED_KEYS)
    assert P3_BATCHES == (128, 512)  # Table 1's two batches
    for row in table:
        keys = P3_PUBLISHED_KEYS[row.variant]
        assert all(claim(key).source.endswith("Table 1") for key in keys)
        for ours, key in zip(row.context_lengths, keys):
            assert ours == pytest.approx(published(key), rel=0.01), key


def test_p4_mfu_76_percent_prefill_and_29_ms_decode_on_64_tpu_v4():
    params = param_count(get_model(PALM))
    assert (PREFILL.tokens, DECODE.tokens) == (512 * 2048, 64 * 64)  # batch x prompt; batch x generated steps
    assert mfu(params, PREFILL.tokens, PREFILL.seconds, "tpu-v4", 64) == pytest.approx(published("P4 76% MFU"),
                                                                                       rel=REL)
    assert mfu(params, DECODE.tokens, DECODE.seconds, "tpu-v4", 64) == pytest.approx(published("P4 14% MFU decode"),
                                                                                     rel=REL)
    step = DECODE.seconds_per_step
    assert step == pytest.approx(published("P4 29 ms decode"), rel=REL)
    gap = decode_latency_gap(PALM, "tpu-v4", 64, DECODE.batch, DECODE.context_len, step,
                             weight_dtype=DECODE.weight_dtype)
    # By hand: 540,354,281,472 int8 weights (118 layers of D = 18,432, F = 73,728, 48 heads of 256, one KV head,
    # 256,000-token tied embedding) over 64 x 1.2e12 B/s = 7.0359 ms; the KV cache, 2 x 118 x 1 x 256 x 2 B =
    # 120,832 B per token x 2,048 x 64 sequences over the same bandwidth = 0.2062 ms. The bound is 7.2421 ms.
    weights_s = 540_354_281_472 / (64 * 1.2e12)
    kv_s = 120_832 * 2048 * 64 / (64 * 1.2e12)
    assert gap.bound.bound == "memory"
    assert gap.bound_s == pytest.approx(weights_s + kv_s, rel=1e-12)
    assert gap.bound_s == pytest.approx(7.2421e-3, rel=1e-4)
    # The measured step is 3.93x the bound (communication, attention FLOPs, norms and sampling are not in it).
    assert gap.ratio == pytest.approx(3.9267, rel=1e-4) and gap.gap_s > 0


@for_each([
    ("pope", "P5 Pope 2D crossover", (2, 2, 4), (2, 2, 2), (4, 4, 4)),
    ("scaling-book", "P5 Scaling Book 2D crossover", (3, 4, 6), (4, 4, 4), (4, 4, 8)),
], ids=str)
def test_p5_2d_vs_1d_crossover_under_both_conventions(convention, key, equal_mesh, below_mesh, above_mesh):
    m = get_model(PALM)
    crossover = published(key)
    assert ws_2d_crossover_chips(m.d_model, m.d_ff, convention) == pytest.approx(crossover, rel=1e-12)

    def comm(layout, mesh):
        return ffn_comm_time(layout, PALM, "tpu-v4", 1024, mesh, convention)

    assert math.prod(equal_mesh) == crossover
    assert comm("2d-ws", equal_mesh) == pytest.approx(comm("1d-ws", equal_mesh), rel=1e-12)
    below = optimal_2d_mesh(math.prod(below_mesh), PALM, "tpu-v4", convention)
    assert comm("2d-ws", below) >= comm("1d-ws", below)
    assert comm("2d-ws", above_mesh) < comm("1d-ws", above_mesh)


def test_p5_both_conventions_switch_to_weight_gathered_as_tokens_grow():
    for convention in CONVENTIONS:
        points = layout_switch_points(PALM, "tpu-v4", SLICE, convention, tokens_range=(64, 2**20))
        assert points[0].from_layout == ("2d-ws" if convention == "pope" else "1d-ws")  # 64 chips < 72
        assert points[-1].to_layout == "wg-xyz"
    # The conventions agree on 1D (all three axes: 3 x 90 GB/s = 270 GB/s) and on wg-xyz's weight gather.
    for layout in ("1d-ws", "wg-xyz"):
        times = [ffn_comm_time(layout, PALM, "tpu-v4", 4096, SLICE, convention) for convention in CONVENTIONS]
        assert times[0] == pytest.approx(times[1], rel=1e-12)
