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
  sliced eight ways or 32 whole experts.

From them:

    achieved fraction of peak  =  2 m n k / (latency x peak FLOP/s of the chip in that format)
    kernel_ceiling(chip, dtype) = the largest achieved fraction among the stored GEMMs

    moe_layer_floor() = the median, over the one-token MoE timings, of the layer's time less its experts' bytes
                        at the data sheet's HBM rate (36 us)

The ceiling is what the best published kernel of a format reaches on a chip. The estimate never prices a matmul
faster: its rate is peak x min(mfu, ceiling) (`estimate.step_estimate`). The ceilings sit above the fitted `mfu` for
bf16 and fp8 on every chip measured, and below it for nvfp4 on Blackwell (FP4 GEMMs carry the quantization of their
inputs, and reach about half of the 4-bit peak). The bound keeps the data sheet's peak. Formats and chips without a
stored measurement (mxfp4, int8, AMD GPUs, TPUs) are not capped. The floor is what a MoE layer's chain of kernels
costs a step beyond its bytes; the estimate adds it to every MoE layer on an NVIDIA GPU.

Defined in chapter 11, *How close do real systems come?*.
"""

import csv
import functools
import statistics
from dataclasses import dataclass
from pathlib import Path

from .dtypes import bytes_per_element
from .hardware import get_chip

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
    def held_bytes(self) -> float:
        """The expert weights this GPU holds: E x 3 D F x bytes per weight / (moe_tp x moe_ep)."""
        return self.experts * 3 * self.d_model * self.d_expert * bytes_per_element(self.dtype) / (self.moe_tp
                                                                                                   * self.moe_ep)


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
    return statistics.median(row.latency_s - row.k * 3 * row.d_model * row.d_expert * bytes_per_element(row.dtype)
                             / get_chip(row.chip).hbm_bandwidth for row in moe_kernel_rows()
                             if row.tokens == 1 and row.engine.startswith("TensorRT-LLM"))
