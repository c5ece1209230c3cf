"""Chapter 2 exercises: sampling and the KV cache. Expected values are scaling_lib calls."""

from ...flops import cached_generation_flops, decode_step_flops, forward_flops, naive_generation_flops
from ...memory import kv_bytes_per_token
from .exercise import Exercise


def _attention_share_32k():
    prefill = forward_flops("llama3-8b", 32768, skip_masked=True)
    return prefill.attention / prefill.total

EXERCISES = (
    Exercise(
        id="ch2.decode-step-flops-llama3-70b",
        question="FLOPs of one LLaMA-3-70B decode step at batch 32 with 8,192 cached keys per sequence, in TFLOP.",
        unit="TFLOP",
        expected=lambda: decode_step_flops("llama3-70b", 8192, batch=32).total,
    ),
    Exercise(
        id="ch2.naive-over-cached-llama3-8b",
        question="How many times more FLOPs naive sampling spends than the KV cache: LLaMA-3-8B, 512-token prompt, "
                 "2,048 generated tokens, causal pairs only.",
        unit="x",
        expected=lambda: (naive_generation_flops("llama3-8b", 512, 2048, skip_masked=True).total
                          / cached_generation_flops("llama3-8b", 512, 2048, skip_masked=True).total),
    ),
    Exercise(
        id="ch2.kv-bytes-per-token-llama3-70b",
        question="bf16 KV cache bytes per token of LLaMA-3-70B, in kB.",
        unit="kB",
        expected=lambda: kv_bytes_per_token("llama3-70b", "bf16"),
    ),
    Exercise(
        id="ch2.prefill-attention-share-llama3-8b-32k",
        question="Share of a 32,768-token LLaMA-3-8B prefill's FLOPs spent in attention (causal pairs only), in %.",
        unit="%",
        expected=_attention_share_32k,
    ),
)
