"""Step time of generation (decode) and prefill.

The general decode step lower bound (Scaling Book ch. 7, "Theoretical Step Time (General)"):

    T_step = B x KV_per_seq / W  +  max(2 x B x P / C,  P_bytes / W)

B sequences each read their whole KV cache (attention is bandwidth-bound in decode, so that term only ever adds);
the weights are either streamed from HBM once or, at large batch, the matmul FLOPs take longer. W and C are summed
over the n chips that hold the model. P is the parameter count used for FLOPs (active parameters for an MoE).
"""

import math
from dataclasses import dataclass

from ._validate import checked_by, choice, flag, fraction, non_negative_int, positive, positive_int
from .flops import matmul_params
from .hardware import get_chip
from .memory import MemoryFootprint, kv_bytes_per_token, kv_cache_bytes, max_batch_size, memory_footprint, require_fit
from .memory import sequence_cache_bytes
from .memory import param_bytes as model_param_bytes
from .models import active_param_count, get_model
from .roofline import critical_batch_size


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


def _does_not_fit(chip, n_chips: int, batch: int, kv_bytes_per_sequence: float, param_bytes: float) -> str:
    """step_time_bound's message for a batch that does not fit: what it needs, what there is, and the fix."""
    gb, capacity = 1e9, n_chips * chip.hbm_capacity
    fix = ("the weights alone exceed it: quantize them or add chips" if param_bytes > capacity else
           f"at most {math.floor((capacity - param_bytes) / kv_bytes_per_sequence):,} sequences fit; use fewer "
           "sequences (batch), shorter ones (kv_bytes_per_sequence) or more chips (n_chips)")
    return (f"batch {batch:,} does not fit: it needs {(param_bytes + batch * kv_bytes_per_sequence) / gb:,.1f} "
            f"GB ({param_bytes / gb:,.1f} GB of weights + {batch * kv_bytes_per_sequence / gb:,.1f} GB of "
            f"KV cache) but {n_chips} x {chip.name} have {capacity / gb:,.1f} GB; {fix}; or pass "
            "check_capacity=False to price the step as if it fitted (to show what would not fit)")


def _step_time_bound_arguments(*, batch, kv_bytes_per_sequence, param_bytes, param_count, chip, n_chips,
                               compute_dtype, check_capacity) -> dict:
    """step_time_bound's checks: a ValueError naming a bad argument, or a batch that does not fit in the chips' HBM
    (unless `check_capacity=False`); returns the arguments with the chip resolved to its `Chip`."""
    chip = get_chip(chip)
    positive("batch", batch, allow_zero=True)
    positive("kv_bytes_per_sequence", kv_bytes_per_sequence, allow_zero=True)
    positive("param_bytes", param_bytes)
    positive("param_count", param_count)
    positive_int("n_chips", n_chips)
    needed = param_bytes + batch * kv_bytes_per_sequence
    if flag("check_capacity", check_capacity) and needed > n_chips * chip.hbm_capacity:
        raise ValueError(_does_not_fit(chip, n_chips, batch, kv_bytes_per_sequence, param_bytes))
    return dict(batch=batch, kv_bytes_per_sequence=kv_bytes_per_sequence, param_bytes=param_bytes,
                param_count=param_count, chip=chip, n_chips=n_chips, compute_dtype=compute_dtype,
                check_capacity=check_capacity)


@checked_by(_step_time_bound_arguments)
def step_time_bound(*, batch: float, kv_bytes_per_sequence: float, param_bytes: float, param_count: float, chip,
                    n_chips: int = 1, compute_dtype: str = "bf16", check_capacity: bool = True) -> StepTime:
    """B KV / (n W) + max(2 B P / (n C), P_bytes / (n W)): the general decode step lower bound (Scaling Book ch. 7).

    Raises ValueError when P_bytes + B KV exceeds the n chips' HBM (a step that cannot be held is not a bound);
    `check_capacity=False` prices the step as if it fitted: used to show what would not fit. The checks run first
    (`_step_time_bound_arguments`), so the body is the formula alone.

    Defined in chapter 5, *A model of the decode step*.
    """
    hbm = n_chips * chip.hbm_bandwidth  # n W_hbm
    flops = n_chips * chip.peak_flops(compute_dtype)  # n C
    return StepTime(kv_s=batch * kv_bytes_per_sequence / hbm,
                    weight_s=param_bytes / hbm,
                    compute_s=2.0 * batch * param_count / flops)


def decode_step_time(model, chip, n_chips: int, batch: int, context_len: int, weight_dtype: str = "bf16",
                     kv_dtype: str = "bf16", compute_dtype: str = "bf16", *, check_capacity: bool = True) -> StepTime:
    """`step_time_bound` for a named model: KV per sequence at `context_len`, all weights read, active params' FLOPs.

    Raises ValueError when the weights and the B caches do not fit in the chips' HBM (`memory.require_fit`);
    `check_capacity=False` prices the step as if it fitted: used to show what would not fit (`memory.max_batch_size`
    says how many do)."""
    m = get_model(model)
    positive("context_len", context_len, allow_zero=True)
    batch = non_negative_int("batch", batch)
    if flag("check_capacity", check_capacity):
        require_fit(m, chip, positive_int("n_chips", n_chips), batch, context_len, weight_dtype, kv_dtype)
    return step_time_bound(batch=batch,
                           kv_bytes_per_sequence=sequence_cache_bytes(m, context_len, 1, kv_dtype),
                           param_bytes=model_param_bytes(m, weight_dtype),
                           param_count=active_param_count(m),
                           chip=chip, n_chips=n_chips, compute_dtype=compute_dtype, check_capacity=False)


def full_hbm_step_time(chip) -> float:
    """HBM capacity / HBM bandwidth: the bandwidth-bound decode step of a server whose HBM is full.

    When the weights and the KV caches fill every chip's HBM and the step is bandwidth-bound, each chip streams all of
    its memory once per step, so the step is the same for any model, dtype and number of chips (Scaling Book ch. 8:
    about 19 ms on TPU v5e). It is the step at `memory.max_batch_size`, not at a smaller batch. Chapter 9's section
    *How many prefill servers per decode server?*

    Defined in chapter 9, *Serving engines*.
    """
    chip = get_chip(chip)
    return chip.hbm_capacity / chip.hbm_bandwidth


def decode_step_time_kv_heads(model, n_kv_heads: int, chip, n_chips: int, batch: int, context_len: int,
                              weight_dtype: str = "bf16", kv_dtype: str = "bf16",
                              compute_dtype: str = "bf16", *, check_capacity: bool = True) -> StepTime:
    """`step_time_bound` with the KV cache of `model` rebuilt with `n_kv_heads` KV heads but its weights unchanged.

    The Scaling Book's ch. 7 GQA table does exactly this: LLaMA-2-13B with K = 8 instead of 40 ("GQA 1:5") shrinks
    the KV term 5x and keeps the 26e9 B of multi-head weights (a real GQA model would also have smaller W_K, W_V).
    Claim M5. Capacity is checked as in `decode_step_time` (`check_capacity=False` to show what would not fit).

    Defined in chapter 4, *The KV cache dominates memory*.
    """
    m = get_model(model)
    positive("context_len", context_len, allow_zero=True)
    batch, n_kv_heads = non_negative_int("batch", batch), positive_int("n_kv_heads", n_kv_heads)
    if flag("check_capacity", check_capacity):
        require_fit(m, chip, positive_int("n_chips", n_chips), batch, context_len, weight_dtype, kv_dtype,
                    n_kv_heads=n_kv_heads)
    return step_time_bound(batch=batch,
                           kv_bytes_per_sequence=kv_cache_bytes(m.with_(n_kv_heads=n_kv_heads), context_len, 1,
                                                                kv_dtype),
                           param_bytes=model_param_bytes(m, weight_dtype), param_count=active_param_count(m),
                           chip=chip, n_chips=n_chips, compute_dtype=compute_dtype, check_capacity=False)


def decode_throughput(model, chip, n_chips: int, batch: int, context_len: int, weight_dtype: str = "bf16",
                      kv_dtype: str = "bf16", compute_dtype: str = "bf16", *, check_capacity: bool = True) -> float:
    """Generated tokens per second for the whole server: B / T_step. Raises ValueError when the batch does not fit
    (`decode_step_time`; `check_capacity=False` prices it as if it fitted: used to show what would not fit).

    Defined in chapter 4, *The KV cache dominates memory*.
    """
    positive_int("batch", batch)  # a throughput of zero sequences is not a rate
    step = decode_step_time(model, chip, n_chips, batch, context_len, weight_dtype, kv_dtype, compute_dtype,
                            check_capacity=check_capacity)
    return batch / step.total_s


def prefill_time(model, chip, n_chips: int, prompt_len: int, mfu: float, batch: int = 1,
                 compute_dtype: str = "bf16", params: str = "all") -> float:
    """2 x P x B x T / (n x C x MFU): prefill is compute-bound, so FLOPs over the achieved rate (Scaling Book ch. 8).

    `params` says which weights a token is charged 2 FLOPs for:
    - "all" (the default): P = `models.active_param_count`, every (active) parameter including the input embedding
      table. This is the sources' 2 P T, and what reproduces claim V1 (0.91 s for LLaMA-3-70B on 16 v5e);
    - "matmul": P_mm = `flops.matmul_params`, the book's count from chapter 2: the input embedding is a lookup and
      costs no FLOPs. For LLaMA-3-8B P / P_mm = 1.07 (its 128,256 x 4,096 table is 7% of P_mm); for LLaMA-3-70B 1.5%.
    Attention's quadratic term is left out either way, as the sources do (chapter 3 measures how much it adds).

    Defined in chapter 3, *Prefill and generation are different workloads*.
    """
    m = get_model(model)
    chip = get_chip(chip)
    positive_int("n_chips", n_chips)
    positive("prompt_len", prompt_len)
    positive_int("batch", batch)
    fraction("mfu", mfu, "the fraction of peak FLOP/s achieved")
    choice("params", params, ("all", "matmul"))
    weights = active_param_count(m) if params == "all" else matmul_params(m)
    return 2.0 * weights * batch * prompt_len / (n_chips * chip.peak_flops(compute_dtype) * mfu)


# Where the KV cache takes over, and a one-call report of a decode configuration (chapter 5) -----------------------

def kv_compute_crossover_context(model, chip, kv_dtype: str = "bf16", compute_dtype: str = "bf16") -> float:
    """S* = 2 P W / (C x KV bytes per token): above this context the KV read outlasts the MLP FLOPs, at any batch.

    Per sequence, a decode step reads S x KV_per_token bytes of cache (time S KV / W) and does 2 P matmul FLOPs
    (time 2 P / C); both grow with B, so their ratio, and hence S*, does not depend on the batch or the chip count.
    Above B_crit the step is KV + FLOPs, and the throughput ceiling n / (S KV / W + 2 P / C) is set by the KV cache
    once S > S* (Scaling Book ch. 7, general step time, solved for S). P counts active parameters; a sliding window
    caps the cache, so a windowed model whose window is below S* never crosses (returns inf).

    Defined in chapter 5, *A model of the decode step*.
    """
    m = get_model(model)
    chip = get_chip(chip)
    seconds_per_token_of_kv = kv_bytes_per_token(m, kv_dtype) / chip.hbm_bandwidth
    flop_seconds_per_sequence = 2.0 * active_param_count(m) / chip.peak_flops(compute_dtype)
    crossover = flop_seconds_per_sequence / seconds_per_token_of_kv
    if m.sliding_window is not None and crossover > m.sliding_window:
        return float("inf")
    return crossover


_TERM_NAMES = {"kv": "reading the KV cache", "weights": "loading the weights", "flops": "the matmul FLOPs"}


@dataclass(frozen=True)
class DecodeReport:
    """Everything chapter 5's explorer shows about one decode configuration; build it with `explain_decode`."""

    model: str
    chip: str
    n_chips: int
    batch: int
    context_len: int
    weight_dtype: str
    kv_dtype: str
    compute_dtype: str
    step: StepTime  # the three terms of the bound, seconds
    tokens_per_s: float  # B / T_step, whole server
    footprint: MemoryFootprint  # weights + all B sequences' caches against n_chips x HBM
    max_batch: int  # largest batch whose caches fit next to the weights at this context (0: weights do not fit)
    critical_batch: float  # B_crit of chapter 1 for these dtypes: where `step.bound` turns to "compute"
    kv_crossover_context: float  # S* above which the KV read outlasts the FLOPs

    @property
    def weight_bytes(self) -> float:
        return self.footprint.weight_bytes

    @property
    def kv_bytes(self) -> float:
        return self.footprint.kv_bytes

    @property
    def capacity_bytes(self) -> float:
        return self.footprint.capacity_bytes

    @property
    def total_bytes(self) -> float:
        return self.footprint.total_bytes

    @property
    def fits(self) -> bool:
        """Weights plus every sequence's KV cache fit in the chips' HBM (activations ignored)."""
        return self.footprint.fits

    @property
    def dominant_term(self) -> str:
        """'kv', 'weights' or 'flops': the largest of the three terms (the KV term adds to the larger other one)."""
        terms = {"kv": self.step.kv_s, "weights": self.step.weight_s, "flops": self.step.compute_s}
        return max(terms, key=terms.get)

    def describe(self) -> str:
        """A few lines of plain text for a reader: the step, its three terms, throughput, memory, what bounds it."""
        step = self.step
        ms = 1e3
        lines = [
            f"{self.model} on {self.n_chips} x {self.chip}, batch {self.batch}, context {self.context_len:,} tokens "
            f"(weights {self.weight_dtype}, KV {self.kv_dtype}, math {self.compute_dtype})",
            f"step time >= {step.total_s * ms:.2f} ms = KV {step.kv_s * ms:.2f} ms "
            f"+ max(weights {step.weight_s * ms:.2f} ms, FLOPs {step.compute_s * ms:.2f} ms)",
            f"throughput <= {self.tokens_per_s:,.0f} tokens/s ({self.tokens_per_s / self.batch:,.1f} per sequence)",
            f"memory: {self.weight_bytes / 1e9:.1f} GB weights + {self.kv_bytes / 1e9:.1f} GB KV = "
            f"{self.total_bytes / 1e9:.1f} GB of {self.capacity_bytes / 1e9:.0f} GB HBM: "
            + ("fits" if self.fits else f"does NOT fit (at most batch {self.max_batch} at this context)"),
            f"largest term: {_TERM_NAMES[self.dominant_term]}; the matmuls are {step.bound}-bound "
            f"(B_crit = {self.critical_batch:.0f}); the KV read outlasts the FLOPs above "
            f"{self.kv_crossover_context:,.0f} tokens of context",
        ]
        return "\n".join(lines)


def explain_decode(model, chip, n_chips: int, batch: int, context_len: int, weight_dtype: str = "bf16",
                   kv_dtype: str = "bf16", compute_dtype: str = "bf16") -> DecodeReport:
    """`decode_step_time`, `decode_throughput`, `memory.memory_footprint`, `memory.max_batch_size`,
    `roofline.critical_batch_size` and `kv_compute_crossover_context` for one configuration, in one report.

    Raises ValueError for unknown names, non-positive sizes, or a compute dtype the chip has no rate for.

    Defined in chapter 5, *A model of the decode step*.
    """
    m = get_model(model)
    chip = get_chip(chip)
    n_chips, batch = positive_int("n_chips", n_chips), positive_int("batch", batch)
    context_len = positive_int("context_len", context_len)
    # the report shows a batch that does not fit (`fits`, the "does NOT fit" line) rather than refusing it
    step = decode_step_time(m, chip, n_chips, batch, context_len, weight_dtype, kv_dtype, compute_dtype,
                            check_capacity=False)
    footprint = memory_footprint(m, chip, n_chips, batch, context_len, weight_dtype, kv_dtype)
    return DecodeReport(
        model=m.name, chip=chip.name, n_chips=n_chips, batch=batch, context_len=context_len,
        weight_dtype=weight_dtype, kv_dtype=kv_dtype, compute_dtype=compute_dtype,
        step=step, tokens_per_s=batch / step.total_s,
        footprint=footprint,
        max_batch=max_batch_size(m, chip, n_chips, context_len, weight_dtype, kv_dtype),
        critical_batch=critical_batch_size(chip, weight_dtype, compute_dtype),
        kv_crossover_context=kv_compute_crossover_context(m, chip, kv_dtype, compute_dtype),
    )
