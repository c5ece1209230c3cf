"""Chapter 5 (a model of the decode step): exercises. Every value, right or slipped, is a scaling_lib call."""

from ...hardware import get_chip
from ...inference import decode_throughput, kv_compute_crossover_context, step_time_bound
from ...memory import param_bytes
from ...models import get_model
from ..claims.step_time import T2_INPUTS
from .exercise import Choice, Exercise, Number, Slip


def _quiz(weight_bytes_per_param: float = 1.0, n_chips: int = 16, kv: bool = True):
    """Claim T2's pop-quiz model at batch 64 (30B dense, int8 weights, bf16 math, 16 v5e, 8,192 tokens x 100 kB),
    with one input changed for a slip: bytes per parameter, chips, or no KV cache."""
    inputs = dict(T2_INPUTS)
    inputs.update(param_bytes=inputs["param_count"] * weight_bytes_per_param, n_chips=n_chips,
                  kv_bytes_per_sequence=inputs["kv_bytes_per_sequence"] if kv else 0.0)
    return step_time_bound(batch=64, **inputs, check_capacity=False)  # a slip (one chip) need not fit


def _weight_floor(dtype: str = "int4", n_chips: int = 16) -> float:
    return param_bytes("llama3-70b", dtype) / (n_chips * get_chip("tpu-v5e").hbm_bandwidth)


def _throughput(kv_dtype: str = "int8") -> float:
    return decode_throughput("llama3-70b", "tpu-v5e", 16, 32, 8192, "int8", kv_dtype, "bf16")


EXERCISES = (
    Exercise(
        id="ch5.pop-quiz-30b-batch64",
        question="Take the pop-quiz model (30B dense, int8 weights, bf16 math, 16 TPU v5e, 8,192 tokens of context, "
                 "100 kB of cache per token) at batch 64. What is the step-time lower bound, in ms? Which side of "
                 "the max wins?",
        answer=(
            Number("ms", lambda: _quiz().total_s, name="step", slips=(
                Slip("bf16 weights", lambda: _quiz(weight_bytes_per_param=2.0).total_s,
                     "the weights are int8: one byte per parameter."),
                Slip("no KV term", lambda: _quiz(kv=False).total_s,
                     "each of the 64 sequences reads its 8,192 tokens of cache at every step."),
                Slip("the FLOP side of the max", lambda: _quiz().kv_s + _quiz().compute_s,
                     "below B_crit the weight load is longer than the matmul FLOPs: the max picks the weights."),
                Slip("all three terms added", lambda: _quiz().kv_s + _quiz().weight_s + _quiz().compute_s,
                     "the weight read and the FLOPs overlap: add the KV term to the larger of the two only."),
                Slip("one chip's bandwidth", lambda: _quiz(n_chips=1).total_s,
                     "the 16 chips read their shares of the weights and caches in parallel."),
            )),
            Choice({"a": "the weight load", "b": "the matmul FLOPs"}, "a", name="side", why={
                "b": "compare the batch with B_crit for int8 weights and bf16 math."}),
        ),
    ),
    Exercise(
        id="ch5.kv-crossover-llama3-70b-b200",
        question="Above what context length does reading LLaMA-3-70B's bf16 KV cache take longer than its bf16 "
                 "matmul FLOPs on a B200, whatever the batch? Answer in tokens.",
        answer=Number("tokens", lambda: kv_compute_crossover_context("llama3-70b", "b200", "bf16", "bf16"), slips=(
            Slip("1 byte per cache element", lambda: kv_compute_crossover_context("llama3-70b", "b200", "int8"),
                 "a bf16 cache takes 2 bytes per element."),
            Slip("P FLOPs per token", lambda: kv_compute_crossover_context("llama3-70b", "b200") / 2,
                 "each parameter costs 2 FLOPs per token (a multiply and an add)."),
            Slip("one KV head per query head",
                 lambda: kv_compute_crossover_context("llama3-70b", "b200") / get_model("llama3-70b").group_size,
                 "LLaMA-3-70B caches K = 8 KV heads, not its 64 query heads."),
        )),
    ),
    Exercise(
        id="ch5.weight-floor-llama3-70b-v5e16-int4",
        question="What is the fastest a decode step of LLaMA-3-70B with int4 weights (half a byte each) could ever be "
                 "on 16 TPU v5e chips, in ms?",
        answer=Number("ms", _weight_floor, slips=(
            Slip("bf16 weights", lambda: _weight_floor("bf16"), "int4 weights take half a byte, not 2 bytes."),
            Slip("one byte per weight", lambda: _weight_floor("int8"), "int4 packs two weights into one byte."),
            Slip("one chip's bandwidth", lambda: _weight_floor(n_chips=1),
                 "each of the 16 chips reads only its own share of the weights, all at once."),
        )),
    ),
    Exercise(
        id="ch5.throughput-llama3-70b-v5e16-int8",
        question="LLaMA-3-70B runs on 16 TPU v5e with int8 weights, an int8 KV cache and bf16 math, at batch 32 and "
                 "8,192 tokens of context. What is the server's decode throughput bound, in tokens per second? Does "
                 "the batch fit in HBM?",
        answer=(
            Number("tok/s", _throughput, name="throughput", slips=(
                Slip("a bf16 cache", lambda: _throughput("bf16"), "the KV cache is int8 too: 1 byte per element."),
                Slip("tokens per second per sequence", lambda: _throughput() / 32,
                     "the server produces one token per sequence per step: B / T_step."),
                Slip("per chip", lambda: _throughput() / 16, "the question asks for the whole server."),
                Slip("keys only", lambda: _throughput("int4"),  # half the int8 cache's bytes, as 4 bits would be
                     "each cached token holds a key AND a value for every KV head of every layer: the step reads "
                     "both."),
            )),
            Choice({"a": "yes", "b": "no"}, "a", name="fits", why={
                "b": "add the int8 weights and 32 int8 caches and compare with 16 x 16 GB."}),
        ),
    ),
    Exercise(
        id="ch5.explain-flat",
        preamble=("On the latency-throughput figure ({numref}`fig-05-pareto`) every curve turns flat after "
                  "its star: more batch gives no more throughput, only longer steps. Why exactly flat, and "
                  "why is the star at the same batch for every context length? Would a server ever run past "
                  "the star?"),
        question="Check your reasoning: where does the star, the end of the rising part of each latency-throughput "
                 "curve, sit?",
        answer=Choice({"a": "at B_crit, for every context length",
                       "b": "at the batch where the KV reads equal the weight read",
                       "c": "at the largest batch that fits in HBM",
                       "d": "at a batch that grows with the number of chips"}, "a", why={
            "b": "that batch moves with the context; the star does not.",
            "c": "memory can end a curve early, but the flattening comes from the max in the step time.",
            "d": "2 B P / (n C) = P_bytes / (n W_hbm) does not depend on n."}),
    ),
)
