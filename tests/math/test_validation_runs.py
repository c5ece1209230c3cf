"""The out-of-sample check (measurements.validation_runs, calibration.out_of_sample): published runs no fit has seen
(TensorRT-LLM v0.9-v1.0 tables; JetStream-PyTorch TPU v5e rows; AMD's MI300X-against-H100 comparison; vLLM's own
MI300X runs; Google's vLLM recipes on TPU7x), priced through the public estimate.

The oracle is the published measurement of each row. The bound must never be beaten; the typical estimate is held to
targets stated before the rows were priced (within 1.5x on >= 85% of rows, within 2x on >= 97%, median measured /
typical per TP degree in [0.8, 1.25], TPU median in [0.67, 1.5]). Nothing is fitted on these rows: `TYPICAL` comes
from `calibration.fit_typical` on the calibration split alone."""

import collections
import math
import statistics

import pytest

from scaling_lib import calibration
from scaling_lib.calibration import (OUT_OF_SAMPLE, group_of, out_of_sample, out_of_sample_summary, release_of,
                                     run_deployment)
from scaling_lib.estimate import BOUND, decode_time, prefill
from scaling_lib.hardware import get_chip
from scaling_lib.measurements import (CHECKPOINT_WEIGHTS, EXCLUDED, RunRow, _row_model, _row_weights, published_runs,
                                     trtllm_rows, validation_runs)
from scaling_lib.memory import param_bytes
from scaling_lib.models import Transformer, active_param_count, get_model, param_count

from tests import for_each


def _key(row) -> tuple:
    """What a run is: the page it was read from, the system and the workload (the value is not part of it)."""
    model = getattr(row, "model", None)
    return (row.source, row.engine, row.hardware, row.chip, row.n_chips, row.tensor_parallel,
            getattr(model, "name", model), row.model_card, row.weights, row.input_len, row.output_len, row.batch,
            row.kind)


# --- the rows ---------------------------------------------------------------------------------------------------------

def test_validation_rows_are_sourced_distinct_and_none_is_a_fit_row():
    rows = validation_runs()
    assert all(isinstance(row, RunRow) for row in rows)
    assert all(row.source and row.engine and row.measured > 0 for row in rows)
    keys = [_key(row) for row in rows]
    assert len(set(keys)) == len(keys)  # no run transcribed twice
    assert not (set(keys) & {_key(row) for row in published_runs()})  # none is a calibration-pool row
    # The earlier table (trtllm_offline_throughput.csv) is TensorRT-LLM v1.0's H200/H100 FP8 LLaMA columns: the v1.0
    # rows here are its other columns only.
    earlier = {(r.model, r.gpu, r.tensor_parallel, r.input_len, r.output_len) for r in trtllm_rows()}
    v1 = [row for row in rows if release_of(row) == "TensorRT-LLM v1.0"]
    assert v1 and not (earlier & {(r.model, r.chip, r.tensor_parallel, r.input_len, r.output_len) for r in v1})


def test_validation_rows_span_releases_parallelism_formats_and_platforms():
    rows = validation_runs()
    releases = {f"TensorRT-LLM v{v}" for v in ("0.9", "0.13", "0.15", "0.16", "0.17", "0.20", "1.0")}
    assert {release_of(row) for row in rows} == releases | {"JetStream-PyTorch", "vLLM 2025-01-12 dev build",
                                                           "vLLM 2024-11 ROCm build",
                                                           "vLLM 0.6.3.post2.dev308 nightly", "vLLM main of May 2025",
                                                           "vLLM TPU"}
    assert {row.tensor_parallel for row in rows} == {1, 2, 4, 8}
    assert {row.weights for row in rows} >= {"bf16", "fp8", "nvfp4", "int8"}
    assert {row.chip for row in rows} >= {"h100", "h200", "a100", "b200", "gb200", "tpu-v5e", "tpu-7x", "mi300x"}
    assert {group_of(row)[2] for row in rows} == {"dense", "moe"}


def test_models_the_library_does_not_name_come_from_their_config_files():
    by_name = {row.model.name: row.model for row in validation_runs() if isinstance(row.model, Transformer)}
    assert set(by_name) == {"mistral-7b-v0.1", "qwen3-30b-a3b", "qwen3-32b", "qwen3-coder-480b-a35b-instruct",
                            "qwen3.5-397b-a17b"}
    # Model cards: Qwen3-30B-A3B has 30.5B parameters, 3.3B activated; Mistral 7B has 7.3B (7.24e9 by its config);
    # Qwen3-32B 32.8B; Qwen3-Coder-480B-A35B 480B, 35B activated; Qwen3.5-397B-A17B 397B (its text tower here).
    assert param_count(by_name["qwen3-32b"]) == pytest.approx(32.8e9, rel=0.01)
    coder = by_name["qwen3-coder-480b-a35b-instruct"]
    assert param_count(coder) == pytest.approx(480e9, rel=0.02)
    assert active_param_count(coder) == pytest.approx(35e9, rel=0.02)
    assert param_count(by_name["qwen3.5-397b-a17b"]) == pytest.approx(397e9, rel=0.01)
    assert param_count(by_name["qwen3-30b-a3b"]) == pytest.approx(30.5e9, rel=0.01)
    assert active_param_count(by_name["qwen3-30b-a3b"]) == pytest.approx(3.3e9, rel=0.02)
    assert param_count(by_name["mistral-7b-v0.1"]) == pytest.approx(7.24e9, rel=0.01)


# --- the bound --------------------------------------------------------------------------------------------------------

def test_no_out_of_sample_measurement_beats_the_bound():
    # The bound (every resource at peak, all overlapped, all of HBM, no cap on sequences) against every row, the
    # NVFP4 rows on B200/GB200 included.
    items = out_of_sample(BOUND)
    assert len(items) == len(validation_runs()) == 1561
    assert sum(c.row.weights == "nvfp4" for c in items) >= 100
    beaten = [(c.label, round(c.ratio, 3)) for c in items if c.ratio < 1.0]
    assert beaten == []
    assert all(c.split == OUT_OF_SAMPLE for c in items)


def test_the_excluded_column_holds_a_run_that_is_impossible_as_published():
    # The excluded rows are one page column (TensorRT-LLM v0.9, Mixtral 8x7B FP16 on two A100s): its static batch 32
    # at 2048/2048 has a mean decode step, by hand, shorter than reading each GPU's half of the weights once at the
    # A100's HBM rate, so no engine could have run it (the estimate's bound agrees), and the column's other rows are
    # set aside with it.
    excluded = [row for row in validation_runs(include_excluded=True) if row.note.startswith(EXCLUDED)]
    assert len(validation_runs(include_excluded=True)) == len(validation_runs()) + len(excluded) == 1567
    assert {(row.source, row.model, row.chip, row.tensor_parallel) for row in excluded} == {
        (excluded[0].source, "mixtral-8x7b", "a100", 2)}
    row = next(r for r in excluded if (r.kind, r.batch) == ("static", 32))
    step = row.batch / row.measured  # mean seconds per decode step, generously ignoring the prefill
    weights_once = param_bytes(get_model(row.model), "bf16") / row.tensor_parallel / get_chip(row.chip).hbm_bandwidth
    assert step < weights_once
    d = run_deployment(row)
    bound = row.batch * row.output_len / (prefill(d, row.input_len, row.batch, BOUND).total_s +
                                          decode_time(d, row.batch, row.input_len, row.output_len - 1, BOUND))
    assert row.measured > bound
    with pytest.raises(TypeError, match="include_excluded"):
        validation_runs(include_excluded="yes")


# --- the typical estimate ---------------------------------------------------------------------------------------------

def test_out_of_sample_accuracy_meets_the_targets_stated_before_pricing():
    summary = out_of_sample_summary("typical")
    overall = summary["all"]
    assert overall.n_rows == len(validation_runs())
    assert overall.within_1_5 >= 0.85
    assert overall.within_2 >= 0.97
    for tp in (1, 2, 4, 8):
        assert 0.8 <= summary[f"TP{tp}"].median_measured_over_predicted <= 1.25, tp
    assert 0.67 <= summary["tpu"].median_measured_over_predicted <= 1.5


def test_googles_ironwood_runs_under_vllm_come_within_the_tpu_targets_and_their_small_experts_are_not_slow():
    # Google's recipes for TPU7x (Ironwood) under vLLM, read from AI-Hypercomputer/tpu-recipes: Qwen3-32B on one chip
    # at 1k/1k, 1k/8k and 8k/1k; on four, Qwen3-Coder-480B-A35B (160 experts 2,560 wide in a 6,144-wide model) at the
    # same three and Qwen3.5-397B-A17B (512 experts 1,024 wide in 4,096; linear attention in 3 layers of 4) at the
    # last two. The first held-out TPU runs of this generation and of mixtures of experts. Measured: typical
    # 0.63-1.54 of them, median 1.11 (the TPU target is [0.67, 1.5], worst within 3x); the small experts' runs
    # 0.91-1.54, where small experts on NVIDIA GPUs and MI300X run slower than the estimate.
    items = [c for c in out_of_sample("typical") if c.row.chip == "tpu-7x"]
    ratios = [c.measured / c.predicted for c in items]
    assert len(items) == 8 and 0.67 <= statistics.median(ratios) <= 1.5 and max(max(ratios), 1 / min(ratios)) < 1.6
    small = [c.measured / c.predicted for c in items if get_model(c.row.model).fine_grained_experts]
    assert len(small) == 5 and min(small) > 0.85
    # by hand, an upper limit no engine passes: each decode step of 135 sequences reads Qwen3-32B's FP8 weights
    # (about 32.8 GB) at most at the chip's 7.38 TB/s, so at most 135 / 4.4 ms = 30k tokens/s
    for c in items:
        if c.row.model_card == "Qwen/Qwen3-32B":
            assert c.measured < c.row.batch / (32.8e9 / 7.38e12)
    # the vLLM profile (its TPU per-step costs fitted to zero on one v6e recipe) misses them on both sides: its
    # caveat says so
    vllm = [c.measured / c.predicted for c in out_of_sample("vllm") if c.row.chip == "tpu-7x"]
    assert min(vllm) < 0.7 and max(vllm) > 1.15


def test_the_summary_scores_each_group_from_the_priced_rows():
    # An independent count: the share of rows whose measured / typical lies in [1/1.5, 1.5], by TP degree, against
    # the summary's.
    items = out_of_sample("typical")
    by_tp = collections.defaultdict(list)
    for c in items:
        by_tp[c.row.tensor_parallel].append(abs(math.log(c.measured / c.predicted)) <= math.log(1.5))
    summary = out_of_sample_summary("typical")
    for tp, hits in by_tp.items():
        assert summary[f"TP{tp}"].within_1_5 == pytest.approx(sum(hits) / len(hits))
        assert summary[f"TP{tp}"].n_rows == len(hits)
    assert {"gpu", "tpu", "dense", "moe", "nvfp4", "gb200", "TensorRT-LLM v0.20"} <= set(summary)


def test_amds_own_comparison_batch_one_to_128_on_mi300x_and_h100_comes_within_one_and_a_half_times():
    # AMD's blog (rocm-blogs LLM_Inference, January 2025) measured LLaMA-3.1 70B and 405B in FP8 on eight MI300X (a
    # vLLM dev build) and eight H100 (TensorRT-LLM 0.16): offline throughput, and the time one batch of 1 to 128
    # sequences takes, 128 or 2,048 tokens in and 2,048 out. No fit has seen any of the 80 runs; the AMD fit's own
    # latency rows are batches 1 and 2 of AMD's performance page and Oracle's 405B batches of 128-token outputs.
    # Measured: 79 of 80 within 1.5x, none beyond 2x.
    items = [c for c in out_of_sample("typical") if "rocm-blogs" in c.row.source]
    assert len(items) == 80 and {c.row.chip for c in items} == {"mi300x", "h100"}
    assert {c.row.batch for c in items if c.row.kind == "latency"} == {1, 2, 4, 8, 16, 32, 64, 128}
    within = [abs(math.log(c.measured / c.predicted)) <= math.log(1.5) for c in items]
    assert sum(within) >= 0.95 * len(items)
    assert all(abs(math.log(c.measured / c.predicted)) <= math.log(2) for c in items)
    # the engines as the page names them: a comparison of vLLM with TensorRT-LLM, not of two TensorRT-LLM runs
    assert {c.system for c in items} == {"vLLM", "TensorRT-LLM"}


def _dstack(chip, efficiency="typical"):
    """dstack's LLaMA-3.1-405B runs on `chip`, priced at `efficiency`, by (input tokens, prompts at once)."""
    return {(c.row.input_len, c.row.batch): c for c in out_of_sample(efficiency)
            if "dstackai/benchmarks" in c.row.source and c.row.chip == chip}


def test_dstacks_mi300x_batches_of_4_to_256_come_within_one_and_a_half_times():
    # dstack's November 2024 study: LLaMA-3.1-405B in FP8 (AMD's -FP8-KV checkpoint, a BF16 cache) on eight MI300X
    # under a vLLM ROCm build run eagerly, 4 to 256 prompts at once of 128, 2,048 or 32,784 tokens with 2,048 out.
    # No fit has seen them; the AMD fit's rows are other vLLM builds' offline tables and Oracle's 405B batches.
    # Measured: all 19 within 1.5x of the typical estimate (median measured / typical 0.83), none above 0.3 of the
    # bound.
    items, bound = _dstack("mi300x"), _dstack("mi300x", BOUND)
    assert len(items) == 19 and {batch for _, batch in items} == {4, 8, 16, 32, 64, 128, 256}
    assert all(abs(math.log(c.measured / c.predicted)) <= math.log(1.5) for c in items.values())
    assert 0.7 <= statistics.median(c.measured / c.predicted for c in items.values()) <= 0.95
    assert all(c.measured < 0.35 * bound[key].predicted for key, c in items.items())


def test_metas_fp8_checkpoint_takes_what_vllm_loaded_of_each_gpu():
    # Meta's FP8 LLaMA-3.1-405B: FP8 feed-forward layers, BF16 self-attention and first and last layers (Llama 3
    # paper, section 6.2). vLLM loading it with TP8 on H100 reported 56.7677 GB, in GiB (dstack's study,
    # raw_data/gpu-usage.md): the mixed format comes within 0.5% of it, where all weights in FP8 fall 17% short.
    per_gpu = {name: param_bytes("llama3.1-405b", dtype) / 8 / 2**30
               for name, dtype in (("meta", CHECKPOINT_WEIGHTS["meta-llama/Llama-3.1-405B-FP8"]), ("fp8", "fp8"))}
    assert per_gpu["meta"] == pytest.approx(56.7677, rel=0.005)
    assert per_gpu["fp8"] < 0.85 * 56.7677


def test_dstacks_h100_runs_of_metas_checkpoint_are_priced_while_the_engine_holds_the_whole_batch():
    # The same study on eight H100 (vLLM 0.6.3 nightly) with Meta's FP8 checkpoint, its attention in BF16
    # (measurements.CHECKPOINT_WEIGHTS): up to 70,000 tokens of batch (16 prompts of 2,048 + 2,048, or 32 of
    # 128 + 2,048) within 1.25x of the typical estimate (measured 1.05-1.11). From 16 to 64 prompts of 2,048 + 2,048
    # the measured tokens/s grow 1.28x where one batch held at once would grow 2.9x: the engine, its 56.8 GiB of
    # weights in the 72 GiB it may use per GPU, held fewer sequences than it was given, which a static batch does not
    # price. None beats the bound.
    items, bound = _dstack("h100"), _dstack("h100", BOUND)
    assert len(items) == 13 and {c.row.weights for c in items.values()} == {CHECKPOINT_WEIGHTS[
        "meta-llama/Llama-3.1-405B-FP8"]}
    held = [c for c in items.values() if c.row.batch * (c.row.input_len + c.row.output_len) <= 70_000]
    assert len(held) == 7 and all(0.8 <= c.measured / c.predicted <= 1.25 for c in held)
    small, large = items[2048, 16], items[2048, 64]
    assert large.measured / small.measured < 1.4 and large.predicted / small.predicted > 2
    assert all(c.measured < bound[key].predicted for key, c in items.items())


@pytest.mark.xfail(strict=True, reason="measured on 1,561 rows: within 2x on 0.98 of all rows but 0.96 of TP1 and "
                   "TensorRT-LLM v0.9 rows, 0.94 of MI300X, 0.77 of dstack's vLLM 0.6.3 runs on H100 and 0.2 of "
                   "vLLM's Qwen3 MoE runs on MI300X (GB200's Qwen3-30B-A3B runs now within 2x); the misses are "
                   "Qwen3-30B-A3B and Qwen3-235B-A22B on MI300X (about 2x too fast), "
                   "LLaMA-70B FP8 on one H100 and BF16 on two A100 in v0.13 (the engine's memory plan: other releases "
                   "run the same configuration twice as fast), LLaMA-3.1-405B batches on eight H100 larger than vLLM "
                   "held at once (its memory plan again) and Mistral 7B at 20000/2000 (its config's 4,096-token "
                   "window, which the engine did not use) and in two v0.9 runs on H200")
def test_every_group_meets_the_two_x_target():
    summary = out_of_sample_summary("typical")
    assert all(m.within_2 >= 0.97 for m in summary.values())


def test_release_of_keeps_the_engine_it_was_measured_on():
    # JetStream serves two model code bases; a MaxText run is not a PyTorch one.
    maxtext = next(row for row in published_runs() if row.engine == "JetStream + MaxText")
    assert release_of(maxtext) == "JetStream + MaxText"
    pytorch = next(row for row in validation_runs() if row.engine.startswith("JetStream-PyTorch ("))
    assert release_of(pytorch) == "JetStream-PyTorch"
    assert calibration.out_of_sample("typical") is calibration.out_of_sample("typical")  # priced once, cached


# --- bad input: a ValueError naming the argument and the fix -----------------------------------------------------------
BAD_INPUT = {
    "release-of-a-table-row": (lambda: release_of(trtllm_rows()[0]), "published run"),
    "a-config-that-is-not-there": (lambda: _row_model("hf:no-such-model"), "no config at"),
    "a-mixed-checkpoint-in-another-format": (lambda: _row_weights({"model_card": "meta-llama/Llama-3.1-405B-FP8",
                                                                   "weights": "bf16"}), "write 'fp8'"),
}


@for_each(BAD_INPUT.values(), ids=list(BAD_INPUT))
def test_bad_input_gets_a_value_error_naming_the_argument_and_the_fix(call, words):
    with pytest.raises(ValueError, match=words):
        call()


def test_small_experts_on_eight_blackwell_gpus_are_right_only_on_average_and_a_gb200s_host_shows_on_a_small_model():
    # Chapter 11's reading of the small-expert runs of TensorRT-LLM v1.0's table, their routed experts' matmuls at the
    # bf16 rate (NVIDIA's kernel timings: fp8 and nvfp4 barely speed them). Qwen3-235B-A22B (128 small experts) on
    # eight B200 in NVFP4 comes within [0.8, 1.25] of the typical estimate at the median (measured 1.07), between
    # two errors: a long prompt's run below 0.8 of the estimate (measured 0.76), 128/128 above 1.5 (1.93).
    # Qwen3-30B-A3B on one B200 or GB200: a median 0.84 of the estimate, its worst 1.98x (the test below).
    items = out_of_sample("typical")

    def measured_over_typical(name, chips):
        return [c.measured / c.predicted for c in items
                if getattr(c.row.model, "name", c.row.model) == name and c.row.chip in chips]

    qwen235 = measured_over_typical("qwen3-235b-a22b", {"b200"})
    assert 0.8 <= statistics.median(qwen235) <= 1.25 and min(qwen235) < 0.8 and max(qwen235) > 1.5
    # At 128/128 on one GPU, GB200 (the faster GPU, its rates a tenth higher) beats B200 on LLaMA-3.3-70B (measured
    # 1.09x) but delivers well under B200's tokens/s on Qwen3-30B-A3B (measured 0.61x): its host, not its GPU.
    short = {}
    for c in items:
        row = c.row
        if (row.tensor_parallel, row.input_len, row.output_len) == (1, 128, 128) and \
                release_of(row) == "TensorRT-LLM v1.0":
            short[getattr(row.model, "name", row.model), row.chip] = c.measured
    assert short["llama3-70b", "gb200"] > short["llama3-70b", "b200"]
    assert short["qwen3-30b-a3b", "gb200"] < 0.75 * short["qwen3-30b-a3b", "b200"]


def test_qwen3_30b_a3b_on_one_blackwell_gpu_comes_within_the_band_a_reviewer_asked():
    # The band a reviewer asked of these runs: median measured / typical in [0.67, 1.5], the worst within 2.5x. On the
    # 20 held-out runs (TensorRT-LLM v1.0, NVFP4, one B200 or GB200): median 0.84 (B200 0.86, GB200 0.75), worst
    # 0.504 (1.98x, GB200 at 128/128, where its host shows: above), the best 1.00. Priced without what NVIDIA's kernel
    # timings show they were 0.65 and 3.1x; with the bf16 rate of narrow experts and each MoE layer's chain but not the
    # rate NVIDIA's layers of their size compute at (0.35 of the bf16 peak in NVFP4 on a B200), 0.69 and 2.46x.
    ratios = [c.measured / c.predicted for c in out_of_sample("typical")
              if getattr(c.row.model, "name", c.row.model) == "qwen3-30b-a3b" and c.row.chip in ("b200", "gb200")]
    assert len(ratios) == 20 and 0.8 <= statistics.median(ratios) <= 1.5 and 1 / 2 <= min(ratios) <= max(ratios) < 1.05

