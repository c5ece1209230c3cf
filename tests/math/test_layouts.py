"""scaling_lib.layouts (closed form): Pope et al.'s partitioning layouts, their collectives, what they cost, where
one overtakes another, and the best 2D mesh. Values are worked by hand from the model shapes (PaLM 540B: L = 118,
D = 18,432, F = 73,728 = 4D, N = 48 query heads, K = 1 KV head, H = 256) and TPU v4 (32 GiB, 1.2 TB/s of HBM,
275 TFLOP/s bf16, 6 ICI links of 45 GB/s one way); the claims of chapter 11 are in test_claims_layouts.py, the JAX
side in tests/tiny/test_layouts.py."""

import math

import pytest

from scaling_lib.collectives import Collective
from scaling_lib.layouts import (
    LAYOUTS,
    best_layout,
    comm_volume_curves,
    ffn_collectives,
    ffn_comm_time,
    ffn_comm_volume,
    ffn_layer_time,
    layout_switch_points,
    optimal_2d_mesh,
    wg_optimal_gather_size,
    wg_switch_tokens,
    ws_2d_crossover_chips,
    ws_2d_optimal_x,
)

from tests import for_each

SLICE = (4, 4, 4)
D, F = 18432, 73728
V4_LINK = 45e9  # one ICI link, one way; 6 links per chip


# --- A layout's collectives, by hand ---------------------------------------------------------------------------------
@for_each([
    ("1d-ws", [("all-gather", "activations", 2 * 10 * D, (2, 4, 8)),
               ("reduce-scatter", "activations", 2 * 10 * D, (2, 4, 8))]),
    ("2d-ws", [("all-gather", "activations", 2 * 10 * D / 2, (4, 8)),
               ("reduce-scatter", "activations", 2 * 10 * F / 32, (2,)),
               ("all-gather", "activations", 2 * 10 * F / 32, (2,)),
               ("reduce-scatter", "activations", 2 * 10 * D / 2, (4, 8))]),
    ("wg-x", [("all-gather", "weights", 2 * D * F * 2 / 64, (2,))] * 2
     + [("all-gather", "activations", 2 * 10 * D / 2, (4, 8)),
        ("reduce-scatter", "activations", 2 * 10 * D / 2, (4, 8))]),
    ("wg-xy", [("all-gather", "weights", 2 * D * F * 8 / 64, (2, 4))] * 2
     + [("all-gather", "activations", 2 * 10 * D / 8, (8,)), ("reduce-scatter", "activations", 2 * 10 * D / 8, (8,))]),
    ("wg-xyz", [("all-gather", "weights", 2 * D * F, (2, 4, 8))] * 2),  # nothing left to split the activations over
], ids=str)
def test_each_layouts_collectives_by_hand_on_a_2x4x8_mesh(layout, expected):
    # 10 tokens, bf16: every byte count is 2 x the elements of the block each chip holds or gathers
    got = ffn_collectives(layout, "palm-540b", 10, (2, 4, 8))
    assert got == tuple(Collective(*step) for step in expected)


def test_collectives_run_in_order_over_one_chip_are_left_out_and_dtypes_set_the_bytes():
    for layout, tokens, ops in [("1d-ws", 64, ["all-gather", "reduce-scatter"]),
                                ("2d-ws", 64, ["all-gather", "reduce-scatter", "all-gather", "reduce-scatter"]),
                                ("wg-x", 4096, ["all-gather", "all-gather", "all-gather", "reduce-scatter"])]:
        assert [c.op for c in ffn_collectives(layout, "palm-540b", tokens, SLICE)] == ops
    # X = 1: 2d-ws's F-collectives run over a single chip and move nothing
    assert [c.group for c in ffn_collectives("2d-ws", "palm-540b", 10, (1, 4, 4))] == [(4, 4), (4, 4)]
    steps = ffn_collectives("wg-x", "palm-540b", 10, (2, 4, 8), weight_dtype="int8", activation_dtype="fp32")
    assert [c.bytes_per_chip for c in steps] == [D * F * 2 / 64] * 2 + [4 * 10 * D / 2] * 2
    volume = ffn_comm_volume("wg-x", "palm-540b", 10, (2, 4, 8))
    assert volume.weight_bytes == 2 * (2 * D * F * 2 / 64) and volume.activation_bytes == 2 * (2 * 10 * D / 2)
    assert volume.total_bytes == volume.weight_bytes + volume.activation_bytes


def test_weight_gathered_optimal_gather_size_by_hand():
    # N = sqrt(T n / F) = sqrt(4,096 x 64 / 73,728) = 1.8856
    assert wg_optimal_gather_size(4096, 64, 73728) == pytest.approx(math.sqrt(4096 * 64 / 73728), rel=1e-12)
    # At T = 4F on 64 chips the optimum is n_wg = 16 = XY, and there M_WG* = 4 b D sqrt(T F / n) = b D F: PaLM 540B's
    # 2 x 18,432 x 73,728 bytes, the bytes factor included (chapter 8's formula, b_a = b_w = b = 2 in bf16).
    tokens = 4 * 73728
    assert wg_optimal_gather_size(tokens, 64, 73728) == 16
    assert ffn_comm_volume("wg-xy", "palm-540b", tokens, SLICE).total_bytes == 2 * 18432 * 73728 == \
        4 * 2 * 18432 * math.sqrt(tokens * 73728 / 64)


def test_ffn_comm_time_under_each_convention_by_hand():
    # 1d-ws, 10 tokens on 4x4x4: 2 collectives of 2 x 10 x D bytes each; pope: 6 links x 45 GB/s; scaling-book: the
    # three axes x 90 GB/s both ways -- the same 270 GB/s. 2d-ws: D-collectives over YZ (2 axes), F over X (1 axis).
    ws1 = 2 * 2 * 10 * D
    assert ffn_comm_time("1d-ws", "palm-540b", "tpu-v4", 10, SLICE) == pytest.approx(ws1 / (6 * V4_LINK), rel=1e-12)
    ws2_d, ws2_f = 2 * 2 * 10 * D / 4, 2 * 2 * 10 * F / 16
    assert ffn_comm_time("2d-ws", "palm-540b", "tpu-v4", 10, SLICE, "scaling-book") == pytest.approx(
        ws2_d / (2 * 2 * V4_LINK) + ws2_f / (2 * V4_LINK), rel=1e-12)


# --- One FFN layer's time: compute, weights and KV read, collectives --------------------------------------------------
def test_one_ffn_layers_time_by_hand_in_prefill():
    # wg-xy on 4x4x4, 4,096 tokens: compute 4 T D F / (64 x 275e12); each chip multiplies the weights gathered over
    # XY = 16 chips: 2 D F x 2 B x 16 / 64 read from HBM; no KV read in prefill, whatever the context.
    layer = ffn_layer_time("wg-xy", "palm-540b", "tpu-v4", SLICE, 4096, context_len=2048)
    assert layer.layout == "wg-xy"
    assert layer.compute_s == pytest.approx(4 * 4096 * D * F / (64 * 275e12), rel=1e-12)
    assert layer.weight_memory_s == pytest.approx(2 * D * F * 2 * 16 / 64 / 1.2e12, rel=1e-12)
    assert layer.kv_memory_s == 0.0 and layer.memory_s == layer.weight_memory_s
    assert layer.comm_s == ffn_comm_time("wg-xy", "palm-540b", "tpu-v4", 4096, SLICE)
    assert layer.total_s == pytest.approx(max(layer.compute_s, layer.memory_s) + layer.comm_s, rel=1e-15)
    assert layer.overlapped_s == max(layer.compute_s, layer.memory_s, layer.comm_s)


def test_one_ffn_layers_time_in_decode_in_its_dtypes():
    base = ffn_layer_time("2d-ws", "palm-540b", "tpu-v4", SLICE, 64, "decode", context_len=2048)
    quant = ffn_layer_time("2d-ws", "palm-540b", "tpu-v4", SLICE, 64, "decode", context_len=2048, weight_dtype="int8",
                           kv_dtype="int8", activation_dtype="int8", compute_dtype="int8", convention="scaling-book")
    assert quant.weight_memory_s == pytest.approx(base.weight_memory_s / 2, rel=1e-12)
    assert quant.kv_memory_s == pytest.approx(base.kv_memory_s / 2, rel=1e-12)
    assert quant.compute_s == base.compute_s  # v4 runs int8 at its bf16 rate; v5e at twice it
    v5e = [ffn_layer_time("2d-ws", "palm-540b", "tpu-v5e", SLICE, 64, compute_dtype=dtype).compute_s
           for dtype in ("bf16", "int8")]
    assert v5e[1] == pytest.approx(v5e[0] / 2, rel=1e-12)
    assert quant.comm_s == ffn_comm_time("2d-ws", "palm-540b", "tpu-v4", 64, SLICE, "scaling-book",
                                         activation_dtype="int8")
    assert base.memory_s == base.weight_memory_s + base.kv_memory_s
    assert ffn_layer_time("2d-ws", "palm-540b", "tpu-v4", SLICE, 64, "decode").kv_memory_s == 0.0  # no context
    assert ffn_layer_time("2d-ws", "palm-540b", "tpu-v4", SLICE, 64, "decode", context_len=2048,
                          n_chips=64) == base
    # PaLM 540B, 64 chips, 64 sequences of 2,048 tokens: 2 x 118 x 1 x 256 x 2 B per token over 118 layers = 1,024 B
    # per token and layer; 64 x 2,048 x 1,024 B / 64 chips / 1.2e12 B/s = 1.7476 us.
    assert base.kv_memory_s == pytest.approx(64 * 2048 * 1024 / 64 / 1.2e12, rel=1e-12)


# --- Choosing a layout, and where one overtakes another ---------------------------------------------------------------
def test_best_layout_passes_its_options_to_every_layout():
    choice = best_layout("palm-540b", "tpu-v4", SLICE, 64, "decode", context_len=2048, weight_dtype="int8")
    assert [t.layout for t in choice.times] == list(LAYOUTS)
    assert choice.time("wg-x") == ffn_layer_time("wg-x", "palm-540b", "tpu-v4", SLICE, 64, "decode",
                                                 context_len=2048, weight_dtype="int8")
    assert choice.best == min(choice.times, key=lambda t: t.total_s).layout


def test_two_layouts_switch_where_their_bytes_or_seconds_meet_by_hand():
    # 2d-ws on 4x4x4 moves a T (2D/4 + 2F/16) = a T D bytes (F = 4D); wg-xyz gathers 2 b_w D F whatever T.
    # Bytes (and pope seconds, one bandwidth for all): equal at T = 2F = 147,456.
    # Scaling-book seconds: 2d-ws pays T D / 2 over 2 axes and T D / 2 over 1 axis, 0.75 a T D / W; wg-xyz's gather
    # runs over 3 axes: 2 b_w D F / (3 W); equal at T = 8 D / 3 / 0.75 = 32 D / 9 = 65,536.
    pair = ("2d-ws", "wg-xyz")
    for convention, tokens in [("pope", 2 * F), ("scaling-book", 32 * D / 9)]:
        (point,) = layout_switch_points("palm-540b", "tpu-v4", SLICE, convention, layouts=pair)
        assert (point.from_layout, point.to_layout) == pair and point.tokens == pytest.approx(tokens, rel=1e-9)
    (point,) = comm_volume_curves("palm-540b", SLICE, (1, 10**6), layouts=pair).switch_points
    assert point.tokens == pytest.approx(2 * F, rel=1e-9)
    # a range that ends before the switch, or starts after it, has none
    assert layout_switch_points("palm-540b", "tpu-v4", SLICE, layouts=pair, tokens_range=(1, 2 * F - 100)) == ()
    assert layout_switch_points("palm-540b", "tpu-v4", SLICE, layouts=pair, tokens_range=(2 * F + 100, 1e7)) == ()
    assert comm_volume_curves("palm-540b", SLICE, (2 * F + 100, 1e7), layouts=pair).switch_points == ()


def test_curves_hold_each_layouts_volume_and_the_cheapest_at_each_count():
    curves = comm_volume_curves("palm-540b", SLICE, [100, 10**6], layouts=["2d-ws", "wg-xyz"])
    assert curves.tokens == (100, 10**6) and curves.layouts == ("2d-ws", "wg-xyz")
    assert curves.volume("2d-ws") == (2 * 100 * D, 2 * 10**6 * D)  # a T D, bf16
    assert curves.volume("wg-xyz") == (4 * D * F,) * 2
    assert curves.best() == ("2d-ws", "wg-xyz")


# --- The best 2D weight-stationary mesh and the crossovers ------------------------------------------------------
@for_each([
    # pope: minimize 2 (D / X + F / YZ) with no F-collective when X = 1; book: the F (X-axis) collectives get one
    # axis, the D (YZ) ones two. 16 chips: X = 1 (2D) ties X = 2 (D + 2 x 4D / 8 = 2D); the even (4, 4) wins the tie.
    (16, (1, 4, 4), (1, 4, 4)),
    (64, (4, 4, 4), (4, 4, 4)),  # pope X = sqrt(64 / 4) = 4; book: X = 2 and 4 tie, the even 4 x 4 wins
    # 128: pope X = 4 (0.5 D + 0.25 D) ties X = 8 (0.25 D + 0.5 D), (8, 4, 4) is the even one; book: X = 4 gives
    # 0.25 D + 0.25 D, X = 8 0.125 D + 0.5 D: X = 4, Y Z = 32 = 4 x 8
    (128, (8, 4, 4), (4, 4, 8)),
    (1, (1, 1, 1), (1, 1, 1)),
], ids=str)
def test_the_best_2d_mesh_by_hand(n_chips, pope, book):
    assert optimal_2d_mesh(n_chips, "palm-540b") == pope
    assert optimal_2d_mesh(n_chips, "palm-540b", "tpu-v4", "scaling-book") == book


@for_each([("tpu-v4", (2, 4, 4)), ("tpu-v5p", (2, 4, 4)), ("tpu-v5e", (4, 8, 1)),
                                        ("tpu-v6e", (4, 8, 1))], ids=str)
def test_the_best_2d_mesh_under_pope_does_not_depend_on_the_chips_bandwidth_and_fits_its_torus(chip, mesh):
    # PaLM 540B with multihead attention on 32 chips: (4, 2, 4) and (2, 4, 4) move the same bytes, so under Pope's
    # convention (bytes over one per-chip bandwidth) they tie on every 3D torus, and the tie goes to the even Y x Z
    # split. Before ties were taken up to rounding, tpu-v4 and tpu-v5p picked (4, 2, 4): the same sum in another
    # order. A 2D torus has no third axis of links: (4, 8) and (2, 16) tie, 2 (D / 4 + F / 8) = 2 (D / 2 + F / 16)
    # with F = 4 D, and the tie goes to the more even (4, 8).
    assert optimal_2d_mesh(32, "palm-540b-multihead", chip) == mesh



def test_the_2d_crossovers_and_the_optimal_x_by_hand():
    # Scaling Book ch. 7 Q7: minimizing D/X + 2 F X / n with F = 4 D gives X = sqrt(n / 8); 64 chips: sqrt(8).
    assert ws_2d_optimal_x(64, 1024, 4096, "scaling-book") == pytest.approx(math.sqrt(8), rel=1e-12)
    assert ws_2d_optimal_x(64, 1024, 4096, "pope") == pytest.approx(math.sqrt(16), rel=1e-12)
    assert ws_2d_crossover_chips(1000, 3000) == 12.0 and ws_2d_crossover_chips(1000, 3000, "scaling-book") == 54.0
    # T = (b_w / b_a) F N1 N2 / n: 4 -> 16 on 64 chips is F; fp32 activations halve it
    assert wg_switch_tokens("palm-540b", 4, 16, 64) == F
    assert wg_switch_tokens("palm-540b", 4, 16, 64, activation_dtype="fp32") == F / 2
    assert wg_switch_tokens("palm-540b", 4, 64, 64) == 4 * F  # gathering over every chip is allowed


# --- Bad input: a ValueError naming the argument and the fix ---------------------------------------------------------
def _switch_points(**kwargs):
    return layout_switch_points("palm-540b", "tpu-v4", SLICE, **kwargs)


@for_each([
    (lambda: ffn_collectives("3d-ws", "palm-540b", 10, SLICE), r"\blayout\b.*\bone of 1d-ws, 2d-ws, wg-x\b"),
    (lambda: ffn_collectives("1d-ws", "palm-540b", 0, SLICE), r"^tokens must be positive"),
    (lambda: ffn_comm_time("1d-ws", "palm-540b", "tpu-v4", 10, SLICE, "book"), r"\bconvention\b.*\bscaling-book\b"),
    *[(lambda kwargs=kwargs, phase=phase: ffn_layer_time("2d-ws", "palm-540b", "tpu-v4", SLICE, 64, phase, **kwargs),
       words) for phase, kwargs, words in [
        ("decode", dict(context_len=-1), r"^context_len must be non-negative"),
        ("decode", dict(n_chips=0), r"^n_chips must be a positive integer"),
        ("train", {}, r"\bphase\b.*\bprefill, decode\b")]],
    (lambda: best_layout("palm-540b", "tpu-v4", SLICE, 64).time("3d-ws"), "unknown layout '3d-ws'"),
    (lambda: comm_volume_curves("palm-540b", SLICE, [64, -1]), "tokens must be positive"),
    (lambda: comm_volume_curves("palm-540b", SLICE, "64"), r"^tokens must list token counts\b"),
    (lambda: comm_volume_curves("palm-540b", SLICE, 64), r"^tokens must list"),
    (lambda: comm_volume_curves("palm-540b", SLICE, ()), r"\bat least one token count\b"),
    (lambda: comm_volume_curves("palm-540b", SLICE, [100, 10**6], layouts=["2d-ws", "wg-xyz"]).volume("1d-ws"),
     r"\blayout\b.*\bone of 2d-ws, wg-xyz\b"),
    (lambda: _switch_points(tokens_range=(-1, 10)), "tokens_range start must be positive"),
    (lambda: _switch_points(tokens_range=(10, -5)), "tokens_range stop must be positive"),
    (lambda: _switch_points(tokens_range=(10, 10)), r"tokens_range must be increasing, got \(10, 10\)"),
    *[(lambda r=r: _switch_points(tokens_range=r), r"^tokens_range must be a \(start, stop\) pair\b")
      for r in [(1, 2, 3), 10, "ab", [5]]],
    (lambda: layout_switch_points("palm-540b", "tpu-v4", SLICE, "paper"), r"\bconvention\b.*\bpope\b"),
    (lambda: _switch_points(layouts=("2d-ws", "3d-ws")), r"\blayouts?\b.*\b3d-ws\b"),
    (lambda: optimal_2d_mesh(0, "palm-540b"), r"^n_chips must be a positive integer"),
    (lambda: optimal_2d_mesh(2**40, "palm-540b"), r"\bn_chips=1,099,511,627,776\b.*\bno slice has more chips\b"),
    (lambda: optimal_2d_mesh(64, "palm-540b", convention="paper"), r"\bconvention\b.*\bscaling-book\b"),
    *[(lambda args=args: ws_2d_optimal_x(*args), words) for args, words in [
        ((0, D, F), r"^n_chips must be positive"), ((64, 0, F), r"^d_model must be positive"),
        ((64, D, 0), r"^d_ff must be positive"), ((64, D, F, "paper"), r"\bconvention\b")]],
    (lambda: ws_2d_crossover_chips(0, 3000), r"^d_model must be positive"),
    (lambda: ws_2d_crossover_chips(1000, 0), r"^d_ff must be positive"),
    *[(lambda args=args: wg_switch_tokens("palm-540b", *args), words) for args, words in [
        ((4, 4, 64), r"\bneed gather_from < gather_to <= n_chips, got 4, 4, 64\b"),
        ((4, 128, 64), r"\bgot 4, 128, 64\b"), ((0, 16, 64), r"^gather_from must be a positive"),
        ((4, 0, 64), r"^gather_to must be a positive"), ((4, 16, 0), r"^n_chips must be a positive")]],
    # the chapter 11 claims' entrances
    (lambda: ffn_comm_volume("3d-ws", "palm-540b", 64, SLICE), "unknown layout"),
    (lambda: ffn_comm_time("2d-ws", "palm-540b", "tpu-v4", 64, SLICE, "megatron"), "unknown convention"),
    (lambda: ffn_layer_time("2d-ws", "palm-540b", "tpu-v4", SLICE, 64, n_chips=32), "not n_chips=32"),
    (lambda: best_layout("palm-540b", "tpu-v4", SLICE, 64, n_chips=128), "not n_chips=128"),
    (lambda: best_layout("palm-540b", "tpu-v4", SLICE, 0), "tokens_per_batch must be positive"),
    (lambda: best_layout("palm-540b", "tpu-v4", SLICE, -5), "tokens_per_batch must be positive"),
    (lambda: ffn_comm_volume("1d-ws", "palm-540b", 0, SLICE), "tokens must be positive"),
    (lambda: best_layout("palm-540b", "tpu-v4", SLICE, 64, "training"), "unknown phase"),
    (lambda: best_layout("palm-540b", "tpu-v4", (4, 4, 0), 64), "mesh_shape"),
    (lambda: best_layout("palm-540b", "tpu-v4", (2, 2, 2, 2), 64), "mesh_shape"),
    (lambda: comm_volume_curves("palm-540b", SLICE, []), "at least one"),
    (lambda: ws_2d_crossover_chips(18432, 73728, "paper"), "unknown convention"),
    (lambda: wg_switch_tokens("palm-540b", 64, 16, 64), "gather_from < gather_to <= n_chips"),
], ids=str)
def test_bad_input_gets_a_value_error_naming_the_argument_and_the_fix(call, words):
    with pytest.raises(ValueError, match=words):
        call()
