"""Chapter 12 (choosing a layout by the metric): exercises. Every value, right or slipped, is a scaling_lib call."""

from ...frontier import layout_cost
from ...hops import torus_diameter
from ...utilization import mfu
from ...measurements import pope_row
from ...models import get_model, param_count
from .exercise import Choice, Exercise, Number, Slip


def _decode_mfu(steps: int = 64, chips: int = 8) -> float:
    """A decode run that is not in the tables: PaLM 62B, batch 256, 64 steps in 3.0 s on 8 TPU v4."""
    return mfu(param_count(get_model("palm-62b")), 256 * steps, 3.0, "tpu-v4", chips)


def _step(**changes) -> float:
    options = dict(weight_dtype="int8") | changes
    return layout_cost("palm-540b", "tpu-v4", 64, "decode", 128, "2d-ws", "batch", **options).total_s


def _reply(*parts) -> float:
    return sum(pope_row("palm-62b", "low latency", phase).latency_s for phase in parts)


EXERCISES = (
    Exercise(
        id="ch12.mfu-palm-62b-decode-run",
        question="A decode run of PaLM 62B generates 64 tokens for each of 256 sequences in 3.0 s on 8 TPU v4 chips "
                 "(275 TFLOP/s each, $2P$ FLOPs per token). What MFU is that, in %?",
        answer=Number("%", _decode_mfu, quantity="flops", slips=(
            Slip("one step's tokens", lambda: _decode_mfu(steps=1),
                 "the 3.0 s covers all 64 steps: the tokens are batch x steps."),
            Slip("64 chips", lambda: _decode_mfu(chips=64),
                 "the run uses 8 chips; MFU divides by the peak of the chips that did the work."),
        )),
    ),
    Exercise(
        id="ch12.step-palm-540b-decode-b128",
        question="The cost model's decode step for PaLM 540B at batch 128 on 64 TPU v4 chips: int8 weights, 2D "
                 "weight-stationary, attention sharded over the batch, 2,048 tokens of context, no overlap of the "
                 "collectives with the rest, in ms.",
        answer=Number("ms", _step, slips=(
            Slip("collectives hidden", lambda: _step(overlap=True),
                 "no overlap: the network time adds to max(compute, memory)."),
            Slip("bf16 weights", lambda: _step(weight_dtype="bf16"),
                 "the low-latency rows quantize the weights to int8, halving the weight read."),
        )),
    ),
    Exercise(
        id="ch12.torus-diameter-4x4x8",
        question="The most hops between two chips of a 4 x 4 x 8 torus with wraparound links.",
        answer=Number("", lambda: torus_diameter((4, 4, 8)), integer=True, slips=(
            Slip("no wraparound", lambda: torus_diameter((4, 4, 8), wraparound=False),
                 "a torus wraps around: along an axis of a chips the farthest chip is floor(a / 2) hops away."),
        )),
    ),
    Exercise(
        id="ch12.chatbot-reply-palm-62b",
        question="Measured time for PaLM 62B to read a 2,048-token prompt and write a 64-token reply, from the "
                 "low-latency rows of Table 3 (the decode row's latency covers all 64 steps), in s.",
        answer=Number("s", lambda: _reply("prefill", "decode"), slips=(
            Slip("decode only", lambda: _reply("decode"), "the reply first reads the prompt: add the prefill row."),
            Slip("prefill only", lambda: _reply("prefill"),
                 "the 64 reply tokens come from 64 decode steps: add the decode row."),
        )),
    ),
    Exercise(
        id="ch12.explain-int8",
        preamble=("Why do int8 weights (with bf16 arithmetic) lower the cost per token at low latency but not "
                  "at the throughput end of the decode frontier? What would change the throughput end?"),
        question="Check your reasoning: why do int8 weights (with bf16 arithmetic) lower the cost per token at low "
                 "latency but not at the throughput end of the decode frontier?",
        answer=Choice({"a": "int8 matrix units run twice as fast as bf16 ones on TPU v4",
                       "b": "a large-batch step is bound by reading the KV cache, which int8 weights do not shrink",
                       "c": "int8 weights leave more HBM for the KV cache, which only matters at small batch",
                       "d": "at low latency the step streams the weights, and one byte each streams faster; at the "
                            "throughput end it is arithmetic, which still runs in bf16"}, "d", why={
            "a": "TPU v4's int8 rate equals its bf16 rate, and here the math stays bf16.",
            "b": "at 2,048 tokens the caches are a small part of the bytes: price the large-batch step's terms "
                 "to see which one binds.",
            "c": "more room for the cache helps the large batches, not the small ones."}),
    ),
)
