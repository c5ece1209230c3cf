"""Chapter 8 (partitioning layouts, Pope et al. 2022): exercises. Every expected value is a scaling_lib call."""

from ...layouts import POPE_HEADLINE_RUNS, comm_volume_curves, ffn_comm_volume, max_context_length, mfu
from ...models import get_model, param_count
from .exercise import Exercise

EXERCISES = (
    Exercise(
        id="ch8.2d-ws-bytes-palm-540b",
        question="Per-chip bytes one feed-forward layer of PaLM 540B sends under 2D weight-stationary on a 4x4x4 TPU v4 "
                 "slice, for 2,048 tokens per batch in bf16 (Pope et al.'s accounting), in MB.",
        unit="MB",
        expected=lambda: ffn_comm_volume("2d-ws", "palm-540b", 2048, (4, 4, 4)).total_bytes,
    ),
    Exercise(
        id="ch8.wg-xyz-switch-tokens",
        question="Tokens per batch above which weight-gathered over XYZ moves the fewest bytes per chip for PaLM 540B "
                 "on a 4x4x4 slice (bf16), in tokens.",
        unit="tokens",
        expected=lambda: comm_volume_curves("palm-540b", (4, 4, 4), (64, 2**20)).switch_points[-1].tokens,
    ),
    Exercise(
        id="ch8.mfu-low-latency-decode",
        question="MFU of Pope et al.'s low-latency decode run (batch 64, 64 generated tokens in 1.82 s, PaLM 540B, "
                 "64 TPU v4 chips, bf16 peak), in %.",
        unit="%",
        expected=lambda: mfu(param_count(get_model("palm-540b")), POPE_HEADLINE_RUNS["decode-low-latency"].tokens,
                                   POPE_HEADLINE_RUNS["decode-low-latency"].seconds, "tpu-v4", 64),
    ),
    Exercise(
        id="ch8.context-batch-sharded-b256",
        question="Longest context PaLM 540B's multiquery KV cache allows at batch 256 on 64 TPU v4 chips when attention "
                 "is sharded over batch and 30% of HBM holds the cache, in tokens.",
        unit="tokens",
        expected=lambda: max_context_length("palm-540b", "tpu-v4", 64, 256, "batch", 0.3),
    ),
)
