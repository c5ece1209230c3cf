"""How much of the machine a real system uses: MFU from a published latency, MBU for a memory-bound step, and the
decode bound beside a measurement.

Pope et al. 2022 (sec. 2, Table 2) report model FLOPs utilization, 2 x params x tokens / (seconds x n x peak),
attention left out (claim P4: 76% for PaLM 540B's high-throughput prefill on 64 TPU v4). A decode step is instead
bound by memory, and its yardstick is model bandwidth utilization (MBU): the bytes the step must read (the weights
once, every sequence's KV cache) over what the chips' HBM could stream in the step's time, bytes / (seconds x n x
W_hbm); a step at its memory bound has MBU 1. `decode_latency_gap` sets `inference.decode_step_time`'s lower bound
beside the measured step time, so the reader sees how far a real system sits above the roofline (29 ms measured
against a 7.2 ms bound for PaLM 540B's low-latency decode) and at what MBU it ran.
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


def mbu(bytes_per_step: float, seconds: float, chip, n_chips: int) -> float:
    """Model bandwidth utilization: bytes a step must read from HBM / (seconds x n x W_hbm), the bytes being the
    weights once plus every sequence's KV cache (P_bytes + B KV_seq). Decode's counterpart of MFU: a step at its
    memory bound has MBU 1, whatever its (small) MFU."""
    chip = get_chip(chip)
    positive("bytes_per_step", bytes_per_step)
    positive("seconds", seconds)
    positive_int("n_chips", n_chips)
    return bytes_per_step / (seconds * n_chips * chip.hbm_bandwidth)


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

    @property
    def mbu(self) -> float:
        """The measured step's model bandwidth utilization (`mbu`): the bound's weight and KV reads at the full HBM
        bandwidth, (P_bytes + B KV_seq) / (n W_hbm), over the measured step time."""
        return (self.bound.weight_s + self.bound.kv_s) / self.measured_s


def decode_latency_gap(model, chip, n_chips: int, batch: int, context_len: int, measured_step_s: float,
                       weight_dtype: str = "int8", kv_dtype: str = "bf16", compute_dtype: str = "bf16", *,
                       check_capacity: bool = True) -> DecodeGap:
    """`inference.decode_step_time` (weights / (n W_hbm) + KV / (n W_hbm), or FLOPs) beside a measured step.

    The bound leaves out communication, attention FLOPs, layer norms and sampling, so it sits below any real step.
    Raises ValueError when the batch does not fit in HBM (`check_capacity=False` prices it as if it fitted).

    Defined in chapter 3, *Prefill and generation are different workloads*.
    """
    positive("measured_step_s", measured_step_s)
    bound = decode_step_time(model, chip, n_chips, batch, context_len, weight_dtype, kv_dtype, compute_dtype,
                             check_capacity=check_capacity)
    return DecodeGap(bound=bound, measured_s=measured_step_s)
