"""Claims S1-S6 of the ledger: Sharding.

Each row below is a published number and the scaling_lib call that recomputes it; the helpers sit beside
the rows that use them.
"""

from ...collectives import collective_time, latency_bound_bytes
from ...dtypes import bytes_per_element
from ...hardware import get_chip
from ...models import get_model
from ...sharding import (beta, fsdp_decode_cost, kv_cache_sharding, max_decode_model_parallelism,
                         max_prefill_model_parallelism)
from ...units import format_quantity
from .framework import SB7, TPUI, Claim, Finding, between, holds_that


def _beta(chip):
    return beta(chip)


def _max_mp(d_ff, batch, beta_value):
    return max_decode_model_parallelism(d_ff, batch, beta_value)


S1_ROUNDED_BETA = 8  # the Scaling Book's beta for v5e in its 64-way example (9.1 rounded)


def _s2_ways():
    return _max_mp(get_model("llama3-70b").d_ff, 32, _beta("ironwood"))


def _latency_bound(chip):
    return latency_bound_bytes(chip, 8)


def _s3_latency_bound_collective():
    payload = 16 * 8192 * bytes_per_element("int8")  # B = 16 activations of D = 8,192 in int8
    timing = collective_time("all-gather", payload, "tpu-v5e", 8)
    return Finding(payload, timing.bound == "latency",
                   f"an 8-way all-gather of {format_quantity(payload, 'kB', 4)} on v5e is {timing.bound}-bound")


def _s4_slowdown():
    return fsdp_decode_cost("llama3-70b", "tpu-v5e", 8).slowdown


def _s5_kv_sharding():
    split = kv_cache_sharding(get_model("llama3-70b").n_kv_heads, 32, 16)
    count = split.all_to_alls_per_attention_layer
    unsplit = kv_cache_sharding(get_model("llama3-70b").n_kv_heads, 32, 8)
    ok = (split.head_shards, split.batch_shards, count) == (8, 2, 2) and unsplit.all_to_alls_per_attention_layer == 0
    return Finding(count, ok, f"LLaMA-3-70B (K = 8) on 16 shards: {split.head_shards} by heads x "
                              f"{split.batch_shards} by batch, {count} all-to-alls per attention layer (8 shards: "
                              f"{unsplit.all_to_alls_per_attention_layer})")


def _axis_bandwidth(chip):
    return get_chip(chip).topology.axis_bandwidth


def _s6_flops_per_ici_byte():
    chip = get_chip("tpu-v5e")
    return chip.peak_flops("bf16") / chip.ici_bidirectional


def _s6():
    return max_prefill_model_parallelism("tpu-v5e", 28672)


CLAIMS = (
    Claim("S1", "beta v5e", "beta = HBM / bidirectional ICI per link on v5e", SB7, "about 8 (9.1 unrounded)", 9.1,
          "", lambda: _beta("tpu-v5e"), note="The source rounds 9.1 to 8 for the 64-way example."),
    Claim("S1", "64 ways", "F = 16,384 at B = 32 can be model-sharded F / (B beta) ways (beta = 8)", SB7, "64 ways",
          64, "ways", lambda: _max_mp(16384, 32, S1_ROUNDED_BETA),
          note="With the source's rounded beta = 8; the unrounded beta allows a little fewer ways."),
    Claim("S2", "beta Ironwood", "beta on Ironwood = 7.38e12 / 2e11", TPUI, "about 37", 36.9, "",
          lambda: _beta("ironwood")),
    Claim("S2", "Ironwood ICI per axis", "Ironwood's ICI bandwidth along one torus axis (its two links on the axis, "
          "one way each)", TPUI, "200 GB/s per axis", 2e11, "GB/s", lambda: _axis_bandwidth("ironwood"),
          note="The same 200 GB/s is one link's two directions: Google Cloud's TPU7x page gives 1,200 GB/s "
               "bidirectional per chip over 6 links, two per axis."),
    Claim("S2", "24 ways", "LLaMA-3-70B at batch 32 splits about 24 ways on Ironwood", TPUI, "about 24 ways", 24,
          "ways", _s2_ways),
    Claim("S3", "131 kB latency-bound", "B = 16, D = 8,192 in int8: 131 kB per collective, latency-bound", SB7,
          "131 kB, latency-bound", 131e3, "kB", _s3_latency_bound_collective,
          holds_that("collective_time(...).bound == 'latency'")),
    Claim("S3", "v5e threshold", "an 8-way collective is latency-bound below this size on v5e", SB7,
          "about 360 kB", 360e3, "kB", lambda: _latency_bound("tpu-v5e")),
    Claim("S3", "Ironwood threshold", "the same on Ironwood", TPUI, "about 800 kB", 800e3, "kB",
          lambda: _latency_bound("ironwood")),
    Claim("S4", "", "FSDP in decode is an order-of-magnitude regression (LLaMA-3-70B, 8 v5e)", SB7,
          "order of magnitude", None, "x", _s4_slowdown, between(10, None, "x"),
          "Slowdown = weight all-gather over ICI / weight read from HBM, about (n - 1) beta."),
    Claim("S5", "", "KV cache sharded by KV heads up to K ways, then by batch, with two all-to-alls per layer", SB7,
          "two AllToAlls", 2, "", _s5_kv_sharding, holds_that("8 x 2 split, 2 all-to-alls (0 unsplit)")),
    Claim("S6", "C / W_ici,bidi", "v5e's bf16 FLOP/s over its bidirectional ICI bandwidth per link", SB7, "about 2200",
          2200, "FLOPs/B", _s6_flops_per_ici_byte),
    Claim("S6", "", "prefill model parallelism up to about F / 2200 per axis on v5e (F = 28,672)", SB7,
          "about F / 2200", 28672 / 2200, "ways", _s6),
)
