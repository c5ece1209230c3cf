"""Benchmark (not a test): the book's accelerator measurements, repeated on whatever accelerator is present.

Run on a machine with a GPU or TPU:

    SCALING_BOOK_DEVICES=accelerator .venv/bin/python bench/bench_accelerator.py --out bench/results/my-gpu.csv

Without SCALING_BOOK_DEVICES=accelerator it measures the CPU (float32, the CPU's sizes, the small CPU decode model):
a check that the script runs, not a measurement of anything the book quotes. `--quick` shrinks every size further.

It writes rows of scaling_lib/data/accelerator_measurements.csv's format (`measurements.write_accelerator_rows`),
the same experiments as the H200 runs stored there, and prints what chapter 1 and chapter 11 read off them through
the same readers (`measurements.accelerator_knee`, `accelerator_decode_sweep`):

1. run "<chip>-<dtype>": W and C in the device's native dtype (`tiny.measure.measure_rates`: each call grown until it
   takes 2 ms), and chapter 1's knee curve x[B, D] @ w[D, F] at the device's sizes (`tiny.measure.sizes`): the
   measured knee (first batch at 1.5x the fastest time) against 1.5 B_crit from the two rates.
2. run "<chip>-book-sweep": chapter 11's decode sweep (`tiny.estimate.decode_sweep`) of the tiny decoder in float32,
   at `measurements.accelerator_sweep_model()` on an accelerator, with W and C measured in float32 and each step
   beside its bound (`estimate.decode_step` on them): the ratio measured / bound, never below 1 if the bound holds.

To add a run to the book, append its rows to scaling_lib/data/accelerator_measurements.csv (keep its source line
honest: the machine, the date, the command) and cite them from the chapter; nothing in `make book` or `make test`
needs an accelerator.
"""

import argparse
import datetime
import os
import platform
import sys

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # the sweep allocates several large caches in turn

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from scaling_lib.hardware import chip_names  # noqa: E402
from scaling_lib.measurements import (AcceleratorRow, accelerator_decode_sweep, accelerator_knee,  # noqa: E402
                                      accelerator_sweep_model, write_accelerator_rows)
from scaling_lib.tiny import estimate, measure, model  # noqa: E402
from scaling_lib.tiny.xla import setup_devices  # noqa: E402

SWEEP_BATCHES, SWEEP_CACHES = (1, 8, 64, 128), (512, 4096)  # the H200 run's grid
CPU_SWEEP_BATCHES, CPU_SWEEP_CACHES = (1, 32), (256, 2048)  # bench_cpu_roofline.py's
QUICK = dict(knee=(512, 512, (1, 4, 16, 64)), sweep=((1, 2), (16,)))


def row(meta: dict, **fields) -> AcceleratorRow:
    """One row: the run's shared fields (chip, date, software, source) with this measurement's."""
    return AcceleratorRow(**{**meta, **fields})


def chip_name(device) -> str:
    """The hardware table's name of `device` when its kind names one ("NVIDIA H200" -> "h200"), else its kind."""
    kind = device.device_kind.lower()
    known = [name for name in chip_names() if name in kind.replace(" ", "-") or name in kind.replace(" ", "")]
    return max(known, key=len) if known else kind.replace(" ", "-")


def measure_rates(dtype, repeats: int, quick: bool) -> measure.Rates:
    """W and C in `dtype`, sized by the device (or small, with --quick)."""
    return measure.measure_rates(repeats=repeats, dtype=dtype, **({"n_bytes": 64 * 2**20, "n": 512} if quick else {}))


def measure_knee(run: str, meta: dict, rates: measure.Rates, repeats: int, quick: bool) -> list:
    dtype = measure.native_dtype()
    sizes = measure.sizes()
    d, f, batches = QUICK["knee"] if quick else (sizes.knee_d_model, sizes.knee_d_ff, sizes.knee_batches)
    w = jax.random.normal(jax.random.key(0), (d, f), dtype)
    seconds = measure.time_batched_matmul(w, batches, repeats=repeats)
    name = rates.dtype
    how = f"best of {repeats} calls after one that compiles; bench/bench_accelerator.py"
    return [row(meta, run=run, experiment="read", dtype=name, size=rates.read_bytes, rate=rates.bytes_per_s,
                           method=f"tiny.measure.measure_rates: a jitted sum over {rates.read_bytes} bytes of {name} "
                                  f"accumulated in float32, grown until a call takes {measure.MIN_CALL_S} s; {how}"),
            row(meta, run=run, experiment="matmul", dtype=name, size=rates.matmul_n,
                           rate=rates.flops_per_s,
                           method=f"tiny.measure.measure_rates: a jitted {rates.matmul_n}-square {name} matmul, grown "
                                  f"until a call takes {measure.MIN_CALL_S} s; {how}")] + [
        row(meta, run=run, experiment="knee", dtype=name, batch=b, d_model=d, d_ff=f, best_s=t,
                       method=f"tiny.measure.time_batched_matmul: a jitted x[B, {d}] @ w[{d}, {f}] in {name}; {how}")
        for b, t in zip(batches, seconds)]


def measure_sweep(run: str, meta: dict, rates: measure.Rates, quick: bool) -> list:
    accelerator = jax.devices()[0].platform != "cpu"
    if quick:
        config, (batches, caches) = model.tiny_config(), QUICK["sweep"]
    elif accelerator:
        config, batches, caches = accelerator_sweep_model(), SWEEP_BATCHES, SWEEP_CACHES
    else:
        config, batches, caches = estimate.bench_config(), CPU_SWEEP_BATCHES, CPU_SWEEP_CACHES
    timings = estimate.decode_sweep(estimate.machine_chip(rates.bytes_per_s, rates.flops_per_s), batches=batches,
                                    cache_lens=caches, repeats=3, config=config)
    c = config
    shape = (f"{c.n_layers} layers, D {c.d_model}, F {c.d_ff}, {c.n_heads} query and {c.n_kv_heads} KV heads of "
             f"{c.head_dim}, V {c.vocab_size}")
    how = "bench/bench_accelerator.py"
    rows = [row(meta, run=run, experiment="read", dtype="fp32", size=rates.read_bytes,
                           rate=rates.bytes_per_s, method=f"tiny.measure.measure_rates in float32, as chapter 11 "
                                                          f"measures W before its sweep; {how}"),
            row(meta, run=run, experiment="matmul", dtype="fp32", size=rates.matmul_n,
                           rate=rates.flops_per_s, method=f"tiny.measure.measure_rates in float32, as chapter 11 "
                                                          f"measures C before its sweep; {how}")]
    return rows + [row(meta, run=run, experiment="decode_step", dtype="fp32", batch=t.batch,
                                  cache_len=t.cache_len, best_s=t.measured_s, bound_s=t.predicted.total_s,
                                  method=f"tiny.estimate.decode_sweep: one decode step of the tiny decoder in float32 "
                                         f"({shape}) over a cache of cache_len slots; fastest of 3 timed steps after "
                                         f"2 untimed ones; bound_s: estimate.decode_step on the measured W and C; {how}")
                   for t in timings]


def report(rows, knee_run: str, sweep_run) -> None:
    """Print what chapter 1 and chapter 11 read off the rows, through the readers the book uses."""
    knee = accelerator_knee(knee_run, rows=rows)
    rates = knee.rates
    print(f"1. {knee_run}: W = {rates.bytes_per_s:.3g} B/s, C = {rates.flops_per_s:.3g} FLOP/s ({rates.dtype}); "
          f"predicted knee 1.5 B_crit = {knee.predicted_knee:.0f}, measured {knee.knee:g}: ratio "
          f"{knee.knee / knee.predicted_knee:.2f} (chapter 1 expects within {measure.KNEE_FACTOR:g}x)")
    for step in accelerator_decode_sweep(sweep_run, rows=rows) if sweep_run else ():
        print(f"2. {sweep_run}: batch {step.batch:>4}, cache {step.cache_len:>5}: measured {step.measured_s * 1e3:8.3f} "
              f"ms, bound {step.bound_s * 1e3:8.3f} ms, ratio {step.ratio:5.2f}"
              f"{'' if step.ratio >= 1 else '  BEATS THE BOUND'}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="CSV file to write (accelerator_measurements.csv's format)")
    parser.add_argument("--repeats", type=int, default=10, help="timed calls per measurement (the best is kept)")
    parser.add_argument("--quick", action="store_true", help="small sizes: check that the script runs")
    parser.add_argument("--no-sweep", action="store_true", help="measure the rates and the knee only")
    args = parser.parse_args(argv)
    setup_devices()  # SCALING_BOOK_DEVICES=accelerator keeps the GPUs or TPUs; otherwise the CPU
    device = jax.devices()[0]
    chip = chip_name(device)
    meta = dict(chip=chip, date=datetime.date.today().isoformat(),
                software=f"JAX {jax.__version__}, {device.client.platform_version.strip()}, Python "
                         f"{platform.python_version()}",
                **dict.fromkeys(("batch", "cache_len", "d_model", "d_ff", "size", "best_s", "median_s", "rate",
                                 "bound_s")),
                source=f"one {device.device_kind} ({device.platform}) running bench/bench_accelerator.py"
                       f"{' --quick' if args.quick else ''} on {datetime.date.today().isoformat()}")
    knee_run = f"{chip}-{measure.dtype_name(measure.native_dtype())}"
    native = measure_rates(measure.native_dtype(), args.repeats, args.quick)
    rows = measure_knee(knee_run, meta, native, args.repeats, args.quick)
    sweep_run = f"{chip}-book-sweep"
    if not args.no_sweep:  # the sweep's model runs in float32: its rates too
        fp32 = native if native.dtype == "fp32" else measure_rates(jnp.float32, args.repeats, args.quick)
        rows += measure_sweep(sweep_run, meta, fp32, args.quick)
    write_accelerator_rows(rows, args.out)
    print(f"wrote {len(rows)} rows to {args.out}")
    report(rows, knee_run, None if args.no_sweep else sweep_run)
    return 0


if __name__ == "__main__":
    sys.exit(main())
