"""Benchmark (not a test): the roofline experiments on this CPU, with the figures they measure.

Run: .venv/bin/python bench/bench_cpu_roofline.py   (or make bench)

Timings depend on the machine and on whatever else it runs, so `make test` asserts none of them
(tests/tiny/test_measure.py and tests/tiny/test_estimate.py check the same code on synthetic machines with
known answers). This script prints what the timings show, and whether each expectation held on this run:

1. Chapter 1's knee: `time_batched_matmul` over B = 1 .. 512 on a 64 MiB float32 weight, its knee fitted with
   `roofline.fit_batch_roofline`, against (C / W) x 4 / 2 from W and C measured apart (`measure_memory_bandwidth`,
   `measure_matmul_flops`). Expected within `measure.KNEE_FACTOR` either way; the best of KNEE_ATTEMPTS tries.
2. Chapter 11's decode sweep: `decode_sweep` at batches 1 and 32, caches 256 and 2,048, beside the bound priced with
   this machine's constants; `fit_machine_efficiency` on the short caches, then its predicted / measured ratio on
   every point. Expected: no step beats its bound by more than 2x of noise, the fitted points within 1.5x, the
   held-out long caches never predicted more than 2x too slow.
3. The worked problems' critical-batch rule (`measure.batch_rule`): the layer time at each batch, the
   predicted critical batch and the measured knee. Expected: batch 1 within 4x of one weight read, and batch 256
   giving over 3x the throughput of batch 1.
"""

import jax
import jax.numpy as jnp
import numpy as np

from scaling_lib.roofline import critical_batch_from_rates, fit_batch_roofline, matmul_flops
from scaling_lib.tiny import estimate as bench, measure
from scaling_lib.tiny.measure import batch_rule
from scaling_lib.tiny.xla import setup_devices

KNEE_D = KNEE_F = 4096  # chapter 1's weight: 64 MiB of float32, larger than a CPU's last-level cache
KNEE_BATCHES = [2**k for k in range(10)]
KNEE_ATTEMPTS = 3


def verdict(ok: bool) -> str:
    return "as expected" if ok else "NOT as expected"


def knee() -> None:
    factor = measure.KNEE_FACTOR
    w = jax.random.normal(jax.random.key(0), (KNEE_D, KNEE_F), jnp.float32)
    print(f"1. chapter 1's knee: [B, {KNEE_D}] x [{KNEE_D}, {KNEE_F}] float32, B = 1 .. {KNEE_BATCHES[-1]}")
    for attempt in range(1, KNEE_ATTEMPTS + 1):
        bandwidth, flops = measure.measure_memory_bandwidth(repeats=10), measure.measure_matmul_flops()
        fit = fit_batch_roofline(KNEE_BATCHES, measure.time_batched_matmul(w, KNEE_BATCHES))
        predicted = critical_batch_from_rates(flops, bandwidth, "fp32")
        ratio = fit.knee_batch / predicted
        ok = 1 / factor <= ratio <= factor
        print(f"   try {attempt}: W = {bandwidth / 1e9:.1f} GB/s, C = {flops / 1e9:.0f} GFLOP/s measured apart; the "
              f"curve implies W = {w.nbytes / fit.floor_s / 1e9:.1f} GB/s, C = "
              f"{matmul_flops(1, KNEE_D, KNEE_F) / fit.per_row_s / 1e9:.0f} GFLOP/s; knee {fit.knee_batch:.1f} vs "
              f"predicted {predicted:.1f}: ratio {ratio:.2f}, within {factor:g}x: {verdict(ok)}")
        if ok:
            return


def decode_sweep() -> None:
    bandwidth = measure.measure_memory_bandwidth(n_bytes=128e6, repeats=3)
    flops = measure.measure_matmul_flops(n=768, repeats=3)
    timings = bench.decode_sweep(bench.machine_chip(bandwidth, flops), batches=(1, 32), cache_lens=(256, 2048),
                                 repeats=4)
    efficiency = bench.fit_machine_efficiency(timings)
    shortest = min(t.cache_len for t in timings)
    print(f"2. chapter 11's decode sweep: W = {bandwidth / 1e9:.1f} GB/s, C = {flops / 1e9:.0f} GFLOP/s; fitted on the "
          f"{shortest}-token caches: mfu {efficiency.mfu:.2f}, hbm {efficiency.hbm:.2f}")
    for t in timings:
        fitted = t.predicted_with(efficiency).total_s / t.measured_s
        role = "fitted" if t.cache_len == shortest else "held out"
        ok = t.measured_s >= 0.5 * t.predicted.total_s and (1 / 1.5 < fitted < 1.5 if role == "fitted" else fitted < 2)
        print(f"   batch {t.batch:>3}, cache {t.cache_len:>5}: measured {t.measured_s * 1e3:8.3f} ms, "
              f"{t.ratio:5.2f}x the bound; fitted prediction / measured {fitted:.2f} ({role}): {verdict(ok)}")


def critical_batch() -> None:
    rule = batch_rule(batches=(1, 4, 16, 64, 256), repeats=5)
    read = rule.weight_bytes / rule.bytes_per_s
    t = np.asarray(rule.seconds)
    throughput = np.asarray(rule.batches) / t
    print(f"3. the critical-batch rule: C = {rule.flops_per_s / 1e9:.0f} GFLOP/s, W = {rule.bytes_per_s / 1e9:.1f} "
          f"GB/s: predicted critical batch {rule.predicted_batch:.1f}, measured knee {rule.knee:g}")
    for batch, seconds in zip(rule.batches, rule.seconds):
        print(f"   batch {batch:>4}: {seconds * 1e3:8.3f} ms (roofline {rule.predicted_seconds(batch) * 1e3:8.3f} ms)")
    print(f"   batch 1 against one weight read ({read * 1e3:.3f} ms): {t[0] / read:.2f}x, within 4x: "
          f"{verdict(read / 4 < t[0] < 4 * read)}")
    print(f"   throughput at batch {rule.batches[-1]} over batch 1: {throughput[-1] / throughput[0]:.1f}x, over 3x: "
          f"{verdict(throughput[-1] > 3 * throughput[0])}")


def main() -> None:
    setup_devices()  # the notebooks' 8 emulated CPU devices, before JAX starts its backend
    knee()
    decode_sweep()
    critical_batch()


if __name__ == "__main__":
    main()
