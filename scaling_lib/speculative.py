"""Speculative decoding: a cheap draft model proposes γ tokens, the target model scores them all in one step.

Symbols (the book's notation, book/notation.md): γ lookahead (drafted tokens per step; the argument `lookahead`),
α per-token acceptance rate (the chance the target accepts a drafted token, assumed independent of position; the
argument `acceptance`), c draft cost ratio (time of one draft step / one target step), B batch. Inside the
functions the local names k and a hold γ and α.

With i.i.d. acceptance, a step yields the accepted prefix plus one token from the target (Leviathan et al. 2023,
eq. 1):
    E[tokens per step] = (1 - α^(γ+1)) / (1 - α)            (γ + 1 when α = 1, 1 when α = 0)
and it costs γ draft steps plus one target pass over γ + 1 positions, so the speedup over plain decoding is
    speedup = E[tokens] / (γ c + T_verify / T_step).
When the target step is bandwidth-bound (B (γ+1) well below B_crit) scoring γ + 1 positions costs about one step
(T_verify ~ T_step, Leviathan et al.'s (1 - α^(γ+1)) / ((1 - α)(γ c + 1))); as B (γ+1) passes B_crit the matmul
FLOPs take over and the gain shrinks (Scaling Book ch. 7), though verification stays below γ + 1 steps while the KV
read (done once for all γ + 1 positions) is a real part of the step. `roofline_speedup` prices T_verify with the
general step-time bound. Used in chapter 10, *Speculative decoding, mixture of experts and quantization*.
"""

from dataclasses import dataclass

from ._validate import at_most, non_negative_int, positive, positive_int, probability
from .inference import decode_step_time, step_time_bound
from .memory import kv_cache_bytes, param_bytes
from .models import active_param_count, get_model


def expected_tokens_per_step(lookahead: int, acceptance: float) -> float:
    """(1 - α^(γ+1)) / (1 - α): expected tokens per target step with γ drafted tokens (Leviathan et al. 2023).

    The sum 1 + α + ... + α^γ: the j-th drafted token survives only if the j - 1 before it did, and the target
    always contributes one token (the correction, or the bonus token when all γ are accepted).

    Defined in chapter 10, *Speculative decoding, mixture of experts and quantization*.
    """
    k, a = non_negative_int("lookahead", lookahead), probability("acceptance", acceptance)
    if a == 1.0:
        return float(k + 1)
    return (1.0 - a ** (k + 1)) / (1.0 - a)


def speedup(lookahead: int, acceptance: float, draft_cost_ratio: float) -> float:
    """E[tokens] / (γ c + 1): wall-clock gain when verifying γ + 1 positions costs one target step.

    Leviathan et al. 2023, Theorem 3.8 (their "improvement factor"); c is one draft step over one target step.

    Defined in chapter 10, *Speculative decoding, mixture of experts and quantization*.
    """
    positive("draft_cost_ratio", draft_cost_ratio, allow_zero=True)
    k = non_negative_int("lookahead", lookahead)
    return expected_tokens_per_step(k, acceptance) / (k * draft_cost_ratio + 1.0)


def draft_cost_ratio(draft_params: float, target_params: float) -> float:
    """c = P_draft / P_target: one draft step over one target step when both are weight-load bound (small batch).

    At batch 1 a decode step reads its weights once and little else (`inference.step_time_bound`), so on the same
    chips and dtype the step times scale with the parameter counts: a 4e9-parameter drafter for a 70e9 target costs
    c = 4/70 of a target step (the Scaling Book's ch. 7 example; used for claim V4 and in chapter 10).

    Defined in chapter 10, *Speculative decoding, mixture of experts and quantization*.
    """
    positive("draft_params", draft_params)
    positive("target_params", target_params)
    return draft_params / target_params


MAX_LOOKAHEAD = 1024  # the searches below try every lookahead; speculation pays for a handful of tokens
_LOOKAHEAD_REASON = "the search tries every lookahead from 0 up, and speculation pays only for a handful of tokens"


def best_lookahead(acceptance: float, draft_cost_ratio: float, max_lookahead: int = 16) -> int:
    """The γ in 0..max_lookahead that maximises `speedup` (0 means: do not speculate).

    Defined in chapter 10, *Speculative decoding, mixture of experts and quantization*.
    """
    max_lookahead = at_most("max_lookahead", non_negative_int("max_lookahead", max_lookahead), MAX_LOOKAHEAD,
                            _LOOKAHEAD_REASON)
    probability("acceptance", acceptance)
    positive("draft_cost_ratio", draft_cost_ratio, allow_zero=True)
    return max(range(max_lookahead + 1), key=lambda k: (speedup(k, acceptance, draft_cost_ratio), -k))


@dataclass(frozen=True)
class SpeculativeStep:
    """One speculative step at batch B: γ draft steps, one verification over γ + 1 positions, and what it yields."""

    plain_step_s: float  # one ordinary decode step of the target at batch B
    draft_s: float  # γ draft steps, γ x c x plain_step_s
    verify_s: float  # the target scoring B (γ + 1) positions
    tokens_per_step: float  # per sequence

    @property
    def speedup(self) -> float:
        """Tokens per second per sequence, relative to plain decoding."""
        return self.tokens_per_step * self.plain_step_s / (self.draft_s + self.verify_s)


def roofline_step(model, chip, n_chips: int, batch: int, context_len: int, lookahead: int, acceptance: float,
                  draft_cost_ratio: float, weight_dtype: str = "bf16", kv_dtype: str = "bf16",
                  compute_dtype: str = "bf16", *, check_capacity: bool = True) -> SpeculativeStep:
    """Price a speculative step with the general step bound (`inference.step_time_bound`).

    Verification runs the target on B (γ + 1) query positions: the matmul FLOPs are those of batch B (γ + 1),
    the weights are read once, and each sequence's KV cache is read once for all γ + 1 of its positions (so the
    KV term stays that of batch B). Drafting costs γ x c plain steps. Raises ValueError when the B caches and the
    weights do not fit in HBM (`inference.decode_step_time`); `check_capacity=False` prices the step as if it
    fitted: used to show what would not fit.

    Defined in chapter 10, *Speculative decoding, mixture of experts and quantization*.
    """
    m = get_model(model)
    k = non_negative_int("lookahead", lookahead)
    batch = positive_int("batch", batch)
    probability("acceptance", acceptance)
    positive("draft_cost_ratio", draft_cost_ratio, allow_zero=True)
    dtypes = (weight_dtype, kv_dtype, compute_dtype)
    plain = decode_step_time(m, chip, n_chips, batch, context_len, *dtypes, check_capacity=check_capacity).total_s
    verify = step_time_bound(batch=batch * (k + 1),
                             kv_bytes_per_sequence=kv_cache_bytes(m, context_len, 1, kv_dtype) / (k + 1),
                             param_bytes=param_bytes(m, weight_dtype), param_count=active_param_count(m),
                             chip=chip, n_chips=n_chips, compute_dtype=compute_dtype, check_capacity=False).total_s
    return SpeculativeStep(plain_step_s=plain, draft_s=k * draft_cost_ratio * plain, verify_s=verify,
                           tokens_per_step=expected_tokens_per_step(k, acceptance))


def roofline_speedup(model, chip, n_chips: int, batch: int, context_len: int, lookahead: int, acceptance: float,
                     draft_cost_ratio: float, **dtypes) -> float:
    """`roofline_step(...).speedup`: equals `speedup` while B (γ + 1) stays below B_crit, falls above it.

    Defined in chapter 10, *Speculative decoding, mixture of experts and quantization*.
    """
    return roofline_step(model, chip, n_chips, batch, context_len, lookahead, acceptance, draft_cost_ratio,
                         **dtypes).speedup


def best_roofline_lookahead(model, chip, n_chips: int, batch: int, context_len: int, acceptance: float,
                            draft_cost_ratio: float, max_lookahead: int = 16, **dtypes) -> int:
    """The γ in 0..max_lookahead that maximises `roofline_speedup` at this batch and context.

    Defined in chapter 10, *Speculative decoding, mixture of experts and quantization*.
    """
    max_lookahead = at_most("max_lookahead", non_negative_int("max_lookahead", max_lookahead), MAX_LOOKAHEAD,
                            _LOOKAHEAD_REASON)
    return max(range(max_lookahead + 1),
               key=lambda k: (roofline_speedup(model, chip, n_chips, batch, context_len, k, acceptance,
                                               draft_cost_ratio, **dtypes), -k))
