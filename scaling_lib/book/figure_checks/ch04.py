"""Chapter 4, *The KV cache dominates memory*: its figures' checks."""

import re

from ...hardware import get_chip
from ...inference import decode_step_time_kv_heads
from ...memory import kv_cache_bytes, max_batch_size, memory_footprint, param_bytes
from ...models import get_model
from ...roofline import critical_batch_size
from .core import close, figure_check, hline, vline


@figure_check(r"^LLaMA-2-13B on 8 x TPU v5e: memory vs batch$")
def _ch4_memory_vs_batch(suptitle, axes):
    ax, model, chip = axes[0], get_model("llama2-13b"), get_chip("tpu-v5e")
    gqa = model.with_(n_kv_heads=8)
    mha = ax.line(r"^MHA")
    batches = [int(b) for b in mha.x]
    close(mha.y * 1e9, [memory_footprint(model, chip, 8, b, 8192).total_bytes for b in batches], "MHA footprint")
    source = ax.line(r"^GQA 1:5")
    close(source.y * 1e9, [param_bytes(model) + kv_cache_bytes(gqa, 8192, b) for b in batches], "GQA 1:5 footprint")
    real = ax.line(r"^GQA, real")
    close(real.y * 1e9, [memory_footprint(gqa, chip, 8, b, 8192).total_bytes for b in batches], "GQA model")
    close(hline(ax.line(r"^HBM of 8")), 8 * chip.hbm_capacity / 1e9, "HBM capacity")
    close(hline(ax.line(r"^weights alone")), param_bytes(model) / 1e9, "weight bytes")
    largest = ax.line(r"^largest batch that fits")
    capacity = 8 * chip.hbm_capacity
    gqa_fit = max(b for b in range(1, 1024) if param_bytes(model) + kv_cache_bytes(gqa, 8192, b) <= capacity)
    close(largest.x, [max_batch_size(model, chip, 8, 8192), gqa_fit], "largest batches")
    close(vline(ax.line(r"B_\\mathrm\{crit\}")), critical_batch_size(chip), "B_crit")


@figure_check(r"^LLaMA-2-13B on 8 x TPU v5e: throughput vs batch$")
def _ch4_throughput_vs_batch(suptitle, axes):
    """B / step time for MHA and the source's GQA 1:5 (split where HBM fills) and each ceiling n W_hbm / KV_seq."""
    ax, model, chip = axes[0], get_model("llama2-13b"), get_chip("tpu-v5e")
    for label, kv_heads in (("MHA", model.n_kv_heads), ("GQA 1:5", 8)):
        cache_model = model.with_(n_kv_heads=kv_heads)
        for part in ("fits in HBM", "does not fit"):
            line = ax.line(r"^" + re.escape(label) + r".*: " + part)
            expected = [b / decode_step_time_kv_heads(model, kv_heads, chip, 8, int(b), 8192, check_capacity=False).total_s for b in line.x]
            close(line.y, expected, f"{label} throughput ({part})")
        close(hline(ax.line(r"^" + re.escape(label) + r".*: ceiling")),
              8 * chip.hbm_bandwidth / kv_cache_bytes(cache_model, 8192), f"{label} ceiling")
    fits = ax.line(r"^MHA.*: fits in HBM")
    close(fits.x[-1], max_batch_size(model, chip, 8, 8192), "the last MHA batch that fits")
    close(vline(ax.line(r"B_\\mathrm\{crit\}")), critical_batch_size(chip), "B_crit")
