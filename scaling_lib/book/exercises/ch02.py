"""Chapter 2 exercises: sampling and the KV cache. Every value, right or slipped, is a scaling_lib call."""

from functools import cache

from ...flops import (cached_generation_flops, decode_step_flops, forward_flops, matmul_params,
                      naive_generation_flops)
from ...memory import kv_bytes_per_token
from ...models import active_param_count, get_model
from .exercise import Choice, Exercise, Number, Slip


@cache  # a constant of the book, asked for by the answer and each slip
def _naive_over_cached(skip_masked: bool = True, part: str = "total") -> float:
    naive = naive_generation_flops("llama3-8b", 512, 2048, skip_masked=skip_masked)
    cached = cached_generation_flops("llama3-8b", 512, 2048, skip_masked=skip_masked)
    return getattr(naive, part) / getattr(cached, part)


def _attention_share(skip_masked: bool = True) -> float:
    prefill = forward_flops("llama3-70b", 32768, skip_masked=skip_masked)
    return prefill.attention / prefill.total


EXERCISES = (
    Exercise(
        id="ch2.decode-step-flops-llama3-70b",
        question="How many FLOPs does one decode step of LLaMA-3-70B take at batch 32, with 8,192 keys in every "
                 "sequence's cache? Count the weight matmuls ($2P_\\text{mm}$ per token) and attention (every cached "
                 "key is visible to the new token). Answer in TFLOP, within ±0.5%: $2P$ instead of $2P_\\text{mm}$ "
                 "is 1.3% off.",
        answer=Number("TFLOP", lambda: decode_step_flops("llama3-70b", 8192, batch=32).total, rel_tol=0.005,
                      quantity="flops", slips=(
            Slip("the matmuls without attention", lambda: decode_step_flops("llama3-70b", 8192, batch=32).matmul,
                 "attention adds 4 B L N H S FLOPs: Q K^T and P V over every cached key."),
            Slip("2P instead of 2P_mm", lambda: decode_step_flops("llama3-70b", 8192, batch=32).total
                 + 2 * 32 * (active_param_count("llama3-70b") - matmul_params("llama3-70b")),
                 "the input embedding is a lookup, not a matmul: a token is multiplied by P_mm weights, 2 P_mm FLOPs."),
            Slip("attention over the K KV heads", lambda: decode_step_flops("llama3-70b", 8192, batch=32).matmul
                 + decode_step_flops("llama3-70b", 8192, batch=32).attention * 8 / 64,
                 "every one of the N = 64 query heads scores the cached keys; the K = 8 KV heads only say how many "
                 "distinct keys there are."),
            Slip("2 FLOPs per (query, key) pair and head dimension",
                 lambda: (decode_step_flops("llama3-70b", 8192, batch=32).matmul
                          + decode_step_flops("llama3-70b", 8192, batch=32).attention / 2),
                 "Q K^T and P V are two matmuls, each 2 FLOPs per multiply-add: 4 N H per pair and layer."),
            Slip("one sequence", lambda: decode_step_flops("llama3-70b", 8192, batch=1).total,
                 "the step serves 32 sequences: every term scales with the batch."),
        )),
    ),
    Exercise(
        id="ch2.naive-over-cached-llama3-8b",
        question="LLaMA-3-8B generates 2,048 tokens after a 512-token prompt. How many times more FLOPs does naive "
                 "sampling spend than the KV cache (weight matmuls and attention, causal pairs only, batch 1)? "
                 "Answer as a plain ratio, within ±0.5%: attention moves it by about a percent.",
        answer=Number("x", _naive_over_cached, rel_tol=0.005, slips=(
            Slip("the ratio upside down", lambda: 1.0 / _naive_over_cached(),
                 "naive over cached: naive sampling is the expensive one."),
            Slip("the matmuls only", lambda: _naive_over_cached(part="matmul"),
                 "attention's FLOPs count too; they grow with the keys each query sees, in both loops."),
            Slip("every pair scored", lambda: _naive_over_cached(skip_masked=False),
                 "count causal pairs only: a query sees the keys up to its own position."),
        )),
    ),
    Exercise(
        id="ch2.kv-bytes-per-token-palm-62b",
        question="PaLM 62B uses multiquery attention: $L = 64$ layers share a single key/value head ($K = 1$) of "
                 "dimension $H = 256$. How many bytes of bf16 KV cache does one token occupy? Answer in kB "
                 "($10^3$ bytes).",
        answer=Number("kB", lambda: kv_bytes_per_token("palm-62b", "bf16"), rel_tol=0.01, quantity="kv", slips=(
            Slip("one KV head per query head", lambda: kv_bytes_per_token(get_model("palm-62b").with_(n_kv_heads=32),
                                                                          "bf16"),
                 "multiquery attention keeps K = 1 KV head, whatever the number of query heads."),
        )),
    ),
    Exercise(
        id="ch2.prefill-attention-share-llama3-70b-32k",
        question="What percentage of the FLOPs of a 32,768-token LLaMA-3-70B prefill is attention, counting causal "
                 "pairs only?",
        answer=Number("%", _attention_share, slips=(
            Slip("every pair scored", lambda: _attention_share(skip_masked=False),
                 "count causal pairs only, T(T+1)/2 of them."),
            Slip("attention over the matmuls",
                 lambda: (forward_flops("llama3-70b", 32768, skip_masked=True).attention
                          / forward_flops("llama3-70b", 32768, skip_masked=True).matmul),
                 "a share divides by the total, attention plus matmuls."),
        )),
    ),
    Exercise(
        id="ch2.explain-equal",
        preamble=("The cell above asserts that cached and naive greedy generation produce identical tokens. "
                  "Why must they, in exact arithmetic? In floating point the two compute the same numbers in "
                  "a different order; under what circumstances could they still pick a different token, and "
                  "why does that not contradict the first answer?"),
        question="Check your reasoning: why are the cached and naive loops guaranteed the same tokens in exact "
                 "arithmetic?",
        answer=Choice({"a": "the cache stores each step's logits",
                       "b": "greedy decoding gives the same tokens whatever the model computes",
                       "c": "a token's keys and values depend only on the tokens up to it",
                       "d": "both loops do the same FLOPs in the same order, so they round identically"}, "c", why={
            "a": "the cache stores keys and values, not logits.",
            "b": "greedy decoding is deterministic, but only for the same logits.",
            "d": "the naive loop does far more FLOPs, in [T, D] blocks where the cached one has [1, D] rows: look "
                 "for what makes a cached entry the one the naive loop would recompute."}),
    ),
)
