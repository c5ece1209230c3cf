"""Chapter 7 (sharding prefill and generation): exercises. Every value, right or slipped, is a scaling_lib call."""

import math

from ...collectives import latency_bound_bytes
from ...hardware import get_chip
from ...memory import param_bytes
from ...models import get_model, tiny_transformer
from ...sharding import (TORUS_SHAPES, beta, decode_hops_per_layer, fsdp_decode_cost, fsdp_gather_bytes,
                         kv_cache_sharding, max_decode_model_parallelism)
from .exercise import Choice, Exercise, Number, Slip


def _ways(beta_value: float, batch: int = 64) -> int:
    return math.floor(max_decode_model_parallelism(get_model("llama3-8b").d_ff, batch, beta_value))


def _hop_crossing(chip: str = "tpu-v5e", hop_share: float = 1.0) -> int:
    """The first of the chapter's tori on which L h(n) t_hop, LLaMA-3-8B's hop latency per decode step at batch 32,
    exceeds its bf16 weight read per chip, P_bytes / (n W_hbm) (`hop_share` < 1 counts only part of the hops). h(n)
    counts on the slice's own links, as the chapter's table does."""
    m, c = get_model("llama3-8b"), get_chip(chip)
    for n, torus in sorted(TORUS_SHAPES[chip].items()):
        hops_s = m.n_layers * decode_hops_per_layer(m, n, 32, torus, chip=chip) * hop_share * c.ici_hop_latency
        if hops_s > param_bytes(m) / (n * c.hbm_bandwidth):
            return n
    raise ValueError("no torus of the chapter is large enough")


TINY = tiny_transformer(n_heads=8, n_kv_heads=2)  # the chapter's tiny model: N = 8 query heads, K = 2
TINY_BATCH, F32 = 8, 4  # its batch of 8 sequences, in float32


def _all_to_all_bytes(n_devices: int, heads_split: bool = True) -> float:
    """Bytes one all-to-all of the chapter's Megatron step delivers to a device on n devices: the queries (or the
    attention outputs) of [B, N, H], float32, split n ways; 0 when n <= K leaves the batch whole."""
    kv = kv_cache_sharding(TINY.n_kv_heads, TINY_BATCH, n_devices)
    if kv.batch_shards == 1:
        return 0
    share = n_devices if heads_split else 1
    return TINY_BATCH * TINY.n_heads * TINY.head_dim * F32 / share


def _kv_13b():
    return kv_cache_sharding(get_model("llama2-13b").n_kv_heads, 64, 32)


EXERCISES = (
    Exercise(
        id="ch7.max-mp-llama3-8b-ironwood-b64",
        question="How many ways can LLaMA-3-8B ($F = 14{,}336$) be model-sharded for decode at batch 64 on Ironwood "
                 "before the bytes of its ICI collectives take longer than the weight read (the bytes-only bound; "
                 "their hops are left out)? Use the unrounded $\\beta$ and give the largest whole number of ways "
                 "$n \\le F/(B\\beta)$.",
        answer=Number("ways", lambda: _ways(beta("ironwood")), integer=True, rounding="down", slips=(
            Slip("one-way link bandwidth", lambda: _ways(2 * beta("ironwood")),
                 "beta divides the HBM bandwidth by the bidirectional bandwidth of a link."),
            Slip("the TPU v5e's beta", lambda: _ways(beta("tpu-v5e")),
                 "Ironwood's HBM is much faster for its links: use its own beta."),
            Slip("no batch", lambda: _ways(beta("ironwood"), batch=1),
                 "the activations crossing ICI grow with the batch: n = F / (B beta)."),
            Slip("rounding up", lambda: math.ceil(max_decode_model_parallelism(get_model("llama3-8b").d_ff, 64,
                                                                              beta("ironwood"))),
                 "past F / (B beta) the bytes over ICI outlast the weight read: take the largest whole n below it."),
        )),
    ),
    Exercise(
        id="ch7.latency-bound-v5e-16",
        question="Below how many kB is a 16-way ring collective on TPU v5e latency-bound (about 1 µs per hop, one-way "
                 "link bandwidth)?",
        answer=Number("kB", lambda: latency_bound_bytes("tpu-v5e", 16), slips=(
            Slip("bidirectional link bandwidth", lambda: 16 * get_chip("tpu-v5e").ici_bidirectional
                 * get_chip("tpu-v5e").ici_hop_latency,
                 "the threshold uses one direction of one link: n x W_link x t_hop."),
            Slip("8 chips, or n/2 hops at one direction's bandwidth", lambda: latency_bound_bytes("tpu-v5e", 8),
                 "both land here, half the threshold: the collective spans 16 chips; and a pass's n/2 hops are set "
                 "against the bytes at both directions' bandwidth, M / W_ici,bidi < (n/2) t_hop, so "
                 "M < n W_ici t_hop."),
        )),
    ),
    Exercise(
        id="ch7.hop-crossing-llama3-8b-v5e-b32",
        question="LLaMA-3-8B (bf16) decodes at batch 32 on TPU v5e, on the chapter's 2D tori (4 chips as 2 x 2, 8 as "
                 "4 x 2, 16 as 4 x 4, 32 as 8 x 4, 64 as 8 x 8, 128 as 16 x 8, 256 as 16 x 16). Its collectives are "
                 "latency-bound there, so one step's ICI time is $L\\,h(n)\\,t_\\text{hop}$, with $h(n)$ the hops of "
                 "one layer counted on each slice's own links (`decode_hops_per_layer(..., chip=\"tpu-v5e\")`: two "
                 "all-reduces, each a reduce-scatter and an all-gather over every torus axis, and the attention "
                 "all-to-alls; a v5e axis wraps into a ring only when it spans 16 chips, shorter ones are lines). On "
                 "how many chips does it first exceed the weight read per chip, $P_\\text{bytes}/(n W_\\text{hbm})$?",
        answer=Number("chips", _hop_crossing, integer=True, slips=(
            Slip("the bytes-only bound F/(B beta)",
                 lambda: math.floor(max_decode_model_parallelism(get_model("llama3-8b").d_ff, 32, beta("tpu-v5e"))),
                 "F / (B beta) compares the bytes of the collectives with the weight read; these collectives are "
                 "small, and their hops, not their bytes, set their time."),
            Slip("one layer's hops", lambda: _hop_crossing(hop_share=1 / get_model("llama3-8b").n_layers),
                 "every one of the L layers runs its own collectives: the step pays L h(n) t_hop."),
            Slip("Ironwood's tori", lambda: _hop_crossing("ironwood"),
                 "the question's chips are TPU v5e, whose HBM is slower: each chip's weight read lasts longer."),
        )),
    ),
    Exercise(
        id="ch7.fsdp-slowdown-llama3-70b-ironwood4",
        question="Serving LLaMA-3-70B (bf16) with FSDP on 4 Ironwood chips: how many times longer does all-gathering "
                 "the weights over ICI take, at every decode step, than reading each chip's shard from HBM?",
        answer=Number("x", lambda: fsdp_decode_cost("llama3-70b", "ironwood", 4).slowdown, slips=(
            Slip("one-way link bandwidth", lambda: 2 * fsdp_decode_cost("llama3-70b", "ironwood", 4).slowdown,
                 "the gather uses both directions of the link: beta is over the bidirectional bandwidth."),
            Slip("n beta instead of (n - 1) beta",
                 lambda: fsdp_decode_cost("llama3-70b", "ironwood", 4).slowdown * 4 / 3,
                 "each chip already holds its own shard: it receives (n - 1)/n of the weights."),
            Slip("the ratio upside down", lambda: 1 / fsdp_decode_cost("llama3-70b", "ironwood", 4).slowdown,
                 "the question asks how many times longer the gather takes than the HBM read: ICI over HBM."),
        )),
    ),
    Exercise(
        id="ch7.kv-batch-shards-llama2-13b-32",
        question="LLaMA-2-13B ($K = 40$ KV heads, $L = 40$ layers) decodes at batch 64 on 32 chips, its KV cache "
                 "split by KV heads first (as evenly as the numbers allow) and then by batch. How many ways is the "
                 "batch split? How many all-to-alls does one decode step run, over all layers?",
        answer=(
            Number("ways", lambda: _kv_13b().batch_shards, integer=True, name="batch_ways", label="batch split", slips=(
                Slip("the head split", lambda: _kv_13b().head_shards,
                     "that is how many ways the KV heads split; the batch takes the rest of the 32 chips."),
                Slip("40 heads over 32 chips", lambda: 1,
                     "40 heads do not split evenly 32 ways: the head split must divide both K and n."),
            )),
            Number("", lambda: _kv_13b().all_to_alls_per_attention_layer * get_model("llama2-13b").n_layers,
                   integer=True, name="all_to_alls", label="all-to-alls", slips=(
                Slip("one layer", lambda: _kv_13b().all_to_alls_per_attention_layer,
                     "every attention layer runs its own pair of all-to-alls."),
                Slip("one all-to-all per layer", lambda: get_model("llama2-13b").n_layers,
                     "each attention layer needs two: queries into the batch split, outputs back."),
            )),
        ),
    ),
    Exercise(
        id="ch7.fsdp-replicated-embedding",
        question="In the cell of *Decode: what is ruled out* that runs FSDP, keep the embedding table whole on every "
                 "device: after `fsdp_specs(CONFIG, 8)` add `param_specs = dataclasses.replace(param_specs, "
                 "embed=P())` (and `import dataclasses`). Before you run it: how many bytes do the all-gathers of one "
                 "decode step deliver to each device now? The tiny model's weights and norm gains are float32.",
        answer=Number("B", lambda: fsdp_gather_bytes(TINY, "fp32", replicated="embed"), integer=True, slips=(
            Slip("the embedding still gathered", lambda: fsdp_gather_bytes(TINY, "fp32"),
                 "a replicated array is already whole on every device: there is nothing to gather."),
            Slip("the norm gains left out",
                 lambda: param_bytes(TINY, "fp32") - TINY.vocab_size * TINY.d_model * F32,
                 "the RMSNorm gains are split and gathered like the weights (2 L D + D of them)."),
            Slip("the output projection replicated too",
                 lambda: fsdp_gather_bytes(TINY, "fp32", replicated=("embed", "unembed")),
                 "the embeddings are not tied here: the output projection is a table of its own, still split."),
            Slip("one device's share, or bits for bytes",
                 lambda: fsdp_gather_bytes(TINY, "fp32", replicated="embed") / 8,
                 "both land here, an eighth: an all-gather delivers the whole array to every device, not one block of "
                 "it; and the answer is in bytes, 8 bits each."),
            Slip("bf16", lambda: fsdp_gather_bytes(TINY, "bf16", replicated="embed"),
                 "the tiny model's weights are float32, 4 bytes each."),
        )),
    ),
    Exercise(
        id="ch7.megatron-4-devices-all-to-all",
        question="Run the Megatron step of *The layout, in code and drawn* on 4 devices: where the cell builds "
                 "`mesh`, write `sharded.as_mesh((2, 2), (\"heads\", \"batch\"))`, so that the $K = 2$ KV heads still "
                 "split 2 ways and the batch of 8 now splits 2 ways. Before you run it: how many bytes does each "
                 "all-to-all deliver to one device? The tiny model has $N = 8$ query heads of $H = 16$, in float32.",
        answer=Number("B", lambda: _all_to_all_bytes(4), integer=True, slips=(
            Slip("8 devices", lambda: _all_to_all_bytes(8),
                 "the mesh now has 4 devices, so each one holds N/4 query heads' worth of the queries."),
            Slip("the whole batch's queries", lambda: _all_to_all_bytes(4, heads_split=False),
                 "an all-to-all gives each device its own slice, 1/n of the [B, N, H] queries."),
            Slip("the all-reduce's payload", lambda: TINY_BATCH * TINY.d_model * F32,
                 "that is the [B, D] sum of an all-reduce; the all-to-all moves queries, [B, N, H] split n ways."),
        )),
    ),
    Exercise(
        id="ch7.explain-dp",
        preamble=("A colleague proposes to halve decode latency by running the same model on two replicas "
                  "inside one server and sending half of each batch to each. Why does this not work, and what "
                  "would you do with the second set of chips instead?"),
        question="Check your reasoning: a decode server splits its batch over two replicas of the model, each on its "
                 "own chips. Far below the critical batch, what happens to the step time?",
        answer=Choice({"a": "it halves", "b": "it stays about the same",
                       "c": "it doubles", "d": "it falls by the square root of 2"}, "b", why={
            "a": "ask what a replica must read each step, and whether a smaller batch changes it far below "
                 "B_crit.",
            "c": "nothing is added to a replica's step; the chips work independently.",
            "d": "no part of the step shrinks by a square root; the weight read stays."}),
    ),
)
