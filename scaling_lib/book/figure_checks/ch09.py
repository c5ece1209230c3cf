"""Chapter 9, *Serving engines*: its figures' checks."""

import numpy as np

from .core import close, figure_check, number


@figure_check(r"on 48 TPU v5e: four engines, load")
def _ch9_engines(suptitle, axes, *, results, loads):
    for engine in ("naive", "interleaved", "chunked", "disaggregated"):
        line = axes[0].line(f"^{engine}$")
        close(line.x, [results[(engine, load)].p50_tpot_s * 1e3 for load in loads], f"{engine}: median TPOT")
        close(line.y, [results[(engine, load)].p99_ttft_s for load in loads], f"{engine}: p99 TTFT")


@figure_check(r"^Prefill stalls slow interleaved decoding as load grows$")
def _ch9_stalls(suptitle, axes, *, results, loads, t_pre_mean):
    ax = axes[0]
    for engine in ("naive", "interleaved", "chunked", "disaggregated"):
        line = ax.line(f"^{engine}$")
        close(line.x, loads, f"{engine}: loads")
        close(line.y, [results[(engine, load)].p50_tpot_s * 1e3 for load in loads], f"{engine}: median TPOT")
    model = ax.line(r"^stall model")
    rho = np.asarray(loads, float) * t_pre_mean / 3
    close(model.y, results[("disaggregated", loads[0])].p50_tpot_s * 1e3 / (1 - rho), "the stall model")


@figure_check(r"^Prefill queues stop growing once")
def _ch9_queues(suptitle, axes, *, sweep):
    ax = axes[0]
    for line in ax.lines:
        if line.label.endswith(" requests"):
            n = int(number(line.label.split()[0]))
            close(line.y, [sweep[(n, int(p))].mean_queue_length for p in line.x], line.label)


@figure_check(r"^Prefix caching on interleaved servers")
def _ch9_prefix(suptitle, axes, *, cached_runs):
    ax, runs = axes[0], cached_runs
    close(ax.line(r"^p50 TTFT$").x, np.array(list(runs)) * 100, "cached fractions")
    close(ax.line(r"^p50 TTFT$").y, [r.p50_ttft_s * 1e3 for r in runs.values()], "p50 TTFT")
    close(ax.line(r"^p99 TTFT$").y, [r.p99_ttft_s * 1e3 for r in runs.values()], "p99 TTFT")
    close(ax.line(r"^p50 TPOT x 20$").y, [r.p50_tpot_s * 1e3 * 20 for r in runs.values()], "p50 TPOT x 20")
