"""Chapter 5, *A model of the decode step*: its figures' checks."""

import re

import numpy as np

from ...inference import decode_step_time, explain_decode, kv_compute_crossover_context
from .core import FigureDataError, close, figure_check, number, vline


@figure_check(r"^Latency vs throughput as the batch grows")
def _ch5_pareto(suptitle, axes):
    for ax in axes:
        name, n_chips, chip = re.match(r"^(\S+), bf16, (\d+) x (\S+)$", ax.title).groups()
        n_chips = int(n_chips)
        contexts = {line.color: int(number(line.label[4:])) for line in ax.lines if line.label.startswith("S = ")}
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
def _ch5_kv_share(suptitle, axes):
    ax = axes[0]
    name, n_chips, chip = re.match(r"^(\S+) on (\d+) x (\S+) \(bf16\)", ax.title).groups()
    for line in ax.lines:
        if line.label.startswith("B = "):
            b = int(line.label[4:])
            steps = [decode_step_time(name, chip, int(n_chips), b, int(s), check_capacity=False) for s in line.x]
            close(line.y, [s.kv_s / s.total_s for s in steps], f"{ax.title}: KV share at {line.label}")
    close(vline(ax.line(r"^\$S\^\*\$")), kv_compute_crossover_context(name, chip), "the crossover S*")


@figure_check(r"the three terms of the step$")
def _ch5_three_terms(suptitle, axes):
    ax = axes[0]
    batches = [int(t) for t in ax.xticklabels]
    reports = [explain_decode("llama3-70b", "tpu-7x", 8, b, 32768) for b in batches]
    kv = [r.step.kv_s * 1e3 for r in reports]
    close([h for *_, h in ax.bars["reading the KV cache"]], kv, "KV bars")
    close([h for *_, h in ax.bars["max(weight load, matmul FLOPs)"]],
          [max(r.step.weight_s, r.step.compute_s) * 1e3 for r in reports], "weight/FLOP bars")
    close(ax.line(r"^KV \+ matmul FLOPs").y, [(r.step.kv_s + r.step.compute_s) * 1e3 for r in reports], "KV + FLOPs")
