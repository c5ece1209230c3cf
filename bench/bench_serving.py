"""Benchmark (not a test): wall time of simulating 10,000 requests with each engine on one core.

Run: .venv/bin/python bench/bench_serving.py
"""

import time

from scaling_lib.simulator import ENGINES, ServingConfig, poisson_workload, simulate, simulate_disaggregated


def main(n_requests: int = 10_000) -> None:
    config = ServingConfig("llama3-70b", "tpu-v5e", n_chips=16, max_batch=32, max_context_len=8192)
    for rate in (2.0, 8.0):
        workload = poisson_workload(rate_per_s=rate, n_requests=n_requests, prompt_len=(256, 4096),
                                    output_len=(16, 1024), seed=0)
        print(f"Poisson arrivals at {rate} requests/s, 4 servers (2 prefill + 2 decode when disaggregated)")
        run(config, workload, n_requests)


def run(config, workload, n_requests):
    for engine in ENGINES:
        start = time.perf_counter()
        if engine == "disaggregated":  # its server counts are simulate_disaggregated's own arguments
            result = simulate_disaggregated(config, workload, n_prefill_servers=2, n_decode_servers=2)
        else:
            result = simulate(config, workload, engine, n_servers=4)
        elapsed = time.perf_counter() - start
        print(f"{engine:14s} {n_requests} requests in {elapsed:.2f} s  "
              f"(p50 TTFT {result.p50_ttft_s:.2f} s, p99 TPOT {result.p99_tpot_s * 1e3:.1f} ms, "
              f"{result.throughput_per_chip:.0f} tok/s/chip)")


if __name__ == "__main__":
    main()
