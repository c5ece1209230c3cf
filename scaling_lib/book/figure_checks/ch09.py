"""Chapter 9, *Serving engines*: its figures' checks."""

import numpy as np

from ...load import deployment_engine, load_estimate
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


@figure_check(r"Poisson arrivals up to the saturation rate$")
def _ch9_load_open(suptitle, axes, *, open_model, open_runs, warm, engine, server):
    """The load model's lines recomputed by `load.load_estimate` at the plotted shares of the saturation rate; the
    engine run's markers are the runs' steady-state mean and p99 (the first `warm` requests left out)."""
    saturation = engine.saturation_rate()
    for ax, key, scale in ((axes[0], "ttft", 1.0), (axes[1], "tpot", 1e3)):
        shares = ax.line(r"^mean, load model$").x
        model = [load_estimate(server, engine.input_len, engine.output_len, request_rate=s * saturation)
                 for s in shares]
        close(ax.line(r"^mean, load model$").y, [getattr(m, f"{key}_s") * scale for m in model], f"{key} mean")
        close(ax.line(r"^p99, load model$").y, [getattr(m, f"{key}_p99_s") * scale for m in model], f"{key} p99")
        runs = [getattr(open_runs[float(s)], f"{key}_s")[warm:] * scale for s in shares]
        close(ax.line(r"^mean, engine run$").y, [r.mean() for r in runs], f"{key} run mean")
        close(ax.line(r"^p99, engine run$").y, [np.percentile(r, 99) for r in runs], f"{key} run p99")
        close(shares, sorted(open_model), "the shares of the saturation rate")


@figure_check(r"^A published sweep beside the load model")
def _ch9_load_sweep(suptitle, axes, *, sweep, server):
    """The measured points are `measurements.sweep_rows`; the load model, its bound and the lockstep line are
    recomputed from the library at each plotted concurrency."""
    rows = {row.concurrency: row for row in sweep}
    users = sorted(rows)
    engine = deployment_engine(server, sweep[0].input_len, sweep[0].output_len)
    model = [load_estimate(server, engine.input_len, engine.output_len, concurrency=u) for u in users]
    for ax, key, scale in ((axes[0], "ttft", 1.0), (axes[1], "tpot", 1e3)):
        close(ax.line(r"^measured").x, users, "the clients")
        close(ax.line(r"^measured").y, [getattr(rows[u], f"{key}_s") * scale for u in users], f"measured {key}")
        close(ax.line(r"^load model$").y, [getattr(m, f"{key}_s") * scale for m in model], f"{key}, load model")
        close(ax.line(r"^bound$").y, [getattr(m.bound, f"{key}_s") * scale for m in model], f"{key}, bound")
        close(ax.line(r"^clients in step$").y, [getattr(engine.lockstep(u), f"{key}_s") * scale for u in users],
              f"{key}, clients in step")
