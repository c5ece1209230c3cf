"""The critical-batch rule measured on the reader's own CPU (runs `roofline.critical_batch_size` on this machine).

The Scaling Book's appendix to its inference chapter times a two-matmul layer (x W_in W_out) on TPU v5e across
batch sizes and finds the step time nearly flat up to about 240 tokens, then growing linearly: below the critical
batch the layer waits on reading its weights, above it on its FLOPs. The rule itself is chip-independent:

    t(B) ~ max(P_bytes / W, 2 B P / C)   ->   flat until B_crit = C / W x bytes_per_weight / 2, then linear.

Here the same experiment runs on the CPU: measure its matmul rate C and memory bandwidth W (best of a few repeats),
predict B_crit for float32 weights (C / W x 4 / 2), and time the layer. The weights must not fit in the CPU's caches,
or the "HBM" read is a cache read; the default layer (D = 1,024, F = 8,192, 64 MB of float32 weights) is larger
than a typical last-level cache. Timings vary from run to run and machine to machine; what should hold anywhere is
the shape: flat, then linear, with the knee within a small factor of the prediction.

Used in the appendix *Worked problems*.
"""

import time
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from .._validate import positive_int


def _best_seconds(fn, *args, repeats: int) -> float:
    """The fastest of `repeats` timed calls (after one untimed call that compiles)."""
    jax.block_until_ready(fn(*args))
    best = float("inf")
    for _ in range(positive_int("repeats", repeats)):
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


def memory_bandwidth(n_bytes: int = 256 * 2**20, repeats: int = 5) -> float:
    """B/s of reading a float32 array of n_bytes once (a jitted sum): the CPU's "HBM" bandwidth."""
    x = jnp.ones(positive_int("n_bytes", n_bytes) // 4, jnp.float32)
    return x.nbytes / _best_seconds(_read, x, repeats=repeats)


def matmul_flops(n: int = 1024, repeats: int = 5) -> float:
    """FLOP/s of a jitted float32 n x n x n matmul: 2 n^3 / time."""
    a = jnp.ones((positive_int("n", n), n), jnp.float32)
    return 2.0 * n**3 / _best_seconds(_matmul, a, a, repeats=repeats)


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
        return self.flops_per_s / self.bytes_per_s * 4 / 2

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
    rng = np.random.default_rng(seed)
    w_in = jnp.asarray(rng.standard_normal((d, f), np.float32))
    w_out = jnp.asarray(rng.standard_normal((f, d), np.float32))
    seconds = tuple(_best_seconds(_layer, jnp.ones((b, d), jnp.float32), w_in, w_out, repeats=repeats)
                    for b in batches)
    return BatchRule(batches=batches, seconds=seconds, flops_per_s=matmul_flops(repeats=repeats),
                     bytes_per_s=memory_bandwidth(repeats=repeats), weight_bytes=int(w_in.nbytes + w_out.nbytes),
                     layer_flops_per_token=4.0 * d * f)
