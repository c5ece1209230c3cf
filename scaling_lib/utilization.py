"""How much of the machine a real system uses: MFU from a published latency, and the decode bound beside a measurement.

Pope et al. 2022 (sec. 2, Table 2) report model FLOPs utilization, 2 x params x tokens / (seconds x n x peak),
attention left out (claim P4: 76% for PaLM 540B's high-throughput prefill on 64 TPU v4). A decode step is instead
bound by memory: `decode_latency_gap` sets `inference.decode_step_time`'s lower bound beside the measured step time,
so the reader sees how far a real system sits above the roofline (29 ms measured against a 7.2 ms bound for PaLM
540B's low-latency decode).
"""

from dataclasses import dataclass

from ._validate import positive, positive_int
from .hardware import get_chip
from .inference import StepTime, decode_step_time


def mfu(param_count: float, tokens: float, seconds: float, chip, n_chips: int, compute_dtype: str = "bf16") -> float:
    """Model FLOPs utilization: 2 x params x tokens / (seconds x n x peak)  (Pope et al. sec. 2; attention excluded).

    Defined in chapter 8, *Partitioning layouts*.
    """
    chip = get_chip(chip)
    for name, value in (("param_count", param_count), ("tokens", tokens), ("seconds", seconds)):
        positive(name, value)
    positive_int("n_chips", n_chips)
    return 2.0 * param_count * tokens / (seconds * n_chips * chip.peak_flops(compute_dtype))


@dataclass(frozen=True)
class DecodeGap:
    """A decode step's roofline lower bound next to a measured step time."""

    bound: StepTime
    measured_s: float

    @property
    def bound_s(self) -> float:
        return self.bound.total_s

    @property
    def gap_s(self) -> float:
        return self.measured_s - self.bound_s

    @property
    def ratio(self) -> float:
        """measured / bound: how far the real system sits above the roofline."""
        return self.measured_s / self.bound_s


def decode_latency_gap(model, chip, n_chips: int, batch: int, context_len: int, measured_step_s: float,
                       weight_dtype: str = "int8", kv_dtype: str = "bf16", compute_dtype: str = "bf16", *,
                       check_capacity: bool = True) -> DecodeGap:
    """`inference.decode_step_time` (weights / (n W_hbm) + KV / (n W_hbm), or FLOPs) beside a measured step.

    The bound leaves out communication, attention FLOPs, layer norms and sampling, so it sits below any real step.
    Raises ValueError when the batch does not fit in HBM (`check_capacity=False` prices it as if it fitted).

    Defined in chapter 8, *Partitioning layouts*.
    """
    positive("measured_step_s", measured_step_s)
    bound = decode_step_time(model, chip, n_chips, batch, context_len, weight_dtype, kv_dtype, compute_dtype,
                             check_capacity=check_capacity)
    return DecodeGap(bound=bound, measured_s=measured_step_s)
