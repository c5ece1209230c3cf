"""Chapter 7 (sharding prefill and generation): exercises. Every expected value is a scaling_lib call."""

from ...models import get_model
from ...sharding import beta, fsdp_decode_cost, kv_cache_sharding, latency_bound_bytes, max_decode_model_parallelism
from .exercise import Exercise

EXERCISES = (
    Exercise(
        id="ch7.max-mp-llama3-8b-ironwood-b64",
        question="How many ways can LLaMA-3-8B be model-sharded for decode at batch 64 on Ironwood before the ICI "
                 "collectives outlast the weight read (F / (B beta), unrounded beta)?",
        unit="ways",
        expected=lambda: max_decode_model_parallelism(get_model("llama3-8b").d_ff, 64, beta("ironwood")),
    ),
    Exercise(
        id="ch7.latency-bound-v5e-16",
        question="Below how many bytes is a 16-way collective on TPU v5e latency-bound (about 1 us per hop)? Answer in kB.",
        unit="kB",
        expected=lambda: latency_bound_bytes("tpu-v5e", 16),
    ),
    Exercise(
        id="ch7.fsdp-slowdown-llama3-70b-v5e16",
        question="FSDP decode of LLaMA-3-70B (bf16) on 16 TPU v5e: how many times longer does all-gathering the weights "
                 "over ICI take than reading each chip's shard from HBM?",
        unit="x",
        expected=lambda: fsdp_decode_cost("llama3-70b", "tpu-v5e", 16).slowdown,
    ),
    Exercise(
        id="ch7.kv-batch-shards-llama3-70b-32",
        question="LLaMA-3-70B decodes at batch 64 on 32 chips with its KV cache split by KV heads first, then by batch: "
                 "how many ways is the batch split?",
        unit="ways",
        expected=lambda: kv_cache_sharding(get_model("llama3-70b").n_kv_heads, 64, 32).batch_shards,
    ),
)
