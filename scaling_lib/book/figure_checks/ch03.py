"""Chapter 3, *Prefill and generation are different workloads*: its figures' checks."""

import numpy as np

from ...flops import forward_flops
from ...inference import decode_step_time, prefill_time
from ...memory import max_batch_size
from ...models import get_model
from ...roofline import attainable_flops, attention_intensity, matmul_intensity, ridge_point
from .core import close, figure_check, hline, vline


@figure_check(r"^Prefill climbs onto the roof")
def _ch3_prefill_decode_roofline(suptitle, axes, *, model, group):
    chips = {"TPU v5e": "tpu-v5e", "H100": "h100"}
    llama = get_model(model)  # the notebook's model and its GQA group size G
    formula_x = {
        "prefill, linear": [matmul_intensity(t, llama.d_model, llama.d_ff) for t in (16, 128, 1024)],
        "prefill, attention MHA": [attention_intensity(t, t) for t in (16, 128, 1024)],
        "decode, linear": [matmul_intensity(b, llama.d_model, llama.d_ff) for b in (1, 8, 64)],
        "decode, attention MHA / GQA": [attention_intensity(1, 4096), attention_intensity(1, 4096, group)],
    }
    for ax in axes:
        chip = chips[ax.title]
        for line in ax.lines:
            if len(line.x) == 2 and line.x[0] == line.x[1]:  # the ridge
                close(line.x[0], ridge_point(chip), f"{ax.title}: ridge")
                continue
            close(line.y, [attainable_flops(float(i), chip) for i in line.x], f"{ax.title}: {line.label or 'points'}")
            for prefix, xs in formula_x.items():
                if line.label.startswith(prefix) and "XLA" not in line.label:
                    close(line.x, xs, f"{ax.title}: {line.label}")


@figure_check(r"^The two latencies of LLaMA-3-8B on one H100 \(bf16\)$")
def _ch3_two_latencies(suptitle, axes, *, mfu):
    """TTFT in both FLOP counts (and with causal attention), the batch-1 TPOT, the FLOP term of the step, and the
    largest batch that fits."""
    left, right = axes
    model = get_model("llama3-8b")
    book = left.line(r"the book's and the sources' count")
    prompts = [int(t) for t in book.x]
    close(book.y / 1e3, [prefill_time(model, "h100", 1, t, mfu) for t in prompts], "TTFT, 2 P T")
    expected_mm = np.array([prefill_time(model, "h100", 1, t, mfu, params="matmul") for t in prompts])
    close(left.line(r"matmul FLOPs only").y / 1e3, expected_mm, "TTFT, 2 P_mm T")
    attention = [forward_flops(model, t, skip_masked=True).total / forward_flops(model, t).matmul for t in prompts]
    close(left.line(r"causal attention$").y / 1e3, expected_mm * attention, "TTFT with causal attention")
    close(hline(left.line(r"TPOT")) / 1e3, decode_step_time(model, "h100", 1, 1, 2048).total_s, "TPOT at B = 1")
    flops = right.line(r"^matmul FLOPs alone")
    close(flops.y / 1e3, [decode_step_time(model, "h100", 1, int(b), 2048, check_capacity=False).compute_s for b in flops.x],
          "the FLOP term")
    close(vline(right.line(r"^HBM full")), max_batch_size(model, "h100", 1, 2048), "the largest batch")
