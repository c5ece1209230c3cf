"""Chapter 10 (speculative decoding, mixture of experts, quantization): exercises. Every value, right or slipped, is a
scaling_lib call."""

from ...dtypes import bytes_per_element
from ...moe import capacity_buffer_bytes
from ...quantization import quantization_table
from ...roofline import critical_batch_size, moe_critical_batch_size
from ...speculative import best_lookahead, expected_tokens_per_step
from .exercise import Choice, Exercise, Number, Slip


def _step(weights: str = "int4", kv: str = "fp8", math: str = "bf16") -> float:
    row, = quantization_table("llama3-70b", "ironwood", 8, 16384, 32, schemes=[(weights, kv, math)])
    return row.step_s


# Chapter 10's expert-parallel layer: E = 8 experts over n = 8 devices, k = 2 per token, T = 64 tokens (8 per
# device), D = 32, float32; the exercise lowers its capacity to 3 slots per expert (a capacity factor of 1.5).
_E, _N, _K, _T_DEVICE, _D, _CAPACITY = 8, 8, 2, 8, 32, 3


def _buffer_bytes(n_experts: int = _E, capacity: int = _CAPACITY, dtype: str = "fp32") -> float:
    return capacity_buffer_bytes(n_experts, capacity, _D, dtype)


EXERCISES = (
    Exercise(
        id="ch10.expected-tokens-k4-a08",
        question="A drafter's tokens are accepted with probability 0.8 each. With a lookahead of 4, how many tokens "
                 "does one target step produce on average (the target's own correction or bonus token included)?",
        answer=Number("tokens", lambda: expected_tokens_per_step(4, 0.8), rel_tol=0.01, slips=(
            Slip("no bonus token", lambda: expected_tokens_per_step(3, 0.8),
                 "the target always adds one token of its own: the sum runs 1 + a + ... + a^4."),
            Slip("every drafted token judged on its own", lambda: 1 + 4 * 0.8,
                 "a drafted token counts only if every token before it was accepted: a^j, not a."),
        )),
    ),
    Exercise(
        id="ch10.best-lookahead-a07-c01",
        question="Acceptance 0.7, a drafter costing 10% of a target step, verification as long as one target step "
                 "(small batch): what whole lookahead maximises the speedup?",
        answer=Number("tokens", lambda: best_lookahead(0.7, 0.1), integer=True, slips=(
            Slip("free drafts", lambda: best_lookahead(0.7, 0.0),
                 "each drafted token costs 10% of a step: the speedup divides by gamma c + 1."),
            Slip("the chapter's 4B drafter", lambda: best_lookahead(0.7, 4 / 70),
                 "this drafter costs c = 0.1 of a target step."),
        )),
    ),
    Exercise(
        id="ch10.moe-bcrit-8e-top1-v6e",
        question="An MoE with 8 experts and top-1 routing runs with bf16 weights and bf16 math on TPU v6e. How many "
                 "tokens per step does it need for its expert matmuls to be compute-bound?",
        answer=Number("tokens", lambda: moe_critical_batch_size("tpu-v6e", 8, 1), slips=(
            Slip("k / E instead of E / k", lambda: critical_batch_size("tpu-v6e") / 8,
                 "each expert sees only k / E of the tokens, so the batch must be E / k times larger."),
            Slip("the dense critical batch", lambda: critical_batch_size("tpu-v6e"),
                 "each expert's matmul sees only its share of the batch."),
        )),
    ),
    Exercise(
        id="ch10.int4-fp8-step-llama3-70b-ironwood-16k",
        question="What is the decode step-time bound of LLaMA-3-70B with int4 weights, an fp8 KV cache and bf16 math "
                 "on 8 Ironwood chips, at batch 32 and 16,384 tokens of context, in ms?",
        answer=Number("ms", _step, slips=(
            Slip("a bf16 cache", lambda: _step(kv="bf16"), "fp8 cache entries take 1 byte, half of bf16."),
            Slip("int8 weights", lambda: _step(weights="int8"), "int4 weights take half a byte."),
            Slip("keys only", lambda: _step(kv="int4"),  # half the fp8 cache's bytes, as 4 bits would be
                 "each cached token holds a key AND a value for every KV head of every layer: the step reads both."),
        )),
    ),
    Exercise(
        id="ch10.explain-greedy",
        preamble=("Why can a terrible drafter never change the output of greedy speculative decoding, only "
                  "its speed? What changes when the target samples instead of taking the argmax?"),
        question="Check your reasoning: a drafter whose every guess is wrong runs greedy speculative decoding. What "
                 "does the target return?",
        answer=Choice({"a": "different tokens from plain greedy decoding", "b": "nothing: every step is rejected",
                       "c": "the same tokens as plain greedy decoding, about one per target pass",
                       "d": "the drafter's tokens, corrected at the end"}, "c", why={
            "a": "ask whose argmax decides each token that is kept.",
            "b": "ask what the target contributes to a step even when it accepts no drafted token.",
            "d": "corrections happen at the first disagreement of every step, not at the end."}),
    ),
    Exercise(
        id="ch10.moe-capacity-all-to-all-bytes",
        question="In the cell that runs the expert-parallel layer, `CAPACITY` is $T/n$ = 8 slots per expert from "
                 "each device, enough that no token is ever dropped. Serving systems size it from the mean load "
                 "instead: each device's 8 tokens send $k = 2$ pairs each to $E = 8$ experts, 2 per expert on "
                 "average, and a capacity factor of 1.5 makes `CAPACITY = 3`. Make that change. Before you run the "
                 "cell, predict how many bytes each of the layer's two all-to-alls moves per device ($D = 32$, "
                 "float32).",
        answer=Number("B", _buffer_bytes, slips=(
            Slip("the capacity unchanged", lambda: _buffer_bytes(capacity=_T_DEVICE),
                 "the buffer holds CAPACITY slots for every expert: its size follows the capacity."),
            Slip("the pairs routed, not the buffer", lambda: _T_DEVICE * _K * _D * bytes_per_element("fp32"),
                 "a fixed-shape buffer travels whole, empty slots included: E x kappa x D values."),
            Slip("this device's experts only, or bits for bytes", lambda: _buffer_bytes(n_experts=_E // _N),
                 "each device sends slots for all E experts, one block to every device, its own included; and a "
                 "byte is 8 bits."),
            Slip("both all-to-alls", lambda: 2 * _buffer_bytes(), "the question asks for one of the two."),
            Slip("2-byte activations", lambda: _buffer_bytes(dtype="bf16"), "the tiny layer runs in float32."),
        )),
    ),
)
