"""The appendix *Worked problems*: the Scaling Book's inference worked problems 1-4 and 6, posed in our words and
answered with scaling_lib. Every expected value is a library call on the book's "sb7-worked" model (L = 64,
D = 4,096, F = 16,384, N = 32, K = 8, H = 256, V = 32,128, shared embeddings). Assumptions the problems leave open are
stated in each question: an 8,192-token context, int8 weights, KV cache and math in problems 2-4, bf16 in problem 6.
"""

from ...hardware import get_chip
from ...memory import kv_bytes_per_token, max_batch_size, param_bytes
from ...models import get_model, param_count
from ...moe import as_moe, expert_sharded_memory, smallest_expert_sharded_slice
from ...sharding import beta, decode_step_components, kv_cache_sharding, max_decode_model_parallelism
from .exercise import Exercise

MODEL = "sb7-worked"
CHIP, CHIPS, CONTEXT = "tpu-v5e", 16, 8192
INT8 = ("int8", "int8")


def q2_batch(n_kv_heads: int = 8) -> int:
    """Problem 2: the largest batch whose int8 caches of 8,192 tokens fit next to the int8 weights on 16 v5e."""
    return max_batch_size(get_model(MODEL).with_(n_kv_heads=n_kv_heads), CHIP, CHIPS, CONTEXT, *INT8)


def q4_step(batch: int):
    """Problem 4: the step of 16-way model-parallel decode on a 4 x 4 v5e slice, with the KV cache split over the
    8 KV heads and then 2 ways over the batch (two all-to-alls per layer), int8 throughout."""
    return decode_step_components(MODEL, CHIP, CHIPS, batch, CONTEXT, *INT8, "int8", "int8", mesh_shape=(4, 4))


def q6_memory():
    """Problem 6: the model as a 16-expert top-2 MoE, experts over Z = 16 chips, each expert over Y = 8 (8 x 16)."""
    return expert_sharded_memory(as_moe(get_model(MODEL), 16, 2), CHIP, expert_shards=16, model_shards=8)


EXERCISES = (
    Exercise("wp.q1-params", "Parameters of the worked-problem model (embedding shared with the output).", "",
             lambda: param_count(get_model(MODEL))),
    Exercise("wp.q1-kv-per-token", "Its KV cache per token in bf16, in kB.", "kB",
             lambda: kv_bytes_per_token(MODEL, "bf16")),
    Exercise("wp.q2-max-batch", "Largest batch of 8,192-token sequences on 16 v5e, everything int8.", "",
             q2_batch),
    Exercise("wp.q2-max-batch-mqa", "The same with one KV head.", "", lambda: q2_batch(1)),
    Exercise("wp.q3-weight-load", "Time to read the int8 weights once from the HBM of 16 v5e, in ms.", "ms",
             lambda: param_bytes(MODEL, "int8") / (CHIPS * get_chip(CHIP).hbm_bandwidth)),
    Exercise("wp.q4-model-parallel-bound", "Model-parallel ways before ICI binds decode at problem 2's batch "
             "(F / (B beta) on v5e).", "", lambda: max_decode_model_parallelism(
                 get_model(MODEL).d_ff, q2_batch(), beta(CHIP))),
    Exercise("wp.q4-batch-shards", "With 16-way model parallelism and 8 KV heads, how many ways is the KV cache "
             "split over the batch?", "", lambda: kv_cache_sharding(8, q2_batch(), CHIPS).batch_shards),
    Exercise("wp.q4-step", "Step time at problem 2's batch on the 4 x 4 slice, collectives included, in ms.", "ms",
             lambda: q4_step(q2_batch()).total_s),
    Exercise("wp.q6-weight-load", "Weight read per step of the expert-sharded MoE on an 8 x 16 v5e slice, in ms.",
             "ms", lambda: q6_memory().total_bytes_per_chip / get_chip(CHIP).hbm_bandwidth),
    Exercise("wp.q6-free-hbm", "HBM left per chip for KV caches in that layout, in GB.", "GB",
             lambda: q6_memory().free_bytes_per_chip),
    Exercise("wp.q6-smallest-slice", "The smallest v5e slice that holds the MoE's bf16 weights, in chips.", "",
             lambda: smallest_expert_sharded_slice(as_moe(get_model(MODEL), 16, 2), CHIP)),
)
