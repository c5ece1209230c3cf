"""Chapter 6 exercises: shrinking the KV cache. Every value, right or slipped, is a scaling_lib call."""

from ...inference import decode_step_time
from ...kv_levers import cross_layer_kv_bytes, local_global_kv_bytes, ragged_kv_reads, state_lever
from ...memory import kv_cache_bytes, state_bytes_per_sequence
from ...mixers import mamba
from ...models import get_model
from ..claims.step_time import T4_DEPLOYMENT
from .exercise import Choice, Exercise, Number, Slip

_LENGTHS = (100, 900, 2000, 4000)


def _int8_kv_step(weight_dtype: str = "bf16", kv_dtype: str = "int8"):
    """Claim T4's configuration (LLaMA-3-70B, 8 Ironwood, batch 64, 32,768 tokens) with the given dtypes."""
    return decode_step_time(**T4_DEPLOYMENT, weight_dtype=weight_dtype, kv_dtype=kv_dtype)


def _cla(batch: int = 32):
    return cross_layer_kv_bytes("llama3-8b", 16384, share_every=2, batch=batch)


def _jamba_lever(**changes):
    """Chapter 6's state lever on Jamba-v0.1 (`kv_levers.state_lever`), with a changed state when a slip asks."""
    return state_lever(get_model("jamba-v0.1").with_(**changes))


def _lever5_step(weight_dtype: str = "int4", kv_dtype: str = "bf16") -> float:
    return decode_step_time("llama3-70b", "tpu-v5e", 16, 16, 2048, weight_dtype=weight_dtype, kv_dtype=kv_dtype).total_s


EXERCISES = (
    Exercise(
        id="ch6.mqa-or-local-global-llama3-70b",
        question="LLaMA-3-70B ($K = 8$ KV heads) serves one 32,768-token sequence in bf16. Price two levers, each on "
                 "its own: multiquery attention ($K = 1$), and local attention in 3 of every 4 layers (the last 4,096 "
                 "tokens) with every 4th layer global. How large is the KV cache under each, in GB?",
        answer=(
            Number("GB", lambda: kv_cache_bytes(get_model("llama3-70b").with_(n_kv_heads=1), 32768), name="mqa",
                   label="multiquery", quantity="kv", slips=(
                Slip("the GQA cache (K = 8), or bits for bytes", lambda: kv_cache_bytes("llama3-70b", 32768),
                     "both land here, 8 times the cache: multiquery attention keeps a single KV head per layer; and "
                     "a cache is counted in bytes, 8 bits each."),
                Slip("one layer", lambda: kv_cache_bytes(get_model("llama3-70b").with_(n_kv_heads=1), 32768)
                     / get_model("llama3-70b").n_layers,
                     "each of the model's layers keeps its own single KV head."),
            )),
            Number("GB", lambda: local_global_kv_bytes("llama3-70b", 32768, window=4096, global_every=4),
                   name="local_global", label="local/global", quantity="kv", slips=(
                Slip("every layer global", lambda: kv_cache_bytes("llama3-70b", 32768),
                     "the local layers keep only the last 4,096 tokens."),
                Slip("every layer local", lambda: kv_cache_bytes("llama3-70b", 4096),
                     "every 4th layer still keeps all 32,768 tokens."),
                Slip("3 of 4 layers global",
                     lambda: 0.75 * kv_cache_bytes("llama3-70b", 32768) + 0.25 * kv_cache_bytes("llama3-70b", 4096),
                     "it is the other way round: 1 layer in 4 is global, 3 in 4 are local."),
                Slip("MQA as well, or bits for bytes", lambda: local_global_kv_bytes(
                    get_model("llama3-70b").with_(n_kv_heads=1), 32768, window=4096, global_every=4),
                     "both land here, an eighth of the cache: price each lever on its own, the local/global model "
                     "keeps its K = 8 KV heads; and a cache is counted in bytes, 8 bits each."),
            )),
        ),
    ),
    Exercise(
        id="ch6.paged-slots",
        question="A decode batch holds sequences of 100, 900, 2,000 and 4,000 tokens. How many KV slots (tokens) per "
                 "layer and KV head does a paged cache with 16-token blocks hold? How many would a rectangular "
                 "cache, padded to the longest sequence, hold? Both are whole numbers: a block is allocated whole.",
        answer=(
            Number("tokens", lambda: ragged_kv_reads(_LENGTHS, 16).paged_slots, integer=True, name="paged", slips=(
                Slip("the tokens themselves", lambda: ragged_kv_reads(_LENGTHS, 16).useful_slots,
                     "a sequence holds whole blocks: round each length up to a multiple of 16."),
                Slip("rounding down to whole blocks", lambda: sum(n // 16 * 16 for n in _LENGTHS),
                     "a partly filled block is still allocated: round up."),
            )),
            Number("tokens", lambda: ragged_kv_reads(_LENGTHS, 16).contiguous_slots, integer=True,
                   name="rectangular", slips=(
                Slip("the tokens themselves", lambda: ragged_kv_reads(_LENGTHS, 16).useful_slots,
                     "a rectangular cache pads every sequence to the longest one."),
                Slip("one sequence", lambda: max(_LENGTHS),
                     "each of the 4 sequences gets a row as long as the longest."),
            )),
        ),
    ),
    Exercise(
        id="ch6.t4-int8-kv-only",
        question="In the T4 configuration (LLaMA-3-70B, 8 Ironwood chips, batch 64, 32,768 tokens), keep bf16 weights "
                 "and math but store the KV cache in int8. First predict which term of the step-time bound halves; "
                 "then compute the decode step lower bound, in ms.",
        answer=(
            Choice({"a": "both the weight and the KV terms", "b": "the weight term only", "c": "the KV term only",
                    "d": "neither: the step is compute-bound at batch 64"}, "c", name="halves", why={
                       "a": "check which of the two arrays the question changes the precision of.",
                       "b": "the weights stay bf16: their bytes do not change.",
                       "d": "at batch 64 the step is far below the critical batch: it is bytes read, and int8 "
                            "entries take 1 byte instead of 2."}),
            Number("ms", lambda: _int8_kv_step().total_s, name="step", slips=(
                Slip("a bf16 cache", lambda: _int8_kv_step(kv_dtype="bf16").total_s,
                     "int8 KV entries take 1 byte, half of bf16."),
                Slip("int8 weights as well", lambda: _int8_kv_step(weight_dtype="int8").total_s,
                     "only the cache is int8; the weights stay bf16."),
                Slip("the KV term alone", lambda: _int8_kv_step().kv_s,
                     "the step also reads the weights once (or does their FLOPs, whichever is longer)."),
                Slip("keys only", lambda: _int8_kv_step(kv_dtype="int4").total_s,  # half the int8 cache's bytes
                     "each cached token holds a key AND a value for every KV head of every layer: the step reads "
                     "both."),
            )),
        ),
    ),
    Exercise(
        id="ch6.cla-llama3-8b-b32",
        question="LLaMA-3-8B decodes a batch of 32 sequences of 16,384 tokens in bf16 with cross-layer sharing: each "
                 "pair of adjacent layers shares one K/V. How many GB of KV cache are stored, and how many GB does "
                 "one decode step read?",
        answer=(
            Number("GB", lambda: _cla().stored_bytes, name="stored", quantity="kv", slips=(
                Slip("no sharing", lambda: _cla().read_bytes,
                     "pairs of layers store one cache between them: half the layers' worth."),
            )),
            Number("GB", lambda: _cla().read_bytes, name="read", slips=(
                Slip("reads halved too, or keys only", lambda: _cla().stored_bytes,
                     "sharing saves capacity, not bandwidth: each layer still reads the shared cache, a key AND a "
                     "value for every KV head."),
            )),
        ),
    ),
    Exercise(
        id="ch6.int4-weights-llama3-70b-v5e16",
        question="Take the weight-quantization example (LLaMA-3-70B on 16 TPU v5e, batch 16, 2,048 tokens, bf16 KV "
                 "cache) with int4 weights (half a byte each) converted to bf16 for the math. What is the step-time "
                 "lower bound, in ms?",
        answer=Number("ms", _lever5_step, slips=(
            Slip("int8 weights", lambda: _lever5_step("int8"), "int4 weights take half a byte, not one."),
            Slip("an int4 cache too", lambda: _lever5_step(kv_dtype="int4"),
                 "only the weights are int4; the cache stays bf16."),
        )),
    ),
    Exercise(
        id="ch6.hybrid-state-jamba",
        question="Jamba-v0.1 keeps softmax attention in 4 of its 32 layers (8 KV heads of 128) and a Mamba state in "
                 "the other 28: per layer and sequence 8,192 x 16 state values plus a convolution window of 3 x 8,192 "
                 "values, all in bf16. How many MB does one sequence's state take? Past what context, in tokens, "
                 "does one Jamba sequence hold fewer bytes than it would with softmax attention in all 32 layers?",
        answer=(
            Number("MB", lambda: state_bytes_per_sequence("jamba-v0.1"), name="state", slips=(
                Slip("the convolution window left out",
                     lambda: _jamba_lever(state=mamba(4096, 8192, 16, 1, 256)).state_bytes,
                     "the layer also keeps the last kernel - 1 = 3 inputs of its causal convolution."),
                Slip("an fp32 state", lambda: state_bytes_per_sequence("jamba-v0.1", "fp32"),
                     "the state is kept in bf16, 2 bytes a value."),
                Slip("one layer", lambda: state_bytes_per_sequence("jamba-v0.1") / 28,
                     "each of the 28 Mamba layers keeps its own state."),
            )),
            Number("tokens", lambda: _jamba_lever().crossover_tokens, name="crossover", slips=(
                Slip("against the whole all-attention cache",
                     lambda: _jamba_lever().state_bytes / _jamba_lever().twin_kv_bytes_per_token,
                     "the hybrid still caches its 4 attention layers: the state replaces only what the 28 other "
                     "layers would cache per token."),
                Slip("against the hybrid's own cache",
                     lambda: _jamba_lever().state_bytes / _jamba_lever().kv_bytes_per_token,
                     "compare with the bytes per token the 28 Mamba layers would cache as attention layers, not "
                     "with what the 4 attention layers cache."),
                Slip("keys only", lambda: 2 * _jamba_lever().crossover_tokens,
                     "each replaced layer would cache a key AND a value per KV head: 2 x 8 x 128 values a token."),
            )),
        ),
    ),
    Exercise(
        id="ch6.explain-paging",
        preamble=("The tiny model's paged decode step gathers every sequence's whole table row, padding "
                  "blocks included, so on a CPU it reads no fewer bytes than the contiguous cache. Why does "
                  "the book still count paged reads as $\\sum_b \\lceil S_b/\\text{block}\\rceil \\cdot "
                  "\\text{block}$? What would a kernel need to know to read only those?"),
        question="Check your reasoning: what must a paged-attention kernel know at run time to read only the blocks "
                 "a sequence uses?",
        answer=Choice({"a": "the number of tokens in the whole batch", "b": "only the longest sequence's length",
                       "c": "nothing: XLA infers it from the mask",
                       "d": "the block table and each sequence's length"}, "d", why={
            "a": "a total does not say which blocks of the pool hold each sequence's keys and values.",
            "b": "that gives a rectangular read, padding included.",
            "c": "a jitted program has static shapes; the mask only zeroes what was read."}),
    ),
)
