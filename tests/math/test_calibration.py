"""Calibration of the estimate (scaling_lib.calibration): the bound against every published row, the split, the fit's
recovery of planted efficiencies, what each comparison reads from its row, and the fitted estimate on validation rows
the fit never saw."""

import dataclasses
import math
import random
import re
import statistics

import pytest

from scaling_lib import calibration, estimate, measurements
from scaling_lib.collectives import collective_time
from scaling_lib.calibration import (
    FIELDS,
    RANGES,
    all_rows,
    compare,
    fit_efficiency,
    fit_rows,
    fit_typical,
    group_of,
    pope_deployment,
    predicted_latency,
    row_model,
    split_of,
    uncertainty,
    validation_metrics,
)
from scaling_lib.estimate import (
    BOUND,
    TYPICAL,
    Calibrated,
    Deployment,
    Efficiency,
    decode_step,
    decode_time,
    max_batch,
    prefill,
)
from scaling_lib.hardware import get_chip
from scaling_lib.measurements import pope_row, pope_rows, published_runs, trtllm_rows
from scaling_lib.memory import param_bytes
from scaling_lib.models import MODELS, from_hf_config, get_model
from scaling_lib.moe import as_moe

from tests import for_each

REPO_CONFIGS = __import__("pathlib").Path(__file__).resolve().parents[2] / "book" / "data" / "hf_configs"


def _first(kind):
    return next(row for row in published_runs() if row.kind == kind)


# --- the bound --------------------------------------------------------------------------------------------------------
def test_no_published_measurement_beats_the_bound():
    # Every row of scaling_lib/data (the earlier TensorRT-LLM table, Pope et al., the 263 published runs, the runs
    # gathered for the profiles, fp8 rows included): the bound's speed (every resource at peak, everything overlapped,
    # all of HBM) is at least the measured one.
    rows = all_rows()
    assert len(rows) == len(trtllm_rows()) + len(pope_rows()) + 263 + len(measurements.gathered_runs())
    beaten = [(c.label, round(c.ratio, 3)) for c in (compare(row, BOUND) for row in rows) if c.ratio < 1.0]
    assert beaten == []


def test_the_bound_is_the_busiest_resource_and_the_estimate_is_slower_than_it():
    d = Deployment("llama3-70b", "h100", 8, weight_dtype="fp8", kv_dtype="fp8", compute_dtype="fp8")
    bound, serial = decode_step(d, 64, 4096, BOUND), decode_step(d, 64, 4096, Efficiency())
    resources = (bound.kv_s + bound.weights_s, bound.matmul_s + bound.attention_s, bound.comm_bandwidth_s,
                 bound.comm_latency_s)
    assert bound.total_s == max(resources)
    # At peak the serial engine pays the same components one after another: never faster than the bound.
    assert serial.total_s == pytest.approx(max(serial.kv_s, serial.attention_s) +
                                           max(serial.weights_s, serial.matmul_s) + serial.elementwise_s +
                                           serial.comm_s)
    assert serial.elementwise_s > 0 and bound.elementwise_s == 0.0
    assert serial.total_s >= bound.total_s
    assert decode_step(d, 64, 4096, TYPICAL).total_s > serial.total_s


# --- the split: which rows the fit may see ----------------------------------------------------------------------------
def test_the_split_is_disjoint_stable_and_has_validation_rows_in_every_group():
    rows = published_runs()
    labels = [row.label for row in rows]
    assert len(set(labels)) == len(labels)  # one split per row
    first = {row.label: split_of(row) for row in rows}
    assert set(first.values()) == {"calibration", "validation"}
    # Stable: the rule reads a sorted order, so the file's order does not matter.
    shuffled = list(rows)
    random.Random(3).shuffle(shuffled)
    calibration._run_splits.cache_clear()
    try:
        calibration.published_runs = lambda: tuple(shuffled)
        assert {row.label: split_of(row) for row in shuffled} == first
    finally:
        calibration.published_runs = published_runs
        calibration._run_splits.cache_clear()
    # Stratified: every group of two or more rows holds out (n + 1) // 3 of them (one in three, from the second).
    groups = {}
    for row in rows:
        groups.setdefault(group_of(row), []).append(first[row.label])
    for key, splits in groups.items():
        assert splits.count("validation") == (len(splits) + 1) // 3, key
    # The project's earlier rows keep their roles.
    assert {split_of(r) for r in trtllm_rows() if r.gpu == "h100"} == {"calibration"}
    assert {split_of(r) for r in trtllm_rows() if r.gpu == "h200"} == {"validation"}
    assert {split_of(r) for r in pope_rows() if r.model == "palm-62b"} == {"validation"}


def test_every_group_of_the_acceptance_has_validation_rows():
    keys = {group_of(row) for row in all_rows() if split_of(row) == "validation"}
    assert {k[0] for k in keys} == {"gpu", "amd", "tpu"} and {k[2] for k in keys} == {"dense", "moe"}
    assert {1, 2, 4, 8} <= {k[1] for k in keys} and {"bf16", "fp8", "int8"} <= {k[3] for k in keys}
    # a model of two experts is a mixture of experts
    row = dataclasses.replace(pope_rows()[0], model=as_moe("llama3-8b", 2, 1))
    assert group_of(row)[2] == "moe" and group_of(pope_rows()[0])[2] == "dense"


def test_the_fit_never_sees_a_validation_row():
    fitted_on = {m.row for platform in ("gpu", "tpu") for m in calibration._row_models(platform, "calibration")}
    assert all(split_of(row) == "calibration" for row in fitted_on)
    assert not fitted_on & {row for row in all_rows() if split_of(row) == "validation"}


def test_a_row_that_is_not_in_the_data_has_no_split_and_is_refused_naming_the_row_and_the_fix():
    # A published run with another prompt length is no longer one of the runs the split was drawn over; a run of the
    # out-of-sample table never was. Both are refused with a ValueError (it used to be a KeyError).
    changed = dataclasses.replace(published_runs()[0], input_len=12_345)
    later = calibration.validation_runs()[0]
    for row in (changed, later):
        for function in (split_of, compare):
            with pytest.raises(ValueError, match=r"^row .*not one of measurements\.published_runs\(\).*"
                                                 r"calibration\.row_model\(row\)"):
                function(row)
    # Its row model needs no split, and prices it.
    assert row_model(changed).predicted(Efficiency()) > 0


# --- the fit ----------------------------------------------------------------------------------------------------------
@for_each(list(estimate.PROFILES), ids=str)
def test_each_stored_profile_is_exactly_the_result_of_its_fit(name):
    # A stale constant (rows or model changed, the profile not refitted) fails here.
    assert calibration.fit_profile(name) == estimate.PROFILES[name].efficiency
    assert fit_typical() == TYPICAL == estimate.PROFILES["typical"].efficiency


def test_an_engine_profile_fits_only_its_engines_rows_and_few_rows_only_the_per_step_costs():
    # vLLM on NVIDIA GPUs: three rows, so its rates are the typical fit's and only its two per-step costs its own.
    vllm_gpu = calibration._row_models("gpu", "calibration", "vllm")
    assert 0 < len(vllm_gpu) < calibration.RATES_NEED_ROWS
    assert all(calibration.engine_of(m.row).startswith("vLLM") for m in vllm_gpu)
    vllm, typical = estimate.PROFILES["vllm"].efficiency.gpu, TYPICAL.gpu
    for name in ("mfu", "hbm", "kv_hbm", "network", "latency"):
        assert getattr(vllm, name) == getattr(typical, name)
    trt = calibration._row_models("gpu", "calibration", "tensorrt-llm")
    assert len(trt) >= calibration.RATES_NEED_ROWS and not {m.row for m in trt} & {m.row for m in vllm_gpu}


def test_an_engine_with_serving_runs_only_has_the_typical_steps_and_a_front_end_of_its_own():
    # SGLang publishes no step-level rows: on every platform its profile is the typical fit but for request_s, the
    # median excess of its first tokens at one to four clients (6 runs: SGLang's cookbook, GPUStack; fine-grained
    # experts left out, whose steps the estimate prices too fast), which differs from the typical fit's (every
    # engine's runs), and on NVIDIA GPUs its MoE layers, priced by NVIDIA's timings of SGLang's own
    sglang = estimate.PROFILES["sglang"].efficiency
    assert not any(calibration.in_profile(row, "sglang") for row in all_rows())
    for platform in ("gpu", "tpu", "amd"):
        ours, typical = getattr(sglang, platform), getattr(TYPICAL, platform)
        assert ours.moe_kernels == ("SGLang" if platform == "gpu" else "")
        assert dataclasses.replace(ours, request_s=typical.request_s, moe_kernels="") == typical
    residuals = [seconds for _, seconds in calibration.front_end_residuals("sglang")]
    assert len(residuals) == 6 and sglang.gpu.request_s == round(statistics.median(residuals), 3)
    assert sglang.gpu.request_s != TYPICAL.gpu.request_s
    assert not any(get_model(row.model).fine_grained_experts for row, _ in calibration.front_end_residuals("typical"))
    assert estimate.PROFILES["sglang"].caveat("h100")


ROW_SETS = {
    "gpu-rows": lambda: [row for row in all_rows() if calibration.platform_of(row) == "gpu"][::7],
    "tpu-rows": lambda: [row for row in all_rows() if calibration.platform_of(row) == "tpu"][::7],
    **{f"{kind}-run": (lambda kind=kind: [next(r for r in published_runs() if r.kind == kind)])
       for kind in ("offline", "offline_b", "static", "ttft")},
    # TP 4: the prefill's collectives are where the bound's floors and the estimate's NCCL pick part
    "ttft-run-over-several-gpus": lambda: [next(r for r in published_runs() if r.kind == "ttft" and
                                                r.tensor_parallel > 1)],
}


@for_each(ROW_SETS.values(), ids=list(ROW_SETS))
def test_the_fast_row_model_prices_rows_as_the_estimate_does(rows):
    for eff in (Efficiency(mfu=0.55, hbm=0.7, network=0.6, latency=1.7, overhead_s=4e-4),
                Efficiency(mfu=0.5, hbm=0.7, network=0.6, latency=2.0, overhead_s=1e-3)):
        for row in rows():
            assert row_model(row).predicted(eff) == pytest.approx(compare(row, eff).predicted, rel=1e-9), row.label


def test_the_fit_recovers_efficiencies_planted_in_synthetic_rows():
    # Rows "measured" by the model itself at known efficiencies: the fit must find them again.
    planted = Efficiency(mfu=0.62, hbm=0.74, network=0.55, latency=1.8, overhead_s=6e-4)
    models = [row_model(row) for row in all_rows() if calibration.platform_of(row) == "gpu"]
    synthetic = [calibration.RowModel(m.row, m.predicted(planted), m.numerator, m.steps) for m in models]
    fitted = fit_rows(synthetic)
    assert fitted.mfu == pytest.approx(planted.mfu, abs=0.02)
    assert fitted.hbm == pytest.approx(planted.hbm, abs=0.02)
    assert fitted.network == pytest.approx(planted.network, abs=0.05)
    assert fitted.latency == pytest.approx(planted.latency, rel=0.1)
    assert fitted.overhead_s == pytest.approx(planted.overhead_s, abs=1e-4)


def test_the_bootstrap_range_of_each_fitted_efficiency_covers_the_value_planted_in_noisy_rows(monkeypatch):
    # Rows "measured" by the model itself at known efficiencies, each configuration's rows off by one common random
    # factor (a configuration's rows share their errors): every efficiency's bootstrap range must cover the planted
    # value (a 98% range, five of them), and a held (measured) one has no width.
    planted = Efficiency(mfu=0.6, hbm=0.67, kv_hbm=0.7, network=0.45, latency=1.05, overhead_s=2e-3, layer_s=1e-4)
    models = calibration._row_models("gpu", "calibration")
    draw, shift = random.Random(7), {}
    noisy = []
    for m in models:
        factor = shift.setdefault(calibration._configuration(m.row), math.exp(draw.gauss(0, 0.05)))
        noisy.append(calibration.RowModel(m.row, m.predicted(planted) * factor, m.numerator, m.steps))
    monkeypatch.setattr(calibration, "_row_models", lambda platform, split, profile="typical": tuple(noisy))
    calibration._uncertainty.cache_clear()
    try:
        ranges = {r.field: r for r in uncertainty("gpu", replicates=40, level=0.98)}
    finally:
        calibration._uncertainty.cache_clear()
    for name in ("mfu", "kv_hbm", "network", "overhead_s", "layer_s"):
        r = ranges[name]
        assert RANGES[name][0] <= r.low <= r.high <= RANGES[name][1]
        assert r.low - 1e-9 <= getattr(planted, name) <= r.high + 1e-9, r
    assert ranges["latency"].low == ranges["latency"].high == calibration.collective_latency_scale("gpu")
    assert ranges["hbm"].low == ranges["hbm"].high == calibration.measured_weight_streaming()


@for_each([
    ("mfu", lambda e: [0.5 / e.mfu] * 3, None, 0.5),  # predicted / measured = 0.5 / mfu: the loss is zero at 0.5
    # a loss that keeps falling down to 0.3 stops at the lowest efficiency searched
    ("network", lambda e: [e.network / 0.3], None, 0.3),
    ("network", lambda e: [e.network / 0.3], 0.5, 0.5),
    ("hbm", lambda e: [e.hbm / 0.3], 0.5, 0.5),
    ("mfu", lambda e: [e.mfu / 0.3], 0.5, 0.5),
], ids=["mfu-alone", "network-at-its-optimum", "network-at-the-low-end", "hbm-at-the-low-end", "mfu-at-the-low-end"])
def test_fit_efficiency_finds_the_least_loss_within_the_search(field, ratio, low, fitted):
    kwargs = {} if low is None else dict(low=low)
    assert getattr(fit_efficiency(ratio, fields=(field,), **kwargs), field) == pytest.approx(fitted, abs=0.01)


def test_every_shipped_efficiency_lies_inside_its_physical_range_and_the_acceptance_limits():
    # The acceptance: mfu <= 0.8, each HBM fraction <= 0.95, network >= 0.3, the latency scale within 0.5-3x of the
    # sourced latency; and each fitted value inside the range its docstring sources.
    for profile in estimate.PROFILES.values():
        for platform in profile.platforms:
            eff = getattr(profile.efficiency, platform)
            assert eff.mfu <= 0.8 and eff.hbm <= 0.95 and eff.kv_fraction <= 0.95 and eff.network >= 0.3
            assert 0.5 <= eff.latency <= 3.0
            for name in FIELDS:
                low, high = RANGES[name]
                assert low <= getattr(eff, name if name != "kv_hbm" else "kv_fraction") <= high, (profile.name, name)


def test_the_tpu_fit_ends_where_chapter_11_says_matmuls_near_the_top_streaming_and_network_on_the_floor():
    # Chapter 11 reads the TPU half of the typical fit so: matmuls inside their range, near its top; weight streaming
    # and the collectives' rate on the floor of theirs; the host cost per step on the top of its range.
    tpu = estimate.TYPICAL.tpu
    assert RANGES["mfu"][1] - 0.1 <= tpu.mfu < RANGES["mfu"][1]
    assert (tpu.hbm, tpu.network, tpu.overhead_s) == (RANGES["hbm"][0], RANGES["network"][0], RANGES["overhead_s"][1])


def test_the_latency_scale_is_measured_by_small_published_collectives_not_fitted_to_throughput():
    # By hand: on GPUs 6 us measured on 2 H100 against NCCL's 7.8 us (ring LL: 6.6 + 2 x 0.6), 20 us on 8 H100 against
    # 15.0 + a few ns of bytes; their median. On TPU v5e, 8 us against 3 hops of 1 us plus 128 kB over the 4-chip
    # line's link (2.2 us).
    gpu = statistics.median([6 / 7.8, 20 / collective_time("all-reduce", 8192, "h100", 8).expected_s / 1e6])
    assert calibration.collective_latency_scale("gpu") == round(gpu, 2)
    line = collective_time("all-gather", 131072, "tpu-v5e", 4)
    assert calibration.collective_latency_scale("tpu") == round(8e-6 / (3e-6 + line.bandwidth_s), 2)
    assert TYPICAL.gpu.latency == calibration.collective_latency_scale("gpu")


def test_the_weight_streaming_is_the_h200_decode_at_batch_1_less_its_attention():
    # 15.0 GB of matmul weights over (4.94 - 0.89) ms at batch 1 and 128 tokens, over 4.8 TB/s: 0.77; at 2,048 and
    # 32,768 tokens 0.67; the median.
    rows = [r for r in measurements.decode_step_rows() if r.batch == 1]
    by_hand = statistics.median(r.matmul_weight_bytes / (r.best_s - r.attention_only_s) / 4.8e12 for r in rows)
    assert calibration.measured_weight_streaming() == round(by_hand, 2) == TYPICAL.gpu.hbm


def test_the_fitted_network_share_sits_below_what_nccl_reaches_with_a_gigabyte():
    # NCCL's NVLS all-reduce on 8 H100: 480 GB/s of bus bandwidth; at line rate NVLS moves V (n + 1) / n each way per
    # GPU (collectives' docstring), t = 9 V / (8 x 450 GB/s), a bus bandwidth (nccl-tests: 2 (n - 1) / n x V / t) of
    # 2 x 7 / 9 x 450 = 700 GB/s: 480 / 700 = 0.69. An engine's per-layer all-reduces are far smaller, so its fitted
    # share of the line rate is at most that.
    assert calibration.gpu_network_efficiency() == pytest.approx(round(480 / (2 * 7 / 9 * 450), 2))
    assert RANGES["network"][0] <= TYPICAL.gpu.network <= calibration.gpu_network_efficiency()
    # The fit holds a fixed field where it is given.
    models = calibration._row_models("gpu", "calibration")
    assert fit_rows(models, rounds=1, fixed={"network": 0.5, "latency": 2.0}).network == 0.5


def _nvls_row(gbps, **changes):
    from scaling_lib.measurements import BusBandwidthRow

    row = BusBandwidthRow(gpu="h100", n_gpus=8, collective="all-reduce", algorithm="nvls", array_bytes_min=2**30,
                          bus_bandwidth=gbps * 1e9, source="planted")
    return dataclasses.replace(row, **changes)


def test_the_network_efficiency_is_the_median_over_rows_of_the_algorithm_priced(monkeypatch):
    # NVLS on 8 H100 has a 700 GB/s line-rate bus bandwidth (test above): rows of 350, 490 and 630 GB/s are 0.5, 0.7
    # and 0.9 of it, median 0.7; a ring row (not the algorithm collectives picks at 1 GiB) is left out.
    rows = (_nvls_row(350), _nvls_row(630), _nvls_row(100, algorithm="ring"), _nvls_row(490))
    monkeypatch.setattr(calibration, "nccl_rows", lambda: rows)
    assert calibration.gpu_network_efficiency() == 0.7
    monkeypatch.setattr(calibration, "nccl_rows", lambda: rows[:2])  # two rows: the mean of the middle two
    assert calibration.gpu_network_efficiency() == 0.7
    monkeypatch.setattr(calibration, "nccl_rows", lambda: (_nvls_row(700 / 3),))  # rounded to 0.01
    assert calibration.gpu_network_efficiency() == 0.33
    # no row of the algorithm priced: refused, naming the file to add one to
    monkeypatch.setattr(calibration, "nccl_rows", lambda: (_nvls_row(370, algorithm="ring"),))
    with pytest.raises(ValueError, match=r"\bno NCCL row measures the algorithm collectives picks\b.*\badd one to "
                                         r"scaling_lib/data/nccl_allreduce_busbw\.csv$"):
        calibration.gpu_network_efficiency()


def test_tensorrt_llm_gives_its_cache_nine_tenths_of_the_memory_the_weights_and_its_runtime_leave():
    # LLaMA-3-70B in fp8 on 2 H100: 35.3 GB of weights per chip; the runtime's own 2.08 GiB (the documentation's log:
    # 79.10 GiB total - 6,695 MiB engine - 70.48 GiB available); the cache gets 0.9 of the rest.
    runtime = 79.10 * 2**30 - 6695 * 2**20 - 70.48 * 2**30
    assert runtime == pytest.approx(2.082 * 2**30, rel=1e-3)
    capacity, weights = get_chip("h100").hbm_capacity, param_bytes("llama3-70b", "fp8") / 2
    assert calibration.trtllm_memory_utilization("llama3-70b", "h100", "fp8", 2) == pytest.approx(
        (weights + 0.9 * (capacity - weights - runtime)) / capacity)
    assert calibration.trtllm_memory_utilization("llama3-70b", "h100", "bf16", 1) == 1.0  # weights alone overflow


def test_typical_prices_a_tpu_with_its_tpu_half_and_a_gpu_with_its_gpu_half():
    tpu, gpu = Deployment("llama3-8b", "tpu-v5e", 8), Deployment("llama3-8b", "h100", 8)
    assert decode_step(tpu, 8, 1024, TYPICAL) == decode_step(tpu, 8, 1024, TYPICAL.tpu)
    assert decode_step(gpu, 8, 1024, TYPICAL) == decode_step(gpu, 8, 1024, TYPICAL.gpu)
    assert TYPICAL.gpu != TYPICAL.tpu
    with pytest.raises(TypeError, match=r"Calibrated\.tpu must be an Efficiency"):
        Calibrated(gpu=Efficiency(), tpu=0.5)


# --- each comparison: its row, its system, its workload, its dominant term --------------------------------------------
COMPARED = {
    "tensorrt-llm-table": (lambda: trtllm_rows()[0], "TensorRT-LLM", lambda row: f"{row.input_len}/{row.output_len}"),
    "pope-prefill": (lambda: pope_row("palm-540b", "low latency", "prefill"), "Pope et al.", lambda row: row.phase),
    "pope-decode": (lambda: pope_row("palm-540b", "low latency", "decode"), "Pope et al.", lambda row: row.phase),
    # TensorRT-LLM v0.6.1, llama2-7b, 128 in / 128 out
    "static-run": (lambda: _first("static"), "TensorRT-LLM", lambda row: "128/128"),
    "jetstream-run": (lambda: _first("offline_b"), "JetStream", lambda row: f"{row.input_len}/{row.output_len}"),
    # vLLM on eight MI300X, AMD's performance-results page
    "vllm-run": (lambda: next(row for row in measurements.gathered_runs() if row.engine.startswith("vLLM")), "vLLM",
                 lambda row: f"{row.input_len}/{row.output_len}"),
}


@for_each(COMPARED.values(), ids=list(COMPARED))
def test_a_comparison_names_its_row_system_workload_split_and_the_step_of_its_dominant_term(row, system, shape):
    row = row()
    c = compare(row)
    assert (c.system, c.label, c.shape, c.split) == (system, row.label, shape(row), split_of(row))
    assert c.row is row and c.step is not None and c.step.bound == c.dominant
    if getattr(row, "kind", None) == "offline_b":
        assert compare(row, TYPICAL).step.batch == row.batch  # JetStream's rows run at their stated slots


def test_every_comparison_keeps_its_rows_label_workload_and_split():
    for row in trtllm_rows():
        c = compare(row)
        assert c.label == row.label and c.shape in row.label  # "llama3-70b h200 TP1 128/128" -> "128/128"
        assert c.shape == f"{row.input_len}/{row.output_len}"
    for row in pope_rows():
        c = compare(row)
        assert (c.label, c.shape) == (row.label, row.phase)
    for row in trtllm_rows()[::13] + pope_rows() + published_runs()[::37]:
        assert compare(row).split == split_of(row) in ("calibration", "validation"), row.label


def test_every_kind_of_comparison_is_priced_at_the_efficiency_asked_for():
    # The bound is never slower than the typical estimate: each kind of row must pass its efficiency on.
    rows = (trtllm_rows()[0], pope_row("palm-540b", "low latency", "decode"),
            pope_row("palm-540b", "low latency", "prefill"), _first("offline"), _first("static"), _first("ttft"))
    for row in rows:
        bound, typical = compare(row), compare(row, TYPICAL)
        assert typical.predicted < bound.predicted and typical.measured == bound.measured, row.label


def test_the_dominant_term_is_taken_at_the_efficiency_asked_for():
    # At the bound PaLM 540B's low-latency prefill is compute-bound (2 P T over 64 chips' FLOP/s); with the network at
    # 1% of its bandwidth the layout's collectives take longer than the matmuls.
    prefill_row = pope_row("palm-540b", "low latency", "prefill")
    slow_network = Efficiency(network=0.01)
    assert (compare(prefill_row).dominant, compare(prefill_row, slow_network).dominant) == ("flops", "communication")
    decode_row = pope_row("palm-540b", "high throughput", "decode")
    assert (compare(decode_row).dominant, compare(decode_row, slow_network).dominant) == ("flops", "communication")


def test_a_pope_decode_comparison_reads_the_first_decode_step():
    # The dominant term of a decode row comes from the step that attends to context_len + 1 keys.
    row = pope_row("palm-540b", "low latency", "decode")
    step = decode_step(pope_deployment(row), row.batch, row.context_len + 1)
    assert compare(row).step.kv_s == pytest.approx(step.kv_s)
    assert compare(row).step.kv_s != pytest.approx(decode_step(pope_deployment(row), row.batch, row.context_len).kv_s)


def test_measured_speeds_are_the_published_numbers_as_tokens_per_s_or_one_over_seconds():
    # A static-batch run publishes output tokens/s (used as is); a time-to-first-token run publishes seconds and a
    # Pope et al. prefill or decode a latency (all used as 1 / seconds). compare and row_model read the same speed.
    static, ttft = _first("static"), _first("ttft")
    prefill_row = next(row for row in pope_rows() if row.phase == "prefill")
    decode_row = pope_row("palm-540b", "low latency", "decode")
    for row, speed in ((static, static.measured), (ttft, 1 / ttft.measured), (prefill_row, 1 / prefill_row.latency_s),
                       (decode_row, 1 / decode_row.latency_s)):
        assert compare(row).measured == pytest.approx(speed, rel=1e-12)
        assert row_model(row).measured == pytest.approx(speed, rel=1e-12) and row_model(row).row is row


def test_a_static_batch_is_one_prefill_then_the_remaining_decode_steps():
    row = next(r for r in published_runs() if r.kind == "static" and r.tensor_parallel == 1)
    d = calibration.run_deployment(row)
    eff = TYPICAL.gpu
    seconds = (prefill(d, row.input_len, row.batch, eff).total_s
               + decode_time(d, row.batch, row.input_len, row.output_len - 1, eff))
    assert compare(row, eff).predicted == pytest.approx(row.batch * row.output_len / seconds)
    ttft = next(r for r in published_runs() if r.kind == "ttft")
    assert compare(ttft, eff).measured == pytest.approx(1 / ttft.measured)
    assert compare(ttft, eff).predicted == pytest.approx(
        1 / prefill(calibration.run_deployment(ttft), ttft.input_len, 1, eff).total_s)


def test_a_first_token_time_is_one_prefill_whatever_the_output_length_or_the_replicas(monkeypatch):
    # Time to first token is one prompt's prefill: the speed compared is 1 / that time, whatever the run's output
    # length, and with two replicas (2 GPUs at TP 1) still one prompt's prefill on one of them.
    ttft = next(r for r in published_runs() if r.kind == "ttft" and r.n_chips == 1)
    rows = (dataclasses.replace(ttft, output_len=128), dataclasses.replace(ttft, n_chips=2))
    eff = Efficiency(mfu=0.41, hbm=0.43, network=0.47, latency=1.3, overhead_s=3e-4)  # unused elsewhere: no cached value
    monkeypatch.setattr(calibration, "validation_runs", lambda: rows)
    calibration._out_of_sample.cache_clear()
    try:
        items = calibration.out_of_sample(eff)
    finally:
        calibration._out_of_sample.cache_clear()
    one_prompt = prefill(calibration.run_deployment(ttft), ttft.input_len, 1, eff).total_s
    assert [c.predicted for c in items] == pytest.approx([1 / one_prompt] * 2, rel=1e-12)


@for_each([
    # A static run of 300 sequences of llama2-7b on one fp8 H100, 128 prompt + 1,024 output tokens: the prompts fit
    # (a static batch may use all of HBM), the caches at the last step (1,151 tokens each) do not.
    (lambda: dataclasses.replace(_first("static"), output_len=1024, batch=300),
     lambda d: max_batch(d, 1151, Efficiency()) < 300 <= max_batch(d, 128, Efficiency())),
    # PaLM 540B prefill on 16 v4 chips at 2,048 tokens: 210 prompts fit in all of HBM but not in the 90% an
    # estimate leaves the engine.
    (lambda: dataclasses.replace(next(r for r in pope_rows() if r.phase == "prefill" and r.chips == 16), batch=210),
     lambda d: max_batch(d, 2048, "bound") >= 210 > max_batch(d, 2048, Efficiency())),
], ids=["static-run-whose-last-step-overflows", "pope-prefill-only-in-all-of-hbm"])
def test_row_model_refuses_what_compare_refuses_at_any_serial_efficiency(row, fits_only_where):
    # An estimate (any serial efficiency, PEAK included) refuses the row, so the row model, which must price what
    # compare prices, refuses it too.
    row = row()
    d = pope_deployment(row) if hasattr(row, "phase") else calibration.run_deployment(row)
    assert fits_only_where(d)
    with pytest.raises(ValueError, match="does not fit"):
        compare(row, Efficiency())
    with pytest.raises(ValueError, match="does not fit"):
        row_model(row)


# --- the validation, on rows the fit never saw ------------------------------------------------------------------------
def test_typical_meets_the_acceptance_thresholds_on_the_held_out_rows():
    # Measured on the validation split only (rows the fit never saw): within 1.5x on 85% of rows, within 2x on 97%,
    # the median per tensor-parallel degree within 0.8-1.25 and on TPUs within 0.67-1.5.
    result = validation_metrics()
    overall = result["all"]
    assert overall.n_rows >= 100
    assert overall.within_1_5 >= 0.85
    assert overall.within_2 >= 0.97
    for name, m in result.items():
        if re.fullmatch(r"TP\d+", name) and int(name[2:]) <= 8:
            assert 0.8 <= m.median_measured_over_predicted <= 1.25, (name, m)
    assert 0.67 <= result["tpu"].median_measured_over_predicted <= 1.5


def test_metrics_count_the_share_within_each_factor_both_ways_the_edge_included():
    items = [calibration.Comparison(str(k), "x", "s", "validation", 1.0, ratio, "kv", None)
             for k, ratio in enumerate((1.2, 1.4, 1 / 1.6, 1.9, 1 / 2.5))]
    m = calibration.metrics(items)
    assert (m.n_rows, m.within_1_5, m.within_2) == (5, 0.4, 0.8)
    assert m.median_measured_over_predicted == pytest.approx(1 / 1.2)
    # The summary's ratio is the median (sorted 0.4, 0.625, 1.2, 1.4, 1.9: the middle one), not the mean (1.105);
    # the worst is the farthest from 1 in log, 1 / 2.5 (a factor 2.5) before 1.9.
    summary = calibration.summarize(items)
    assert (summary.n_rows, summary.median, summary.worst, summary.worst_label) == (5, 1.2, 1 / 2.5, "4")
    assert summary.worst_factor == pytest.approx(2.5)
    # a prediction exactly twice as fast (or half as fast) is within 2x, not within 1.5x
    row = pope_rows()[0]
    exactly = [calibration.Comparison("a", "Pope et al.", "prefill", "calibration", 1.0, 2.0, "flops", row),
               calibration.Comparison("b", "Pope et al.", "prefill", "calibration", 2.0, 1.0, "flops", row)]
    scored = calibration.metrics(exactly, "edge")
    assert (scored.name, scored.within_1_5, scored.within_2) == ("edge", 0.0, 1.0)


def test_the_validation_summary_covers_the_validation_rows_and_names_the_worst():
    summary = calibration.validation_summary(BOUND)
    rows = calibration.comparisons(BOUND, "validation")
    assert summary.n_rows == len(rows) < len(all_rows())
    worst = max(rows, key=lambda c: abs(math.log(c.ratio)))
    assert (summary.worst, summary.worst_label) == (worst.ratio, worst.label)
    out_of_sample = calibration.out_of_sample_summary()  # each group's metrics named by its key
    assert all(m.name == key for key, m in out_of_sample.items())
    assert {"all", "TP8", "h100", "moe"} <= set(out_of_sample)


# --- new models come from their Hugging Face configs ------------------------------------------------------------------
@for_each([("llama2-7b", "llama-2-7b"), ("llama2-70b", "llama-2-70b"),
                                          ("mixtral-8x22b", "mixtral-8x22b")], ids=str)
def test_models_added_for_the_runs_match_their_configs(name, config):
    ours, theirs = MODELS[name], from_hf_config(REPO_CONFIGS / f"{config}.json")
    for field in ("n_layers", "d_model", "d_ff", "n_heads", "n_kv_heads", "head_dim", "vocab_size", "n_experts",
                  "n_active_experts"):
        assert getattr(ours, field) == getattr(theirs, field), field


# --- bad input: a ValueError naming the argument and the fix ----------------------------------------------------------
PUBLISHED = r"^row must be a published row \(measurements\.trtllm_rows\(\), pope_rows\(\) or published_runs\(\)\) for "
POSITIVE_FINITE = "every predicted / measured ratio must be a positive finite number"
BAD_INPUT = {
    "compare-of-no-row": (lambda: compare(None), PUBLISHED + r"calibration\.compare, got None"),
    "split-of-no-row": (lambda: split_of(None), PUBLISHED + r"calibration\.split_of\b"),
    "group-of-no-row": (lambda: group_of(None), PUBLISHED + r"calibration\.group_of\b"),
    "row-model-of-a-name": (lambda: row_model("llama3-8b"), PUBLISHED + r"calibration\.row_model\b"),
    "predicted-latency-of-no-row": (lambda: predicted_latency(None), r"row must be a Pope et al\. row"),
    "fit-rows-of-nothing": (lambda: fit_rows([]), "fit_rows wants a non-empty sequence of RowModel"),
    "fit-rows-fixing-an-unknown-field": (lambda: fit_rows(calibration._row_models("gpu", "calibration"),
                                                          fixed={"speed": 1.0}), "unknown fixed field 'speed'"),
    "no-ratios": (lambda: fit_efficiency(lambda efficiency: []), "no ratios"),
    "a-nan-among-the-ratios": (lambda: fit_efficiency(lambda efficiency: [1.0, math.nan]), "nan.*" + POSITIVE_FINITE),
    "a-nan-ratio": (lambda: fit_efficiency(lambda e: [float("nan")]), POSITIVE_FINITE),
    "a-zero-ratio": (lambda: fit_efficiency(lambda efficiency: [0.0]), "0.0"),
    "ratios-none": (lambda: fit_efficiency(lambda efficiency: None), "positive numbers"),
    "ratios-a-number": (lambda: fit_efficiency(lambda e: 5), "predicted / measured ratios of the rows"),
    "low-zero": (lambda: fit_efficiency(lambda efficiency: [1.0], low=0), r"\blow\b.*the smallest efficiency searched"),
    "rounds-5000": (lambda: fit_efficiency(lambda e: [1.0], rounds=5000), "each round searches every field again"),
    "rounds-1001": (lambda: fit_efficiency(lambda efficiency: [1.0], rounds=1001), r"\brounds\b=1,001"),
    "platform-unknown": (lambda: uncertainty("npu"), "unknown platform 'npu'"),
    "cache-dtype-unknown": (lambda: compare(trtllm_rows()[0], kv_dtype="fp7"), r"\bunknown dtype 'fp7'"),
}


@for_each(BAD_INPUT.values(), ids=list(BAD_INPUT))
def test_bad_input_gets_a_value_error_naming_the_argument_and_the_fix(call, words):
    with pytest.raises(ValueError, match=words):
        call()


def test_a_string_of_ratios_is_refused_with_the_reason_shown_in_the_traceback():
    with pytest.raises(ValueError, match="a list of positive numbers") as refused:
        fit_efficiency(lambda efficiency: "1.0")
    assert "a string is not a list of ratios" in str(refused.value.__cause__)
