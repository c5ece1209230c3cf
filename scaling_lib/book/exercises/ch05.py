"""Chapter 5 (a model of the decode step): exercises. Every expected value is a scaling_lib call."""

from ...hardware import get_chip
from ...inference import decode_throughput, kv_compute_crossover_context, step_time_bound
from ...memory import param_bytes
from ..claims.step_time import T2_INPUTS
from .exercise import Exercise

EXERCISES = (
    Exercise(
        id="ch5.pop-quiz-30b-batch64",
        question="Step-time lower bound of the 30B dense model (int8 weights, bf16 math, 16 TPU v5e, 8,192 tokens of "
                 "context, 100 kB of KV cache per token) at batch 64, in ms.",
        unit="ms",
        expected=lambda: step_time_bound(batch=64, **T2_INPUTS).total_s,  # claim T2's pop quiz
    ),
    Exercise(
        id="ch5.kv-crossover-llama3-70b-v5e",
        question="Context length above which reading LLaMA-3-70B's bf16 KV cache takes longer than its bf16 matmul FLOPs "
                 "on TPU v5e, at any batch, in tokens.",
        unit="tokens",
        expected=lambda: kv_compute_crossover_context("llama3-70b", "tpu-v5e", "bf16", "bf16"),
    ),
    Exercise(
        id="ch5.weight-floor-llama3-70b-ironwood-fp8",
        question="The fastest a decode step of LLaMA-3-70B with fp8 weights can ever be on 8 Ironwood chips, in ms.",
        unit="ms",
        expected=lambda: param_bytes("llama3-70b", "fp8") / (8 * get_chip("ironwood").hbm_bandwidth),
    ),
    Exercise(
        id="ch5.throughput-llama3-70b-v5e16-int8",
        question="Decode throughput bound of LLaMA-3-70B with int8 weights and int8 KV cache, bf16 math, on 16 TPU v5e "
                 "at batch 32 and 8,192 tokens of context, in tokens/s.",
        unit="tok/s",
        expected=lambda: decode_throughput("llama3-70b", "tpu-v5e", 16, 32, 8192, "int8", "int8", "bf16"),
    ),
)
