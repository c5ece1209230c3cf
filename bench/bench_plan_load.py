"""Benchmark (not a test): the wall time of `plan.plan` with p99 targets and a load, of `load.load_estimate`, and of
the step-by-step runs (`simulator.burst_estimate`, `simulator.benchmark_estimate`).

Run: .venv/bin/python bench/bench_plan_load.py
Target: `plan` with a load under 2 s on 2 cores (each of the three below: MLPerf-style p99 targets alone, with a
Poisson rate, with a closed-loop concurrency), on LLaMA-3-70B over H100 and H200 up to 16 chips; one load estimate
well under 100 ms. Timings on a shared machine are only meaningful when it is idle: the script prints the load
average beside them, and the CPU time of the process (which contention inflates less than the wall time).
"""

import os
import time

from scaling_lib.estimate import Deployment
from scaling_lib.load import load_estimate
from scaling_lib.simulator import benchmark_estimate, burst_estimate
from scaling_lib.plan import plan

SPACE = dict(model="llama3-70b", chips=["h100", "h200"], max_chips=16, input_len=2000, output_len=500,
             prices={"h100": 2.5, "h200": 3.5})
CASES = {"p99 targets": dict(ttft_p99=2.0, tpot_p99=0.2),
         "10 requests/s": dict(request_rate=10.0, ttft_p99=2.0, tpot_p99=0.1),
         "200 clients": dict(concurrency=200, ttft_p99=5.0, tpot_p99=0.1)}


def _best_of(repeats: int, run) -> tuple:
    """(least wall seconds, least CPU seconds, the last result) over `repeats` runs."""
    walls, cpus, result = [], [], None
    for _ in range(repeats):
        start, cpu = time.perf_counter(), time.process_time()
        result = run()
        walls.append(time.perf_counter() - start)
        cpus.append(time.process_time() - cpu)
    return min(walls), min(cpus), result


def main(repeats: int = 3) -> None:
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    for name, load in CASES.items():
        seconds, cpu, result = _best_of(repeats, lambda: plan(**SPACE, **load))  # each call prices afresh
        print(f"plan, {name:13s}: {seconds:5.2f} s wall, {cpu:5.2f} s CPU ({result.evaluated:,} steps priced); best: "
              f"{result.best.describe()}, up to {result.best.max_request_rate:.3g} requests/s")
    deployment = Deployment("llama3-70b", "h100", 8, weight_dtype="fp8", compute_dtype="fp8", tensor_parallel=4)
    for load in (dict(concurrency=64), dict(request_rate=4.0)):
        seconds, cpu, _ = _best_of(repeats, lambda: load_estimate(deployment, 2000, 500, **load))
        print(f"load_estimate, {load}: {seconds * 1e3:.1f} ms wall, {cpu * 1e3:.1f} ms CPU")
    for requests in (100, 10_000):  # every request sent at once, run step by step
        seconds, cpu, _ = _best_of(repeats, lambda: burst_estimate(deployment, 2000, 500, requests))
        print(f"burst_estimate, {requests:,} requests: {seconds * 1e3:.1f} ms wall, {cpu * 1e3:.1f} ms CPU")
    for schedule in ("mixed", "prefill-first"):  # a closed-loop benchmark whose 64 clients start together
        seconds, cpu, _ = _best_of(repeats, lambda: benchmark_estimate(deployment, 2000, 500, 64, 3000,
                                                                       schedule=schedule))
        print(f"benchmark_estimate, 64 clients, 3,000 requests, {schedule}: {seconds * 1e3:.1f} ms wall, "
              f"{cpu * 1e3:.1f} ms CPU")


if __name__ == "__main__":
    main()
