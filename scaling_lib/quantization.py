"""Quantization: what fewer bytes per weight and per KV entry do to decode.

Decode is bandwidth-bound, so its step time is mostly bytes / HBM bandwidth (Scaling Book ch. 7):
    T_step = B x KV_per_seq / W + max(2 B P / C, P x bytes_per_weight / W).
Halving the bytes per weight halves the weight term; halving the bytes per KV entry halves the KV term and fits
twice the KV caches. The critical batch B_crit = C(compute dtype) / W x bytes_per_weight / 2 moves too: quantized
weights with bf16 math lower it, native low-precision math raises it back. Where a chip has no faster
low-precision rate, quantization still saves bytes and capacity (`roofline.critical_batch_size`).

`quantization_table` evaluates these for one model and server: one frozen row per scheme.
"""

from dataclasses import dataclass

from ._validate import MAX_REQUESTS, choice, items, positive, positive_int
from .dtypes import bytes_per_element
from .hardware import get_chip
from .inference import decode_step_time
from .memory import kv_bytes_per_token, max_batch_size, param_bytes
from .models import get_model
from .roofline import critical_batch_size

# (weight dtype, KV dtype, compute dtype): bf16 baseline, weight-only int8, int8 weights + KV, fp8 weights + KV,
# int4 weights with int8 KV. Math stays bf16 (weights upcast) unless a row says otherwise.
DEFAULT_SCHEMES = (
    ("bf16", "bf16", "bf16"),
    ("int8", "bf16", "bf16"),
    ("int8", "int8", "bf16"),
    ("fp8", "fp8", "bf16"),
    ("int4", "int8", "bf16"),
)


@dataclass(frozen=True)
class QuantizationRow:
    """One scheme on one server: memory, the largest batch that fits, the step time at `batch`, and B_crit."""

    weight_dtype: str
    kv_dtype: str
    compute_dtype: str
    weight_bytes: float  # all weights, whole server
    kv_bytes_per_token: float  # one token of one sequence
    max_batch: int  # memory.max_batch_size at the table's context length
    batch: int  # the batch the step time is priced at
    step_s: float  # inference.decode_step_time at `batch`
    critical_batch: float  # roofline.critical_batch_size for these weight and compute dtypes

    @property
    def fits(self) -> bool:
        """Whether `batch` sequences of the table's context fit in HBM under this scheme."""
        return self.batch <= self.max_batch

    @property
    def tokens_per_s(self) -> float:
        """Whole-server decode throughput at `batch`: B / T_step."""
        return self.batch / self.step_s


def _scheme(name: str, scheme) -> tuple:
    """A (weight_dtype, kv_dtype, compute_dtype) triple of dtype names; errors name the argument."""
    if isinstance(scheme, str) or not isinstance(scheme, (tuple, list)) or len(scheme) != 3:
        raise ValueError(f"{name} is a (weight_dtype, kv_dtype, compute_dtype) triple, got {scheme!r}")
    for dtype in scheme:
        try:
            bytes_per_element(dtype)
        except ValueError as err:
            raise ValueError(f"{name} {tuple(scheme)!r}: {err}") from None
    return tuple(scheme)


def quantization_table(model, chip, n_chips: int, context_len: int, batch: int,
                       schemes=DEFAULT_SCHEMES) -> tuple:
    """One `QuantizationRow` per (weight dtype, KV dtype, compute dtype) scheme, in the order given.

    Every number comes from `memory` (bytes, max batch), `inference.decode_step_time` (step time at `batch` and
    `context_len`) and `roofline.critical_batch_size`. Rows whose `batch` does not fit still carry the step time
    (the bound ignores capacity); check `row.fits`.

    Defined in chapter 10, *Speculative decoding, mixture of experts and quantization*.
    """
    m = get_model(model)
    chip = get_chip(chip)
    positive_int("n_chips", n_chips)
    positive("context_len", context_len)
    positive_int("batch", batch)
    schemes = items("schemes", schemes, _scheme)
    rows = []
    for weight, kv, compute in schemes:
        rows.append(QuantizationRow(
            weight_dtype=weight, kv_dtype=kv, compute_dtype=compute,
            weight_bytes=param_bytes(m, weight),
            kv_bytes_per_token=kv_bytes_per_token(m, kv),
            max_batch=max_batch_size(m, chip, n_chips, context_len, weight, kv),
            batch=batch,
            step_s=decode_step_time(m, chip, n_chips, batch, context_len, weight, kv, compute,
                                    check_capacity=False).total_s,  # reported, with `fits`, not refused
            critical_batch=critical_batch_size(chip, weight, compute)))
    return tuple(rows)


@dataclass(frozen=True)
class SchemeRatio:
    """One (batch, context) point: the decode step under a baseline scheme and under a quantized one."""

    batch: int
    context_len: int
    baseline_s: float  # inference.decode_step_time under the baseline scheme
    scheme_s: float  # the same under the quantized scheme
    scheme_bound: str  # the quantized step's bound: "memory" or "compute"
    baseline_fits: bool  # batch <= memory.max_batch_size under each scheme
    scheme_fits: bool

    @property
    def ratio(self) -> float:
        """scheme step / baseline step (0.5: the scheme halves the step)."""
        return self.scheme_s / self.baseline_s


def step_ratio_grid(model, chip, n_chips: int, batches, context_lens, scheme=("fp8", "fp8", "bf16"),
                    baseline=("bf16", "bf16", "bf16")) -> tuple:
    """`SchemeRatio` at every (batch, context): how far one quantization's gain holds beyond a single point.

    Each scheme is (weight dtype, KV dtype, compute dtype). With the weight and KV bytes halved and the math rate
    unchanged (fp8 storage, bf16 math), the step B KV / W + max(2 B P / C, P_bytes / W) halves exactly while it is
    memory-bound (B below the scheme's B_crit) and the ratio rises toward 1 beyond it, where the matmul FLOPs, which
    storage does not shorten, take over; with the math rate doubled too (fp8 math) every term halves and the ratio is
    1/2 everywhere. Capacity is reported, not enforced (`baseline_fits`, `scheme_fits`). Points are ordered by
    context, then batch. Chapter 10's claim T4's "14.0 ms to 7.0 ms".

    Defined in chapter 10, *Speculative decoding, mixture of experts and quantization*.
    """
    m = get_model(model)
    chip = get_chip(chip)
    positive_int("n_chips", n_chips)
    batches, context_lens = items("batches", batches, positive_int), items("context_lens", context_lens, positive_int)
    scheme, baseline = _scheme("scheme", scheme), _scheme("baseline", baseline)
    if len(batches) * len(context_lens) > MAX_REQUESTS:
        raise ValueError(f"batches x context_lens make {len(batches) * len(context_lens):,} points, more than "
                         f"{MAX_REQUESTS:,}: the grid prices each one; sample fewer")
    points = []
    for context in context_lens:
        capacity = {key: max_batch_size(m, chip, n_chips, context, key[0], key[1]) for key in (baseline, scheme)}
        for batch in batches:
            # capacity is reported (`baseline_fits`, `scheme_fits`), not refused: the grid shows where each fits
            base = decode_step_time(m, chip, n_chips, batch, context, *baseline, check_capacity=False)
            quantized = decode_step_time(m, chip, n_chips, batch, context, *scheme, check_capacity=False)
            points.append(SchemeRatio(batch=batch, context_len=context, baseline_s=base.total_s,
                                      scheme_s=quantized.total_s, scheme_bound=quantized.bound,
                                      baseline_fits=batch <= capacity[baseline],
                                      scheme_fits=batch <= capacity[scheme]))
    return tuple(points)


# --- Rounding with symmetric absmax scales (chapter 13, *Quantizing with Qwix*) ----------------------------------------
# An integer format of b bits maps [-amax, amax] onto [-(2^(b-1) - 1/2), 2^(b-1) - 1/2] before rounding (Qwix's
# convention, qwix/_src/core/numerics.py: the top bucket is a whole step wide, so the step is amax / 127.5 for int8;
# chapter 10's hand-written path divides by 127). A float format keeps the value's exponent: e4m3 has 3 mantissa
# bits, so rounding to the nearest representable value errs by at most 2^-4 of the value (half a step of 2^-3),
# with the scale amax / 448 putting the largest value at the format's maximum.
_INT_BITS = {"int8": 8, "int4": 4}
_FLOAT_MAX = {"fp8": 448.0}  # float8_e4m3fn
_FP8_RELATIVE = 2.0**-4


ROUNDED_DTYPES = tuple(_INT_BITS) + tuple(_FLOAT_MAX)


def absmax_scale(amax: float, dtype: str = "int8") -> float:
    """The step of symmetric absmax quantization: amax / (2^(b-1) - 1/2) for int8 / int4, amax / 448 for fp8.

    Defined in chapter 13, *Quantizing with Qwix*.
    """
    positive("amax", amax)
    choice("dtype", dtype, ROUNDED_DTYPES)
    if dtype in _INT_BITS:
        return amax / (2 ** (_INT_BITS[dtype] - 1) - 0.5)
    return amax / _FLOAT_MAX[dtype]


def rounding_bound(amax: float, dtype: str = "int8") -> float:
    """The worst |v - dequantize(quantize(v))| over |v| <= amax: half a step for integers, 2^-4 amax for fp8.

    Defined in chapter 13, *Quantizing with Qwix*.
    """
    positive("amax", amax)
    if choice("dtype", dtype, ROUNDED_DTYPES) in _FLOAT_MAX:
        return _FP8_RELATIVE * amax
    return absmax_scale(amax, dtype) / 2


def dot_error_bound(k: int, x_absmax: float, w_absmax: float, weight_dtype: str = "int8",
                    act_dtype: str | None = None) -> float:
    """Worst error of one output of a k-term dot product when the weights (and, if act_dtype is given, the
    activations) are rounded: k (|x| dw + dx |w| + dx dw) with dw, dx from `rounding_bound` (dx = 0 weight-only).

    Defined in chapter 13, *Quantizing with Qwix*.
    """
    k = positive_int("k", k)
    positive("x_absmax", x_absmax)
    positive("w_absmax", w_absmax)
    choice("weight_dtype", weight_dtype, ROUNDED_DTYPES)
    if act_dtype is not None:
        choice("act_dtype", act_dtype, ROUNDED_DTYPES)
    dw = rounding_bound(w_absmax, weight_dtype)
    dx = 0.0 if act_dtype is None else rounding_bound(x_absmax, act_dtype)
    return k * (x_absmax * dw + dx * w_absmax + dx * dw)
