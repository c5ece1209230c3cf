"""Benchmark (not a test): the cost of one `estimate.report` and one `roofline.explain_matmul` call, and the size of
the book's live explorers.

Run: .venv/bin/python bench/bench_report.py   (or make bench)
Targets (issue 17): one report call under 1 ms; explain_matmul under 100 ms (it was a test; issue 21 moved it); each explorer's precomputed data under 300 kB per page.
"""

import time

from scaling_lib.book.explorers import roofline_explorer, serving_explorer, step_time_explorer
from scaling_lib.estimate import report
from scaling_lib.roofline import explain_matmul


def main(repeats: int = 500) -> None:
    report("llama3-70b", "h100", 8, batch=64, weight_dtype="fp8")  # warm the imports
    start = time.perf_counter()
    for _ in range(repeats):
        report("llama3-70b", "h100", 8, batch=64, weight_dtype="fp8")
    per_call = (time.perf_counter() - start) / repeats
    print(f"estimate.report: {per_call * 1e3:.3f} ms per call ({repeats} calls)")
    start = time.perf_counter()
    for _ in range(repeats):
        explain_matmul("tpu-v5e", 64, 8192, 8192)
    per_call = (time.perf_counter() - start) / repeats
    print(f"roofline.explain_matmul (chapter 1's explorer, on every slider move; target under 100 ms): "
          f"{per_call * 1e3:.3f} ms per call")
    for build in (roofline_explorer, step_time_explorer, serving_explorer):
        start = time.perf_counter()
        explorer = build()
        print(f"{explorer.name:20s} {explorer.data_bytes / 1e3:6.1f} kB of data, built in "
              f"{time.perf_counter() - start:.2f} s")


if __name__ == "__main__":
    main()
