"""Chapter 4 (the KV cache dominates memory): exercises. Every expected value is a scaling_lib call."""

from ...inference import decode_step_time_kv_heads
from ...memory import kv_bytes_per_token, kv_cache_bytes, max_batch_size
from ..claims.memory import GQA_KV_HEADS
from .exercise import Exercise


def _gqa_1_to_5_throughput(batch: int, context_len: int = 8192) -> float:
    """The Scaling Book's GQA table: LLaMA-2-13B's KV cache with K = 8, but the MHA model's weights kept."""
    step = decode_step_time_kv_heads("llama2-13b", GQA_KV_HEADS, "tpu-v5e", 8, batch, context_len)
    return batch / step.total_s


EXERCISES = (
    Exercise(
        id="ch4.kv-per-token-llama3-70b",
        question="KV-cache bytes per token of LLaMA-3-70B (L=80, K=8, H=128) in bf16, in kB.",
        unit="kB",
        expected=lambda: kv_bytes_per_token("llama3-70b", "bf16"),
    ),
    Exercise(
        id="ch4.kv-32k-llama3-8b",
        question="KV cache of one 32,768-token sequence of LLaMA-3-8B in bf16, in GB.",
        unit="GB",
        expected=lambda: kv_cache_bytes("llama3-8b", 32768, batch=1, dtype="bf16"),
    ),
    Exercise(
        id="ch4.max-batch-llama3-70b-v5e16",
        question="Largest batch of 8,192-token sequences LLaMA-3-70B (bf16 weights and KV cache) fits on 16 TPU v5e.",
        unit="sequences",
        expected=lambda: max_batch_size("llama3-70b", "tpu-v5e", 16, 8192, "bf16", "bf16"),
    ),
    Exercise(
        id="ch4.gqa-throughput-batch64",
        question="Upper bound on the decode throughput of LLaMA-2-13B with 1:5 GQA (KV cache / 5, MHA weights kept) at "
                 "batch 64 and 8,192 tokens of context on 8 TPU v5e, in tokens/s.",
        unit="tok/s",
        expected=lambda: _gqa_1_to_5_throughput(64),
    ),
)
