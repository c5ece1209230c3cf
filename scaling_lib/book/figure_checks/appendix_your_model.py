"""The appendix *Apply the book to your model*: its figures' checks."""

import re

from ...inference import decode_step_time
from ...plan import plan
from .core import FigureDataError, close, figure_check, number, vline


@figure_check(r" on one H100, [\d,]+ tokens of context \(bf16\)$")
def _appendix_your_model(suptitle, axes, *, model):
    ax = axes[0]
    context = int(number(re.search(r"one H100, ([\d,]+) tokens", ax.title).group(1)))
    if model.name not in ax.title:
        raise FigureDataError(f"{ax.title}: drawn for another model than the notebook's `model` ({model.name})")
    for term, label in (("kv_s", "reading the KV cache"), ("weight_s", "loading the weights"),
                        ("compute_s", "the matmul FLOPs"), ("total_s", "the step (bound)")):
        line = ax.line(f"^{re.escape(label)}$")
        close(line.y, [getattr(decode_step_time(model, "h100", 1, int(b), context, check_capacity=False), term) * 1e3 for b in line.x],
              f"{ax.title}: {label}")


@figure_check(r"^Cost against time per output token: ")
def _appendix_your_model_plan(suptitle, axes, *, plan_args):
    """The frontier and the choice are `plan.plan` of the notebook's PLAN_ARGS (`plan_args`), recomputed."""
    ax, args = axes[0], plan_args
    result = plan(**args)
    front = ax.line(r"^the cheapest deployment for each TPOT$")
    close(front.x, [p.tpot_s * 1e3 for p in result.frontier], f"{ax.title}: frontier TPOT")
    close(front.y, [p.dollars_per_million_output_tokens_all_in for p in result.frontier], f"{ax.title}: frontier cost")
    choice = ax.line(r"^the plan's choice$")
    close([choice.x[0], choice.y[0]], [result.best.tpot_s * 1e3, result.best.dollars_per_million_output_tokens_all_in],
          f"{ax.title}: the choice")
    close([vline(ax.line(r"^the TPOT target$"))], [args["tpot"] * 1e3], f"{ax.title}: the TPOT target")
