"""Chapter 2, *Sampling and the KV cache*: its figures' checks."""

import re

import numpy as np

from ...flops import generation_flops_curve
from ...memory import kv_bytes_per_token, kv_cache_bytes, param_bytes
from ...models import get_model
from .core import RTOL, FigureDataError, close, figure_check, hline


@figure_check(r"^Cumulative FLOPs of generation")
def _ch2_generation_flops(suptitle, axes, *, config, prompt_len, batch):
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
    naive, fixed = left.line(r"^naive: formula"), left.line(r"^KV cache \(\d+ slots\): formula")
    n = len(naive.x)  # the left panel: the notebook's tiny `config`, `prompt_len` and `batch`
    close(naive.y, [c.total for c in generation_flops_curve(config, prompt_len, n, batch, cached=False)],
          "naive formula")
    slots = int(re.search(r"\((\d+) slots\)", fixed.label).group(1))
    close(fixed.y, [c.total for c in generation_flops_curve(config, prompt_len, n, batch, cache_len=slots)],
          "fixed-cache formula")
    close(left.line(r"valid slots only").y, [c.total for c in generation_flops_curve(config, prompt_len, n, batch)],
          "ragged formula")
    close(left.line(r"^naive: XLA").y, naive.y, "XLA's naive FLOPs against the formula", rtol=0.02)
    close(left.line(r"^KV cache: XLA").y, fixed.y, "XLA's cached FLOPs against the formula", rtol=0.02)


@figure_check(r"^One sequence's KV cache against the model's weights$")
def _ch2_kv_against_weights(suptitle, axes, *, models):
    """Each model's one-sequence bf16 KV cache by context, its weights as a level, and where the two cross (`models`:
    the notebook's {model name: (legend label, attention kind, color)})."""
    ax = axes[0]
    for name, (label, _kind, _color) in models.items():
        model = get_model(name)
        cache = ax.line(r"^" + re.escape(label) + r" KV cache")
        close(cache.y * 1e9, [kv_cache_bytes(model, int(s), 1, "bf16") for s in cache.x], f"{label} KV cache")
        weights = param_bytes(model, "bf16")
        close(hline(ax.line(r"^" + re.escape(label) + r" weights$")) * 1e9, weights, f"{label} weights")
        crossings = [line for line in ax.lines if not line.label and len(line.x) == 1
                     and np.isclose(line.y[0] * 1e9, weights, rtol=RTOL)]
        close([line.x[0] for line in crossings], [weights / kv_bytes_per_token(model, "bf16")], f"{label} crossing")
