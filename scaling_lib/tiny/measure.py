"""This CPU's own roofline, measured: the book's microbenchmarks in one place.

Every measurement is the best of a few repeats (other work on the machine only ever adds time), after one untimed
call that compiles:

- `measure_memory_bandwidth`: a jitted sum over a large float32 array (it reads every byte once, as a decode step
  reads its weights and cache): bytes / seconds, this machine's W_hbm;
- `measure_matmul_flops`: a jitted float32 square matmul: 2 n^3 / seconds, this machine's C;
- `time_batched_matmul`: `x @ w` over a growing batch. Chapter 1 sets the knee of that curve
  (`roofline.fit_batch_roofline`) against `roofline.critical_batch_from_rates(C, W, "fp32")` from the two rates
  measured apart, within KNEE_FACTOR;
- `batch_rule`: the Scaling Book's critical-batch experiment (the appendix to its inference chapter times a
  two-matmul layer x W_in W_out on TPU v5e across batch sizes: nearly flat up to about 240 tokens, then linear)
  run on this CPU for the appendix *Worked problems*:

      t(B) ~ max(P_bytes / W, 2 B P / C)   ->   flat until B_crit = C / W x bytes_per_weight / 2, then linear.

  The weights must not fit in the CPU's caches, or the "HBM" read is a cache read; the default layer (D = 1,024,
  F = 8,192, 64 MB of float32 weights) is larger than a typical last-level cache.

`tiny.estimate` prices chapter 11's decode steps with the first two (`machine_chip`). Timings vary from run to run
and machine to machine: the notebooks print them in cells nbval ignores, bench/bench_cpu_roofline.py prints what they
show, and tests/tiny/test_measure.py checks this code on synthetic machines with known answers (no test asserts on a
timing). What should hold anywhere is the shape: flat, then linear, with the knee within a small factor of the
prediction.
"""

import time
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from .._validate import positive_int

# How closely the knee of a timed CPU matmul is expected to match (C / W) x b_w / 2 from rates measured apart: within
# this factor either way. Wide, because a CPU is a rough roofline (caches, prefetchers, threads, other processes);
# chapter 1 states it and bench/bench_cpu_roofline.py reports it (a timing: not asserted by any test).
KNEE_FACTOR = 4.0

_FLOAT32_BYTES = 4


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
    return jnp.sum(x)


@jax.jit
def _matmul(a, b):
    return a @ b


@jax.jit
def _layer(x, w_in, w_out):
    return (x @ w_in) @ w_out


def measure_memory_bandwidth(n_bytes: float = 256e6, repeats: int = 5) -> float:
    """B/s this machine streams from memory: a jitted float32 sum over an array of n_bytes (read once).

    Defined in chapter 1, *Rooflines and the critical batch size*.
    """
    n_bytes = positive_int("n_bytes", n_bytes)
    if n_bytes < _FLOAT32_BYTES:
        raise ValueError(f"n_bytes={n_bytes} holds no float32 value; give at least 4 bytes (about 256e6, more than the "
                         "CPU's caches, to measure memory rather than cache)")
    positive_int("repeats", repeats)
    x = jnp.ones(n_bytes // _FLOAT32_BYTES, jnp.float32)
    return x.nbytes / _best_seconds(_read, x, repeats=repeats)


def measure_matmul_flops(n: int = 1024, repeats: int = 5) -> float:
    """FLOP/s of a jitted float32 n x n by n x n matmul: 2 n^3 / seconds.

    Defined in chapter 1, *Rooflines and the critical batch size*.
    """
    n = positive_int("n", n)
    positive_int("repeats", repeats)
    rng = np.random.default_rng(0)
    a = jnp.asarray(rng.standard_normal((n, n), np.float32))
    b = jnp.asarray(rng.standard_normal((n, n), np.float32))
    return 2.0 * n**3 / _best_seconds(_matmul, a, b, repeats=repeats)


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
    """Layer time against batch on this CPU, beside what its measured rates predict."""

    batches: tuple
    seconds: tuple  # best time of one layer per batch
    flops_per_s: float
    bytes_per_s: float
    weight_bytes: int
    layer_flops_per_token: float  # 4 D F

    @property
    def predicted_batch(self) -> float:
        """B_crit = C / W x 4 / 2 for float32 weights: where the FLOP time reaches the weight read."""
        return self.flops_per_s / self.bytes_per_s * _FLOAT32_BYTES / 2

    def predicted_seconds(self, batch: int) -> float:
        """max(weight bytes / W, 4 D F B / C): the roofline of the layer at this batch."""
        return max(self.weight_bytes / self.bytes_per_s, self.layer_flops_per_token * batch / self.flops_per_s)

    @property
    def knee(self) -> float:
        """The smallest measured batch from which every layer time is at least 1.5 x the fastest one (robust to a
        slow outlier at small batch); the roofline puts it at 1.5 B_crit. inf if the time never grows that much."""
        t = np.asarray(self.seconds)
        slow = t >= 1.5 * t.min()
        for i in range(len(t)):
            if slow[i:].all():
                return float(self.batches[i])
        return float("inf")


def batch_rule(d_model: int = 1024, d_ff: int = 8192, batches=(1, 2, 4, 8, 16, 32, 64, 128, 256),
               repeats: int = 3, seed: int = 0) -> BatchRule:
    """Measure C and W, then the best time of x[B, D] @ W_in[D, F] @ W_out[F, D] (float32) for each batch.

    Defined in the appendix *Worked problems*.
    """
    d, f = positive_int("d_model", d_model), positive_int("d_ff", d_ff)
    batches = tuple(positive_int("batch", b) for b in batches)
    if not batches or list(batches) != sorted(set(batches)):
        raise ValueError(f"batches must be increasing and distinct, got {batches!r}")
    repeats = positive_int("repeats", repeats)
    rng = np.random.default_rng(seed)
    w_in = jnp.asarray(rng.standard_normal((d, f), np.float32))
    w_out = jnp.asarray(rng.standard_normal((f, d), np.float32))
    seconds = tuple(_best_seconds(_layer, jnp.ones((b, d), jnp.float32), w_in, w_out, repeats=repeats)
                    for b in batches)
    return BatchRule(batches=batches, seconds=seconds, flops_per_s=measure_matmul_flops(repeats=repeats),
                     bytes_per_s=measure_memory_bandwidth(n_bytes=256 * 2**20, repeats=repeats),
                     weight_bytes=int(w_in.nbytes + w_out.nbytes), layer_flops_per_token=4.0 * d * f)
