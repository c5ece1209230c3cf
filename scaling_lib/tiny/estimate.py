"""This machine as a measured system: what `scaling_lib.estimate` predicts for a decode step, run on the reader's CPU.

`tiny.measure` measures this machine's memory bandwidth W_hbm and matmul rate C (chapter 1 uses them for its
roofline experiment); `machine_chip` makes a `hardware.Chip` of the two, and `decode_sweep` times the jitted decode
step of `tiny.model` (its cache donated, so it is updated in place) across batch sizes and cache lengths, each beside
`estimate.decode_step` priced on that chip. The model is bigger than `tiny_config` (`bench_config`, about 45 MB of
float32 weights) so that its weights do not sit in the CPU's caches, as a real model's do not sit in a GPU's.

`fit_machine_efficiency` then does on this machine what `calibration.fit_typical` does with published GPU rows:
fit an `estimate.Efficiency` (mfu, hbm) on the shortest-cache steps and predict the longer ones, whose larger KV
read the fit never saw. Timings vary from run to run and machine to machine: chapter 11 prints them in cells nbval
ignores, bench/bench_cpu_roofline.py prints what they show, and tests/tiny/test_estimate.py checks this code on
synthetic machines with known answers (no test asserts on a timing).
"""

import os
import time
from dataclasses import dataclass

import jax
import jax.numpy as jnp

from .._validate import positive_int
from ..calibration import fit_efficiency
from ..estimate import Deployment, Efficiency, StepEstimate, decode_step as estimate_decode_step
from ..hardware import Chip
from ..models import Transformer
from . import model


def machine_chip(memory_bandwidth: float, matmul_flops: float) -> Chip:
    """This machine as a `hardware.Chip`: the measured constants, float32 math, its RAM as capacity, no network.

    Defined in chapter 11, *How close do real systems come?*.
    """
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return Chip(name="this-cpu", peak_flops_table=(("fp32", float(matmul_flops)),),
                hbm_bandwidth=float(memory_bandwidth), hbm_capacity=float(ram), topology=None,
                source="measured by scaling_lib.tiny.estimate on this machine (chapter 11)")


def bench_config() -> Transformer:
    """The decode model of the sweep: 2 layers, D = 512, F = 2,048, 8 query heads sharing 2 KV heads of 64, V = 4,096
    (about 11M parameters, 45 MB in float32: more than a laptop CPU's last-level cache).

    Defined in chapter 11, *How close do real systems come?*.
    """
    return Transformer(n_layers=2, d_model=512, d_ff=2048, n_heads=8, n_kv_heads=2, head_dim=64, vocab_size=4096,
                       name="bench", source="scaling_lib.tiny.estimate: a decode model sized for CPU timing")


@dataclass(frozen=True)
class DecodeTiming:
    """One decode step measured beside its estimate on this machine."""

    batch: int
    cache_len: int
    measured_s: float  # the fastest of the timed steps
    deployment: Deployment  # the model on this machine's `machine_chip`, float32 throughout

    @property
    def predicted(self) -> StepEstimate:
        """estimate.decode_step with this machine's constants: the bound."""
        return self.predicted_with(None)

    def predicted_with(self, efficiency) -> StepEstimate:
        """estimate.decode_step at this batch and cache length, with `efficiency` (None: the bound)."""
        return estimate_decode_step(self.deployment, self.batch, self.cache_len, efficiency)

    @property
    def ratio(self) -> float:
        """measured / bound: at least about 1 if the estimate is a bound; how far from it the step runs."""
        return self.measured_s / self.predicted.total_s


def time_decode_step(params: model.Params, batch: int, cache_len: int, repeats: int = 5) -> float:
    """Seconds of the fastest of `repeats` calls of `model.decode_step` (jitted, cache donated) for `batch` sequences
    in a cache of cache_len slots. Every step attends to all cache_len slots (masked past each sequence's position), so its cost does not
    depend on the positions; they start near the end so that every timed step has room."""
    repeats = positive_int("repeats", repeats)
    cfg = params.config
    shape = (cfg.n_layers, batch, cache_len, cfg.n_kv_heads, cfg.head_dim)
    cache = model.KVCache(jnp.zeros(shape, jnp.float32), jnp.zeros(shape, jnp.float32),
                          jnp.full((batch,), cache_len - repeats - 3, jnp.int32))
    token = jnp.zeros((batch,), jnp.int32)
    for _ in range(2):  # compile, then one warm step
        logits, cache = model.decode_step(params, token, cache)
    jax.block_until_ready(logits)
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        logits, cache = model.decode_step(params, token, cache)
        jax.block_until_ready(logits)
        seconds.append(time.perf_counter() - start)
    return float(min(seconds))


def decode_sweep(chip: Chip, batches=(1, 32), cache_lens=(256, 2048), repeats: int = 3, config=None) -> tuple:
    """`time_decode_step` for every (batch, cache_len), each beside `estimate.decode_step` on `chip` (float32
    weights, cache and math): a tuple of `DecodeTiming`.

    Defined in chapter 11, *How close do real systems come?*.
    """
    cfg = bench_config() if config is None else config
    params = model.init_params(cfg, seed=0)
    deployment = Deployment(cfg, chip, 1, weight_dtype="fp32", kv_dtype="fp32", compute_dtype="fp32",
                            activation_dtype="fp32")
    time_decode_step(params, batches[0], cache_lens[0], repeats)  # untimed: a process's first steps run slow
    return tuple(DecodeTiming(batch, cache_len, time_decode_step(params, batch, cache_len, repeats), deployment)
                 for batch in batches for cache_len in cache_lens)


def fit_machine_efficiency(timings) -> Efficiency:
    """The Efficiency (mfu, hbm; network unused on one device) that best predicts the steps with the shortest cache
    (`calibration.fit_efficiency`); the longer caches are left out to validate it.

    Defined in chapter 11, *How close do real systems come?*.
    """
    timings = tuple(timings)
    if not timings:
        raise ValueError("no timings to fit; run decode_sweep first")
    shortest = min(t.cache_len for t in timings)
    fit_on = [t for t in timings if t.cache_len == shortest]
    return fit_efficiency(lambda eff: [t.predicted_with(eff).total_s / t.measured_s for t in fit_on],
                          fields=("mfu", "hbm"))
