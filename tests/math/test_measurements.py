"""scaling_lib.measurements: the published rows (Pope et al. 2022's Tables 2 and 3, TensorRT-LLM's tables) and how
they are looked up; the rows against the estimate are in test_calibration.py and test_validation_runs.py."""

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
