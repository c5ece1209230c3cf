"""Choosing a layout by the application's metric, and Pope et al.'s latency-cost frontier (Pope et al. 2022).

`layouts` prices one feed-forward layer's communication. This module prices a whole prefill or decode step of a model
on n chips under a feed-forward layout and an attention sharding, with every term Pope et al.'s cost model has
(sec. 2 and 3), plus the hop latency of each collective:

    compute     2 P T / (n C)                           P parameters, T tokens in the step (B S prompt, or B)
    weights     P b_w g / (n W_hbm)                     g = chips the weights are gathered over (1 if stationary)
    KV cache    B_chip S 2 L K_chip H b_kv / W_hbm      decode only: "heads" keeps every sequence on every chip
                                                        (one multiquery KV head is replicated), "batch" B / n each
    network     L x sum over a layer's collectives of max(bytes / (links W_link), hops x t_hop)

    step  = max(compute, weights + KV) + network                (no overlap: `total_s`)
          = max(compute, weights + KV, network)                 (looped collective einsums hide it: `overlapped_s`)

A layer's collectives: the activation all-gather / reduce-scatter of its feed-forward layout (`layouts`), which
the parallel attention/feed-forward block shares between attention and the feed-forward layer (a serial block pays
the D-sized ones twice); the all-gather of the whole layer's weights for weight-gathered layouts; two all-to-alls
of the queries and outputs when attention is sharded over the batch. Every layer is alike, with P / L parameters
(the embedding spread over them); attention's own FLOPs and the layer norms are left out, as in the paper's MFU.

MFU = 2 P T / (step x n x C_bf16) and cost = n x step / T chip-seconds per token. For a decode step the latency a
user sees is the step; for prefill it is the whole pass. Sweeping chips and batch and keeping, at each point, the
fastest layout that fits in HBM gives the frontier of latency against MFU (Pope et al. Fig. 1); `choose` picks the
point an application wants: the lowest latency, or the lowest cost under a latency target, at a given context.

Used in chapter 12, *Choosing a layout by the metric*.
"""

import math
from dataclasses import dataclass
from functools import lru_cache
from itertools import product

from ._validate import axes, choice, divisors, flag, instances, positive, positive_int, real
from .attention_sharding import ATTENTION_SHARDINGS
from .collectives import Collective, collective_time, slice_hops
from .dtypes import bytes_per_element
from .hardware import Torus, get_chip
from .hops import cube_torus
from .layouts import LAYOUTS, ffn_collectives, optimal_2d_mesh
from .measurements import PopeRow
from .memory import kv_bytes_per_token
from .models import get_model, param_count
from .utilization import mfu

PHASES = ("prefill", "decode")
METRICS = ("latency", "cost")
CHIP_COUNTS = (8, 16, 32, 64, 128, 256)
BATCHES = tuple(2**k for k in range(11))  # 1 .. 1,024 sequences
_GATHER_AXES = {"1d-ws": 0, "2d-ws": 0, "wg-x": 1, "wg-xy": 2, "wg-xyz": 3}


@lru_cache(maxsize=None)
def _mesh_for(layout: str, model, chip_name: str, n_chips: int) -> tuple:
    # 2D weight-stationary picks its own X (sqrt(n D / F), Pope et al. App. A.2.1); X = 1 is 1D over all chips. The
    # other layouts take the slice: the most cube-like on a 3D torus, the most square X <= Y (Z = 1) on a 2D one.
    if layout == "2d-ws":
        return optimal_2d_mesh(n_chips, model, chip_name)
    if get_chip(chip_name).topology.axes == 3:
        return cube_torus(n_chips)
    x = max(d for d in divisors(n_chips) if d * d <= n_chips)
    return (x, n_chips // x, 1)


class NothingFits(ValueError):
    """No layout holds the model at this batch and chip count (`choose_layout`): a fact about the configuration,
    which `sweep` skips, as opposed to a bad argument, which it does not."""


def _mesh(mesh_shape, layout: str, model, chip, n_chips: int) -> tuple:
    """The mesh given (1 to 3 positive axes whose product is n_chips), or the layout's default for n chips (a GPU
    switch: one group of n, as `estimate.Deployment` lays it out)."""
    if mesh_shape is None:
        if not isinstance(chip.topology, Torus):
            return (n_chips,)
        return _mesh_for(layout, model, chip.name, n_chips)
    mesh = axes("mesh_shape", mesh_shape, max_axes=3)
    if isinstance(chip.topology, Torus):
        chip.topology.check_mesh(mesh, chip.name)
    if math.prod(mesh) != n_chips:
        raise ValueError(f"mesh_shape {mesh} holds {math.prod(mesh)} chips, not n_chips={n_chips}; pick axes whose "
                         f"product is {n_chips}, or mesh_shape=None for the layout's default")
    return mesh


def _check_step(m, c, n_chips, phase, batch, ffn_layout, attention_sharding, context_len, dtypes,
                mesh_shape, parallel_block) -> tuple:
    """Validate the arguments `layer_collectives` and `layout_cost` share, for the model and chip their public
    entrance resolved (a `Transformer`, a `Chip`); (n, batch, context, mesh)."""
    n, b = positive_int("n_chips", n_chips), positive_int("batch", batch)
    s = positive_int("context_len", context_len)
    choice("phase", phase, PHASES)
    choice("ffn_layout", ffn_layout, LAYOUTS)
    choice("attention_sharding", attention_sharding, ATTENTION_SHARDINGS)
    for name, dtype in dtypes.items():
        if not isinstance(dtype, str):
            raise ValueError(f"{name} must be a dtype name such as 'bf16', got {dtype!r}")
        bytes_per_element(dtype)
    flag("parallel_block", parallel_block)
    if ffn_layout != "1d-ws" and not isinstance(c.topology, Torus):  # as `estimate.Deployment` decides
        raise ValueError(f"ffn_layout={ffn_layout!r} is one of Pope et al.'s torus layouts and {c.name} is not a TPU "
                         f"torus ({c.interconnect}): use ffn_layout='1d-ws' (Megatron tensor parallelism)")
    return n, b, s, _mesh(mesh_shape, ffn_layout, m, c, n)


def padded_heads(n_heads: int, n_chips: int) -> int:
    """The query heads priced when attention is split by heads over n chips: n_heads when n divides them, else the
    next multiple of n, padded no further than the next power of two of n_heads (Pope et al. padded PaLM 540B's 48
    heads to 64, so that the power-of-two slices up to 64 chips split them); 0 when that cap is too few for n chips
    (heads cannot be split over them without padding further than the paper did: 48 heads over 256 chips would need
    256, a model with 43% more weights than PaLM 540B)."""
    heads, n = positive_int("n_heads", n_heads), positive_int("n_chips", n_chips)
    padded = math.ceil(heads / n) * n
    return padded if padded <= 1 << (heads - 1).bit_length() else 0


def _heads_priced(model, n_chips: int, attention_sharding: str, pad_heads) -> object:
    """The model whose heads are priced: `model`, or with its query heads padded up to a multiple of n when
    attention is split by heads over n chips that do not divide them (`pad_heads=True`, at most to `padded_heads`'
    cap); else a ValueError."""
    pad_heads = flag("pad_heads", pad_heads)
    if attention_sharding != "heads" or model.n_heads % n_chips == 0:
        return model
    divisors = [d for d in range(1, model.n_heads + 1) if model.n_heads % d == 0]
    padded = padded_heads(model.n_heads, n_chips)
    if not padded:
        cap, needed = 1 << (model.n_heads - 1).bit_length(), math.ceil(model.n_heads / n_chips) * n_chips
        raise ValueError(f"attention_sharding='heads' cannot split the n_heads={model.n_heads} query heads of "
                         f"{model.name} n_chips={n_chips} ways: that pads them to {needed}, past {cap}, the next "
                         f"power of two, as far as Pope et al. padded (PaLM 540B's 48 heads to 64); use "
                         f"attention_sharding='batch', or a chip count that {cap} padded heads split over (at most "
                         f"{cap})")
    if not pad_heads:
        raise ValueError(f"attention_sharding='heads' splits the n_heads={model.n_heads} query heads of {model.name} "
                         f"n_chips={n_chips} ways, and {n_chips} does not divide {model.n_heads}: use "
                         f"attention_sharding='batch', a chip count among {divisors}, or pad_heads=True to pad the "
                         f"heads to {padded} (as Pope et al. padded PaLM 540B's 48 heads to 64 on 64 chips: the "
                         "padded heads' weights are stored, read and multiplied, and MFU counts only the real ones)")
    return model.with_(n_heads=padded)


def _latency_s(collective: Collective, chip) -> float:
    """Latency of one collective: on a torus its hops x t_hop by the book's one hop rule (`collectives.slice_hops`,
    as chapter 7 counts them: floor(k / 2) a pass on each axis of k chips it spans that wraps, k - 1 on one that does
    not, axes one after another); on a GPU switch NCCL's latency for the group. A layout's mesh is logical (the sweep
    does not say how its axes lie on the physical slice), so each axis of a group wraps as an axis of its size does
    in the chip's slices (`hardware.Torus.axis_wraps`: on TPU v4 an axis of 4 or 8 chips wraps, one of 2 does not)."""
    if not isinstance(chip.network, Torus):
        return sum(collective_time(collective.op, collective.bytes_per_chip, chip, k).latency_s
                   for k in collective.group if k > 1)
    return slice_hops(collective.op, chip, collective.group, whole_slice=False) * chip.network.hop_latency


@dataclass(frozen=True)
class LayoutCost:
    """One configuration priced by the cost model: what it is, and its terms for the whole model (seconds)."""

    model: str
    phase: str
    n_chips: int
    batch: int
    ffn_layout: str
    attention_sharding: str
    weight_dtype: str
    context_len: int  # prefill: prompt length; decode: tokens already cached
    mesh_shape: tuple
    tokens: int  # tokens the step processes: B x prompt (prefill), B (decode)
    compute_s: float
    weight_s: float
    kv_s: float
    network_s: float  # sum over collectives of max(bandwidth, latency)
    network_latency_s: float  # the part of network_s spent in latency-bound collectives
    bytes_per_chip: float  # HBM needed per chip: weights (+ one gathered layer) and KV cache
    hbm_capacity: float
    model_flops: float  # 2 P T
    peak_flops: float  # n x C at bf16: the denominator of MFU
    overlap: bool = False
    priced_params: int = 0  # P of the model priced: more than the model's own when its heads are padded

    @property
    def memory_s(self) -> float:
        return self.weight_s + self.kv_s

    @property
    def total_s(self) -> float:
        """The step: max(compute, memory) + network, or max of all three with overlapped collectives."""
        if self.overlap:
            return max(self.compute_s, self.memory_s, self.network_s)
        return max(self.compute_s, self.memory_s) + self.network_s

    @property
    def fits(self) -> bool:
        return self.bytes_per_chip <= self.hbm_capacity

    @property
    def mfu(self) -> float:
        """2 P T / (step x n x C): model FLOPs over what the chips could have done in that time."""
        return self.model_flops / (self.total_s * self.peak_flops)

    @property
    def cost_chip_s_per_token(self) -> float:
        """n x step / T: chip-seconds per token (per generated token in decode), proportional to 1 / MFU."""
        return self.n_chips * self.total_s / self.tokens

    @property
    def bound(self) -> str:
        """Which term is largest: 'compute', 'memory' or 'network'."""
        terms = {"compute": self.compute_s, "memory": self.memory_s, "network": self.network_s}
        return max(terms, key=terms.get)


def layer_collectives(model, n_chips: int, phase: str, batch: int, ffn_layout: str, attention_sharding: str, *,
                      context_len: int = 2048, weight_dtype: str = "bf16", activation_dtype: str = "bf16",
                      mesh_shape=None, parallel_block: bool = True, chip="tpu-v4", pad_heads: bool = False) -> tuple:
    """The collectives of one transformer layer (module docstring): feed-forward activations (`layouts`), a serial
    block's second D-sized gather and scatter, the whole layer's weight gather, attention's two all-to-alls.
    Raises ValueError for a Pope et al. layout on a chip that is not a torus, and for heads that do not split
    n ways under attention_sharding='heads' (unless `pad_heads`, as in `layout_cost`).

    Defined in chapter 11, *How close do real systems come?*.
    """
    m = get_model(model)
    n_chips, batch, context_len, mesh = _check_step(
        m, get_chip(chip), n_chips, phase, batch, ffn_layout, attention_sharding, context_len,
        {"weight_dtype": weight_dtype, "activation_dtype": activation_dtype}, mesh_shape, parallel_block)
    return _layer_collectives(_heads_priced(m, n_chips, attention_sharding, pad_heads), n_chips, phase, batch,
                              ffn_layout, attention_sharding, context_len, weight_dtype, activation_dtype, mesh,
                              parallel_block)


def _layer_collectives(m, n_chips, phase, batch, ffn_layout, attention_sharding, context_len, weight_dtype,
                       activation_dtype, mesh, parallel_block) -> tuple:
    """`layer_collectives` for a `Transformer` (heads as priced) and arguments already checked."""
    tokens = batch * (context_len if phase == "prefill" else 1)
    ffn = ffn_collectives(ffn_layout, m, tokens, mesh, weight_dtype, activation_dtype)
    activations = [c for c in ffn if c.tensor == "activations"]
    if not parallel_block and activations:  # attention needs its own layer-input gather and output scatter
        activations += [activations[0], activations[-1]]
    steps = list(activations)
    gathered = math.prod(mesh[:_GATHER_AXES[ffn_layout]])
    if gathered > 1:
        layer_weights = param_count(m) / m.n_layers * bytes_per_element(weight_dtype)
        steps.append(Collective("all-gather", "weights", layer_weights * gathered / n_chips,
                                mesh[:_GATHER_AXES[ffn_layout]]))
    if attention_sharding == "batch" and n_chips > 1:
        block = bytes_per_element(activation_dtype) * tokens * m.n_heads * m.head_dim / n_chips
        steps += [Collective("all-to-all", "activations", block, mesh)] * 2
    return tuple(steps)


def layout_cost(model, chip, n_chips: int, phase: str, batch: int, ffn_layout: str, attention_sharding: str, *,
                context_len: int = 2048, weight_dtype: str = "bf16", kv_dtype: str = "bf16",
                activation_dtype: str = "bf16", mesh_shape=None, parallel_block: bool = True,
                overlap: bool = False, pad_heads: bool = False) -> LayoutCost:
    """Price one prefill pass or decode step (module docstring). Raises ValueError for a sharding that cannot
    split the batch: "batch" needs B divisible by n (each chip holds whole sequences); for "heads" over chips that
    do not divide the query heads, unless `pad_heads=True` pads them to the next multiple of n, no further than the
    next power of two of the heads (`padded_heads`; Pope et al. padded PaLM 540B's 48 heads to 64): the padded heads'
    weights count in the compute and weight terms and in HBM, not in the model FLOPs of MFU; and for Pope et al.'s layouts on a chip that is not a torus (a GPU's NVLink switch
    runs "1d-ws", as `estimate.Deployment` decides).

    Defined in chapter 11, *How close do real systems come?*.
    """
    return _layout_cost(get_model(model), get_chip(chip), n_chips, phase, batch, ffn_layout, attention_sharding,
                        context_len=context_len, weight_dtype=weight_dtype, kv_dtype=kv_dtype,
                        activation_dtype=activation_dtype, mesh_shape=mesh_shape, parallel_block=parallel_block,
                        overlap=overlap, pad_heads=pad_heads)


def _layout_cost(m, c, n_chips: int, phase: str, batch: int, ffn_layout: str, attention_sharding: str, *,
                 context_len: int = 2048, weight_dtype: str = "bf16", kv_dtype: str = "bf16",
                 activation_dtype: str = "bf16", mesh_shape=None, parallel_block: bool = True,
                 overlap: bool = False, pad_heads: bool = False) -> LayoutCost:
    """`layout_cost` for a `Transformer` and a `Chip` (the public entrance resolved them); the rest checked here."""
    n, b, context_len, mesh = _check_step(
        m, c, n_chips, phase, batch, ffn_layout, attention_sharding, context_len,
        {"weight_dtype": weight_dtype, "kv_dtype": kv_dtype, "activation_dtype": activation_dtype}, mesh_shape,
        parallel_block)
    overlap = flag("overlap", overlap)
    if attention_sharding == "batch" and b % n:
        raise ValueError(f"attention sharded over the batch needs batch={b} divisible by n_chips={n}; "
                         "use a multiple of the chip count or attention_sharding='heads'")
    priced = _heads_priced(m, n, attention_sharding, pad_heads)
    steps = _layer_collectives(priced, n, phase, b, ffn_layout, attention_sharding, context_len, weight_dtype,
                               activation_dtype, mesh, parallel_block)
    tokens = b * (context_len if phase == "prefill" else 1)
    params = param_count(priced)
    gathered = math.prod(mesh[:_GATHER_AXES[ffn_layout]])
    weight_bytes = params * bytes_per_element(weight_dtype) / n
    kv_heads = math.ceil(m.n_kv_heads / n) if attention_sharding == "heads" else m.n_kv_heads
    sequences = b if attention_sharding == "heads" else b // n
    kv_bytes = sequences * context_len * kv_bytes_per_token(m, kv_dtype) * kv_heads / m.n_kv_heads
    per_collective = [(s.seconds(c, "pope"), _latency_s(s, c)) for s in steps]
    latency_bound = sum(lat for bw, lat in per_collective if lat > bw)
    return LayoutCost(
        model=m.name, phase=phase, n_chips=n, batch=b, ffn_layout=ffn_layout, attention_sharding=attention_sharding,
        weight_dtype=weight_dtype, context_len=context_len, mesh_shape=mesh, tokens=tokens,
        compute_s=2.0 * params * tokens / (n * c.peak_flops("bf16")),
        weight_s=weight_bytes * gathered / c.hbm_bandwidth,
        kv_s=(kv_bytes if phase == "decode" else 0.0) / c.hbm_bandwidth,
        network_s=m.n_layers * sum(max(bw, lat) for bw, lat in per_collective),
        network_latency_s=m.n_layers * latency_bound,
        bytes_per_chip=weight_bytes * (1 + gathered / m.n_layers) + kv_bytes,
        hbm_capacity=c.hbm_capacity, model_flops=2.0 * param_count(m) * tokens, peak_flops=n * c.peak_flops("bf16"),
        overlap=overlap, priced_params=params)


@dataclass(frozen=True)
class LayoutDecision:
    """Every layout and attention sharding that fits, priced, and the fastest; `equivalent` lists those within
    `tie` of it (the model cannot tell them apart)."""

    best: LayoutCost
    costs: tuple
    tie: float

    @property
    def equivalent(self) -> tuple:
        return tuple(c for c in self.costs if c.total_s <= self.best.total_s * (1 + self.tie))

    def accepts(self, ffn_layout: str, attention_sharding: str) -> bool:
        """Whether this layout and sharding is among the equivalent fastest."""
        return any(c.ffn_layout == ffn_layout and c.attention_sharding == attention_sharding for c in self.equivalent)

    def margin(self, ffn_layout: str, attention_sharding: str) -> float:
        """How much slower than the best that choice is (0 for the best; inf when it does not fit)."""
        for c in self.costs:
            if c.ffn_layout == ffn_layout and c.attention_sharding == attention_sharding:
                return c.total_s / self.best.total_s - 1.0
        return math.inf


def choose_layout(model, chip, n_chips: int, phase: str, batch: int, *, tie: float = 0.01,
                  **options) -> LayoutDecision:
    """The fastest feed-forward layout and attention sharding for one configuration, among those that fit in HBM,
    can split the batch and the heads (or pad them: `pad_heads=True`) and that the chip's network runs (Pope et
    al.'s layouts on a TPU torus, "1d-ws" on a GPU switch), `layout_cost` options passing through. `NothingFits`
    (a ValueError) when nothing fits.

    Defined in chapter 12, *Choosing a layout by the metric*.
    """
    return _choose_layout(get_model(model), get_chip(chip), n_chips, phase, batch, tie=tie, **options)


def _choose_layout(m, c, n_chips: int, phase: str, batch: int, *, tie: float = 0.01, **options) -> LayoutDecision:
    """`choose_layout` for a `Transformer` and a `Chip` (the public entrance resolved them)."""
    if not 0 <= real("tie", tie) < 1:
        raise ValueError(f"tie must be a fraction in [0, 1), got {tie!r}")
    n_chips, batch = positive_int("n_chips", n_chips), positive_int("batch", batch)
    choice("phase", phase, PHASES)
    costs = []
    layouts = LAYOUTS if isinstance(c.topology, Torus) else ("1d-ws",)
    pad = flag("pad_heads", options.get("pad_heads", False))
    for layout, sharding in product(layouts, ATTENTION_SHARDINGS):
        if sharding == "batch" and batch % n_chips:
            continue
        if sharding == "heads" and m.n_heads % n_chips and not (pad and padded_heads(m.n_heads, n_chips)):
            continue
        cost = _layout_cost(m, c, n_chips, phase, batch, layout, sharding, **options)
        if cost.fits:
            costs.append(cost)
    if not costs:
        unsplit = (f"; the {m.n_heads} heads do not split {n_chips} ways and batch {batch} does not either: "
                   "pad_heads=True pads them") if m.n_heads % n_chips and not pad else ""
        raise NothingFits(f"nothing fits: {m.name} at batch {batch} on {n_chips} x {c.name} in any layout; add "
                          f"chips, lower the batch or context, or quantize the weights{unsplit}")
    return LayoutDecision(best=min(costs, key=lambda c: c.total_s), costs=tuple(costs), tie=tie)


def sweep(model, chip, phase: str, *, chip_counts=CHIP_COUNTS, batches=BATCHES, **options) -> tuple:
    """The best `LayoutCost` at every (chip count, batch) that fits: the points behind the frontier.

    Defined in chapter 12, *Choosing a layout by the metric*.
    """
    return _sweep(get_model(model), get_chip(chip), phase, chip_counts=chip_counts, batches=batches, **options)


def _sweep(m, c, phase: str, *, chip_counts=CHIP_COUNTS, batches=BATCHES, **options) -> tuple:
    """`sweep` for a `Transformer` and a `Chip` (the public entrance resolved them)."""
    choice("phase", phase, PHASES)
    chip_counts, batches = _counts("chip_counts", chip_counts), _counts("batches", batches)
    points = []
    for n, b in product(chip_counts, batches):
        try:
            points.append(_choose_layout(m, c, n, phase, b, **options).best)
        except NothingFits:
            continue  # does not fit on n chips; a bad argument still raises
    return tuple(points)


def _counts(name: str, values) -> tuple:
    """A non-empty list of positive integers (chip counts, batches), as a tuple."""
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise ValueError(f"{name} must be a list of positive integers, e.g. (8, 16, 32), got {values!r}")
    values = tuple(positive_int(f"{name} entry", v) for v in values)
    if not values:
        raise ValueError(f"{name} must list at least one value, got an empty list")
    return values


def pareto_frontier(points) -> tuple:
    """The points no other point beats on both latency (lower) and MFU (higher), sorted by latency.

    Defined in chapter 12, *Choosing a layout by the metric*.
    """
    points = instances("points", points, LayoutCost, "LayoutCost results (from sweep or layout_cost)")
    ordered = sorted(points, key=lambda p: (p.total_s, -p.mfu))
    frontier, best_mfu = [], -1.0
    for point in ordered:
        if point.mfu > best_mfu:
            frontier.append(point)
            best_mfu = point.mfu
    return tuple(frontier)


def choose(model, chip, phase: str, metric: str = "cost", *, latency_target_s: float | None = None,
           weight_dtypes=("bf16", "int8"), chip_counts=CHIP_COUNTS, batches=BATCHES, **options) -> LayoutCost:
    """The configuration an application wants (Pope et al. sec. 1 and 4): "latency" = the lowest latency;
    "cost" = the lowest chip-seconds per token whose latency (the step, or the prefill pass) meets
    `latency_target_s` (None: any). Options (context_len, overlap, ...) pass to `layout_cost`.

    Defined in chapter 12, *Choosing a layout by the metric*.
    """
    m, c = get_model(model), get_chip(chip)
    choice("metric", metric, METRICS)
    if latency_target_s is not None:
        positive("latency_target_s", latency_target_s)
    if isinstance(weight_dtypes, str) or not hasattr(weight_dtypes, "__iter__") or not tuple(weight_dtypes):
        raise ValueError(f"weight_dtypes must be a non-empty list of dtype names, e.g. ('bf16', 'int8'), got "
                         f"{weight_dtypes!r}")
    for dtype in weight_dtypes:
        if not isinstance(dtype, str):
            raise ValueError(f"weight_dtypes must hold dtype names such as 'bf16', got {dtype!r}")
        try:
            bytes_per_element(dtype)
        except ValueError as err:
            raise ValueError(f"weight_dtypes: {err}") from None
    points = [p for dtype in weight_dtypes
              for p in _sweep(m, c, phase, chip_counts=chip_counts, batches=batches, weight_dtype=dtype, **options)]
    if latency_target_s is not None:
        points = [p for p in points if p.total_s <= latency_target_s]
    if not points:
        raise ValueError(f"no configuration of {m.name} meets latency_target_s={latency_target_s}; "
                         "relax the target or allow more chips")
    if metric == "latency":
        return min(points, key=lambda p: (p.total_s, p.cost_chip_s_per_token))
    return min(points, key=lambda p: (p.cost_chip_s_per_token, p.total_s))


def longest_context(model, chip, n_chips: int, batch: int, attention_sharding: str = "batch",
                    weight_dtype: str = "bf16", kv_dtype: str = "bf16") -> int:
    """The longest context whose KV cache fits next to the weights in each chip's HBM (0 if the weights do not):
    S = (HBM - P b_w / n) / (sequences per chip x KV bytes per token x heads per chip / K).

    Defined in chapter 12, *Choosing a layout by the metric*.
    """
    m, c = get_model(model), get_chip(chip)
    n, b = positive_int("n_chips", n_chips), positive_int("batch", batch)
    choice("attention_sharding", attention_sharding, ATTENTION_SHARDINGS)
    kv_per_token = kv_bytes_per_token(m, kv_dtype)
    free = c.hbm_capacity - param_count(m) * bytes_per_element(weight_dtype) / n
    if free <= 0:
        return 0
    heads = math.ceil(m.n_kv_heads / n) if attention_sharding == "heads" else m.n_kv_heads
    sequences = b if attention_sharding == "heads" else math.ceil(b / n)
    return int(free // (sequences * kv_per_token * heads / m.n_kv_heads))


# --- The measured rows (measurements.pope_rows) beside the model --------------------------------------------------

def _row(row) -> PopeRow:
    if not isinstance(row, PopeRow):
        raise ValueError(f"row must be a measurements.PopeRow (from measurements.pope_rows()), got {row!r}")
    return row


def measured_step_s(row) -> float:
    """The latency a user sees per step of a `measurements.PopeRow`: the prefill pass, or one of its decode steps.

    Defined in chapter 12, *Choosing a layout by the metric*.
    """
    row = _row(row)
    return row.latency_s / row.decode_steps if row.phase == "decode" else row.latency_s


def measured_mfu(row) -> float:
    """A `measurements.PopeRow`'s MFU recomputed from its published latency: `utilization.mfu` (2 P tokens / (latency x
    chips x C_bf16)).

    Defined in chapter 12, *Choosing a layout by the metric*.
    """
    row = _row(row)
    return mfu(param_count(get_model(row.model)), row.tokens, row.latency_s, row.chip, row.chips)


def choose_for(row, **options) -> LayoutDecision:
    """`choose_layout` for the configuration of a measured row (its model, chips, phase, batch, weights, context).
    Pope et al. padded the query heads to a multiple of the chips (PaLM 540B: 48 to 64), so heads are padded
    here too unless `pad_heads=False` is passed.

    Defined in chapter 12, *Choosing a layout by the metric*.
    """
    row = _row(row)
    options.setdefault("pad_heads", True)
    return _choose_layout(get_model(row.model), get_chip(row.chip), row.chips, row.phase, row.batch,
                          weight_dtype=row.weight_dtype, context_len=row.context_len, **options)
