"""Chapter 12 (choosing a layout by the metric): exercises. Every expected value is a scaling_lib call."""

from ...frontier import layout_cost, measured_mfu
from ...hops import torus_diameter
from ...measurements import pope_row
from .exercise import Exercise

EXERCISES = (
    Exercise(
        id="ch12.mfu-palm-62b-throughput-decode",
        question="MFU of PaLM 62B's high-throughput decode in Pope et al.'s Table 3: batch 512, 64 decode steps in "
                 "5.1 s on 8 TPU v4 chips, in %.",
        unit="%",
        expected=lambda: measured_mfu(pope_row("palm-62b", "high throughput", "decode")),
    ),
    Exercise(
        id="ch12.step-palm-540b-low-latency-decode",
        question="The cost model's decode step for PaLM 540B at batch 64 on 64 TPU v4 chips: int8 weights, 2D "
                 "weight-stationary, attention sharded over the batch, 2,048 tokens of context, in ms.",
        unit="ms",
        expected=lambda: layout_cost("palm-540b", "tpu-v4", 64, "decode", 64, "2d-ws", "batch",
                                     weight_dtype="int8").total_s,
    ),
    Exercise(
        id="ch12.torus-diameter-4x4x8",
        question="The most hops between two chips of a 4 x 4 x 8 torus with wraparound links.",
        unit="",
        expected=lambda: torus_diameter((4, 4, 8)),
    ),
    Exercise(
        id="ch12.chatbot-reply-palm-540b",
        question="Measured time for PaLM 540B to read a 2,048-token prompt and write a 64-token reply, from the "
                 "low-latency rows of Table 2, in s.",
        unit="s",
        expected=lambda: (pope_row("palm-540b", "low latency", "prefill").latency_s
                          + pope_row("palm-540b", "low latency", "decode").latency_s),
    ),
)
