"""Chapter 13, *Quantizing with Qwix*: its figures' checks."""

import sys

import numpy as np

from .core import FigureDataError, close, figure_check


@figure_check(r"^Every output of a \d+ x \d+ x \d+ matmul quantized by Qwix, against its bound$")
def _ch13_bounds(suptitle, axes, *, x, w):
    # The notebook that draws this figure has imported scaling_lib.tiny.qwix_quant; looking it up rather than
    # importing it here spares every other chapter the import of Qwix and Flax.
    qq = sys.modules.get("scaling_lib.tiny.qwix_quant")
    if qq is None:
        raise FigureDataError(f"{suptitle}: the check needs scaling_lib.tiny.qwix_quant imported by the notebook")
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
def _ch13_growth(suptitle, axes, *, lengths, inputs_of_length):
    """Largest bound, largest and mean error at each K: recomputed with qwix_quant on the notebook's inputs."""
    qq = sys.modules.get("scaling_lib.tiny.qwix_quant")
    make = inputs_of_length  # the notebook's K -> (x, w)
    if qq is None:
        raise FigureDataError(f"{suptitle}: the check needs scaling_lib.tiny.qwix_quant imported by the notebook")
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
