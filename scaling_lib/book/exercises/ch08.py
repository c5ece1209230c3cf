"""Chapter 8 (partitioning layouts, Pope et al. 2022): exercises. Every value, right or slipped, is a scaling_lib
call."""

import dataclasses
import math

from ...context_limits import max_context_length
from ...hardware import get_chip
from ...collectives import ring_bytes_sent
from ...layouts import block_model, comm_volume_curves, ffn_collectives, ffn_comm_volume, wg_switch_tokens
from ...measurements import POPE_HEADLINE_RUNS
from ...models import get_model, param_count
from ...utilization import decode_latency_gap, mfu
from .exercise import Choice, Convention, Exercise, Number, Slip

_SLICE = (4, 4, 4)
# The block chapter 8 executes on its 2 x 2 x 2 mesh: T = 16 tokens, D = 32, F = 64, float32.
_BLOCK_TOKENS, _BLOCK = 16, (32, 64)
# 2d-ws with its axis groups swapped: D over z and y (4 chips), F over x (2 chips) -- a (4, 2, 1) mesh to the model.
_SWAPPED = (4, 2, 1)


def _block_collectives(mesh=_SWAPPED, dtype: str = "fp32") -> tuple:
    """The cost model's collectives of chapter 8's executed block under 2d-ws, D split over mesh[0] chips."""
    return ffn_collectives("2d-ws", block_model(*_BLOCK), _BLOCK_TOKENS, mesh, dtype, dtype)


def _block_bytes(mesh=_SWAPPED, dtype: str = "fp32") -> float:
    return sum(c.bytes_per_chip for c in _block_collectives(mesh, dtype))


def _hlo_result_bytes() -> float:
    """What the HLO shapes say before conversion: a reduce-scatter's output is 1/m of the input the model counts."""
    return sum(c.bytes_per_chip / (math.prod(c.group) if c.op == "reduce-scatter" else 1) for c in _block_collectives())


def _bound_mfu(n_chips_counted: int = 64, at_bound: bool = True) -> float:
    """MFU of Pope et al.'s low-latency decode run (PaLM 540B, 64 TPU v4) if each step took the roofline bound."""
    run = POPE_HEADLINE_RUNS["decode-low-latency"]
    gap = decode_latency_gap("palm-540b", "tpu-v4", 64, run.batch, run.context_len, run.seconds_per_step,
                             weight_dtype=run.weight_dtype)
    seconds = gap.bound_s * run.tokens_per_sequence if at_bound else run.seconds
    return mfu(param_count(get_model("palm-540b")), run.tokens, seconds, "tpu-v4", n_chips_counted)


def _context(sharding: str = "batch", kv_fraction: float = 0.3, chip="tpu-v4", kv_dtype: str = "bf16") -> int:
    return max_context_length("palm-540b", chip, 64, 256, sharding, kv_fraction, kv_dtype)


EXERCISES = (
    Exercise(
        id="ch8.2d-ws-bytes-palm-540b-512",
        question="How many bytes does each chip send per feed-forward layer of PaLM 540B under 2D weight-stationary "
                 "on the 4x4x4 slice ($X = 4$ splits $D$, $YZ = 16$ split $F$), for a batch of 512 tokens in bf16 "
                 "(Pope et al.'s accounting)? Answer in MB.",
        answer=Number("MB", lambda: ffn_comm_volume("2d-ws", "palm-540b", 512, _SLICE).total_bytes, slips=(
            Slip("1D weight-stationary", lambda: ffn_comm_volume("1d-ws", "palm-540b", 512, _SLICE).total_bytes,
                 "2D gathers and scatters D over YZ and F over X, each a slice of the activations."),
            Slip("half the collectives, or 1-byte activations",
                 lambda: ffn_comm_volume("2d-ws", "palm-540b", 512, _SLICE, activation_dtype="int8").total_bytes,
                 "each split pays an all-gather and a reduce-scatter, 2 bytes per bf16 activation."),
            Slip("D and F splits swapped", lambda: ffn_comm_volume("2d-ws", "palm-540b", 512, (16, 2, 2)).total_bytes,
                 "D is split X = 4 ways and F YZ = 16 ways: D / X + F / (YZ)."),
        )),
    ),
    Exercise(
        id="ch8.wg-xyz-switch-palm-62b",
        question="Above how many tokens per batch does weight-gathered over $XYZ$ move fewer bytes per chip than "
                 "weight-gathered over $XY$, for PaLM 62B ($F = 32{,}768$) on a 4x4x4 slice in bf16? Use the "
                 "chapter's formula $M_\\text{WG}(n_\\text{wg})$ for both; the count of the collectives that really "
                 "run (`comm_volume_curves`) is accepted too.",
        answer=Number("tokens", lambda: wg_switch_tokens("palm-62b", 16, 64, 64), rel_tol=0.01, also=(
            Convention("the collectives that run: wg-xyz has no activation traffic",
                       lambda: comm_volume_curves("palm-62b", _SLICE, (64, 2**22)).switch_points[-1].tokens),
        ), slips=(
            Slip("the optimal gather size reaching n", lambda: 64 * get_model("palm-62b").d_ff,
                 "sqrt(T n / F) = n is where the ideal n_wg reaches the whole slice; the two discrete layouts "
                 "cross earlier: set M_WG(16) = M_WG(64)."),
            Slip("the X to XY switch", lambda: comm_volume_curves("palm-62b", _SLICE, (64, 2**22)).switch_points[-2]
                 .tokens, "that is the switch from wg-x to wg-xy; the question asks about XY to XYZ."),
        )),
    ),
    Exercise(
        id="ch8.2d-ws-swapped-axes",
        question="In the cell that builds `FFN_SPECS`, swap the two groups of axes of 2D weight-stationary, "
                 "`ws_2d_specs(F_SPLIT, (\"x\",))`: $D$ is then split over $z$ and $y$ (4 chips) and $F$ over $x$ "
                 "(2 chips). Before you run the cells after it, predict how many bytes each chip moves per "
                 "feed-forward block in the cost model's accounting (the executed table's column \"HLO bytes, model "
                 "accounting\", no ring factor), for the chapter's $T = 16$, $D = 32$, $F = 64$ in float32. Answer "
                 "in bytes.",
        answer=Number("B", _block_bytes, slips=(
            Slip("the layout as drawn", lambda: _block_bytes((2, 2, 2)),
                 "the swap changes which dimension is split more finely: now D / 4 + F / 2 per token."),
            Slip("the bytes a ring sends", lambda: sum(ring_bytes_sent(c) for c in _block_collectives()),
                 "a ring sends (m-1)/m of each collective's array; the model's accounting counts the whole array."),
            Slip("reduce-scatters counted by their output", _hlo_result_bytes,
                 "a reduce-scatter's HLO shape is its output, 1/m of the unreduced input the model counts."),
            Slip("2-byte activations", lambda: _block_bytes(dtype="bf16"),
                 "the executed block runs in float32: 4 bytes per activation."),
        )),
    ),
    Exercise(
        id="ch8.mfu-at-bound-low-latency-decode",
        question="Pope et al.'s low-latency decode run (PaLM 540B, 64 TPU v4, batch 64, 64 generated tokens) measured "
                 "steps several times slower than the chapter's roofline bound. What MFU would the run reach if every "
                 "step took exactly the bound (bf16 peak, $2P$ FLOPs per token)? Answer in %.",
        answer=Number("%", _bound_mfu, quantity="flops", slips=(
            Slip("the measured time", lambda: _bound_mfu(at_bound=False),
                 "that is the MFU of the measured run; take 64 steps of the bound instead."),
            Slip("one chip's peak", lambda: _bound_mfu(n_chips_counted=1),
                 "the run's FLOPs are shared by 64 chips: divide by 64 C."),
        )),
    ),
    Exercise(
        id="ch8.context-batch-sharded-b256",
        question="With attention sharded over the batch and 30% of each TPU v4's 32 GiB of HBM for the cache, what "
                 "is the longest context PaLM 540B's multiquery KV cache allows at batch 256 on 64 chips? Round down "
                 "to a whole token.",
        answer=Number("tokens", _context, integer=True, rounding="down", slips=(
            Slip("sharding over heads", lambda: _context("heads"),
                 "with one KV head, head sharding replicates the whole cache on every chip; over the batch each "
                 "chip keeps 256 / 64 sequences."),
            Slip("all of HBM", lambda: _context(kv_fraction=1.0), "only 30% of HBM holds the cache."),
            Slip("keys only, or half the batch", lambda: _context(kv_dtype="int8"),  # half the bytes per token
                 "both land here, twice the context: each cached token holds a key AND a value for every layer; and "
                 "the batch is 256 sequences, 256 / 64 on each chip."),
            Slip("rounding up", lambda: _context() + 1,
                 "a token that does not fit whole does not fit: round the context down."),
            Slip("32 GB instead of 32 GiB",
                 lambda: _context(chip=dataclasses.replace(get_chip("tpu-v4"), hbm_capacity=32e9)),
                 "a TPU v4 has 32 GiB = 32 x 2^30 bytes of HBM."),
        )),
    ),
    Exercise(
        id="ch8.explain-sqrt",
        preamble=("Why does the best weight-gathered layout's communication grow only as $\\sqrt{T}$, while "
                  "every weight-stationary layout's grows as $T$? What limits this on a real torus?"),
        question="Check your reasoning: when the tokens per batch grow 4 times, by about how much does the best "
                 "weight-gathered layout's communication grow (ignoring the torus' discrete choices)?",
        answer=Choice({"a": "4 times", "b": "not at all", "c": "16 times", "d": "2 times"}, "d", why={
            "a": "that is a weight-stationary layout: activations only, proportional to T.",
            "b": "only once every chip gathers all the weights does the volume stop growing.",
            "c": "no term grows faster than T."}),
    ),
)
