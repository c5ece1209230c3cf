"""Chapter 12, *Choosing a layout by the metric*: its figures' checks."""

import re

import numpy as np

from ...frontier import measured_mfu, measured_step_s, pareto_frontier, sweep
from ...hardware import get_chip
from ...hops import cube_torus, decode_collective_latency, torus_diameter
from ...measurements import pope_rows
from .core import FigureDataError, close, figure_check, number


def _chip_named(text: str) -> str:
    """The hardware table's name for a chip as a title writes it ("TPU v4" -> "tpu-v4")."""
    return get_chip(text.strip().lower().replace(" ", "-")).name


def _frontier_of(model: str, chip: str, phase: str, dtype: str) -> tuple:
    """The cost model's frontier, recomputed: `pareto_frontier(sweep(...))` with the default chips and batches, heads
    padded to split over the chips as Pope et al. did (chapter 12's `PAD`)."""
    return pareto_frontier(sweep(model, chip, phase, weight_dtype=dtype, pad_heads=True))


@figure_check(r"^Latency against MFU on .+: the cost model's frontier")
def _ch12_frontier(suptitle, axes):
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
def _ch12_cost(suptitle, axes, *, chip):
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
def _ch12_hops(suptitle, axes, *, boardfly_hops, per_layer, chip):
    hops_ax, time_ax = axes
    torus = hops_ax.line(r"^3D torus")
    close(torus.y, [torus_diameter(cube_torus(int(n))) for n in torus.x], "torus diameters")
    boardfly = hops_ax.line(r"Boardfly")
    close(boardfly.y, [boardfly_hops], "Boardfly's stated hops")
    chips = int(number(re.match(r"^([\d,]+) chips: ", time_ax.title).group(1)))
    close(boardfly.x, [chips], "Boardfly's slice size")
    n_layers = int(re.search(r"an (\d+)-layer", time_ax.title).group(1))
    hop_s = get_chip(chip).ici_hop_latency
    fixed_us = [float(re.match(r"^t_fixed = ([\d.]+) us$", t).group(1)) for t in time_ax.xticklabels]
    for label, rects in time_ax.bars.items():
        hops = int(re.search(r", (\d+) hops$", label).group(1))
        mesh = re.match(r"^(\d+) x (\d+) x (\d+) torus", label)
        if mesh and (tuple(int(a) for a in mesh.groups()) != cube_torus(chips)
                     or hops != torus_diameter(cube_torus(chips))):
            raise FigureDataError(f"{time_ax.title}: {label!r} is not the {chips}-chip torus {cube_torus(chips)}")
        close([h for *_, h in rects], [decode_collective_latency(n_layers, per_layer, hops, hop_s, f * 1e-6) * 1e3
                                       for f in fixed_us], f"{time_ax.title}: {label}")
