"""Chapter 10, *Speculative decoding, mixture of experts and quantization*: its figures' checks."""

import re

from ...moe import routing_all_to_all
from ...roofline import critical_batch_size
from ...sharding import latency_bound_bytes
from ...speculative import best_lookahead, expected_tokens_per_step, roofline_speedup, speedup
from .core import close, figure_check, hline, vline


@figure_check(r"^Tokens per step saturate at")
def _ch10_speculation(suptitle, axes, *, cost):
    left, right = axes
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
def _ch10_roofline_speedup(suptitle, axes, *, cost):
    ax = axes[0]
    model, n_chips, chip, context, accept = re.match(
        r"^(\S+), (\d+) x (\S+), (\d+) tokens, \$\\alpha\$ = ([\d.]+):", ax.title).groups()
    for line in ax.lines:
        if line.label.startswith("$\\gamma$ = "):
            k = int(line.label.split("= ")[1])
            close(line.y, [roofline_speedup(model, chip, int(n_chips), int(b), int(context), k, float(accept), cost,
                                            check_capacity=False)
                           for b in line.x], f"roofline speedup, {line.label}")
    bcrit = critical_batch_size(chip)
    drawn = sorted(vline(line) for line in ax.lines if not line.label and line.x[0] == line.x[-1])
    close(drawn, sorted(bcrit / (k + 1) for k in (1, 2, 4, 8)), "B_crit / (gamma + 1) markers")


@figure_check(r"^MoE routing all-to-alls are latency-bound")
def _ch10_routing(suptitle, axes, *, moe, chip):
    ax = axes[0]
    line = ax.line(r"^one routing all-to-all")
    close(line.y * 1e3, [routing_all_to_all(moe, chip, int(b), expert_shards=8, activation_dtype="int8").bytes_each
                         for b in line.x], "all-to-all bytes")
    close(hline(ax.line(r"^latency-bound below")), latency_bound_bytes(chip, 8) / 1e3, "latency-bound threshold")
