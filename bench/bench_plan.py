"""Benchmark (not a test): the wall time of `plan.plan`, in-process and as a command including interpreter start.

Run: .venv/bin/python bench/bench_plan.py   (or make bench)
Target (issue 25): the example (LLaMA-3-70B, H100, up to 16 chips, 2,000/500 tokens, TTFT 2 s, TPOT 50 ms, $2.50)
well under a second in-process, under 10 s as a command; also three chips at once.
"""

import subprocess
import sys
import time
from pathlib import Path

from scaling_lib.plan import plan

EXAMPLE = dict(model="llama3-70b", chips="h100", max_chips=16, input_len=2000, output_len=500, ttft=2.0, tpot=0.05,
               prices=2.5)
THREE_CHIPS = {**EXAMPLE, "chips": ["h100", "h200", "tpu-v5e"], "prices": {"h100": 2.5, "h200": 3.5, "tpu-v5e": 1.2}}
COMMAND = [sys.executable, "-m", "scaling_lib", "plan", "--model", "llama3-70b", "--chip", "h100", "--max-chips", "16",
           "--input-len", "2000", "--output-len", "500", "--ttft", "2", "--tpot", "0.05", "--price", "2.5", "--json"]


def _best_of(repeats: int, run) -> tuple:
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - start)
    return min(times), result


def main(repeats: int = 3) -> None:
    for name, args in (("example", EXAMPLE), ("three chips", THREE_CHIPS)):
        seconds, result = _best_of(repeats, lambda: plan(**args))  # each call builds its designs afresh
        print(f"plan, {name:11s}: {seconds * 1e3:7.1f} ms in-process ({result.evaluated:,} steps priced); best: "
              f"{result.best.describe()}")
    seconds, _ = _best_of(repeats, lambda: subprocess.run(COMMAND, check=True, capture_output=True,
                                                          cwd=Path(__file__).resolve().parents[1]))
    print(f"python -m scaling_lib plan (the example): {seconds:.2f} s wall, interpreter start included")


if __name__ == "__main__":
    main()
