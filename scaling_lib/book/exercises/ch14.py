"""Chapter 14 (serving details): exercises. Every value, right or slipped, is a scaling_lib call."""

from ...sequence_sharding import sequence_sharded_attention
from ...serving import prefill_free_batch, prefill_latency, prefill_saturating_batch
from .exercise import Choice, Exercise, Number, Slip


def _seq_kv(n_chips: int = 16, kv_dtype: str = "bf16") -> float:
    return sequence_sharded_attention("palm-62b", "tpu-v4", n_chips, 1, 131072, kv_dtype).kv_bytes_per_chip


EXERCISES = (
    Exercise(
        id="ch14.prefill-saturating-batch-llama3-8b",
        question="LLaMA-3-8B in bf16 on TPU v5e at 40% MFU: how many 30-token prompts must be prefilled together "
                 "before prefill is compute-bound (round up)?",
        answer=Number("", lambda: prefill_saturating_batch("llama3-8b", "tpu-v5e", 30, mfu=0.4), integer=True,
                      rounding="up", slips=(
            Slip("peak rate, no MFU", lambda: prefill_saturating_batch("llama3-8b", "tpu-v5e", 30, mfu=1.0),
                 "at 40% MFU the FLOPs take 2.5 times longer, so fewer tokens already fill the weight read."),
            Slip("int8 weights", lambda: prefill_saturating_batch("llama3-8b", "tpu-v5e", 30, mfu=0.4,
                                                                  weight_dtype="int8"),
                 "bf16 weights take 2 bytes each: the weight read is twice as long."),
            Slip("rounded down", lambda: prefill_free_batch("llama3-8b", "tpu-v5e", 30, mfu=0.4),
                 "rounding T_sat / T down gives the most prompts that still ride on the weight read; the question "
                 "asks for the first batch that is compute-bound."),
        )),
    ),
    Exercise(
        id="ch14.prefill-llama3-8b-32k-ironwood",
        question="Time to prefill a 32,768-token prompt of LLaMA-3-8B on 4 Ironwood chips at 40% MFU ($2P$ FLOPs "
                 "per token, attention's own FLOPs left out), in ms.",
        answer=Number("ms", lambda: prefill_latency("llama3-8b", "ironwood", 4, 32768, mfu=0.4), quantity="prefill",
                      model="llama3-8b", slips=(
            Slip("the peak rate (no MFU)", lambda: prefill_latency("llama3-8b", "ironwood", 4, 32768, mfu=1.0),
                 "at 40% MFU the chips achieve 0.4 of their peak: divide by the achieved rate."),
            Slip("one chip", lambda: prefill_latency("llama3-8b", "ironwood", 1, 32768, mfu=0.4),
                 "the 4 chips share the prefill's FLOPs."),
        )),
    ),
    Exercise(
        id="ch14.sequence-sharded-kv-palm-62b",
        question="PaLM 62B's KV cache for one sequence of 131,072 tokens (bf16), split along the sequence over 16 "
                 "chips: bytes per chip, in GB.",
        answer=Number("GB", _seq_kv, quantity="kv", slips=(
            Slip("not split", lambda: _seq_kv(1), "each chip holds 1/16 of the tokens of the sequence."),
        )),
    ),
    Exercise(
        id="ch14.explain-affinity",
        preamble=("Affinity routing raised the hit rate of the prefix cache. What does it cost, and when "
                  "would a scheduler break affinity on purpose?"),
        question="Check your reasoning: what does affinity routing (every turn of a conversation to one replica) "
                 "cost a serving fleet?",
        answer=Choice({"a": "more prefill work per turn",
                       "b": "load balance: a replica must take every turn of its conversations, busy or not",
                       "c": "a lower prefix hit rate, since each replica caches only its own conversations",
                       "d": "a KV transfer over the network for every turn"}, "b", why={
            "a": "affinity saves prefill: a follow-up finds its prefix and prefills only the new message.",
            "c": "affinity raises the hit rate: a follow-up lands on the replica that holds its prefix.",
            "d": "the prefix stays where it was made; that is the point of affinity."}),
    ),
)
