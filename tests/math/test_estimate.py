"""The full estimate (scaling_lib.estimate): a deployment's layout and memory, a step's terms against independent
counts, the collectives by hand, the engine's settings, the offline steady state, the bound against every published
measurement, and bad input. `estimate.report` is in test_report.py."""

import math
import re

import pytest

from scaling_lib.calibration import compare, pope_deployment, summarize
from scaling_lib.collectives import collective_time
from scaling_lib.estimate import (
    BOUND,
    MAX_TENSOR_PARALLEL,
    TYPICAL,
    Deployment,
    Efficiency,
    decode_step,
    decode_time,
    max_batch,
    offline_estimate,
    offline_throughput,
    prefill,
    report,
    resolve_efficiency,
    step_estimate,
)
from scaling_lib.flops import forward_flops, matmul_params
from scaling_lib.frontier import layout_cost
from scaling_lib.hardware import get_chip
from scaling_lib.inference import decode_step_time, prefill_time
from scaling_lib.kernels import kernel_ceiling
from scaling_lib.layouts import LAYOUTS
from scaling_lib.measurements import pope_rows, trtllm_rows
from scaling_lib.memory import kv_cache_bytes, kv_head_groups, max_batch_size, param_bytes
from scaling_lib.models import active_param_count, get_model, param_count
from scaling_lib.moe import as_moe

from tests import for_each

H100 = get_chip("h100")


def _llama8b(n_chips=1, chip="h100", **settings):
    return Deployment("llama3-8b", chip, n_chips, **settings)


# --- a deployment: its mesh, its tensor-parallel groups and how it describes them -------------------------------------
@for_each([
    ("llama3-70b", "tpu-v5e", 8, {}, (4, 2)), ("llama3-70b", "tpu-v5e", 32, {}, (8, 4)),
    ("llama3-70b", "ironwood", 8, {}, (2, 2, 2)), ("llama3-70b", "ironwood", 32, {}, (4, 4, 2)),
    ("llama3-70b", "h100", 8, {}, (8,)), ("llama3-8b", "h100", 8, dict(tensor_parallel=2), (2,)),
    ("llama3-70b", "tpu-v5e", 8, dict(mesh_shape=(2, 4)), (2, 4)),
    # Pope et al. (2022), 2D weight-stationary: with d_ff = 4 d_model the communication is least at X = sqrt(n) / 2
    # and YZ = 2 sqrt(n): on 64 chips X = 4, Y Z = 16, and the most even Y x Z is 4 x 4.
    ("palm-540b", "tpu-v4", 64, dict(ffn_layout="2d-ws"), (4, 4, 4)),
], ids=["v5e-8", "v5e-32", "ironwood-8", "ironwood-32", "h100-8", "h100-tp2", "explicit", "pope-palm-540b-64"])
def test_the_default_mesh_is_the_most_even_torus_largest_axis_first_and_a_gpu_group_is_flat(model, chip, n, kwargs,
                                                                                             mesh):
    assert Deployment(model, chip, n, **kwargs).mesh_shape == mesh


@for_each(["tpu-v5e", "tpu-v6e"], ids=str)
def test_the_default_pope_mesh_on_a_2d_torus_uses_two_axes_of_links_at_most(chip):
    for n in (16, 64, 256):  # 16 and 64 chips were laid on three axes, (2, 2, 4) and (4, 4, 4)
        meshes = [Deployment("llama3-70b", chip, n, ffn_layout="2d-ws").mesh_shape] + [
            layout_cost("palm-62b", chip, n, "decode", 256, layout, "batch").mesh_shape for layout in LAYOUTS]
        assert all(math.prod(mesh) == n and sum(a > 1 for a in mesh) <= 2 for mesh in meshes), (n, meshes)


@for_each([
    ("llama3-8b", "tpu-v5e", 32, {}, 32, 1),  # n = H: one query head per chip
    ("llama3-8b", "h100", 8, dict(tensor_parallel=4), 4, 2),
    ("llama3-8b", "h100", 8, dict(max_sequences=4.0), 8, 1),
    # 2D weight-stationary splits d_model and d_ff, not heads: 48 heads on 64 chips stand
    ("palm-540b", "tpu-v4", 64, dict(ffn_layout="2d-ws"), 64, 1),
    # the largest group of chips in one model copy (a 128 x 128 mesh, given so that no mesh is searched)
    ("palm-540b", "tpu-v4", MAX_TENSOR_PARALLEL, dict(ffn_layout="2d-ws", mesh_shape=(128, 128)),
     MAX_TENSOR_PARALLEL, 1),
], ids=["one-head-per-chip", "replicas", "engine-cap", "pope-layout", "largest-group"])
def test_a_deployment_splits_its_chips_into_identical_tensor_parallel_replicas(model, chip, n, kwargs,
                                                                                tensor_parallel, replicas):
    d = Deployment(model, chip, n, **kwargs)
    assert (d.tensor_parallel, d.replicas) == (tensor_parallel, replicas)
    assert (d.model.name, d.chip.name) == (model, chip)
    assert d.max_sequences == kwargs.get("max_sequences", 2048)


def test_one_chip_more_than_the_largest_group_is_refused_naming_the_argument_it_came_from():
    twice = 2 * MAX_TENSOR_PARALLEL  # n_chips is named only when tensor_parallel was unset
    with pytest.raises(ValueError, match=rf"\bn_chips={twice}\b.*tensor_parallel unset.*pass tensor_parallel="):
        Deployment("palm-540b", "tpu-v4", twice, ffn_layout="2d-ws")
    with pytest.raises(ValueError, match=rf"^tensor_parallel={twice} .*pass tensor_parallel=") as refused:
        Deployment("palm-540b", "tpu-v4", twice, ffn_layout="2d-ws", tensor_parallel=twice)
    assert "n_chips" not in str(refused.value)


@for_each([
    (8, {}, "; KV heads split 8 ways"),
    (8, dict(kv_placement="replicated"), "KV heads split 8 ways"),
    (8, dict(kv_placement="batch-split"), "KV heads split 8 ways"),
    (16, dict(kv_placement="replicated"), "KV heads split 8 ways, then replicated"),
    (16, dict(kv_placement="batch-split"), "KV heads split 8 ways, then batch-split"),
], ids=["within-the-heads", "within-replicated", "within-batch-split", "past-replicated", "past-batch-split"])
def test_a_deployment_describes_where_the_kv_cache_goes_past_the_kv_heads(n, kwargs, ends):
    # LLaMA-3-8B has 8 KV heads: on 8 chips the heads alone place the cache; on 16 chips of one replica they split 8
    # ways, then the cache is replicated or split by batch.
    assert _llama8b(n, **kwargs).describe().endswith(ends)


# --- where the KV cache lives, and how much of it a chip holds --------------------------------------------------------
def test_the_kv_cache_is_replicated_by_default_on_gpus_and_batch_split_on_tpus():
    # LLaMA-3-8B has 8 KV heads: 16-way tensor parallelism on H100 keeps each head on 2 chips (2 copies).
    gpu = _llama8b(16)
    assert gpu.kv_placement == "replicated" and gpu.kv_copies == 2
    tpu = _llama8b(16, "tpu-v5e")
    assert tpu.kv_placement == "batch-split" and tpu.kv_copies == 1
    assert _llama8b(16, kv_placement="batch-split").kv_copies == 1
    # MI300X joins its GPUs in a full mesh, not a switch: still a GPU, still a replicated cache beyond K heads (one
    # KV head of PaLM 62B's multiquery attention on 8 GPUs).
    assert Deployment("palm-62b", "mi300x", 8).kv_placement == "replicated"


def test_kv_placement_beyond_k_ways_is_explicit_in_capacity_and_in_communication():
    split = Deployment("llama3-70b", "tpu-v5e", 16)
    copied = Deployment("llama3-70b", "tpu-v5e", 16, kv_placement="replicated")
    assert copied.kv_bytes_per_chip(2, 8192) == pytest.approx(2 * split.kv_bytes_per_chip(2, 8192))
    assert max_batch(split, 8192) == max_batch_size("llama3-70b", "tpu-v5e", 16, 8192)  # 42
    assert max_batch(copied, 8192) == max_batch_size("llama3-70b", "tpu-v5e", 16, 8192, kv_placement="replicated")
    assert max_batch_size("llama3-70b", "tpu-v5e", 16, 8192, kv_placement="replicated") == 21
    # Only a batch-split cache pays the two all-to-alls per layer.
    assert decode_step(split, 16, 8192).comm_s > decode_step(copied, 16, 8192).comm_s
    assert decode_step(copied, 16, 8192).kv_placement == "replicated"


def test_a_batch_split_cache_keeps_whole_sequences_on_each_chip():
    # LLaMA-3-70B on 64 TPU v5e: its 8 KV heads split 8 ways, then the batch 8 ways. A chip holds whole sequences of
    # its head: 2 (K, V) x 80 layers x 1 head x 128 x 2 B = 40,960 B per token of each, the busiest ceil(B / 8) of
    # them. One sequence of 1,000,000 tokens is 40.96 GB on one chip, not an eighth of it on each of 8.
    d = Deployment("llama3-70b", "tpu-v5e", 64)
    for sequences, busiest in ((1, 1), (7, 1), (8, 1), (9, 2), (64, 8), (65, 9)):
        assert d.kv_bytes_per_chip(sequences, 1_000_000) == busiest * 2 * 80 * 128 * 2 * 1_000_000, sequences
    with pytest.raises(ValueError, match=r"needs 43\.2 GB per chip \(2\.2 GB of weights \+ 41\.0 GB of KV cache\)"):
        report("llama3-70b", "tpu-v5e", 64, batch=1, context_len=1_000_000)
    # The bound's largest batch: as many 8,192-token sequences of one head as fit beside a 64th of the bf16 weights
    # on each chip, times the 8 chips that share the head.
    per_chip = math.floor((16e9 - param_count(get_model("llama3-70b")) * 2 / 64) / (2 * 80 * 128 * 2 * 8192))
    assert max_batch(d, 8192) == 8 * per_chip
    assert decode_step(d, 8 * per_chip, 8192).batch == 8 * per_chip


def test_kv_held_and_read_follow_memory_for_local_global_and_latent_attention():
    windowed = get_model("llama3-8b").with_(sliding_window=1024, global_every=4)
    d = Deployment(windowed, "h100", 2)
    assert d.kv_bytes_per_chip(3, 8192) == pytest.approx(kv_cache_bytes(windowed, 8192, 3) / 2)
    assert decode_step(d, 4, 8192).kv_s == pytest.approx(kv_cache_bytes(windowed, 8192, 4) / 2 / H100.hbm_bandwidth)
    mla = get_model("deepseek-v3")
    assert kv_head_groups(mla) == 1
    copied = Deployment(mla, "h200", 8, weight_dtype="fp8", kv_dtype="fp8", compute_dtype="fp8",
                        kv_placement="replicated")
    assert copied.kv_copies == 8  # one latent per token serves every head: each chip keeps all of it


def test_attention_data_parallel_keeps_whole_attention_weights_and_unreplicated_caches_on_each_chip():
    # Qwen3-235B-A22B on 8 H200 (4 KV heads): tensor parallelism splits every weight 8 ways and replicates each KV head
    # on 2 chips; attention data-parallel holds the attention weights whole and each sequence's cache once.
    tp, dp = Deployment("qwen3-235b-a22b", "h200", 8), Deployment("qwen3-235b-a22b", "h200", 8,
                                                                 attention_data_parallel=True, expert_parallel=True)
    m = get_model("qwen3-235b-a22b")
    attention = m.n_layers * (m.d_model * m.n_heads * m.head_dim * 2 + m.d_model * m.n_kv_heads * m.head_dim * 2) * 2
    assert dp.weight_bytes_per_chip == pytest.approx(param_count(m) * 2 / 8 + attention * 7 / 8)
    assert tp.kv_bytes_per_chip(64, 1000) == pytest.approx(2 * dp.kv_bytes_per_chip(64, 1000))
    assert dp.kv_bytes_per_chip(64, 1000) == pytest.approx(kv_cache_bytes(m, 1000, 64) / 8)
    # Every chip reads its whole attention weights each step, and its share of the experts.
    assert dp.weights_read_per_chip(4096) - tp.weights_read_per_chip(4096) == pytest.approx(attention * 7 / 8)


def test_the_largest_batch_by_hand_and_none_when_the_weights_fill_the_chip():
    # 2 H100: each holds half the bf16 weights and half of each 8,192-token cache (4 of the 8 KV heads): 85.5 GB as
    # the device reports it leaves 15.0 GB free over 1.34 GB per sequence.
    m = get_model("llama3-70b")
    fits = math.floor((H100.hbm_capacity - param_count(m) * 2 / 2) / (kv_cache_bytes(m, 8192, 1) / 2))
    assert fits == 11
    assert max_batch(Deployment("llama3-70b", "h100", 2), 8192) == fits
    assert max_batch(Deployment("llama3-70b", "h100", 1), 8192) == 0
    assert max_batch(Deployment("llama3-70b", "h100", 4, tensor_parallel=2), 8192) == 2 * fits
    with pytest.raises(ValueError, match=rf"does not fit.*largest batch that fits is {fits};"):
        decode_step(Deployment("llama3-70b", "h100", 2), 400, 8192)


@for_each(["prefill", "decode"], ids=str)
def test_a_step_holds_the_weights_plus_its_share_of_the_caches_it_writes_or_reads(phase):
    # One replica, 2-way tensor parallel: each chip keeps half of every cache (4 of the 8 KV heads).
    m, d = get_model("llama3-8b"), _llama8b(2)
    step, held = (prefill(d, 4096, batch=2), kv_cache_bytes(m, 4096, 2)) if phase == "prefill" else \
        (decode_step(d, 4, 1024), kv_cache_bytes(m, 1024, 4))
    assert step.hbm_bytes_per_chip == pytest.approx(param_bytes(m) / 2 + held / 2)


# --- a step's terms, against the sources' bounds and the FLOP counter -------------------------------------------------
def test_one_chip_decode_terms_are_the_sources_bound_less_the_input_embedding_lookup():
    model = get_model("llama3-8b")
    ours = decode_step(Deployment(model, "h100", 1), 8, 1024)
    theirs = decode_step_time(model, "h100", 1, 8, 1024)
    table = model.vocab_size * model.d_model * 2  # bf16 input embedding table: gathered, never streamed
    assert ours.weights_s == pytest.approx(theirs.weight_s - table / H100.hbm_bandwidth)
    assert ours.kv_s == pytest.approx(theirs.kv_s)
    assert ours.matmul_s == pytest.approx(theirs.compute_s * matmul_params(model) / active_param_count(model))
    assert ours.comm_s == 0.0
    # Attention FLOPs hide under the KV read at this shape: the total is the same, up to rounding.
    assert ours.total_s == pytest.approx(theirs.total_s - table / H100.hbm_bandwidth)


def test_prefill_counts_causal_attention_and_matches_the_flop_counter():
    model = get_model("llama3-8b")
    step = prefill(Deployment(model, "h100", 1), 8192, batch=2)
    count = forward_flops(model, 8192, batch=2, skip_masked=True)
    rate = H100.peak_flops("bf16")
    assert step.matmul_s == pytest.approx(count.matmul / rate)
    assert step.attention_s == pytest.approx(count.attention / rate)  # T (T + 1) / 2 pairs, not T^2
    # The sources' prefill_time at MFU 1 counts neither attention nor the embedding difference.
    assert step.flops_s > prefill_time(model, "h100", 1, 8192, 1.0, batch=2) * matmul_params(model) / \
        active_param_count(model)


@for_each([  # (chip, compute, cache, the format attention runs in)
    ("b200", "nvfp4", "fp8", "fp8"),  # no kernel multiplies a cache in 4 bits: FP8 attention over the FP8 cache
    ("b200", "nvfp4", "bf16", "bf16"),
    ("b200", "nvfp4", "nvfp4", "fp8"),  # a 4-bit cache is widened to 8 bits to be multiplied
    ("a100", "bf16", "int4", "bf16"),  # ... and to the activations' format on a chip without FP8
    ("h100", "fp8", "fp8", "fp8"),  # FP8 attention
    ("h100", "fp8", "bf16", "bf16"),  # a BF16 cache is multiplied in BF16
    ("h100", "bf16", "fp8", "bf16"),  # never narrower than the queries the matmuls produce
    ("a100", "bf16", "fp8", "bf16"),  # A100 has no FP8 rate: the cache is widened to the activations'
])
def test_attention_runs_in_the_cache_format_the_chip_multiplies_and_never_narrower_than_the_matmuls(
        chip, compute, cache, attention):
    d = Deployment("llama3-8b", chip, 1, weight_dtype=compute, kv_dtype=cache, compute_dtype=compute)
    assert d.attention_dtype == attention
    # one 4,096-token prompt: causal attention's FLOPs at that format's peak, the matmuls' at theirs, as fast as the
    # format's best measured kernel on the chip runs (a serial engine at mfu 1; the bound keeps the whole peak)
    count = forward_flops(get_model("llama3-8b"), 4096, batch=1, skip_masked=True)
    step, bound = prefill(d, 4096, 1, Efficiency()), prefill(d, 4096, 1, BOUND)
    assert step.attention_s == pytest.approx(count.attention / get_chip(chip).peak_flops(attention))
    assert step.matmul_s == pytest.approx(count.matmul / get_chip(chip).peak_flops(compute) / kernel_ceiling(chip,
                                                                                                             compute))
    assert bound.matmul_s == pytest.approx(count.matmul / get_chip(chip).peak_flops(compute))


def test_prefill_writes_the_cache_in_its_own_dtype():
    # 4,096 new tokens x (32 layers x 8 KV heads x 128 x 2 (K and V) x 1 B in fp8) = 268 MB over 4.8 TB/s
    step = prefill(Deployment("llama3-8b", "h200", 1, kv_dtype="fp8"), 4096)
    assert step.kv_s == pytest.approx(4096 * 32 * 8 * 128 * 2 / 4.8e12)


def test_decode_attention_is_linear_in_whole_keys_from_the_first_and_capped_by_a_sliding_window():
    d = _llama8b()
    attention = {c: step_estimate(d, decode_batch=1, decode_context=c).attention_s for c in (0, 1, 2, 2.6, 3)}
    assert 2 * attention[1] == pytest.approx(attention[2])
    # a fractional mean context attends to the nearest whole number of keys, and at least one
    assert attention[0] == attention[1] > 0 and attention[2.6] == attention[3] == pytest.approx(3 * attention[1])
    windowed = Deployment(get_model("llama3-8b").with_(sliding_window=1024), "h100", 1)
    assert decode_step(windowed, 1, 8192).attention_s == pytest.approx(decode_step(windowed, 1, 1024).attention_s)


def test_a_step_prices_only_what_it_is_given():
    # Left out, the decode context is 0 (no cache to read), the prompts are 1 token long, and nothing is held: no
    # sequence decoding, no prompt token leaves nothing to read, compute or send but the weights to hold.
    d = _llama8b()
    weights = param_bytes(get_model("llama3-8b"))
    for efficiency in (None, Efficiency()):
        empty = step_estimate(d, efficiency=efficiency)
        assert (empty.weights_s, empty.kv_s, empty.matmul_s, empty.attention_s, empty.comm_s) == (0.0,) * 5
        assert empty.hbm_bytes_per_chip == weights
    assert step_estimate(d, efficiency=Efficiency()).total_s == 0.0
    assert step_estimate(d, decode_batch=2).kv_s == 0.0
    assert step_estimate(d, prefill_tokens=5).attention_s == pytest.approx(prefill(d, 1, 5).attention_s, rel=1e-12)
    assert step_estimate(d, held_tokens_each=1000).hbm_bytes_per_chip == weights  # no sequence held
    assert step_estimate(d, held_sequences=3).hbm_bytes_per_chip == weights  # three empty caches
    step = step_estimate(d, decode_batch=4, decode_context=1000, prefill_tokens=100, prefill_len=100)
    assert step.tokens == 104  # 4 decoded tokens + 100 prompt tokens through the weights


def test_tensor_parallel_chips_split_the_flops_and_the_step_may_use_the_engines_share_of_hbm():
    work = dict(decode_batch=4, decode_context=1000, prefill_tokens=100, prefill_len=100)
    one = step_estimate(_llama8b(), **work)
    two = step_estimate(_llama8b(2), **work)
    assert (2 * two.matmul_s, 2 * two.attention_s) == pytest.approx((one.matmul_s, one.attention_s), rel=1e-12)
    assert one.hbm_capacity == H100.hbm_capacity
    assert step_estimate(_llama8b(), efficiency="typical").hbm_capacity == \
        pytest.approx(0.9 * H100.hbm_capacity, rel=1e-12)


def test_a_replicated_cache_writes_each_new_token_on_twice_the_chips_of_a_batch_split_one():
    # LLaMA 3 8B's 8 KV heads on 16 chips: replicated, each head's cache is written on 2 chips.
    work = dict(prefill_tokens=1000, prefill_len=1000)
    replicated = step_estimate(_llama8b(16), **work)
    split = step_estimate(_llama8b(16, kv_placement="batch-split"), **work)
    assert replicated.kv_s == pytest.approx(2 * split.kv_s, rel=1e-12)


@for_each([(1000, 4, 1002.5, 1004), (0, 4, 2.5, 4)], ids=["from-1000-tokens", "from-an-empty-cache"])
def test_decode_time_is_steps_times_the_step_at_the_mean_context(context, steps, mean, longest):
    # 4 steps from 1,000 cached tokens attend to 1,001 ... 1,004 keys (mean 1,002.5); from none, to 1 ... 4 keys
    d = _llama8b()
    step = step_estimate(d, decode_batch=8, decode_context=mean, held_sequences=8, held_tokens_each=longest)
    assert decode_time(d, 8, context, steps) == pytest.approx(steps * step.total_s)


def test_decode_time_checks_the_memory_of_its_last_step_at_the_efficiency_asked_for():
    # 70B on 2 H100 holds 11 sequences of 8,192 tokens; 11 sequences decoding 500 more tokens would not fit.
    d = Deployment("llama3-70b", "h100", 2)
    assert decode_time(d, 11, 7000, 500) > 0
    with pytest.raises(ValueError, match=r"\bbatch 11 at 8,692 tokens of context\b.*\bdoes not fit\b"):
        decode_time(d, 11, 8192, 500)
    assert decode_time(d, 4, 1000, 10, "typical") > decode_time(d, 4, 1000, 10)


def test_replicas_split_the_batch_of_a_decode_and_a_prefill():
    d, one = _llama8b(2, tensor_parallel=1), _llama8b()
    assert decode_step(d, 4, 128).total_s == decode_step(one, 2, 128).total_s
    assert prefill(d, 128, 4).total_s == prefill(one, 128, 2).total_s
    assert decode_time(d, 4, 128, 3) == decode_time(one, 2, 128, 3)


# --- mixtures of experts and the structure of real models -------------------------------------------------------------
def test_moe_decode_reads_the_experts_the_batch_touches_not_all_e():
    moe = as_moe("llama3-8b", 8, 2)
    d = Deployment(moe, "h200", 1)
    one = d.weights_read_per_chip(1)  # one token touches exactly k = 2 experts: the active matmul weights
    assert one == pytest.approx(matmul_params(moe) * 2)
    dense_part = matmul_params(moe.with_(n_experts=1, n_active_experts=1)) - 3 * moe.n_layers * moe.d_model * moe.d_ff
    expert = 3 * moe.n_layers * moe.d_model * moe.d_ff * 2
    assert d.weights_read_per_chip(4) == pytest.approx(dense_part * 2 + 8 * (1 - (6 / 8) ** 4) * expert +
                                                       moe.n_layers * moe.d_model * 8 * 2)
    assert d.weights_read_per_chip(10_000) == pytest.approx(dense_part * 2 + 8 * expert +
                                                            moe.n_layers * moe.d_model * 8 * 2)
    assert decode_step(d, 1, 1024).weights_s < decode_step(d, 64, 1024).weights_s


def test_moe_reads_shared_experts_and_dense_layers_always_and_routed_experts_as_touched():
    v3 = get_model("deepseek-v3")
    d = Deployment(v3, "h200", 8, weight_dtype="fp8", kv_dtype="fp8", compute_dtype="fp8")
    expert = 3 * v3.d_model * v3.d_ff  # parameters of one routed expert in one layer
    assert d.weights_read_per_chip(1) == pytest.approx(matmul_params(v3) / 8)  # one token: exactly its k experts
    every = matmul_params(v3) + v3.n_moe_layers * (v3.n_experts - v3.n_active_experts) * expert
    assert d.weights_read_per_chip(1e6) == pytest.approx(every / 8)
    assert offline_throughput("mixtral-8x7b", "h100", 2, 1000, 1000, weight_dtype="fp8", kv_dtype="fp8",
                              compute_dtype="fp8") > 0


def test_a_mixture_of_experts_bound_reads_no_more_experts_than_the_lumpy_steps_it_stands_for():
    # Continuous batching mixes B decodes with the prompts that arrive, and prompts come whole: a share pi of the steps
    # carries a lump of L prompt tokens, the rest none. The experts T tokens touch grow slower than T, so one averaged
    # step of B + pi L tokens would touch more experts than those steps touch on average (Qwen3-235B, 128 experts,
    # 8 per token: B = 4 touch about 29, B + pi L = 104 nearly all 128); the bound must read no more than they do.
    d = Deployment("qwen3-235b-a22b", "h200", 8, weight_dtype="fp8", kv_dtype="fp8", compute_dtype="fp8")
    b, lump, share = 4, 2000, 0.05
    lumpy = (1 - share) * d.weights_read_per_chip(b) + share * d.weights_read_per_chip(b + lump)
    step = step_estimate(d, decode_batch=b, decode_context=3000, prefill_tokens=share * lump, prefill_len=lump,
                         held_sequences=b, held_tokens_each=3000, efficiency=None)
    assert step.weights_s * d.chip.hbm_bandwidth <= lumpy
    prompt_only = step_estimate(d, prefill_tokens=lump, prefill_len=lump, efficiency=None)  # a prefill reads its own
    assert prompt_only.weights_s * d.chip.hbm_bandwidth == pytest.approx(d.weights_read_per_chip(lump), rel=1e-12)


def _published_model(stem):
    from scaling_lib.models import from_hf_config
    from tests import REPO
    return from_hf_config(REPO / "book" / "data" / "hf_configs" / f"{stem}.json")


@for_each([1024, 65536], ids=str)
def test_a_hybrids_decode_reads_and_writes_its_state_once_per_step_whatever_the_context(context):
    # Nemotron-H-56B: per sequence 54 Mamba-2 states (256 heads x 64 x 256, and 3 x 20,480 of convolution window),
    # bf16, read and written back each step; keys and values only in its 10 attention layers (8 KV heads of 128).
    model = _published_model("nemotron-h-56b")
    d = Deployment(model, "h200", 8)
    state = 54 * (256 * 64 * 256 + 3 * (16384 + 2 * 8 * 256)) * 2
    kv = context * 2 * 10 * 8 * 128 * 2
    step = decode_step(d, 8, context, BOUND)
    assert step.kv_s * get_chip("h200").hbm_bandwidth == pytest.approx(8 * (kv + 2 * state) / 8, rel=1e-12)


def test_sparse_attention_reads_every_indexer_key_but_only_the_top_k_latents():
    # DeepSeek-V3.2 (fp8 weights) at 100,000 tokens on 8 H200 (the latent replicated on each chip): per layer every
    # token's 132-byte indexer key and the 2,048 selected tokens' 1,152-byte latents
    model = _published_model("deepseek-v3.2")
    d = Deployment(model, "h200", 8, weight_dtype="fp8")
    step = decode_step(d, 8, 100_000, BOUND)
    read = 61 * (100_000 * 132 + 2048 * (512 + 64) * 2)
    assert step.kv_s * get_chip("h200").hbm_bandwidth == pytest.approx(8 * read, rel=1e-12)


def test_a_mixed_precision_checkpoint_reads_each_group_in_its_own_format():
    # gpt-oss-120b at batch 1 reads 4 of 128 experts per layer in MXFP4, and attention, router and head in bf16
    from scaling_lib.models import read_hf_config
    from tests import REPO
    read = read_hf_config(REPO / "book" / "data" / "hf_configs" / "gpt-oss-120b.json")
    d = Deployment(read.model, "h200", 1, weight_dtype=read.weight_dtype)
    experts = 36 * 4 * 3 * 2880 * 2880 * 4.25 / 8
    attention = 36 * 2880 * 64 * (64 + 8 + 8 + 64) * 2
    router, head = 36 * 2880 * 128 * 2, 201088 * 2880 * 2
    assert d.weights_read_per_chip(1) == pytest.approx(experts + attention + router + head, rel=1e-12)


# --- the collectives a step pays, by hand -----------------------------------------------------------------------------
@for_each([(dict(weight_dtype="fp8", kv_dtype="fp8", compute_dtype="fp8"),
                                                     64, 4096), ({}, 16, 1024)], ids=["fp8-batch-64", "bf16-batch-16"])
def test_megatron_decode_pays_two_all_reduces_per_layer_on_the_switch(dtypes, batch, context):
    # LLaMA-3-70B on 8 H100: two all-reduces of [B, 8,192] activations in bf16 per layer, 80 layers, each its latency
    # plus its bandwidth term (collectives.collective_time). tp = 8 = K: every chip holds one whole KV head, so the
    # batch is not split and no all-to-all is added.
    step = decode_step(Deployment("llama3-70b", "h100", 8, **dtypes), batch, context, Efficiency())
    one = collective_time("all-reduce", batch * 8192 * 2, "h100", 8)
    assert step.comm_s == pytest.approx(80 * 2 * (one.latency_s + one.bandwidth_s))
    assert step.comm_latency_s == pytest.approx(80 * 2 * one.latency_s)


def test_the_bounds_collectives_are_the_line_rate_floor_and_one_nvlink_step():
    # 8 H100 behind NVSwitch with in-switch reduction: an all-reduce must move the array each way, V / 450 GB/s, no
    # faster; the shortest latency is one NVLink step. LLaMA 3 70B, batch 16: V = 16 x 8192 x 2 B, two per layer.
    d = Deployment("llama3-70b", "h100", 8)
    step = decode_step(d, 16, 1024)
    assert step.comm_bandwidth_s == pytest.approx(80 * 2 * 16 * 8192 * 2 / 450e9, rel=1e-6)
    zero = collective_time("all-reduce", 0.0, "h100", 8)
    assert step.comm_latency_s == pytest.approx(80 * 2 * zero.bound_s, rel=1e-12) and zero.bound_s < zero.latency_s
    assert step.comm_latency_s < decode_step(d, 16, 1024, Efficiency()).comm_latency_s / 10  # NCCL's pick at peak


@for_each([
    # 16-way tensor parallel over LLaMA-3-70B's 8 KV heads: each head's 2 chips split the batch between them
    ("llama3-70b", "ironwood", 16, 32, 1024, 64, 2),
    # LLaMA-2-13B with K = 8 KV heads on 10 chips: each KV head is shared by 10 / gcd(8, 10) = 5 chips
    ("llama2-13b-kv8", "tpu-v5e", 10, 20, 1024, 40, 5),
    # as above at batch 2,000: [2000, 40 heads, 128] bf16 = 20.5 MB over 5 chips is bandwidth-bound
    ("llama2-13b-kv8", "tpu-v5e", 10, 2000, 128, 40, 5),
], ids=["70b-ironwood-16", "13b-v5e-10", "13b-v5e-10-bandwidth-bound"])
def test_a_batch_split_cache_adds_two_all_to_alls_of_the_queries_per_layer(model, chip, n, batch, context, n_heads,
                                                                            group):
    # the chips sharing a head swap queries and outputs, [B, N, H] in bf16, twice per layer; a replicated cache does not
    m = get_model("llama2-13b").with_(n_kv_heads=8) if model == "llama2-13b-kv8" else get_model(model)
    split = decode_step(Deployment(m, chip, n), batch, context, Efficiency())
    replicated = decode_step(Deployment(m, chip, n, kv_placement="replicated"), batch, context, Efficiency())
    swap = collective_time("all-to-all", batch * n_heads * 128 * 2, chip, group)
    assert split.comm_s - replicated.comm_s == pytest.approx(m.n_layers * 2 * (swap.bandwidth_s + swap.latency_s))
    assert split.comm_bandwidth_s - replicated.comm_bandwidth_s == pytest.approx(m.n_layers * 2 * swap.bandwidth_s)
    if batch == 2000:  # the row chosen to move more than its latency's worth
        assert swap.bandwidth_s > swap.latency_s


def test_a_pope_layout_moves_its_activations_in_the_activation_dtype():
    # 2D weight-stationary moves only activations: fp8 activations (1 byte) halve the bandwidth part of the
    # prefill's collectives against bf16 (2 bytes); the per-collective latency is the same.
    steps = {act: step_estimate(Deployment("llama3-70b", "tpu-v5e", 16, ffn_layout="2d-ws", activation_dtype=act),
                                prefill_tokens=8192, prefill_len=8192, efficiency=BOUND)
             for act in ("bf16", "fp8")}
    bandwidth = {act: step.comm_s - step.comm_latency_s for act, step in steps.items()}
    assert bandwidth["fp8"] == pytest.approx(bandwidth["bf16"] / 2, rel=1e-9)
    assert steps["fp8"].comm_latency_s == steps["bf16"].comm_latency_s > 0


def test_experts_and_data_parallel_attention_trade_the_all_reduces_for_two_all_to_alls_per_moe_layer():
    # Per MoE layer two all-to-alls of the k routed copies of every token's hidden state (dispatch and combine); with
    # attention data-parallel alone, an all-gather and a reduce-scatter of the tokens; expert parallelism alone keeps
    # Megatron's two all-reduces.
    m, tokens = get_model("qwen3-235b-a22b"), 2048
    hidden = tokens * m.d_model * 2
    ep_dp = Deployment(m, "h200", 8, expert_parallel=True, attention_data_parallel=True)
    step = step_estimate(ep_dp, prefill_tokens=tokens, prefill_len=tokens, efficiency=Efficiency())
    a2a = collective_time("all-to-all", hidden * m.n_active_experts, "h200", 8)
    assert step.comm_s == pytest.approx(2 * m.n_moe_layers * (a2a.bandwidth_s + a2a.latency_s))
    dp = Deployment(m, "h200", 8, attention_data_parallel=True)
    gather, scatter = (collective_time(op, hidden, "h200", 8) for op in ("all-gather", "reduce-scatter"))
    assert step_estimate(dp, prefill_tokens=tokens, prefill_len=tokens, efficiency=Efficiency()).comm_s == \
        pytest.approx(m.n_layers * (gather.total_s + scatter.total_s))
    ep, plain = Deployment(m, "h200", 8, expert_parallel=True), Deployment(m, "h200", 8)
    assert step_estimate(ep, prefill_tokens=tokens, prefill_len=tokens).comm_s == \
        step_estimate(plain, prefill_tokens=tokens, prefill_len=tokens).comm_s


# --- efficiencies: what each one stretches, and which one a chip takes ------------------------------------------------
def test_efficiency_names_resolve_to_the_bound_and_the_calibrated_values():
    assert resolve_efficiency(None) is BOUND and resolve_efficiency("bound") is BOUND
    assert BOUND == Efficiency(overlap=True)  # the bound: every rate at peak, everything overlapped
    assert resolve_efficiency("typical") is TYPICAL
    custom = Efficiency(mfu=0.5)
    assert resolve_efficiency(custom) is custom
    # every rate at peak and any finite latency scale are accepted
    e = Efficiency(mfu=1, hbm=1, network=1, latency=1e9, overhead_s=0)
    assert (e.mfu, e.hbm, e.network, e.latency, e.overhead_s, e.overlap) == (1, 1, 1, 1e9, 0, False)


def test_half_the_hbm_rate_doubles_the_reads_and_half_the_mfu_doubles_the_flops():
    d = _llama8b()
    work = dict(decode_batch=4, decode_context=1000, prefill_tokens=100, prefill_len=100)
    # (at mfu 1 the matmuls run at the format's kernel ceiling, kernels.kernel_ceiling; 0.5 and 0.25 are below it)
    peak = step_estimate(d, **work, efficiency=Efficiency(mfu=0.5))
    slow_hbm = step_estimate(d, **work, efficiency=Efficiency(mfu=0.5, hbm=0.5))
    slow_mfu = step_estimate(d, **work, efficiency=Efficiency(mfu=0.25))
    assert (slow_hbm.kv_s, slow_hbm.weights_s) == pytest.approx((2 * peak.kv_s, 2 * peak.weights_s), rel=1e-12)
    assert (slow_hbm.matmul_s, slow_hbm.attention_s) == (peak.matmul_s, peak.attention_s)
    assert (slow_mfu.matmul_s, slow_mfu.attention_s) == pytest.approx((2 * peak.matmul_s, 2 * peak.attention_s),
                                                                      rel=1e-12)
    assert (slow_mfu.kv_s, slow_mfu.weights_s) == (peak.kv_s, peak.weights_s)
    # the activations between the matmuls: every token of the step, streamed at the weight-streaming rate
    assert peak.elementwise_s == pytest.approx(104 * d.elementwise_bytes_per_token / d.chip.hbm_bandwidth, rel=1e-12)
    assert (slow_hbm.elementwise_s, slow_mfu.elementwise_s) == pytest.approx((2 * peak.elementwise_s,
                                                                              peak.elementwise_s), rel=1e-12)
    # none in the bound (an engine may fuse them into the matmuls) nor on a TPU (XLA does)
    tpu = Deployment("llama3-8b", "tpu-v5e", 1)
    assert step_estimate(d, **work, efficiency=BOUND).elementwise_s == 0.0
    assert step_estimate(tpu, **work, efficiency=Efficiency()).elementwise_s == 0.0
    # the bound composes without the host's overhead
    overlapped = Efficiency(overlap=True, overhead_s=1e-3)
    assert step_estimate(d, decode_batch=4, decode_context=1000, efficiency=overlapped).overhead_s == 0.0


def test_the_network_stretches_only_the_bandwidth_part_of_the_collectives_and_the_latency_scale_only_the_latency():
    d = Deployment("llama3-70b", "ironwood", 8)
    at_peak = decode_step(d, 8, 1024, Efficiency())
    assert 0 < at_peak.comm_latency_s < at_peak.comm_s  # [8, D] all-reduces: latency plus a small bandwidth term
    slow = decode_step(d, 8, 1024, Efficiency(network=1e-6))  # a million times slower bandwidth
    assert slow.comm_latency_s == pytest.approx(at_peak.comm_latency_s)
    assert slow.comm_bandwidth_s == pytest.approx(1e6 * at_peak.comm_bandwidth_s)
    later = decode_step(d, 8, 1024, Efficiency(latency=3.0))  # three times the sourced latency
    assert later.comm_latency_s == pytest.approx(3 * at_peak.comm_latency_s)
    assert later.comm_bandwidth_s == pytest.approx(at_peak.comm_bandwidth_s)


def test_a_step_on_a_tpu_takes_the_tpu_half_of_the_calibration_and_a_gpu_the_gpu_half():
    tpu = step_estimate(_llama8b(chip="tpu-v5e"), decode_batch=1, decode_context=8, efficiency="typical")
    gpu = step_estimate(_llama8b(), decode_batch=1, decode_context=8, efficiency="typical")
    # one decoding sequence: each half's host overhead per step, plus the GPU host's cost of that sequence
    assert (tpu.overhead_s, gpu.overhead_s) == (TYPICAL.tpu.overhead_s, TYPICAL.gpu.overhead_s + TYPICAL.gpu.sequence_s)


# --- the engine's settings: its share of HBM and its cap on sequences bind the estimate, not the bound ----------------
def _fp8_llama3_8b(**settings):
    return Deployment("llama3-8b", "h100", 1, weight_dtype="fp8", kv_dtype="fp8", compute_dtype="fp8", **settings)


def _fp8_sequences_that_fit(d, hbm_bytes):
    # LLaMA-3-8B in fp8 on one H100 at 128/128: 8.0 GB of weights leave room for far more than 2,048 sequences.
    return int((hbm_bytes - d.weight_bytes_per_chip) // d.kv_bytes_per_chip(1, 128 + 64))


SMALL_ENGINE = dict(memory_utilization=0.2, max_sequences=100_000)


@for_each([
    ({}, None, lambda d: _fp8_sequences_that_fit(d, d.chip.hbm_capacity)),
    ({}, "typical", lambda d: 2048),  # max_sequences caps it
    (SMALL_ENGINE, "typical", lambda d: _fp8_sequences_that_fit(d, 0.2 * d.chip.hbm_capacity)),
    (SMALL_ENGINE, None, lambda d: _fp8_sequences_that_fit(d, d.chip.hbm_capacity)),
], ids=["the-bound-fills-all-of-hbm", "typical-caps-at-max-sequences", "typical-keeps-to-memory-utilization",
        "the-bound-ignores-the-engine-settings"])
def test_the_offline_batch_is_every_sequence_that_fits_where_the_engine_lets_it(settings, efficiency, batch):
    d = _fp8_llama3_8b(**settings)
    assert offline_estimate(d, 128, 128, efficiency).batch == batch(d)


def test_the_engine_cap_binds_an_estimate_and_the_bound_takes_a_batch_over_it():
    d = Deployment("llama3-8b", "h100", 1, weight_dtype="fp8", kv_dtype="fp8", max_sequences=4)
    assert decode_step(d, 8, 128).batch == 8
    with pytest.raises(ValueError, match=r"^batch 8 at 128 tokens of context on llama3-8b\b.*exceed max_sequences=4"):
        decode_step(d, 8, 128, "typical")
    assert offline_estimate(d, 100, 100, slots=5).batch == 5
    with pytest.raises(ValueError, match=r"\b5 slots of 100 \+ 100 tokens on llama3-8b\b.*\bmax_sequences=4\b"):
        offline_estimate(d, 100, 100, "typical", slots=5)


def test_offline_throughput_passes_its_settings_to_the_deployment():
    one = offline_throughput("llama3-8b", "h100", 1, 1000, 1000)
    assert offline_throughput("llama3-8b", "h100", 8, 1000, 1000, tensor_parallel=1) == pytest.approx(8 * one)
    replicated = Deployment("llama3-70b", "ironwood", 16, kv_placement="replicated")
    assert offline_throughput("llama3-70b", "ironwood", 16, 1000, 1000, kv_placement="replicated") == \
        pytest.approx(offline_estimate(replicated, 1000, 1000).output_tokens_per_s)
    assert offline_throughput("llama3-8b", "h100", 1, 128, 128, efficiency="typical", max_sequences=8) < \
        offline_throughput("llama3-8b", "h100", 1, 128, 128, efficiency="typical")
    assert offline_throughput("llama3-8b", "h100", 1, 128, 128, memory_utilization=0.2) == \
        offline_throughput("llama3-8b", "h100", 1, 128, 128)  # the bound ignores the engine's share


# --- the offline steady state -----------------------------------------------------------------------------------------
def test_an_offline_iteration_is_the_decode_of_its_batch_plus_the_prefill_of_the_requests_it_replaces():
    # 100 tokens in, 6 out, 5 slots: the batch decodes at the mean context 100 + 6 / 2 = 103, and 5 / (6 - 1) = 1
    # request of 100 prompt tokens is prefilled per iteration. Reading, FLOPs and KV traffic add up; the weights are
    # read once; HBM holds the 5 caches at the mean context.
    d = _llama8b()
    run = offline_estimate(d, 100, 6, slots=5)
    decode, first = decode_step(d, 5, 103), prefill(d, 100, 1)
    assert (run.batch, run.step.batch, run.step.tokens, run.mean_context, run.input_len) == (5, 5, 5 + 100, 103, 100)
    for term in ("kv_s", "matmul_s", "attention_s"):
        assert getattr(run.step, term) == pytest.approx(getattr(decode, term) + getattr(first, term), rel=1e-12)
    assert run.step.weights_s == pytest.approx(decode.weights_s, rel=1e-12)
    assert run.step.hbm_bytes_per_chip == pytest.approx(decode.hbm_bytes_per_chip, rel=1e-12)


def test_offline_prefill_charges_the_causal_attention_of_whole_prompts():
    # One iteration prefills batch x 8,192 / (2 - 1) prompt tokens; each prompt's causal attention alone is
    # 4 L N H T (T + 1) / 2 = 4 x 32 x 32 x 128 x 8,192 x 8,193 / 2 FLOPs for LLaMA-3-8B (H100: 989e12 FLOP/s).
    estimate = offline_estimate(_llama8b(), 8192, 2)
    per_prompt = 4 * 32 * 32 * 128 * 8192 * 8193 / 2
    assert estimate.step.attention_s >= estimate.batch * per_prompt / 989e12


def test_output_tokens_per_s_counts_the_first_token_from_the_prefill():
    # With O = 2 each finishing request produced 2 tokens but decoded only 1 of them: the factor O / (O - 1) = 2.
    estimate = offline_estimate(_llama8b(), 128, 2)
    assert estimate.output_tokens_per_s == pytest.approx(estimate.batch * 2 / estimate.step.total_s)


def test_an_offline_run_holds_its_batch_of_caches_at_the_mean_context_and_has_no_room_for_one_more():
    # LLaMA 3 8B on one H100, 1,000 tokens in and 200 out: each of the batch's caches holds on average
    # 1,000 + 200 / 2 = 1,100 tokens of 131,072 B (32 layers x 8 KV heads x 128 x 2 x 2 B). The batch is the largest
    # that fits, so the step's HBM is within the engine's share and one more such cache would not fit.
    run = offline_estimate(_llama8b(), 1000, 200, "typical")
    one_more = 1100 * 131_072
    assert run.step.hbm_bytes_per_chip <= run.step.hbm_capacity < run.step.hbm_bytes_per_chip + one_more


def test_an_offline_estimate_keeps_the_efficiency_it_was_priced_at():
    d = _llama8b()
    assert offline_estimate(d, 128, 128, "typical", slots=8).efficiency is TYPICAL
    assert offline_estimate(d, 128, 128, slots=8).efficiency is BOUND
    # the typical estimate's overhead is in the step: the bound's is not
    # (with the launches and sequences of a step that holds prompt tokens)
    assert offline_estimate(d, 128, 128, "typical", slots=8).step.overhead_s > TYPICAL.gpu.overhead_s > 0


def test_replicas_multiply_offline_throughput_and_each_runs_a_whole_batch():
    one = offline_estimate(_llama8b(), 1000, 100)
    two = offline_estimate(_llama8b(2, tensor_parallel=1), 1000, 100)
    assert two.batch == one.batch
    assert two.output_tokens_per_s == pytest.approx(2 * one.output_tokens_per_s, rel=1e-12)


# --- a refusal that names a number names one that works ---------------------------------------------------------------
def test_a_refused_decode_step_names_the_largest_batch_that_does_fit_at_that_efficiency():
    # The message's "largest batch that fits" is checked by trying it: that batch runs at the efficiency asked for
    # (the estimate leaves 10% of HBM to the engine), one more sequence is refused.
    d = Deployment("llama3-70b", "h100", 8)
    with pytest.raises(ValueError, match="batch 1024 at 8,192 tokens of context") as refused:
        decode_step(d, 1024, 8192, "typical")
    largest = int(re.search(r"largest batch that fits is (\d+)", str(refused.value)).group(1))
    assert decode_step(d, largest, 8192, "typical").batch == largest
    with pytest.raises(ValueError, match="does not fit"):
        decode_step(d, largest + 1, 8192, "typical")


def test_refused_offline_slots_name_how_many_do_fit_and_the_remedies():
    d = Deployment("llama3-70b", "h100", 8)
    with pytest.raises(ValueError, match="quantize the weights or the KV cache, or add chips") as refused:
        offline_estimate(d, 1000, 1000, "typical", slots=2000)
    fit = int(re.search(r"at most (\d+) fit", str(refused.value)).group(1))
    assert offline_estimate(d, 1000, 1000, "typical", slots=fit).batch == fit
    with pytest.raises(ValueError, match="does not fit"):
        offline_estimate(d, 1000, 1000, "typical", slots=fit + 1)


# --- the bound against published measurements -------------------------------------------------------------------------
@for_each(trtllm_rows(), ids=lambda r: r.label)
def test_offline_throughput_bound_is_never_beaten_by_tensorrt_llm_with_an_fp8_kv_cache(row):
    bound = offline_throughput(row.model, row.gpu, row.n_gpus, row.input_len, row.output_len, weight_dtype="fp8",
                               kv_dtype="fp8", compute_dtype="fp8", tensor_parallel=row.tensor_parallel)
    assert bound >= row.output_tokens_per_s
    typical = offline_throughput(row.model, row.gpu, row.n_gpus, row.input_len, row.output_len,
                                 weight_dtype="fp8", kv_dtype="fp8", compute_dtype="fp8", efficiency="typical")
    assert typical < bound


def test_with_a_bf16_kv_cache_the_8b_rows_beat_the_bound_so_the_engine_stored_fewer_bytes():
    beaten = [c.label for c in (compare(row, None, kv_dtype="bf16") for row in trtllm_rows()) if c.ratio < 1]
    assert beaten and all(label.startswith("llama3-8b") for label in beaten)
    # the long-output 8B rows, on both GPUs: KV-bound, and faster than a bf16 cache allows even perfectly overlapped
    assert len(beaten) >= 5 and {"h100", "h200"} <= {label.split()[1] for label in beaten}


@for_each(pope_rows(), ids=lambda r: r.label)
def test_pope_measured_latencies_are_at_least_the_bound(row):
    d = pope_deployment(row)
    if row.phase == "prefill":
        bound = prefill(d, row.context_len, row.batch).total_s
    else:
        bound = sum(decode_step(d, row.batch, row.context_len + j).total_s for j in range(1, row.decode_steps + 1))
        assert decode_time(d, row.batch, row.context_len, row.decode_steps) == pytest.approx(bound, rel=1e-3)
    assert row.latency_s >= bound
    # MFU recomputes from the latency (Pope et al.: 2 x params x tokens / (latency x chips x peak)), within 2 points.
    mfu = 2 * param_count(get_model(row.model)) * row.tokens / (
        row.latency_s * row.chips * get_chip(row.chip).peak_flops("bf16"))
    assert mfu == pytest.approx(row.mfu, abs=0.02)


def test_pope_low_latency_decode_step_is_about_29_ms_against_a_bound_near_10_ms():
    row = [r for r in pope_rows() if r.label == "palm-540b low latency decode"][0]
    step = decode_step(pope_deployment(row), row.batch, row.context_len + 1)
    assert row.latency_s / row.decode_steps == pytest.approx(28.4e-3, rel=0.01)
    assert 7e-3 < step.total_s < 12e-3 and step.bound == "weights"


def test_typical_sits_between_the_bound_and_the_measurement_on_average():
    bound = summarize(compare(row, BOUND) for row in trtllm_rows() + pope_rows())
    typical = summarize(compare(row, TYPICAL) for row in trtllm_rows() + pope_rows())
    assert bound.median > 1.5 and abs(math.log(typical.median)) < abs(math.log(bound.median))
    assert offline_estimate(_llama8b(), 128, 2048, "typical").efficiency == TYPICAL


# --- bad input: a ValueError naming the argument and the fix ----------------------------------------------------------
def _tpu(**kwargs):
    return Deployment(**{"model": "llama3-70b", "chip": "tpu-v5e", "n_chips": 8, **kwargs})


def _offline8b(**kwargs):
    return offline_estimate(_llama8b(), **dict(input_len=128, output_len=128) | kwargs)


BAD_INPUT = {
    # the layout: tensor parallelism, meshes, placements and parallel modes
    "heads-do-not-split": (lambda: Deployment("llama3-70b", "h100", 3),
                           r"tensor_parallel=3 does not divide n_heads=64.*use one of \[1, 2, 4"),
    "heads-list-every-divisor": (lambda: Deployment("llama3-8b", "tpu-v5e", 48),
                                 re.escape("use one of [1, 2, 4, 8, 16, 32] (or a Pope et al. layout such as "
                                           "ffn_layout='2d-ws' on a TPU torus)")),
    # 64 is a square: its root 8 is listed once among the divisors
    "heads-list-each-divisor-once": (lambda: Deployment("llama3-70b", "h100", 6),
                                     r"\bn_heads=64 of llama3-70b: Megatron tensor parallelism gives each chip whole "
                                     r"query heads\b.*" + re.escape("use one of [1, 2, 4, 8, 16, 32, 64]")),
    "replicas-unequal": (lambda: Deployment("llama3-70b", "h100", 8, tensor_parallel=3),
                         r"tensor_parallel=3 does not divide n_chips=8\b.*\bidentical replicas\b.*\bpick a divisor of "
                         r"8$"),
    "mesh-wrong-size": (lambda: Deployment("llama3-70b", "tpu-v5e", 8, mesh_shape=(2, 2)),
                        r"\bholds 4 chips, not tensor_parallel=8\b.*\bpick axes whose product is 8$"),
    "mesh-zero": (lambda: _tpu(mesh_shape=(0, 8)), r"\bmesh_shape\b"),
    # a 2D torus has no third axis of links to lay a third mesh axis on
    "mesh-3-axes-on-2d-torus": (lambda: _tpu(mesh_shape=(2, 2, 2), ffn_layout="2d-ws"),
                                r"^mesh_shape \(2, 2, 2\) lays chips along 3 axes and tpu-v5e's torus has 2\b.*"
                                r"\be\.g\. mesh_shape=\(2, 4\)$"),
    "ffn-layout-unknown": (lambda: _tpu(ffn_layout="3d"), r"\bffn_layout\b"),
    "pope-layout-on-a-gpu": (lambda: Deployment("llama3-70b", "h100", 8, ffn_layout="2d-ws"),
                             r"ffn_layout='2d-ws' is one of Pope.*\bh100 is not a TPU torus \(NVLink\): use "
                             r"ffn_layout='1d-ws' \(Megatron tensor parallelism\)$"),
    "too-many-chips": (lambda: _tpu(n_chips=2**30, tensor_parallel=8),
                       r"^n_chips=1,073,741,824 is more than 1,048,576\b"),
    "group-past-any-slice": (lambda: Deployment("palm-540b", "tpu-v4", 2**15, ffn_layout="2d-ws"),
                             r"\btensor_parallel=32768\) chips in one model copy: no ICI slice or NVLink domain\b"
                             r".*\bat most 16,384 here\b.*\bserve the rest as replicas$"),
    # refused before any mesh is searched (a search over every divisor up to n would not end)
    "group-of-2-to-the-40": (lambda: Deployment("palm-540b", "tpu-v4", 2**40, ffn_layout="2d-ws"),
                             r"tensor_parallel=1099511627776.*pass tensor_parallel"),
    # no source gives MI300X's network between nodes: a copy of the model stays in one node of 8
    "mi300x-across-nodes": (lambda: _tpu(chip="mi300x", n_chips=16),
                            r"^tensor_parallel=16 spans 2 mi300x nodes of 8\b.*\btensor_parallel=8 or fewer\b"),
    "kv-placement-unknown": (lambda: Deployment("llama3-70b", "h100", 8, kv_placement="sharded"),
                             r"\bunknown kv_placement 'sharded'"),
    "expert-parallel-dense": (lambda: Deployment("llama3-70b", "h100", 8, expert_parallel=True),
                              r"expert_parallel=True .* llama3-70b has 1 expert"),
    "expert-parallel-too-wide": (lambda: Deployment("mixtral-8x7b", "tpu-v5e", 16, expert_parallel=True),
                                 r"mixtral-8x7b has 8 expert\(s\) and tensor_parallel=16"),
    "attention-data-parallel-not-bool": (lambda: Deployment("mixtral-8x7b", "h100", 8, attention_data_parallel="yes"),
                                         r"attention_data_parallel must be True or False, got 'yes'"),
    "no-native-fp8": (lambda: Deployment("llama3-70b", "tpu-v5e", 16, compute_dtype="fp8"),
                      "tpu-v5e has no native fp8"),
    # the engine's settings
    "memory-utilization-zero": (lambda: _llama8b(memory_utilization=0),
                                r"\bmemory_utilization\b.*\bthe share of HBM the engine may use\b"),
    "memory-utilization-above-one": (lambda: _llama8b(memory_utilization=1.5), r"\bmemory_utilization\b"),
    "max-sequences-zero": (lambda: _llama8b(max_sequences=0), r"\bmax_sequences\b"),
    "max-sequences-fraction": (lambda: _llama8b(max_sequences=2.5), r"\bmax_sequences\b"),
    # efficiencies
    "mfu-above-one": (lambda: Efficiency(mfu=1.5), r"Efficiency.mfu must be a fraction of peak in \(0, 1\]"),
    "mfu-zero": (lambda: Efficiency(mfu=0.0), r"Efficiency\.mfu\b"),
    "hbm-zero": (lambda: Efficiency(hbm=0.0), r"Efficiency\.hbm\b"),
    "network-zero": (lambda: Efficiency(network=0.0), r"Efficiency\.network\b"),
    "mfu-bool": (lambda: Efficiency(mfu=True), r"\bEfficiency\.mfu must be a fraction of peak\b"),
    "hbm-string": (lambda: Efficiency(hbm="0.5"), r"\bEfficiency\.hbm must be a fraction of peak\b"),
    "network-above-one": (lambda: Efficiency(network=1.01), r"\bEfficiency\.network must be a fraction of peak\b"),
    "latency-zero": (lambda: Efficiency(latency=0), r"Efficiency\.latency\b"),
    "latency-infinite": (lambda: Efficiency(latency=math.inf), r"Efficiency\.latency\b"),
    "latency-bool": (lambda: Efficiency(latency=True),
                     r"\bEfficiency\.latency must be a positive finite scale\b.*\(1\.0: as sourced\)"),
    "latency-string": (lambda: Efficiency(latency="1"), r"\bEfficiency\.latency\b"),
    "overhead-negative": (lambda: Efficiency(overhead_s=-1e-3), r"Efficiency\.overhead_s\b"),
    "overhead-bool": (lambda: Efficiency(overhead_s=True),
                      r"\bEfficiency\.overhead_s must be non-negative finite seconds per step\b"),
    "overhead-string": (lambda: Efficiency(overhead_s="0"), r"\bEfficiency\.overhead_s\b"),
    "overhead-infinite": (lambda: Efficiency(overhead_s=math.inf), r"\bEfficiency\.overhead_s\b"),
    "overlap-int": (lambda: Efficiency(overlap=1), r"Efficiency\.overlap\b"),
    "overlap-none": (lambda: Efficiency(overlap=None),
                     r"\bEfficiency\.overlap must be True \(the bound's composition\) or False \(serial\)"),
    "efficiency-unknown": (lambda: offline_throughput("llama3-8b", "h100", 1, 128, 128, efficiency="fast"),
                           "efficiency must be None"),
    # a model name where a Deployment is wanted: the likely mix-up with inference.decode_step_time
    **{f"{name}-of-a-model-name": (call, rf"^deployment must be an estimate\.Deployment \(estimate\.{name}'s first "
                                         r"argument\), got 'llama3-70b'.*inference\.decode_step_time\(model, chip")
       for name, call in (("decode_step", lambda: decode_step("llama3-70b", 32, 8192)),
                          ("prefill", lambda: prefill("llama3-70b", 8192)),
                          ("decode_time", lambda: decode_time("llama3-70b", 32, 8192, 4)),
                          ("step_estimate", lambda: step_estimate("llama3-70b", decode_batch=1)),
                          ("max_batch", lambda: max_batch("llama3-70b", 8192)),
                          ("offline_estimate", lambda: offline_estimate("llama3-70b", 128, 128)))},
    # counts
    "decode-context-zero": (lambda: decode_step(_llama8b(), 1, 0), r"\bcontext_len\b"),
    "decode-batch-zero": (lambda: decode_step(_llama8b(), 0, 8), r"\bbatch\b"),
    "prefill-prompt-zero": (lambda: prefill(_llama8b(), 0), r"\bprompt_len\b"),
    "decode-time-no-steps": (lambda: decode_time(_llama8b(), 1, 8, 0), r"\bsteps\b"),
    "decode-time-context-negative": (lambda: decode_time(_llama8b(), 1, -1, 2), r"\bcontext_len\b"),
    "decode-time-context-fraction": (lambda: decode_time(_llama8b(), 8, 0.5, 16),
                                     r"context_len must be a non-negative integer, got 0\.5"),
    "max-batch-context-zero": (lambda: max_batch(Deployment("llama3-70b", "h100", 2), 0), r"\bcontext_len\b"),
    **{f"step-estimate-{name}": (lambda name=name: step_estimate(_llama8b(), **{name: -1}), rf"\b{name}\b")
       for name in ("decode_batch", "decode_context", "prefill_tokens", "held_sequences", "held_tokens_each",
                    "prefill_len")},
    **{f"{name}-over-replicas": (call, r"\bbatch=3 does not split over 2 replicas; use a multiple of 2$")
       for name, call in (("decode", lambda: decode_step(_llama8b(2, tensor_parallel=1), 3, 128)),
                          ("prefill", lambda: prefill(_llama8b(2, tensor_parallel=1), 128, 3)),
                          ("decode-time", lambda: decode_time(_llama8b(2, tensor_parallel=1), 3, 128, 2)))},
    "offline-input-zero": (lambda: _offline8b(input_len=0), r"\binput_len\b"),
    "offline-output-zero": (lambda: _offline8b(output_len=0), r"\boutput_len\b"),
    "offline-slots-zero": (lambda: _offline8b(slots=0), r"\bslots\b"),
    "offline-slots-fraction": (lambda: _offline8b(slots=2.5), r"\bslots\b"),
    "offline-one-output-token": (lambda: _offline8b(output_len=1),
                                 r"\boutput_len=1\b.*\buse estimate\.prefill for prompt-only work$"),
    "throughput-one-output-token": (lambda: offline_throughput("llama3-8b", "h100", 1, 128, 1),
                                    "at least 2 output tokens"),
    # what does not fit: the bytes needed and available, and what to change
    "weights-alone-overflow": (lambda: decode_step(Deployment("llama3-70b", "h100", 1), 1, 8192),
                               r"needs 143.8 GB per chip \(141.1 GB of weights.*h100 has 85.5 GB.*weights alone"),
    # LLaMA-3-70B in bf16 is 70.55e9 x 2 B = 141.1 GB, more than an 80 GB H100 holds
    "weights-priced-in-gb": (lambda: decode_step(Deployment("llama3-70b", "h100", 1), 1, 1024),
                             r"the weights alone \(141\.1 GB per chip\) exceed it: quantize them or raise "
                             r"tensor_parallel"),
    "decode-batch-too-large": (lambda: decode_step(Deployment("llama3-70b", "h100", 8), 10_000, 8192),
                               r"quantize the KV cache or the weights, or add chips"),
    "no-room-at-memory-utilization": (lambda: decode_step(_llama8b(memory_utilization=0.1), 1, 128, "typical"),
                                      r"memory_utilization=0\.1"),
    "prefill-too-large": (lambda: prefill(Deployment("llama3-70b", "h100", 8), 100_000, 64),
                          r"a prefill of 64 x 100,000 tokens.*does not fit.*\buse fewer or shorter prompts per pass, "
                          r"quantize, or add chips$"),
    "prefill-over-the-cap": (lambda: prefill(Deployment("llama3-70b", "h100", 8), 16, 4096, "typical"),
                             "a prefill of 4096 x 16 tokens.*exceed max_sequences"),
    "throughput-does-not-fit": (lambda: offline_throughput("llama3-70b", "h100", 1, 128, 128), r"does not fit"),
    # one 300,000 + 400,000-token request in fp8: 70.6 GB of weights + 500,000 mean tokens x 163,840 B = 81.9 GB
    "offline-weights-and-cache-in-gb": (lambda: offline_estimate(Deployment("llama3-70b", "h200", 1, weight_dtype="fp8",
                                                                            kv_dtype="fp8"), 300_000, 400_000),
                                        r"needs 152\.5 GB per chip \(70\.6 GB of weights \+ 81\.9 GB of KV cache\)"),
    "offline-request-fits-nowhere": (lambda: offline_estimate(Deployment("llama3-70b", "h100", 1), 1000, 1000,
                                                              "typical"),
                                     r"one request of 1,000 \+ 1,000 tokens on llama3-70b.*engine may use 77.0 GB"),
    "offline-request-too-long": (lambda: offline_estimate(_llama8b(), 500_000, 500_000),
                                 r"\bquantize the weights or the KV cache, or add chips\b"),
    # at the bound the message names the chip's whole HBM
    "offline-slots-at-the-bound": (lambda: offline_estimate(Deployment("llama3-70b", "h100", 1), 10, 10, slots=1),
                                   r"\b1 slots of 10 \+ 10 tokens\b.*\bone h100 has 85\.5 GB\b.*\bweights alone\b"),
}


@for_each(BAD_INPUT.values(), ids=list(BAD_INPUT))
def test_bad_input_gets_a_value_error_naming_the_argument_and_the_fix(call, words):
    with pytest.raises(ValueError, match=words):
        call()
