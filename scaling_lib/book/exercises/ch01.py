"""Chapter 1 exercises: rooflines and the critical batch size. Expected values are scaling_lib calls."""

from ...roofline import attention_intensity, critical_batch_size, matmul_time, ridge_point
from .exercise import Exercise

EXERCISES = (
    Exercise(
        id="ch1.bcrit-v6e",
        question="Critical batch size of a TPU v6e with bf16 weights and bf16 math, in tokens.",
        unit="tokens",
        expected=lambda: critical_batch_size("tpu-v6e", "bf16", "bf16"),
    ),
    Exercise(
        id="ch1.bcrit-h100-int8-weights",
        question="Critical batch size of an H100 with int8 weights upcast to bf16 for the matmul, in tokens.",
        unit="tokens",
        expected=lambda: critical_batch_size("h100", "int8", "bf16"),
    ),
    Exercise(
        id="ch1.bcrit-h200",
        question="Critical batch size of an H200 (same bf16 rate as an H100, more HBM bandwidth), bf16 weights and math, "
                 "in tokens.",
        unit="tokens",
        expected=lambda: critical_batch_size("h200", "bf16", "bf16"),
    ),
    Exercise(
        id="ch1.matmul-time-v5e",
        question="Lower bound on the time of a bf16 [64, 8192] x [8192, 28672] matmul on one TPU v5e, in ms.",
        unit="ms",
        expected=lambda: matmul_time(64, 8192, 28672, "tpu-v5e").total_s,
    ),
    Exercise(
        id="ch1.prefill-attention-crossover-h100",
        question="Prompt length above which multi-head prefill attention is compute-bound on an H100 (bf16), in tokens.",
        unit="tokens",
        # Prefill attention intensity is T/2; it crosses the ridge point C / W at T = 2 C / W.
        expected=lambda: 2.0 * ridge_point("h100", "bf16"),
    ),
    Exercise(
        id="ch1.gqa-decode-intensity",
        question="Arithmetic intensity (FLOPs per byte) of LLaMA-3-70B's decode attention (N=64, K=8) at 8,192 cached "
                 "tokens.",
        unit="FLOPs/B",
        expected=lambda: attention_intensity(1, 8192, group_size=64 // 8),
    ),
    Exercise(
        id="ch1.ironwood-ridge",
        question="Ridge point of an Ironwood (TPU7x) chip in fp8, in FLOPs per byte.",
        unit="FLOPs/B",
        expected=lambda: ridge_point("ironwood", "fp8"),
    ),
)
