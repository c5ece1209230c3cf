"""What measured kernels reach: published timings of one engine's matmul and mixture-of-experts kernels, as data.

Two tables, each row with its source (NVIDIA's AIConfigurator, which times TensorRT-LLM's kernels one by one on each
GPU to build its estimator's database; the rows here are a subset, copied with their shapes):

- `gemm_kernel_rows()`: dense GEMMs of m x k by k x n (2 m n k FLOPs) on H100, H200, B200, GB200 (TensorRT-LLM
  1.3.0rc20) and A100 (1.0.0), in bf16, fp8 and nvfp4 where the chip computes them: every shape with m, n and k each
  4,096, 8,192 or 16,384, and the fastest of all the database's GEMMs with the three at least 4,096.
- `moe_kernel_rows()`: the whole mixture-of-experts layer (routing, the copies to the experts, both expert matmuls,
  the activation, the weighted sum) on one B200, GB200 or H200, at 1 to 16,384 tokens spread evenly over the
  experts, for three expert shapes: Qwen3-30B-A3B's (D = 2,048, experts 768 wide, 8 of 128 per token), Qwen3-235B's
  (4,096, 1,536, 8 of 128) and Mixtral 8x7B's (4,096, 14,336, 2 of 8); and SGLang 0.5.9's layer of DeepSeek-V3's
  shape (7,168, 2,048, 8 of 256, block-scaled FP8) on one B200 holding its share of an eight-GPU layer, each expert
  sliced eight ways or 32 whole experts; and SGLang 0.5.9's layer (its Triton fused-MoE kernel) on one B200, H100
  or H200 in bf16 and block-scaled FP8, at 1, 4, 16, 64 and 256 tokens, for every expert shape NVIDIA timed (ten,
  from Mixtral's to DeepSeek-V3's and Qwen3-235B's), whole or as one GPU's share split 2, 4 or 8 ways by slicing
  each expert or 8 ways by whole experts.

From them:

    achieved fraction of peak  =  2 m n k / (latency x peak FLOP/s of the chip in that format)
    kernel_ceiling(chip, dtype) = the largest achieved fraction among the stored GEMMs

    moe_layer_floor() = the median, over the one-token MoE timings, of the layer's time less its experts' bytes
                        at the data sheet's HBM rate (36 us)

    expert_matmul_fraction(chip, dtype, D, F) = 6 T k D F / ((latency - t_moe - activations at line rate) x bf16
                        peak) of the timed layers at 16,384 tokens, interpolated in ln(D F): what a layer's expert
                        FLOPs get

    moe_layer_model(engine, chip, dtype): t_floor + n x t_expert + bytes / (HBM bandwidth x f), fitted to an
                        engine's layer timings at 1 to 256 tokens (n experts run, their bytes): a chain, a cost per
                        expert, a streaming fraction

The ceiling is what the best published kernel of a format reaches on a chip. The estimate never prices a matmul
faster: its rate is peak x min(mfu, ceiling) (`estimate.step_estimate`). The ceilings sit above the fitted `mfu` for
bf16 and fp8 on every chip measured, and below it for nvfp4 on Blackwell (FP4 GEMMs carry the quantization of their
inputs, and reach about half of the 4-bit peak). The bound keeps the data sheet's peak. Formats and chips without a
stored measurement (mxfp4, int8, AMD GPUs, TPUs) are not capped. The floor is what a MoE layer's chain of kernels
costs a step beyond its bytes; the estimate adds it to every MoE layer on an NVIDIA GPU. A layer of small experts
computes slowly in any format (what it does per token and expert besides its matmuls weighs against small matmuls):
the estimate runs fine-grained experts no faster than `expert_matmul_fraction` of their size. An engine's layer model
prices that engine's MoE layers instead where a profile names it (`efficiency.Efficiency.moe_kernels`): SGLang's
streams its experts at 0.70-0.71 of the data sheet on a B200 and 0.79-0.83 on an H100 or H200, and its FP8 kernel
costs 0.13-0.28 us more per expert run.

Defined in chapter 11, *How close do real systems come?*.
"""

import csv
import functools
import math
import statistics
from dataclasses import dataclass, replace
from pathlib import Path

from .dtypes import bytes_per_element
from ._least_squares import solve
from ._validate import positive_int
from .hardware import get_chip
from .memory import moe_elementwise_elements

DATA = Path(__file__).resolve().parent / "data"


@dataclass(frozen=True)
class GemmKernelRow:
    """One timed dense GEMM: (m x k) times (k x n) in `dtype` on one `chip`, `latency_s` seconds."""

    source: str
    engine: str
    chip: str
    dtype: str
    m: int
    n: int
    k: int
    latency_s: float

    @property
    def flops(self) -> float:
        return 2.0 * self.m * self.n * self.k

    @property
    def achieved_fraction(self) -> float:
        """FLOP/s achieved over the chip's dense peak in the row's format."""
        return self.flops / self.latency_s / get_chip(self.chip).peak_flops(self.dtype)


@dataclass(frozen=True)
class MoeKernelRow:
    """One timed mixture-of-experts layer on one GPU: `tokens` tokens of width `d_model`, each routed to `k` of
    `experts` gated experts `d_expert` wide, weights in `dtype`, `latency_s` seconds; the GPU holds the whole layer
    (`moe_tp` = `moe_ep` = 1) or its share of a layer split over moe_tp x moe_ep GPUs: each expert sliced `moe_tp`
    ways, or whole experts, experts / `moe_ep` of them."""

    source: str
    engine: str
    chip: str
    dtype: str
    tokens: int
    d_model: int
    d_expert: int
    k: int
    experts: int
    latency_s: float
    moe_tp: int = 1
    moe_ep: int = 1

    @property
    def flops(self) -> float:
        """3 matrices of D x F per routed token (gate, up, down): 6 T k D F (the whole layer's)."""
        return 6.0 * self.tokens * self.k * self.d_model * self.d_expert

    @property
    def expert_bytes(self) -> float:
        """The bytes of one expert on this GPU, whole or its slice: 3 D F x bytes per weight / moe_tp."""
        return 3 * self.d_model * self.d_expert * bytes_per_element(self.dtype) / self.moe_tp

    @property
    def held_bytes(self) -> float:
        """The expert weights this GPU holds: E / moe_ep experts of `expert_bytes` each."""
        return self.experts / self.moe_ep * self.expert_bytes

    @property
    def experts_run(self) -> float:
        """Experts (or slices) this GPU runs: the tokens' T k assignments spread evenly over E experts touch
        min(E, T k), experts / moe_ep of them on each GPU holding whole experts."""
        return min(self.experts, self.tokens * self.k) / self.moe_ep


def _read(name: str) -> list:
    with open(DATA / name, newline="") as f:
        return list(csv.DictReader(f))


@functools.cache
def gemm_kernel_rows() -> tuple:
    """The stored dense GEMM timings (module docstring), in file order."""
    return tuple(GemmKernelRow(source=r["source"], engine=r["engine"], chip=r["chip"], dtype=r["dtype"], m=int(r["m"]),
                               n=int(r["n"]), k=int(r["k"]), latency_s=float(r["latency_s"]))
                 for r in _read("gemm_kernels.csv"))


@functools.cache
def moe_kernel_rows() -> tuple:
    """The stored mixture-of-experts layer timings (module docstring), in file order."""
    return tuple(MoeKernelRow(source=r["source"], engine=r["engine"], chip=r["chip"], dtype=r["dtype"],
                              tokens=int(r["tokens"]), d_model=int(r["d_model"]), d_expert=int(r["d_expert"]),
                              k=int(r["k"]), experts=int(r["experts"]), latency_s=float(r["latency_s"]),
                              moe_tp=int(r["moe_tp"]), moe_ep=int(r["moe_ep"]))
                 for r in _read("moe_kernels.csv"))


@functools.cache
def _ceilings() -> dict:
    best = {}
    for row in gemm_kernel_rows():
        key = (row.chip, row.dtype)
        best[key] = max(best.get(key, 0.0), row.achieved_fraction)
    return best


def kernel_ceiling(chip, dtype: str) -> float:
    """The largest fraction of `chip`'s dense peak in `dtype` that a stored GEMM timing reaches (module docstring);
    1.0 where none is stored (no cap). `chip`: a name or a `hardware.Chip`.

    Defined in chapter 11, *How close do real systems come?*.
    """
    chip = get_chip(chip)
    chip.peak_flops(dtype)  # a format the chip does not compute is refused, with the formats it does
    return _ceilings().get((chip.name, dtype), 1.0)



@functools.cache
def moe_layer_floor() -> float:
    """Seconds a mixture-of-experts layer costs a GPU step beyond streaming its experts: the median, over the stored
    one-token timings of TensorRT-LLM's whole layer (every chip, format and expert shape), of the layer's time less
    the k experts' bytes at the data sheet's HBM rate,

        t_moe = median(latency - k x 3 D F x bytes per weight / HBM bandwidth)    (36 us)

    The layer is a chain of small dependent kernels (routing and top-k, the copies to the experts, two grouped
    matmuls, the activation, the weighted sum), timed inside a CUDA graph; at one token each costs more than the
    bytes it moves. The estimate adds it to every MoE layer of a step on an NVIDIA GPU (`estimate.step_estimate`);
    dense layers have no such chain.

    Defined in chapter 11, *How close do real systems come?*.
    """
    return statistics.median(row.latency_s - row.k * row.expert_bytes / get_chip(row.chip).hbm_bandwidth
                             for row in moe_kernel_rows()
                             if row.tokens == 1 and row.engine.startswith("TensorRT-LLM"))


@dataclass(frozen=True)
class MoeLayerModel:
    """What one engine's mixture-of-experts layer costs a step on one GPU, measured (`moe_layer_model`):

        t_layer = t_floor + n x t_expert + bytes / (HBM bandwidth x f)

    n: the experts (or expert slices) the GPU's kernels run in the step; bytes: their weights. `floor_s` (t_floor) is
    the layer's chain of small kernels, `expert_s` (t_expert) a fixed cost per expert run (each is its own little
    matmul), `stream_fraction` (f) the fraction of the data sheet's bandwidth at which the weights stream.
    `n_rows` timings set them; `within_25` is the share of those the formula gives within 25%."""

    engine: str
    chip: str
    dtype: str
    floor_s: float
    expert_s: float
    stream_fraction: float
    n_rows: int
    within_25: float

    def layer_s(self, experts_run: float, expert_bytes: float) -> float:
        """t_floor + n x t_expert + bytes / (HBM bandwidth x f) for `experts_run` experts of `expert_bytes` bytes."""
        return self.floor_s + experts_run * self.expert_s + expert_bytes / (
            get_chip(self.chip).hbm_bandwidth * self.stream_fraction)


@functools.cache
def _expert_points(chip: str, dtype: str) -> tuple:
    """((ln(D F), fraction of bf16 peak), ...) of the stored TensorRT-LLM layers of `chip` and `dtype` at their most
    tokens, sorted by expert size."""
    rows = [r for r in moe_kernel_rows() if r.engine.startswith("TensorRT-LLM") and (r.chip, r.dtype) == (chip, dtype)
            and r.moe_tp == r.moe_ep == 1]
    if not rows:
        return ()
    most = max(r.tokens for r in rows)
    peak = get_chip(chip).peak_flops("bf16")
    return tuple(sorted((math.log(r.d_model * r.d_expert), r.flops / (_matmul_seconds(r) * peak))
                        for r in rows if r.tokens == most))


def _matmul_seconds(row: MoeKernelRow) -> float:
    """A timed layer's seconds less what the estimate prices apart: its chain (`moe_layer_floor`) and its tokens'
    activations between the matmuls (`memory.moe_elementwise_elements`, bf16) at the data sheet's HBM rate."""
    activations = row.tokens * moe_elementwise_elements(row.d_model, row.d_expert, row.k) * bytes_per_element("bf16")
    return row.latency_s - moe_layer_floor() - activations / get_chip(row.chip).hbm_bandwidth


def expert_matmul_fraction(chip, dtype: str, d_model: int, d_expert: int):
    """The fraction of `chip`'s bf16 dense peak at which NVIDIA's timings of TensorRT-LLM's whole MoE layer compute
    their expert FLOPs, for experts of `d_model` x `d_expert` weights in `dtype`; None where no such layer of that chip
    and format is stored. From the layers at their most tokens (16,384: compute-bound), less what the estimate
    prices apart (their chain, `moe_layer_floor`, and their tokens' activations between the matmuls,
    `memory.moe_elementwise_elements` in bf16, at the data sheet's HBM rate),

        fraction = 6 T k D F / ((latency - t_moe - T x 2 B x (3 k F + 2 (k + 1) D) / W_hbm) x bf16 peak FLOP/s)

    interpolated in ln(D F) between the stored expert shapes (Qwen3-30B-A3B's 1.6M weights per matrix, Qwen3-235B's
    6.3M, Mixtral's 58.7M) and held at the nearest outside them. The layer's other work (routing, quantizing
    activations, copies slower than line rate) stays inside, so this is what a layer's FLOPs get, not what its matmul
    kernels reach: 0.34-0.50 of the bf16 peak for Qwen3-30B-A3B's experts on a B200 or GB200 (0.60-0.75 on an H200),
    in any format. The estimate runs the routed experts of a model with fine-grained experts at no more than it
    (`estimate.Deployment.narrow_expert_share`).

    Defined in chapter 11, *How close do real systems come?*.
    """
    chip = get_chip(chip)
    chip.peak_flops(dtype)  # a format the chip does not compute is refused, with the formats it does
    positive_int("d_model", d_model)
    positive_int("d_expert", d_expert)
    points = _expert_points(chip.name, dtype)
    if not points:
        return None
    x = math.log(d_model * d_expert)
    if x <= points[0][0]:
        return points[0][1]
    for (x0, y0), (x1, y1) in zip(points, points[1:]):
        if x <= x1:
            return y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    return points[-1][1]


@functools.cache
def moe_engines() -> tuple:
    """The engines whose MoE layers are stored (the engine column's name, its release left off)."""
    return tuple(sorted({row.engine.split(" ")[0] for row in moe_kernel_rows()}))


DECODE_TOKENS = 256  # the most tokens a decode step carries among the timings `moe_layer_model` fits


def _weighted_fit(rows: list, columns) -> list:
    """Coefficients c minimising sum(((columns(row) . c) / latency - 1)^2): least squares in relative error."""
    design = [[x / row.latency_s for x in columns(row)] for row in rows]
    width = len(design[0])
    normal = [[sum(d[i] * d[j] for d in design) for j in range(width)] for i in range(width)]
    return solve(normal, [sum(d[i] for d in design) for i in range(width)])


def fit_moe_layer(rows) -> MoeLayerModel:
    """The `MoeLayerModel` of timed MoE layers `rows` (`MoeKernelRow`s of one engine, chip and format), fitted by
    least squares in relative error: t_floor, t_expert and f of

        latency = t_floor + n x t_expert + bytes / (HBM bandwidth x f)

    with n = min(E, T k) / moe_ep experts run (T k assignments spread evenly over E experts, whole experts shared
    over moe_ep GPUs) and bytes = n x 3 D F / moe_tp x bytes per weight. t_expert is dropped (0) where the fit makes
    it negative. A ValueError where rows mix engines, chips or formats, or the fit is unphysical (t_floor <= 0 or
    f outside (0, 1])."""
    try:
        rows = list(rows)
    except TypeError:
        rows = None
    if not rows or not all(isinstance(r, MoeKernelRow) for r in rows):
        raise ValueError(f"fit_moe_layer: rows must be a non-empty list of kernels.MoeKernelRow (moe_kernel_rows()), "
                         f"got {rows!r:.80}")
    kinds = {(r.engine.split(" ")[0], r.chip, r.dtype) for r in rows}
    if len(kinds) != 1:
        raise ValueError(f"fit_moe_layer: rows must be one engine's layer on one chip in one format; got "
                         f"{sorted(kinds)}")
    (engine, chip, dtype), = kinds
    bandwidth = get_chip(chip).hbm_bandwidth
    floor, per_expert, per_byte = _weighted_fit(rows, lambda r: (1.0, r.experts_run,
                                                                 r.experts_run * r.expert_bytes / bandwidth))
    if per_expert < 0:
        (floor, per_byte), per_expert = _weighted_fit(rows, lambda r: (1.0, r.experts_run * r.expert_bytes
                                                                       / bandwidth)), 0.0
    if floor <= 0 or per_byte < 1:
        raise ValueError(f"{engine}'s MoE timings on {chip} in {dtype} fit an unphysical layer (floor {floor:.3g} s, "
                         f"bandwidth fraction {1 / per_byte:.3g}); check the rows")
    model = MoeLayerModel(engine, chip, dtype, floor, per_expert, 1 / per_byte, len(rows), 0.0)
    within = sum(abs(model.layer_s(r.experts_run, r.experts_run * r.expert_bytes) / r.latency_s - 1) <= 0.25
                 for r in rows)
    return replace(model, within_25=within / len(rows))


def moe_layer_model(engine: str, chip, dtype: str):
    """`fit_moe_layer` of the stored timings of `engine`'s MoE layer (a name in `moe_engines`, e.g. "SGLang") on
    `chip` with weights in `dtype`, at 1 to `DECODE_TOKENS` tokens, every expert shape and split stored; None where
    none of that chip and format is stored. An unknown engine, chip or format, or one the chip does not compute, is a
    ValueError.

    A fit, not a lookup: three numbers with a physical meaning. The estimate prices an engine's MoE layers with them
    where its profile names the engine (`efficiency.Efficiency.moe_kernels`).

    Defined in chapter 11, *How close do real systems come?*.
    """
    if not isinstance(engine, str) or engine not in moe_engines():
        raise ValueError(f"no MoE layer timings of engine {engine!r} are stored; the engines are "
                         f"{', '.join(moe_engines())}")
    chip = get_chip(chip)
    chip.peak_flops(dtype)  # a format the chip does not compute is refused, with the formats it does
    return _moe_layer_model(engine, chip.name, dtype)


@functools.cache
def _moe_layer_model(engine: str, chip: str, dtype: str):
    rows = [r for r in moe_kernel_rows() if r.engine.split(" ")[0] == engine and r.chip == chip
            and r.dtype == dtype and r.tokens <= DECODE_TOKENS]
    return fit_moe_layer(rows) if rows else None
