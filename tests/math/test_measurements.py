"""scaling_lib.measurements: the published rows (Pope et al. 2022's Tables 2 and 3, TensorRT-LLM's tables, NCCL's
statements and measurements, the published runs) read as published and looked up, and this book's own H200 runs; the
rows against the estimate are in test_calibration.py and test_validation_runs.py."""

import dataclasses
import re

import pytest

from scaling_lib.dtypes import MixedWeights
from scaling_lib.estimate import Deployment, decode_step
from scaling_lib.hardware import Chip, get_chip
from scaling_lib.measurements import (CollectiveRow, PopeRow, RunRow, ThroughputRow, accelerator_decode_sweep,
                                      accelerator_knee, accelerator_rates, accelerator_rows, accelerator_sweep_model,
                                      collective_rows, nccl_rows, pope_headline_runs, pope_row, pope_rows,
                                      published_runs, sweep_rows, trtllm_rows, validation_runs,
                                      write_accelerator_rows)
from scaling_lib.memory import param_bytes
from scaling_lib.roofline import KNEE_FACTOR

from tests import for_each


# --- the published rows, read as published -----------------------------------------------------------------------------
FIRST_ROWS = {
    # TensorRT-LLM's Performance Overview, Llama 3.3 70B on one H200 in FP8: 3,803 output tokens/s at 128/128.
    "tensorrt-llm": (trtllm_rows, ThroughputRow(
        model="llama3-70b", checkpoint="nvidia/Llama-3.3-70B-Instruct-FP8", gpu="h200", n_gpus=1, tensor_parallel=1,
        input_len=128, output_len=128, weight_dtype="fp8", output_tokens_per_s=3803.0, source=""),
        "column 'H200 TP1 (FP8)'"),
    # Pope et al. 2022, Table 2: PaLM 540B low-latency prefill on 64 TPU v4, 2D weight-stationary, int8 weights,
    # MFU 43%, 0.29 s.
    "pope": (pope_rows, PopeRow(
        model="palm-540b", scenario="low latency", phase="prefill", chip="tpu-v4", chips=64, batch=1, context_len=2048,
        decode_steps=0, ffn_layout="2d-ws", attention_sharding="heads", weight_dtype="int8", mfu=0.43, latency_s=0.29,
        source=""), "Pope et al. 2022"),
    # the NCCL maintainer's statement for 8 H100 at 4 GiB: ring 370 GB/s bus bandwidth
    "collectives": (collective_rows, CollectiveRow(
        chip="h100", n_chips=8, collective="all-reduce", algorithm="ring", array_bytes=4294967296.0, time_us=None,
        busbw_GBps=370.0, algbw_GBps=None, kind="statement", source=""), ""),
    "published-runs": (published_runs, RunRow(
        source="", engine="TensorRT-LLM v0.14 (TRT engines)", hardware="H200 TP1 FP8", chip="h200", n_chips=1,
        tensor_parallel=1, model="llama3-70b", model_card="meta-llama/Llama-3.1-70B / Llama-3.3-70B (same shape)",
        weights="fp8", kv_cache="fp8", compute="fp8", input_len=1000, output_len=1000, batch=None, kind="offline",
        measured=2585.0953, unit="out tok/s", note="Llama-3.1-70B"), "arthurrasmusson/TensorRT-LLM"),
}


@for_each(FIRST_ROWS.values(), ids=list(FIRST_ROWS))
def test_the_first_row_of_each_table_is_read_as_published(rows, first, source):
    row = rows()[0]
    assert dataclasses.replace(row, source="") == first
    assert source in row.source


def test_other_rows_are_read_as_published_with_a_batch_only_where_one_is_given():
    assert pope_rows()[1].decode_steps == 64 and pope_rows()[1].attention_sharding == "batch"
    rows = collective_rows()
    # NVLS on 8 H100: 480 GB/s bus, 275 GB/s algorithm bandwidth
    assert (rows[1].algorithm, rows[1].busbw_GBps, rows[1].algbw_GBps) == ("", 480.0, 275.0)
    timed = [r for r in rows if r.time_us is not None][0]  # NCCL issue 1259: about 6 us on 2 H100 at 8 kB
    assert (timed.n_chips, timed.array_bytes, timed.time_us, timed.busbw_GBps, timed.kind) == (2, 8192.0, 6.0, None,
                                                                                                "measurement")
    assert timed.seconds == 6e-6
    static = [r for r in published_runs() if r.kind == "static"][0]  # TensorRT-LLM v0.6.1: static batch 768
    assert (static.batch, static.measured, static.input_len, static.output_len) == (768, 19694.0, 128, 128)
    # the NCCL rows in bytes per second
    ring, nvls = nccl_rows()
    assert (ring.gpu, ring.n_gpus, ring.collective, ring.algorithm, ring.array_bytes_min, ring.bus_bandwidth) == \
        ("h100", 8, "all-reduce", "ring", 2.0**30, 370e9)
    assert (nvls.algorithm, nvls.bus_bandwidth) == ("nvls", 480e9) and "nccl-tests issue 212" in nvls.source


def test_every_published_row_names_its_source_hardware_and_model_card():
    for rows in (trtllm_rows(), pope_rows(), published_runs(), validation_runs(), collective_rows()):
        assert rows and all(row.source for row in rows)
    assert all("/" in row.model_card for row in published_runs() + validation_runs())  # org/name on Hugging Face
    assert all(row.hardware for row in published_runs() + validation_runs())
    for row in pope_rows():
        assert row.source.startswith("Pope et al. 2022") and re.search(r"Table [23]", row.source)
    for row in trtllm_rows():
        assert row.tensor_parallel == int(re.search(r"\bTP(\d+)\b", row.label).group(1))


def test_a_statements_bus_bandwidth_and_algorithm_bandwidth_follow_nccl_tests_definition():
    # nccl-tests (doc/PERFORMANCE.md) defines an all-reduce's bus bandwidth as its algorithm bandwidth times
    # 2 (n - 1) / n. The NCCL maintainer's statement for 8 H100 (about 480 GB/s bus, about 275 GB/s algorithm) gives
    # 480 / 275 = 1.745 against 2 x 7 / 8 = 1.75: the two columns are read into the right fields.
    both = [r for r in collective_rows() if r.busbw_GBps is not None and r.algbw_GBps is not None]
    assert both
    for r in both:
        assert r.collective == "all-reduce"
        assert r.busbw_GBps / r.algbw_GBps == pytest.approx(2 * (r.n_chips - 1) / r.n_chips, rel=0.01)


def test_measured_collective_times_grow_with_the_array_and_stay_under_the_line_rate():
    # Each series (chip, chips, collective) takes longer for a larger array. GB200 NVL72's all-reduce over 72 GPUs:
    # NVLink 5 carries 900 GB/s each way per GPU (NVIDIA's GB200 NVL72 page), so the bus bandwidth
    # bytes / time x 2 (n - 1) / n (nccl-tests' definition) stays below it.
    series = {}
    for r in collective_rows():
        if r.time_us is not None:
            series.setdefault((r.chip, r.n_chips, r.collective, r.algorithm), []).append((r.array_bytes, r.time_us))
    assert len(series) >= 4
    for points in series.values():
        times = [t for _, t in sorted(points)]
        assert times == sorted(times) and all(t > 0 for t in times)
    for size, time_us in series[("gb200", 72, "all-reduce", "")]:
        assert size / (time_us * 1e-6) * 2 * 71 / 72 < 900e9


def test_pope_headline_runs_count_the_tokens_each_sequence_processed():
    # Pope et al.'s abstract: PaLM 540B prefills batch 512 x 2,048-token prompts, and decodes 64 steps at batch 64.
    from scaling_lib import measurements

    runs = pope_headline_runs()
    prefill, decode = runs["prefill-high-throughput"], runs["decode-low-latency"]
    assert (prefill.phase, prefill.batch, prefill.tokens_per_sequence) == ("prefill", 512, 2048)
    assert (decode.phase, decode.batch, decode.tokens_per_sequence) == ("decode", 64, 64)
    decode_row = pope_row("palm-540b", "low latency", "decode")
    assert decode.tokens == decode_row.tokens and decode.seconds_per_step == decode_row.latency_s / 64
    assert measurements.POPE_HEADLINE_RUNS == runs  # the same runs under the constant's name
    with pytest.raises(AttributeError, match="NO_SUCH_TABLE"):
        measurements.NO_SUCH_TABLE


@for_each([("palm-8b", "low latency", "decode"),
                                                     ("palm-540b", "fastest", "decode"),
                                                     ("palm-540b", "low latency", "training")], ids=str)
def test_an_unknown_pope_row_is_a_value_error_listing_every_known_row(model, scenario, phase):
    with pytest.raises(ValueError, match=r"\(known rows: \('palm-540b', 'low latency', 'prefill'\), \('palm-540b', ") \
            as err:
        pope_row(model, scenario, phase)
    known = str(err.value).split("known rows: ", 1)[1]
    assert known.count("), (") == len(pope_rows()) - 1


# --- this book's measurements on an H200 (accelerator_measurements.csv) -----------------------------------------------
def test_every_accelerator_row_carries_its_date_software_method_and_source():
    rows = accelerator_rows()
    assert {r.run for r in rows} == {"h200-bf16", "h200-book-fp32", "h200-book-batch-rule", "h200-book-sweep"}
    for row in rows:
        assert row.chip == "h200" and get_chip(row.chip).name == "h200"
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", row.date) and "JAX" in row.software
        assert row.method and "H200" in row.source, row
    # the rates the run's log and its write-up quote: 3.95e12 B/s read, 6.89e14 FLOP/s bf16 matmul
    bf16 = accelerator_rates("h200-bf16")
    assert (bf16.bytes_per_s, bf16.flops_per_s) == (pytest.approx(3.954e12, rel=1e-3), pytest.approx(6.887e14, rel=1e-3))


def test_the_h200_knee_in_bf16_is_within_chapter_1s_factor_of_the_prediction_from_its_rates():
    knee = accelerator_knee()
    # 1.5 C / W = 1.5 x 6.89e14 / 3.95e12 = 261 tokens (bf16: b_w / 2 = 1); the curve's knee is at 256
    assert knee.predicted_knee == pytest.approx(1.5 * 6.887e14 / 3.954e12, rel=1e-3)
    assert knee.knee == 256
    assert 1 / KNEE_FACTOR <= knee.knee / knee.predicted_knee <= KNEE_FACTOR
    # read as chapter 1 reads its CPU's curve (floor over slope), B_crit is within the factor of C / W as well
    assert 1 / KNEE_FACTOR <= knee.fitted_batch / knee.predicted_batch <= KNEE_FACTOR


def test_rates_from_calls_too_short_to_measure_miss_the_h200_knee_and_full_sized_ones_find_it():
    # the same float32 layer curve (knee at 512): its own 1,024-square matmul and 256 MiB read measured C = 1.3e13 and
    # W = 9.6e11, a B_crit of 27; rates from a 4e9-byte read and an 8,192-square matmul give 210 (1.5x: 314)
    undersized = accelerator_knee("h200-book-batch-rule")
    full = accelerator_knee("h200-book-batch-rule", rates_run="h200-book-fp32")
    assert undersized.knee == full.knee == 512
    assert undersized.predicted_batch == pytest.approx(27.27, rel=1e-3)
    assert undersized.knee / undersized.predicted_knee > KNEE_FACTOR
    assert 1 / KNEE_FACTOR <= full.knee / full.predicted_knee <= KNEE_FACTOR


def test_no_h200_decode_step_beats_the_bound_and_each_bound_is_the_estimate_on_the_measured_rates():
    rates, model = accelerator_rates("h200-book-sweep"), accelerator_sweep_model()
    chip = Chip(name="h200-measured", peak_flops_table=(("fp32", rates.flops_per_s),), hbm_bandwidth=rates.bytes_per_s,
                hbm_capacity=get_chip("h200").hbm_capacity, topology=None, source="the sweep's measured W and C")
    deployment = Deployment(model, chip, 1, weight_dtype="fp32", kv_dtype="fp32", compute_dtype="fp32",
                            activation_dtype="fp32")
    steps = accelerator_decode_sweep()
    assert [(s.batch, s.cache_len) for s in steps] == [(b, s) for b in (1, 8, 64, 128) for s in (512, 4096)]
    for step in steps:
        assert step.bound_s == pytest.approx(decode_step(deployment, step.batch, step.cache_len).total_s, rel=1e-9)
        assert step.ratio >= 1.0, step
    assert min(s.ratio for s in steps) == pytest.approx(3.6, abs=0.05)  # the 3.6-6.5x the run's write-up quotes
    assert max(s.ratio for s in steps) == pytest.approx(6.5, abs=0.05)


def test_accelerator_rows_written_by_the_bench_read_back_as_written(tmp_path):
    rows = accelerator_rows()
    write_accelerator_rows(rows, tmp_path / "run.csv")
    assert accelerator_rows(tmp_path / "run.csv") == rows


# --- bad input: a ValueError naming the argument and the fix -----------------------------------------------------------
@for_each([
    (lambda: accelerator_knee("h200-tpu"), "run='h200-tpu' is no run"),
    (lambda: accelerator_knee(rates_run="h200-tpu"), "rates_run='h200-tpu' is no run"),
    (lambda: accelerator_knee("h200-book-sweep"), "no knee or layer rows"),
    (lambda: accelerator_decode_sweep("h200-bf16"), "no decode_step rows"),
    (lambda: accelerator_rates("h200-book-batch-rule", rows=[r for r in accelerator_rows() if r.experiment != "read"]),
     "no read and matmul rows"),
    (lambda: accelerator_rows("no/such/run.csv"), "path='no/such/run.csv' is not a file"),
    (lambda: write_accelerator_rows(accelerator_rows(), "no/such/folder/run.csv"), "lies in no folder"),
    (lambda: accelerator_knee(rows=[3]), "rows must hold only AcceleratorRows"),
    (lambda: accelerator_rows()[2].measured_rate, "a knee row has no rate"),
], ids=str)
def test_bad_input_gets_a_value_error_naming_the_argument_and_the_fix(call, words):
    with pytest.raises(ValueError, match=words):
        call()


def test_an_accelerator_file_with_other_columns_or_an_unknown_experiment_is_refused(tmp_path):
    (tmp_path / "bad.csv").write_text("run,chip\nx,h200\n")
    with pytest.raises(ValueError, match="expected"):
        accelerator_rows(tmp_path / "bad.csv")
    row = dataclasses.replace(accelerator_rows()[0], experiment="flash")
    write_accelerator_rows([row], tmp_path / "flash.csv")
    with pytest.raises(ValueError, match="unknown experiment 'flash'"):
        accelerator_rows(tmp_path / "flash.csv")


def test_a_row_read_from_a_config_takes_the_mixed_format_its_checkpoint_stores():
    # gpt-oss-120b's config stores MXFP4 experts (4.25 bits, 32-weight blocks with a byte of scale: 17/32 bytes) and
    # keeps attention, router, embeddings and head in BF16 (its quantization_config); a sweep row whose weights column
    # says mxfp4 is priced so, and its weights come to what the report prints by hand, not 0.53 bytes for every weight
    row = next(r for r in sweep_rows() if getattr(r.model, "name", "") == "gpt-oss-120b")
    assert row.weights == "mxfp4" and isinstance(row.weights, MixedWeights)
    assert row.weights.group_bytes("experts") == 17 / 32 and row.weights.group_bytes("attention") == 2
    # 65.2 GB in all against 62.1 GB were every weight MXFP4: 3 GB of BF16 attention, embeddings and head
    assert row.deployment().weight_bytes_per_chip * 8 - param_bytes(row.model, "mxfp4") > 2.5e9
    # a config that stores nothing (Qwen3-30B-A3B in BF16) leaves the column as written
    qwen = next(r for r in validation_runs() if getattr(r.model, "name", "") == "qwen3-30b-a3b" and r.weights == "fp8")
    assert type(qwen.weights) is str
