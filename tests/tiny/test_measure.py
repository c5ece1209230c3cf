"""This CPU's microbenchmarks (scaling_lib.tiny.measure), tested without trusting any clock.

What the timings show on a real CPU (chapter 1's knee, the worked problems' critical-batch rule) depends on the
machine and on whatever else it runs, so `bench/bench_cpu_roofline.py` prints it and no test asserts on a timing.
These tests run the same code on synthetic machines whose answers are known by construction: a fake clock with known
durations, or every timed program taking exactly its roofline time on a machine with known rates C and W:
  a sum over n bytes:            n / W
  a float32 [m, k] x [k, n] matmul: 2 m k n / C
  the layer x W_in W_out:        max(8 D F / W, 4 D F B / C)  (two [D, F] float32 weights; 2 matmuls of 2 D F B)
The measured rates are then C and W, the predicted critical batch C / W x 4 / 2 = 2 C / W, and the knee (the first
batch from which every time is at least 1.5x the fastest) the first grid batch at or above 1.5 x 2 C / W = 3 C / W.
"""

import importlib.util

import jax.numpy as jnp
import numpy as np
import pytest

from scaling_lib.measurements import accelerator_decode_sweep, accelerator_knee, accelerator_rows
from scaling_lib.roofline import critical_batch_from_rates, fit_batch_roofline, matmul_flops
from scaling_lib.tiny import measure
from scaling_lib.tiny.measure import BatchRule, batch_rule
from tests import REPO


class FakeClock:
    """Stands in for the `time` module inside scaling_lib.tiny.measure: each timed call lasts the next of
    `durations` seconds (perf_counter is read once before and once after every timed call)."""

    def __init__(self, durations):
        self.durations, self.now, self.reads = list(durations), 0.0, 0

    def perf_counter(self):
        if self.reads % 2:  # the read after a timed call: that call took the next duration
            self.now += self.durations.pop(0)
        self.reads += 1
        return self.now


def roofline_machine(monkeypatch, flops_per_s, bytes_per_s):
    """Replace each timed program by its roofline time on a machine of these rates (no rate's array is allocated);
    returns the sizes the rates' calls were timed at, in order."""
    tried = {"read": [], "matmul": []}

    def read(n_bytes, dtype, repeats):
        tried["read"].append(n_bytes)
        return n_bytes / bytes_per_s

    def matmul(n, dtype, repeats):
        tried["matmul"].append(n)
        return 2.0 * n**3 / flops_per_s

    def layer(fn, *args, repeats):
        assert fn is measure._layer
        x, w_in, w_out = args
        (batch, d), f = x.shape, w_in.shape[1]
        return max((w_in.nbytes + w_out.nbytes) / bytes_per_s, 4.0 * d * f * batch / flops_per_s)

    monkeypatch.setattr(measure, "_time_read", read)
    monkeypatch.setattr(measure, "_time_matmul", matmul)
    monkeypatch.setattr(measure, "_best_seconds", layer)
    return tried


def test_a_microbenchmark_divides_its_work_by_its_fastest_timed_call_after_an_untimed_warm_up(monkeypatch):
    calls = []
    monkeypatch.setattr(measure, "time", FakeClock([0.5, 0.2, 0.9]))
    assert measure._best_seconds(lambda x: calls.append(x) or x, 1.0, repeats=3) == pytest.approx(0.2)
    assert calls == [1.0] * 4  # one untimed call (it compiles), then three timed ones
    # A sum over n_bytes reads each byte once: W = n_bytes / t. Here 64 MB read in 2 ms (best of 3) = 32 GB/s.
    monkeypatch.setattr(measure, "time", FakeClock([3e-3, 2e-3, 2.5e-3]))
    assert measure.measure_memory_bandwidth(n_bytes=64e6, repeats=3) == pytest.approx(32e9, rel=1e-12)
    # A square matmul of side n does 2 n^3 FLOPs: 2 x 256^3 = 33,554,432 in 1 ms = 33.55 GFLOP/s.
    monkeypatch.setattr(measure, "time", FakeClock([1e-3, 4e-3]))
    assert measure.measure_matmul_flops(n=256, repeats=2) == pytest.approx(2 * 256**3 / 1e-3, rel=1e-12)


GIB = 2**30


# Each rate's call starts at the platform's size and doubles until one call takes MIN_CALL_S = 2 ms (or reaches the
# largest size). Hand derivation, on an H200-like machine (W = 3.95e12 B/s, C = 6.9e14 FLOP/s, shared measurements):
# the read needs 2 ms x 3.95e12 = 7.9e9 bytes, so 256 MiB doubles five times to 8 GiB (2.17 ms); the matmul needs
# n^3 >= 2 ms x 6.9e14 / 2, n >= 8,837, so 1,024 doubles four times to 16,384. On a CPU-like machine (20 GB/s,
# 100 GFLOP/s) the first calls already take 13 ms and 21 ms: nothing grows. A machine too fast for the largest sizes
# stops there (16 GiB, 16,384), or at a quarter of its memory: 4e9 bytes of a 16 GB device stop the read at 2 GiB.
@pytest.mark.parametrize("platform, memory, bytes_per_s, flops_per_s, read_bytes, matmul_n", [
    ("accelerator", 141e9, 3.95e12, 6.9e14, 8 * GIB, 16384),
    ("cpu", None, 2e10, 1e11, 256 * 2**20, 1024),
    ("accelerator", 141e9, 1e16, 1e18, 16 * GIB, 16384),
    ("accelerator", 16e9, 1e16, 1e18, 2 * GIB, 16384),
])
def test_a_call_too_short_to_measure_is_grown_until_it_takes_min_call_s(monkeypatch, platform, memory, bytes_per_s,
                                                                         flops_per_s, read_bytes, matmul_n):
    monkeypatch.setattr(measure, "sizes", lambda device=None: measure.SIZES[platform])
    monkeypatch.setattr(measure, "_device_memory", lambda: memory)
    tried = roofline_machine(monkeypatch, flops_per_s, bytes_per_s)
    rates = measure.measure_rates(repeats=1, dtype=jnp.float32)
    assert (rates.read_bytes, rates.matmul_n) == (read_bytes, matmul_n)
    assert rates.bytes_per_s == pytest.approx(bytes_per_s, rel=1e-12)  # the size cancels: W and C are the machine's
    assert rates.flops_per_s == pytest.approx(flops_per_s, rel=1e-12)
    first = measure.SIZES[platform]
    assert tried["read"] == [first.read_bytes * 2**k for k in range(len(tried["read"]))] and tried["read"][-1] == read_bytes
    assert tried["matmul"] == [first.matmul_n * 2**k for k in range(len(tried["matmul"]))]
    # every call before the last was too short to measure
    assert all(n / bytes_per_s < measure.MIN_CALL_S for n in tried["read"][:-1])
    assert all(2 * n**3 / flops_per_s < measure.MIN_CALL_S for n in tried["matmul"][:-1])


class StandInDevice:
    def __init__(self, platform):
        self.platform = platform


@pytest.mark.parametrize("platform, dtype, name, sizes", [
    ("cpu", jnp.float32, "fp32", "cpu"), ("gpu", jnp.bfloat16, "bf16", "accelerator"),
    ("tpu", jnp.bfloat16, "bf16", "accelerator"),
])
def test_a_gpu_or_tpu_computes_in_bf16_at_accelerator_sizes_and_a_cpu_in_float32(platform, dtype, name, sizes):
    device = StandInDevice(platform)
    assert measure.native_dtype(device) == dtype and measure.dtype_name(measure.native_dtype(device)) == name
    assert measure.sizes(device) == measure.SIZES[sizes]
    assert measure.native_dtype() == jnp.float32  # the 8 emulated devices of the tests are CPUs


@pytest.mark.parametrize("call, argument", [
    (lambda: measure.measure_memory_bandwidth(1e6, repeats=0), "repeats"),
    (lambda: measure.measure_memory_bandwidth(0), "n_bytes"),
    (lambda: measure.measure_memory_bandwidth(3), "n_bytes"),
    (lambda: measure.measure_memory_bandwidth(2.5e6 + 0.5), "n_bytes"),
    (lambda: measure.measure_matmul_flops(0), "n"),
    (lambda: measure.measure_matmul_flops(64, repeats=-1), "repeats"),
    (lambda: measure.time_batched_matmul(jnp.ones((4, 4)), [1], repeats=0), "repeats"),
    (lambda: measure.time_batched_matmul(jnp.ones(4), [1]), "2-D"),
    (lambda: measure.time_batched_matmul(jnp.ones((4, 4)), [0]), "batch"),
    (lambda: measure.time_batched_matmul(jnp.ones((4, 4)), []), "empty"),
    (lambda: measure.batch_rule(d_model=8, d_ff=8, batches=(1,), repeats=0), "repeats"),
    (lambda: measure.batch_rule(batches=(4, 2)), "increasing"),
    (lambda: measure._best_seconds(lambda: 0.0, repeats=0), "repeats"),
    (lambda: measure.dtype_name(jnp.int8), "dtype int8"),
    (lambda: measure.grow(lambda size: 1.0, 0, 8), "size"),
])
def test_every_microbenchmark_refuses_what_would_measure_nothing(call, argument):
    # measure_memory_bandwidth(1e6, repeats=0) used to return 0.0 B/s: no call was timed, so the best was inf.
    with pytest.raises(ValueError, match=argument):
        call()


# Chapter 1's experiment on a synthetic roofline machine: reading the [D, F] float32 weight takes 4 D F / W, each row
# of the batch 2 D F / C; a call takes the larger. The knee fitted to the curve must then be (C / W) x 4 / 2, the
# prediction from the two rates (hand derivation: t_0 / t_1 = (4 D F / W) / (2 D F / C) = 2 C / W).
KNEE_BATCHES = [2**k for k in range(10)]  # 1 .. 512, as in chapter 1


@pytest.mark.parametrize("flops_per_s, bytes_per_s", [(2e11, 2e10), (1e11, 4e10), (5e11, 1e10)])
def test_the_knee_of_a_roofline_machine_is_the_critical_batch_from_its_rates(monkeypatch, flops_per_s, bytes_per_s):
    d, f = 64, 32
    w = jnp.ones((d, f), jnp.float32)
    per_call = [max(4 * d * f / bytes_per_s, matmul_flops(b, d, f) / flops_per_s) for b in KNEE_BATCHES]
    repeats = 2
    monkeypatch.setattr(measure, "time", FakeClock([t for t in per_call for _ in range(repeats)]))
    seconds = measure.time_batched_matmul(w, KNEE_BATCHES, repeats=repeats)
    assert seconds == pytest.approx(per_call, rel=1e-9)
    fit = fit_batch_roofline(KNEE_BATCHES, seconds)
    assert fit.knee_batch == pytest.approx(critical_batch_from_rates(flops_per_s, bytes_per_s, "fp32"), rel=1e-9)
    assert fit.knee_batch == pytest.approx(2 * flops_per_s / bytes_per_s, rel=1e-9)
    # The floor and the slope give back the machine's own W and C (chapter 1 prints both beside the measured ones).
    assert w.nbytes / fit.floor_s == pytest.approx(bytes_per_s, rel=1e-9)
    assert matmul_flops(1, d, f) / fit.per_row_s == pytest.approx(flops_per_s, rel=1e-9)


@pytest.mark.parametrize("flops_per_s, bytes_per_s, knee", [
    (2e11, 2e10, 32),  # 2 C / W = 20, so 1.5 x that = 30: the first grid batch at or above is 32
    (6.7e10, 1.1e10, 32),  # the worked-problems run: 2 C / W = 12.2, 1.5 x = 18.3 -> 32
    (4e11, 1e10, 128),  # 2 C / W = 80, 1.5 x = 120 -> 128
])
def test_the_rule_on_a_roofline_machine_finds_its_rates_and_its_knee(monkeypatch, flops_per_s, bytes_per_s, knee):
    roofline_machine(monkeypatch, flops_per_s, bytes_per_s)
    d, f = 64, 256
    rule = batch_rule(d_model=d, d_ff=f, batches=(1, 2, 4, 8, 16, 32, 64, 128, 256), repeats=1)
    assert rule.flops_per_s == pytest.approx(flops_per_s, rel=1e-12)
    assert rule.bytes_per_s == pytest.approx(bytes_per_s, rel=1e-12)
    assert rule.weight_bytes == 2 * d * f * 4 and rule.layer_flops_per_token == 4.0 * d * f
    assert rule.predicted_batch == pytest.approx(critical_batch_from_rates(flops_per_s, bytes_per_s, "fp32"))
    assert rule.predicted_batch == pytest.approx(2 * flops_per_s / bytes_per_s)
    assert rule.knee == knee
    for batch, seconds in zip(rule.batches, rule.seconds):  # the measured curve is the roofline itself
        assert rule.predicted_seconds(batch) == pytest.approx(seconds, rel=1e-12)
    # Below the critical batch the layer costs one read of its weights; batching is nearly free there.
    read = rule.weight_bytes / rule.bytes_per_s
    assert all(t == pytest.approx(read) for b, t in zip(rule.batches, rule.seconds) if b <= rule.predicted_batch)


def test_the_knee_is_the_first_batch_from_which_every_time_is_slow_and_a_flat_machine_has_none(monkeypatch):
    fake = BatchRule(batches=(1, 2, 4, 8, 16), seconds=(1.0, 1.8, 0.9, 1.0, 3.0), flops_per_s=1.0, bytes_per_s=1.0,
                     weight_bytes=1, layer_flops_per_token=1.0)
    assert fake.knee == 16  # the outlier at 2 does not count
    # bf16 weights halve B_crit = C / W x b_w / 2 against float32's
    assert BatchRule(**{**fake.__dict__, "weight_dtype": "bf16"}).predicted_batch == fake.predicted_batch / 2
    roofline_machine(monkeypatch, 1e15, 1e9)  # 2 C / W = 2e6: far beyond the largest batch timed
    assert batch_rule(d_model=16, d_ff=32, batches=(1, 8, 64), repeats=1).knee == float("inf")


def test_the_real_layer_and_matmuls_run_and_are_timed():
    # The real timings: only that each batch was timed (no bound on how long it took).
    rule = batch_rule(d_model=32, d_ff=64, batches=(1, 4), repeats=1)
    assert len(rule.seconds) == 2 and all(np.isfinite(t) and t > 0 for t in rule.seconds)
    assert all(t > 0 for t in measure.time_batched_matmul(jnp.ones((8, 8)), [1, 2], repeats=1))


def test_the_accelerator_bench_writes_rows_the_books_readers_read(tmp_path, capsys):
    # bench/bench_accelerator.py on this CPU at its smallest sizes: the file it writes has the stored H200 runs'
    # format, and the readers chapters 1 and 11 use take its runs (no assertion on what the timings are).
    spec = importlib.util.spec_from_file_location("bench_accelerator", REPO / "bench" / "bench_accelerator.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.main(["--out", str(tmp_path / "run.csv"), "--quick", "--repeats", "1"]) == 0
    rows = accelerator_rows(tmp_path / "run.csv")
    assert {(r.run, r.experiment) for r in rows} == {("cpu-fp32", "read"), ("cpu-fp32", "matmul"), ("cpu-fp32", "knee"),
                                                     ("cpu-book-sweep", "read"), ("cpu-book-sweep", "matmul"),
                                                     ("cpu-book-sweep", "decode_step")}
    assert all(r.date and r.software.startswith("JAX") and r.method and r.source for r in rows)
    assert accelerator_knee("cpu-fp32", rows=rows).batches == (1, 4, 16, 64)
    steps = accelerator_decode_sweep("cpu-book-sweep", rows=rows)
    assert [(s.batch, s.cache_len) for s in steps] == [(1, 16), (2, 16)]
    assert all(s.measured_s > 0 and s.bound_s > 0 for s in steps)
    assert "cpu-book-sweep" in capsys.readouterr().out
