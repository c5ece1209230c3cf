"""Chapter 1, *Rooflines and the critical batch size*: its figures' checks."""

import re

import numpy as np

from ...hardware import get_chip
from ...roofline import (attainable_flops, attention_intensity, critical_batch_from_rates, explain_matmul,
                         fit_batch_roofline, matmul_flops, ridge_point)
from .core import FigureDataError, Line, close, figure_check, hline, vline


def _roofline_line(line: Line, chip, dtype="bf16", what=""):
    close(line.y, [attainable_flops(float(i), chip, dtype) for i in line.x], what or f"roofline of {chip}")


@figure_check(r"^Rooflines: memory-bound ramp")
def _ch1_rooflines(suptitle, axes, *, chips):
    ax = axes[0]
    names = {label: name for name, label in chips.items()}  # chips: the notebook's {chip name: legend label}
    for label, chip in names.items():
        _roofline_line(ax.line(f"^{re.escape(label)}$"), chip)
    dots = [line for line in ax.lines if not line.label and len(line.x) == 1]
    expected = sorted((ridge_point(c), get_chip(c).peak_flops("bf16")) for c in names.values())
    close(sorted((line.x[0], line.y[0]) for line in dots), expected, "ridge-point dots")


@figure_check(r"^\S+, (bf16|fp8|int8|int4|fp32) weights, (bf16|fp8|int8) math$")
def _ch1_matmul_on_roofline(suptitle, axes):
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
def _ch1_attention_intensity(suptitle, axes):
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
            close(hline(line), ridge_point(line.label.split(", ")[1]), line.label)


@figure_check(r"^(float32|bfloat16) \[B, \d+\] x \[\d+, \d+\] on this .+$")
def _ch1_measured_knee(suptitle, axes, *, bandwidth, flops, weights, d_model, d_ff, weight_dtype):
    """The predicted lines come from W and C measured apart from the curve (the notebook's `bandwidth` and `flops`,
    its weight matrix `weights` of shape [d_model, d_ff] in `weight_dtype`: float32 on a CPU, bf16 on a GPU or TPU),
    the measured knee from fitting the plotted points."""
    ax = axes[0]
    measured = ax.line(r"^measured")
    weight_bytes, row_flops = weights.nbytes, matmul_flops(1, d_model, d_ff)
    close(ax.line(r"^predicted floor").y, np.full(len(measured.x), weight_bytes / bandwidth * 1e3), "the floor")
    close(ax.line(r"^predicted slope").y, measured.x * row_flops / flops * 1e3, "the slope")
    close(vline(ax.line(r"^predicted knee")), critical_batch_from_rates(flops, bandwidth, weight_dtype), "the knee")
    fit = fit_batch_roofline([int(b) for b in measured.x], list(measured.y / 1e3))
    close(vline(ax.line(r"^knee of the measured")), fit.knee_batch, "the measured knee")


@figure_check(r"^Doubling HBM bandwidth moves the ramp")
def _ch1_faster_hbm(suptitle, axes):
    ax, v5e = axes[0], get_chip("tpu-v5e")
    _roofline_line(ax.line(r"^tpu-v5e$"), v5e)
    faster = ax.line(r"^tpu-v5e-2x-hbm$")
    close(faster.y, np.minimum(v5e.peak_flops("bf16"), faster.x * 2 * v5e.hbm_bandwidth), "v5e with 2x HBM")
