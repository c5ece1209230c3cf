"""Chapter 3 exercises: prefill and generation are different workloads. Expected values are scaling_lib calls."""

from ...inference import decode_step_time, prefill_time
from ...models import get_model
from ...roofline import attention_intensity, matmul_intensity
from .exercise import Exercise

EXERCISES = (
    Exercise(
        id="ch3.prefill-mlp-intensity-llama3-8b-512",
        question="bf16 arithmetic intensity of LLaMA-3-8B's MLP up-projection (4096 -> 14336) in the prefill of one "
                 "512-token prompt, in FLOPs per byte.",
        unit="FLOPs/B",
        expected=lambda: matmul_intensity(512, get_model("llama3-8b").d_model, get_model("llama3-8b").d_ff),
    ),
    Exercise(
        id="ch3.decode-attention-intensity-palm-62b",
        question="bf16 decode attention intensity of PaLM 62B (multiquery, N = 32) with 2,048 cached tokens, in FLOPs/B.",
        unit="FLOPs/B",
        expected=lambda: attention_intensity(1, 2048, get_model("palm-62b").group_size),
    ),
    Exercise(
        id="ch3.ttft-llama3-8b-h100-4k",
        question="Time to first token of a 4,096-token prompt, LLaMA-3-8B on one H100 at 40% MFU, in ms.",
        unit="ms",
        expected=lambda: prefill_time("llama3-8b", "h100", 1, 4096, mfu=0.4),
    ),
    Exercise(
        id="ch3.tpot-llama3-8b-h100-b32",
        question="Lower bound on the time per output token of LLaMA-3-8B on one H100, batch 32, 4,096-token context, "
                 "bf16, in ms.",
        unit="ms",
        expected=lambda: decode_step_time("llama3-8b", "h100", 1, 32, 4096).total_s,
    ),
)
