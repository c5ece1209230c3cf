"""The full estimate (scaling_lib.estimate): its terms against independent counts, capacity and placement, and the
bound against every published measurement."""

import math
import re

import pytest

from scaling_lib.calibration import compare, pope_deployment, summarize
from scaling_lib.collectives import collective_time
from scaling_lib.estimate import (
    BOUND,
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
from scaling_lib.layouts import LAYOUTS
from scaling_lib.hardware import get_chip
from scaling_lib.inference import decode_step_time, prefill_time
from scaling_lib.measurements import pope_rows, trtllm_rows
from scaling_lib.memory import kv_cache_bytes, kv_head_groups, max_batch_size, param_bytes
from scaling_lib.models import active_param_count, get_model, param_count
from scaling_lib.moe import as_moe

H100 = get_chip("h100")


# --- the terms, against the sources' bounds and the FLOP counter ----------------------------------------------

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


def test_gpu_tensor_parallel_decode_pays_two_all_reduces_per_layer_on_the_switch():
    # LLaMA-3-70B fp8 on 8 H100, batch 64: 2 all-reduces per layer of 64 x 8,192 x 2 B = 1 MB, 80 layers; each costs
    # its latency plus its bandwidth term (collectives.collective_time).
    d = Deployment("llama3-70b", "h100", 8, weight_dtype="fp8", kv_dtype="fp8", compute_dtype="fp8")
    step = decode_step(d, 64, 4096, Efficiency())  # serial, every rate at peak: NCCL's pick at line rate
    one = collective_time("all-reduce", 64 * 8192 * 2, "h100", 8)
    assert step.comm_s == pytest.approx(2 * 80 * (one.latency_s + one.bandwidth_s))
    assert step.comm_latency_s == pytest.approx(2 * 80 * one.latency_s)
    # The bound takes the shortest latency physics allows (one NVLink step each, NCCL's LL ring step) instead.
    bound = decode_step(d, 64, 4096)
    assert bound.comm_latency_s == pytest.approx(2 * 80 * collective_time("all-reduce", 0.0, "h100", 8).bound_s)
    assert bound.comm_latency_s < step.comm_latency_s / 10


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


# --- capacity and bad input --------------------------------------------------------------------------------------

def test_a_deployment_that_does_not_fit_is_refused_with_bytes_needed_and_available():
    with pytest.raises(ValueError, match=r"needs 143.8 GB per chip \(141.1 GB of weights.*h100 has 85.5 GB.*"
                                         r"weights alone"):
        decode_step(Deployment("llama3-70b", "h100", 1), 1, 8192)
    # 2 H100: each holds half the bf16 weights and half of each 8,192-token cache (4 of the 8 KV heads).
    m = get_model("llama3-70b")
    fits = math.floor((H100.hbm_capacity - param_count(m) * 2 / 2) / (kv_cache_bytes(m, 8192, 1) / 2))
    assert fits == 11  # 85.5 GB as the device reports it: 15.0 GB free over 1.34 GB per sequence
    with pytest.raises(ValueError, match=rf"does not fit.*largest batch that fits is {fits};"):
        decode_step(Deployment("llama3-70b", "h100", 2), 400, 8192)
    with pytest.raises(ValueError, match=r"does not fit"):
        offline_throughput("llama3-70b", "h100", 1, 128, 128)


def test_bad_deployments_name_the_problem_and_the_fix():
    with pytest.raises(ValueError, match=r"tensor_parallel=3 does not divide n_heads=64.*use one of \[1, 2, 4"):
        Deployment("llama3-70b", "h100", 3)
    with pytest.raises(ValueError, match=r"tensor_parallel=3 does not divide n_chips=8"):
        Deployment("llama3-70b", "h100", 8, tensor_parallel=3)
    with pytest.raises(ValueError, match=r"ffn_layout='2d-ws' is one of Pope.*h100.*1d-ws"):
        Deployment("llama3-70b", "h100", 8, ffn_layout="2d-ws")
    with pytest.raises(ValueError, match="unknown kv_placement 'sharded'"):
        Deployment("llama3-70b", "h100", 8, kv_placement="sharded")
    with pytest.raises(ValueError, match=r"expert_parallel=True .* llama3-70b has 1 expert"):
        Deployment("llama3-70b", "h100", 8, expert_parallel=True)
    with pytest.raises(ValueError, match=r"mixtral-8x7b has 8 expert\(s\) and tensor_parallel=16"):
        Deployment("mixtral-8x7b", "tpu-v5e", 16, expert_parallel=True)
    with pytest.raises(ValueError, match=r"attention_data_parallel must be True or False, got 'yes'"):
        Deployment("mixtral-8x7b", "h100", 8, attention_data_parallel="yes")
    with pytest.raises(ValueError, match="tpu-v5e has no native fp8"):
        Deployment("llama3-70b", "tpu-v5e", 16, compute_dtype="fp8")
    with pytest.raises(ValueError, match=r"Efficiency.mfu must be a fraction of peak in \(0, 1\]"):
        Efficiency(mfu=1.5)
    with pytest.raises(ValueError, match="efficiency must be None"):
        offline_throughput("llama3-8b", "h100", 1, 128, 128, efficiency="fast")
    with pytest.raises(ValueError, match="at least 2 output tokens"):
        offline_throughput("llama3-8b", "h100", 1, 128, 1)


# --- the bound against published measurements -------------------------------------------------------------------

@pytest.mark.parametrize("row", trtllm_rows(), ids=lambda r: r.label)
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


@pytest.mark.parametrize("row", pope_rows(), ids=lambda r: r.label)
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


# --- calibration ------------------------------------------------------------------------------------------------

def test_typical_sits_between_the_bound_and_the_measurement_on_average():
    bound = summarize(compare(row, BOUND) for row in trtllm_rows() + pope_rows())
    typical = summarize(compare(row, TYPICAL) for row in trtllm_rows() + pope_rows())
    assert bound.median > 1.5 and abs(math.log(typical.median)) < abs(math.log(bound.median))
    assert offline_estimate(Deployment("llama3-8b", "h100", 1), 128, 2048, "typical").efficiency == TYPICAL


# --- the structure of real models: windows, shared experts, dense layers, latent attention -----------------------

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


def test_moe_reads_shared_experts_and_dense_layers_always_and_routed_experts_as_touched():
    v3 = get_model("deepseek-v3")
    d = Deployment(v3, "h200", 8, weight_dtype="fp8", kv_dtype="fp8", compute_dtype="fp8")
    expert = 3 * v3.d_model * v3.d_ff  # parameters of one routed expert in one layer
    assert d.weights_read_per_chip(1) == pytest.approx(matmul_params(v3) / 8)  # one token: exactly its k experts
    every = matmul_params(v3) + v3.n_moe_layers * (v3.n_experts - v3.n_active_experts) * expert
    assert d.weights_read_per_chip(1e6) == pytest.approx(every / 8)
    assert offline_throughput("mixtral-8x7b", "h100", 2, 1000, 1000, weight_dtype="fp8", kv_dtype="fp8",
                              compute_dtype="fp8") > 0


# --- deployments, steps, offline estimates and the report, by hand --------------------------------------------------

def test_efficiency_names_resolve_to_the_bound_and_the_calibrated_values():
    assert resolve_efficiency(None) is BOUND and resolve_efficiency("bound") is BOUND
    assert resolve_efficiency("typical") is TYPICAL
    custom = Efficiency(mfu=0.5)
    assert resolve_efficiency(custom) is custom


@pytest.mark.parametrize("chip, n, mesh", [("tpu-v5e", 8, (4, 2)), ("tpu-v5e", 32, (8, 4)), ("ironwood", 8, (2, 2, 2)),
                                           ("ironwood", 32, (4, 4, 2)), ("h100", 8, (8,))])
def test_the_default_megatron_mesh_is_the_most_even_torus_largest_axis_first(chip, n, mesh):
    assert Deployment("llama3-70b", chip, n).mesh_shape == mesh


def test_a_tensor_parallel_degree_that_splits_heads_lists_every_divisor_of_the_heads():
    # LLaMA-3-8B has 32 query heads: the whole-head degrees are 1, 2, 4, 8, 16 and 32 itself.
    with pytest.raises(ValueError, match=re.escape("use one of [1, 2, 4, 8, 16, 32]")):
        Deployment("llama3-8b", "tpu-v5e", 48)
    assert Deployment("llama3-8b", "tpu-v5e", 32).tensor_parallel == 32  # n = H is allowed


def test_a_step_with_no_tokens_costs_nothing_but_holding_the_weights():
    d = Deployment("llama3-8b", "h100", 1)
    empty = step_estimate(d)
    assert (empty.weights_s, empty.kv_s, empty.matmul_s, empty.attention_s, empty.comm_s) == (0.0,) * 5
    assert empty.hbm_bytes_per_chip == param_bytes(get_model("llama3-8b"))


def test_a_prefill_holds_the_weights_plus_its_share_of_the_caches_it_writes():
    m, d = get_model("llama3-8b"), Deployment("llama3-8b", "h100", 2)
    # One replica, 2-way tensor parallel: each chip keeps half of every cache (4 of the 8 KV heads).
    first = prefill(d, 4096, batch=2)
    assert first.hbm_bytes_per_chip == pytest.approx(param_bytes(m) / 2 + kv_cache_bytes(m, 4096, 2) / 2)


def test_a_decode_step_holds_the_weights_plus_its_share_of_the_caches_it_reads():
    m, d = get_model("llama3-8b"), Deployment("llama3-8b", "h100", 2)
    step = decode_step(d, 4, 1024)
    assert step.hbm_bytes_per_chip == pytest.approx(param_bytes(m) / 2 + kv_cache_bytes(m, 1024, 4) / 2)


def test_decode_time_is_steps_times_the_step_at_the_mean_context():
    d = Deployment("llama3-8b", "h100", 1)
    # 4 steps from 1,000 cached tokens attend to 1,001 ... 1,004 tokens: mean 1,002.5
    mean = step_estimate(d, decode_batch=8, decode_context=1002.5, held_sequences=8, held_tokens_each=1004)
    assert decode_time(d, 8, 1000, 4) == pytest.approx(4 * mean.total_s)


def test_collectives_at_peak_pay_their_latency_plus_a_small_bandwidth_term():
    at_peak = decode_step(Deployment("llama3-70b", "ironwood", 8), 8, 1024, Efficiency())
    assert 0 < at_peak.comm_latency_s < at_peak.comm_s  # [8, D] all-reduces: latency plus a small bandwidth term


def test_a_slow_network_stretches_only_the_bandwidth_part_of_the_collectives():
    d = Deployment("llama3-70b", "ironwood", 8)
    at_peak = decode_step(d, 8, 1024, Efficiency())
    slow = decode_step(d, 8, 1024, Efficiency(network=1e-6))  # a million times slower bandwidth
    assert slow.comm_latency_s == pytest.approx(at_peak.comm_latency_s)
    assert slow.comm_bandwidth_s == pytest.approx(1e6 * at_peak.comm_bandwidth_s)


def test_a_latency_efficiency_stretches_only_the_latency_part_of_the_collectives():
    d = Deployment("llama3-70b", "ironwood", 8)
    at_peak = decode_step(d, 8, 1024, Efficiency())
    later = decode_step(d, 8, 1024, Efficiency(latency=3.0))  # three times the sourced latency
    assert later.comm_latency_s == pytest.approx(3 * at_peak.comm_latency_s)
    assert later.comm_bandwidth_s == pytest.approx(at_peak.comm_bandwidth_s)


def test_a_decode_batch_that_does_not_fit_says_what_to_change():
    d = Deployment("llama3-70b", "h100", 8)
    with pytest.raises(ValueError, match=r"quantize the KV cache or the weights, or add chips"):
        decode_step(d, 10_000, 8192)


@pytest.mark.parametrize("kwargs, name", [(dict(prompt_len=0), "prompt_len"), (dict(context_len=-5), "context_len"),
                                          (dict(price_per_chip_hour=-1.0), "price_per_chip_hour")])
def test_report_names_the_bad_argument(kwargs, name):
    with pytest.raises(ValueError, match=rf"\b{name}\b"):
        report("llama3-8b", "h100", 1, **kwargs)


def test_report_as_dict_has_every_number_under_its_own_name():
    r = report("llama3-8b", "h100", 1, batch=8, context_len=4096, price_per_chip_hour=2.0)
    data = r.as_dict()
    assert set(data) == {"model", "chip", "n_chips", "tensor_parallel", "weight_dtype", "kv_dtype", "compute_dtype",
                         "batch", "context_len", "prompt_len", "weight_bytes", "kv_bytes_per_token", "max_batch",
                         "decode_step_bound_s", "decode_step_typical_s", "prefill_bound_s", "prefill_typical_s",
                         "tokens_per_s_bound", "tokens_per_s_typical", "price_per_chip_hour",
                         "dollars_per_million_tokens_bound", "dollars_per_million_tokens_typical"}
    for key, value in data.items():
        if key not in ("model", "chip"):
            assert value == getattr(r, key, None) or value == getattr(r.deployment, key), key


def test_report_describe_prints_each_row_with_its_numbers():
    r = report("llama3-8b", "h100", 2, batch=8, context_len=4096, price_per_chip_hour=2.0)
    rows = dict(line.split("  ", 1) for line in r.describe().splitlines())
    rows = {name.strip(): value.strip() for name, value in rows.items()}
    assert list(rows) == ["deployment", "weights", "KV cache per token", "largest batch that fits", "batch",
                          "decode step", "prefill", "output tokens/s", "$ per million output tokens"]
    gb = param_bytes(get_model("llama3-8b")) / 1e9  # 16.1 GB in bf16, 8.0 GB on each of 2 chips
    assert rows["weights"] == f"{gb:,.1f} GB ({gb / 2:,.1f} GB per chip)"
    assert rows["largest batch that fits"] == (f"{r.max_batch:,} sequences of 4,096 tokens (the engine's 90% of HBM, "
                                               "at most 2,048 per replica)")
    numbers = [float(x) for x in re.findall(r"[\d.]+", rows["decode step"].replace(",", ""))]
    assert numbers == pytest.approx([r.decode_step_bound_s * 1e3, r.decode_step_typical_s * 1e3], abs=0.005)
    numbers = [float(x) for x in re.findall(r"[\d.]+", rows["prefill"].replace(",", ""))]
    assert numbers[:2] == pytest.approx([r.prefill_bound_s * 1e3, r.prefill_typical_s * 1e3], abs=0.05)
    assert rows["prefill"].endswith("(4,096-token prompt)")
    assert rows["$ per million output tokens"].endswith("(at $2 per chip-hour)")


def test_megatron_decode_collectives_by_hand_on_8_h100():
    # LLaMA-3-70B, batch 16: two all-reduces of [16, 8192] bf16 = 262,144 B per layer on the NVSwitch, 80 layers, each
    # its latency plus its bandwidth term. tp = 8 = K: every chip holds one whole KV head, so the batch is not split
    # and no all-to-all is added.
    step = decode_step(Deployment("llama3-70b", "h100", 8), 16, 1024, Efficiency())
    one = collective_time("all-reduce", 16 * 8192 * 2, "h100", 8)
    assert step.comm_s == pytest.approx(80 * 2 * (one.latency_s + one.bandwidth_s))
    assert step.comm_latency_s == pytest.approx(80 * 2 * one.latency_s)


def test_a_batch_split_cache_adds_two_all_to_alls_per_layer():
    # 16-way tensor parallel over LLaMA-3-70B's 8 KV heads: each head's 2 chips split the batch between them and swap
    # queries and outputs, [B, N, H] in bf16 over 2 chips, twice per layer; the replicated cache does not.
    split = decode_step(Deployment("llama3-70b", "ironwood", 16), 32, 1024, Efficiency())
    replicated = decode_step(Deployment("llama3-70b", "ironwood", 16, kv_placement="replicated"), 32, 1024,
                             Efficiency())
    swap = collective_time("all-to-all", 32 * 64 * 128 * 2, "ironwood", 2)
    assert split.comm_s - replicated.comm_s == pytest.approx(80 * 2 * (swap.bandwidth_s + swap.latency_s))


def test_weights_too_large_for_the_chip_say_to_quantize_or_split_them():
    with pytest.raises(ValueError, match=r"quantize them or raise tensor_parallel"):
        decode_step(Deployment("llama3-70b", "h100", 1), 1, 1024)


def test_decode_time_from_an_empty_cache():
    d = Deployment("llama3-8b", "h100", 1)
    mean = step_estimate(d, decode_batch=2, decode_context=2.5, held_sequences=2, held_tokens_each=4)
    assert decode_time(d, 2, 0, 4) == pytest.approx(4 * mean.total_s)  # steps attend to 1, 2, 3, 4 keys


def test_offline_prefill_charges_the_causal_attention_of_whole_prompts():
    # One iteration prefills batch x 8,192 / (2 - 1) prompt tokens; each prompt's causal attention alone is
    # 4 L N H T (T + 1) / 2 = 4 x 32 x 32 x 128 x 8,192 x 8,193 / 2 FLOPs for LLaMA-3-8B (H100: 989e12 FLOP/s).
    estimate = offline_estimate(Deployment("llama3-8b", "h100", 1), 8192, 2)
    per_prompt = 4 * 32 * 32 * 128 * 8192 * 8193 / 2
    assert estimate.step.attention_s >= estimate.batch * per_prompt / 989e12


def test_offline_throughput_passes_the_tensor_parallel_degree_through():
    one = offline_throughput("llama3-8b", "h100", 1, 1000, 1000)
    assert offline_throughput("llama3-8b", "h100", 8, 1000, 1000, tensor_parallel=1) == pytest.approx(8 * one)


def test_offline_throughput_passes_the_kv_placement_through():
    replicated = Deployment("llama3-70b", "ironwood", 16, kv_placement="replicated")
    assert offline_throughput("llama3-70b", "ironwood", 16, 1000, 1000, kv_placement="replicated") == \
        pytest.approx(offline_estimate(replicated, 1000, 1000).output_tokens_per_s)


def test_report_serves_a_single_sequence_when_only_one_fits():
    # LLaMA-3-70B in fp8 on one H200: 70.6 GB of weights leave 70.4 GB; a 300,000-token fp8 cache is
    # 300,000 x 163,840 B = 49.2 GB, so one sequence fits and two (98.3 GB) do not.
    assert report("llama3-70b", "h200", 1, context_len=300_000, weight_dtype="fp8", kv_dtype="fp8").batch == 1


def test_prefill_writes_the_cache_in_its_own_dtype():
    # 4,096 new tokens x (32 layers x 8 KV heads x 128 x 2 (K and V) x 1 B in fp8) = 268 MB over 4.8 TB/s
    step = prefill(Deployment("llama3-8b", "h200", 1, kv_dtype="fp8"), 4096)
    assert step.kv_s == pytest.approx(4096 * 32 * 8 * 128 * 2 / 4.8e12)


def test_decode_attention_is_linear_in_the_keys_from_the_first():
    d = Deployment("llama3-8b", "h100", 1)
    assert 2 * decode_step(d, 1, 1).attention_s == pytest.approx(decode_step(d, 1, 2).attention_s)


def test_decode_attention_is_capped_by_a_sliding_window():
    windowed = Deployment(get_model("llama3-8b").with_(sliding_window=1024), "h100", 1)
    assert decode_step(windowed, 1, 8192).attention_s == pytest.approx(decode_step(windowed, 1, 1024).attention_s)


@pytest.mark.parametrize("kwargs, words", [
    (dict(mesh_shape=(0, 8)), r"\bmesh_shape\b"), (dict(ffn_layout="3d"), r"\bffn_layout\b"),
    # a 2D torus has no third axis of links to lay a third mesh axis on
    (dict(mesh_shape=(2, 2, 2), ffn_layout="2d-ws"), r"^mesh_shape \(2, 2, 2\) lays chips along 3 axes and tpu-v5e's "
                                                    r"torus has 2\b.*\be\.g\. mesh_shape=\(2, 4\)$"),
    (dict(n_chips=2**30, tensor_parallel=8), r"^n_chips=1,073,741,824 is more than 1,048,576\b"),
    # no source gives MI300X's network between nodes: a copy of the model stays in one node of 8
    (dict(chip="mi300x", n_chips=16), r"^tensor_parallel=16 spans 2 mi300x nodes of 8\b.*\btensor_parallel=8 or "
                                      r"fewer\b"),
])
def test_a_bad_deployment_names_the_field(kwargs, words):
    with pytest.raises(ValueError, match=words):
        Deployment(**{"model": "llama3-70b", "chip": "tpu-v5e", "n_chips": 8, **kwargs})


@pytest.mark.parametrize("chip", ["tpu-v5e", "tpu-v6e"])
def test_the_default_pope_mesh_on_a_2d_torus_uses_two_axes_of_links_at_most(chip):
    for n in (16, 64, 256):  # 16 and 64 chips were laid on three axes, (2, 2, 4) and (4, 4, 4)
        meshes = [Deployment("llama3-70b", chip, n, ffn_layout="2d-ws").mesh_shape] + [
            layout_cost("palm-62b", chip, n, "decode", 256, layout, "batch").mesh_shape for layout in LAYOUTS]
        assert all(math.prod(mesh) == n and sum(a > 1 for a in mesh) <= 2 for mesh in meshes), (n, meshes)


@pytest.mark.parametrize("field", ["mfu", "hbm", "network"])
def test_an_efficiency_of_zero_is_refused(field):
    with pytest.raises(ValueError, match=rf"Efficiency\.{field}\b"):
        Efficiency(**{field: 0.0})


def test_kv_heads_that_do_not_divide_the_chips_split_the_batch_over_the_remaining_factor():
    # LLaMA-2-13B with K = 8 KV heads on 10 chips: each KV head is shared by 10 / gcd(8, 10) = 5 chips, which split
    # the batch 5 ways: two all-to-alls over 5 chips per layer.
    m = get_model("llama2-13b").with_(n_kv_heads=8)
    split = decode_step(Deployment(m, "tpu-v5e", 10), 20, 1024, Efficiency())
    replicated = decode_step(Deployment(m, "tpu-v5e", 10, kv_placement="replicated"), 20, 1024, Efficiency())
    swap = collective_time("all-to-all", 20 * 40 * 128 * 2, "tpu-v5e", 5)  # [B, N, H] in bf16 over 5 chips
    assert split.comm_s - replicated.comm_s == pytest.approx(40 * 2 * (swap.bandwidth_s + swap.latency_s))


def test_bandwidth_bound_all_to_alls_move_the_queries_of_the_whole_batch():
    # As above, but batch 2,000: [2000, 40 heads, 128] bf16 = 20.5 MB over 5 chips is bandwidth-bound.
    m = get_model("llama2-13b").with_(n_kv_heads=8)
    split = decode_step(Deployment(m, "tpu-v5e", 10), 2000, 128, Efficiency())
    replicated = decode_step(Deployment(m, "tpu-v5e", 10, kv_placement="replicated"), 2000, 128, Efficiency())
    swap = collective_time("all-to-all", 2000 * 40 * 128 * 2, "tpu-v5e", 5)
    assert swap.bandwidth_s > swap.latency_s
    assert split.comm_s - replicated.comm_s == pytest.approx(40 * 2 * (swap.bandwidth_s + swap.latency_s))
    assert split.comm_bandwidth_s - replicated.comm_bandwidth_s == pytest.approx(40 * 2 * swap.bandwidth_s)


def test_weights_that_do_not_fit_are_priced_in_gb():
    # LLaMA-3-70B in bf16 is 70.55e9 x 2 B = 141.1 GB, more than an 80 GB H100 holds.
    with pytest.raises(ValueError, match=r"the weights alone \(141\.1 GB per chip\)"):
        decode_step(Deployment("llama3-70b", "h100", 1), 1, 1024)


def test_weights_and_a_cache_that_do_not_fit_are_priced_in_gb():
    # One 300,000 + 400,000-token request in fp8: 70.6 GB of weights + 500,000 mean tokens x 163,840 B = 81.9 GB.
    with pytest.raises(ValueError, match=r"needs 152\.5 GB per chip \(70\.6 GB of weights \+ 81\.9 GB of KV cache\)"):
        offline_estimate(Deployment("llama3-70b", "h200", 1, weight_dtype="fp8", kv_dtype="fp8"), 300_000, 400_000)


def test_an_offline_estimate_keeps_its_input_length():
    assert offline_estimate(Deployment("llama3-8b", "h100", 1), 1000, 500).input_len == 1000


def test_a_report_keeps_its_prompt_length():
    assert report("llama3-8b", "h100", 1, context_len=4096, prompt_len=1024).prompt_len == 1024


def test_step_estimate_names_a_bad_held_count():
    with pytest.raises(ValueError, match=r"\bheld_sequences\b"):
        step_estimate(Deployment("llama3-8b", "h100", 1), held_sequences=-1)


def test_a_deployment_takes_an_explicit_mesh():
    assert Deployment("llama3-70b", "tpu-v5e", 8, mesh_shape=(2, 4)).mesh_shape == (2, 4)


def test_a_deployment_with_a_smaller_tensor_parallel_degree_runs_replicas():
    assert Deployment("llama3-8b", "h100", 8, tensor_parallel=4).replicas == 2


def test_a_tensor_parallel_degree_that_splits_heads_points_to_a_pope_layout_on_a_torus():
    with pytest.raises(ValueError, match=re.escape("(or a Pope et al. layout such as ffn_layout='2d-ws' on a TPU "
                                                   "torus)")):
        Deployment("llama3-8b", "tpu-v5e", 48)


def test_output_tokens_per_s_counts_the_first_token_from_the_prefill():
    # With O = 2 each finishing request produced 2 tokens but decoded only 1 of them: the factor O / (O - 1) = 2.
    estimate = offline_estimate(Deployment("llama3-8b", "h100", 1), 128, 2)
    assert estimate.output_tokens_per_s == pytest.approx(estimate.batch * 2 / estimate.step.total_s)


def test_the_kv_cache_is_replicated_by_default_on_gpus_and_batch_split_on_tpus():
    # LLaMA-3-8B has 8 KV heads: 16-way tensor parallelism on H100 keeps each head on 2 chips (2 copies).
    gpu = Deployment("llama3-8b", "h100", 16)
    assert gpu.kv_placement == "replicated" and gpu.kv_copies == 2
    tpu = Deployment("llama3-8b", "tpu-v5e", 16)
    assert tpu.kv_placement == "batch-split" and tpu.kv_copies == 1
    assert Deployment("llama3-8b", "h100", 16, kv_placement="batch-split").kv_copies == 1


def _fp8_llama3_8b(**settings):
    return Deployment("llama3-8b", "h100", 1, weight_dtype="fp8", kv_dtype="fp8", compute_dtype="fp8", **settings)


def _fp8_sequences_that_fit(d, hbm_bytes):
    # LLaMA-3-8B in fp8 on one H100 at 128/128: 8.0 GB of weights leave room for far more than 2,048 sequences.
    return int((hbm_bytes - d.weight_bytes_per_chip) // d.kv_bytes_per_chip(1, 128 + 64))


def test_the_bound_batches_every_sequence_that_fits_in_all_of_hbm():
    d = _fp8_llama3_8b()
    assert offline_estimate(d, 128, 128).batch == _fp8_sequences_that_fit(d, d.chip.hbm_capacity)


def test_the_typical_estimate_caps_the_batch_at_the_engines_max_sequences():
    assert offline_estimate(_fp8_llama3_8b(), 128, 128, "typical").batch == 2048  # max_sequences caps it


def test_the_typical_estimate_keeps_to_the_engines_memory_utilization():
    small = _fp8_llama3_8b(memory_utilization=0.2, max_sequences=100_000)
    assert offline_estimate(small, 128, 128, "typical").batch == _fp8_sequences_that_fit(
        small, 0.2 * small.chip.hbm_capacity)


def test_the_bound_ignores_the_engine_settings():
    small = _fp8_llama3_8b(memory_utilization=0.2, max_sequences=100_000)
    assert offline_estimate(small, 128, 128).batch == offline_estimate(_fp8_llama3_8b(), 128, 128).batch
    assert offline_throughput("llama3-8b", "h100", 1, 128, 128, memory_utilization=0.2) == \
        offline_throughput("llama3-8b", "h100", 1, 128, 128)


def test_offline_throughput_passes_max_sequences_to_the_typical_estimate():
    assert offline_throughput("llama3-8b", "h100", 1, 128, 128, efficiency="typical", max_sequences=8) < \
        offline_throughput("llama3-8b", "h100", 1, 128, 128, efficiency="typical")


def test_a_report_passes_the_engine_settings_through():
    r = report("llama3-8b", "h100", 1, context_len=1024, max_sequences=16, memory_utilization=0.5,
               kv_placement="batch-split")
    assert (r.batch, r.deployment.memory_utilization, r.deployment.kv_placement) == (16, 0.5, "batch-split")


def test_the_bound_prices_a_batch_over_the_engine_cap():
    d = Deployment("llama3-8b", "h100", 1, weight_dtype="fp8", kv_dtype="fp8", max_sequences=4)
    assert decode_step(d, 8, 128).batch == 8


def test_an_estimate_refuses_a_batch_over_the_engine_cap():
    d = Deployment("llama3-8b", "h100", 1, weight_dtype="fp8", kv_dtype="fp8", max_sequences=4)
    with pytest.raises(ValueError, match=r"^batch 8 at 128 tokens of context on llama3-8b\b.*exceed max_sequences=4"):
        decode_step(d, 8, 128, "typical")


def test_an_estimate_whose_memory_utilization_leaves_no_room_names_it():
    with pytest.raises(ValueError, match=r"memory_utilization=0\.1"):
        decode_step(Deployment("llama3-8b", "h100", 1, memory_utilization=0.1), 1, 128, "typical")


@pytest.mark.parametrize("kwargs, name", [(dict(memory_utilization=0), "memory_utilization"),
                                          (dict(memory_utilization=1.5), "memory_utilization"),
                                          (dict(max_sequences=0), "max_sequences"),
                                          (dict(max_sequences=2.5), "max_sequences"),
                                          (dict(kv_placement="sharded"), "kv_placement")])
def test_bad_engine_settings_name_the_field(kwargs, name):
    with pytest.raises(ValueError, match=rf"\b{name}\b"):
        Deployment("llama3-8b", "h100", 1, **kwargs)


@pytest.mark.parametrize("kwargs, field", [(dict(latency=0), "latency"), (dict(latency=math.inf), "latency"),
                                           (dict(overhead_s=-1e-3), "overhead_s"), (dict(overlap=1), "overlap")])
def test_efficiency_fields_beyond_the_rates_are_checked(kwargs, field):
    with pytest.raises(ValueError, match=rf"Efficiency\.{field}\b"):
        Efficiency(**kwargs)


def test_the_bound_is_the_peak_efficiency_with_overlap():
    assert BOUND == Efficiency(overlap=True)


def test_the_kv_cache_is_replicated_on_a_full_mesh_gpu_too():
    # MI300X joins its GPUs in a full mesh, not a switch: still a GPU, still a replicated cache beyond K heads (one
    # KV head of PaLM 62B's multiquery attention on 8 GPUs).
    assert Deployment("palm-62b", "mi300x", 8).kv_placement == "replicated"


# --- the numbers an error message and the report print ---------------------------------------------------------

def test_a_refused_decode_step_names_the_batch_and_the_largest_batch_that_does_fit_at_that_efficiency():
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


def test_the_default_mesh_of_a_pope_layout_is_pope_et_als_for_palm_540b_on_64_chips():
    # Pope et al. (2022), 2D weight-stationary layout: with d_ff = 4 d_model the communication is least at
    # X = sqrt(n) / 2 and YZ = 2 sqrt(n): on 64 chips X = 4, Y Z = 16, and the most even Y x Z is 4 x 4.
    d = Deployment("palm-540b", "tpu-v4", 64, ffn_layout="2d-ws")
    assert d.mesh_shape == (4, 4, 4)


def test_the_report_prints_the_decode_step_in_milliseconds():
    rep = report("llama3-70b", "h100", 8, batch=64, context_len=8192)
    printed = re.search(r"decode step\s+([\d.,]+) ms bound, ([\d.,]+) ms typical", rep.describe())
    d = Deployment("llama3-70b", "h100", 8)
    assert float(printed.group(1)) == pytest.approx(decode_step(d, 64, 8192).total_s * 1000, abs=0.005)
    assert float(printed.group(2)) == pytest.approx(decode_step(d, 64, 8192, "typical").total_s * 1000, abs=0.005)
    first = re.search(r"prefill\s+([\d.,]+) ms bound", rep.describe())
    assert float(first.group(1)) == pytest.approx(prefill(d, 8192, 1).total_s * 1000, abs=0.05)
    # LLaMA 3 70B's KV cache per token by hand: 80 layers x 8 KV heads x 128 dims x 2 (K and V) x 2 bytes (bf16)
    assert "KV cache per token       327.7 kB" in rep.describe() and 80 * 8 * 128 * 2 * 2 == 327_680


def test_a_refused_prefill_names_the_prompts_in_both_of_its_messages():
    d = Deployment("llama3-70b", "h100", 8)
    with pytest.raises(ValueError, match="a prefill of 64 x 100,000 tokens.*does not fit"):
        prefill(d, 100_000, 64)
    with pytest.raises(ValueError, match="a prefill of 4096 x 16 tokens.*exceed max_sequences"):
        prefill(d, 16, 4096, "typical")


def test_max_batch_of_a_model_name_points_to_deployment():
    with pytest.raises(ValueError, match="estimate.max_batch's first argument"):
        max_batch("llama3-70b", 8192)


def test_an_offline_request_that_fits_nowhere_is_named_in_the_message():
    with pytest.raises(ValueError, match=r"one request of 1,000 \+ 1,000 tokens on llama3-70b.*engine may use 77.0 GB"):
        offline_estimate(Deployment("llama3-70b", "h100", 1), 1000, 1000, "typical")
    with pytest.raises(ValueError, match="estimate.offline_estimate's first argument"):
        offline_estimate("llama3-70b", 1000, 1000)


def test_a_step_counts_the_tokens_through_the_weights_and_the_bound_has_no_overhead():
    d = Deployment("llama3-8b", "h100", 1)
    step = step_estimate(d, decode_batch=4, decode_context=1000, prefill_tokens=100, prefill_len=100)
    assert step.tokens == 104  # 4 decoded tokens + 100 prompt tokens
    overlapped = Efficiency(overlap=True, overhead_s=1e-3)
    assert step_estimate(d, decode_batch=4, decode_context=1000, efficiency=overlapped).overhead_s == 0.0


def test_decode_step_of_a_model_name_points_to_deployment_and_inference():
    # The mix-up of issue 21: estimate.decode_step called as inference.decode_step_time is.
    with pytest.raises(ValueError, match="estimate.decode_step's first argument.*inference.decode_step_time"):
        decode_step("llama3-70b", 32, 8192)


def test_memory_utilization_is_stored_as_a_float():
    d = Deployment("llama3-8b", "h100", 1, memory_utilization=1)
    assert type(d.memory_utilization) is float and d.memory_utilization == 1.0


def test_a_tensor_parallel_degree_that_splits_no_head_lists_each_divisor_once():
    # LLaMA 3 70B's 64 query heads: 64 is a square, and its root 8 is listed once among the divisors.
    with pytest.raises(ValueError, match=re.escape("use one of [1, 2, 4, 8, 16, 32, 64]")):
        Deployment("llama3-70b", "h100", 6)


def test_a_deployment_within_its_kv_heads_describes_the_split_alone():
    assert Deployment("llama3-8b", "h100", 8).describe().endswith("; KV heads split 8 ways")


# --- issue 21, G2 seed 72: the largest tensor-parallel group, and what its refusal names ---------------------------
def test_the_largest_tensor_parallel_group_is_accepted_and_one_chip_more_refused_naming_what_was_given():
    from scaling_lib.estimate import MAX_TENSOR_PARALLEL

    # At the limit itself (a 128 x 128 mesh, given so that no mesh is searched) the deployment stands.
    at_limit = Deployment("palm-540b", "tpu-v4", MAX_TENSOR_PARALLEL, ffn_layout="2d-ws", mesh_shape=(128, 128))
    assert at_limit.tensor_parallel == MAX_TENSOR_PARALLEL
    # Beyond it: the refusal names the argument the group size came from, n_chips only when tensor_parallel was unset.
    twice = 2 * MAX_TENSOR_PARALLEL
    with pytest.raises(ValueError, match=rf"\bn_chips={twice}\b.*tensor_parallel unset.*pass tensor_parallel="):
        Deployment("palm-540b", "tpu-v4", twice, ffn_layout="2d-ws")
    with pytest.raises(ValueError, match=rf"^tensor_parallel={twice} .*pass tensor_parallel=") as refused:
        Deployment("palm-540b", "tpu-v4", twice, ffn_layout="2d-ws", tensor_parallel=twice)
    assert "n_chips" not in str(refused.value)


def test_a_step_with_no_work_costs_nothing_on_one_chip():
    # No sequence decoding, no prompt token: nothing to read, compute or send (one chip has no collectives).
    step = step_estimate(Deployment("llama3-8b", "h100", 1), efficiency=Efficiency())
    assert (step.weights_s, step.kv_s, step.matmul_s, step.attention_s, step.comm_s, step.total_s) == (0.0,) * 6


def test_an_offline_run_holds_its_batch_of_caches_at_the_mean_context_and_has_no_room_for_one_more():
    # LLaMA 3 8B on one H100, 1,000 tokens in and 200 out: each of the batch's caches holds on average
    # 1,000 + 200 / 2 = 1,100 tokens of 131,072 B (32 layers x 8 KV heads x 128 x 2 x 2 B). The batch is the largest
    # that fits, so the step's HBM is within the engine's share and one more such cache would not fit.
    run = offline_estimate(Deployment("llama3-8b", "h100", 1), 1000, 200, "typical")
    one_more = 1100 * 131_072
    assert run.step.hbm_bytes_per_chip <= run.step.hbm_capacity < run.step.hbm_bytes_per_chip + one_more


def test_a_pope_layout_moves_its_activations_in_the_activation_dtype():
    # 2D weight-stationary moves only activations: fp8 activations (1 byte) halve the bandwidth part of the
    # prefill's collectives against bf16 (2 bytes); the per-collective latency is the same.
    steps = {act: step_estimate(Deployment("llama3-70b", "tpu-v5e", 16, ffn_layout="2d-ws", activation_dtype=act),
                                prefill_tokens=8192, prefill_len=8192, efficiency=BOUND)
             for act in ("bf16", "fp8")}
    bandwidth = {act: step.comm_s - step.comm_latency_s for act, step in steps.items()}
    assert bandwidth["fp8"] == pytest.approx(bandwidth["bf16"] / 2, rel=1e-9)
    assert steps["fp8"].comm_latency_s == steps["bf16"].comm_latency_s > 0


# --- issue 21, third pass (G2): every mutant of offline_estimate and Deployment.__post_init__ ------------------------
def test_an_offline_iteration_is_the_decode_of_its_batch_plus_the_prefill_of_the_requests_it_replaces():
    # 100 tokens in, 6 out, 5 slots: the batch decodes at the mean context 100 + 6 / 2 = 103, and 5 / (6 - 1) = 1
    # request of 100 prompt tokens is prefilled per iteration. Reading, FLOPs and KV traffic add up; the weights are
    # read once; HBM holds the 5 caches at the mean context.
    d = Deployment("llama3-8b", "h100", 1)
    run = offline_estimate(d, 100, 6, slots=5)
    decode, first = decode_step(d, 5, 103), prefill(d, 100, 1)
    assert (run.batch, run.step.batch, run.step.tokens, run.mean_context) == (5, 5, 5 + 100, 103)
    for term in ("kv_s", "matmul_s", "attention_s"):
        assert getattr(run.step, term) == pytest.approx(getattr(decode, term) + getattr(first, term), rel=1e-12)
    assert run.step.weights_s == pytest.approx(decode.weights_s, rel=1e-12)
    assert run.step.hbm_bytes_per_chip == pytest.approx(decode.hbm_bytes_per_chip, rel=1e-12)


def test_an_offline_estimate_keeps_the_efficiency_it_was_priced_at():
    d = Deployment("llama3-8b", "h100", 1)
    assert offline_estimate(d, 128, 128, "typical", slots=8).efficiency is TYPICAL
    assert offline_estimate(d, 128, 128, slots=8).efficiency is BOUND
    # the typical estimate's overhead is in the step (with the launches and sequences of a step holding prompt tokens)
    assert offline_estimate(d, 128, 128, "typical", slots=8).step.overhead_s > TYPICAL.gpu.overhead_s > 0


def test_replicas_multiply_offline_throughput_and_each_runs_a_whole_batch():
    one = offline_estimate(Deployment("llama3-8b", "h100", 1), 1000, 100)
    two = offline_estimate(Deployment("llama3-8b", "h100", 2, tensor_parallel=1), 1000, 100)
    assert type(two.batch) is int and two.batch == one.batch
    assert two.output_tokens_per_s == pytest.approx(2 * one.output_tokens_per_s, rel=1e-12)


@pytest.mark.parametrize("kwargs, words", [(dict(input_len=0), r"\binput_len\b"), (dict(output_len=0), r"\boutput_len\b"),
                                           (dict(slots=0), r"\bslots\b"), (dict(slots=2.5), r"\bslots\b"),
                                           (dict(output_len=1), r"\boutput_len=1\b.*\buse estimate\.prefill for prompt-only work$")])
def test_a_bad_offline_request_names_its_argument(kwargs, words):
    args = dict(input_len=128, output_len=128) | kwargs
    with pytest.raises(ValueError, match=words):
        offline_estimate(Deployment("llama3-8b", "h100", 1), **args)


def test_offline_slots_over_the_engine_cap_are_named_and_the_bound_takes_them():
    d = Deployment("llama3-8b", "h100", 1, weight_dtype="fp8", kv_dtype="fp8", max_sequences=4)
    with pytest.raises(ValueError, match=r"\b5 slots of 100 \+ 100 tokens on llama3-8b\b.*\bmax_sequences=4\b"):
        offline_estimate(d, 100, 100, "typical", slots=5)
    assert offline_estimate(d, 100, 100, slots=5).batch == 5


def test_offline_slots_that_do_not_fit_say_so_for_the_bound_against_the_whole_chip():
    # 70B in bf16 on one H100 (141 GB of weights, 85.5 GB of HBM): at the bound the message names the chip's whole HBM
    d = Deployment("llama3-70b", "h100", 1)
    with pytest.raises(ValueError, match=r"\b1 slots of 10 \+ 10 tokens\b.*\bone h100 has 85\.5 GB\b.*\bweights alone\b"):
        offline_estimate(d, 10, 10, slots=1)


def test_an_offline_request_that_fits_nowhere_says_what_to_change():
    with pytest.raises(ValueError, match=r"\bquantize the weights or the KV cache, or add chips\b"):
        offline_estimate(Deployment("llama3-8b", "h100", 1), 500_000, 500_000)


def test_a_gpu_deployment_is_one_flat_group_and_stores_what_it_resolved():
    d = Deployment("llama3-8b", "h100", 8, max_sequences=4.0)
    assert d.mesh_shape == (8,) and d.tensor_parallel == 8 and type(d.max_sequences) is int and d.max_sequences == 4
    assert (d.model.name, d.chip.name) == ("llama3-8b", "h100")
    assert Deployment("llama3-8b", "h100", 8, tensor_parallel=2).mesh_shape == (2,)


def test_deployment_refusals_name_the_problem_and_the_fix_in_words():
    with pytest.raises(ValueError, match=r"\bidentical replicas\b.*\bpick a divisor of 8$"):
        Deployment("llama3-70b", "h100", 8, tensor_parallel=3)
    with pytest.raises(ValueError, match=r"\bholds 4 chips, not tensor_parallel=8\b.*\bpick axes whose product is 8$"):
        Deployment("llama3-70b", "tpu-v5e", 8, mesh_shape=(2, 2))
    with pytest.raises(ValueError, match=r"\bmemory_utilization\b.*\bthe share of HBM the engine may use\b"):
        Deployment("llama3-8b", "h100", 1, memory_utilization=0)
    with pytest.raises(ValueError, match=r"\bh100 is not a TPU torus \(NVLink\): use ffn_layout='1d-ws' \(Megatron tensor parallelism\)$"):
        Deployment("llama3-70b", "h100", 8, ffn_layout="2d-ws")
    with pytest.raises(ValueError, match=r"\bn_heads=64 of llama3-70b: Megatron tensor parallelism gives each chip "
                                         r"whole query heads\b"):
        Deployment("llama3-70b", "h100", 6)
    with pytest.raises(ValueError, match=r"\btensor_parallel=32768\) chips in one model copy: no ICI slice or NVLink "
                                         r"domain\b.*\bat most 16,384 here\b.*\bserve the rest as replicas$"):
        Deployment("palm-540b", "tpu-v4", 2**15, ffn_layout="2d-ws")


def test_a_pope_layout_needs_no_whole_heads_per_chip():
    # 2D weight-stationary splits d_model and d_ff, not heads: 48 heads on 64 chips stand.
    assert Deployment("palm-540b", "tpu-v4", 64, ffn_layout="2d-ws").tensor_parallel == 64


@pytest.mark.parametrize("kwargs, words", [
    (dict(mfu=True), r"\bEfficiency\.mfu must be a fraction of peak\b"),
    (dict(hbm="0.5"), r"\bEfficiency\.hbm must be a fraction of peak\b"),
    (dict(network=1.01), r"\bEfficiency\.network must be a fraction of peak\b"),
    (dict(latency=True), r"\bEfficiency\.latency must be a positive finite scale\b.*\(1\.0: as sourced\)"),
    (dict(latency="1"), r"\bEfficiency\.latency\b"),
    (dict(overhead_s=True), r"\bEfficiency\.overhead_s must be non-negative finite seconds per step\b"),
    (dict(overhead_s="0"), r"\bEfficiency\.overhead_s\b"),
    (dict(overhead_s=math.inf), r"\bEfficiency\.overhead_s\b"),
    (dict(overlap=None), r"\bEfficiency\.overlap must be True \(the bound's composition\) or False \(serial\)")])
def test_an_efficiency_refuses_a_wrong_type_or_range_naming_the_field_and_what_it_takes(kwargs, words):
    with pytest.raises(ValueError, match=words):
        Efficiency(**kwargs)


def test_an_efficiency_takes_every_rate_at_peak_and_any_finite_latency_scale():
    e = Efficiency(mfu=1, hbm=1, network=1, latency=1e9, overhead_s=0)
    assert (e.mfu, e.hbm, e.network, e.latency, e.overhead_s, e.overlap) == (1, 1, 1, 1e9, 0, False)


def _numbers(text):
    return [float(x) for x in re.findall(r"\d[\d,]*\.?\d*", text.replace(",", ""))]


def test_a_report_prices_tokens_from_its_price_chips_and_throughput_and_prints_them():
    # 2 chips at $2 per chip-hour cost $4 an hour: dollars per million tokens x tokens per hour / 1e6 = 4.
    r = report("llama3-8b", "h100", 2, batch=8, context_len=4096, prompt_len=1000, price_per_chip_hour=2.0)
    assert r.dollars_per_million_tokens_bound * r.tokens_per_s_bound * 3600 / 1e6 == pytest.approx(4.0, rel=1e-12)
    assert r.dollars_per_million_tokens_typical * r.tokens_per_s_typical * 3600 / 1e6 == pytest.approx(4.0, rel=1e-12)
    assert r.tokens_per_s_bound * r.decode_step_bound_s == pytest.approx(8, rel=1e-12)
    assert r.tokens_per_s_typical * r.decode_step_typical_s == pytest.approx(8, rel=1e-12)
    rows = {line[:29].strip(): line[29:] for line in r.describe().splitlines()}
    assert rows["deployment"] == r.deployment.describe() and rows["batch"] == "8"
    assert _numbers(rows["output tokens/s"]) == [round(r.tokens_per_s_bound), round(r.tokens_per_s_typical)]
    assert re.fullmatch(r"\d,\d{3} bound, \d,\d{3} typical", rows["output tokens/s"])  # whole tokens, thousands separated
    assert _numbers(rows["$ per million output tokens"]) == pytest.approx(
        [r.dollars_per_million_tokens_bound, r.dollars_per_million_tokens_typical, 2], abs=5e-4)
    assert "at the bound" in rows["$ per million output tokens"] and "(1,000-token prompt)" in rows["prefill"]
    assert _numbers(rows["KV cache per token"]) == [131.1] and rows["KV cache per token"].endswith(" kB")


def test_a_report_without_a_price_has_no_cost_and_prints_none():
    r = report("llama3-8b", "h100", 1, batch=4, context_len=1024)
    assert r.dollars_per_million_tokens_bound is None and r.dollars_per_million_tokens_typical is None
    assert r.as_dict()["dollars_per_million_tokens_typical"] is None and r.as_dict()["price_per_chip_hour"] is None
    assert "$" not in r.describe() and r.prompt_len == 1024  # the prompt defaults to the whole context


def test_a_report_prints_thousands_with_separators_and_the_batch_it_runs():
    r = report("llama3-8b", "h100", 1, batch=1200, context_len=128, max_sequences=3000)
    rows = {line[:23].strip(): line[23:].strip() for line in r.describe().splitlines()}
    assert rows["batch"] == "1,200" and "at most 3,000 per replica" in rows["largest batch that fits"]


def test_a_report_names_its_deployment_in_its_dictionary():
    r = report("llama3-8b", "tpu-v5e", 8, batch=8, context_len=1024, weight_dtype="int8", compute_dtype="int8",
               tensor_parallel=4)
    data = r.as_dict()
    assert (data["model"], data["chip"], data["n_chips"], data["tensor_parallel"]) == ("llama3-8b", "tpu-v5e", 8, 4)
    assert (data["weight_dtype"], data["kv_dtype"], data["compute_dtype"]) == ("int8", "bf16", "int8")
    assert data["weight_bytes"] == param_bytes(get_model("llama3-8b"), "int8")
    assert data["kv_bytes_per_token"] == 32 * 8 * 128 * 2 * 2  # layers x KV heads x head dim x (K, V) x 2 B


def test_a_report_with_a_quantized_cache_stores_its_cache_in_that_dtype():
    r = report("llama3-8b", "h100", 1, batch=4, context_len=1024, weight_dtype="fp8", kv_dtype="fp8")
    assert r.kv_bytes_per_token == 32 * 8 * 128 * 2 * 1 and r.weight_bytes == param_bytes(get_model("llama3-8b"), "fp8")
    assert r.deployment.kv_dtype == "fp8"


def test_a_report_refuses_a_prompt_longer_than_its_context_in_words():
    with pytest.raises(ValueError, match=r"\bprompt_len=5000 is longer than context_len=4096\b.*\bgive a context at "
                                         r"least as long as the prompt$"):
        report("llama3-8b", "h100", 1, context_len=4096, prompt_len=5000)
    assert report("llama3-8b", "h100", 1, batch=1, context_len=4096, prompt_len=4096).prompt_len == 4096


def test_a_report_whose_model_fits_nowhere_names_the_bytes():
    # refused at the engine's share of HBM (the report's batch is the typical estimate's), with one sequence per replica
    with pytest.raises(ValueError, match=r"^batch 1 at 8,192 tokens\b.*\bdoes not fit\b.*\bthe engine may use 77\.0 GB "
                                         r"of one h100's 85\.5 GB\b.*\bweights alone\b"):
        report("llama3-70b", "h100", 1)
    with pytest.raises(ValueError, match=r"^batch 2 at 8,192 tokens\b"):
        report("llama3-70b", "h100", 2, tensor_parallel=1)


def test_a_report_prefills_one_prompt_per_replica():
    # Two replicas prefill one prompt each at once: as long as one prompt on one chip.
    two = report("llama3-8b", "h100", 2, batch=2, context_len=1024, tensor_parallel=1)
    one = report("llama3-8b", "h100", 1, batch=1, context_len=1024)
    assert (two.prefill_bound_s, two.prefill_typical_s) == (one.prefill_bound_s, one.prefill_typical_s)
    assert two.max_batch == 2 * one.max_batch and two.decode_step_bound_s == one.decode_step_bound_s


def test_the_largest_batch_by_hand_and_none_when_the_weights_fill_the_chip():
    # 70B on 2 H100, 8,192 tokens: (85.5 GB - 70.6 GB) / 1.34 GB per sequence = 11 (see the test of the refusal above)
    assert max_batch(Deployment("llama3-70b", "h100", 2), 8192) == 11
    assert max_batch(Deployment("llama3-70b", "h100", 1), 8192) == 0
    assert max_batch(Deployment("llama3-70b", "h100", 4, tensor_parallel=2), 8192) == 22
    with pytest.raises(ValueError, match=r"\bcontext_len\b"):
        max_batch(Deployment("llama3-70b", "h100", 2), 0)


def test_decode_and_prefill_split_the_batch_over_replicas_and_refuse_a_remainder():
    d = Deployment("llama3-8b", "h100", 2, tensor_parallel=1)
    for call in (lambda: decode_step(d, 3, 128), lambda: prefill(d, 128, 3), lambda: decode_time(d, 3, 128, 2)):
        with pytest.raises(ValueError, match=r"\bbatch=3 does not split over 2 replicas; use a multiple of 2$"):
            call()
    one = Deployment("llama3-8b", "h100", 1)
    assert decode_step(d, 4, 128).total_s == decode_step(one, 2, 128).total_s
    assert prefill(d, 128, 4).total_s == prefill(one, 128, 2).total_s
    assert decode_time(d, 4, 128, 3) == decode_time(one, 2, 128, 3)


@pytest.mark.parametrize("call, name", [
    (lambda d: decode_step(d, 1, 0), "context_len"), (lambda d: decode_step(d, 0, 8), "batch"),
    (lambda d: prefill(d, 0), "prompt_len"), (lambda d: decode_time(d, 1, 8, 0), "steps"),
    (lambda d: decode_time(d, 1, -1, 2), "context_len"), (lambda d: decode_time(d, 1, 0.5, 2), "context_len")])
def test_the_step_functions_name_a_bad_count(call, name):
    with pytest.raises(ValueError, match=rf"\b{name}\b"):
        call(Deployment("llama3-8b", "h100", 1))


def test_decode_time_checks_the_memory_of_its_last_step_at_the_efficiency_asked_for():
    # 70B on 2 H100 holds 11 sequences of 8,192 tokens; 11 sequences decoding 500 more tokens would not fit.
    d = Deployment("llama3-70b", "h100", 2)
    assert decode_time(d, 11, 7000, 500) > 0
    with pytest.raises(ValueError, match=r"\bbatch 11 at 8,692 tokens of context\b.*\bdoes not fit\b"):
        decode_time(d, 11, 8192, 500)
    assert decode_time(d, 4, 1000, 10, "typical") > decode_time(d, 4, 1000, 10)


def test_a_refused_prefill_says_what_to_change():
    with pytest.raises(ValueError, match=r"\buse fewer or shorter prompts per pass, quantize, or add chips$"):
        prefill(Deployment("llama3-70b", "h100", 8), 100_000, 64)


@pytest.mark.parametrize("name", ["decode_batch", "decode_context", "prefill_tokens", "held_sequences",
                                  "held_tokens_each", "prefill_len"])
def test_step_estimate_names_each_bad_amount(name):
    with pytest.raises(ValueError, match=rf"\b{name}\b"):
        step_estimate(Deployment("llama3-8b", "h100", 1), **{name: -1})


def test_a_step_on_a_tpu_takes_the_tpu_half_of_the_calibration_and_a_gpu_the_gpu_half():
    tpu = step_estimate(Deployment("llama3-8b", "tpu-v5e", 1), decode_batch=1, decode_context=8, efficiency="typical")
    gpu = step_estimate(Deployment("llama3-8b", "h100", 1), decode_batch=1, decode_context=8, efficiency="typical")
    # one decoding sequence: each half's host overhead per step, plus the GPU host's cost of that sequence
    assert (tpu.overhead_s, gpu.overhead_s) == (TYPICAL.tpu.overhead_s, TYPICAL.gpu.overhead_s + TYPICAL.gpu.sequence_s)


def test_half_the_hbm_rate_doubles_the_reads_and_half_the_mfu_doubles_the_flops():
    d = Deployment("llama3-8b", "h100", 1)
    work = dict(decode_batch=4, decode_context=1000, prefill_tokens=100, prefill_len=100)
    peak = step_estimate(d, **work, efficiency=Efficiency())
    slow_hbm = step_estimate(d, **work, efficiency=Efficiency(hbm=0.5))
    slow_mfu = step_estimate(d, **work, efficiency=Efficiency(mfu=0.5))
    assert (slow_hbm.kv_s, slow_hbm.weights_s) == pytest.approx((2 * peak.kv_s, 2 * peak.weights_s), rel=1e-12)
    assert (slow_hbm.matmul_s, slow_hbm.attention_s) == (peak.matmul_s, peak.attention_s)
    assert (slow_mfu.matmul_s, slow_mfu.attention_s) == pytest.approx((2 * peak.matmul_s, 2 * peak.attention_s),
                                                                      rel=1e-12)
    assert (slow_mfu.kv_s, slow_mfu.weights_s) == (peak.kv_s, peak.weights_s)


def test_a_fractional_mean_context_attends_to_the_nearest_whole_number_of_keys_and_at_least_one():
    d = Deployment("llama3-8b", "h100", 1)
    attention = {c: step_estimate(d, decode_batch=1, decode_context=c).attention_s for c in (0, 1, 2.6, 3)}
    assert attention[0] == attention[1] > 0 and attention[2.6] == attention[3] == pytest.approx(3 * attention[1])


def test_tensor_parallel_chips_split_the_flops_and_the_step_may_use_the_engines_share_of_hbm():
    work = dict(decode_batch=4, decode_context=1000, prefill_tokens=100, prefill_len=100)
    one = step_estimate(Deployment("llama3-8b", "h100", 1), **work)
    two = step_estimate(Deployment("llama3-8b", "h100", 2), **work)
    assert (2 * two.matmul_s, 2 * two.attention_s) == pytest.approx((one.matmul_s, one.attention_s), rel=1e-12)
    assert one.hbm_capacity == H100.hbm_capacity
    assert step_estimate(Deployment("llama3-8b", "h100", 1), efficiency="typical").hbm_capacity == \
        pytest.approx(0.9 * H100.hbm_capacity, rel=1e-12)


def test_a_replicated_cache_writes_each_new_token_on_twice_the_chips_of_a_batch_split_one():
    # LLaMA 3 8B's 8 KV heads on 16 chips: replicated, each head's cache is written on 2 chips.
    work = dict(prefill_tokens=1000, prefill_len=1000)
    replicated = step_estimate(Deployment("llama3-8b", "h100", 16), **work)
    split = step_estimate(Deployment("llama3-8b", "h100", 16, kv_placement="batch-split"), **work)
    assert replicated.kv_s == pytest.approx(2 * split.kv_s, rel=1e-12)


def test_the_bounds_collectives_are_the_line_rate_floor_and_one_nvlink_step():
    # 8 H100 behind NVSwitch with in-switch reduction: an all-reduce must move the array each way, V / 450 GB/s, no
    # faster; the shortest latency is one NVLink step. LLaMA 3 70B, batch 16: V = 16 x 8192 x 2 B, two per layer.
    step = decode_step(Deployment("llama3-70b", "h100", 8), 16, 1024)
    assert step.comm_bandwidth_s == pytest.approx(80 * 2 * 16 * 8192 * 2 / 450e9, rel=1e-6)
    zero = collective_time("all-reduce", 0.0, "h100", 8)
    assert step.comm_latency_s == pytest.approx(80 * 2 * zero.bound_s, rel=1e-12) and zero.bound_s < zero.latency_s


@pytest.mark.parametrize("call, name", [(lambda: decode_time("llama3-70b", 32, 8192, 4), "decode_time"),
                                        (lambda: prefill("llama3-70b", 8192), "prefill"),
                                        (lambda: step_estimate("llama3-70b", decode_batch=1), "step_estimate")])
def test_the_step_functions_of_a_model_name_point_to_deployment(call, name):
    with pytest.raises(ValueError, match=rf"\bestimate\.{name}'s first argument\b"):
        call()


def test_a_step_prices_only_what_it_is_given():
    # Left out, the decode context is 0 (no cache to read), the prompts are 1 token long, and nothing is held.
    d = Deployment("llama3-8b", "h100", 1)
    assert step_estimate(d, decode_batch=2).kv_s == 0.0
    assert step_estimate(d, prefill_tokens=5).attention_s == pytest.approx(prefill(d, 1, 5).attention_s, rel=1e-12)
    weights = param_bytes(get_model("llama3-8b"))
    assert step_estimate(d, held_tokens_each=1000).hbm_bytes_per_chip == weights  # no sequence held
    assert step_estimate(d, held_sequences=3).hbm_bytes_per_chip == weights  # three empty caches


def test_a_long_prefill_prints_in_milliseconds_to_a_tenth():
    # A 32,768-token prompt of 70B on 8 H100 takes seconds: printed in ms, each figure to within 0.05 ms.
    r = report("llama3-70b", "h100", 8, batch=8, context_len=32768)
    row = next(line for line in r.describe().splitlines() if line.startswith("prefill"))
    printed = _numbers(row.split("(")[0])
    assert printed == pytest.approx([r.prefill_bound_s * 1e3, r.prefill_typical_s * 1e3], abs=0.05)
    assert r.prefill_typical_s > 1.0 and row.endswith("ms typical (32,768-token prompt)")


@pytest.mark.parametrize("placement", ["replicated", "batch-split"])
def test_a_deployment_describes_where_the_kv_cache_goes_past_the_kv_heads(placement):
    # LLaMA-3-8B has 8 KV heads: on 16 chips of one replica they split 8 ways, then the cache is replicated or split
    # by batch; on 8 chips the heads alone place it.
    wide = Deployment("llama3-8b", "h100", 16, kv_placement=placement).describe()
    assert wide.endswith(f"KV heads split 8 ways, then {placement}")
    assert Deployment("llama3-8b", "h100", 8, kv_placement=placement).describe().endswith("KV heads split 8 ways")


# --- what a step moves for a hybrid's state, a sparse-attention read and a mixed-precision checkpoint ------------------
def _published_model(stem):
    from scaling_lib.models import from_hf_config
    from tests import REPO
    return from_hf_config(REPO / "book" / "data" / "hf_configs" / f"{stem}.json")


@pytest.mark.parametrize("context", [1024, 65536])
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
