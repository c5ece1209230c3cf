"""The appendix *Worked problems*: the Scaling Book's inference worked problems 1-4 and 6, posed in our words and
answered with scaling_lib. Every value, right or slipped, is a library call on the book's "sb7-worked" model (L = 64,
D = 4,096, F = 16,384, N = 32, K = 8, H = 256, V = 32,128, shared embeddings). Assumptions the problems leave open are
stated in each question: an 8,192-token context, int8 weights, KV cache and math in problems 2-4, bf16 in problem 6.
"""

import math

from ...hardware import get_chip
from ...memory import kv_bytes_per_token, kv_cache_bytes, max_batch_size, param_bytes
from ...models import get_model, param_count
from ...moe import as_moe, expert_sharded_memory, smallest_expert_sharded_slice
from ...sharding import beta, decode_step_components, kv_cache_sharding, max_decode_model_parallelism
from ..claims import published
from .exercise import Choice, Convention, Exercise, Number, Slip

MODEL = "sb7-worked"
CHIP, CHIPS, CONTEXT = "tpu-v5e", 16, 8192
INT8 = ("int8", "int8")


def q2_batch(n_kv_heads: int = 8, kv_dtype: str = "int8") -> int:
    """Problem 2: the largest batch whose caches of 8,192 tokens fit next to the int8 weights on 16 v5e."""
    return max_batch_size(get_model(MODEL).with_(n_kv_heads=n_kv_heads), CHIP, CHIPS, CONTEXT, "int8", kv_dtype)


def _q2_unrounded(n_kv_heads: int = 8, hbm_per_chip: float | None = None) -> float:
    """Problem 2's batch before rounding down: (16 x HBM - int8 weights) / one int8 cache of 8,192 tokens."""
    model = get_model(MODEL).with_(n_kv_heads=n_kv_heads)
    hbm = get_chip(CHIP).hbm_capacity if hbm_per_chip is None else hbm_per_chip
    return (CHIPS * hbm - param_bytes(model, "int8")) / kv_cache_bytes(model, CONTEXT, dtype="int8")


def q4_step(batch: int):
    """Problem 4: the step of 16-way model-parallel decode on a 4 x 4 v5e slice, with the KV cache split over the
    8 KV heads and then 2 ways over the batch (two all-to-alls per layer), int8 throughout."""
    return decode_step_components(MODEL, CHIP, CHIPS, batch, CONTEXT, *INT8, "int8", "int8", mesh_shape=(4, 4))


def q6_memory(dtype: str = "bf16", expert_shards: int = 16, model_shards: int = 8):
    """Problem 6: the model as a 16-expert top-2 MoE, experts over Z = 16 chips, each expert over Y = 8 (8 x 16)."""
    return expert_sharded_memory(as_moe(get_model(MODEL), 16, 2), CHIP, expert_shards, model_shards, dtype)


def _embedding_params() -> int:
    """V x D: the one embedding table the worked-problem model shares with its output projection."""
    return get_model(MODEL).vocab_size * get_model(MODEL).d_model


def _weight_read_s(dtype: str = "int8", chips: int = CHIPS) -> float:
    return param_bytes(MODEL, dtype) / (chips * get_chip(CHIP).hbm_bandwidth)


EXERCISES = (
    Exercise("wp.q1-params", "How many parameters does the model have (the embedding shared with the output)? Within "
                             "±0.2%.",
             Number("", lambda: param_count(get_model(MODEL)), rel_tol=0.002, slips=(
                 Slip("two feed-forward matrices", lambda: param_count(get_model(MODEL))
                      - get_model(MODEL).n_layers * get_model(MODEL).d_model * get_model(MODEL).d_ff,
                      "the gated feed-forward block has three D x F matrices."),
                 Slip("the embedding left out", lambda: param_count(get_model(MODEL)) - _embedding_params(),
                      "the V x D embedding table is a parameter too, counted once since the output shares it."),
                 Slip("the embedding counted twice", lambda: param_count(get_model(MODEL)) + _embedding_params(),
                      "the output projection shares the embedding table: count its V x D parameters once."),
             ))),
    Exercise("wp.q1-kv-per-token", "How many bytes of KV cache does one token take in bf16? Answer in kB.",
             Number("kB", lambda: kv_bytes_per_token(MODEL, "bf16"), quantity="kv", slips=(
                 Slip("keys only", lambda: kv_bytes_per_token(MODEL, "bf16") / 2,
                      "the cache stores a key and a value per KV head and layer."),
                 Slip("every query head", lambda: kv_bytes_per_token(get_model(MODEL).with_(n_kv_heads=32), "bf16"),
                      "only the K = 8 key/value heads are cached; the 32 query heads share them."),
             ))),
    Exercise("wp.q2-max-batch", "What is the largest batch of 8,192-token sequences that fits in the HBM of "
                                "the 16 v5e, everything in int8? Round down.",
             Number("", q2_batch, integer=True, rounding="down", slips=(
                 Slip("keys only", lambda: q2_batch(kv_dtype="int4"),  # half the cache bytes, as 4 bits would be
                      "each cached token holds a key AND a value for every KV head of every layer."),
                 Slip("a bf16 cache", lambda: q2_batch(kv_dtype="bf16"),
                      "everything is int8: one byte per cached key or value."),
                 Slip("rounding up", lambda: math.ceil(_q2_unrounded()),
                      "the last, partial sequence does not fit: round down."),
                 Slip("16 GiB per chip", lambda: math.floor(_q2_unrounded(hbm_per_chip=16 * 2**30)),
                      "a v5e has 16 GB of HBM, 16 x 10^9 bytes, not 16 GiB."),
                 Slip("every query head", lambda: q2_batch(32),
                      "only the K = 8 KV heads are cached; the 32 query heads share them."),
             ))),
    Exercise("wp.q2-max-batch-mqa", "And with a single KV head (multiquery attention; $W_K$ and $W_V$ shrink with it)? Round "
                                    "down.",
             Number("", lambda: q2_batch(1), integer=True, rounding="down", slips=(
                 Slip("the 8-head model", q2_batch, "with one KV head each token's cache is 8 times smaller."),
                 Slip("rounding up", lambda: math.ceil(_q2_unrounded(1)),
                      "the last, partial sequence does not fit: round down."),
             ))),
    Exercise("wp.q3-weight-load", "If the step were limited only by HBM bandwidth, how long would reading the int8 weights "
                                  "once take on the 16 chips? Answer in ms, within ±0.2%.",
             Number("ms", _weight_read_s, rel_tol=0.002, also=(
                 Convention("the source's weights rounded to 18e9 bytes", lambda: published("T5")),
             ), slips=(
                 Slip("bf16 weights", lambda: _weight_read_s("bf16"), "int8 weights take one byte each."),
                 Slip("one chip", lambda: _weight_read_s(chips=1), "16 chips read their shares in parallel."),
                 Slip("the embedding left out", lambda: _weight_read_s() * (1 - _embedding_params()
                                                                             / param_count(get_model(MODEL))),
                      "the shared V x D table is read too: it is the output projection of every step."),
             ))),
    Exercise("wp.q4-model-parallel-bound", "At problem 2's batch, how many ways can the model be split before a decode step's "
                                           "collectives outlast its weight read ($F / (B \\beta)$ on v5e, $\\beta$ the HBM bandwidth "
                                           "over one link's bidirectional ICI bandwidth)?",
             Number("", lambda: max_decode_model_parallelism(get_model(MODEL).d_ff, q2_batch(), beta(CHIP)), slips=(
                 Slip("one-way ICI", lambda: max_decode_model_parallelism(get_model(MODEL).d_ff, q2_batch(),
                                                                          2 * beta(CHIP)),
                      "beta divides by the bidirectional bandwidth of one link, twice the one-way figure."),
             ))),
    Exercise("wp.q4-batch-shards", "Split 16 ways, the cache first goes over the 8 KV heads. Over how many shards must the "
                                   "batch be split for the rest?",
             Number("", lambda: kv_cache_sharding(8, q2_batch(), CHIPS).batch_shards, integer=True, slips=(
                 Slip("all 16 ways", lambda: CHIPS, "the 8 KV heads take 8 of the 16 ways for free."),
             ))),
    Exercise("wp.q4-step", "What is the step time at problem 2's batch on the 4 x 4 slice with this sharding, "
                           "counting the all-reduces and all-to-alls of every layer? Answer in ms.",
             Number("ms", lambda: q4_step(q2_batch()).total_s, slips=(
                 Slip("no collectives", lambda: q4_step(q2_batch()).total_s - q4_step(q2_batch()).ici_s,
                      "every layer adds its all-reduces and all-to-alls, latency-bound at this size."),
                 Slip("weights only", lambda: q4_step(q2_batch()).weights_s,
                      "at this batch the step also reads every sequence's KV cache."),
             ))),
    Exercise("wp.q6-weight-load", "How long does each chip of the 8 x 16 slice take to read its share of the expert-sharded "
                                  "MoE's bf16 weights once? Answer in ms.",
             Number("ms", lambda: q6_memory().total_bytes_per_chip / get_chip(CHIP).hbm_bandwidth, slips=(
                 Slip("int8 weights", lambda: q6_memory("int8").total_bytes_per_chip / get_chip(CHIP).hbm_bandwidth,
                      "problem 6 keeps the weights in bf16, two bytes each."),
                 Slip("attention split over all chips", lambda: (q6_memory().expert_bytes_per_chip
                                                                 + q6_memory().other_bytes_per_chip / 16)
                      / get_chip(CHIP).hbm_bandwidth,
                      "attention and the embedding are split over Y = 8 only, and copied over the 16 expert shards."),
             ))),
    Exercise("wp.q6-free-hbm", "How much HBM does each chip have left for KV caches? Answer in GB.",
             Number("GB", lambda: q6_memory().free_bytes_per_chip, slips=(
                 Slip("int8 weights", lambda: q6_memory("int8").free_bytes_per_chip,
                      "problem 6 keeps the weights in bf16, two bytes each."),
             ))),
    Exercise("wp.q6-smallest-slice", "What is the smallest v5e slice whose HBM holds the MoE's bf16 weights with some expert "
                                     "sharding? Answer in chips.",
             Number("", lambda: smallest_expert_sharded_slice(as_moe(get_model(MODEL), 16, 2), CHIP), integer=True,
                    slips=(
                 Slip("int8 weights, or one expert per chip", lambda: smallest_expert_sharded_slice(
                     as_moe(get_model(MODEL), 16, 2), CHIP, dtype="int8"),
                      "both land on 16 chips: bf16 weights take twice the bytes of int8 ones; and one expert per chip "
                      "(Z = 16, Y = 1) does not fit its bf16 weights in one chip's HBM: check that the slice holds "
                      "them."),
             ))),
    Exercise(
        id="wp.explain-knee",
        preamble=("Why is a CPU's critical batch so much smaller than a TPU's, and what would move it up on "
                  "the same CPU?"),
        question="Check your reasoning: why does a CPU's measured knee sit far below a TPU v5e's, which is near 240 "
                 "tokens?",
        answer=Choice({"a": "the CPU does far fewer FLOPs per byte of memory bandwidth, so fewer tokens of arithmetic "
                            "cover each weight read",
                       "b": "float32 weights take 4 bytes, and more bytes per weight lower the critical batch",
                       "c": "the CPU reads its memory faster than a TPU reads its HBM",
                       "d": "the CPU's caches hold the weights, so there is no weight read to hide"}, "a", why={
            "c": "the TPU's HBM is many times faster than a CPU's memory; the knee is a ratio of two rates.",
            "b": "more bytes per weight make each weight read longer, which takes more tokens to cover: b_w / 2 "
                 "raises the knee.",
            "d": "the experiment's weights are larger than the caches, so every step reads them from memory."}),
    ),
)
