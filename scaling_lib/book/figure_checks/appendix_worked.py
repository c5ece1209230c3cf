"""The appendix *Worked problems*: its figures' checks."""

import numpy as np

from .core import close, figure_check, vline


@figure_check(r"^Layer time against batch on this CPU$")
def _worked_cpu_rule(suptitle, axes, *, rule):
    time_ax, rate_ax = axes
    seconds, batches = np.asarray(rule.seconds), np.asarray(rule.batches, float)
    predicted = np.array([rule.predicted_seconds(int(b)) for b in rule.batches])
    close(time_ax.line(r"^measured$").y, seconds * 1e3, "measured layer times")
    close(time_ax.line(r"^roofline").y, predicted * 1e3, "roofline layer times")
    close(rate_ax.line(r"^measured$").y, batches / seconds, "measured throughput")
    close(rate_ax.line(r"^roofline$").y, batches / predicted, "roofline throughput")
    for ax in axes:
        close(vline(ax.line(r"^predicted critical batch$")), rule.predicted_batch, f"{ax.title}: B_crit")
