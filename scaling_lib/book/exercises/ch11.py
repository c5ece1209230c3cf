"""Chapter 11 (how close do real systems come?): exercises. Every value, right or slipped, is a scaling_lib call."""

from ...collectives import mesh_collective
from ...estimate import offline_throughput
from ...hardware import get_chip
from ...kernels import moe_kernel_rows, moe_layer_floor
from ...memory import moe_elementwise_elements
from ...models import get_model
from .exercise import Choice, Exercise, Number, Slip

_IN, _OUT = 500, 1500  # the bound exercise's request: tokens in, tokens out
_FP8 = dict(weight_dtype="fp8", kv_dtype="fp8", compute_dtype="fp8")
_BF16 = dict(weight_dtype="bf16", kv_dtype="bf16", compute_dtype="bf16")


def _bound_8b(dtypes=None, efficiency=None) -> float:
    return offline_throughput("llama3-8b", "h200", 1, _IN, _OUT, efficiency=efficiency, **(dtypes or _FP8))


def _typical_70b(dtypes=None, efficiency="typical") -> float:
    return offline_throughput("llama3-70b", "h200", 1, 1000, 3000, efficiency=efficiency, **(dtypes or _FP8))


def _prefill_all_reduce_s(op="all-reduce", shape=(4, 4), wraparound=False) -> float:
    """The bandwidth term of one of LLaMA-3-70B's prefill all-reduces of an 8,192-token prompt ([T, D] in bf16) on
    TPU v5e axes of `shape` (`collectives.mesh_collective`)."""
    d_model = get_model("llama3-70b").d_model
    return mesh_collective(op, 8192 * d_model * 2, "tpu-v5e", shape, wraparound=wraparound).bandwidth_s


def _qwen30_layer_h200():
    """NVIDIA's timing of TensorRT-LLM's whole MoE layer of Qwen3-30B-A3B's shape in bf16 on one H200 at 16,384
    tokens (`kernels.moe_kernel_rows`)."""
    return next(r for r in moe_kernel_rows() if r.engine.startswith("TensorRT-LLM") and (
        r.chip, r.dtype, r.d_model, r.d_expert, r.tokens) == ("h200", "bf16", 2048, 768, 16384))


def _expert_share(matrices=3, per_token=None, activations=True, flops_per_mac=2) -> float:
    """The share of the H200's bf16 dense peak the layer's expert FLOPs get: flops_per_mac x matrices x T x k x D x F
    over (latency - the chain - the activations between the matmuls at line rate) x peak
    (`kernels.expert_matmul_fraction`)."""
    r, chip = _qwen30_layer_h200(), get_chip("h200")
    flops = flops_per_mac * matrices * r.tokens * (r.k if per_token is None else per_token) * r.d_model * r.d_expert
    between = r.tokens * moe_elementwise_elements(r.d_model, r.d_expert, r.k) * 2 / chip.hbm_bandwidth
    return flops / ((r.latency_s - moe_layer_floor() - (between if activations else 0.0)) * chip.peak_flops("bf16"))


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
        id="ch11.prefill-all-reduce-v5e-4x4",
        question="On the 16-chip TPU v5e slice of this chapter's prefill example (4 x 4, no wraparound), "
                 "LLaMA-3-70B's 8,192-token prompt all-reduces its $[T, D]$ activations, 8,192 x 8,192 bf16 values, "
                 "twice per layer. With the chapter's torus model (each axis a line, the axes' rates adding), how "
                 "many ms does the bandwidth term of one such all-reduce take?",
        answer=Number("ms", lambda: _prefill_all_reduce_s(), slips=(
            Slip("rings instead of lines", lambda: _prefill_all_reduce_s(wraparound=True),
                 "a v5e axis closes into a ring only when it spans 16 chips; these axes of 4 are lines, whose end "
                 "chips take their shards through one link."),
            Slip("one axis's links", lambda: _prefill_all_reduce_s(shape=(4,)),
                 "the collective runs over both axes at once, so the links of both carry it: their rates add."),
            Slip("one pass", lambda: _prefill_all_reduce_s(op="all-gather"),
                 "an all-reduce is a reduce-scatter and then an all-gather: two passes over the links."),
            Slip("the 16 chips as one ring", lambda: _prefill_all_reduce_s(shape=(16,), wraparound=True),
                 "the slice is 4 x 4: two axes of links share the bytes, where a ring of 16 has only its own."),
        )),
    ),
    Exercise(
        id="ch11.expert-share-qwen3-30b-h200",
        question=(f"NVIDIA timed TensorRT-LLM's whole MoE layer of Qwen3-30B-A3B's shape (D = 2,048; 128 experts "
                  f"768 wide, 8 per token, each a gate, an up and a down matrix) in bf16 on one H200 at 16,384 "
                  f"tokens: {_qwen30_layer_h200().latency_s * 1e6:,.0f} µs. Take off the layer's chain of small "
                  f"kernels ({moe_layer_floor() * 1e6:.0f} µs) and its tokens' activations between the matmuls, "
                  f"3 k F + 2 (k + 1) D bf16 values a token, at the H200's "
                  f"{get_chip('h200').hbm_bandwidth / 1e12:.1f} TB/s; give the share of the H200's bf16 dense peak "
                  f"that its expert FLOPs get, as a fraction."),
        answer=Number("", _expert_share, slips=(
            Slip("the activations left in", lambda: _expert_share(activations=False),
                 "take the activations' traffic off too: the estimate prices it apart, at the weight-streaming rate."),
            Slip("two matrices", lambda: _expert_share(matrices=2),
                 "each expert has three matrices here: gate, up and down."),
            Slip("each token once", lambda: _expert_share(per_token=1),
                 "each token goes through k = 8 experts, so the FLOPs are 8 times one expert's."),
            Slip("one FLOP per multiply-add", lambda: _expert_share(flops_per_mac=1),
                 "a multiply-add is two FLOPs: 2 x 3 D F per token and expert."),
        )),
    ),
    Exercise(
        id="ch11.explain-short",
        preamble=("LLaMA-3.1-8B at 128 input and 128 output tokens runs at about the same throughput on an "
                  "H100 and an H200, though the H200 reads memory faster. Which resource sets these runs' "
                  "pace, and what would you change in the benchmark to see the H200's advantage?"),
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
