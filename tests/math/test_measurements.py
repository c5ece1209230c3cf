"""scaling_lib.measurements: the published rows (Pope et al. 2022's Tables 2 and 3, TensorRT-LLM's tables) and how
they are looked up; the rows against the estimate are in test_calibration.py and test_validation_runs.py."""

import dataclasses
import re

import pytest

from scaling_lib.measurements import collective_rows, pope_row, pope_rows, published_runs, trtllm_rows, validation_runs


def test_an_unknown_pope_row_lists_the_known_ones():
    with pytest.raises(ValueError) as err:
        pope_row("palm-540b", "no such scenario", "decode")
    known = str(err.value).split("known rows: ", 1)[1]
    assert known.count("), (") == len(pope_rows()) - 1


def test_trtllm_rows_carry_the_tensor_parallel_degree_their_label_names():
    for row in trtllm_rows():
        assert row.tensor_parallel == int(re.search(r"\bTP(\d+)\b", row.label).group(1))


def test_pope_rows_cite_their_table():
    for row in pope_rows():
        assert row.source.startswith("Pope et al. 2022") and re.search(r"Table [23]", row.source)


def test_a_statements_bus_bandwidth_and_algorithm_bandwidth_follow_nccl_tests_definition():
    # nccl-tests (doc/PERFORMANCE.md) defines an all-reduce's bus bandwidth as its algorithm bandwidth times
    # 2 (n - 1) / n. The NCCL maintainer's statement for 8 H100 (about 480 GB/s bus, about 275 GB/s algorithm) gives
    # 480 / 275 = 1.745 against 2 x 7 / 8 = 1.75: the two columns are read into the right fields.
    both = [r for r in collective_rows() if r.busbw_GBps is not None and r.algbw_GBps is not None]
    assert both
    for r in both:
        assert r.collective == "all-reduce"
        assert r.busbw_GBps / r.algbw_GBps == pytest.approx(2 * (r.n_chips - 1) / r.n_chips, rel=0.01)


def test_every_published_row_names_its_source_and_every_run_its_model_card():
    for rows in (trtllm_rows(), pope_rows(), published_runs(), validation_runs(), collective_rows()):
        assert rows and all(row.source for row in rows)
    assert all("/" in row.model_card for row in published_runs() + validation_runs())  # org/name on Hugging Face


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


def test_every_run_keeps_the_hardware_its_source_names():
    assert all(row.hardware for row in published_runs() + validation_runs())


# --- issue 21, G2 seed 72: Pope et al.'s two headline runs, read from the tables ------------------------------------
def test_pope_headline_runs_count_the_tokens_each_sequence_processed():
    # Pope et al.'s abstract: PaLM 540B prefills batch 512 x 2,048-token prompts, and decodes 64 steps at batch 64.
    from scaling_lib.measurements import pope_headline_runs

    runs = pope_headline_runs()
    prefill, decode = runs["prefill-high-throughput"], runs["decode-low-latency"]
    assert (prefill.phase, prefill.batch, prefill.tokens_per_sequence) == ("prefill", 512, 2048)
    assert (decode.phase, decode.batch, decode.tokens_per_sequence) == ("decode", 64, 64)
    decode_row = pope_row("palm-540b", "low latency", "decode")
    assert decode.tokens == decode_row.tokens and decode.seconds_per_step == decode_row.latency_s / 64


def test_the_headline_runs_constant_is_read_once_and_cached_under_its_own_name(monkeypatch):
    from scaling_lib import measurements

    monkeypatch.delitem(vars(measurements), "POPE_HEADLINE_RUNS", raising=False)
    first = measurements.POPE_HEADLINE_RUNS
    assert vars(measurements)["POPE_HEADLINE_RUNS"] is first and measurements.POPE_HEADLINE_RUNS is first
    assert measurements.pope_headline_runs() == first  # the function is still there, and gives the same runs
    with pytest.raises(AttributeError, match="NO_SUCH_TABLE"):
        measurements.NO_SUCH_TABLE


# --- issue 21, third pass (G2): each table's reader puts every published column into its field, with its type -------
def _types(row):
    return {field.name: type(getattr(row, field.name)).__name__ for field in dataclasses.fields(row)}


def test_the_first_tensorrt_llm_row_is_read_as_published():
    # TensorRT-LLM's Performance Overview, Llama 3.3 70B on one H200 in FP8: 3,803 output tokens/s at 128/128.
    from scaling_lib.measurements import ThroughputRow

    row = trtllm_rows()[0]
    assert dataclasses.replace(row, source="") == ThroughputRow(
        model="llama3-70b", checkpoint="nvidia/Llama-3.3-70B-Instruct-FP8", gpu="h200", n_gpus=1, tensor_parallel=1,
        input_len=128, output_len=128, weight_dtype="fp8", output_tokens_per_s=3803.0, source="")
    assert [t for name, t in _types(row).items() if name in ("n_gpus", "tensor_parallel", "input_len", "output_len",
                                                             "output_tokens_per_s")] == ["int"] * 4 + ["float"]
    assert "column 'H200 TP1 (FP8)'" in row.source


def test_the_first_pope_row_is_read_as_published():
    # Pope et al. 2022, Table 2: PaLM 540B low-latency prefill on 64 TPU v4, 2D weight-stationary, int8 weights,
    # MFU 43%, 0.29 s.
    from scaling_lib.measurements import PopeRow

    row = pope_rows()[0]
    assert dataclasses.replace(row, source="") == PopeRow(
        model="palm-540b", scenario="low latency", phase="prefill", chip="tpu-v4", chips=64, batch=1, context_len=2048,
        decode_steps=0, ffn_layout="2d-ws", attention_sharding="heads", weight_dtype="int8", mfu=0.43, latency_s=0.29,
        source="")
    assert set(_types(row).values()) == {"str", "int", "float"}
    assert (type(row.chips), type(row.decode_steps), type(row.mfu), type(row.latency_s)) == (int, int, float, float)
    assert pope_rows()[1].decode_steps == 64 and pope_rows()[1].attention_sharding == "batch"


def test_collective_rows_read_a_statement_and_a_timed_measurement_as_published():
    from scaling_lib.measurements import CollectiveRow

    rows = collective_rows()
    # the NCCL maintainer's statements for 8 H100 at 4 GiB: ring 370 GB/s bus; NVLS 480 bus, 275 algorithm bandwidth
    assert dataclasses.replace(rows[0], source="") == CollectiveRow(
        chip="h100", n_chips=8, collective="all-reduce", algorithm="ring", array_bytes=4294967296.0, time_us=None,
        busbw_GBps=370.0, algbw_GBps=None, kind="statement", source="")
    assert (rows[1].algorithm, rows[1].busbw_GBps, rows[1].algbw_GBps) == ("", 480.0, 275.0)
    timed = [r for r in rows if r.time_us is not None][0]  # NCCL issue 1259: about 6 us on 2 H100 at 8 kB
    assert (timed.n_chips, timed.array_bytes, timed.time_us, timed.busbw_GBps, timed.kind) == (2, 8192.0, 6.0, None,
                                                                                                "measurement")
    assert type(timed.n_chips) is int and type(timed.array_bytes) is float and timed.seconds == 6e-6


def test_published_runs_are_read_as_published_with_a_batch_only_where_one_is_given():
    from scaling_lib.measurements import RunRow

    runs = published_runs()
    assert dataclasses.replace(runs[0], source="") == RunRow(
        source="", engine="TensorRT-LLM v0.14 (TRT engines)", hardware="H200 TP1 FP8", chip="h200", n_chips=1,
        tensor_parallel=1, model="llama3-70b", model_card="meta-llama/Llama-3.1-70B / Llama-3.3-70B (same shape)",
        weights="fp8", kv_cache="fp8", compute="fp8", input_len=1000, output_len=1000, batch=None, kind="offline",
        measured=2585.0953, unit="out tok/s", note="Llama-3.1-70B")
    static = [r for r in runs if r.kind == "static"][0]  # TensorRT-LLM v0.6.1: static batch 768, 19,694 tok/s per GPU
    assert (static.batch, static.measured, static.input_len, static.output_len) == (768, 19694.0, 128, 128)
    assert (type(static.batch), type(static.measured), type(static.n_chips)) == (int, float, int)
    assert runs[0].source.startswith("arthurrasmusson/TensorRT-LLM")


def test_the_nccl_rows_are_read_in_bytes_per_second():
    from scaling_lib.measurements import nccl_rows

    ring, nvls = nccl_rows()
    assert (ring.gpu, ring.n_gpus, ring.collective, ring.algorithm, ring.array_bytes_min, ring.bus_bandwidth) == \
        ("h100", 8, "all-reduce", "ring", 2.0**30, 370e9)
    assert (nvls.algorithm, nvls.bus_bandwidth) == ("nvls", 480e9) and "issue 212" in nvls.source
    assert type(ring.n_gpus) is int and type(ring.array_bytes_min) is float


@pytest.mark.parametrize("model, scenario, phase", [("palm-8b", "low latency", "decode"),
                                                     ("palm-540b", "fastest", "decode"),
                                                     ("palm-540b", "low latency", "training")])
def test_an_unknown_pope_row_is_a_value_error_listing_the_known_rows(model, scenario, phase):
    with pytest.raises(ValueError, match=r"\(known rows: \('palm-540b', 'low latency', 'prefill'\), \('palm-540b', "):
        pope_row(model, scenario, phase)
