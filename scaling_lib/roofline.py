"""Rooflines: when is an operation limited by arithmetic, and when by memory bandwidth?

An operation doing `flops` floating-point operations and moving `bytes` to or from HBM takes at least
    T = max(flops / C, bytes / W_hbm)
on a chip with peak rate C and HBM bandwidth W_hbm (Scaling Book ch. 1). Its arithmetic intensity is
flops / bytes; it is compute-bound when the intensity exceeds the chip's ridge point C / W_hbm.
"""

from dataclasses import dataclass

from ._validate import divides, positive, positive_int
from .dtypes import bytes_per_element
from .hardware import get_chip


@dataclass(frozen=True)
class RooflineTime:
    """Lower bound on an operation's time: the slower of its arithmetic and its memory traffic."""

    compute_s: float
    memory_s: float

    @property
    def total_s(self) -> float:
        return max(self.compute_s, self.memory_s)

    @property
    def bound(self) -> str:
        return "compute" if self.compute_s >= self.memory_s else "memory"


def ridge_point(chip, compute_dtype: str = "bf16") -> float:
    """C / W_hbm: the arithmetic intensity (FLOPs per byte) where compute time equals memory time.

    Defined in chapter 1, *Rooflines and the critical batch size*.
    """
    chip = get_chip(chip)
    return chip.peak_flops(compute_dtype) / chip.hbm_bandwidth


def arithmetic_intensity(flops: float, bytes_moved: float) -> float:
    """FLOPs per byte of memory traffic.

    Defined in chapter 3, *Prefill and generation are different workloads*.
    """
    positive("flops", flops, allow_zero=True)
    positive("bytes_moved", bytes_moved)
    return flops / bytes_moved


def roofline_time(flops: float, bytes_moved: float, chip, n_chips: int = 1,
                  compute_dtype: str = "bf16") -> RooflineTime:
    """T_compute = flops / (n C), T_memory = bytes / (n W_hbm); `flops` and `bytes_moved` are totals over chips."""
    chip = get_chip(chip)
    positive("flops", flops, allow_zero=True)
    positive("bytes_moved", bytes_moved, allow_zero=True)
    positive_int("n_chips", n_chips)
    return RooflineTime(compute_s=flops / (n_chips * chip.peak_flops(compute_dtype)),
                        memory_s=bytes_moved / (n_chips * chip.hbm_bandwidth))


def attainable_flops(intensity: float, chip, compute_dtype: str = "bf16") -> float:
    """The roofline itself: min(C, intensity x W_hbm), in FLOP/s.

    Defined in chapter 1, *Rooflines and the critical batch size*.
    """
    chip = get_chip(chip)
    positive("intensity", intensity, allow_zero=True)
    return min(chip.peak_flops(compute_dtype), intensity * chip.hbm_bandwidth)


def matmul_flops(batch: int, d_in: int, d_out: int) -> float:
    """2 B D F: one multiply and one add per (row, input, output) triple.

    Defined in chapter 1, *Rooflines and the critical batch size*.
    """
    for name, value in (("batch", batch), ("d_in", d_in), ("d_out", d_out)):
        positive(name, value)
    return 2.0 * batch * d_in * d_out


def matmul_bytes(batch: int, d_in: int, d_out: int, activation_dtype: str = "bf16",
                 weight_dtype: str = "bf16") -> float:
    """HBM traffic of X[B, D] @ W[D, F]: read X and W, write the [B, F] output (activation dtype)."""
    for name, value in (("batch", batch), ("d_in", d_in), ("d_out", d_out)):
        positive(name, value)
    act = bytes_per_element(activation_dtype)
    return act * batch * d_in + bytes_per_element(weight_dtype) * d_in * d_out + act * batch * d_out


def matmul_intensity(batch: int, d_in: int, d_out: int, activation_dtype: str = "bf16",
                     weight_dtype: str = "bf16") -> float:
    """2BDF / (bytes of X, W and the output). Tends to B x 2 / bytes_per_weight when D, F >> B.

    Defined in chapter 1, *Rooflines and the critical batch size*.
    """
    return matmul_flops(batch, d_in, d_out) / matmul_bytes(batch, d_in, d_out, activation_dtype, weight_dtype)


def matmul_time(batch: int, d_in: int, d_out: int, chip, n_chips: int = 1, activation_dtype: str = "bf16",
                weight_dtype: str = "bf16", compute_dtype: str = "bf16") -> RooflineTime:
    """Roofline time of one [B, D] x [D, F] matmul spread evenly over n_chips.

    Defined in chapter 1, *Rooflines and the critical batch size*.
    """
    return roofline_time(matmul_flops(batch, d_in, d_out),
                         matmul_bytes(batch, d_in, d_out, activation_dtype, weight_dtype),
                         chip, n_chips, compute_dtype)


def critical_batch_size(chip, weight_dtype: str = "bf16", compute_dtype: str = "bf16") -> float:
    """B_crit = C(compute dtype) / W_hbm x bytes_per_weight / 2  (Scaling Book ch. 7).

    The batch (tokens) above which a weight-dominated matmul is compute-bound: equate 2 B D F / C with
    D F bytes_per_weight / W_hbm. 240 on TPU v5e in bf16; int8 weights with bf16 math halve it; int8 math
    doubles it back.

    Defined in chapter 1, *Rooflines and the critical batch size*.
    """
    chip = get_chip(chip)
    return critical_batch_from_rates(chip.peak_flops(compute_dtype), chip.hbm_bandwidth, weight_dtype)


def critical_batch_from_rates(flops_per_s: float, bytes_per_s: float, weight_dtype: str = "bf16") -> float:
    """B_crit = C / W x bytes_per_weight / 2 for any machine given its two rates (Scaling Book ch. 7).

    `critical_batch_size` for a machine outside the hardware table, e.g. a CPU whose matmul rate C and memory
    bandwidth W were measured (chapter 1's experiment predicts its knee with float32 weights, b_w = 4).

    Defined in chapter 1, *Rooflines and the critical batch size*.
    """
    positive("flops_per_s", flops_per_s)
    positive("bytes_per_s", bytes_per_s)
    return flops_per_s / bytes_per_s * bytes_per_element(weight_dtype) / 2.0


def moe_critical_batch_size(chip, n_experts: int, n_active_experts: int, weight_dtype: str = "bf16",
                            compute_dtype: str = "bf16") -> float:
    """E / k x B_crit: each expert sees only k / E of the batch's tokens, so the batch must be E / k times larger
    for every expert's matmul to be compute-bound (Scaling Book ch. 7; 16 experts, top-2 on v5e: 1,920 tokens).

    Defined in chapter 10, *Speculative decoding, mixture of experts and quantization*.
    """
    positive_int("n_experts", n_experts)
    positive_int("n_active_experts", n_active_experts)
    if n_active_experts > n_experts:
        raise ValueError(f"n_active_experts={n_active_experts} exceeds n_experts={n_experts}")
    return n_experts / n_active_experts * critical_batch_size(chip, weight_dtype, compute_dtype)


def attention_flops(query_len: int, kv_len: int, n_heads: int, head_dim: int, batch: int = 1) -> float:
    """4 B T S N H: Q K^T and P V are each 2 B T S N H (softmax ignored).

    Defined in chapter 1, *Rooflines and the critical batch size*.
    """
    for name, value in (("query_len", query_len), ("kv_len", kv_len), ("n_heads", n_heads),
                        ("head_dim", head_dim), ("batch", batch)):
        positive(name, value)
    return 4.0 * batch * query_len * kv_len * n_heads * head_dim


def attention_bytes(query_len: int, kv_len: int, n_heads: int, n_kv_heads: int, head_dim: int, batch: int = 1,
                    dtype: str = "bf16") -> float:
    """Flash-attention traffic: read Q [B,T,N,H], K and V [B,S,K,H], write O [B,T,N,H].

    Defined in chapter 1, *Rooflines and the critical batch size*.
    """
    attention_flops(query_len, kv_len, n_heads, head_dim, batch)  # validates
    divides("n_kv_heads", n_kv_heads, "n_heads", n_heads)
    size = bytes_per_element(dtype)
    return size * batch * head_dim * (2 * query_len * n_heads + 2 * kv_len * n_kv_heads)


def attention_intensity(query_len: int, kv_len: int, group_size: int = 1) -> float:
    """Arithmetic intensity of attention in bf16: G S T / (G T + S)  (Scaling Book ch. 7 for G = 1: S T / (S + T)).

    T = query_len, S = kv_len, G = query heads per KV head. Prefill (S = T, G = 1) gives T / 2;
    generation (T = 1) gives G S / (G + S), about G for any batch: attention in decode is bandwidth-bound.

    Defined in chapter 1, *Rooflines and the critical batch size*.
    """
    positive("query_len", query_len)
    positive("kv_len", kv_len)
    positive("group_size", group_size)
    return group_size * kv_len * query_len / (group_size * query_len + kv_len)


@dataclass(frozen=True)
class MeasuredRoofline:
    """A roofline read off measured times t(B) of X[B, D] @ W[D, F]: t(B) ~ max(floor_s, B x per_row_s)."""

    floor_s: float  # the flat part: loading W, bytes / W_hbm
    per_row_s: float  # the slope: one more row of X costs 2 D F / C

    @property
    def knee_batch(self) -> float:
        """Where the two branches meet: floor_s / per_row_s, the measured critical batch size."""
        return self.floor_s / self.per_row_s


def _sequence(name, values) -> list:
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise ValueError(f"{name} must be a sequence of numbers, got {values!r}")
    return list(values)


def fit_batch_roofline(batches, seconds, n_floor: int = 3) -> MeasuredRoofline:
    """Fit t(B) = max(t_0, B t_1) to measured matmul times (Scaling Book ch. 1: T = max(FLOPs / C, bytes / W_hbm)).

    t_0 is the median time of the `n_floor` smallest batches (there the weight load dominates), t_1 is
    time / batch at the largest batch (assumed compute-bound); the knee t_0 / t_1 equals (C / W) x bytes_per_weight / 2
    when those assumptions hold, i.e. the machine's own critical batch size.

    Defined in chapter 1, *Rooflines and the critical batch size*.
    """
    batches, seconds = _sequence("batches", batches), _sequence("seconds", seconds)
    if len(batches) != len(seconds) or len(batches) < 2:
        raise ValueError(f"need at least two (batch, seconds) pairs of equal length, got {len(batches)} batches "
                         f"and {len(seconds)} times")
    for b, t in zip(batches, seconds):
        positive("batches entry", b)
        positive("seconds entry", t)
    if list(batches) != sorted(batches):
        raise ValueError(f"batches must be increasing, got {batches!r}")
    n_floor = positive_int("n_floor", n_floor)  # an int: 3.0 counts three batches, and slices
    if not 1 <= n_floor < len(batches):
        raise ValueError(f"n_floor must be between 1 and {len(batches) - 1}, got {n_floor!r}")
    floor = sorted(seconds[:n_floor])
    mid = len(floor) // 2
    floor_s = floor[mid] if len(floor) % 2 else 0.5 * (floor[mid - 1] + floor[mid])
    return MeasuredRoofline(floor_s=floor_s, per_row_s=seconds[-1] / batches[-1])


SLOWDOWN = 1.5  # the knee read off a timed curve: where the time first stays 1.5 x its floor
# How closely a knee measured on a real machine is expected to match the one its rates predict, measured apart: within
# this factor either way. Wide, because a CPU is a rough roofline (caches, prefetchers, threads, other processes);
# chapter 1 states it, bench/bench_cpu_roofline.py reports it on the CPU (a timing: no test asserts on one), and
# tests/math/test_measurements.py holds the H200's stored measurement to it.
KNEE_FACTOR = 4.0


def slowdown_knee(batches, seconds, factor: float = SLOWDOWN) -> float:
    """The smallest batch from which every measured time is at least `factor` x the fastest one: a knee read off
    t(B) without fitting it (robust to one slow point at small batch); inf if the time never grows that much.

    On a roofline t(B) = max(t_0, B t_0 / B_crit) the time first reaches factor x t_0 at B = factor x B_crit, so
    with the default 1.5 the knee sits at 1.5 B_crit (the Scaling Book's appendix reads its v5e curve the same way)."""
    batches, seconds = _sequence("batches", batches), _sequence("seconds", seconds)
    if len(batches) != len(seconds) or not batches:
        raise ValueError(f"batches and seconds must pair up: got {len(batches)} batches and {len(seconds)} seconds")
    for b, t in zip(batches, seconds):
        positive("batches entry", b)
        positive("seconds entry", t)
    if list(batches) != sorted(set(batches)):
        raise ValueError(f"batches must be increasing and distinct, got {batches!r}")
    if positive("factor", factor) <= 1:
        raise ValueError(f"factor={factor!r} must exceed 1: the knee is where the time has grown past its floor")
    slow = [t >= factor * min(seconds) for t in seconds]
    for i, batch in enumerate(batches):
        if all(slow[i:]):
            return float(batch)
    return float("inf")


@dataclass(frozen=True)
class MatmulReport:
    """What chapter 1's explorer shows for one [B, D] x [D, F] matmul on one chip; build it with `explain_matmul`."""

    chip: str
    batch: int
    d_in: int
    d_out: int
    weight_dtype: str
    compute_dtype: str
    intensity: float  # FLOPs per byte of this matmul
    ridge: float  # C / W_hbm of the chip at the compute dtype
    critical_batch: float  # B_crit for these dtypes
    time: RooflineTime
    attainable_flops: float  # min(C, I W_hbm)

    @property
    def fraction_of_peak(self) -> float:
        """Attainable over peak FLOP/s: 1 when compute-bound."""
        return self.attainable_flops / (self.ridge * get_chip(self.chip).hbm_bandwidth)

    def describe(self) -> str:
        t = self.time
        return "\n".join([
            f"[{self.batch}, {self.d_in}] x [{self.d_in}, {self.d_out}] on {self.chip} "
            f"(weights {self.weight_dtype}, math {self.compute_dtype})",
            f"intensity {self.intensity:,.1f} FLOPs/B vs ridge {self.ridge:,.0f}: {t.bound}-bound, "
            f"{self.fraction_of_peak:.0%} of peak",
            f"time >= {t.total_s * 1e6:,.1f} us (math {t.compute_s * 1e6:,.1f} us, memory {t.memory_s * 1e6:,.1f} us)",
            f"critical batch size for these dtypes: {self.critical_batch:,.0f} tokens",
        ])


def explain_matmul(chip, batch: int, d_in: int = 8192, d_out: int = 8192, weight_dtype: str = "bf16",
                   compute_dtype: str = "bf16") -> MatmulReport:
    """Intensity, ridge point, B_crit and roofline time of one matmul, in one report (chapter 1's explorer).

    Activations are stored in the compute dtype when it is an 8-bit format, else in bf16.

    Defined in chapter 1, *Rooflines and the critical batch size*.
    """
    chip = get_chip(chip)
    chip.peak_flops(compute_dtype)  # validates the dtype and that the chip has a rate for it
    activation_dtype = compute_dtype if bytes_per_element(compute_dtype) < 2 else "bf16"
    intensity = matmul_intensity(batch, d_in, d_out, activation_dtype, weight_dtype)
    return MatmulReport(
        chip=chip.name, batch=batch, d_in=d_in, d_out=d_out, weight_dtype=weight_dtype, compute_dtype=compute_dtype,
        intensity=intensity, ridge=ridge_point(chip, compute_dtype),
        critical_batch=critical_batch_size(chip, weight_dtype, compute_dtype),
        time=matmul_time(batch, d_in, d_out, chip, 1, activation_dtype, weight_dtype, compute_dtype),
        attainable_flops=attainable_flops(intensity, chip, compute_dtype),
    )
