"""Chapter 6 exercises: shrinking the KV cache. Expected values are scaling_lib calls."""

from ...inference import decode_step_time
from ...kv_levers import cross_layer_kv_bytes, local_global_kv_bytes, ragged_kv_reads
from ...memory import kv_cache_bytes
from ...models import get_model
from ...roofline import critical_batch_size
from ..claims.step_time import T4_DEPLOYMENT
from .exercise import Exercise

EXERCISES = (
    Exercise(
        id="ch6.mqa-kv-llama3-70b",
        question="KV cache of one 32,768-token sequence of LLaMA-3-70B in bf16 if it used multiquery attention (K = 1) "
                 "instead of its 8 KV heads, in GB.",
        unit="GB",
        expected=lambda: kv_cache_bytes(get_model("llama3-70b").with_(n_kv_heads=1), 32768),
    ),
    Exercise(
        id="ch6.local-global-llama3-8b",
        question="KV cache of one 32,768-token sequence of LLaMA-3-8B (bf16) if 3 of every 4 layers attended only to "
                 "the last 4,096 tokens (every 4th layer global), in GB.",
        unit="GB",
        expected=lambda: local_global_kv_bytes("llama3-8b", 32768, window=4096, global_every=4),
    ),
    Exercise(
        id="ch6.paged-slots",
        question="A decode batch holds sequences of 100, 900, 2,000 and 4,000 tokens. How many KV slots (tokens) does "
                 "a paged cache with 16-token blocks read per layer and head?",
        unit="tokens",
        expected=lambda: ragged_kv_reads([100, 900, 2000, 4000], 16).paged_slots,
    ),
    Exercise(
        id="ch6.t4-int8-kv-only",
        question="LLaMA-3-70B on 8 Ironwood chips, batch 64, 32,768-token context: decode step lower bound with bf16 "
                 "weights and math but int8 KV entries, in ms.",
        unit="ms",
        expected=lambda: decode_step_time(**T4_DEPLOYMENT, kv_dtype="int8").total_s,  # claim T4's configuration
    ),
    Exercise(
        id="ch6.cla-read-bytes",
        question="LLaMA-3-70B, batch 8 at 32,768 tokens, bf16, with pairs of layers sharing one K/V: how many bytes "
                 "of KV cache does one decode step read, in GB?",
        unit="GB",
        expected=lambda: cross_layer_kv_bytes("llama3-70b", 32768, share_every=2, batch=8).read_bytes,
    ),
    Exercise(
        id="ch6.bcrit-v6e-int8-weights",
        question="Critical batch size of a TPU v6e with int8 weights upcast to bf16 for the matmul, in tokens.",
        unit="tokens",
        expected=lambda: critical_batch_size("tpu-v6e", "int8", "bf16"),
    ),
)
