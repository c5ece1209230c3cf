"""Partitioning layouts for inference (Pope et al. 2022, "Efficiently Scaling Transformer Inference", sec. 3).

Symbols (book/notation.md). The paper writes E for d_model and B x L for the tokens in a batch; the book writes D
and T: D = d_model (paper's E), F = d_ff, T = tokens per batch (paper's B L; T = B in a decode step), n chips on a
mesh X x Y x Z with axes named x, y, z, b_a = bytes per activation element, b_w = bytes per weight element (the local
names a and w below), n_wg = chips the weights are gathered over. Like the paper's analysis, the feed-forward layer
here is two matrices, W_in [D, F] and W_out [F, D]; PaLM's SwiGLU adds a third [D, F] matrix, which changes
constants, not the scalings or the layout ranking.

Feed-forward layouts (sec. 3.2; per-chip bytes per layer, (m-1)/m factors dropped as in the paper's App. A):
    "1d-ws"  weights [D, F_xyz]; all-gather the input, reduce-scatter the output over all n   2 b_a T D
    "2d-ws"  weights [D_x, F_yz]; D-collectives over YZ, F-collectives over X            2 b_a T (D/X + F/YZ)
             optimal X = sqrt(n D / F): 4 b_a T sqrt(D F / n) = 8 b_a T D / sqrt(n) when F = 4D
    "wg-x", "wg-xy", "wg-xyz"  weights stored as in 2d-ws, all-gathered over n_wg = X, XY or XYZ chips before use;
             the batch is split n_wg ways and the rest of the mesh runs 1d-ws:   2 b_w D F n_wg / n + 2 b_a T D / n_wg
             optimal n_wg = sqrt(T n / F): 4 b D sqrt(T F / n) (b_a = b_w = b), which grows only as sqrt(T)
A collective over a group of one chip moves nothing, so "wg-xyz" has no activation traffic at all.

Two conventions turn bytes into seconds (CONVENTIONS):
    "pope"          every collective uses the chip's whole interconnect, n_links W_ici = ici_links x
                    ici_link_bandwidth (6 x 45 GB/s = 270 GB/s on TPU v4), as in the paper's sec. 2 and App. A;
    "scaling-book"  a collective over n_axes mesh axes gets n_axes W_ici,bidi, n_axes times the bidirectional bandwidth
                    of one link (Scaling Book ch. 3, used in ch. 7 Question 7).
They agree for a collective spanning all three axes (3 x 90 GB/s = 270 GB/s) and differ for 2d-ws, whose
F-collectives run over the X axis alone: the book gives them a third of the paper's bandwidth, which moves the
1D/2D crossover from n > 4F/D (16 chips for F = 4D) to n > 18F/D (72 chips); see `ws_2d_crossover_chips`.

The rest of Pope et al.'s analysis lives beside this module, one idea each: a collective and its pricing under the two
conventions (`collectives.Collective`, `collectives.ring_bytes_sent`), multiquery attention's collectives
(`attention_sharding`), the KV cache against the weights and the longest context (`context_limits`), MFU and the
decode bound beside a measured step (`utilization`), and the paper's measured runs (`measurements`).
"""

import math
from dataclasses import dataclass
from itertools import product

from ._validate import MAX_CHIPS, at_most, choice, divisors, items, positive, positive_int, torus_mesh
from .collectives import CONVENTIONS, Collective
from .context_limits import max_context_length  # noqa: F401 - readers import layouts.max_context_length
from .dtypes import bytes_per_element
from .hardware import Torus, get_chip
from .memory import kv_bytes_per_token
from .models import Transformer, get_model
from .roofline import matmul_flops
from .utilization import mfu  # noqa: F401 - readers import layouts.mfu

LAYOUTS = ("1d-ws", "2d-ws", "wg-x", "wg-xy", "wg-xyz")
PHASES = ("prefill", "decode")
TIE_RTOL = 1e-9  # two communication times this close are the same bytes summed in another order: a tie
_GATHER_AXES = {"1d-ws": 0, "2d-ws": 0, "wg-x": 1, "wg-xy": 2, "wg-xyz": 3}  # leading mesh axes weights gather over


def block_model(d_model: int, d_ff: int) -> Transformer:
    """A one-layer `Transformer` with only a feed-forward shape, D x F: the block `ffn_collectives` prices, for
    blocks that belong to no published model (chapter 8 runs D = 32, F = 64 on 2 x 2 x 2 emulated devices).

    Defined in chapter 8, *Partitioning layouts*.
    """
    return Transformer(n_layers=1, d_model=d_model, d_ff=d_ff, n_heads=1, n_kv_heads=1, head_dim=d_model,
                       vocab_size=1, name=f"ffn-block-{d_model}x{d_ff}")


def ffn_collectives(layout: str, model, tokens: float, mesh_shape, weight_dtype: str = "bf16",
                    activation_dtype: str = "bf16") -> tuple:
    """The collectives of one feed-forward layer under `layout` (Pope et al. sec. 3.2, Figs. 2 and A.2).

    Collectives over a single chip are left out. Weight-gathered layouts assume the batch splits n_wg ways.
    """
    m = get_model(model)
    choice("layout", layout, LAYOUTS)
    positive("tokens", tokens)
    return _ffn_collectives(layout, m, tokens, torus_mesh(mesh_shape), weight_dtype, activation_dtype)


def _ffn_collectives(layout: str, m, tokens: float, mesh: tuple, weight_dtype: str, activation_dtype: str) -> tuple:
    """`ffn_collectives` for a `Transformer`, a checked layout and token count, and an (X, Y, Z) mesh."""
    x, y, z = mesh
    n = x * y * z
    d, f = m.d_model, m.d_ff
    a, w = bytes_per_element(activation_dtype), bytes_per_element(weight_dtype)
    steps = []
    if layout == "1d-ws":
        steps += [("all-gather", "activations", a * tokens * d, (x, y, z)),
                  ("reduce-scatter", "activations", a * tokens * d, (x, y, z))]
    elif layout == "2d-ws":
        steps += [("all-gather", "activations", a * tokens * d / x, (y, z)),
                  ("reduce-scatter", "activations", a * tokens * f / (y * z), (x,)),
                  ("all-gather", "activations", a * tokens * f / (y * z), (x,)),
                  ("reduce-scatter", "activations", a * tokens * d / x, (y, z))]
    else:
        k = _GATHER_AXES[layout]
        gather, rest = (x, y, z)[:k], (x, y, z)[k:]
        big_n = math.prod(gather)
        steps += [("all-gather", "weights", w * d * f * big_n / n, gather)] * 2  # W_in and W_out
        steps += [("all-gather", "activations", a * tokens * d / big_n, rest),
                  ("reduce-scatter", "activations", a * tokens * d / big_n, rest)]
    return tuple(Collective(*step) for step in steps if math.prod(step[3]) > 1)


@dataclass(frozen=True)
class CommVolume:
    """Bytes each chip sends per feed-forward layer, split into activations and (gathered) weights."""

    activation_bytes: float
    weight_bytes: float

    @property
    def total_bytes(self) -> float:
        return self.activation_bytes + self.weight_bytes


def ffn_comm_volume(layout: str, model, tokens: float, mesh_shape, weight_dtype: str = "bf16",
                    activation_dtype: str = "bf16") -> CommVolume:
    """Per-chip communication volume of one feed-forward layer (formulas in the module docstring).

    Defined in chapter 8, *Partitioning layouts*.
    """
    steps = ffn_collectives(layout, model, tokens, mesh_shape, weight_dtype, activation_dtype)
    return CommVolume(activation_bytes=sum(c.bytes_per_chip for c in steps if c.tensor == "activations"),
                      weight_bytes=sum(c.bytes_per_chip for c in steps if c.tensor == "weights"))


def ffn_comm_time(layout: str, model, chip, tokens: float, mesh_shape, convention: str = "pope",
                  weight_dtype: str = "bf16", activation_dtype: str = "bf16") -> float:
    """Seconds of communication per feed-forward layer: the sum of its collectives' bytes / bandwidth.

    Defined in chapter 8, *Partitioning layouts*.
    """
    steps = ffn_collectives(layout, model, tokens, mesh_shape, weight_dtype, activation_dtype)
    choice("convention", convention, CONVENTIONS)
    return sum(c.seconds(chip, convention) for c in steps)


@dataclass(frozen=True)
class LayerTime:
    """Roofline time of one feed-forward layer under one layout (seconds)."""

    layout: str
    compute_s: float  # 2 matmuls x 2 T D F FLOPs / (n C)
    weight_memory_s: float  # the weights each chip multiplies with, read from HBM
    kv_memory_s: float  # decode only: this layer's KV cache, batch-sharded over the n chips
    comm_s: float

    @property
    def memory_s(self) -> float:
        return self.weight_memory_s + self.kv_memory_s

    @property
    def total_s(self) -> float:
        """max(compute, memory) + communication: no overlap of collectives with compute (an upper estimate)."""
        return max(self.compute_s, self.memory_s) + self.comm_s

    @property
    def overlapped_s(self) -> float:
        """max(compute, memory, communication): collectives fully hidden behind matmuls (sec. 3.5's ideal)."""
        return max(self.compute_s, self.memory_s, self.comm_s)


def ffn_layer_time(layout: str, model, chip, mesh_shape, tokens_per_batch: float, phase: str = "prefill", *,
                   context_len: int = 0, n_chips: int | None = None, convention: str = "pope",
                   weight_dtype: str = "bf16", activation_dtype: str = "bf16", kv_dtype: str = "bf16",
                   compute_dtype: str = "bf16") -> LayerTime:
    """Compute, HBM and communication time of one feed-forward layer (Pope et al. sec. 2 cost model + sec. 3.2).

    compute = 4 T D F / (n C); weight memory = 2 D F b_w x n_wg / n / W_hbm (n_wg = chips the weights are gathered
    over, 1 for weight-stationary); KV memory (decode with context_len > 0) = T x S x kv_bytes_per_token / L /
    (n W_hbm), where a decode step's T is the batch. Communication from `ffn_comm_time`.
    """
    m, chip = get_model(model), get_chip(chip)
    choice("phase", phase, PHASES)
    positive("tokens_per_batch", tokens_per_batch)
    positive("context_len", context_len, allow_zero=True)
    x, y, z = torus_mesh(mesh_shape, None if n_chips is None else positive_int("n_chips", n_chips))
    n = x * y * z
    gathered = math.prod((x, y, z)[:_GATHER_AXES[choice("layout", layout, LAYOUTS)]])
    weight_bytes = 2 * m.d_model * m.d_ff * bytes_per_element(weight_dtype) * gathered / n
    kv = 0.0
    if phase == "decode" and context_len:
        kv = tokens_per_batch * context_len * kv_bytes_per_token(m, kv_dtype) / m.n_layers / n
    return LayerTime(
        layout=layout,
        compute_s=2 * matmul_flops(tokens_per_batch, m.d_model, m.d_ff) / (n * chip.peak_flops(compute_dtype)),
        weight_memory_s=weight_bytes / chip.hbm_bandwidth,
        kv_memory_s=kv / chip.hbm_bandwidth,
        comm_s=ffn_comm_time(layout, m, chip, tokens_per_batch, (x, y, z), convention, weight_dtype,
                             activation_dtype),
    )


@dataclass(frozen=True)
class LayoutChoice:
    """Every layout's `LayerTime` (in LAYOUTS order) and the name of the fastest by `total_s`."""

    best: str
    times: tuple

    def time(self, layout: str) -> LayerTime:
        return self.times[LAYOUTS.index(choice("layout", layout, LAYOUTS))]


def best_layout(model, chip, mesh_shape, tokens_per_batch: float, phase: str = "prefill", **options) -> LayoutChoice:
    """The feed-forward layout with the least estimated time per layer (keyword options as in `ffn_layer_time`)."""
    times = tuple(ffn_layer_time(layout, model, chip, mesh_shape, tokens_per_batch, phase, **options)
                  for layout in LAYOUTS)
    return LayoutChoice(best=min(times, key=lambda t: t.total_s).layout, times=times)


# --- Claim P1: communication volume against tokens per batch, and where the cheapest layout switches ----------------

@dataclass(frozen=True)
class SwitchPoint:
    """Above `tokens`, `to_layout` is cheaper than `from_layout`."""

    tokens: float
    from_layout: str
    to_layout: str


def _lower_envelope(lines: dict, t_min: float, t_max: float) -> tuple:
    """Switch points of min over lines cost(t) = c + s t on [t_min, t_max] (every cost here is affine in T)."""
    best = min(lines, key=lambda k: (lines[k][0] + lines[k][1] * t_min, lines[k][1]))
    t, points = t_min, []
    while True:
        c_b, s_b = lines[best]
        crossings = [((c - c_b) / (s_b - s), s, name) for name, (c, s) in lines.items() if s < s_b]
        crossings = [cr for cr in crossings if cr[0] > t]
        if not crossings:
            return tuple(points)
        t_next, _, nxt = min(crossings)
        if t_next > t_max:
            return tuple(points)
        points.append(SwitchPoint(t_next, best, nxt))
        best, t = nxt, t_next


@dataclass(frozen=True)
class CommCurves:
    """Per-chip bytes per feed-forward layer for each layout at each token count (Pope et al. Fig. 3)."""

    tokens: tuple
    layouts: tuple
    bytes_per_chip: tuple  # one tuple per layout, aligned with `tokens`
    switch_points: tuple  # SwitchPoint(s) of the cheapest layout over [min(tokens), max(tokens)]

    def volume(self, layout: str) -> tuple:
        return self.bytes_per_chip[self.layouts.index(choice("layout", layout, self.layouts))]

    def best(self) -> tuple:
        """The cheapest layout at each token count."""
        return tuple(min(self.layouts, key=lambda name: self.volume(name)[i]) for i in range(len(self.tokens)))


def comm_volume_curves(model, mesh_shape, tokens, layouts=LAYOUTS, weight_dtype: str = "bf16",
                       activation_dtype: str = "bf16") -> CommCurves:
    """Claim P1: `ffn_comm_volume` over a range of tokens per batch, and the exact switch points between layouts.

    Defined in chapter 8, *Partitioning layouts*.
    """
    if isinstance(tokens, (str, bytes)) or not hasattr(tokens, "__iter__"):
        raise ValueError(f"tokens must list token counts, e.g. [64, 1024, 16384], got {tokens!r}")
    tokens = tuple(positive("tokens", t) for t in tokens)
    if not tokens:
        raise ValueError("tokens must list at least one token count, e.g. [64, 1024, 16384]")
    layouts = items("layouts", layouts, lambda what, name: choice(what, name, LAYOUTS))

    def volume(name, t):
        return ffn_comm_volume(name, model, t, mesh_shape, weight_dtype, activation_dtype).total_bytes

    curves = tuple(tuple(volume(name, t) for t in tokens) for name in layouts)
    lines = {name: (2 * volume(name, 1.0) - volume(name, 2.0), volume(name, 2.0) - volume(name, 1.0))
             for name in layouts}
    return CommCurves(tokens, layouts, curves, _lower_envelope(lines, min(tokens), max(tokens)))


# --- Claim P5: where 2D beats 1D, and where weight-gathered beats weight-stationary, under both conventions ---------

def ws_2d_optimal_x(n_chips: float, d_model: int, d_ff: int, convention: str = "pope") -> float:
    """The X (D-way split) minimizing 2D weight-stationary communication, treating X as continuous.

    pope: minimize D/X + F X/n               -> X = sqrt(n D / F)       (Pope et al. App. A.2.1)
    scaling-book: minimize D/X + 2 F X/n     -> X = sqrt(n D / (2 F))   (Scaling Book ch. 7 Q7: X = sqrt(n/8), F = 4D)

    Defined in chapter 8, *Partitioning layouts*.
    """
    choice("convention", convention, CONVENTIONS)
    for name, value in (("n_chips", n_chips), ("d_model", d_model), ("d_ff", d_ff)):
        positive(name, value)
    return math.sqrt(n_chips * d_model / (d_ff if convention == "pope" else 2 * d_ff))


def ws_2d_crossover_chips(d_model: int, d_ff: int, convention: str = "pope") -> float:
    """Chips above which 2D weight-stationary moves fewer seconds of activations than 1D (optimal X).

    pope: 4 b_a T sqrt(D F / n) < 2 b_a T D      <=> n > 4 F / D   (16 chips for F = 4D; Pope et al. sec. 3.2.2)
    scaling-book: 1D spans 3 axes, 4 T D / (3 W_ici,bidi) > 2 T sqrt(8 D F / n) / W_ici,bidi  <=>  n > 18 F / D
    (72 chips for F = 4D).
    The book's 2D pays more because its X-axis collectives get one axis' links, not the whole chip's. Notes: some
    versions of the book print 81 for F = 4D, but its own expression 128 x (3/4)^2 equals 72; summaries of the
    paper state the F = 4D case as sqrt(n) > F / D, which agrees with 4F / D only at F = 4D (both give 16).

    Defined in chapter 8, *Partitioning layouts*.
    """
    choice("convention", convention, CONVENTIONS)
    positive("d_model", d_model)
    positive("d_ff", d_ff)
    return (4.0 if convention == "pope" else 18.0) * d_ff / d_model


def optimal_2d_mesh(n_chips: int, model, chip="tpu-v4", convention: str = "pope") -> tuple:
    """The integer mesh (X, Y, Z), X Y Z = n_chips, with the least 2D weight-stationary communication time. On a 2D
    torus (TPU v5e, v6e) at most two of the axes exceed one chip: there is no third axis of links."""
    n_chips = at_most("n_chips", positive_int("n_chips", n_chips), MAX_CHIPS, "no slice has more chips, and the "
                      "search tries every pair of divisors")
    m, chip = get_model(model), get_chip(chip)
    choice("convention", convention, CONVENTIONS)
    factors = divisors(n_chips)
    torus_axes = chip.topology.axes if isinstance(chip.topology, Torus) else 3
    meshes = [(x, y, n_chips // (x * y)) for x, y in product(factors, factors) if n_chips % (x * y) == 0 and
              sum(a > 1 for a in (x, y, n_chips // (x * y))) <= torus_axes]

    def seconds(mesh):  # one token's 2D weight-stationary collectives: the time is linear in T, so T = 1 ranks them
        return sum(c.seconds(chip, convention) for c in _ffn_collectives("2d-ws", m, 1.0, mesh, "bf16", "bf16"))

    # Ties, up to the rounding of the same bytes over a chip's bandwidth summed in another order, go to the most even
    # Y x Z split (fewest degenerate axes), so the choice does not depend on the chip's bandwidth under "pope"; on a
    # 2D torus, to (X, YZ, 1) before (X, 1, YZ).
    times = {mesh: seconds(mesh) for mesh in meshes}
    least = min(times.values())
    tied = [mesh for mesh in meshes if times[mesh] <= least * (1 + TIE_RTOL)]
    return min(tied, key=lambda mesh: (abs(mesh[1] - mesh[2]), mesh[1] == 1 < mesh[2]))


def layout_switch_points(model, chip, mesh_shape, convention: str = "pope", layouts=LAYOUTS,
                         tokens_range=(1.0, 1e8), weight_dtype: str = "bf16",
                         activation_dtype: str = "bf16") -> tuple:
    """Token counts where the layout with the least communication *time* changes, under `convention`.

    Defined in chapter 8, *Partitioning layouts*.
    """
    layouts = items("layouts", layouts, lambda what, name: choice(what, name, LAYOUTS))
    if not isinstance(tokens_range, (tuple, list)) or len(tokens_range) != 2:
        raise ValueError(f"tokens_range must be a (start, stop) pair of token counts, got {tokens_range!r}")
    positive("tokens_range start", tokens_range[0])
    if not positive("tokens_range stop", tokens_range[1]) > tokens_range[0]:
        raise ValueError(f"tokens_range must be increasing, got {tokens_range!r}")
    choice("convention", convention, CONVENTIONS)

    def seconds(name, t):
        return ffn_comm_time(name, model, chip, t, mesh_shape, convention, weight_dtype, activation_dtype)

    lines = {name: (2 * seconds(name, 1.0) - seconds(name, 2.0), seconds(name, 2.0) - seconds(name, 1.0))
             for name in layouts}
    return _lower_envelope(lines, tokens_range[0], tokens_range[1])


def wg_optimal_gather_size(tokens: float, n_chips: int, d_ff: int) -> float:
    """n_wg = sqrt(T n / F): chips to all-gather weights over, minimizing 2 D F n_wg / n + 2 T D / n_wg (App. A.2.2).

    Defined in chapter 8, *Partitioning layouts*.
    """
    for name, value in (("tokens", tokens), ("n_chips", n_chips), ("d_ff", d_ff)):
        positive(name, value)
    return math.sqrt(tokens * n_chips / d_ff)


def wg_switch_tokens(model, gather_from: int, gather_to: int, n_chips: int, weight_dtype: str = "bf16",
                     activation_dtype: str = "bf16") -> float:
    """T above which gathering weights over N2 = `gather_to` chips moves fewer bytes than over N1 = `gather_from`,
    by the closed form M_WG(N) = 2 w D F N / n + 2 a T D / N:   T = (w / a) F N1 N2 / n   (Pope et al. App. A.2.2).

    The closed form keeps the activation term 2 a T D / N even at N = n, where no activation collective runs (a
    collective over one chip moves nothing). `comm_volume_curves` sums the collectives that really run, so its last
    switch (to N = n) sits lower, at (w / a) F N1 (n - N1) / n: 12 F instead of 16 F from XY to XYZ on 4x4x4.
    Chapter 8's exercise on the switch to wg-xyz uses it.

    Defined in chapter 8, *Partitioning layouts*.
    """
    m = get_model(model)
    gather_from, gather_to = positive_int("gather_from", gather_from), positive_int("gather_to", gather_to)
    n_chips = positive_int("n_chips", n_chips)
    if not gather_from < gather_to <= n_chips:
        raise ValueError(f"need gather_from < gather_to <= n_chips, got {gather_from}, {gather_to}, {n_chips}")
    ratio = bytes_per_element(weight_dtype) / bytes_per_element(activation_dtype)
    return ratio * m.d_ff * gather_from * gather_to / n_chips


