"""Chapter 14 (serving details): exercises. Every expected value is a scaling_lib call."""

from ...sequence_sharding import sequence_sharded_attention
from ...serving import prefill_latency, prefill_saturating_batch
from .exercise import Exercise

EXERCISES = (
    Exercise(
        id="ch14.prefill-saturating-batch-llama3-8b",
        question="LLaMA-3-8B in bf16 on TPU v5e at 40% MFU: how many 32-token prompts must be prefilled together "
                 "before prefill is compute-bound?",
        unit="",
        expected=lambda: prefill_saturating_batch("llama3-8b", "tpu-v5e", 32, mfu=0.4),
    ),
    Exercise(
        id="ch14.prefill-llama3-70b-8k-ironwood",
        question="Time to prefill an 8,192-token prompt of LLaMA-3-70B on 8 Ironwood chips at 40% MFU, in ms.",
        unit="ms",
        expected=lambda: prefill_latency("llama3-70b", "ironwood", 8, 8192, mfu=0.4),
    ),
    Exercise(
        id="ch14.sequence-sharded-kv-palm-62b",
        question="PaLM 62B's KV cache for one sequence of 131,072 tokens (bf16), split along the sequence over 16 "
                 "chips: bytes per chip, in GB.",
        unit="GB",
        expected=lambda: sequence_sharded_attention("palm-62b", "tpu-v4", 16, 1, 131072).kv_bytes_per_chip,
    ),
)
