"""Chapter 4 (the KV cache dominates memory): exercises. Every value, right or slipped, is a scaling_lib call."""

import dataclasses
import math

from ...hardware import get_chip
from ...inference import decode_step_time_kv_heads
from ...memory import kv_bytes_per_token, kv_cache_bytes, max_batch_size, param_bytes
from ...models import get_model
from ..claims.memory import GQA_KV_HEADS
from .exercise import Choice, Exercise, Number, Slip



def _gqa_batch() -> int:
    """The largest batch of 8,192-token GQA 1:5 sequences (K = 8 cache, MHA weights) that fits on 8 v5e."""
    mha = get_model("llama2-13b")
    free = 8 * get_chip("tpu-v5e").hbm_capacity - param_bytes(mha)
    return math.floor(free / kv_cache_bytes(mha.with_(n_kv_heads=GQA_KV_HEADS), 8192))


def _free_over_sequence(hbm_per_chip=None, weights: bool = True, weight_params=None, keys_only: bool = False) -> float:
    """(16 HBM - weights) / one 8,192-token cache, LLaMA-3-70B on 16 TPU v5e, unrounded (bf16 weights of
    `weight_params` parameters, all of them by default; `keys_only` halves the cache)."""
    capacity = 16 * (get_chip("tpu-v5e").hbm_capacity if hbm_per_chip is None else hbm_per_chip)
    weight_bytes = param_bytes("llama3-70b") if weight_params is None else 2 * weight_params
    free = capacity - (weight_bytes if weights else 0.0)
    return free / (kv_cache_bytes("llama3-70b", 8192) / (2 if keys_only else 1))


def _sequences_past_weights(keys_only: bool = False, weight_bytes: int = 2) -> int:
    """The fewest 32,768-token LLaMA-3-8B caches (bf16) that weigh more than its weights (`weight_bytes` each)."""
    cache = kv_cache_bytes("llama3-8b", 32768) / (2 if keys_only else 1)
    return math.floor(param_bytes("llama3-8b") * weight_bytes / 2 / cache) + 1


def _gqa_throughput(n_kv_heads: int = GQA_KV_HEADS, n_chips_shown: int = 1) -> float:
    """Tokens/s of LLaMA-2-13B's MHA weights with a K = n_kv_heads cache, 8 v5e, 8,192 tokens, at `_gqa_batch()`."""
    # a slip (the multi-head cache) prices a batch that does not fit: as if it did, to recognise the slip's value
    step = decode_step_time_kv_heads("llama2-13b", n_kv_heads, "tpu-v5e", 8, _gqa_batch(), 8192, check_capacity=False)
    return _gqa_batch() / step.total_s / n_chips_shown


EXERCISES = (
    Exercise(
        id="ch4.kv-per-token-llama3-70b",
        question="LLaMA-3-70B has $L = 80$ layers and $K = 8$ key/value heads of dimension $H = 128$ (and $N = 64$ "
                 "query heads). How many bytes of bf16 KV cache does one token take, in kB?",
        answer=Number("kB", lambda: kv_bytes_per_token("llama3-70b", "bf16"), rel_tol=0.01, quantity="kv", slips=(
            Slip("query heads instead of KV heads, or bits for bytes",
                 lambda: kv_bytes_per_token(get_model("llama3-70b").with_(n_kv_heads=64), "bf16"),
                 "both land here, 8 times the cache: only the K = 8 KV heads are cached, not the 64 query heads; "
                 "and a cache is counted in bytes, 8 bits each."),
        )),
    ),
    Exercise(
        id="ch4.kv-32k-llama3-8b",
        question="How large is the bf16 KV cache of one 32,768-token sequence of LLaMA-3-8B ($L = 32$, $K = 8$, "
                 "$H = 128$), in GB? How many such sequences does it take before their caches together weigh more than "
                 "the model's bf16 weights (every parameter, 2 bytes each)?",
        answer=(
            Number("GB", lambda: kv_cache_bytes("llama3-8b", 32768, batch=1, dtype="bf16"), name="cache",
                   quantity="kv", slips=(
                Slip("one KV head per query head",
                     lambda: kv_cache_bytes(get_model("llama3-8b").with_(n_kv_heads=32), 32768),
                     "LLaMA-3-8B caches K = 8 KV heads, not its 32 query heads."),
                Slip("one layer", lambda: kv_cache_bytes("llama3-8b", 32768) / get_model("llama3-8b").n_layers,
                     "every one of the L layers keeps its own keys and values."),
            )),
            Number("sequences", _sequences_past_weights, integer=True, rounding="up", name="outweigh",
                   label="sequences to outweigh the weights", slips=(
                Slip("rounding down", lambda: _sequences_past_weights() - 1,
                     "that many caches still weigh less than the weights: one more tips the balance."),
                Slip("keys only", lambda: _sequences_past_weights(keys_only=True),
                     "each cached token holds a key AND a value for every KV head of every layer."),
                Slip("weights of one byte each", lambda: _sequences_past_weights(weight_bytes=1),
                     "bf16 weights take 2 bytes each."),
            )),
        ),
    ),
    Exercise(
        id="ch4.max-batch-llama3-70b-v5e16",
        question="LLaMA-3-70B in bf16 (weights and cache) is served on 16 TPU v5e chips of 16 GB ($10^9$ B) each. "
                 "What is the largest batch of 8,192-token sequences that fits in HBM? Round down: a part of a "
                 "sequence does not fit.",
        answer=Number("sequences", lambda: max_batch_size("llama3-70b", "tpu-v5e", 16, 8192, "bf16", "bf16"),
                      integer=True, rounding="down", slips=(
            Slip("rounding up, or weights without the input embedding (P_mm)",
                 lambda: math.ceil(_free_over_sequence()),
                 "the last, partial sequence does not fit: round down. And HBM holds every parameter, the input "
                 "embedding table included (P, not P_mm): both slips land on this count here."),
            Slip("keys only", lambda: math.floor(_free_over_sequence(keys_only=True)),
                 "each cached token holds a key AND a value for every KV head of every layer."),
            Slip("16 GiB per chip", lambda: max_batch_size("llama3-70b", dataclasses.replace(
                get_chip("tpu-v5e"), hbm_capacity=16 * 2**30), 16, 8192),
                 "a v5e has 16 GB of HBM, 16 x 10^9 bytes, not 16 GiB."),
            Slip("HBM without the weights", lambda: math.floor(_free_over_sequence(weights=False)),
                 "the weights take their share of HBM first; the caches get what is left."),
        )),
    ),
    Exercise(
        id="ch4.gqa-throughput-largest-batch",
        question="In the source's GQA 1:5 table (the cache of the $K = 8$ model, the 26 GB of multi-head weights, "
                 "8 TPU v5e, 8,192 tokens of context), what is the decode throughput bound of the whole server at "
                 "the largest batch that fits in HBM, in tokens per second?",
        answer=Number("tok/s", _gqa_throughput, slips=(
            Slip("the multi-head cache", lambda: _gqa_throughput(n_kv_heads=40),
                 "GQA 1:5 keeps K = 8 KV heads: the cache per sequence is five times smaller than with MHA."),
            Slip("per chip", lambda: _gqa_throughput(n_chips_shown=8),
                 "the question asks for the whole 8-chip server's tokens per second."),
            Slip("the KV reads without the weights",
                 lambda: _gqa_batch() / decode_step_time_kv_heads("llama2-13b", GQA_KV_HEADS, "tpu-v5e", 8,
                                                                  _gqa_batch(), 8192).kv_s,
                 "every step also reads the weights once (or does their FLOPs, whichever is longer)."),
        )),
    ),
    Exercise(
        id="ch4.explain-throughput",
        preamble=("In the multi-head throughput table, going from batch 64 to batch 240 multiplies the batch "
                  "by almost four but the throughput by only a few percent, although the matmuls are still "
                  "memory-bound. Why? What would have to change for throughput to grow in proportion to the "
                  "batch?"),
        question="Check your reasoning: as the batch of a multi-head LLaMA-2-13B server grows far beyond a few "
                 "sequences, what does its decode throughput tend to?",
        answer=Choice({"a": "it keeps growing in proportion to the batch", "b": "it falls towards zero",
                       "c": "a ceiling of about n C / (2P) tokens per second, the compute roof",
                       "d": "a ceiling of about n W_hbm / KV_seq tokens per second"}, "d", why={
            "a": "that needs a shared cost per step; each sequence brings its own cache to read.",
            "b": "the step grows in proportion to the batch, so B / T_step levels off, it does not fall.",
            "c": "the compute roof needs the matmuls past B_crit; ask what each added sequence costs long before "
                 "that."}),
    ),
)
