"""Chapter 11 (how close do real systems come?): exercises. Every value, right or slipped, is a scaling_lib call."""

import math

from ...estimate import offline_throughput
from ...hardware import get_chip
from ...models import get_model
from ...sharding import beta, max_decode_model_parallelism
from .exercise import Choice, Exercise, Number, Slip

_IN, _OUT = 500, 1500  # the bound exercise's request: tokens in, tokens out
_FP8 = dict(weight_dtype="fp8", kv_dtype="fp8", compute_dtype="fp8")
_BF16 = dict(weight_dtype="bf16", kv_dtype="bf16", compute_dtype="bf16")


def _bound_8b(dtypes=None, efficiency=None) -> float:
    return offline_throughput("llama3-8b", "h200", 1, _IN, _OUT, efficiency=efficiency, **(dtypes or _FP8))


def _typical_70b(dtypes=None, efficiency="typical") -> float:
    return offline_throughput("llama3-70b", "h200", 1, 1000, 3000, efficiency=efficiency, **(dtypes or _FP8))


def _one_link_beta() -> float:
    """W_hbm over one NVLink link (one direction) of a B200: the slip of taking a link for the injection bandwidth."""
    chip = get_chip("b200")
    return chip.hbm_bandwidth / chip.topology.link_bandwidth


def _ways(beta_value: float) -> int:
    return math.floor(max_decode_model_parallelism(get_model("llama3-70b").d_ff, 48, beta_value))


EXERCISES = (
    Exercise(
        id="ch11.offline-bound-llama3-8b-h200-500-1500",
        question="What is the offline-throughput bound of LLaMA-3-8B on one H200 with fp8 weights, KV cache and math, "
                 "for requests of 500 input and 1,500 output tokens, in output tokens/s?",
        answer=Number("tokens/s", _bound_8b, slips=(
            Slip("bf16 instead of fp8", lambda: _bound_8b(_BF16),
                 "weights, cache and math are all fp8: 1 byte per element and the fp8 rate."),
            Slip("the calibrated estimate", lambda: _bound_8b(efficiency="typical"),
                 "the question asks for the bound (efficiency=None), not the typical estimate."),
            Slip("input and output tokens counted", lambda: _bound_8b() * (_IN + _OUT) / _OUT,
                 "offline throughput counts generated (output) tokens per second."),
        )),
    ),
    Exercise(
        id="ch11.typical-llama3-70b-h200-1000-3000",
        question="With the calibrated `\"typical\"` efficiency, what output throughput do you expect from LLaMA-3-70B "
                 "(fp8 weights, cache and math) on one H200 for 1,000-token prompts and 3,000-token answers, in "
                 "tokens/s?",
        answer=Number("tokens/s", _typical_70b, slips=(
            Slip("the bound", lambda: _typical_70b(efficiency=None),
                 "that is the bound; the question asks for the calibrated typical estimate."),
            Slip("a bf16 KV cache", lambda: _typical_70b(dict(_FP8, kv_dtype="bf16")),
                 "the cache is fp8 too: 1 byte per element, half the bytes every step reads."),
        )),
    ),
    Exercise(
        id="ch11.max-mp-llama3-70b-b48-b200",
        question="What is $\\beta = W_\\text{hbm}/W$ of a B200 in an NVLink switch domain? Up to how many ways can a "
                 "decode step of LLaMA-3-70B at batch 48 be tensor-parallel before its collectives outlast its weight "
                 "read: the largest whole number $n \\le F/(B\\beta)$?",
        answer=(
            Number("x", lambda: beta("b200"), name="beta", slips=(
                Slip("one NVLink link", _one_link_beta,
                     "W is the injection bandwidth, all of a GPU's NVLink links together, not one link."),
                Slip("the ratio upside down", lambda: 1 / beta("b200"),
                     "beta is the HBM bandwidth over the collective bandwidth: W_hbm / W."),
            )),
            Number("ways", lambda: _ways(beta("b200")), integer=True, name="ways", slips=(
                Slip("one NVLink link", lambda: _ways(_one_link_beta()),
                     "W is the injection bandwidth, all of a GPU's NVLink links together, not one link."),
                Slip("the node size", lambda: get_chip("b200").topology.domain_size,
                     "the bandwidth limit F / (B beta) is the question; the node size is a separate limit."),
                Slip("rounding up", lambda: math.ceil(max_decode_model_parallelism(get_model("llama3-70b").d_ff, 48,
                                                                                  beta("b200"))),
                     "past F / (B beta) the collectives outlast the weight read: take the largest whole n below it."),
            )),
        ),
    ),
    Exercise(
        id="ch11.explain-short",
        question="Check your reasoning: what sets the pace of these 128/128 runs on both GPUs?",
        answer=Choice({"a": "HBM bandwidth",
                       "b": "scheduling: admitting, prefilling and retiring requests every step",
                       "c": "the KV-cache capacity", "d": "the matmul FLOPs"}, "d", why={
            "a": "a faster-memory GPU would then be faster, and the H200 is not.",
            "b": "both GPUs pay it, but it cannot by itself explain why faster memory buys nothing: compare the "
                 "two GPUs' data sheets.",
            "c": "capacity limits the batch; here thousands of sequences fit on both GPUs."}),
    ),
)
