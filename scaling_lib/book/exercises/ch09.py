"""Chapter 9 (serving engines): exercises. Every expected value is a scaling_lib call."""

from ...serving import kv_transfer_time, prefill_latency, server_ratio
from .exercise import Exercise

EXERCISES = (
    Exercise(
        id="ch9.prefill-llama3-70b-8k-v6e8",
        question="Time to prefill 8,192 tokens of LLaMA-3-70B on 8 TPU v6e chips at 40% MFU, in s.",
        unit="s",
        expected=lambda: prefill_latency("llama3-70b", "tpu-v6e", 8, 8192, mfu=0.4),
    ),
    Exercise(
        id="ch9.prefill-per-decode-4k-in-1k-out",
        question="Prefill servers per decode server for LLaMA-3-70B on 16-chip TPU v5e servers, 4,096-token prompts, "
                 "1,024 generated tokens, decode batch 32 (40% MFU prefill).",
        unit="x",
        expected=lambda: server_ratio("llama3-70b", "tpu-v5e", 4096, 1024, 32, 16, 16).prefill_per_decode,
    ),
    Exercise(
        id="ch9.kv-transfer-llama3-70b-8k-v5e16",
        question="Time to move an 8,192-token bf16 LLaMA-3-70B KV cache from a 16-chip TPU v5e prefill slice to a "
                 "separate decode slice over the data-centre network (25 Gb/s per chip), in ms.",
        unit="ms",
        expected=lambda: kv_transfer_time("llama3-70b", 8192, "tpu-v5e", 16),
    ),
)
