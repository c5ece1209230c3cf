"""Chapter 14, *Serving details*: its figures' checks."""

import re

import numpy as np

from ...memory import max_batch_size
from ...serving import prefill_latency
from ...speculative import roofline_speedup
from ...tiny.engine import ServeResult
from .core import FigureDataError, close, figure_check


@figure_check(r"^Continuous batching on the tiny model: which request holds which slot$")
def _ch14_slots(suptitle, axes, *, served):
    ax = axes[0]
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
def _ch14_prefill(suptitle, axes, *, model, chip, n_chips):
    latency_ax, rate_ax = axes
    for line in latency_ax.lines:
        t = int(re.match(r"^T = (\d+)$", line.label).group(1))
        seconds = np.array([prefill_latency(model, chip, n_chips, t, batch=int(b)) for b in line.x])
        close(line.y, seconds * 1e3, f"{latency_ax.title}: {line.label}")
        close(rate_ax.line(f"^T = {t}$").y, line.x * t / seconds, f"{rate_ax.title}: {line.label}")


@figure_check(r"^Prefix hit rate$")
def _ch14_prefix_tiers(suptitle, axes, *, curves, budgets):
    hit_ax, ttft_ax = axes
    for (routing, with_host), runs in curves.items():
        label = f"^{re.escape(routing)}, {'HBM [+] host DRAM' if with_host else 'HBM only'}$"
        for ax in axes:
            close(ax.line(label).x, np.asarray(budgets) / 1e9, f"{ax.title}: {routing} budgets")
        close(hit_ax.line(label).y, [float(np.mean(r.routed.tier != "miss")) for r in runs],
              f"{hit_ax.title}: {routing}")
        close(ttft_ax.line(label).y, [np.mean(r.ttft_s) * 1e3 for r in runs], f"{ttft_ax.title}: {routing}")


@figure_check(r"^\S+ on \d+ \S+, lookahead \d+, acceptance [\d.]+$")
def _ch14_speculation(suptitle, axes, *, model, spec):
    ax = axes[0]
    n_chips, chip, lookahead, acceptance = re.match(r"^\S+ on (\d+) (\S+), lookahead (\d+), acceptance ([\d.]+)$",
                                                    ax.title).groups()
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
