"""One plotting style for the whole book, so every figure looks like it belongs to the same page.

Usage in a notebook (`book.notebook.setup()` already applies the style):
    from scaling_lib.book.plotting import chip_color, new_figure
    fig, ax = new_figure()
"""

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Rectangle

from ..hardware import get_chip
from ..roofline import attainable_flops, ridge_point

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


def draw_matmul_on_roofline(ax, report) -> None:
    """A chip's roofline with one matmul on it: the point (intensity, attainable FLOP/s) of a
    `roofline.explain_matmul` report, labelled with its bound, and the ridge point dotted."""
    plot_roofline(ax, report.chip, report.compute_dtype)
    ax.plot([report.intensity], [report.attainable_flops], "s", color="black",
            label=f"B = {report.batch}: {report.time.bound}-bound")
    ax.axvline(report.ridge, color="gray", linewidth=0.8, linestyle=":")
    ax.set_title(f"{report.chip}, {report.weight_dtype} weights, {report.compute_dtype} math")
    ax.legend(loc="lower right", fontsize=8)


def _replica_color(holders: int, n_devices: int):
    """viridis, from dark (one holder) to light (all n_devices hold the block)."""
    return plt.get_cmap("viridis")(0.15 + 0.8 * (holders - 1) / max(n_devices - 1, 1))


def _block_color(block, shade: str, n_devices: int):
    if shade == "device":
        return plt.get_cmap("tab10")(block.devices[0] % 10)
    return _replica_color(len(block.devices), n_devices)


def draw_device_blocks(ax, blocks, extent, shade: str = "replicas", n_devices: int = 8, labels=("", ""),
                       title: str = ""):
    """Draw which device holds which block of an array (blocks from `tiny.xla.device_blocks`) as labelled rectangles.

    extent: (rows, cols) of the array along the two drawn dimensions. shade="replicas" colours a block by how many
    devices hold it (one colour per replication factor, viridis); shade="device" by the device id (tab10; meant for
    layouts where each block has one holder). Each rectangle is labelled with its devices' ids (or "all"). Returns
    the legend handles and texts for the shading."""
    if shade not in ("replicas", "device"):
        raise ValueError(f"shade must be 'replicas' or 'device', got {shade!r}")
    for block in blocks:
        (r0, r1), (c0, c1) = block.rows, block.cols
        ax.add_patch(Rectangle((c0, r0), c1 - c0, r1 - r0, facecolor=_block_color(block, shade, n_devices),
                               edgecolor="white", linewidth=1.5, alpha=0.85))
        ids = block.devices
        text = "all" if len(ids) == n_devices and n_devices > 1 else "\n".join(
            ",".join(map(str, ids[i:i + 2])) for i in range(0, len(ids), 2))
        ax.text((c0 + c1) / 2, (r0 + r1) / 2, text if shade == "replicas" else f"d{text}", ha="center",
                va="center", fontsize=7, color="white" if shade == "replicas" else "black")
    ax.set_xlim(0, extent[1])
    ax.set_ylim(extent[0], 0)
    ax.grid(False)
    ax.set_ylabel(labels[0], fontsize=8)
    ax.set_xlabel(labels[1], fontsize=8)
    ax.set_title(title, fontsize=9)
    ax.tick_params(labelsize=7)
    if shade == "device":
        ids = sorted({d for block in blocks for d in block.devices})
        return ([Rectangle((0, 0), 1, 1, color=plt.get_cmap("tab10")(i % 10)) for i in ids],
                [f"device {i}" for i in ids])
    factors = sorted({len(block.devices) for block in blocks})
    return ([Rectangle((0, 0), 1, 1, color=_replica_color(k, n_devices)) for k in factors], [f"held by {k} device{'s' if k > 1 else ''}" for k in factors])
