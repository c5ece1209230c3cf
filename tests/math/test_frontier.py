"""scaling_lib.frontier: chapter 12's cost of a whole step for each layout, the layout it chooses, the latency-cost
frontier and the choice by metric, set against Pope et al.'s Tables 2-3 (scaling_lib.measurements); the hop counts
of chip networks are in test_hops.py.

Oracles: the step-time terms of `inference.decode_step_time` and the collective times of `layouts` (independent
implementations of the same sources), hop counts read off the torus by hand, and the published tables."""

import dataclasses
import math

import pytest

from scaling_lib.book.claims import claim, evaluate, published
from scaling_lib.book.claims.frontier import LEDGER_ROWS_ELSEWHERE, chatbot_turn
from scaling_lib.context_limits import max_context_length
from scaling_lib.estimate import Deployment
from scaling_lib.frontier import (
    NothingFits,
    choose,
    choose_for,
    choose_layout,
    layer_collectives,
    layout_cost,
    longest_context,
    measured_mfu,
    measured_step_s,
    padded_heads,
    pareto_frontier,
    sweep,
)
from scaling_lib.hardware import GIB, get_chip
from scaling_lib.inference import decode_step_time
from scaling_lib.layouts import comm_volume_curves, ffn_comm_time
from scaling_lib.measurements import POPE_HEADLINE_RUNS, pope_rows
from scaling_lib.models import get_model, param_count
from scaling_lib.utilization import mfu

from tests import for_each

PALM, V4, SLICE = "palm-540b", "tpu-v4", (4, 4, 4)
# LLaMA 3 70B: L = 80, K = 8 KV heads, H = 128: 2 (K and V) x 80 x 8 x 128 x 2 B = 327,680 B of bf16 KV per token.
LLAMA70, LLAMA70_KV_PER_TOKEN, LLAMA70_KV_PER_HEAD = "llama3-70b", 327_680, 40_960
L540 = get_model(PALM).n_layers
ROWS = pope_rows()


# --- Pope et al.'s Tables 2-3 ------------------------------------------------------------------------------------
def test_the_runs_chapter_8_uses_are_rows_of_the_table_and_a_decode_step_is_the_latency_over_its_steps():
    by_key = {(r.scenario, r.phase): r for r in ROWS if r.model == PALM}
    prefill, decode = POPE_HEADLINE_RUNS["prefill-high-throughput"], POPE_HEADLINE_RUNS["decode-low-latency"]
    assert by_key[("high throughput", "prefill")].latency_s == prefill.seconds
    assert by_key[("low latency", "decode")].latency_s == decode.seconds
    assert measured_step_s(by_key[("low latency", "decode")]) == pytest.approx(decode.seconds_per_step)
    for row in (r for r in ROWS if r.phase == "decode"):
        assert math.isclose(measured_step_s(row) * row.decode_steps, row.latency_s)


@for_each(ROWS, ids=lambda r: r.label)
def test_recomputed_mfu_matches_the_published_percent_within_one_point(row):
    assert abs(measured_mfu(row) - row.mfu) <= 0.01
    key = LEDGER_ROWS_ELSEWHERE.get((row.model, row.scenario, row.phase), f"P4 MFU {row.label}")
    assert published(key) == row.mfu  # the ledger and the table hold the same published number
    assert measured_mfu(row) == pytest.approx(mfu(param_count(get_model(row.model)), row.tokens, row.latency_s,
                                                  V4, row.chips))


# --- A step's terms: compute, weights, KV cache, network ------------------------------------------------------------
def test_decode_terms_equal_the_general_step_time_bound_for_weight_stationary_batch_sharding():
    cost = layout_cost(PALM, V4, 64, "decode", 64, "2d-ws", "batch", weight_dtype="int8", context_len=2048)
    bound = decode_step_time(PALM, V4, 64, 64, 2048, weight_dtype="int8")
    assert cost.compute_s == pytest.approx(bound.compute_s, rel=1e-12)
    assert cost.weight_s == pytest.approx(bound.weight_s, rel=1e-12)
    assert cost.kv_s == pytest.approx(bound.kv_s, rel=1e-12)
    assert cost.mfu == pytest.approx(mfu(param_count(get_model(PALM)), 64, cost.total_s, V4, 64), rel=1e-12)


def test_the_cache_read_splits_by_batch_or_by_kv_heads_in_its_own_format():
    # PaLM 540B has one KV head: head-sharded, every chip reads the whole cache; nothing to split but the batch.
    heads = layout_cost(PALM, V4, 64, "decode", 64, "2d-ws", "heads", context_len=2048, pad_heads=True)
    batch = layout_cost(PALM, V4, 64, "decode", 64, "2d-ws", "batch", context_len=2048)
    assert heads.kv_s == pytest.approx(64 * batch.kv_s)
    # LLaMA 3 70B (K = 8) decoding batch 16 at context 2,048 on 16 v4 chips (1.2 TB/s each).
    # heads: 8 heads over 16 chips, so each chip holds one head (replicated twice) of all 16 sequences:
    #        16 x 2,048 x 40,960 B = 1,342,177,280 B -> 1.1185 ms.
    # batch: one sequence per chip, all 8 heads: 1 x 2,048 x 327,680 B = 671,088,640 B -> 0.5592 ms.
    heads = layout_cost(LLAMA70, V4, 16, "decode", 16, "2d-ws", "heads", context_len=2048)
    batch = layout_cost(LLAMA70, V4, 16, "decode", 16, "2d-ws", "batch", context_len=2048)
    assert heads.kv_s == pytest.approx(16 * 2048 * LLAMA70_KV_PER_HEAD / 1.2e12, rel=1e-12)
    assert batch.kv_s == pytest.approx(1 * 2048 * LLAMA70_KV_PER_TOKEN / 1.2e12, rel=1e-12)
    assert (heads.context_len, heads.n_chips, heads.batch, heads.tokens) == (2048, 16, 16, 16)
    # fp8 keys and values are 1 byte against bf16's 2: half the read.
    bf16 = layout_cost(PALM, V4, 64, "decode", 64, "2d-ws", "batch")
    fp8 = layout_cost(PALM, V4, 64, "decode", 64, "2d-ws", "batch", kv_dtype="fp8")
    assert fp8.kv_s == pytest.approx(bf16.kv_s / 2, rel=1e-12)
    # A weight-gathered layout holds a gathered layer's weights on top of its shard: more HBM at the same batch.
    gathered = layout_cost(PALM, V4, 64, "decode", 64, "wg-xyz", "batch")
    assert gathered.bytes_per_chip > bf16.bytes_per_chip


def test_large_batch_network_time_is_the_layouts_bandwidth_time_of_every_layer():
    # 2^20 tokens: every collective is bandwidth-bound, and 2D weight-stationary moves only activations.
    cost = layout_cost(PALM, V4, 64, "prefill", 512, "2d-ws", "heads", mesh_shape=SLICE, pad_heads=True)
    assert cost.network_latency_s == 0
    assert cost.network_s == pytest.approx(L540 * ffn_comm_time("2d-ws", PALM, V4, 512 * 2048, SLICE), rel=1e-12)


def test_batch_one_collectives_are_latency_bound_hops_read_off_the_torus():
    # 1D on 4 x 4 x 4: an all-gather and a reduce-scatter, each 2 + 2 + 2 hops of 1 us; nothing else at batch 1.
    cost = layout_cost(PALM, V4, 64, "decode", 1, "1d-ws", "heads", mesh_shape=SLICE, pad_heads=True)
    assert cost.network_s == pytest.approx(L540 * 12e-6, rel=1e-12)
    assert cost.network_latency_s == pytest.approx(cost.network_s)
    serial = layout_cost(PALM, V4, 64, "decode", 1, "1d-ws", "heads", mesh_shape=SLICE, parallel_block=False,
                         pad_heads=True)
    assert serial.network_s - cost.network_s == pytest.approx(L540 * 12e-6, rel=1e-12)  # attention's own pair


def test_the_mesh_and_the_activations_format_set_the_network_term():
    # 64 chips as 2 x 4 x 8 instead of 4 x 4 x 4: a longer axis, more hops per collective, a longer network term;
    # 4-byte fp32 activations take longer than bf16 ones on the same layout.
    cube = layout_cost(PALM, V4, 64, "decode", 64, "2d-ws", "batch")
    assert layout_cost(PALM, V4, 64, "decode", 64, "2d-ws", "batch", mesh_shape=(2, 4, 8)).network_s > cube.network_s
    assert layout_cost(PALM, V4, 64, "decode", 64, "2d-ws", "batch",
                       activation_dtype="fp32").network_s > cube.network_s
    assert layout_cost(PALM, V4, 16, "decode", 64, "2d-ws", "batch", mesh_shape=(2, 2, 4)).n_chips == 16


def test_overlap_takes_the_largest_term_and_no_overlap_adds_the_network():
    plain = layout_cost(PALM, V4, 64, "decode", 64, "2d-ws", "batch")
    hidden = layout_cost(PALM, V4, 64, "decode", 64, "2d-ws", "batch", overlap=True)
    assert plain.total_s == pytest.approx(max(plain.compute_s, plain.memory_s) + plain.network_s)
    assert hidden.total_s == pytest.approx(max(plain.compute_s, plain.memory_s, plain.network_s))


# --- A layer's collectives --------------------------------------------------------------------------------------
def test_batch_sharded_attention_adds_two_all_to_alls_and_weight_gathering_adds_one_gather():
    base = layer_collectives(PALM, 64, "decode", 64, "2d-ws", "heads", mesh_shape=SLICE, pad_heads=True)
    sharded = layer_collectives(PALM, 64, "decode", 64, "2d-ws", "batch", mesh_shape=SLICE)
    assert [c.op for c in sharded[len(base):]] == ["all-to-all", "all-to-all"]
    gathered = layer_collectives(PALM, 64, "prefill", 512, "wg-xyz", "batch", mesh_shape=SLICE)
    weights = [c for c in gathered if c.tensor == "weights"]
    assert len(weights) == 1 and weights[0].group == SLICE
    assert weights[0].bytes_per_chip == pytest.approx(param_count(get_model(PALM)) / L540 * 2)  # the whole layer
    # Two chips swap the queries twice too; one chip has no collective in any sharding.
    assert [c.op for c in layer_collectives(PALM, 2, "decode", 8, "2d-ws", "batch")].count("all-to-all") == 2
    for sharding in ("batch", "heads"):
        assert layer_collectives(PALM, 1, "decode", 8, "2d-ws", sharding) == ()


def test_fp32_activations_double_every_activation_collective_and_the_all_to_alls_carry_activations():
    # 1D weight-stationary, decode at batch 64 on 4 x 4 x 4: the layer input all-gather and output reduce-scatter move
    # B x D x 4 B = 64 x 18,432 x 4 = 4,718,592 B; attention's all-to-alls move B N H x 4 B / n = 64 x 48 x 256 x 4
    # / 64 = 49,152 B each.
    steps = layer_collectives(PALM, 64, "decode", 64, "1d-ws", "batch", activation_dtype="fp32", mesh_shape=SLICE)
    assert [(c.op, c.tensor) for c in steps] == [("all-gather", "activations"), ("reduce-scatter", "activations"),
                                                  ("all-to-all", "activations"), ("all-to-all", "activations")]
    assert [c.bytes_per_chip for c in steps] == pytest.approx([4_718_592, 4_718_592, 49_152, 49_152])
    assert all(c.group == SLICE for c in steps)


def test_a_serial_block_repeats_the_d_sized_gather_and_scatter_of_2d_weight_stationary():
    # 2D on 4 x 4 x 4 (X = 4): the D-sized collectives run over Y Z = (4, 4) on B D / X values: 64 x 18,432 / 4 x 2 B
    # = 589,824 B; the F-sized ones over X. A serial block adds attention's own D-sized gather and scatter, not the
    # F-sized ones.
    parallel = layer_collectives(PALM, 64, "decode", 64, "2d-ws", "heads", mesh_shape=SLICE, pad_heads=True)
    serial = layer_collectives(PALM, 64, "decode", 64, "2d-ws", "heads", mesh_shape=SLICE, parallel_block=False,
                                pad_heads=True)
    assert serial[:len(parallel)] == parallel
    extra = serial[len(parallel):]
    assert [(c.op, c.group) for c in extra] == [("all-gather", (4, 4)), ("reduce-scatter", (4, 4))]
    assert [c.bytes_per_chip for c in extra] == pytest.approx([589_824, 589_824])


# --- Heads that do not split: padded as Pope et al. padded, no further ------------------------------------------------
def test_padding_48_heads_to_64_adds_their_w_q_and_w_o_to_what_is_read_and_multiplied_but_not_to_mfu():
    # 48 heads on 48 chips split evenly; on 64 chips the padding to 64 heads adds 16 heads' W_Q and W_O to every
    # layer (multiquery: K = 1 is unchanged): 16 x 256 x 18,432 x 2 x 118 layers = 17.8e9 weights on 540.35e9.
    layout_cost(PALM, V4, 48, "decode", 48, "2d-ws", "heads")
    plain = layout_cost(PALM, V4, 64, "decode", 64, "2d-ws", "batch")
    padded = layout_cost(PALM, V4, 64, "decode", 64, "2d-ws", "heads", pad_heads=True)
    extra = 16 * 256 * 18432 * 2 * 118
    assert padded.compute_s - plain.compute_s == pytest.approx(2 * extra * 64 / (64 * get_chip(V4).peak_flops("bf16")),
                                                               rel=1e-9)
    assert padded.model_flops == plain.model_flops == 2 * param_count(get_model(PALM)) * 64
    assert padded.priced_params == param_count(get_model(PALM)) + 16 * 2 * 18432 * 256 * 118 == 558_171_684_864
    assert plain.priced_params == 540_354_281_472
    # Padding stops at the next power of two of the heads, as far as Pope et al. padded.
    assert [padded_heads(48, n) for n in (1, 5, 32, 64, 128, 256)] == [48, 50, 64, 64, 0, 0]
    assert padded_heads(32, 64) == 0 and padded_heads(40, 64) == 64  # 32 is its own cap; 40 pads to 64


def test_choose_layout_skips_a_head_split_it_cannot_make_and_pads_only_when_told():
    decision = choose_layout(PALM, V4, 64, "decode", 64, weight_dtype="int8")
    assert {c.attention_sharding for c in decision.costs} == {"batch"}
    with pytest.raises(ValueError, match="nothing fits"):
        choose_layout(PALM, V4, 64, "decode", 1, weight_dtype="int8")  # batch 1 needs heads: pad them
    padded = choose_layout(PALM, V4, 64, "decode", 1, weight_dtype="int8", pad_heads=True)
    assert padded.best.attention_sharding == "heads"
    # On 256 chips padding would price 256 heads: 772e9 parameters, 43% more than the model. Skipped.
    assert all(c.attention_sharding == "batch" for c in choose_layout(PALM, V4, 256, "decode", 256,
                                                                      pad_heads=True).costs)
    with pytest.raises(ValueError, match="nothing fits"):
        choose_layout(PALM, V4, 256, "decode", 1, pad_heads=True)  # batch 1 cannot split either
    # Weights that do not fit are never chosen.
    with pytest.raises(ValueError, match="nothing fits"):
        choose_layout(PALM, V4, 8, "decode", 8)  # 1.08 TB of bf16 weights on 8 x 32 GiB
    assert not layout_cost(PALM, V4, 16, "decode", 16, "2d-ws", "batch").fits


def test_nothing_fits_suggests_padding_only_when_the_heads_do_not_split():
    with pytest.raises(NothingFits) as padded:
        choose_layout(PALM, V4, 64, "decode", 100000)  # 48 heads, 64 chips
    assert "the 48 heads do not split 64 ways and batch 100000 does not either: pad_heads=True pads them" in str(
        padded.value)
    with pytest.raises(NothingFits) as too_big:
        choose_layout(PALM, V4, 8, "decode", 1024, context_len=32768)  # 48 heads split 8 ways
    assert "pad_heads" not in str(too_big.value) and str(too_big.value).endswith("or quantize the weights")


# --- The chosen layouts against Tables 2 and 3 -----------------------------------------------------------------------
@for_each(ROWS, ids=lambda r: r.label)
def test_the_model_chooses_the_papers_layout_or_explains_why_not(row):
    decision = choose_for(row)
    # Attention is head-sharded exactly when the batch is one; the best choice has no margin over itself, and an int8
    # row is priced in int8.
    assert decision.best.attention_sharding == ("heads" if row.batch == 1 else "batch")
    assert decision.best.weight_dtype == row.weight_dtype
    assert decision.margin(decision.best.ffn_layout, decision.best.attention_sharding) == 0.0
    if decision.accepts(row.ffn_layout, row.attention_sharding):
        return
    # Only the 540B high-throughput prefill disagrees: weight-gathered over XY by our whole-layer accounting, within
    # 2% of the paper's XYZ, which the paper's own two-matrix accounting (claim P1) does pick at 2^20 tokens.
    assert (row.model, row.phase, row.scenario) == (PALM, "prefill", "high throughput")
    assert decision.best.ffn_layout == "wg-xy" and decision.margin(row.ffn_layout, row.attention_sharding) < 0.02
    assert comm_volume_curves(PALM, SLICE, (row.tokens,)).best() == ("wg-xyz",)


@for_each(ROWS, ids=lambda r: r.label)
def test_every_measured_step_is_slower_than_the_model_by_exactly_its_mfu_shortfall(row):
    model = choose_for(row).best
    ratio = measured_step_s(row) / model.total_s
    # A bound: every resource at peak, overlappable work overlapped, attention FLOPs and layer norms left out.
    assert ratio >= 1.0
    # How much slower follows from the paper's stated MFU, not from a band: both steps do the same 2 P T model FLOPs
    # on the same n C, so measured / model = MFU_model / MFU_paper. The paper rounds MFU to a whole percent (half a
    # point of an 8% MFU is 6%) and latency to 2-3 digits (0.5%). A wrong FLOP count, token count or step count on
    # either side moves the ratio off this by far more; MFU_model <= 1 bounds the ratio by 1 / MFU_paper.
    assert ratio == pytest.approx(model.mfu / row.mfu, rel=0.005 / row.mfu + 0.005)
    assert ratio <= 1.0 / (row.mfu - 0.005)


def test_choose_for_prices_the_rows_own_context_and_passes_its_options_to_choose_layout():
    # The same decode row at 4 x the context: each chip reads 4 x the KV cache per step (the cache is linear in the
    # tokens held), whichever layout wins.
    row = pope_rows()[3]
    longer = dataclasses.replace(row, context_len=4 * row.context_len)
    short, long = choose_for(row).best, choose_for(longer).best
    assert long.context_len == 4 * row.context_len and long.attention_sharding == short.attention_sharding
    assert long.kv_s == pytest.approx(4 * short.kv_s, rel=1e-9)
    decision = choose_for(next(r for r in pope_rows() if r.phase == "decode"), tie=0.5, overlap=True)
    assert decision.tie == 0.5
    assert all(c.overlap for c in decision.costs)


def test_choose_for_resolves_the_model_once_and_passes_the_object_inward(monkeypatch):
    # The public entrance resolves the row's model name; every helper inside takes the object.
    import sys

    import scaling_lib.models

    original, names, in_frontier = scaling_lib.models.get_model, [], []

    def counting(name):
        if isinstance(name, str):
            names.append(name)
        if sys._getframe(1).f_globals["__name__"] == "scaling_lib.frontier":
            in_frontier.append(name)
        return original(name)

    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").startswith("scaling_lib") and getattr(module, "get_model", None) is original:
            monkeypatch.setattr(module, "get_model", counting)
    row = next(r for r in pope_rows() if r.model == "palm-540b" and r.phase == "decode")
    choose_for(row)
    assert names == ["palm-540b"] and in_frontier == ["palm-540b"]


def test_an_nvlink_switch_gets_megatron_1d_weight_stationary_and_never_a_torus_layout():
    decision = choose_layout("llama3-70b", "h100", 8, "decode", 64)
    assert {c.ffn_layout for c in decision.costs} == {"1d-ws"} and decision.best.mesh_shape == (8,)


# --- The frontier and the choice by metric ---------------------------------------------------------------------------
def test_the_frontier_trades_latency_for_mfu_and_no_swept_point_beats_it():
    points = sweep(PALM, V4, "decode", weight_dtype="int8", pad_heads=True)
    front = pareto_frontier(points)
    assert [p.total_s for p in front] == sorted(p.total_s for p in front)
    assert all(a.mfu < b.mfu for a, b in zip(front, front[1:]))
    for p in points:
        assert not any(q.total_s < p.total_s and q.mfu > p.mfu for q in points) or p not in front
    assert all(0 < p.mfu <= 1 for p in points)


def test_a_point_no_better_in_mfu_and_slower_is_off_the_frontier_and_duplicates_count_once():
    base = layout_cost(PALM, V4, 64, "decode", 64, "2d-ws", "batch")

    def point(step_s, flops):  # total = compute = step_s; MFU = flops / (step_s x 2)
        return dataclasses.replace(base, compute_s=step_s, weight_s=0.0, kv_s=0.0, network_s=0.0,
                                   model_flops=flops, peak_flops=2.0)

    fast, slow_same_mfu, slow_better = point(1.0, 1.0), point(2.0, 2.0), point(3.0, 4.5)  # MFU 0.5, 0.5, 0.75
    assert (fast.mfu, slow_same_mfu.mfu, slow_better.mfu) == (0.5, 0.5, 0.75)
    assert pareto_frontier([slow_better, slow_same_mfu, fast]) == (fast, slow_better)
    assert pareto_frontier([fast, fast]) == (fast,)


def test_int8_weights_halve_the_cost_of_a_weight_bound_step_at_equal_latency():
    # Batch 8: the step is reading the weights. int8 on 24 chips is as fast as bf16 on 48, at half the chips (chip
    # counts that divide the 48 heads: no padding, which would add weights to one side only).
    bf16 = choose_layout(PALM, V4, 48, "decode", 8).best
    int8 = choose_layout(PALM, V4, 24, "decode", 8, weight_dtype="int8").best
    assert int8.total_s <= bf16.total_s
    assert int8.cost_chip_s_per_token / bf16.cost_chip_s_per_token == pytest.approx(0.5, rel=0.1)


def test_choose_meets_the_latency_target_at_the_lowest_cost_of_the_sweep():
    target = 0.02
    plan = choose(PALM, V4, "decode", "cost", latency_target_s=target, pad_heads=True)
    assert plan.total_s <= target
    candidates = [p for dtype in ("bf16", "int8") for p in sweep(PALM, V4, "decode", weight_dtype=dtype, pad_heads=True)
                  if p.total_s <= target]
    assert plan.cost_chip_s_per_token == min(p.cost_chip_s_per_token for p in candidates)
    fastest = choose(PALM, V4, "decode", "latency", pad_heads=True)
    assert fastest.total_s == min(p.total_s for p in candidates + [fastest])
    # head sharding pads PaLM 540B's 48 heads no further than 64, so 128 and 256 chips split the batch, not the heads
    assert fastest.attention_sharding == "batch" and fastest.n_chips > 64


def test_a_tie_of_zero_keeps_only_the_fastest():
    decision = choose_layout(PALM, V4, 64, "decode", 64, tie=0)
    assert decision.tie == 0
    assert decision.best in decision.equivalent
    assert all(c.total_s == decision.best.total_s for c in decision.equivalent)


def test_longest_context_is_max_context_length_with_everything_but_the_weights_for_the_cache():
    chip = get_chip(V4)
    free = chip.hbm_capacity - param_count(get_model(PALM)) * 1 / 64
    ours = longest_context(PALM, V4, 64, 128, "batch", weight_dtype="int8")
    assert ours == max_context_length(PALM, V4, 64, 128, "batch", kv_fraction=free / chip.hbm_capacity)
    assert longest_context(PALM, V4, 64, 128, "heads", weight_dtype="int8") * 64 == pytest.approx(ours, rel=0.01)
    assert longest_context(PALM, V4, 8, 8) == 0  # the bf16 weights alone overflow 8 chips
    # 16 v4 chips of 32 GiB, int8 weights: each chip has 32 GiB - P / 16 bytes free for the cache of batch 16.
    # batch: one sequence of all 8 heads per chip: 327,680 B per token; heads: 16 sequences x 1 head: 655,360 B.
    free = 32 * GIB - param_count(LLAMA70) / 16
    assert get_chip(V4).hbm_capacity == 32 * GIB
    assert longest_context(LLAMA70, V4, 16, 16, "batch", weight_dtype="int8") == int(free // LLAMA70_KV_PER_TOKEN)
    assert longest_context(LLAMA70, V4, 16, 16, "heads", weight_dtype="int8") == int(
        free // (16 * LLAMA70_KV_PER_HEAD))


# --- Claims P6 and P7: Pope et al.'s chatbot turn and serial block ---------------------------------------------------
def test_p7_serial_block_is_compared_at_the_papers_own_configuration():
    # Pope et al. sec. 4.3: the serial block's step is 14% longer for PaLM 540B decode, 2D weight-stationary, 64
    # chips, batch 512. The model prices only the collectives the shared block saves, so it must find a positive
    # increase no larger than 14% there; it finds about 10%.
    args = (PALM, V4, 64, "decode", 512, "2d-ws", "batch")
    increase = layout_cost(*args, parallel_block=False).total_s / layout_cost(*args).total_s - 1
    assert 0.05 < increase <= published("P7 parallel block")
    assert evaluate(claim("P7 parallel block")).ours == pytest.approx(increase, rel=1e-12)


def test_p6_chatbot_turn_is_a_cached_prefill_then_64_steps_and_beats_the_published_1_9_s():
    # Pope et al. sec. 1: 64 new tokens against 1,920 cached, 64 generated, 1.9 s on 64 TPU v4 with int8 weights.
    prefill, step = chatbot_turn()
    assert (prefill.tokens, prefill.batch, prefill.attention_sharding) == (64, 1, "heads")
    assert prefill.kv_s == pytest.approx(1920 * 120_832 / 1.2e12, rel=1e-9)  # 2 x 118 x 256 x 2 B per token
    turn = prefill.total_s + 64 * step.total_s
    assert turn < published("P6 chatbot turn")
    # The measured decode row (its 64 steps are the reply) leaves 80 ms of the 1.9 s for the prefill.
    assert 0 < prefill.total_s < published("P6 chatbot turn") - 1.82
    assert evaluate(claim("P6 chatbot turn")).holds


# --- Bad input: a ValueError naming the argument and the fix ---------------------------------------------------------
@for_each([
    (lambda: layout_cost(PALM, V4, 64, "decode", 48, "2d-ws", "batch"),
     r"batch=48 divisible by n_chips=64.*attention_sharding='heads'"),
    (lambda: layout_cost(PALM, V4, 64, "train", 64, "2d-ws", "batch"), "unknown phase"),
    (lambda: layout_cost(PALM, V4, 64, "decode", 64, "2d-ws", "batch", mesh_shape=(2, 2, 2)), "holds 8 chips"),
    *[(lambda shape=shape: layout_cost(PALM, V4, math.prod(shape), "decode", 64, "2d-ws", "batch", mesh_shape=shape),
       r"\bmesh_shape must be 1 to 3 positive integer axis sizes") for shape in ((2, 2, 2, 2), [1, 2, 2, 2, 2])],
    (lambda: layout_cost(PALM, V4, 16, "decode", 64, "2d-ws", "batch", mesh_shape=(2, 2, 2, 2)),
     "mesh_shape must be 1 to 3 positive integer axis sizes"),
    # heads that do not split, and padding past the next power of two
    (lambda: layout_cost(PALM, V4, 32, "decode", 32, "2d-ws", "heads"),
     r"n_heads=48 query heads of palm-540b n_chips=32 ways.*pad_heads=True to pad the heads to 64 \(as Pope et al. "
     r"padded PaLM 540B's 48 heads to 64"),
    (lambda: layout_cost(PALM, V4, 64, "decode", 64, "2d-ws", "heads"),
     "the padded heads' weights are stored, read and multiplied, and MFU counts only the real ones"),
    (lambda: layout_cost(PALM, V4, 64, "decode", 64, "2d-ws", "heads"),
     r"a chip count among \[1, 2, 3, 4, 6, 8, 12, 16, 24, 48\]"),
    (lambda: layer_collectives(PALM, 64, "decode", 64, "2d-ws", "heads"), "does not divide 48"),
    (lambda: layout_cost(PALM, V4, 256, "decode", 256, "1d-ws", "heads", pad_heads=True),
     r"pads them to 256, past 64.*attention_sharding='batch'"),
    (lambda: choose_layout(PALM, V4, 64, "decode", 64, pad_heads="yes"), "pad_heads must be True or False, got 'yes'"),
    # a torus layout on a switch, here as in estimate.Deployment
    (lambda: layout_cost("llama3-70b", "h100", 8, "decode", 64, "2d-ws", "heads"),
     r"ffn_layout='2d-ws' is one of Pope et al.'s torus layouts and h100 is not a TPU torus \(NVLink\): use "
     r"ffn_layout='1d-ws'"),
    (lambda: Deployment("llama3-70b", "h100", 8, ffn_layout="2d-ws"), "is not a TPU torus"),
    # the choice
    (lambda: choose(PALM, V4, "decode", "throughput"), "unknown metric"),
    (lambda: choose(PALM, V4, "decode", "cost", latency_target_s=1e-4, pad_heads=True), "no configuration"),
    # One point: 64 chips, batch 1. Reading 540 GB of int8 weights at 64 x 1.2 TB/s alone takes 7 ms >> 0.1 ms.
    (lambda: choose(PALM, V4, "decode", latency_target_s=1e-4, weight_dtypes=("int8",), chip_counts=(64,),
                    batches=(1,)), r"\blatency_target_s=0\.0001\b.*relax the target or allow more chips"),
    (lambda: choose(PALM, V4, "decode", weight_dtypes=()), r"\bweight_dtypes\b must be a non-empty list"),
    (lambda: choose(PALM, V4, "decode", weight_dtypes=[]), r"\bweight_dtypes\b must be a non-empty list"),
    (lambda: choose(PALM, V4, "decode", weight_dtypes=("int8", 8)), r"\bweight_dtypes\b must hold dtype names"),
    (lambda: choose(PALM, V4, "decode", weight_dtypes=5), r"\bweight_dtypes\b"),
    (lambda: choose_layout(PALM, V4, 64, "decode", 64, tie=1.5), "tie"),
    (lambda: choose_layout(PALM, V4, 64, "decode", 64, tie=-0.01), r"\btie\b"),
    (lambda: pareto_frontier([1]), "points must hold LayoutCost results"),
], ids=str)
def test_bad_input_gets_a_value_error_naming_the_argument_and_the_fix(call, words):
    with pytest.raises(ValueError, match=words):
        call()
