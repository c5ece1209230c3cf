"""Edge cases the mutation run (`make mutation`) showed no test looked at: each test here kills mutants that survived
every other test, by a hand-worked value, a boundary, or a default. Expected values are spelled out by hand from the
hardware table and the model shapes, or come from a different public function than the one under test."""

import dataclasses
import math

import numpy as np
import pytest

from scaling_lib import _validate
from scaling_lib.flops import decode_step_flops
from scaling_lib.hardware import get_chip
from scaling_lib.inference import decode_step_time, decode_throughput, explain_decode, prefill_time
from scaling_lib.kv_levers import kv_footprint, kv_lever_table, evenly_ragged_lengths
from scaling_lib.collectives import Collective, ring_bytes_sent
from scaling_lib.context_limits import max_context_length
from scaling_lib.layouts import ffn_collectives, ffn_layer_time
from scaling_lib.models import Transformer, get_model
from scaling_lib.moe import as_moe, expected_experts_touched, expert_sharded_memory, moe_weights
from scaling_lib.quantization import quantization_table
from scaling_lib.roofline import (attainable_flops, attention_flops, explain_matmul, fit_batch_roofline, matmul_time,
                                  ridge_point)
from scaling_lib.simulator import ServingConfig, Workload, poisson_workload, simulate, trace_workload
from scaling_lib.speculative import best_lookahead, best_roofline_lookahead, roofline_step
from scaling_lib.units import format_quantity, parse_unit

V5E_W = 8.2e11  # B/s of HBM per TPU v5e


# --- closed forms: hand-worked values -----------------------------------------------------------------------------
def test_attention_flops_counts_every_query():
    # 4 B T S N H = 4 x 7 x 3 x 5 x 2 x 4
    assert attention_flops(3, 5, n_heads=2, head_dim=4, batch=7) == 3360


def test_decode_step_attention_flops_scale_with_the_batch():
    assert decode_step_flops("llama3-8b", 4096, batch=8).attention == 8 * decode_step_flops("llama3-8b", 4096).attention


def test_decode_kv_read_of_one_ffn_layer_by_hand():
    # PaLM 540B, 64 chips, 64 sequences of 2,048 tokens: 2 x 118 x 1 x 256 x 2 B per token over 118 layers = 1,024 B
    # per token and layer; 64 x 2,048 x 1,024 B / 64 chips / 1.2e12 B/s = 1.7476 us.
    layer = ffn_layer_time("2d-ws", "palm-540b", "tpu-v4", (4, 4, 4), 64, "decode", context_len=2048)
    assert layer.kv_memory_s == pytest.approx(64 * 2048 * 1024 / 64 / 1.2e12, rel=1e-12)


def test_heads_sharded_context_of_multihead_palm_on_8_chips_by_hand():
    # 48 KV heads of 128 on 8 chips: 6 per chip; 2 x 118 x 6 x 128 x 2 B = 362,496 B per token for each of the 16
    # sequences; 0.3 x 32 GiB / (16 x 362,496 B) = 1,777.2 -> 1,777 tokens.
    assert max_context_length("palm-540b-multihead", "tpu-v4", 8, 16, "heads") == 1777
    assert math.floor(0.3 * 32 * 2**30 / (16 * 362_496)) == 1777


def test_ring_bytes_and_collective_names():
    assert ring_bytes_sent(Collective("all-gather", "weights", 1.6e6, (4, 4))) == pytest.approx(1.5e6, rel=1e-12)
    assert [c.op for c in ffn_collectives("1d-ws", "palm-540b", 64, (4, 4, 4))] == ["all-gather", "reduce-scatter"]
    assert [c.op for c in ffn_collectives("2d-ws", "palm-540b", 64, (4, 4, 4))] == [
        "all-gather", "reduce-scatter", "all-gather", "reduce-scatter"]


def test_every_expert_active_touches_all_of_them():
    assert expected_experts_touched(4, 4, 3) == 4.0


def test_expert_sharded_memory_by_hand_with_the_default_model_shards():
    # sb7-worked as a 16-expert MoE: 64 layers x 3 x 4,096 x 16,384 x 16 experts = 206,158,430,208 FFN parameters;
    # int8 over 16 expert shards (and the default 1 model shard): 12,884,901,888 B per chip.
    memory = expert_sharded_memory(as_moe("sb7-worked", 16, 2), "tpu-v5e", expert_shards=16, dtype="int8")
    assert memory.expert_bytes_per_chip == 64 * 3 * 4096 * 16384 * 16 / 16


def test_moe_weights_of_a_model_that_is_already_an_moe_start_from_its_dense_form():
    assert moe_weights(as_moe("sb7-worked", 8, 2), 16, 2) == moe_weights("sb7-worked", 16, 2)


def test_kv_lever_table_without_a_gqa_step_and_its_combined_row():
    rows = kv_lever_table("llama3-8b", 8192, 4, n_kv_heads=8)  # K is already 8: no GQA row
    assert [r.lever for r in rows][0] == "MQA"
    combined = kv_footprint("llama3-8b", evenly_ragged_lengths(8192, 4), "int8", 1024, 6, 2, 16)
    assert rows[-1].stored_bytes == combined.stored_bytes and rows[-1].read_bytes == combined.read_bytes


def test_explain_matmul_and_decode_use_every_dtype_they_are_given():
    report = explain_matmul("tpu-v5e", 64, 8192, 8192, "int8", "int8")
    assert report.ridge == ridge_point("tpu-v5e", "int8")
    assert report.time == matmul_time(64, 8192, 8192, "tpu-v5e", 1, "int8", "int8", "int8")
    assert report.attainable_flops == attainable_flops(report.intensity, "tpu-v5e", "int8")
    step = decode_step_time("llama3-70b", "h100", 8, 64, 4096, "int8", "fp8", "fp8")
    assert decode_throughput("llama3-70b", "h100", 8, 64, 4096, "int8", "fp8", "fp8") == 64 / step.total_s
    assert explain_decode("llama3-70b", "h100", 8, 64, 4096, "int8", "fp8", "fp8").step == step
    spec = roofline_step("llama3-70b", "tpu-7x", 8, 4, 4096, 3, 0.6, 0.05, "fp8", "fp8", "fp8")
    assert spec.plain_step_s == decode_step_time("llama3-70b", "tpu-7x", 8, 4, 4096, "fp8", "fp8", "fp8").total_s


def test_fit_batch_roofline_floor_is_the_median_odd_or_even():
    batches, seconds = [1, 2, 4, 8], [1.0, 3.0, 5.0, 8.0]
    assert fit_batch_roofline(batches, seconds, n_floor=2).floor_s == 2.0  # mean of the middle two
    assert fit_batch_roofline(batches, seconds, n_floor=3).floor_s == 3.0
    with pytest.raises(ValueError, match="^seconds entry must be positive"):
        fit_batch_roofline([1, 2], [1.0, -2.0])


def test_best_lookahead_default_cap_is_16():
    assert best_lookahead(0.99, 0.0) == 16
    assert best_roofline_lookahead("llama3-70b", "tpu-v5e", 16, 1, 2048, 0.99, 0.0) == 16


def test_describe_prints_the_reports_numbers():
    matmul = explain_matmul("tpu-v5e", 64)
    t = matmul.time
    assert (f"time >= {t.total_s * 1e6:,.1f} us (math {t.compute_s * 1e6:,.1f} us, memory {t.memory_s * 1e6:,.1f} us)"
            in matmul.describe())
    report = explain_decode("llama2-13b", "tpu-v5e", 8, 16, 8192)
    text = report.describe().splitlines()
    assert len(text) == 5
    assert f"FLOPs {report.step.compute_s * 1e3:.2f} ms)" in text[1]
    assert text[3].startswith(f"memory: {report.weight_bytes / 1e9:.1f} GB weights + {report.kv_bytes / 1e9:.1f} GB")


# --- units ----------------------------------------------------------------------------------------------------------
def test_format_quantity_keeps_scientific_notation_and_groups_large_plain_numbers():
    assert format_quantity(1.5e12, "B") == "1.5e+12 B"
    assert format_quantity(12345.0, "B", 3) == "1.23e+04 B"
    assert format_quantity(4.98e-3, "ms") == "4.98 ms"


@pytest.mark.parametrize("unit", ["k", "ktok", "ksequences", "Mchips", "G%"])
def test_parse_unit_refuses_a_prefix_on_a_count(unit):
    with pytest.raises(ValueError, match="unknown unit"):
        parse_unit(unit)


# --- inputs that validate themselves ------------------------------------------------------------------------------
@pytest.mark.parametrize("field", ["hbm_bandwidth", "hbm_capacity"])
def test_chip_fields_must_be_positive(field):
    chip = get_chip("tpu-v5e")
    with pytest.raises(ValueError, match=rf"^tpu-v5e: {field} must be positive, got 0"):
        dataclasses.replace(chip, **{field: 0})
    with pytest.raises(ValueError, match="^tpu-v5e: topology link_bandwidth must be positive or None, got 0"):
        dataclasses.replace(chip, topology=dataclasses.replace(chip.topology, link_bandwidth=0))
    with pytest.raises(ValueError, match=r"FLOP/s for bf16 must be positive"):
        dataclasses.replace(chip, peak_flops_table=(("bf16", 0.0),))
    assert chip.peak_flops() == chip.peak_flops("bf16")
    with pytest.raises(ValueError, match="aliases: ironwood"):
        get_chip("tpu-v9")


def test_transformer_refuses_a_non_string_name_and_a_non_bool_tie():
    base = dict(n_layers=2, d_model=64, d_ff=128, n_heads=4, n_kv_heads=2, head_dim=16, vocab_size=256)
    with pytest.raises(ValueError, match="^name must be a string, got 3$"):
        Transformer(**base, name=3)
    with pytest.raises(ValueError, match="^tied_embeddings must be True or False, got 1$"):
        Transformer(**base, tied_embeddings=1)


def test_messages_of_the_validation_helpers_are_exact():
    with pytest.raises(ValueError, match=r"^x must be in \(0, 1\], got 0$"):
        _validate.fraction("x", 0)
    with pytest.raises(ValueError, match="^lengths must list at least one sequence length$"):
        kv_footprint("llama3-8b", [])
    with pytest.raises(ValueError, match="^schemes must list at least 1 entry"):
        quantization_table("llama3-8b", "h100", 1, 1024, 8, schemes=[])


# --- the simulator ----------------------------------------------------------------------------------------------------
CONFIG = ServingConfig("llama3-70b", "tpu-v5e", n_chips=16, max_batch=4, max_context_len=4096)


def _chunk(tokens):
    return prefill_time("llama3-70b", "tpu-v5e", 16, tokens, 0.4)


def test_chunked_engine_fills_every_chunk_to_its_last_token():
    # 511 + 513 prompt tokens, chunks of 512: step 1 takes A's 511 and 1 of B's; step 2 the other 512 of B, reading
    # the 1 token of B already cached (327,680 B of KV, bf16 LLaMA-3-70B) -- B's first token ends step 2.
    result = simulate(CONFIG, trace_workload([(0.0, 511, 1), (0.0, 513, 1)]), "chunked")
    assert result.first_token_s[1] == pytest.approx(2 * _chunk(512) + 327_680 / (16 * V5E_W), rel=1e-9)


def test_chunked_engine_reads_at_most_a_window_of_the_prefix():
    # A 256-token sliding window: the second chunk of a 1,024-token prompt reads 256 cached tokens, not 512.
    windowed = ServingConfig(get_model("llama3-70b").with_(sliding_window=256, name="llama3-70b-w256"), "tpu-v5e",
                             n_chips=16, max_batch=4, max_context_len=4096)
    result = simulate(windowed, trace_workload([(0.0, 1024, 1)]), "chunked")
    assert result.ttft_s[0] - 2 * _chunk(512) == pytest.approx(256 * 327_680 / (16 * V5E_W), rel=1e-6)


def test_a_full_batch_and_a_two_token_output():
    # Four requests fill max_batch = 4; each makes its second token in one decode step at batch 4.
    result = simulate(CONFIG, trace_workload([(0.0, 100, 2)] * 4), "naive")
    step = decode_step_time("llama3-70b", "tpu-v5e", 16, 4, 101)
    assert np.allclose(result.finish_s - result.first_token_s, step.total_s, rtol=1e-9)
    assert result.generated_tokens.tolist() == [2, 2, 2, 2]


def test_windowed_decode_before_any_sequence_reaches_the_window():
    model = get_model("llama3-8b").with_(sliding_window=512, name="llama3-8b-local")
    config = ServingConfig(model, "h100", n_chips=1, max_batch=4, max_context_len=2048)
    result = simulate(config, trace_workload([(0.0, 100, 600), (0.0, 200, 600)]), "naive")
    expected = sum(decode_step_time(model, "h100", 1, 2, (min(100 + j, 512) + min(200 + j, 512)) / 2).total_s
                   for j in range(1, 600))
    assert result.finish_s[0] - result.first_token_s[0] == pytest.approx(expected, rel=1e-9)


def test_one_token_outputs_have_no_time_per_output_token():
    result = simulate(CONFIG, trace_workload([(0.0, 100, 1), (0.1, 50, 1)]), "interleaved")
    assert math.isnan(result.p50_tpot_s) and math.isnan(result.p99_tpot_s)


def test_queue_length_over_staggered_arrivals():
    result = simulate(CONFIG, trace_workload([(0.0, 4000, 2), (0.01, 4000, 2), (0.02, 4000, 2)]), "interleaved")
    times, lengths = result.queue_length()
    assert lengths.tolist() == [0, 1, 2, 1, 0]
    np.testing.assert_allclose(times[:3], [0.0, 0.01, 0.02])


def test_workload_defaults_and_length_functions():
    assert poisson_workload(1.0, 3).output_len.tolist() == [256] * 3
    np.testing.assert_array_equal(poisson_workload(1.0, 3).arrival_s, poisson_workload(1.0, 3, seed=0).arrival_s)
    fixed = poisson_workload(1.0, 3, prompt_len=lambda rng, n: np.full(n, 77))
    assert fixed.prompt_len.tolist() == [77] * 3
    with pytest.raises(ValueError, match=r"^prompt_len: the function gave shape \(2,\)"):
        poisson_workload(1.0, 3, prompt_len=lambda rng, n: np.ones(2, int))
    # The disaggregated default is one prefill and one decode server.
    assert simulate(CONFIG, trace_workload([(0.0, 100, 3)]), "disaggregated").n_chips == 2 * 16


def test_workload_and_simulate_messages():
    with pytest.raises(ValueError, match="^arrival_s must be finite and non-negative$"):
        Workload([-1.0], [10], [5])
    with pytest.raises(ValueError, match="^arrival_s, prompt_len and output_len must be 1-D of one length"):
        Workload([0.0, 1.0], [10], [5])
    with pytest.raises(ValueError, match=r"^cached_len must lie in \[0, prompt_len - 1\]"):
        Workload([0.0], [10], [5], cached_len=[10])
    with pytest.raises(ValueError, match="^workload must be a Workload"):
        simulate(CONFIG, [(0.0, 10, 5)], "naive")


# --- second round: survivors of the measured sample -------------------------------------------------------------
def test_layouts_edges_by_hand():
    from scaling_lib.attention_sharding import attention_collectives
    from scaling_lib.context_limits import context_length_table
    from scaling_lib.layouts import best_layout, comm_volume_curves, layout_switch_points, wg_optimal_gather_size

    # Batch-sharded multiquery attention, 512 x 48 heads x 256 bf16 over 64 chips: 196,608 B per all-to-all.
    assert attention_collectives("batch", 512, 48, 256, (4, 4, 4))[0].bytes_per_chip == 2 * 512 * 48 * 256 / 64
    # N = sqrt(T n / F) = sqrt(4,096 x 64 / 73,728) = 1.8856
    assert wg_optimal_gather_size(4096, 64, 73728) == pytest.approx(math.sqrt(4096 * 64 / 73728), rel=1e-12)
    assert [c.op for c in ffn_collectives("wg-x", "palm-540b", 4096, (4, 4, 4))] == [
        "all-gather", "all-gather", "all-gather", "reduce-scatter"]
    rows = context_length_table("tpu-v4", 64, (128,))
    assert [(r.model, r.head_dim) for r in rows] == [("palm-540b-multihead", 128), ("palm-540b", 256),
                                                      ("palm-540b", 256)]
    with pytest.raises(ValueError, match="^batches entry must be a positive integer"):
        context_length_table("tpu-v4", 64, (0,))
    with pytest.raises(ValueError, match="^tokens must be positive"):
        comm_volume_curves("palm-540b", (4, 4, 4), [64, -1])
    with pytest.raises(ValueError, match="^unknown layout '3d-ws'"):
        best_layout("palm-540b", "tpu-v4", (4, 4, 4), 64).time("3d-ws")
    for tokens_range, message in (((-1, 10), "^tokens_range start must be positive"),
                                  ((10, -5), "^tokens_range stop must be positive"),
                                  ((10, 10), r"^tokens_range must be increasing, got \(10, 10\)")):
        with pytest.raises(ValueError, match=message):
            layout_switch_points("palm-540b", "tpu-v4", (4, 4, 4), tokens_range=tokens_range)
    with pytest.raises(ValueError, match=r"kv_fraction must be in \(0, 1\], got 0: it is the share of HBM kept"):
        max_context_length("palm-540b", "tpu-v4", 64, 128, "batch", kv_fraction=0)


def test_roofline_edges():
    from scaling_lib.roofline import critical_batch_size, moe_critical_batch_size, roofline_time

    report = explain_matmul("tpu-v5e", 64, weight_dtype="int8")
    assert report.weight_dtype == "int8" and report.critical_batch == critical_batch_size("tpu-v5e", "int8", "bf16")
    assert moe_critical_batch_size("tpu-v5e", 4, 4) == critical_batch_size("tpu-v5e")  # k = E: every expert busy
    assert roofline_time(0, 1e9, "tpu-v5e").compute_s == 0.0
    assert fit_batch_roofline([1, 2, 4], [1.0, 2.0, 4.0], n_floor=1).floor_s == 1.0
    with pytest.raises(ValueError, match="^batches must be a sequence of numbers"):
        fit_batch_roofline("abc", [1.0, 2.0, 3.0])


def test_serving_and_sharding_use_the_compute_dtype():
    from scaling_lib.serving import server_ratio
    from scaling_lib.sharding import decode_step_components

    # batch 1,024: the matmul FLOPs (not the weight read) set the step, so the compute dtype shows
    # (1,024 caches of 8k tokens do not fit in 8 x 192 GB: priced as if they did, to see the compute dtype)
    ratio = server_ratio("llama3-70b", "tpu-7x", 8192, 512, 1024, 8, 8, compute_dtype="fp8", check_capacity=False)
    step = decode_step_time("llama3-70b", "tpu-7x", 8, 1024, 8192 + 256, compute_dtype="fp8", check_capacity=False)
    assert step.bound == "compute" and ratio.decode_step_s == step.total_s
    parts = decode_step_components("llama3-70b", "tpu-7x", 8, 256, 8192, compute_dtype="fp8", check_capacity=False)
    assert parts.flops_s == decode_step_time("llama3-70b", "tpu-7x", 8, 256, 8192, compute_dtype="fp8",
                                             check_capacity=False).compute_s
    one = decode_step_components("llama3-70b", "tpu-7x", 1, 256, 8192, check_capacity=False)
    assert (one.ici_s, one.ici_latency_s) == (0.0, 0.0)  # one chip: no collectives
    with pytest.raises(ValueError, match="pass axis sizes that multiply to n_chips$"):
        decode_step_components("llama3-70b", "tpu-7x", 8, 256, 8192, mesh_shape=(2, 2))


def test_hf_config_edges():
    from scaling_lib.models import from_hf_config

    base = dict(model_type="gemma3_text", num_hidden_layers=12, hidden_size=64, num_attention_heads=4,
                num_key_value_heads=2, head_dim=16, vocab_size=256, intermediate_size=128, sliding_window=32)
    every_sixth = ["sliding_attention"] * 5 + ["full_attention"]
    assert from_hf_config({**base, "layer_types": every_sixth * 2}).global_every == 6
    for broken in (["sliding_attention"] * 12, (["full_attention"] + ["sliding_attention"] * 5) * 2,
                   every_sixth + ["sliding_attention"] * 3 + ["full_attention"] + ["sliding_attention"] * 2):
        with pytest.raises(ValueError, match="is not a periodic local/global pattern with the global layer last in "
                                             "each period; this book's models cannot represent it"):
            from_hf_config({**base, "layer_types": broken})
    assert from_hf_config(base).global_every == 6  # Hugging Face's default sliding_window_pattern (issue 25)
    with pytest.raises(ValueError, match=r"field 'sliding_window_pattern' .* must be a positive integer"):
        from_hf_config({**base, "sliding_window_pattern": 0})
    llama = dict(base, model_type="llama", _name_or_path="org/My-Model")
    del llama["num_key_value_heads"], llama["sliding_window"]
    model = from_hf_config(llama)
    assert (model.n_kv_heads, model.name) == (4, "my-model")  # K defaults to N (multi-head)
    with pytest.raises(ValueError, match="use_sliding_window=true"):
        from_hf_config(dict(llama, model_type="qwen2", use_sliding_window=True))
    with pytest.raises(ValueError, match="shared experts belong to an MoE layer"):
        get_model("llama3-8b").with_(n_shared_experts=1)


def test_simulator_result_and_workload_fields():
    result = simulate(CONFIG, trace_workload([(0.0, 100, 2)]), "chunked")
    assert result.engine == "chunked" and result.output_len.tolist() == [2]
    assert result.tpot_s[0] == pytest.approx(decode_step_time("llama3-70b", "tpu-v5e", 16, 1, 101).total_s, rel=1e-9)
    assert result.queue_length()[1].dtype.kind == "i"
    workload = Workload([0.0], [10.0], [5])  # whole floats are token counts too
    assert workload.prompt_len.dtype == np.int64 and not workload.output_len.flags.writeable
    assert Workload([0.0], [10], [5], cached_len=[1]).cached_len.tolist() == [1]
    with pytest.raises(ValueError, match="^cached_len must hold whole numbers of tokens$"):
        Workload([0.0], [10], [5], cached_len=[0.5])
    with pytest.raises(ValueError, match="n_servers applies to the co-located engines .* the 'disaggregated' engine "
                                         "takes n_prefill_servers and n_decode_servers"):
        simulate(CONFIG, trace_workload([(0.0, 10, 2)]), "disaggregated", n_servers=2)


def test_chunked_prefill_uses_the_configured_compute_dtype():
    # One 512-token chunk in fp8 on 8 Ironwood chips: max(weight read, 2 P x 512 / (8 x 4.614e15 x 0.4)).
    config = ServingConfig("llama3-70b", "tpu-7x", n_chips=8, max_batch=4, max_context_len=4096, compute_dtype="fp8")
    result = simulate(config, trace_workload([(0.0, 512, 1)]), "chunked")
    weights = decode_step_time("llama3-70b", "tpu-7x", 8, 0, 0).weight_s
    assert result.ttft_s[0] == pytest.approx(max(weights, prefill_time("llama3-70b", "tpu-7x", 8, 512, 0.4,
                                                                      compute_dtype="fp8")), rel=1e-12)


def test_parse_quantity_takes_numpy_floats_and_names_a_bad_answer():
    from scaling_lib.units import parse_quantity

    assert parse_quantity(np.float32(2.5), "ms") == (pytest.approx(2.5e-3), "time")
    with pytest.raises(ValueError, match="^the answer must be a finite number"):
        parse_quantity(float("nan"))
    with pytest.raises(ValueError, match="unknown unit"):
        parse_unit("kx")


# --- third round: survivors of an independent sample ----------------------------------------------------------------
def test_mla_attention_flops_by_hand():
    from scaling_lib.flops import forward_flops
    from scaling_lib.kv_levers import decode_attention_cost

    # DeepSeek-V3: 61 layers, 128 heads, H = 128 + 64 (RoPE) = 192, H_v = 128, latent r = 512. Not absorbed, each
    # cached token costs 2 x 128 x (192 + 128) + 2 x 512 x 128 x (192 - 64 + 128) = 33,636,352 FLOPs per layer.
    cost = decode_attention_cost("deepseek-v3", 1000, absorbed=False)
    assert cost.flops == 61 * 1000 * 33_636_352
    # A forward pass over 16 tokens scores 16 x 16 pairs per layer at 2 N (H + H_v) = 2 x 128 x 320 FLOPs each.
    assert forward_flops("deepseek-v3", 16).attention == pytest.approx(61 * 16 * 16 * 2 * 128 * 320, rel=1e-12)


def test_small_closed_forms_by_hand():
    from scaling_lib.attention_sharding import attention_collectives
    from scaling_lib.roofline import matmul_bytes, roofline_time

    assert matmul_bytes(3, 5, 7) == 2 * 3 * 5 + 2 * 5 * 7 + 2 * 3 * 7  # X, W, output in bf16
    assert roofline_time(1e9, 0, "tpu-v5e").memory_s == 0.0
    # bf16 this time, so bytes per element (2) multiplies: 206,158,430,208 x 2 / 16 shards.
    memory = expert_sharded_memory(as_moe("sb7-worked", 16, 2), "tpu-v5e", expert_shards=16)
    assert memory.expert_bytes_per_chip == 64 * 3 * 4096 * 16384 * 16 * 2 / 16
    # Multiquery: with the KV head unsplittable, 2 chips split the batch and need both all-to-alls.
    two = attention_collectives("batch", 8, 4, 16, (2,))
    assert [(c.op, c.tensor) for c in two] == [("all-to-all", "activations")] * 2
    gather = Collective("all-gather", "weights", 270e9, (4, 4, 4))
    assert gather.seconds("tpu-v4") == gather.seconds("tpu-v4", "pope") == pytest.approx(1.0, rel=1e-12)
    with pytest.raises(ValueError, match="^unknown convention 'x'"):
        gather.seconds("tpu-v4", "x")
    assert fit_batch_roofline([1, 2, 4, 8, 16], [4.0, 1.0, 2.0, 3.0, 16.0]).floor_s == 2.0  # default: 3 smallest
    from scaling_lib.context_limits import kv_versus_weights
    from scaling_lib.memory import memory_footprint_kv_heads

    assert kv_versus_weights("palm-540b", 8, 0).kv_bytes == 0.0
    assert memory_footprint_kv_heads("llama2-13b", 8, "tpu-v5e", 8, 16, 0).kv_bytes == 0.0


def test_model_field_edges():
    from scaling_lib.models import from_hf_config

    base = dict(n_layers=2, d_model=64, d_ff=128, n_heads=4, n_kv_heads=4, head_dim=16, vocab_size=256)
    with pytest.raises(ValueError, match="rope_head_dim=16 must be smaller than head_dim=16"):
        Transformer(**base, kv_lora_rank=8, rope_head_dim=16)
    with pytest.raises(ValueError, match="^n_dense_layers must be a non-negative integer"):
        Transformer(**base, n_dense_layers=-1)
    cfg = dict(model_type="llama", num_hidden_layers=2, hidden_size=64, num_attention_heads=4, vocab_size=256,
               intermediate_size=128)
    assert from_hf_config({**cfg, "tie_word_embeddings": True}).tied_embeddings is True
    with pytest.raises(ValueError, match="use_sliding_window=true"):
        from_hf_config({**cfg, "model_type": "qwen3", "use_sliding_window": True})
    with pytest.raises(ValueError, match=r"add it, or build the model with scaling_lib\.models\.Transformer"):
        from_hf_config({"model_type": "llama"})
    with pytest.raises(ValueError, match=r"'llama-2-13b' or 'meta-llama/Llama-3\.1-8B' work too"):
        get_model("gpt-9")


def test_validation_edges():
    with pytest.raises(ValueError, match="^x must be non-negative, got -1$"):
        _validate.positive("x", -1, allow_zero=True)
    with pytest.raises(ValueError, match=r"^k=3 does not divide n=1000000000001; pick a divisor of 1000000000001$"):
        _validate.divides("k", 3, "n", 10**12 + 1)  # no list of divisors of a large number (it would take forever)
    from scaling_lib.flops import attention_pairs
    from scaling_lib.inference import prefill_time as prefill

    with pytest.raises(ValueError, match="context, so kv_len must count them too$"):
        attention_pairs(8, 4)
    with pytest.raises(ValueError, match=r"it is the fraction of peak FLOP/s achieved$"):
        prefill("llama3-70b", "tpu-v5e", 16, 8192, mfu=0)
    with pytest.raises(ValueError, match=r"mfu must be in \(0, 1\], got 2: it is the fraction of peak FLOP/s achieved$"):
        ServingConfig("llama3-70b", "tpu-v5e", 16, 8, 8192, mfu=2)
    with pytest.raises(ValueError, match="^config must be a ServingConfig, got dict$"):
        simulate({}, trace_workload([(0.0, 10, 2)]))


def test_units_edges():
    from scaling_lib.units import parse_quantity

    assert parse_quantity("1_000 tokens") == (1000.0, "count")
    assert parse_quantity("50 %") == (0.5, "percent")
    with pytest.raises(ValueError, match=r"e\.g\. '1\.5 ms'"):
        parse_quantity("1,5 ms")


def test_serving_config_checks_the_kv_dtype_and_chunks_track_each_prompt():
    # 16 v5e hold LLaMA-3-70B and 20 caches of 8,192 bf16 tokens, about twice as many in int8.
    fit_bf16 = max_batch_size_of(16, "bf16")
    ServingConfig("llama3-70b", "tpu-v5e", 16, fit_bf16 + 1, 8192, kv_dtype="int8")  # fits in int8
    with pytest.raises(ValueError, match="does not fit in HBM"):
        ServingConfig("llama3-70b", "tpu-v5e", 16, fit_bf16 + 1, 8192)
    # Three 600-token prompts at once, chunks of 512: step 2 carries 88 tokens of A (reading A's 512 cached) and 424
    # of B (nothing cached yet); step 3 carries 176 of B (reading its 424) and 336 of C: every chunk reads the prefix
    # of its own sequence, and the reads add up over the sequences in the step.
    config = ServingConfig("llama3-70b", "tpu-v5e", n_chips=16, max_batch=4, max_context_len=4096)
    result = simulate(config, trace_workload([(0.0, 600, 1)] * 3), "chunked")
    per_token = 327_680 / (16 * V5E_W)
    assert result.first_token_s[1] == pytest.approx(3 * _chunk(512) + (512 + 424) * per_token, rel=1e-9)
    # Admission stops at max_batch: five requests on four slots, the fifth starts only when one finishes.
    five = simulate(config, trace_workload([(0.0, 100, 3)] * 5), "chunked")
    assert np.sum(five.start_s == 0.0) == 4


def max_batch_size_of(n_chips, kv_dtype):
    from scaling_lib.memory import max_batch_size

    return max_batch_size("llama3-70b", "tpu-v5e", n_chips, 8192, "bf16", kv_dtype)
