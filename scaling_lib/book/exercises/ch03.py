"""Chapter 3 exercises: prefill and generation are different workloads. Every value, right or slipped, is a
scaling_lib call."""

from ...dtypes import bytes_per_element
from ...inference import decode_step_time, prefill_time
from ...models import get_model
from ...roofline import attention_intensity, matmul_intensity
from .exercise import Choice, Exercise, Number, Slip


def _ttft(mfu: float = 0.4) -> float:
    """2 P T / (C x MFU), the book's prefill convention: LLaMA-3-8B, 4,096 tokens, one H100."""
    return prefill_time("llama3-8b", "h100", 1, 4096, mfu=mfu)


def _tpot(chip="h200"):
    return decode_step_time("llama3-8b", chip, 1, 32, 4096)


EXERCISES = (
    Exercise(
        id="ch3.prefill-mlp-intensity-llama3-8b-512",
        question="What is the bf16 arithmetic intensity of LLaMA-3-8B's MLP up-projection ($D = 4096 \\to F = 14336$) "
                 "during the prefill of one 512-token prompt, counting the bytes of the input, the weight and the "
                 "output, in FLOPs per byte? Is it compute-bound on a TPU v5e?",
        answer=(
            Number("FLOPs/B", lambda: matmul_intensity(512, get_model("llama3-8b").d_model,
                                                       get_model("llama3-8b").d_ff), name="intensity", slips=(
                Slip("the approximation I = T", lambda: 512 * 2 / bytes_per_element("bf16"),
                     "I = T holds only while T is much smaller than D and F; at 512 rows the activation bytes count."),
            )),
            Choice({"a": "compute-bound", "b": "memory-bound"}, "a", name="bound", why={
                "b": "compare the intensity with the v5e's ridge point C / W_hbm."}),
        ),
    ),
    Exercise(
        id="ch3.decode-attention-intensity-palm-62b",
        question="PaLM 62B uses multiquery attention with $N = 32$ query heads ($K = 1$). What is its bf16 decode "
                 "attention intensity with 2,048 cached tokens, in FLOPs per byte?",
        answer=Number("FLOPs/B", lambda: attention_intensity(1, 2048, get_model("palm-62b").group_size), slips=(
            Slip("multi-head attention (G = 1)", lambda: attention_intensity(1, 2048, 1),
                 "with K = 1 all N query heads share one KV head: G = N."),
            Slip("the prefill formula", lambda: attention_intensity(2048, 2048, 1),
                 "decode scores T = 1 query token per sequence, not T = S."),
        )),
    ),
    Exercise(
        id="ch3.ttft-llama3-8b-h100-4k",
        question="Estimate the time to first token for a 4,096-token prompt to LLaMA-3-8B on one H100 at 40% MFU, "
                 "with the book's prefill convention: $2P$ FLOPs per token, $P$ every parameter (the input "
                 "embedding included), attention's own FLOPs left out. Answer in ms.",
        answer=Number("ms", _ttft, quantity="prefill", model="llama3-8b", slips=(
            Slip("the peak rate (no MFU)", lambda: _ttft(1.0),
                 "at 40% MFU the chip achieves 0.4 C: divide by the achieved rate."),
            Slip("multiplying by the MFU", lambda: _ttft(1.0) * 0.4,
                 "a lower MFU makes the prefill slower: divide by 0.4 C."),
            Slip("6 FLOPs per parameter", lambda: 3 * _ttft(),
                 "6P per token counts the backward pass of training; inference runs the forward pass, 2 per weight."),
        )),
    ),
    Exercise(
        id="ch3.tpot-llama3-8b-h200-b32",
        question="Give the lower bound on the time per output token of LLaMA-3-8B on one H200 at batch 32 with 4,096 "
                 "tokens of context per sequence (bf16 weights and cache), in ms.",
        answer=Number("ms", lambda: _tpot().total_s, slips=(
            Slip("the weights without the KV cache", lambda: _tpot().weight_s,
                 "every sequence also reads its whole KV cache at every step."),
            Slip("all three terms added", lambda: _tpot().kv_s + _tpot().weight_s + _tpot().compute_s,
                 "the weight read and the matmul FLOPs overlap: add the KV term to the larger of the two."),
            Slip("the H100's bandwidth", lambda: _tpot("h100").total_s,
                 "the H200 has the H100's FLOP rate but more HBM bandwidth."),
            Slip("keys only", lambda: _tpot().kv_s / 2 + max(_tpot().weight_s, _tpot().compute_s),
                 "each cached token holds a key AND a value for every KV head of every layer: the step reads both."),
        )),
    ),
    Exercise(
        id="ch3.explain-speculative",
        preamble=("{term}`Speculative decoding <speculative decoding>` has a small model draft $\\gamma$ "
                  "tokens, then the large model scores them in one step, as a tiny prefill of $T = \\gamma + "
                  "1$ queries against the cache (the last accepted token and the $\\gamma$ drafts, as in "
                  "chapters 1 and 10). Use the attention intensity $GST/(GT + S)$ and the linear-layer "
                  "intensity to explain why scoring these $\\gamma + 1$ positions costs about as long as "
                  "generating one, as long as $\\gamma$ is small."),
        question="Check your reasoning: at batch 8, LLaMA-3-70B scores $\\gamma = 4$ drafted tokens against its "
                 "cache in one step. About how long does that step take, compared with an ordinary decode step?",
        answer=Choice({"a": "about 4 times as long", "b": "about as long", "c": "about 5 times as long",
                       "d": "about a quarter as long"}, "b", why={
            "a": "both steps read the same weights and cache once; only the FLOPs grow, and they are far from the "
                  "roof at this batch.",
            "c": "both steps read the same weights and cache once; only the FLOPs grow, and they are far from the "
                  "roof at this batch.",
            "d": "the bytes read, which set a memory-bound step's time, do not shrink."}),
    ),
)
