"""Edges of the full estimate, the calibration and the measurements that a mutation sample found untested.

Each expected value is worked by hand (or read off the published row), not taken from the function under test.
"""

import math
import re

import pytest

from scaling_lib.calibration import compare, fit_efficiency
from scaling_lib.collectives import bus_bandwidth, collective_time
from scaling_lib.estimate import (BOUND, TYPICAL, Deployment, Efficiency, decode_step, decode_time, offline_estimate,
                                  offline_throughput, prefill, report, resolve_efficiency, step_estimate)
from scaling_lib.memory import kv_cache_bytes, param_bytes
from scaling_lib.measurements import pope_row, pope_rows, trtllm_rows
from scaling_lib.models import get_model


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


def test_what_a_step_holds_in_hbm_is_the_weights_plus_the_caches_it_keeps():
    m, d = get_model("llama3-8b"), Deployment("llama3-8b", "h100", 2)
    weights_per_chip = param_bytes(m) / 2
    # One replica, 2-way tensor parallel: each chip keeps half of every cache (4 of the 8 KV heads).
    first = prefill(d, 4096, batch=2)
    assert first.hbm_bytes_per_chip == pytest.approx(weights_per_chip + kv_cache_bytes(m, 4096, 2) / 2)
    step = decode_step(d, 4, 1024)
    assert step.hbm_bytes_per_chip == pytest.approx(weights_per_chip + kv_cache_bytes(m, 1024, 4) / 2)


def test_decode_time_is_steps_times_the_step_at_the_mean_context():
    d = Deployment("llama3-8b", "h100", 1)
    # 4 steps from 1,000 cached tokens attend to 1,001 ... 1,004 tokens: mean 1,002.5
    mean = step_estimate(d, decode_batch=8, decode_context=1002.5, held_sequences=8, held_tokens_each=1004)
    assert decode_time(d, 8, 1000, 4) == pytest.approx(4 * mean.total_s)


def test_a_slow_network_stretches_only_the_bandwidth_part_of_the_collectives():
    d = Deployment("llama3-70b", "ironwood", 8)
    at_peak = decode_step(d, 8, 1024, Efficiency())
    assert 0 < at_peak.comm_latency_s < at_peak.comm_s  # [8, D] all-reduces: latency plus a small bandwidth term
    slow = decode_step(d, 8, 1024, Efficiency(network=1e-6))  # a million times slower bandwidth
    assert slow.comm_latency_s == pytest.approx(at_peak.comm_latency_s)
    assert slow.comm_bandwidth_s == pytest.approx(1e6 * at_peak.comm_bandwidth_s)
    later = decode_step(d, 8, 1024, Efficiency(latency=3.0))  # three times the sourced latency
    assert later.comm_latency_s == pytest.approx(3 * at_peak.comm_latency_s)
    assert later.comm_bandwidth_s == pytest.approx(at_peak.comm_bandwidth_s)


def test_a_decode_batch_that_does_not_fit_says_what_to_change():
    d = Deployment("llama3-70b", "h100", 8)
    with pytest.raises(ValueError, match=r"quantize the KV cache or the weights, or add chips$"):
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


def test_each_comparison_names_the_system_that_was_measured():
    assert compare(trtllm_rows()[0]).system == "TensorRT-LLM"
    assert compare(pope_rows()[0]).system == "Pope et al."


def test_an_unknown_pope_row_lists_the_known_ones():
    with pytest.raises(ValueError) as err:
        pope_row("palm-540b", "no such scenario", "decode")
    known = str(err.value).split("known rows: ", 1)[1]
    assert known.count("), (") == len(pope_rows()) - 1


# ------------------------------------------------------------------------------ a second mutation sample's survivors
def test_each_comparison_keeps_its_rows_label_and_workload():
    for row in trtllm_rows():
        c = compare(row)
        assert c.label == row.label and c.shape in row.label  # "llama3-70b h200 TP1 128/128" -> "128/128"
        assert c.shape == f"{row.input_len}/{row.output_len}"
    for row in pope_rows():
        c = compare(row)
        assert (c.label, c.shape) == (row.label, row.phase)


def test_the_dominant_term_is_taken_at_the_efficiency_asked_for():
    # At the bound PaLM 540B's low-latency prefill is compute-bound (2 P T over 64 chips' FLOP/s); with the network at
    # 1% of its bandwidth the layout's collectives take longer than the matmuls.
    prefill_row = pope_row("palm-540b", "low latency", "prefill")
    slow_network = Efficiency(network=0.01)
    assert (compare(prefill_row).dominant, compare(prefill_row, slow_network).dominant) == ("flops", "communication")
    decode_row = pope_row("palm-540b", "high throughput", "decode")
    assert (compare(decode_row).dominant, compare(decode_row, slow_network).dominant) == ("flops", "communication")


def test_trtllm_rows_carry_the_tensor_parallel_degree_their_label_names():
    for row in trtllm_rows():
        assert row.tensor_parallel == int(re.search(r"\bTP(\d+)\b", row.label).group(1))


def test_an_all_reduce_across_nodes_costs_more_latency_than_inside_one():
    # Two nodes of 8 H100: the network steps cost more than NVLink steps (collectives prices NCCL's model).
    assert collective_time("all-reduce", 1e6, "h100", 16).latency_s > collective_time("all-reduce", 1e6, "h100", 8).latency_s


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
    with pytest.raises(ValueError, match=r"quantize them or raise tensor_parallel$"):
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


def test_offline_throughput_passes_the_parallelism_and_the_kv_placement_through():
    one = offline_throughput("llama3-8b", "h100", 1, 1000, 1000)
    assert offline_throughput("llama3-8b", "h100", 8, 1000, 1000, tensor_parallel=1) == pytest.approx(8 * one)
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


def test_decode_attention_is_linear_in_the_keys_from_the_first_and_capped_by_a_window():
    d = Deployment("llama3-8b", "h100", 1)
    assert 2 * decode_step(d, 1, 1).attention_s == pytest.approx(decode_step(d, 1, 2).attention_s)
    windowed = Deployment(get_model("llama3-8b").with_(sliding_window=1024), "h100", 1)
    assert decode_step(windowed, 1, 8192).attention_s == pytest.approx(decode_step(windowed, 1, 1024).attention_s)


@pytest.mark.parametrize("kwargs, name", [(dict(mesh_shape=(0, 8)), "mesh_shape"), (dict(ffn_layout="3d"), "ffn_layout")])
def test_a_bad_deployment_names_the_field(kwargs, name):
    with pytest.raises(ValueError, match=rf"\b{name}\b"):
        Deployment("llama3-70b", "tpu-v5e", 8, **kwargs)


def test_an_efficiency_of_zero_is_refused():
    for field in ("mfu", "hbm", "network"):
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


# ------------------------------------------- survivors of the independent sample (seed 2), killed after it was measured
def test_a_comparison_carries_its_row():
    for row in trtllm_rows()[:2] + pope_rows()[:2]:
        assert compare(row).row is row


def test_the_smallest_efficiency_searched_is_named_when_it_is_out_of_range():
    with pytest.raises(ValueError, match=r"\blow\b.*the smallest efficiency searched"):
        fit_efficiency(lambda efficiency: [1.0], low=0)


def test_cross_node_collectives_keep_their_name_and_bus_bandwidth_names_a_bad_one():
    assert collective_time("all-reduce", 1e9, "h100", 16).op == "all-reduce"
    with pytest.raises(ValueError, match=r"unknown collective op 'all-sum'"):
        bus_bandwidth("all-sum", 1e9, 1e-3, 8)


def test_bandwidth_bound_all_to_alls_move_the_queries_of_the_whole_batch():
    # As above, but batch 2,000: [2000, 40 heads, 128] bf16 = 20.5 MB over 5 chips is bandwidth-bound.
    m = get_model("llama2-13b").with_(n_kv_heads=8)
    split = decode_step(Deployment(m, "tpu-v5e", 10), 2000, 128, Efficiency())
    replicated = decode_step(Deployment(m, "tpu-v5e", 10, kv_placement="replicated"), 2000, 128, Efficiency())
    swap = collective_time("all-to-all", 2000 * 40 * 128 * 2, "tpu-v5e", 5)
    assert swap.bandwidth_s > swap.latency_s
    assert split.comm_s - replicated.comm_s == pytest.approx(40 * 2 * (swap.bandwidth_s + swap.latency_s))
    assert split.comm_bandwidth_s - replicated.comm_bandwidth_s == pytest.approx(40 * 2 * swap.bandwidth_s)


def test_what_does_not_fit_is_priced_in_gb():
    # LLaMA-3-70B in bf16 is 70.55e9 x 2 B = 141.1 GB, more than an 80 GB H100 holds.
    with pytest.raises(ValueError, match=r"the weights alone \(141\.1 GB per chip\)"):
        decode_step(Deployment("llama3-70b", "h100", 1), 1, 1024)
    # One 300,000 + 400,000-token request in fp8: 70.6 GB of weights + 500,000 mean tokens x 163,840 B = 81.9 GB.
    with pytest.raises(ValueError, match=r"needs 152\.5 GB per chip \(70\.6 GB of weights \+ 81\.9 GB of KV cache\)"):
        offline_estimate(Deployment("llama3-70b", "h200", 1, weight_dtype="fp8", kv_dtype="fp8"), 300_000, 400_000)


def test_an_offline_estimate_and_a_report_keep_their_lengths():
    assert offline_estimate(Deployment("llama3-8b", "h100", 1), 1000, 500).input_len == 1000
    assert report("llama3-8b", "h100", 1, context_len=4096, prompt_len=1024).prompt_len == 1024


def test_step_estimate_names_a_bad_held_count():
    with pytest.raises(ValueError, match=r"\bheld_sequences\b"):
        step_estimate(Deployment("llama3-8b", "h100", 1), held_sequences=-1)


def test_a_deployment_takes_an_explicit_mesh_and_tensor_parallel_degree():
    assert Deployment("llama3-70b", "tpu-v5e", 8, mesh_shape=(2, 4)).mesh_shape == (2, 4)
    assert Deployment("llama3-8b", "h100", 8, tensor_parallel=4).replicas == 2
    with pytest.raises(ValueError, match=re.escape("(or a Pope et al. layout such as ffn_layout='2d-ws' on a TPU "
                                                   "torus)")):
        Deployment("llama3-8b", "tpu-v5e", 48)


def test_pope_rows_cite_their_table():
    for row in pope_rows():
        assert row.source.startswith("Pope et al. 2022") and re.search(r"Table [23]", row.source)


# ------------------------------------------------------------------ issue 23: engine settings, placement, mutants
def test_output_tokens_per_s_counts_the_first_token_from_the_prefill():
    # With O = 2 each finishing request produced 2 tokens but decoded only 1 of them: the factor O / (O - 1) = 2.
    estimate = offline_estimate(Deployment("llama3-8b", "h100", 1), 128, 2)
    assert estimate.output_tokens_per_s == pytest.approx(estimate.batch * 2 / estimate.step.total_s)


def test_a_pope_decode_comparison_reads_the_first_decode_step():
    # The dominant term of a decode row comes from the step that attends to context_len + 1 keys.
    row = pope_row("palm-540b", "low latency", "decode")
    from scaling_lib.calibration import pope_deployment
    step = decode_step(pope_deployment(row), row.batch, row.context_len + 1)
    assert compare(row).step.kv_s == pytest.approx(step.kv_s)
    assert compare(row).step.kv_s != pytest.approx(decode_step(pope_deployment(row), row.batch, row.context_len).kv_s)


def test_the_kv_cache_is_replicated_by_default_on_gpus_and_batch_split_on_tpus():
    # LLaMA-3-8B has 8 KV heads: 16-way tensor parallelism on H100 keeps each head on 2 chips (2 copies).
    gpu = Deployment("llama3-8b", "h100", 16)
    assert gpu.kv_placement == "replicated" and gpu.kv_copies == 2
    tpu = Deployment("llama3-8b", "tpu-v5e", 16)
    assert tpu.kv_placement == "batch-split" and tpu.kv_copies == 1
    assert Deployment("llama3-8b", "h100", 16, kv_placement="batch-split").kv_copies == 1


def test_the_engine_settings_shape_the_estimate_and_not_the_bound():
    # LLaMA-3-8B in fp8 on one H100 at 128/128: 8.0 GB of weights leave room for far more than 2,048 sequences.
    d = Deployment("llama3-8b", "h100", 1, weight_dtype="fp8", kv_dtype="fp8", compute_dtype="fp8")
    bound, typical = offline_estimate(d, 128, 128), offline_estimate(d, 128, 128, "typical")
    per_sequence = d.kv_bytes_per_chip(1, 128 + 64)
    assert bound.batch == int((d.chip.hbm_capacity - d.weight_bytes_per_chip) // per_sequence)  # all of HBM
    assert typical.batch == 2048  # max_sequences caps it
    small = Deployment("llama3-8b", "h100", 1, weight_dtype="fp8", kv_dtype="fp8", compute_dtype="fp8",
                       memory_utilization=0.2, max_sequences=100_000)
    assert offline_estimate(small, 128, 128, "typical").batch == int(
        (0.2 * d.chip.hbm_capacity - d.weight_bytes_per_chip) // per_sequence)
    assert offline_estimate(small, 128, 128).batch == bound.batch  # the bound ignores both settings
    assert offline_throughput("llama3-8b", "h100", 1, 128, 128, memory_utilization=0.2) == \
        offline_throughput("llama3-8b", "h100", 1, 128, 128)
    assert offline_throughput("llama3-8b", "h100", 1, 128, 128, efficiency="typical", max_sequences=8) < \
        offline_throughput("llama3-8b", "h100", 1, 128, 128, efficiency="typical")
    r = report("llama3-8b", "h100", 1, context_len=1024, max_sequences=16, memory_utilization=0.5,
               kv_placement="batch-split")
    assert (r.batch, r.deployment.memory_utilization, r.deployment.kv_placement) == (16, 0.5, "batch-split")


def test_an_estimate_refuses_a_batch_over_the_engine_cap_and_the_bound_does_not():
    d = Deployment("llama3-8b", "h100", 1, weight_dtype="fp8", kv_dtype="fp8", max_sequences=4)
    assert decode_step(d, 8, 128).batch == 8
    with pytest.raises(ValueError, match=r"exceed max_sequences=4"):
        decode_step(d, 8, 128, "typical")
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


def test_efficiency_fields_beyond_the_rates_are_checked():
    for kwargs, field in ((dict(latency=0), "latency"), (dict(latency=math.inf), "latency"),
                          (dict(overhead_s=-1e-3), "overhead_s"), (dict(overlap=1), "overlap")):
        with pytest.raises(ValueError, match=rf"Efficiency\.{field}\b"):
            Efficiency(**kwargs)
    assert BOUND == Efficiency(overlap=True)


def test_the_kv_cache_is_replicated_on_a_full_mesh_gpu_too():
    # MI300X joins its GPUs in a full mesh, not a switch: still a GPU, still a replicated cache beyond K heads.
    assert Deployment("llama3-8b", "mi300x", 16).kv_placement == "replicated"
