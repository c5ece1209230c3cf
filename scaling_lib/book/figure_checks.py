"""Every figure of the book checks its own plotted data against the library before it is shown.

nbval compares a notebook's text outputs but not its PNGs, so a plotting bug (the wrong series, a unit off by 1e3, a
curve for the wrong chip) would never fail a test. Here each chapter figure has a check, found by its title, that
reads the data off the matplotlib artists (line x/y, bar heights, block rectangles: `capture`) and compares it with
values recomputed by `scaling_lib` (to 1e-9 relative, since both sides compute the same numbers). `install()` (called
by `book.notebook.setup()`) wraps `plt.show` so the check runs when the figure is shown: a wrong figure raises in its
cell, which fails nbval and the strict book build. With SCALING_BOOK_FIGURES=strict in the environment (the test
suite sets it) a figure without a check raises too, so every figure is covered; a reader's own figures are left
alone.

A check may read the notebook's inputs (a config, a list of loads, the simulation results it plots) from the
kernel's namespace; what it compares against is always a library computation, never the plotted array itself.
"""

import os
import re
import sys
from dataclasses import dataclass, field

import matplotlib.pyplot as plt
import numpy as np

from ..calibration import all_rows, compare, group_of, split_of
from ..estimate import BOUND, TYPICAL
from ..flops import forward_flops, generation_flops_curve
from ..frontier import measured_mfu, measured_step_s, pareto_frontier, sweep
from ..hardware import get_chip
from ..hops import cube_torus, decode_collective_latency, torus_diameter
from ..inference import (decode_step_time, decode_step_time_kv_heads, explain_decode, kv_compute_crossover_context,
                         prefill_time)
from ..kv_levers import kv_lever_table, local_global_kv_bytes
from ..layouts import comm_volume_curves, ffn_comm_time, ffn_comm_volume
from ..measurements import pope_rows, trtllm_rows
from ..memory import kv_bytes_per_token, kv_cache_bytes, max_batch_size, memory_footprint, param_bytes
from ..models import get_model
from ..moe import routing_all_to_all
from ..plan import plan
from ..roofline import (attainable_flops, attention_intensity, critical_batch_from_rates, critical_batch_size,
                        explain_matmul, fit_batch_roofline, matmul_flops, matmul_intensity, ridge_point)
from ..serving import prefill_latency
from ..sharding import beta, decode_step_components, latency_bound_bytes, max_decode_model_parallelism
from ..speculative import best_lookahead, expected_tokens_per_step, roofline_speedup, speedup
from ..tiny.engine import ServeResult
from ..tiny.layouts import FFN_SPECS
from ..tiny.xla import device_blocks

STRICT_ENV = "SCALING_BOOK_FIGURES"
RTOL = 1e-9


class FigureDataError(AssertionError):
    """A figure's plotted data disagrees with the library (or, in strict mode, has no check)."""


# ---------------------------------------------------------------------------------------------- reading a figure
@dataclass
class Line:
    label: str  # "" for an unlabelled line
    x: np.ndarray
    y: np.ndarray
    color: tuple


@dataclass
class Axes:
    title: str
    lines: list
    bars: dict  # container label -> [(x, y, width, height)] of its rectangles
    blocks: list  # rectangles drawn as patches outside bar containers: (x, y, width, height, text inside)
    xticklabels: list
    yticklabels: list
    points: dict = field(default_factory=dict)  # scatter label -> [N, 2] offsets
    raw: object = field(repr=False, default=None)

    def line(self, pattern: str) -> Line:
        found = [line for line in self.lines if re.search(pattern, line.label)]
        if len(found) != 1:
            raise FigureDataError(f"figure '{self.title}': expected one line labelled like {pattern!r}, found "
                                  f"{[line.label for line in found] or 'none'}")
        return found[0]


def capture(fig) -> tuple:
    """(suptitle, [Axes]) with every line, bar and rectangle of the figure as plain arrays."""
    suptitle = fig.get_suptitle()
    out = []
    for ax in fig.axes:
        lines = [Line("" if line.get_label().startswith("_") else line.get_label(),
                      np.asarray(line.get_xdata(), float), np.asarray(line.get_ydata(), float),
                      tuple(np.round(plt.matplotlib.colors.to_rgba(line.get_color()), 6)))
                 for line in ax.get_lines()]
        bars, in_bars = {}, set()
        for container in ax.containers:
            rects = [(p.get_x(), p.get_y(), p.get_width(), p.get_height()) for p in container.patches]
            bars[container.get_label()] = rects
            in_bars.update(id(p) for p in container.patches)
        texts = [(t.get_position(), t.get_text()) for t in ax.texts]
        blocks = []
        for patch in ax.patches:
            if id(patch) in in_bars or not hasattr(patch, "get_width"):
                continue
            x, y, w, h = patch.get_x(), patch.get_y(), patch.get_width(), patch.get_height()
            inside = [s for (tx, ty), s in texts if x <= tx <= x + w and y <= ty <= y + h]
            blocks.append((x, y, w, h, inside[0] if inside else ""))
        points = {c.get_label(): np.asarray(c.get_offsets(), float) for c in ax.collections
                  if hasattr(c, "get_offsets") and not c.get_label().startswith("_")}
        out.append(Axes(ax.get_title(), lines, bars, blocks, [t.get_text() for t in ax.get_xticklabels()],
                        [t.get_text() for t in ax.get_yticklabels()], points, ax))
    return suptitle, out


def close(actual, expected, what: str, rtol: float = RTOL):
    """Raise FigureDataError unless the arrays agree to rtol (and have the same length)."""
    actual, expected = np.asarray(actual, float), np.asarray(expected, float)
    if actual.shape != expected.shape:
        raise FigureDataError(f"{what}: plotted {actual.shape[0] if actual.ndim else 1} values, expected "
                              f"{expected.shape[0] if expected.ndim else 1}")
    if not np.allclose(actual, expected, rtol=rtol, atol=0):
        worst = int(np.argmax(np.abs(actual - expected) / np.maximum(np.abs(expected), 1e-300)))
        raise FigureDataError(f"{what}: plotted {actual.flat[worst]!r} where the library gives "
                              f"{expected.flat[worst]!r} (point {worst})")


def _vline(line: Line) -> float:
    return float(line.x[0])


def _hline(line: Line) -> float:
    return float(line.y[0])


def _number(text: str) -> float:
    return float(text.replace(",", ""))


# ---------------------------------------------------------------------------------------------- the registry
CHECKS = []  # (compiled title pattern, function(suptitle, axes, namespace))


def figure_check(pattern: str):
    """Register a check for the figures whose suptitle or any axes title matches `pattern` (re.search)."""
    def register(function):
        CHECKS.append((re.compile(pattern), function))
        return function
    return register


def checks_for(suptitle: str, axes: list) -> list:
    titles = [suptitle] + [a.title for a in axes]
    return [function for pattern, function in CHECKS if any(pattern.search(t) for t in titles if t)]


def check_figure(fig, namespace=None, strict: bool | None = None) -> int:
    """Run every check whose title pattern matches `fig`; returns how many ran. FigureDataError on a mismatch, or,
    when strict (default: SCALING_BOOK_FIGURES=strict), when no check matches."""
    strict = os.environ.get(STRICT_ENV, "") == "strict" if strict is None else strict
    suptitle, axes = capture(fig)
    found = checks_for(suptitle, axes)
    if not found and strict:
        titles = [t for t in [suptitle] + [a.title for a in axes] if t]
        raise FigureDataError(f"figure {titles} has no data check; add one to scaling_lib.book.figure_checks")
    for function in found:
        function(suptitle, axes, namespace or {})
    return len(found)


_ORIGINAL_SHOW = None


def install():
    """Check every figure when it is shown (wraps `matplotlib.pyplot.show`; idempotent)."""
    global _ORIGINAL_SHOW
    if _ORIGINAL_SHOW is not None:
        return
    _ORIGINAL_SHOW = plt.show

    def show(*args, **kwargs):
        try:
            namespace = get_ipython().user_ns  # noqa: F821 (defined inside IPython)
        except NameError:
            namespace = {}
        for number in plt.get_fignums():
            check_figure(plt.figure(number), namespace)
        return _ORIGINAL_SHOW(*args, **kwargs)

    plt.show = show


# ---------------------------------------------------------------------------------------------- chapter 1
def _roofline_line(line: Line, chip, dtype="bf16", what=""):
    close(line.y, [attainable_flops(float(i), chip, dtype) for i in line.x], what or f"roofline of {chip}")


@figure_check(r"^Rooflines: memory-bound ramp")
def _ch1_rooflines(suptitle, axes, ns):
    ax = axes[0]
    names = {label: name for name, label in ns.get("roofline_chips", {}).items()} or {
        "TPU v5e": "tpu-v5e", "TPU v6e": "tpu-v6e", "Ironwood (TPU7x)": "ironwood", "H100": "h100"}
    for label, chip in names.items():
        _roofline_line(ax.line(f"^{re.escape(label)}$"), chip)
    dots = [line for line in ax.lines if not line.label and len(line.x) == 1]
    expected = sorted((ridge_point(c), get_chip(c).peak_flops("bf16")) for c in names.values())
    close(sorted((line.x[0], line.y[0]) for line in dots), expected, "ridge-point dots")


@figure_check(r"^\S+, (bf16|fp8|int8|int4|fp32) weights, (bf16|fp8|int8) math$")
def _ch1_matmul_on_roofline(suptitle, axes, ns):
    for ax in axes:
        chip, weights, math_dtype = re.match(r"^(\S+), (\S+) weights, (\S+) math$", ax.title).groups()
        _roofline_line(ax.line(rf"^{re.escape(chip)} \({math_dtype}\)$"), chip, math_dtype)
        point = ax.line(r"^B = \d+: ")
        batch, bound = re.match(r"^B = (\d+): (\w+)-bound$", point.label).groups()
        report = explain_matmul(chip, int(batch), 8192, 8192, weights, math_dtype)
        close([point.x[0], point.y[0]], [report.intensity, report.attainable_flops], f"{ax.title}: the matmul")
        if bound != report.time.bound:
            raise FigureDataError(f"{ax.title}: labelled {bound}-bound, the library says {report.time.bound}")


@figure_check(r"^Attention intensity: prefill grows")
def _ch1_attention_intensity(suptitle, axes, ns):
    ax = axes[0]
    prefill = ax.line(r"^prefill, MHA")
    close(prefill.y, [attention_intensity(int(t), int(t)) for t in prefill.x], "prefill attention intensity")
    decode = ax.line(r"^decode, MHA")
    close(decode.y, [attention_intensity(1, int(s)) for s in decode.x], "decode attention intensity")
    gqa = ax.line(r"^decode, GQA")
    group = int(re.search(r"G = (\d+)", gqa.label).group(1))
    close(gqa.y, [attention_intensity(1, int(s), group) for s in gqa.x], "GQA decode attention intensity")
    for line in ax.lines:
        if line.label.startswith("ridge point, "):
            close(_hline(line), ridge_point(line.label.split(", ")[1]), line.label)


@figure_check(r"^float32 \[B, \d+\] x \[\d+, \d+\] on this CPU$")
def _ch1_measured_knee(suptitle, axes, ns):
    """The predicted lines come from W and C measured apart from the curve (read from the notebook), the measured knee
    from fitting the plotted points."""
    ax = axes[0]
    measured = ax.line(r"^measured")
    bandwidth, flops = ns["cpu_bandwidth"], ns["cpu_flops"]
    weight_bytes, row_flops = ns["w_cpu"].nbytes, matmul_flops(1, ns["D_CPU"], ns["F_CPU"])
    close(ax.line(r"^predicted floor").y, np.full(len(measured.x), weight_bytes / bandwidth * 1e3), "the floor")
    close(ax.line(r"^predicted slope").y, measured.x * row_flops / flops * 1e3, "the slope")
    close(_vline(ax.line(r"^predicted knee")), critical_batch_from_rates(flops, bandwidth, "fp32"), "the knee")
    fit = fit_batch_roofline([int(b) for b in measured.x], list(measured.y / 1e3))
    close(_vline(ax.line(r"^knee of the measured")), fit.knee_batch, "the measured knee")


@figure_check(r"^Doubling HBM bandwidth moves the ramp")
def _ch1_faster_hbm(suptitle, axes, ns):
    ax, v5e = axes[0], get_chip("tpu-v5e")
    _roofline_line(ax.line(r"^tpu-v5e$"), v5e)
    faster = ax.line(r"^tpu-v5e-2x-hbm$")
    close(faster.y, np.minimum(v5e.peak_flops("bf16"), faster.x * 2 * v5e.hbm_bandwidth), "v5e with 2x HBM")


# ---------------------------------------------------------------------------------------------- chapter 2
@figure_check(r"^Cumulative FLOPs of generation")
def _ch2_generation_flops(suptitle, axes, ns):
    left, right = axes
    llama = get_model("llama3-8b")
    for pattern, cached in ((r"^naive", False), (r"^KV cache", True)):
        line = right.line(pattern)
        n = len(line.x)
        close(line.x, np.arange(1, n + 1), f"{line.label}: tokens")
        for i in (0, 99, 999):  # spot checks: the whole 32k-token curve is an O(n) loop per point
            expected = generation_flops_curve(llama, 1, i + 1, cached=cached, skip_masked=True)[-1].total
            close(line.y[i], expected, f"{line.label} at {i + 1} tokens")
        if not np.all(np.diff(line.y) > 0):
            raise FigureDataError(f"{line.label}: cumulative FLOPs must grow with every token")
    wide, prompt_len, batch = ns.get("WIDE"), ns.get("PROMPT_LEN"), ns.get("BATCH")
    naive, fixed = left.line(r"^naive: formula"), left.line(r"^KV cache \(\d+ slots\): formula")
    if wide is not None:
        n = len(naive.x)
        close(naive.y, [c.total for c in generation_flops_curve(wide, prompt_len, n, batch, cached=False)],
              "naive formula")
        slots = int(re.search(r"\((\d+) slots\)", fixed.label).group(1))
        close(fixed.y, [c.total for c in generation_flops_curve(wide, prompt_len, n, batch, cache_len=slots)],
              "fixed-cache formula")
        close(left.line(r"valid slots only").y, [c.total for c in generation_flops_curve(wide, prompt_len, n,
                                                                                          batch)], "ragged formula")
    close(left.line(r"^naive: XLA").y, naive.y, "XLA's naive FLOPs against the formula", rtol=0.02)
    close(left.line(r"^KV cache: XLA").y, fixed.y, "XLA's cached FLOPs against the formula", rtol=0.02)


@figure_check(r"^One sequence's KV cache against the model's weights$")
def _ch2_kv_against_weights(suptitle, axes, ns):
    """Each model's one-sequence bf16 KV cache by context, its weights as a level, and where the two cross."""
    ax = axes[0]
    for name, (label, _kind, _color) in ns["kv_models"].items():
        model = get_model(name)
        cache = ax.line(r"^" + re.escape(label) + r" KV cache")
        close(cache.y * 1e9, [kv_cache_bytes(model, int(s), 1, "bf16") for s in cache.x], f"{label} KV cache")
        weights = param_bytes(model, "bf16")
        close(_hline(ax.line(r"^" + re.escape(label) + r" weights$")) * 1e9, weights, f"{label} weights")
        crossings = [line for line in ax.lines if not line.label and len(line.x) == 1
                     and np.isclose(line.y[0] * 1e9, weights, rtol=RTOL)]
        close([line.x[0] for line in crossings], [weights / kv_bytes_per_token(model, "bf16")], f"{label} crossing")


# ---------------------------------------------------------------------------------------------- chapter 3
@figure_check(r"^Prefill climbs onto the roof")
def _ch3_prefill_decode_roofline(suptitle, axes, ns):
    chips = {"TPU v5e": "tpu-v5e", "H100": "h100"}
    llama = ns.get("llama", get_model("llama3-8b"))
    group = ns.get("G_LLAMA", llama.n_heads // llama.n_kv_heads)
    formula_x = {
        "prefill, linear": [matmul_intensity(t, llama.d_model, llama.d_ff) for t in (16, 128, 1024)],
        "prefill, attention MHA": [attention_intensity(t, t) for t in (16, 128, 1024)],
        "decode, linear": [matmul_intensity(b, llama.d_model, llama.d_ff) for b in (1, 8, 64)],
        "decode, attention MHA / GQA": [attention_intensity(1, 4096), attention_intensity(1, 4096, group)],
    }
    for ax in axes:
        chip = chips[ax.title]
        for line in ax.lines:
            if len(line.x) == 2 and line.x[0] == line.x[1]:  # the ridge
                close(line.x[0], ridge_point(chip), f"{ax.title}: ridge")
                continue
            close(line.y, [attainable_flops(float(i), chip) for i in line.x], f"{ax.title}: {line.label or 'points'}")
            for prefix, xs in formula_x.items():
                if line.label.startswith(prefix) and "XLA" not in line.label:
                    close(line.x, xs, f"{ax.title}: {line.label}")


@figure_check(r"^The two latencies of LLaMA-3-8B on one H100 \(bf16\)$")
def _ch3_two_latencies(suptitle, axes, ns):
    """TTFT in both FLOP counts (and with causal attention), the batch-1 TPOT, the FLOP term of the step, and the
    largest batch that fits."""
    left, right = axes
    model, mfu = get_model("llama3-8b"), ns["MFU"]
    book = left.line(r"the book's and the sources' count")
    prompts = [int(t) for t in book.x]
    close(book.y / 1e3, [prefill_time(model, "h100", 1, t, mfu) for t in prompts], "TTFT, 2 P T")
    expected_mm = np.array([prefill_time(model, "h100", 1, t, mfu, params="matmul") for t in prompts])
    close(left.line(r"matmul FLOPs only").y / 1e3, expected_mm, "TTFT, 2 P_mm T")
    attention = [forward_flops(model, t, skip_masked=True).total / forward_flops(model, t).matmul for t in prompts]
    close(left.line(r"causal attention$").y / 1e3, expected_mm * attention, "TTFT with causal attention")
    close(_hline(left.line(r"TPOT")) / 1e3, decode_step_time(model, "h100", 1, 1, 2048).total_s, "TPOT at B = 1")
    flops = right.line(r"^matmul FLOPs alone")
    close(flops.y / 1e3, [decode_step_time(model, "h100", 1, int(b), 2048, check_capacity=False).compute_s for b in flops.x],
          "the FLOP term")
    close(_vline(right.line(r"^HBM full")), max_batch_size(model, "h100", 1, 2048), "the largest batch")


# ---------------------------------------------------------------------------------------------- chapter 4
@figure_check(r"^LLaMA-2-13B on 8 x TPU v5e: memory vs batch$")
def _ch4_memory_vs_batch(suptitle, axes, ns):
    ax, model, chip = axes[0], get_model("llama2-13b"), get_chip("tpu-v5e")
    gqa = model.with_(n_kv_heads=8)
    mha = ax.line(r"^MHA")
    batches = [int(b) for b in mha.x]
    close(mha.y * 1e9, [memory_footprint(model, chip, 8, b, 8192).total_bytes for b in batches], "MHA footprint")
    source = ax.line(r"^GQA 1:5")
    close(source.y * 1e9, [param_bytes(model) + kv_cache_bytes(gqa, 8192, b) for b in batches], "GQA 1:5 footprint")
    real = ax.line(r"^GQA, real")
    close(real.y * 1e9, [memory_footprint(gqa, chip, 8, b, 8192).total_bytes for b in batches], "GQA model")
    close(_hline(ax.line(r"^HBM of 8")), 8 * chip.hbm_capacity / 1e9, "HBM capacity")
    close(_hline(ax.line(r"^weights alone")), param_bytes(model) / 1e9, "weight bytes")
    largest = ax.line(r"^largest batch that fits")
    capacity = 8 * chip.hbm_capacity
    gqa_fit = max(b for b in range(1, 1024) if param_bytes(model) + kv_cache_bytes(gqa, 8192, b) <= capacity)
    close(largest.x, [max_batch_size(model, chip, 8, 8192), gqa_fit], "largest batches")
    close(_vline(ax.line(r"B_\\mathrm\{crit\}")), critical_batch_size(chip), "B_crit")


@figure_check(r"^LLaMA-2-13B on 8 x TPU v5e: throughput vs batch$")
def _ch4_throughput_vs_batch(suptitle, axes, ns):
    """B / step time for MHA and the source's GQA 1:5 (split where HBM fills) and each ceiling n W_hbm / KV_seq."""
    ax, model, chip = axes[0], get_model("llama2-13b"), get_chip("tpu-v5e")
    for label, kv_heads in (("MHA", model.n_kv_heads), ("GQA 1:5", 8)):
        cache_model = model.with_(n_kv_heads=kv_heads)
        for part in ("fits in HBM", "does not fit"):
            line = ax.line(r"^" + re.escape(label) + r".*: " + part)
            expected = [b / decode_step_time_kv_heads(model, kv_heads, chip, 8, int(b), 8192, check_capacity=False).total_s for b in line.x]
            close(line.y, expected, f"{label} throughput ({part})")
        close(_hline(ax.line(r"^" + re.escape(label) + r".*: ceiling")),
              8 * chip.hbm_bandwidth / kv_cache_bytes(cache_model, 8192), f"{label} ceiling")
    fits = ax.line(r"^MHA.*: fits in HBM")
    close(fits.x[-1], max_batch_size(model, chip, 8, 8192), "the last MHA batch that fits")
    close(_vline(ax.line(r"B_\\mathrm\{crit\}")), critical_batch_size(chip), "B_crit")


# ---------------------------------------------------------------------------------------------- chapter 5
@figure_check(r"^Latency vs throughput as the batch grows")
def _ch5_pareto(suptitle, axes, ns):
    for ax in axes:
        name, n_chips, chip = re.match(r"^(\S+), bf16, (\d+) x (\S+)$", ax.title).groups()
        n_chips = int(n_chips)
        contexts = {line.color: int(_number(line.label[4:])) for line in ax.lines if line.label.startswith("S = ")}
        for line in ax.lines:
            if line.color not in contexts or len(line.x) == 0:
                continue
            context = contexts[line.color]
            batches = np.round(line.y * line.x / 1e3).astype(int)  # throughput x step time = batch
            steps = [decode_step_time(name, chip, n_chips, int(b), context, check_capacity=False) for b in batches]
            close(line.x, [s.total_s * 1e3 for s in steps], f"{ax.title}, S = {context}: step times")
            close(line.y, [b / s.total_s for b, s in zip(batches, steps)], f"{ax.title}, S = {context}: throughput")
            if len(line.x) == 1:  # the star: the first batch whose matmuls are compute-bound
                b = int(batches[0])
                if steps[0].bound != "compute" or decode_step_time(name, chip, n_chips, b - 1, context, check_capacity=False).bound != \
                        "memory":
                    raise FigureDataError(f"{ax.title}, S = {context}: the star at B = {b} is not where the step "
                                          "turns compute-bound")


@figure_check(r"when the cache takes over$")
def _ch5_kv_share(suptitle, axes, ns):
    ax = axes[0]
    name, n_chips, chip = re.match(r"^(\S+) on (\d+) x (\S+) \(bf16\)", ax.title).groups()
    for line in ax.lines:
        if line.label.startswith("B = "):
            b = int(line.label[4:])
            steps = [decode_step_time(name, chip, int(n_chips), b, int(s), check_capacity=False) for s in line.x]
            close(line.y, [s.kv_s / s.total_s for s in steps], f"{ax.title}: KV share at {line.label}")
    close(_vline(ax.line(r"^\$S\^\*\$")), kv_compute_crossover_context(name, chip), "the crossover S*")


@figure_check(r"the three terms of the step$")
def _ch5_three_terms(suptitle, axes, ns):
    ax = axes[0]
    batches = [int(t) for t in ax.xticklabels]
    reports = [explain_decode("llama3-70b", "tpu-7x", 8, b, 32768) for b in batches]
    kv = [r.step.kv_s * 1e3 for r in reports]
    close([h for *_, h in ax.bars["reading the KV cache"]], kv, "KV bars")
    close([h for *_, h in ax.bars["max(weight load, matmul FLOPs)"]],
          [max(r.step.weight_s, r.step.compute_s) * 1e3 for r in reports], "weight/FLOP bars")
    close(ax.line(r"^KV \+ matmul FLOPs").y, [(r.step.kv_s + r.step.compute_s) * 1e3 for r in reports], "KV + FLOPs")


# ---------------------------------------------------------------------------------------------- chapter 6
@figure_check(r"^LLaMA-3-70B: local layers cap the cache")
def _ch6_local_global(suptitle, axes, ns):
    ax = axes[0]
    full = ax.line(r"^all layers global$")
    close(full.y * 1e9, [kv_cache_bytes("llama3-70b", int(s)) for s in full.x], "all global")
    mixed = ax.line(r"^1 global layer in")
    every, window = (int(_number(v)) for v in re.match(r"^1 global layer in (\d+), others w = ([\d,]+)$",
                                                        mixed.label).groups())
    close(mixed.y * 1e9, [local_global_kv_bytes("llama3-70b", int(s), window, every) for s in mixed.x], "mixed")
    local = ax.line(r"^all local, w = ")
    windowed = get_model("llama3-70b").with_(sliding_window=int(_number(local.label.split("= ")[1])))
    close(local.y * 1e9, [kv_cache_bytes(windowed, int(s)) for s in local.x], "all local")


@figure_check(r"^LLaMA-2-13B, batch 64 up to 8,192 tokens: KV-cache levers$")
def _ch6_levers(suptitle, axes, ns):
    ax = axes[0]
    rows = {row.lever: row for row in kv_lever_table("llama2-13b", 8192, batch=64)}
    names = ax.yticklabels
    close([w for _, _, w, _ in ax.bars["capacity (bytes stored)"]], [rows[n].stored_saving for n in names],
          "stored savings")
    close([w for _, _, w, _ in ax.bars["bandwidth (bytes read per step)"]], [rows[n].read_saving for n in names],
          "read savings")


# ---------------------------------------------------------------------------------------------- chapters 7 and 8: blocks
def _blocks_tile(ax):
    """The rectangles of a device-block panel tile the array once and every device holds part of it."""
    if not ax.blocks:
        raise FigureDataError(f"{ax.title}: no blocks drawn")
    width = max(x + w for x, _, w, _, _ in ax.blocks) - min(x for x, _, _, _, _ in ax.blocks)
    height = max(y + h for _, y, _, h, _ in ax.blocks) - min(y for _, y, _, _, _ in ax.blocks)
    close(sum(w * h for _, _, w, h, _ in ax.blocks), width * height, f"{ax.title}: blocks tile the array once")


def _blocks_match(ax, blocks, shade_prefix=""):
    """The drawn rectangles are exactly `blocks` (from xla.device_blocks), each labelled with its devices."""
    drawn = sorted((round(y), round(y + h), round(x), round(x + w)) for x, y, w, h, _ in ax.blocks)
    expected = sorted((b.rows[0], b.rows[1], b.cols[0], b.cols[1]) for b in blocks)
    if drawn != expected:
        raise FigureDataError(f"{ax.title}: drew blocks {drawn}, the sharding has {expected}")


@figure_check(r"^Megatron decode on 8 devices: who holds which block")
def _ch7_megatron_blocks(suptitle, axes, ns):
    megatron, params, cache = ns.get("megatron"), ns.get("PARAMS"), ns.get("ref_cache")
    for ax in axes:
        _blocks_tile(ax)
    if megatron is None:
        return
    params_sh, cache_sh = megatron.shardings(megatron.param_specs), megatron.shardings(megatron.cache_specs)
    panels = ((params_sh.wq, params.wq.shape, (1, 2)), (params_sh.w_down, params.w_down.shape, (1, 2)),
              (cache_sh.k, cache.k.shape, (1, 3)))
    for ax, (sharding, shape, dims) in zip(axes, panels):
        _blocks_match(ax, device_blocks(sharding, shape, dims))


@figure_check(r"^Which device holds which block, per layout")
def _ch8_layout_blocks(suptitle, axes, ns):
    mesh = ns.get("mesh")
    fields = {"x as stored [T, D]": "x", "W_in as stored [D, F]": "w_in", "W_in in the matmul [D, F]": "w_in_used"}
    for ax in axes:
        if not ax.title:
            continue
        _blocks_tile(ax)
        layout, panel = ax.title.split(": ", 1)
        if mesh is None:
            continue
        shape = (ns["T_DEMO"], ns["D_DEMO"]) if fields[panel] == "x" else (ns["D_DEMO"], ns["F_DEMO"])
        _blocks_match(ax, device_blocks(getattr(FFN_SPECS[layout], fields[panel]), shape, mesh=mesh))


@figure_check(r"^\S+: LLaMA-3-70B, B=\d+, S=[\d,]+$")
def _ch7_components(suptitle, axes, ns):
    llama = get_model("llama3-70b")
    for ax in axes:
        chip, batch, context = re.match(r"^(\S+): LLaMA-3-70B, B=(\d+), S=([\d,]+)$", ax.title).groups()
        batch, context = int(batch), int(_number(context))
        tori = ns.get("TORI", {}).get(chip)
        total = ax.line(r"^total$")
        chips = [int(n) for n in total.x]
        parts = [decode_step_components(llama, chip, n, batch, context, mesh_shape=tori[n] if tori else None,
                                        check_capacity=False)
                 for n in chips]
        for label, attribute in (("weights (HBM)", "weights_s"), ("KV cache (HBM)", "kv_s"), ("FLOPs", "flops_s"),
                                 ("ICI collectives", "ici_s"), ("total", "total_s")):
            close(ax.line(f"^{re.escape(label)}$").y, [getattr(p, attribute) * 1e3 for p in parts],
                  f"{ax.title}: {label}")
        close(_vline(ax.line(r"^F/\(B beta\)")), max_decode_model_parallelism(llama.d_ff, batch, beta(chip)),
              f"{ax.title}: F/(B beta)")


@figure_check(r"^Communication volume per layer, PaLM 540B, 4x4x4$")
def _ch8_comm(suptitle, axes, ns):
    volume_ax, time_ax = axes
    chip = ns.get("CHIP", "tpu-v4")
    for line in volume_ax.lines:
        if line.label in ("1d-ws", "2d-ws", "wg-x", "wg-xy", "wg-xyz"):
            close(line.y * 1e6, [ffn_comm_volume(line.label, "palm-540b", t, (4, 4, 4)).total_bytes for t in line.x],
                  f"volume of {line.label}")
            close(time_ax.line(f"^{line.label}$").y / 1e3,
                  [ffn_comm_time(line.label, "palm-540b", chip, t, (4, 4, 4)) for t in line.x], f"time of {line.label}")
    cheapest = volume_ax.line(r"^cheapest$")
    layouts = ("1d-ws", "2d-ws", "wg-x", "wg-xy", "wg-xyz")
    close(cheapest.y * 1e6, [min(ffn_comm_volume(name, "palm-540b", t, (4, 4, 4)).total_bytes for name in layouts)
                             for t in cheapest.x], "the cheapest layout")
    switches = comm_volume_curves("palm-540b", (4, 4, 4), list(cheapest.x)).switch_points
    drawn = sorted(_vline(line) for line in volume_ax.lines if not line.label and len(line.x) == 2
                   and line.x[0] == line.x[1])
    close(drawn, sorted(p.tokens for p in switches), "switch points")


# ---------------------------------------------------------------------------------------------- chapter 9
def _results(ns, name):
    if name not in ns:
        raise FigureDataError(f"the serving figures read the simulation results `{name}` from the notebook")
    return ns[name]


@figure_check(r"on 48 TPU v5e: four engines, load")
def _ch9_engines(suptitle, axes, ns):
    results, loads = _results(ns, "results"), _results(ns, "LOADS")
    for engine in ("naive", "interleaved", "chunked", "disaggregated"):
        line = axes[0].line(f"^{engine}$")
        close(line.x, [results[(engine, load)].p50_tpot_s * 1e3 for load in loads], f"{engine}: median TPOT")
        close(line.y, [results[(engine, load)].p99_ttft_s for load in loads], f"{engine}: p99 TTFT")


@figure_check(r"^Prefill stalls slow interleaved decoding as load grows$")
def _ch9_stalls(suptitle, axes, ns):
    ax, results, loads = axes[0], _results(ns, "results"), _results(ns, "LOADS")
    for engine in ("naive", "interleaved", "chunked", "disaggregated"):
        line = ax.line(f"^{engine}$")
        close(line.x, loads, f"{engine}: loads")
        close(line.y, [results[(engine, load)].p50_tpot_s * 1e3 for load in loads], f"{engine}: median TPOT")
    model = ax.line(r"^stall model")
    rho = np.asarray(loads, float) * _results(ns, "t_pre_mean") / 3
    close(model.y, results[("disaggregated", loads[0])].p50_tpot_s * 1e3 / (1 - rho), "the stall model")


@figure_check(r"^Prefill queues stop growing once")
def _ch9_queues(suptitle, axes, ns):
    ax, sweep = axes[0], _results(ns, "sweep")
    for line in ax.lines:
        if line.label.endswith(" requests"):
            n = int(_number(line.label.split()[0]))
            close(line.y, [sweep[(n, int(p))].mean_queue_length for p in line.x], line.label)


@figure_check(r"^Prefix caching on interleaved servers")
def _ch9_prefix(suptitle, axes, ns):
    ax, runs = axes[0], _results(ns, "cached_runs")
    close(ax.line(r"^p50 TTFT$").x, np.array(list(runs)) * 100, "cached fractions")
    close(ax.line(r"^p50 TTFT$").y, [r.p50_ttft_s * 1e3 for r in runs.values()], "p50 TTFT")
    close(ax.line(r"^p99 TTFT$").y, [r.p99_ttft_s * 1e3 for r in runs.values()], "p99 TTFT")
    close(ax.line(r"^p50 TPOT x 20$").y, [r.p50_tpot_s * 1e3 * 20 for r in runs.values()], "p50 TPOT x 20")


# ---------------------------------------------------------------------------------------------- chapter 10
@figure_check(r"^Tokens per step saturate at")
def _ch10_speculation(suptitle, axes, ns):
    left, right = axes
    cost = float(re.search(r"c = ([\d.]+)", right.title).group(1))
    cost = ns.get("COST", cost)
    for line in left.lines:
        if line.label.startswith("$\\alpha$ = "):
            a = float(line.label.split("= ")[1])
            close(line.y, [expected_tokens_per_step(int(k), a) for k in line.x], f"tokens per step, {line.label}")
            close(right.line(f"^{re.escape(line.label)}$").y, [speedup(int(k), a, cost) for k in line.x],
                  f"speedup, {line.label}")
    stars = sorted((line.x[0], line.y[0]) for line in right.lines if not line.label and len(line.x) == 1)
    alphas = [float(line.label.split("= ")[1]) for line in left.lines if line.label.startswith("$\\alpha$")]
    expected = sorted((best_lookahead(a, cost), speedup(best_lookahead(a, cost), a, cost)) for a in alphas)
    close(stars, expected, "best lookaheads (stars)")


@figure_check(r"gains fade past")
def _ch10_roofline_speedup(suptitle, axes, ns):
    ax = axes[0]
    model, n_chips, chip, context, accept = re.match(
        r"^(\S+), (\d+) x (\S+), (\d+) tokens, \$\\alpha\$ = ([\d.]+):", ax.title).groups()
    cost = ns["COST"]
    for line in ax.lines:
        if line.label.startswith("$\\gamma$ = "):
            k = int(line.label.split("= ")[1])
            close(line.y, [roofline_speedup(model, chip, int(n_chips), int(b), int(context), k, float(accept), cost,
                                            check_capacity=False)
                           for b in line.x], f"roofline speedup, {line.label}")
    bcrit = critical_batch_size(chip)
    drawn = sorted(_vline(line) for line in ax.lines if not line.label and line.x[0] == line.x[-1])
    close(drawn, sorted(bcrit / (k + 1) for k in (1, 2, 4, 8)), "B_crit / (gamma + 1) markers")


@figure_check(r"^MoE routing all-to-alls are latency-bound")
def _ch10_routing(suptitle, axes, ns):
    ax, moe, chip = axes[0], ns.get("moe"), ns.get("CHIP", "tpu-v5e")
    if moe is None:
        raise FigureDataError("the routing figure reads the notebook's `moe` model")
    line = ax.line(r"^one routing all-to-all")
    close(line.y * 1e3, [routing_all_to_all(moe, chip, int(b), expert_shards=8, activation_dtype="int8").bytes_each
                         for b in line.x], "all-to-all bytes")
    close(_hline(ax.line(r"^latency-bound below")), latency_bound_bytes(chip, 8) / 1e3, "latency-bound threshold")



# ---------------------------------------------------------------------------------------------- chapter 11, appendix
@figure_check(r"^TensorRT-LLM offline throughput, fp8")
def _ch11_fractions(suptitle, axes, ns):
    left, right = axes
    bound = {c.row: c for c in (compare(row, BOUND) for row in trtllm_rows())}
    for name, rects in left.bars.items():
        rows = [c for c in ns.get("trt_bound", ()) if c.label.rsplit(" ", 1)[0] == name]
        close([h for *_, h in rects], [1 / bound[c.row].ratio for c in rows], f"achieved fraction, {name}")
    pope = [compare(row, BOUND) for row in pope_rows()]
    close([h for rects in right.bars.values() for *_, h in rects], [1 / c.ratio for c in pope],
          "Pope et al.: achieved fraction")


@figure_check(r"^Typical estimate on the validation rows$")
def _ch11_validation(suptitle, axes, ns):
    ax = axes[0]
    expected = {}
    for row in all_rows():
        if split_of(row) == "validation":
            platform, tp, kind, _ = group_of(row)
            c = compare(row, TYPICAL)
            expected.setdefault(f"{platform.upper()} TP{tp}, {kind}", []).append((c.predicted, c.measured))
    if set(ax.points) != set(expected):
        raise FigureDataError(f"{ax.title}: series {sorted(ax.points)} instead of {sorted(expected)}")
    for label, points in expected.items():
        close(ax.points[label], points, f"{ax.title}: {label}")
    diagonal = ax.line(r"^y = x$")
    close(diagonal.y, diagonal.x, f"{ax.title}: y = x")
    band = ax.line(r"^1\.5x$")
    close(band.y, 1.5 * band.x, f"{ax.title}: the 1.5x band")


@figure_check(r" on one H100, [\d,]+ tokens of context \(bf16\)$")
def _appendix_your_model(suptitle, axes, ns):
    ax = axes[0]
    context = int(_number(re.search(r"one H100, ([\d,]+) tokens", ax.title).group(1)))
    model = ns.get("model")
    if model is None or model.name not in ax.title:
        raise FigureDataError(f"{ax.title}: the figure reads the notebook's `model`")
    for term, label in (("kv_s", "reading the KV cache"), ("weight_s", "loading the weights"),
                        ("compute_s", "the matmul FLOPs"), ("total_s", "the step (bound)")):
        line = ax.line(f"^{re.escape(label)}$")
        close(line.y, [getattr(decode_step_time(model, "h100", 1, int(b), context, check_capacity=False), term) * 1e3 for b in line.x],
              f"{ax.title}: {label}")


@figure_check(r"^Cost against time per output token: ")
def _appendix_your_model_plan(suptitle, axes, ns):
    """The frontier and the choice are `plan.plan` of the notebook's PLAN_ARGS, recomputed."""
    ax = axes[0]
    args = ns.get("PLAN_ARGS")
    if args is None:
        raise FigureDataError(f"{ax.title}: the figure reads the notebook's `PLAN_ARGS`")
    result = plan(**args)
    front = ax.line(r"^the cheapest deployment for each TPOT$")
    close(front.x, [p.tpot_s * 1e3 for p in result.frontier], f"{ax.title}: frontier TPOT")
    close(front.y, [p.dollars_per_million_output_tokens_all_in for p in result.frontier], f"{ax.title}: frontier cost")
    choice = ax.line(r"^the plan's choice$")
    close([choice.x[0], choice.y[0]], [result.best.tpot_s * 1e3, result.best.dollars_per_million_output_tokens_all_in],
          f"{ax.title}: the choice")
    close([_vline(ax.line(r"^the TPOT target$"))], [args["tpot"] * 1e3], f"{ax.title}: the TPOT target")


# ---------------------------------------------------------------------------------------------- chapter 12
def _chip_named(text: str) -> str:
    """The hardware table's name for a chip as a title writes it ("TPU v4" -> "tpu-v4")."""
    return get_chip(text.strip().lower().replace(" ", "-")).name


def _frontier_of(model: str, chip: str, phase: str, dtype: str) -> tuple:
    """The cost model's frontier, recomputed: `pareto_frontier(sweep(...))` with the default chips and batches, heads
    padded to split over the chips as Pope et al. did (chapter 12's `PAD`)."""
    return pareto_frontier(sweep(model, chip, phase, weight_dtype=dtype, pad_heads=True))


@figure_check(r"^Latency against MFU on .+: the cost model's frontier")
def _ch12_frontier(suptitle, axes, ns):
    chip = _chip_named(re.match(r"^Latency against MFU on (.+?): ", suptitle).group(1))
    for ax in axes:
        model, phase = re.match(r"^(\S+), (prefill|decode)$", ax.title).groups()
        for dtype in ("bf16", "int8"):
            line = ax.line(f"^model frontier, {dtype} weights$")
            front = _frontier_of(model, chip, phase, dtype)
            close(line.x, [p.total_s * 1e3 for p in front], f"{ax.title}: {dtype} frontier latency")
            close(line.y, [100 * p.mfu for p in front], f"{ax.title}: {dtype} frontier MFU")
        stars = sorted((line.x[0], line.y[0]) for line in ax.lines if not line.label and len(line.x) == 1)
        rows = [r for r in pope_rows() if (r.model, r.phase) == (model, phase)]
        close(stars, sorted((measured_step_s(r) * 1e3, 100 * measured_mfu(r)) for r in rows),
              f"{ax.title}: the measured rows")


@figure_check(r"^\S+ decode: cost against latency$")
def _ch12_cost(suptitle, axes, ns):
    chip = ns.get("CHIP", "tpu-v4")
    for ax in axes:
        model = re.match(r"^(\S+) decode: ", ax.title).group(1)
        for dtype in ("bf16", "int8"):
            line = ax.line(f"^{dtype} weights$")
            front = _frontier_of(model, chip, "decode", dtype)
            close(line.x, [p.total_s * 1e3 for p in front], f"{ax.title}: {dtype} latency")
            close(line.y, [p.cost_chip_s_per_token * 1e3 for p in front], f"{ax.title}: {dtype} chip-ms per token")
            if not np.all(np.diff(line.y) < 0):
                raise FigureDataError(f"{ax.title}: along a frontier the cost must fall as latency grows")


@figure_check(r"^Hops across the network$")
def _ch12_hops(suptitle, axes, ns):
    hops_ax, time_ax = axes
    torus = hops_ax.line(r"^3D torus")
    close(torus.y, [torus_diameter(cube_torus(int(n))) for n in torus.x], "torus diameters")
    boardfly = hops_ax.line(r"Boardfly")
    close(boardfly.y, [ns.get("BOARDFLY_HOPS", boardfly.y[0])], "Boardfly's stated hops")
    chips = int(_number(re.match(r"^([\d,]+) chips: ", time_ax.title).group(1)))
    close(boardfly.x, [chips], "Boardfly's slice size")
    n_layers = int(re.search(r"an (\d+)-layer", time_ax.title).group(1))
    per_layer = ns.get("per_layer", 2)
    hop_s = get_chip(ns.get("CHIP", "tpu-v4")).ici_hop_latency
    fixed_us = [float(re.match(r"^t_fixed = ([\d.]+) us$", t).group(1)) for t in time_ax.xticklabels]
    for label, rects in time_ax.bars.items():
        hops = int(re.search(r", (\d+) hops$", label).group(1))
        mesh = re.match(r"^(\d+) x (\d+) x (\d+) torus", label)
        if mesh and (tuple(int(a) for a in mesh.groups()) != cube_torus(chips)
                     or hops != torus_diameter(cube_torus(chips))):
            raise FigureDataError(f"{time_ax.title}: {label!r} is not the {chips}-chip torus {cube_torus(chips)}")
        close([h for *_, h in rects], [decode_collective_latency(n_layers, per_layer, hops, hop_s, f * 1e-6) * 1e3
                                       for f in fixed_us], f"{time_ax.title}: {label}")


# ---------------------------------------------------------------------------------------------- chapter 13
@figure_check(r"^Every output of a \d+ x \d+ x \d+ matmul quantized by Qwix, against its bound$")
def _ch13_bounds(suptitle, axes, ns):
    # The notebook that draws this figure has imported scaling_lib.tiny.qwix_quant; looking it up rather than
    # importing it here spares every other chapter the import of Qwix and Flax.
    qq = sys.modules.get("scaling_lib.tiny.qwix_quant")
    x, w = ns.get("x"), ns.get("w")
    if qq is None or x is None or w is None:
        raise FigureDataError(f"{suptitle}: the check reads the notebook's `x` and `w` and scaling_lib.tiny.qwix_quant")
    exact = np.asarray(x, np.float64) @ np.asarray(w, np.float64)
    for ax in axes:
        scheme = ax.title
        bound = qq.matmul_error_bound(x, w, scheme)
        error = np.abs(np.asarray(qq.matmul(x, w, scheme), np.float64) - exact)
        dots = [line for line in ax.lines if not line.label]
        if len(dots) != 1:
            raise FigureDataError(f"{ax.title}: expected one cloud of outputs, found {len(dots)}")
        close(dots[0].x, bound.ravel(), f"{ax.title}: bounds")
        close(dots[0].y, error.ravel(), f"{ax.title}: errors", rtol=1e-6)
        if np.any(dots[0].y > dots[0].x):
            raise FigureDataError(f"{ax.title}: an error exceeds its bound")
        close(ax.line(r"^error = bound$").x, [bound.min(), bound.max()], f"{ax.title}: the diagonal")


@figure_check(r"^Quantization error of a \d+ x K x \d+ matmul against K$")
def _ch13_growth(suptitle, axes, ns):
    """Largest bound, largest and mean error at each K: recomputed with qwix_quant on the notebook's inputs."""
    qq = sys.modules.get("scaling_lib.tiny.qwix_quant")
    lengths, make = ns.get("LENGTHS"), ns.get("inputs_of_length")
    if qq is None or lengths is None or make is None:
        raise FigureDataError(f"{suptitle}: the check reads the notebook's LENGTHS and inputs_of_length and "
                              "scaling_lib.tiny.qwix_quant")
    for ax in axes:
        expected = {"largest bound": [], "largest error": [], "mean error": []}
        for k in lengths:
            xs, ws = make(k)
            error = np.abs(np.asarray(qq.matmul(xs, ws, ax.title), np.float64)
                           - np.asarray(xs, np.float64) @ np.asarray(ws, np.float64))
            expected["largest bound"].append(qq.matmul_error_bound(xs, ws, ax.title).max())
            expected["largest error"].append(error.max())
            expected["mean error"].append(error.mean())
        for label, values in expected.items():
            line = ax.line(f"^{label}$")
            close(line.x, list(lengths), f"{ax.title}: {label}, K")
            close(line.y, values, f"{ax.title}: {label}", rtol=1e-6)
        if np.any(ax.line(r"^largest error$").y > ax.line(r"^largest bound$").y):
            raise FigureDataError(f"{ax.title}: an error exceeds its bound")


# ---------------------------------------------------------------------------------------------- chapter 14
@figure_check(r"^Continuous batching on the tiny model: which request holds which slot$")
def _ch14_slots(suptitle, axes, ns):
    ax, served = axes[0], ns.get("served")
    if not isinstance(served, ServeResult):
        raise FigureDataError(f"{ax.title}: the figure reads the notebook's `served` (tiny.engine.serve)")
    start = {request: (step, slot) for step, event, request, slot in served.events if event == "insert"}
    expected = sorted((start[request][0], slot - 0.3, max(step - start[request][0], 0.15), 0.6)
                      for step, event, request, slot in served.events if event == "finish")
    drawn = sorted((p.get_x(), p.get_y(), p.get_width(), p.get_height()) for p in ax.raw.patches)
    close(drawn, expected, f"{ax.title}: slot occupancy")
    spans = {}  # slot -> (insert step, finish step) of each request it held (a bar is drawn at least 0.15 wide)
    for step, event, request, slot in served.events:
        if event == "finish":
            spans.setdefault(slot, []).append((start[request][0], step))
    for slot, held in spans.items():
        held.sort()
        if any(later[0] < earlier[1] for earlier, later in zip(held, held[1:])):
            raise FigureDataError(f"{ax.title}: two requests hold slot {slot} at once")


@figure_check(r"^Latency of a batched prefill$")
def _ch14_prefill(suptitle, axes, ns):
    if not all(k in ns for k in ("MODEL", "CHIP", "N")):
        raise FigureDataError("the prefill figure reads the notebook's MODEL, CHIP and N")
    model, chip, n_chips = ns["MODEL"], ns["CHIP"], ns["N"]
    latency_ax, rate_ax = axes
    for line in latency_ax.lines:
        t = int(re.match(r"^T = (\d+)$", line.label).group(1))
        seconds = np.array([prefill_latency(model, chip, n_chips, t, batch=int(b)) for b in line.x])
        close(line.y, seconds * 1e3, f"{latency_ax.title}: {line.label}")
        close(rate_ax.line(f"^T = {t}$").y, line.x * t / seconds, f"{rate_ax.title}: {line.label}")


@figure_check(r"^Prefix hit rate$")
def _ch14_prefix_tiers(suptitle, axes, ns):
    hit_ax, ttft_ax = axes
    curves, budgets = _results(ns, "curves"), _results(ns, "budgets")
    for (routing, with_host), runs in curves.items():
        label = f"^{re.escape(routing)}, {'HBM [+] host DRAM' if with_host else 'HBM only'}$"
        for ax in axes:
            close(ax.line(label).x, np.asarray(budgets) / 1e9, f"{ax.title}: {routing} budgets")
        close(hit_ax.line(label).y, [float(np.mean(r.routed.tier != "miss")) for r in runs],
              f"{hit_ax.title}: {routing}")
        close(ttft_ax.line(label).y, [np.mean(r.ttft_s) * 1e3 for r in runs], f"{ttft_ax.title}: {routing}")


@figure_check(r"^\S+ on \d+ \S+, lookahead \d+, acceptance [\d.]+$")
def _ch14_speculation(suptitle, axes, ns):
    ax = axes[0]
    n_chips, chip, lookahead, acceptance = re.match(r"^\S+ on (\d+) (\S+), lookahead (\d+), acceptance ([\d.]+)$",
                                                    ax.title).groups()
    model, spec = ns.get("MODEL"), ns.get("SPEC")
    if model is None or spec is None:
        raise FigureDataError(f"{ax.title}: the figure reads the notebook's MODEL and SPEC")
    n_chips, chip, lookahead, acceptance = int(n_chips), chip.lower(), int(lookahead), float(acceptance)
    for line in ax.lines:
        if not line.label.startswith("batch "):
            continue
        batch = int(line.label.split()[1])
        speed = [roofline_speedup(model, chip, n_chips, batch, int(s), lookahead, acceptance,
                                  spec["draft_cost_ratio"], check_capacity=False) for s in line.x]
        close(line.y, speed, f"{ax.title}: {line.label}")
        dots = [d for d in ax.lines if not d.label and d.color == line.color]
        fits = [max_batch_size(model, chip, n_chips, int(s) + lookahead) >= batch for s in line.x]
        close(dots[0].x if dots else [], line.x[fits], f"{ax.title}: {line.label}, contexts where it fits")


# ---------------------------------------------------------------------------------------------- worked problems
@figure_check(r"^Layer time against batch on this CPU$")
def _worked_cpu_rule(suptitle, axes, ns):
    rule = ns.get("rule")
    if rule is None:
        raise FigureDataError("the CPU figure reads the notebook's `rule` (tiny.critical_batch.batch_rule)")
    time_ax, rate_ax = axes
    seconds, batches = np.asarray(rule.seconds), np.asarray(rule.batches, float)
    predicted = np.array([rule.predicted_seconds(int(b)) for b in rule.batches])
    close(time_ax.line(r"^measured$").y, seconds * 1e3, "measured layer times")
    close(time_ax.line(r"^roofline").y, predicted * 1e3, "roofline layer times")
    close(rate_ax.line(r"^measured$").y, batches / seconds, "measured throughput")
    close(rate_ax.line(r"^roofline$").y, batches / predicted, "roofline throughput")
    for ax in axes:
        close(_vline(ax.line(r"^predicted critical batch$")), rule.predicted_batch, f"{ax.title}: B_crit")
