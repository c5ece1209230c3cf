"""Step time of generation (decode) and prefill.

The general decode step lower bound (Scaling Book ch. 7, "Theoretical Step Time (General)"):

    T_step = B x KV_per_seq / W  +  max(2 x B x P / C,  P_bytes / W)

B sequences each read their whole KV cache (attention is bandwidth-bound in decode, so that term only ever adds);
the weights are either streamed from HBM once or, at large batch, the matmul FLOPs take longer. W and C are summed
over the n chips that hold the model. P is the parameter count used for FLOPs (active parameters for an MoE).
"""

from dataclasses import dataclass

from .hardware import get_chip
from .memory import kv_cache_bytes, param_bytes as model_param_bytes
from .models import active_param_count, get_model
from .roofline import _positive


@dataclass(frozen=True)
class StepTime:
    """The three terms of the decode step bound, in seconds, and the total."""

    kv_s: float  # reading every sequence's KV cache
    weight_s: float  # reading every weight once
    compute_s: float  # 2 B P / C, the matmul FLOPs

    @property
    def total_s(self) -> float:
        return self.kv_s + max(self.weight_s, self.compute_s)

    @property
    def bound(self) -> str:
        """'memory' when loading weights outlasts the matmul FLOPs, else 'compute' (the KV term is always memory)."""
        return "memory" if self.weight_s >= self.compute_s else "compute"


def step_time_bound(*, batch: float, kv_bytes_per_sequence: float, param_bytes: float, param_count: float, chip,
                    n_chips: int = 1, compute_dtype: str = "bf16") -> StepTime:
    """B KV / (n W) + max(2 B P / (n C), P_bytes / (n W)): the general decode step lower bound (Scaling Book ch. 7)."""
    chip = get_chip(chip)
    _positive("batch", batch, allow_zero=True)
    _positive("kv_bytes_per_sequence", kv_bytes_per_sequence, allow_zero=True)
    _positive("param_bytes", param_bytes)
    _positive("param_count", param_count)
    _positive("n_chips", n_chips)
    hbm = n_chips * chip.hbm_bandwidth
    flops = n_chips * chip.peak_flops(compute_dtype)
    return StepTime(kv_s=batch * kv_bytes_per_sequence / hbm,
                    weight_s=param_bytes / hbm,
                    compute_s=2.0 * batch * param_count / flops)


def decode_step_time(model, chip, n_chips: int, batch: int, context_len: int, weight_dtype: str = "bf16",
                     kv_dtype: str = "bf16", compute_dtype: str = "bf16") -> StepTime:
    """`step_time_bound` for a named model: KV per sequence at `context_len`, all weights read, active params' FLOPs.

    Memory capacity is not checked here; see `memory.max_batch_size`.
    """
    m = get_model(model)
    _positive("context_len", context_len, allow_zero=True)
    return step_time_bound(batch=batch,
                           kv_bytes_per_sequence=kv_cache_bytes(m, context_len, 1, kv_dtype),
                           param_bytes=model_param_bytes(m, weight_dtype),
                           param_count=active_param_count(m),
                           chip=chip, n_chips=n_chips, compute_dtype=compute_dtype)


def decode_throughput(model, chip, n_chips: int, batch: int, context_len: int, weight_dtype: str = "bf16",
                      kv_dtype: str = "bf16", compute_dtype: str = "bf16") -> float:
    """Generated tokens per second for the whole server: B / T_step."""
    step = decode_step_time(model, chip, n_chips, batch, context_len, weight_dtype, kv_dtype, compute_dtype)
    return batch / step.total_s


def prefill_time(model, chip, n_chips: int, prompt_len: int, mfu: float, batch: int = 1,
                 compute_dtype: str = "bf16") -> float:
    """2 x P x B x T / (n x C x MFU): prefill is compute-bound, so FLOPs over the achieved rate (Scaling Book ch. 8).

    Counts the matmul FLOPs of the parameters (active ones for an MoE); attention's quadratic term is left out,
    as the sources do (chapter 3 measures how much it adds).
    """
    m = get_model(model)
    chip = get_chip(chip)
    _positive("n_chips", n_chips)
    _positive("prompt_len", prompt_len)
    _positive("batch", batch)
    if not 0 < mfu <= 1:
        raise ValueError(f"mfu must be in (0, 1], got {mfu!r}: it is the fraction of peak FLOP/s achieved")
    return 2.0 * active_param_count(m) * batch * prompt_len / (n_chips * chip.peak_flops(compute_dtype) * mfu)
