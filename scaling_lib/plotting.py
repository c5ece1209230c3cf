"""One plotting style for the whole book, so every figure looks like it belongs to the same page.

Usage in a notebook:
    from scaling_lib.plotting import apply_style, chip_color
    apply_style()
    fig, ax = new_figure()
"""

import matplotlib
import matplotlib.pyplot as plt

# A fixed colour per chip and per regime, so a reader can follow "v5e is blue" from chapter to chapter.
CHIP_COLORS = {
    "tpu-v4": "#8c564b",
    "tpu-v5e": "#1f77b4",
    "tpu-v5p": "#17becf",
    "tpu-v6e": "#2ca02c",
    "tpu-7x": "#9467bd",
    "h100": "#d62728",
    "h200": "#ff7f0e",
    "b200": "#e377c2",
}
REGIME_COLORS = {"memory": "#fdd49e", "compute": "#c6dbef", "kv": "#fc9272", "weights": "#9ecae1",
                 "flops": "#a1d99b", "ici": "#bcbddc"}
FIGSIZE = (7.0, 4.2)
DPI = 110


def apply_style() -> None:
    """Set matplotlib defaults used by every figure of the book (deterministic size, PNG output, readable fonts)."""
    matplotlib.rcParams.update({
        "figure.figsize": FIGSIZE,
        "figure.dpi": DPI,
        "savefig.dpi": DPI,
        "axes.grid": True,
        "grid.alpha": 0.3,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "axes.titlesize": 12,
        "axes.labelsize": 11,
        "legend.fontsize": 9,
        "legend.frameon": False,
        "font.family": "DejaVu Sans",
        "svg.hashsalt": "scaling-book",
    })


def chip_color(name: str) -> str:
    """The book's colour for a chip (grey for chips outside the table)."""
    return CHIP_COLORS.get(name, "#7f7f7f")


def new_figure(nrows: int = 1, ncols: int = 1, **kwargs):
    """plt.subplots with the book's size scaled to the grid; returns (fig, ax or axes)."""
    width, height = FIGSIZE
    kwargs.setdefault("figsize", (width * max(1, ncols * 0.8), height * max(1, nrows * 0.8)))
    kwargs.setdefault("constrained_layout", True)
    return plt.subplots(nrows, ncols, **kwargs)


def plot_roofline(ax, chip, compute_dtype: str = "bf16", intensities=None, label=None, **line_kwargs):
    """Draw min(C, I x W_hbm) for one chip on log-log axes and mark its ridge point; returns the line."""
    import numpy as np

    from .hardware import get_chip
    from .roofline import attainable_flops, ridge_point

    chip = get_chip(chip)
    if intensities is None:
        intensities = np.logspace(-1, 4.5, 200)
    rates = [attainable_flops(float(i), chip, compute_dtype) for i in intensities]
    line_kwargs.setdefault("color", chip_color(chip.name))
    (line,) = ax.loglog(intensities, rates, label=label or f"{chip.name} ({compute_dtype})", **line_kwargs)
    ridge = ridge_point(chip, compute_dtype)
    ax.plot([ridge], [chip.peak_flops(compute_dtype)], "o", color=line.get_color(), markersize=4)
    ax.set_xlabel("arithmetic intensity (FLOPs per byte)")
    ax.set_ylabel("attainable FLOP/s")
    return line
