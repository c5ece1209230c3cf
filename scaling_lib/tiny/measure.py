"""This machine's own roofline, measured: the book's microbenchmarks in one place.

Every measurement is the best of a few repeats (other work on the machine only ever adds time), after one untimed
call that compiles:

- `measure_memory_bandwidth`: a jitted sum over a large array, accumulated in float32 (it reads every byte once, as
  a decode step reads its weights and cache): bytes / seconds, this machine's W_hbm;
- `measure_matmul_flops`: a jitted square matmul: 2 n^3 / seconds, this machine's C;
- `time_batched_matmul`: `x @ w` over a growing batch. Chapter 1 sets the knee of that curve
  (`roofline.fit_batch_roofline`) against `roofline.critical_batch_from_rates(C, W, dtype)` from the two rates
  measured apart, within KNEE_FACTOR;
- `batch_rule`: the Scaling Book's critical-batch experiment (the appendix to its inference chapter times a
  two-matmul layer x W_in W_out on TPU v5e across batch sizes: nearly flat up to about 240 tokens, then linear)
  run on this machine for the appendix *Worked problems*:

      t(B) ~ max(P_bytes / W, 2 B P / C)   ->   flat until B_crit = C / W x bytes_per_weight / 2, then linear.

The sizes and the dtype come from the device (`sizes`, `native_dtype`). A CPU computes in float32 and its caches are
small, so a 1,024-square matmul and a 256 MiB read measure it; a GPU or TPU computes natively in bf16 and finishes
such calls in microseconds, where launch overhead and the timer dominate (on an H200 they measured C and W 27x and 4x
low, and put chapter 1's knee 19x off: shared measurements of 2026-12-04, `measurements.accelerator_rows`). So the
two rates start from those sizes and double them until one call takes at least MIN_CALL_S; the knee's weight and the
batch rule's layer are chosen per platform, larger than the caches of either. On a CPU the defaults are the sizes
the book has always used and nothing grows.

`tiny.estimate` prices chapter 11's decode steps with the two rates (`machine_chip`). Timings vary from run to run
and machine to machine: the notebooks print them in cells nbval ignores, bench/bench_cpu_roofline.py and
bench/bench_accelerator.py print what they show, and tests/tiny/test_measure.py checks this code on synthetic
machines with known answers (no test asserts on a timing). What should hold anywhere is the shape: flat, then
linear, with the knee within a small factor of the prediction.
"""

import time
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from .._validate import positive_int
from ..roofline import KNEE_FACTOR, critical_batch_from_rates, slowdown_knee  # noqa: F401 (KNEE_FACTOR: chapter 1 reads it here)

# A timed call shorter than this measures launch overhead and the timer more than the chip: the rates grow their
# call until it takes at least this long.
MIN_CALL_S = 2e-3

_DTYPE_NAMES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}  # jnp dtype -> the library's dtype names


@dataclass(frozen=True)
class Sizes:
    """The sizes of the microbenchmarks on one kind of device (see `sizes`)."""

    read_bytes: int  # the bandwidth read starts here and doubles up to read_bytes_max
    read_bytes_max: int
    matmul_n: int  # the square matmul's side starts here and doubles up to matmul_n_max
    matmul_n_max: int
    knee_d_model: int  # chapter 1's knee: x[B, D] @ w[D, F] for B in knee_batches
    knee_d_ff: int
    knee_batches: tuple
    layer_d_model: int  # the batch rule's layer x W_in[D, F] W_out[F, D] for B in layer_batches
    layer_d_ff: int
    layer_batches: tuple


MIB = 2**20
SIZES = {
    # float32; the weights (64 MB for the knee and the layer) are larger than a typical last-level cache
    "cpu": Sizes(read_bytes=256 * MIB, read_bytes_max=1024 * MIB, matmul_n=1024, matmul_n_max=4096,
                 knee_d_model=4096, knee_d_ff=4096, knee_batches=tuple(2**k for k in range(10)),
                 layer_d_model=1024, layer_d_ff=8192, layer_batches=tuple(2**k for k in range(9))),
    # bf16; the weights (470 MB and 512 MB) are ten times an H200's 50 MB L2, the batches reach past its knee (~256)
    "accelerator": Sizes(read_bytes=256 * MIB, read_bytes_max=16 * 1024 * MIB, matmul_n=1024, matmul_n_max=16384,
                         knee_d_model=8192, knee_d_ff=28672,
                         knee_batches=(1, 16, 64, 128, 192, 256, 384, 512, 1024, 2048, 4096),
                         layer_d_model=8192, layer_d_ff=16384,
                         layer_batches=(1, 16, 64, 128, 256, 512, 1024, 2048, 4096)),
}


def _device(device):
    return jax.devices()[0] if device is None else device


def sizes(device=None) -> Sizes:
    """The microbenchmarks' sizes for `device` (default: JAX's first device): SIZES["cpu"] on a CPU, otherwise
    SIZES["accelerator"].

    Defined in chapter 1, *Rooflines and the critical batch size*.
    """
    return SIZES["cpu" if _device(device).platform == "cpu" else "accelerator"]


def native_dtype(device=None):
    """The dtype `device` multiplies in natively: bf16 on a GPU or TPU (their matrix units), float32 on a CPU.

    Defined in chapter 1, *Rooflines and the critical batch size*.
    """
    return jnp.float32 if _device(device).platform == "cpu" else jnp.bfloat16


def dtype_name(dtype) -> str:
    """The library's name of a JAX dtype ("fp32", "bf16", "fp16"), as `roofline` and `estimate` take it.

    Defined in chapter 1, *Rooflines and the critical batch size*.
    """
    name = jnp.dtype(dtype).name
    if name not in _DTYPE_NAMES:
        raise ValueError(f"dtype {name} has no rate here; use one of {', '.join(_DTYPE_NAMES)}")
    return _DTYPE_NAMES[name]


def _best_seconds(fn, *args, repeats: int) -> float:
    """The fastest of `repeats` timed calls of fn(*args) (after one untimed call that compiles)."""
    repeats = positive_int("repeats", repeats)
    jax.block_until_ready(fn(*args))
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        best = min(best, time.perf_counter() - start)
    return best


@jax.jit
def _read(x):
    return jnp.sum(x, dtype=jnp.float32)


@jax.jit
def _matmul(a, b):
    return a @ b


@jax.jit
def _layer(x, w_in, w_out):
    return (x @ w_in) @ w_out


def _time_read(n_bytes: int, dtype, repeats: int) -> float:
    """Best seconds of the jitted sum over n_bytes of `dtype` (rounded down to whole elements)."""
    return _best_seconds(_read, jnp.ones(n_bytes // jnp.dtype(dtype).itemsize, dtype), repeats=repeats)


def _time_matmul(n: int, dtype, repeats: int) -> float:
    """Best seconds of a jitted n x n by n x n matmul of `dtype` (seeded normal values)."""
    rng = np.random.default_rng(0)
    a = jnp.asarray(rng.standard_normal((n, n), np.float32), dtype)
    b = jnp.asarray(rng.standard_normal((n, n), np.float32), dtype)
    return _best_seconds(_matmul, a, b, repeats=repeats)


def grow(time_at, size: int, max_size: int) -> tuple:
    """(size, seconds) of the first call that takes at least MIN_CALL_S, doubling `size` from the one given; the
    call at the largest size not above `max_size` if none does. `time_at(size)` returns that call's seconds."""
    size, max_size = positive_int("size", size), positive_int("max_size", max_size)
    while True:
        seconds = time_at(size)
        if seconds >= MIN_CALL_S or 2 * size > max_size:
            return size, seconds
        size *= 2


@dataclass(frozen=True)
class Rates:
    """The two rates of this machine's roofline, each with the size of the call that measured it."""

    bytes_per_s: float  # W: read_bytes / best seconds of the sum
    flops_per_s: float  # C: 2 matmul_n^3 / best seconds of the matmul
    read_bytes: int
    matmul_n: int
    dtype: str  # "fp32", "bf16", ...: the dtype both calls used
    platform: str  # jax's name for the device: "cpu", "gpu", "tpu"


def _device_memory():
    """Bytes JAX may allocate on its first device (its `memory_stats()["bytes_limit"]`), or None if it does not say:
    the read grows to at most a quarter of it, leaving room for XLA's own buffers."""
    return (jax.devices()[0].memory_stats() or {}).get("bytes_limit")


def _read_call(n_bytes, dtype, repeats) -> tuple:
    """(bytes read, best seconds) of the sum: n_bytes fixed, or None to grow from the device's size."""
    itemsize = jnp.dtype(dtype).itemsize
    if n_bytes is None:
        chosen, memory = sizes(), _device_memory()
        limit = chosen.read_bytes_max if memory is None else min(chosen.read_bytes_max, memory // 4)
        n_bytes, seconds = grow(lambda b: _time_read(b, dtype, repeats), chosen.read_bytes, max(limit, 1))
    else:
        n_bytes = positive_int("n_bytes", n_bytes)
        if n_bytes < itemsize:
            raise ValueError(f"n_bytes={n_bytes} holds no {jnp.dtype(dtype).name} value; give at least {itemsize} "
                             "bytes (about 256e6, more than the CPU's caches, to measure memory rather than cache), "
                             "or None to let the device choose")
        seconds = _time_read(n_bytes, dtype, repeats)
    return n_bytes // itemsize * itemsize, seconds


def _matmul_call(n, dtype, repeats) -> tuple:
    """(side, best seconds) of the square matmul: n fixed, or None to grow from the device's size."""
    if n is None:
        chosen = sizes()
        return grow(lambda side: _time_matmul(side, dtype, repeats), chosen.matmul_n, chosen.matmul_n_max)
    n = positive_int("n", n)
    return n, _time_matmul(n, dtype, repeats)


def measure_rates(repeats: int = 5, dtype=None, n_bytes=None, n=None) -> Rates:
    """W and C of this machine in `dtype` (default `native_dtype()`): each call sized by the device (`sizes`, grown
    until a call takes MIN_CALL_S, the read to at most a quarter of the device's memory) unless `n_bytes` (the read)
    or `n` (the matmul's side) fixes it."""
    repeats = positive_int("repeats", repeats)
    dtype = native_dtype() if dtype is None else dtype
    read_bytes, read_s = _read_call(n_bytes, dtype, repeats)
    n, matmul_s = _matmul_call(n, dtype, repeats)
    return Rates(bytes_per_s=read_bytes / read_s, flops_per_s=2.0 * n**3 / matmul_s, read_bytes=read_bytes,
                 matmul_n=n, dtype=dtype_name(dtype), platform=jax.devices()[0].platform)


def measure_memory_bandwidth(n_bytes=None, repeats: int = 5, dtype=None) -> float:
    """B/s this machine streams from memory: a jitted sum (accumulated in float32) over an array of n_bytes of
    `dtype` (default `native_dtype()`), read once; n_bytes None: sized by the device (see `measure_rates`).

    Defined in chapter 1, *Rooflines and the critical batch size*.
    """
    read_bytes, seconds = _read_call(n_bytes, native_dtype() if dtype is None else dtype,
                                     positive_int("repeats", repeats))
    return read_bytes / seconds


def measure_matmul_flops(n=None, repeats: int = 5, dtype=None) -> float:
    """FLOP/s of a jitted n x n by n x n matmul in `dtype` (default `native_dtype()`): 2 n^3 / seconds; n None:
    sized by the device (see `measure_rates`).

    Defined in chapter 1, *Rooflines and the critical batch size*.
    """
    n, seconds = _matmul_call(n, native_dtype() if dtype is None else dtype, positive_int("repeats", repeats))
    return 2.0 * n**3 / seconds


def time_batched_matmul(w, batches, repeats: int = 5) -> tuple:
    """Best seconds of a jitted `x @ w` for x of shape [B, D] (ones, w's dtype) at each B in `batches`: the curve
    whose knee is this machine's critical batch size. Chapter 1's section *Experiment: find the knee on your own CPU*.

    Defined in chapter 1, *Rooflines and the critical batch size*.
    """
    if getattr(w, "ndim", None) != 2:
        raise ValueError(f"w must be a 2-D weight [D, F], got shape {getattr(w, 'shape', None)!r}")
    batches = [positive_int("batch", b) for b in batches]
    if not batches:
        raise ValueError("batches is empty: give the batch sizes to time, e.g. [1, 2, 4, ..., 512]")
    repeats = positive_int("repeats", repeats)
    return tuple(_best_seconds(_matmul, jnp.ones((batch, w.shape[0]), w.dtype), w, repeats=repeats)
                 for batch in batches)


@dataclass(frozen=True)
class BatchRule:
    """Layer time against batch on this machine, beside what its measured rates predict."""

    batches: tuple
    seconds: tuple  # best time of one layer per batch
    flops_per_s: float
    bytes_per_s: float
    weight_bytes: int
    layer_flops_per_token: float  # 4 D F
    weight_dtype: str = "fp32"

    @property
    def predicted_batch(self) -> float:
        """B_crit = C / W x b_w / 2: where the FLOP time reaches the weight read."""
        return critical_batch_from_rates(self.flops_per_s, self.bytes_per_s, self.weight_dtype)

    def predicted_seconds(self, batch: int) -> float:
        """max(weight bytes / W, 4 D F B / C): the roofline of the layer at this batch."""
        return max(self.weight_bytes / self.bytes_per_s, self.layer_flops_per_token * batch / self.flops_per_s)

    @property
    def knee(self) -> float:
        """The smallest measured batch from which every layer time is at least 1.5 x the fastest one
        (`roofline.slowdown_knee`); the roofline puts it at 1.5 B_crit. inf if the time never grows that much."""
        return slowdown_knee(self.batches, self.seconds)


def batch_rule(d_model=None, d_ff=None, batches=None, repeats: int = 3, seed: int = 0, dtype=None) -> BatchRule:
    """Measure C and W (`measure_rates`), then the best time of x[B, D] @ W_in[D, F] @ W_out[F, D] for each batch, in
    `dtype` (default `native_dtype()`); the shape and the batches default to the device's (`sizes`).

    Defined in the appendix *Worked problems*.
    """
    chosen = sizes()
    d = positive_int("d_model", chosen.layer_d_model if d_model is None else d_model)
    f = positive_int("d_ff", chosen.layer_d_ff if d_ff is None else d_ff)
    batches = tuple(positive_int("batch", b) for b in (chosen.layer_batches if batches is None else batches))
    if not batches or list(batches) != sorted(set(batches)):
        raise ValueError(f"batches must be increasing and distinct, got {batches!r}")
    repeats = positive_int("repeats", repeats)
    dtype = native_dtype() if dtype is None else dtype
    rng = np.random.default_rng(seed)
    w_in = jnp.asarray(rng.standard_normal((d, f), np.float32), dtype)
    w_out = jnp.asarray(rng.standard_normal((f, d), np.float32), dtype)
    seconds = tuple(_best_seconds(_layer, jnp.ones((b, d), dtype), w_in, w_out, repeats=repeats) for b in batches)
    rates = measure_rates(repeats=repeats, dtype=dtype)
    return BatchRule(batches=batches, seconds=seconds, flops_per_s=rates.flops_per_s, bytes_per_s=rates.bytes_per_s,
                     weight_bytes=int(w_in.nbytes + w_out.nbytes), layer_flops_per_token=4.0 * d * f,
                     weight_dtype=dtype_name(dtype))
