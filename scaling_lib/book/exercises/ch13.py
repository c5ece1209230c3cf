"""Chapter 13 (quantizing with Qwix): exercises. Every expected value is a scaling_lib call."""

from ...quantization import absmax_scale, dot_error_bound
from .exercise import Exercise

EXERCISES = (
    Exercise(
        id="ch13.int8-step-qwix",
        question="Qwix quantizes a weight column whose largest magnitude is 2.54 to int8 (symmetric absmax). What is "
                 "the step (the scale) it stores for that column?",
        unit="",
        expected=lambda: absmax_scale(2.54, "int8"),
    ),
    Exercise(
        id="ch13.weight-only-dot-bound",
        question="A dot product of 8,192 terms, activations |x| <= 1, weights |w| <= 0.05 quantized to int8 "
                 "(weight-only): the largest possible error of the output?",
        unit="",
        expected=lambda: dot_error_bound(8192, 1.0, 0.05, "int8"),
    ),
    Exercise(
        id="ch13.fp8-dot-bound",
        question="The same dot product with weights and activations both in fp8 (e4m3), each with its own absmax "
                 "scale: the largest possible error of the output?",
        unit="",
        expected=lambda: dot_error_bound(8192, 1.0, 0.05, "fp8", "fp8"),
    ),
)
