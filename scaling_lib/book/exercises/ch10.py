"""Chapter 10 (speculative decoding, mixture of experts, quantization): exercises. Every expected value is a
scaling_lib call."""

from ...quantization import quantization_table
from ...roofline import moe_critical_batch_size
from ...speculative import best_lookahead, expected_tokens_per_step
from .exercise import Exercise

EXERCISES = (
    Exercise(
        id="ch10.expected-tokens-k4-a08",
        question="Expected tokens per target step of speculative decoding with lookahead 4 and per-token acceptance 0.8.",
        unit="tokens",
        expected=lambda: expected_tokens_per_step(4, 0.8),
    ),
    Exercise(
        id="ch10.best-lookahead-a07-c01",
        question="The lookahead that maximises the speedup at acceptance 0.7 with a drafter costing 10% of a target step "
                 "(verification costs one step).",
        unit="tokens",
        expected=lambda: best_lookahead(0.7, 0.1),
    ),
    Exercise(
        id="ch10.moe-bcrit-8e-top1-v6e",
        question="Tokens per step an 8-expert, top-1 MoE needs for compute-bound expert matmuls on TPU v6e (bf16).",
        unit="tokens",
        expected=lambda: moe_critical_batch_size("tpu-v6e", 8, 1),
    ),
    Exercise(
        id="ch10.fp8-step-llama3-70b-ironwood",
        question="Decode step-time bound of LLaMA-3-70B, fp8 weights and KV, bf16 math, 8 Ironwood chips, batch 64, "
                 "32,768 tokens of context, in ms.",
        unit="ms",
        expected=lambda: quantization_table("llama3-70b", "ironwood", 8, 32768, 64,
                                            schemes=[("fp8", "fp8", "bf16")])[0].step_s,
    ),
)
