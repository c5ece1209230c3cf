"""Chapter 13 (quantizing with Qwix): exercises. Every value, right or slipped, is a scaling_lib call."""

from ...quantization import absmax_scale, dot_error_bound
from .exercise import Choice, Exercise, Number, Slip

EXERCISES = (
    Exercise(
        id="ch13.int8-step-qwix",
        question="Qwix quantizes a weight column whose largest magnitude is 2.54 to int8 (symmetric absmax, the top "
                 "bucket a whole step wide). What is the step (the scale) it stores for that column? Give three "
                 "significant figures or more: answers within ±0.15% are accepted, because chapter 10's plain-JAX "
                 "step differs from Qwix's by 0.4%.",
        answer=Number("", lambda: absmax_scale(2.54, "int8"), rel_tol=0.0015, slips=(
            Slip("chapter 10's step, amax / 127", lambda: 2.54 / 127,
                 "the hand-written int8 path of chapter 10 divides by 127; Qwix maps [-a, a] onto [-127.5, 127.5], "
                 "so its top bucket is as wide as the others."),
            Slip("the whole int8 range", lambda: 2.54 / 255.5,
                 "symmetric quantization uses half the int8 range on each side of zero."),
            Slip("int4", lambda: absmax_scale(2.54, "int4"), "int8 has 8 bits: 127 + 1/2 levels on each side."),
        )),
    ),
    Exercise(
        id="ch13.weight-only-dot-bound",
        question="A dot product of 8,192 terms, activations |x| <= 1, weights |w| <= 0.05 quantized to int8 "
                 "(weight-only, absmax 0.05, step 0.05 / 127.5): the largest possible error of the output?",
        answer=Number("", lambda: dot_error_bound(8192, 1.0, 0.05, "int8"), slips=(
            Slip("a whole step per term", lambda: 2 * dot_error_bound(8192, 1.0, 0.05, "int8"),
                 "rounding to the nearest level moves a value by at most half a step."),
            Slip("one term", lambda: dot_error_bound(1, 1.0, 0.05, "int8"),
                 "each of the 8,192 products can err, and the worst case adds them all up."),
        )),
    ),
    Exercise(
        id="ch13.fp8-dot-bound",
        question="The same dot product with weights and activations both in fp8 e4m3 (3 mantissa bits), each with "
                 "its own absmax scale: the largest possible error of the output?",
        answer=Number("", lambda: dot_error_bound(8192, 1.0, 0.05, "fp8", "fp8"), slips=(
            Slip("weights only", lambda: dot_error_bound(8192, 1.0, 0.05, "fp8"),
                 "the activations are rounded too: add the |dx| |w| and |dx| |dw| terms."),
        )),
    ),
    Exercise(
        id="ch13.explain-intercept",
        preamble=("Why did the attention einsums of the tiny model run unquantized under the linear-layer "
                  "regex, and what would happen if the rule's regex were `.*` with `act_qtype` set?"),
        question="Check your reasoning: why did the tiny model's two attention einsums run unquantized under the "
                 "linear-layer regex?",
        answer=Choice({"a": "Qwix never intercepts einsums that have no weight",
                       "b": "no rule covered them: rules select modules by their path, and the einsums are called "
                            "from a module the linear-layer pattern leaves out",
                       "c": "Qwix skips every op inside a jitted function",
                       "d": "attention runs inside a Pallas kernel"}, "b", why={
            "a": "Qwix intercepts every einsum; a matching rule with act_qtype would quantize both activations.",
            "c": "interception works under jit: the quantized ops are traced into the program.",
            "d": "the tiny model's attention is plain JAX; only the chapter's PallasLinear uses a kernel."}),
    ),
)
