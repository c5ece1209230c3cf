"""The command line (`python -m scaling_lib`): the `estimate` and `plan` commands, every option, the JSON schema, the
printed table, what each option reads, a closed pipe and every error path. In-process (`main`) where that tests the
same thing; a subprocess where only a process shows it (a closed pipe, `python -m`)."""

import argparse
import io
import json
import math
import os
import re
import subprocess
from types import SimpleNamespace
import sys

import pytest

import scaling_lib.__main__ as cli
from scaling_lib.__main__ import (SCHEMA, _OneLineParser, _count, _emit, _fail, _fraction, _model_options, _names,
                                  _one_line, _price, _prices, _seconds, main)
from scaling_lib.models import HfConfig
from scaling_lib.your_model import _limit, _split
from scaling_lib.estimate import PROFILES, TYPICAL, Deployment, decode_step, report
from scaling_lib.models import active_param_count, from_hf_config, get_model, model_names, param_count
from scaling_lib.plan import plan, price_deployment
from tests import REPO, for_each

EXAMPLE = ["plan", "--model", "llama3-70b", "--chip", "h100", "--max-chips", "16", "--input-len", "2000",
           "--output-len", "500", "--ttft", "2", "--tpot", "0.05", "--price", "2.5"]
ESTIMATE = ["estimate", "--model", "llama3-70b", "--chip", "h100", "--chips", "64", "--tensor-parallel", "8"]
SMALL = ["estimate", "--model", "llama3-8b", "--chip", "h100", "--chips", "1"]
DEPLOYMENT_KEYS = {"chip", "n_chips", "tensor_parallel", "replicas", "batch", "weight_dtype", "kv_dtype", "ttft_s",
                   "tpot_s", "output_tokens_per_s", "dollars_per_million_input_tokens",
                   "dollars_per_million_output_tokens"}


def _strict(text: str):
    """json.loads that refuses NaN and Infinity, which are not JSON."""
    def refuse(constant):
        raise AssertionError(f"not strict JSON: {constant}")
    return json.loads(text, parse_constant=refuse)


def _ok(argv, capsys):
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    return captured.out


def _json(argv, capsys):
    return _strict(_ok(argv + ["--json"], capsys))


def _rows(table: str) -> dict:
    """A printed table as {row name: value}: the name, two spaces or more, the value."""
    return dict(re.split(r"\s{2,}", line.strip(), maxsplit=1) for line in table.splitlines() if line.strip())


# --- estimate: the numbers in JSON ------------------------------------------------------------------------------------
def test_estimate_with_tensor_parallelism_reports_the_replicas_and_scales_one_replicas_report(capsys):
    data = _json(ESTIMATE, capsys)
    one = report("llama3-70b", "h100", 8, kv_dtype="bf16")  # one replica of the same deployment
    assert data["schema"] == SCHEMA and data["replicas"] == 8 and data["n_chips"] == 64
    assert data["tensor_parallel"] == 8 and data["batch"] == 8 * one.batch and data["max_batch"] == 8 * one.max_batch
    assert data["tokens_per_s_typical"] == pytest.approx(8 * one.tokens_per_s_typical, rel=1e-12)
    assert data["tpot_typical_s"] == data["decode_step_typical"]["total_s"] == one.decode_step_typical_s
    assert data["decode_step_bound"]["total_s"] == pytest.approx(one.decode_step_bound_s, rel=1e-12)
    assert data["parameters"] == param_count(get_model("llama3-70b"))
    assert data["active_parameters"] == active_param_count(get_model("llama3-70b"))
    assert data["efficiency"]["typical"]["mfu"] == TYPICAL.for_chip("h100").mfu
    assert data["efficiency"]["bound"]["overlap"] is True
    # the step's terms, each under its own name: those of one replica's typical decode step
    step = decode_step(Deployment("llama3-70b", "h100", 8, kv_dtype="bf16"), one.batch, 8192, TYPICAL)
    names = ("weights_s", "kv_s", "matmul_s", "attention_s", "elementwise_s", "comm_s", "comm_latency_s", "overhead_s",
             "total_s")
    assert data["decode_step_typical"] == pytest.approx({name: getattr(step, name) for name in names}, rel=1e-12)


def test_estimate_of_a_config_is_the_report_of_the_model_it_reads(capsys):
    config = REPO / "book/data/hf_configs/qwen3-8b.json"
    data = _json(["estimate", "--config", str(config), "--chip", "tpu-v5e", "--chips", "4"], capsys)
    expected = report(from_hf_config(config), "tpu-v5e", 4)
    assert data["model"] == "qwen3-8b" and data["batch"] == expected.batch
    assert data["decode_step_bound_s"] == pytest.approx(expected.decode_step_bound_s)
    table = _ok(["estimate", "--model", "llama3-70b", "--chip", "h100", "--chips", "8", "--batch", "64", "--context",
                 "8192", "--weights", "fp8", "--price", "2"], capsys)
    assert "decode step" in table and "$ per million output tokens" in table
    assert "output tokens/s" in _ok(SMALL + ["--batch", "8"], capsys)


def test_estimate_memory_utilization_kv_default_and_batch_per_replica(capsys):
    full = _json(ESTIMATE, capsys)
    half = _json(ESTIMATE + ["--memory-utilization", "0.5"], capsys)
    assert half["memory_utilization"] == 0.5 and half["max_batch"] < full["max_batch"]
    int4 = _json(ESTIMATE + ["--weights", "int4"], capsys)
    assert int4["weight_dtype"] == "int4" and int4["kv_dtype"] == "bf16"  # the cache does not follow the weights
    fixed = _json(ESTIMATE + ["--batch", "64", "--kv", "fp8", "--compute", "fp8", "--context", "4096",
                              "--prompt", "1024"], capsys)
    assert fixed["batch"] == 64 and fixed["kv_dtype"] == "fp8" and fixed["compute_dtype"] == "fp8"
    assert fixed["context_len"] == 4096 and fixed["prompt_len"] == 1024
    config = _json(["estimate", "--config", str(REPO / "book/data/hf_configs/qwen3-8b.json"), "--chip", "tpu-v5e",
                    "--chips", "8", "--tensor-parallel", "4"], capsys)
    assert config["model"] == "qwen3-8b" and config["replicas"] == 2


def test_estimate_with_a_workload_prices_input_and_output_tokens_prefill_included(capsys):
    argv = ESTIMATE + ["--input-len", "7680", "--output-len", "512", "--price", "2.5"]
    data = _json(argv, capsys)["workload"]
    expected = price_deployment("llama3-70b", "h100", 64, 7680, 512, tensor_parallel=8, kv_dtype="bf16",
                                price_per_chip_hour=2.5)
    assert data == {"input_len": 7680, "output_len": 512, **expected.as_dict()}
    assert DEPLOYMENT_KEYS <= set(data) and data["replicas"] == 8
    whole = 512 * data["dollars_per_million_output_tokens_all_in"]
    assert 7680 * data["dollars_per_million_input_tokens"] + 512 * data["dollars_per_million_output_tokens"] == \
        pytest.approx(whole, rel=1e-9)
    table = _ok(argv, capsys)
    assert "$ per million input / output tokens" in table and "workload of 7,680 + 512 tokens" in table


def test_the_workload_is_priced_in_the_formats_and_share_of_hbm_asked_for(capsys):
    argv = ESTIMATE + ["--input-len", "2000", "--output-len", "500", "--weights", "fp8", "--kv", "fp8",
                       "--memory-utilization", "0.5"]
    workload = _json(argv, capsys)["workload"]
    # fp8 weights on an H100 run fp8 matmuls, as plan prices them: the same deployment gets the same TPOT from both
    assert (workload["weight_dtype"], workload["kv_dtype"], workload["compute_dtype"]) == ("fp8", "fp8", "fp8")
    half = price_deployment("llama3-70b", "h100", 64, 2000, 500, tensor_parallel=8, weight_dtype="fp8",
                            kv_dtype="fp8", memory_utilization=0.5)
    full = price_deployment("llama3-70b", "h100", 64, 2000, 500, tensor_parallel=8, weight_dtype="fp8",
                            kv_dtype="fp8")
    assert workload["batch"] == half.batch < full.batch  # half the HBM holds fewer sequences
    assert workload["tpot_s"] == half.tpot_s and half.compute_dtype == "fp8"
    bf16 = _json(argv + ["--compute", "bf16"], capsys)["workload"]  # --compute still says otherwise
    assert bf16["compute_dtype"] == "bf16" and bf16["tpot_s"] > workload["tpot_s"]


def test_a_workload_at_a_fixed_batch_is_priced_at_that_batch_and_matmul_format(capsys):
    argv = ESTIMATE + ["--batch", "64", "--compute", "fp8", "--input-len", "1000", "--output-len", "100", "--price",
                       "3"]
    data = _json(argv, capsys)
    expected = price_deployment("llama3-70b", "h100", 64, 1000, 100, tensor_parallel=8, batch=64,
                                compute_dtype="fp8", price_per_chip_hour=3)
    assert data["workload"] == {"input_len": 1000, "output_len": 100, **expected.as_dict()}
    assert data["workload"]["batch"] == 64 < data["max_batch"]
    shown = _table(_ok(argv, capsys))["workload of 1,000 + 100 tokens"]
    assert re.search(r"\bat 64 sequences \(continuous batching, prefill included, typical\)$", shown)


def test_estimate_under_a_load_adds_means_p99_and_the_bound_to_the_json_and_says_them_in_words(capsys):
    workload = ["--input-len", "2000", "--output-len", "500", "--weights", "fp8"]
    for load, value in (("--concurrency", "100"), ("--request-rate", "10")):
        argv = ESTIMATE + workload + [load, value]
        data = _json(argv, capsys)["load"]
        assert data["ttft_p99_s"] >= data["ttft_s"] > data["bound"]["ttft_s"] > 0
        assert data["tpot_p99_s"] >= data["tpot_s"] > data["bound"]["tpot_s"] > 0
        assert data["bound"]["output_tokens_per_s"] >= data["output_tokens_per_s"] > 0
        assert data["concurrency" if load == "--concurrency" else "request_rate"] == float(value)
        rows = _rows(_ok(argv, capsys))
        assert rows["TTFT under load"].startswith(f"{data['ttft_s'] * 1e3:,.1f} ms mean, "
                                                  f"{data['ttft_p99_s'] * 1e3:,.1f} ms p99")
        assert rows["output tokens/s under load"].startswith(f"{data['output_tokens_per_s']:,.0f} (bound ")


def test_the_engine_option_prices_with_that_profile_and_says_which_engine_and_its_caveat(capsys):
    argv = ["estimate", "--model", "llama3-70b", "--chip", "h100", "--chips", "8", "--batch", "1", "--context", "2048",
            "--weights", "fp8", "--kv", "fp8", "--compute", "fp8"]
    typical, vllm = _json(argv, capsys), _json(argv + ["--engine", "vllm"], capsys)
    d = Deployment("llama3-70b", "h100", 8, weight_dtype="fp8", kv_dtype="fp8", compute_dtype="fp8")
    assert vllm["tpot_typical_s"] == pytest.approx(decode_step(d, 1, 2048, PROFILES["vllm"]).total_s)
    assert typical["tpot_typical_s"] == pytest.approx(decode_step(d, 1, 2048, TYPICAL).total_s)
    assert (vllm["engine"]["profile"], typical["engine"]["profile"]) == ("vllm", "typical")
    assert vllm["engine"]["caveat"] and "three small-batch runs" in _table(_ok(argv + ["--engine", "vllm"],
                                                                               capsys))["engine profile"]
    assert main(["estimate", "--model", "llama3-8b", "--chip", "tpu-v5e", "--chips", "1", "--engine",
                 "tensorrt-llm"]) == 2
    err = capsys.readouterr().err
    assert "fitted on gpu rows only" in err and "use one of typical, vllm, jetstream" in err


def test_a_model_with_fine_grained_experts_gets_its_own_held_out_range_and_a_caveat_saying_why(capsys):
    # Qwen3-235B-A22B routes each token through 8 experts 1,536 wide in a 4,096-wide model; Mixtral 8x7B through 2
    # experts 14,336 wide. Only the first gets the range of such models' held-out runs, named so, and the caveat.
    argv = ["estimate", "--chip", "h200", "--chips", "8", "--weights", "fp8", "--context", "2048"]
    fine = _json(argv + ["--model", "qwen3-235b-a22b"], capsys)
    coarse = _json(argv + ["--model", "mixtral-8x22b"], capsys)
    own = PROFILES["typical"].fine_grained_spread_on("h200")
    assert fine["engine"]["fine_grained_experts"] and not coarse["engine"]["fine_grained_experts"]
    assert fine["engine"]["spread"] == list(own) != coarse["engine"]["spread"] == list(PROFILES["typical"].spread_on(
        "h200"))
    assert f"{own[0]:.2f}-{own[1]:.2f}" in fine["engine"]["caveat"] and coarse["engine"]["caveat"] is None
    rows = _table(_ok(argv + ["--model", "qwen3-235b-a22b"], capsys))
    assert "CAVEAT: fine-grained experts" in rows["engine profile"]
    assert "for 4 in 5 held-out runs of fine-grained experts)" in rows["decode step = time per output token (TPOT)"]
    # on AMD GPUs their own held-out runs (vLLM on MI300X) give the range and the caveat's numbers
    amd = _json(["estimate", "--model", "qwen3-235b-a22b", "--chip", "mi300x", "--chips", "8"], capsys)["engine"]
    amd_own = PROFILES["typical"].fine_grained_spread_on("mi300x")
    assert amd_own and amd["spread"] == list(amd_own) != list(PROFILES["typical"].spread_on("mi300x"))
    assert f"{amd_own[0]:.2f}-{amd_own[1]:.2f}" in amd["caveat"] and "no held-out run" not in amd["caveat"]
    # on TPUs their held-out runs (Qwen3-Coder-480B-A35B and Qwen3.5-397B-A17B under vLLM on four TPU7x) came out
    # at 0.91-1.54 of the estimate: inside the TPU range for every model and not slower, so the caveat says neither
    tpu = _json(["estimate", "--model", "qwen3-235b-a22b", "--chip", "tpu-v5p", "--chips", "8"], capsys)["engine"]
    tpu_own = PROFILES["typical"].fine_grained_spread_on("tpu-v5p")
    assert tpu_own == (0.91, 1.54) and tpu["spread"] == list(tpu_own)
    assert "0.91-1.54" in tpu["caveat"] and "expect the engine slower" not in \
        tpu["caveat"] and "more widely" not in tpu["caveat"] and "no held-out run" not in tpu["caveat"]
    # a profile with no such run on a platform says so, with the NVIDIA runs' range
    jet = _json(["estimate", "--model", "qwen3-235b-a22b", "--chip", "tpu-v5p", "--chips", "8", "--engine",
                 "jetstream"], capsys)["engine"]
    assert "no held-out run of one on TPUs" in jet["caveat"] and f"{own[0]:.2f}-{own[1]:.2f}" in jet["caveat"]
    planned = _json(["plan", "--model", "qwen3-235b-a22b", "--chip", "h200", "--max-chips", "8", "--input-len", "1000",
                     "--output-len", "1000", "--price", "3"], capsys)
    assert any("fine-grained experts" in words for words in planned["engine"]["caveats"])


def test_the_configs_stored_weight_format_is_the_default_and_an_option_overrides_it(tmp_path, capsys):
    # an AWQ 4-bit checkpoint of LLaMA-3.1-8B: estimate and plan read its weights as int4 unless --weights says else
    config = json.loads((REPO / "book/data/hf_configs/llama-3.1-8b.json").read_text())
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**config, "quantization_config": {"quant_method": "awq", "bits": 4}}))
    estimate = ["estimate", "--config", str(path), "--chip", "h100", "--chips", "1", "--batch", "1"]
    assert _json(estimate, capsys)["weight_dtype"] == "int4"
    assert _json(estimate + ["--weights", "fp8"], capsys)["weight_dtype"] == "fp8"
    planner = ["plan", "--config", str(path), "--chip", "h100", "--max-chips", "1", "--input-len", "1000",
               "--output-len", "200", "--price", "2"]
    planned = _json(planner, capsys)
    assert {p["weight_dtype"] for p in [planned["best"], *planned["frontier"]]} == {"int4"}
    assert _json(planner + ["--weights", "bf16"], capsys)["best"]["weight_dtype"] == "bf16"
    plain = ["estimate", "--config", str(REPO / "book/data/hf_configs/llama-3.1-8b.json"), "--chip", "h100",
             "--chips", "1", "--batch", "1"]
    assert _json(plain, capsys)["weight_dtype"] == "bf16"  # no quantization_config: bf16


MISTRAL = str(REPO / "book/data/hf_configs/mistral-7b-v0.1.json")  # max_position_embeddings 32,768


def test_a_sequence_of_exactly_the_configs_positions_or_the_context_is_accepted(capsys):
    base = ["estimate", "--config", MISTRAL, "--chip", "h100", "--chips", "1", "--batch", "1"]
    assert _json(base + ["--context", "32768"], capsys)["context_len"] == 32768
    assert _json(base + ["--input-len", "30000", "--output-len", "2768"], capsys)["workload"]["output_len"] == 2768
    # a model by name carries no position limit of a config file
    assert _json(SMALL + ["--batch", "1", "--context", "40000"], capsys)["context_len"] == 40000
    # a prompt as long as the context fits
    assert _json(SMALL + ["--batch", "1", "--context", "512", "--prompt", "512"], capsys)["prompt_len"] == 512
    # a config without max_position_embeddings sets no limit; one with it names the fix
    unlimited = HfConfig(model=get_model("llama3-8b"), weight_dtype=None, max_position_embeddings=None)
    assert unlimited.check_positions(10**9, "--context") is None
    limited = HfConfig(model=get_model("llama3-8b"), weight_dtype=None, max_position_embeddings=100)
    assert limited.check_positions(100, "--context") is None
    with pytest.raises(ValueError, match=r"\bargument --context: 101 tokens\b.*\bllama3-8b's config\b.*\bit was built "
                                         r"for; use a shorter one\b"):
        limited.check_positions(101, "--context")


# --- estimate: the printed table --------------------------------------------------------------------------------------
def _table(text: str) -> dict:
    """{label: value} of a printed table, checking its layout: one row per line, each 'label  value' with every value
    starting in the same column."""
    lines = text.rstrip("\n").split("\n")
    labels = [line.split("  ", 1)[0] for line in lines]
    columns = {len(line) - len(line[len(label):].lstrip(" ")) for line, label in zip(lines, labels)}
    assert len(columns) == 1, f"the values do not line up: {lines}"
    return {label: line[len(label):].strip() for line, label in zip(lines, labels)}


def _number(text: str) -> float:
    return float(text.replace(",", ""))


def test_estimate_table_names_ttft_tpot_the_limit_and_the_split_in_words(capsys):
    table = _ok(ESTIMATE + ["--price", "2.5"], capsys)
    assert "64 x h100: 8 replicas of 8-way tensor parallelism; KV heads split 8 ways" in table
    for words in ("time per output token (TPOT)", "time to first token (TTFT)", "what limits the step",
                  "$ per million output tokens", "70.55B parameters"):
        assert words in table, words
    mqa = _ok(["estimate", "--model", "palm-62b", "--chip", "h100", "--chips", "16", "--tensor-parallel", "16"],
              capsys)
    assert "1 replica of 16-way tensor parallelism; the KV cache replicated on all 16 chips" in mqa


COMPUTE_BOUND = ["estimate", "--model", "llama3-8b", "--chip", "h100", "--chips", "1", "--batch", "2048",
                 "--context", "128", "--price", "2", "--input-len", "100", "--output-len", "28"]


def test_the_estimate_table_shows_the_json_numbers_in_its_units_one_row_a_line(capsys):
    data = _json(COMPUTE_BOUND, capsys)
    rows = _table(_ok(COMPUTE_BOUND, capsys))
    # 8.03e9 parameters x 2 bytes (bf16) = 16.1 GB; 2 (K, V) x 32 layers x 8 KV heads x 128 x 2 B = 131,072 B per token
    assert re.fullmatch(r"([\d.]+) GB \(([\d.]+) GB per chip of the 1-way group\)", rows["weights"]).groups() == \
        (f"{2 * data['parameters'] / 1e9:.1f}",) * 2
    assert rows["KV cache per token"] == "131.1 kB"
    tpot = re.fullmatch(r"([\d,.]+) ms typical \(([\d,.]+)-([\d,.]+) ms for 4 in 5 held-out runs\), ([\d,.]+) ms bound",
                        rows["decode step = time per output token (TPOT)"])
    assert _number(tpot[1]) == pytest.approx(data["tpot_typical_s"] * 1e3, abs=0.006)
    assert _number(tpot[4]) == pytest.approx(data["decode_step_bound"]["total_s"] * 1e3, abs=0.006)
    # The range is the estimate over the held-out measured / estimate quantiles, so the faster runs give its low end.
    low, high = data["engine"]["spread"]
    assert (_number(tpot[2]), _number(tpot[3])) == pytest.approx((data["tpot_typical_s"] * 1e3 / high,
                                                                  data["tpot_typical_s"] * 1e3 / low), abs=0.006)
    assert rows["batch"] == "2,048 (2,048 per replica)"
    assert re.match(r"2,048 sequences of 128 tokens", rows["largest batch that fits"])
    tokens = re.fullmatch(r"([\d,]+) typical, ([\d,]+) bound \(all replicas, decode only\)", rows["output tokens/s"])
    assert _number(tokens[1]) == pytest.approx(data["tokens_per_s_typical"], abs=0.6)
    assert _number(tokens[2]) == pytest.approx(data["tokens_per_s_bound"], abs=0.6)
    ttft = re.match(r"([\d,.]+) ms typical \([\d,.]+-[\d,.]+ ms for 4 in 5 held-out runs\), ([\d,.]+) ms bound",
                    rows["time to first token (TTFT)"])
    assert _number(ttft[1]) == pytest.approx(data["ttft_typical_s"] * 1e3, abs=0.06)
    workload = data["workload"]
    shown = re.match(r"TTFT ([\d,.]+) ms, TPOT ([\d,.]+) ms, ([\d,]+) output tokens/s at ([\d,]+) sequences",
                     rows["workload of 100 + 28 tokens"])
    assert _number(shown[1]) == pytest.approx(workload["ttft_s"] * 1e3, abs=0.06)
    assert _number(shown[2]) == pytest.approx(workload["tpot_s"] * 1e3, abs=0.006)
    assert _number(shown[3]) == pytest.approx(workload["output_tokens_per_s"], abs=0.6)
    assert _number(shown[4]) == workload["batch"] == 2048
    prices = re.match(r"([\d.]+) / ([\d.]+) \(output with the prefill's share: ([\d.]+)\)",
                      rows["$ per million input / output tokens"])
    for shown_price, key in zip(prices.groups(), ("dollars_per_million_input_tokens",
                                                  "dollars_per_million_output_tokens",
                                                  "dollars_per_million_output_tokens_all_in")):
        assert float(shown_price) == pytest.approx(workload[key], abs=0.0006)


@pytest.mark.parametrize("argv, limit, term", [
    # 2,048 sequences of 128 tokens on one H100: far past its critical batch (989 TFLOP/s / 3.35 TB/s ~ 295), so the
    # matmuls' FLOPs outweigh the weight read
    (["--batch", "2048", "--context", "128"], r"\bmatmuls?\b", "matmul_s"),
    # one sequence: the 16 GB weight read dominates a step of 8e9 x 2 FLOPs
    (["--batch", "1", "--context", "128"], r"\bweights\b", "weights_s"),
    # 16 caches of 16,384 tokens: 16 x 16,384 x 131,072 B = 34 GB read per step, twice the weights
    (["--batch", "16", "--context", "16384"], r"\bKV cache\b", "kv_s"),
])
def test_the_estimate_names_the_term_that_limits_the_step_and_its_share(argv, limit, term, capsys):
    command = ["estimate", "--model", "llama3-8b", "--chip", "h100", "--chips", "1", *argv]
    data = _json(command, capsys)
    assert re.search(limit, data["limited_by"]), data["limited_by"]
    step = data["decode_step_typical"]
    share = re.fullmatch(r"(.+) \((\d+)% of the typical step\)", _table(_ok(command, capsys))["what limits the step"])
    assert share[1] == data["limited_by"]
    assert int(share[2]) == pytest.approx(100 * step[term] / step["total_s"], abs=0.51)


MIXTRAL_TP4 = ["estimate", "--model", "mixtral-8x7b", "--chip", "h100", "--chips", "8", "--tensor-parallel", "4",
               "--context", "4096", "--prompt", "1000"]


def test_the_estimate_splits_the_weights_over_a_replicas_chips_and_sums_the_replicas(capsys):
    data = _json(MIXTRAL_TP4, capsys)
    rows = _table(_ok(MIXTRAL_TP4, capsys))
    # Mixtral 8x7B routes each token to 2 of its 8 experts: about 12.9B of its 46.7B parameters are active
    shown = re.fullmatch(r"mixtral-8x7b: ([\d.]+)B parameters \(([\d.]+)B active per token, ([\d.]+)B multiplied "
                         r"\(the input table is a lookup\)\)", rows["model"])
    assert float(shown[1]) == pytest.approx(data["parameters"] / 1e9, abs=0.006)
    assert float(shown[2]) == pytest.approx(data["active_parameters"] / 1e9, abs=0.006)
    assert 0.2 < data["active_parameters"] / data["parameters"] < 0.33
    # bf16: 2 bytes a parameter, over the 4 chips of a replica
    weights = re.fullmatch(r"([\d.]+) GB \(([\d.]+) GB per chip of the 4-way group\)", rows["weights"])
    assert float(weights[1]) == pytest.approx(2 * data["parameters"] / 1e9, abs=0.06)
    assert float(weights[2]) == pytest.approx(2 * data["parameters"] / 4 / 1e9, abs=0.06)
    # two replicas: the batch and the tokens/s are twice one replica's, and tokens/s = sequences / TPOT
    assert data["replicas"] == 2 and rows["batch"] == f"{data['batch']:,} ({data['batch'] // 2:,} per replica)"
    assert data["max_batch"] == data["batch"] and data["max_batch"] % 2 == 0
    assert data["tokens_per_s_typical"] == pytest.approx(data["batch"] / data["tpot_typical_s"], rel=1e-9)
    assert data["tokens_per_s_bound"] == pytest.approx(data["batch"] / data["decode_step_bound"]["total_s"], rel=1e-9)
    ttft = re.match(r"([\d,.]+) ms typical \([^)]*\), ([\d,.]+) ms bound \(one 1,000-token prompt",
                    rows["time to first token (TTFT)"])
    assert _number(ttft[1]) == pytest.approx(data["ttft_typical_s"] * 1e3, abs=0.06)
    assert _number(ttft[2]) == pytest.approx(data["prefill_bound_s"] * 1e3, abs=0.06)
    assert data["prompt_len"] == 1000 and data["context_len"] == 4096


def test_a_sliding_window_keeps_fewer_kv_bytes_per_token_on_average_and_the_table_says_so(tmp_path, capsys):
    # Mistral 7B v0.1: 2 (K, V) x 32 layers x 8 KV heads x 128 x 2 B = 131,072 B per token, but a 4,096-token window
    # on every layer: over 16,384 tokens a sequence keeps 4,096, a quarter, 32,768 B per token on average
    command = ["estimate", "--config", str(REPO / "book/data/hf_configs/mistral-7b-v0.1.json"), "--chip", "h100",
               "--chips", "1", "--context", "16384", "--batch", "1"]
    data = _json(command, capsys)
    assert data["kv_bytes_per_token"] == 131072 and data["kv_bytes_per_token_effective"] == 32768
    assert re.fullmatch(r"131\.1 kB \(32\.8 kB on average over 16,384 tokens\b.*\)",
                        _table(_ok(command, capsys))["KV cache per token"])
    short = command[:-4] + ["--context", "4096", "--batch", "1"]  # within the window: every token kept
    assert _json(short, capsys)["kv_bytes_per_token_effective"] == 131072
    assert _table(_ok(short, capsys))["KV cache per token"] == "131.1 kB"


def test_the_estimate_names_its_layout_formats_and_decode_only_price_in_the_table_and_json(capsys):
    # llama3-70b's 8 KV heads on 16-chip replicas of H100s: each head's cache on 2 chips (a GPU replicates)
    argv = ["estimate", "--model", "llama3-70b", "--chip", "h100", "--chips", "32", "--tensor-parallel", "16",
            "--weights", "fp8", "--kv", "fp8", "--compute", "fp8", "--context", "4096", "--price", "3"]
    data = _json(argv, capsys)
    rows = _table(_ok(argv, capsys))
    one = report("llama3-70b", "h100", 16, context_len=4096, weight_dtype="fp8", kv_dtype="fp8", compute_dtype="fp8",
                 price_per_chip_hour=3)
    split = "2 replicas of 16-way tensor parallelism; KV heads split 8 ways, each replicated on 2 chips"
    assert data["split"] == split and rows["deployment"] == f"32 x h100: {split}"
    assert data["kv_placement"] == "replicated" and data["max_sequences_per_replica"] == 2048
    assert rows["formats"] == "weights fp8, KV cache fp8, matmuls fp8"
    # 2 (K, V) x 80 layers x 8 KV heads x 128 x 1 B (fp8) = 163,840 B per token, every token kept (no window)
    assert data["kv_bytes_per_token"] == data["kv_bytes_per_token_effective"] == 163840
    assert rows["KV cache per token"] == "163.8 kB"
    assert data["dollars_per_million_tokens_typical"] == pytest.approx(one.dollars_per_million_tokens_typical,
                                                                       rel=1e-12)
    dollars = re.fullmatch(r"([\d.]+) typical, ([\d.]+) at the bound \(decode only, at \$3 per chip-hour\)",
                           rows["$ per million output tokens"])
    assert float(dollars[1]) == pytest.approx(one.dollars_per_million_tokens_typical, abs=0.0006)
    assert float(dollars[2]) == pytest.approx(one.dollars_per_million_tokens_bound, abs=0.0006)
    assert re.search(r"\(one 4,096-token prompt, nothing else running\)$", rows["time to first token (TTFT)"])
    assert re.fullmatch(r"[\d,]+ sequences of 4,096 tokens \(the engine's 90% of HBM, at most 2,048 per replica\)",
                        rows["largest batch that fits"])


def test_the_time_to_first_token_is_shown_in_ms_to_a_tenth(capsys):
    one = report("llama3-70b", "h100", 8)  # one replica, an 8,192-token prompt
    ttft = re.fullmatch(r"([\d,.]+) ms typical \([^)]*\), ([\d,.]+) ms bound \(one 8,192-token prompt, nothing else "
                        r"running\)",
                        _table(_ok(ESTIMATE, capsys))["time to first token (TTFT)"])
    assert one.prefill_bound_s > 0.1  # long enough that 0.1% more would show in the first decimal
    assert _number(ttft[1]) == pytest.approx(one.prefill_typical_s * 1e3, abs=0.051)
    assert _number(ttft[2]) == pytest.approx(one.prefill_bound_s * 1e3, abs=0.051)


def _serial_step(overhead_s=0.0, comm_s=0.0, kv_s=0.0, attention_s=0.0, weights_s=0.0, matmul_s=0.0,
                 elementwise_s=0.0):
    """The terms of a typical (serial) step: each overlapping pair costs its larger member."""
    total = overhead_s + comm_s + elementwise_s + max(kv_s, attention_s) + max(weights_s, matmul_s)
    return SimpleNamespace(overhead_s=overhead_s, comm_s=comm_s, kv_s=kv_s, attention_s=attention_s,
                           weights_s=weights_s, matmul_s=matmul_s, elementwise_s=elementwise_s, total_s=total)


@for_each([
    (dict(kv_s=1.0, attention_s=3.0, weights_s=2.0, matmul_s=1.0, comm_s=0.5, overhead_s=0.5), "attention", 0.5),
    (dict(kv_s=3.0, attention_s=1.0, weights_s=2.0, matmul_s=1.0, overhead_s=1.0), "KV cache", 0.5),
    (dict(kv_s=1.0, weights_s=1.0, matmul_s=4.0, comm_s=1.0, overhead_s=2.0), "matmuls", 0.5),
    (dict(weights_s=4.0, matmul_s=1.0, comm_s=2.0, kv_s=1.0, overhead_s=1.0), "weights", 0.5),
    (dict(weights_s=1.0, comm_s=6.0, kv_s=1.0), "collectives", 0.75),
    (dict(weights_s=1.0, matmul_s=2.0, elementwise_s=4.0, comm_s=1.0, overhead_s=1.0), "between the matmuls", 0.5),
    (dict(weights_s=1.0, overhead_s=2.0, kv_s=1.0), "overhead", 0.5),
    # a tie within a pair names the memory read (the roofline's ridge point counts as memory-bound)
    (dict(kv_s=3.0, attention_s=3.0, weights_s=1.0), "KV cache", 0.75),
    (dict(weights_s=3.0, matmul_s=3.0, kv_s=1.0), "weights", 0.75),
], ids=str)
def test_the_limit_is_the_largest_serial_term_with_its_share_of_the_step(terms, words, share):
    limit, fraction = _limit(_serial_step(**terms))
    assert words in limit and fraction == pytest.approx(share, rel=1e-12)


@for_each([
    ("llama3-8b", "h100", 2, 1, "2 replicas on one chip each; nothing split"),
    ("llama3-8b", "h100", 1, 1, "1 replica on one chip each; nothing split"),
    ("llama3-70b", "h100", 8, 8, "1 replica of 8-way tensor parallelism; KV heads split 8 ways"),
    ("llama3-70b", "h100", 32, 4, "8 replicas of 4-way tensor parallelism; KV heads split 4 ways"),
    # 8 KV heads on 16 chips: a GPU keeps each head on 2 chips, a TPU splits the batch 2 ways
    ("llama3-70b", "h100", 16, 16, "1 replica of 16-way tensor parallelism; KV heads split 8 ways, each replicated "
                                   "on 2 chips"),
    ("llama3-70b", "tpu-v5e", 32, 16, "2 replicas of 16-way tensor parallelism; KV heads split 8 ways, then the "
                                      "batch split 2 ways"),
    ("palm-62b", "h100", 8, 8, "1 replica of 8-way tensor parallelism; the KV cache replicated on all 8 chips"),
    ("llama3-8b-2kv", "h100", 4, 4, "1 replica of 4-way tensor parallelism; KV heads split 2 ways, each replicated on "
                                    "2 chips"),
], ids=str)
def test_the_split_says_replicas_tensor_parallelism_and_where_the_kv_heads_go(model, chip, n, tp, words):
    m = get_model("llama3-8b").with_(n_kv_heads=2, name=model) if model == "llama3-8b-2kv" else model
    assert _split(Deployment(m, chip, n, tensor_parallel=tp)) == words


# --- plan -------------------------------------------------------------------------------------------------------------
def test_plan_json_is_the_library_plan_with_a_schema(capsys):
    data = _json(EXAMPLE, capsys)
    expected = plan("llama3-70b", ["h100"], 16, 2000, 500, ttft=2.0, tpot=0.05, prices=2.5)
    engine = data.pop("engine")
    assert data == {"schema": SCHEMA, **expected.as_dict()}
    assert engine == {"profile": "typical", "describes": PROFILES["typical"].engine, "caveats": None}
    assert DEPLOYMENT_KEYS <= set(data["best"]) and all(DEPLOYMENT_KEYS <= set(p) for p in data["frontier"])
    best = data["best"]
    assert best["ttft_s"] <= 2 and best["tpot_s"] <= 0.05 and best["replicas"] * best["tensor_parallel"] == \
        best["n_chips"] <= 16
    assert "best deployment" in _ok(EXAMPLE, capsys)


def test_plan_options_chips_prices_formats_and_efficiency(capsys):
    argv = ["plan", "--config", str(REPO / "book/data/hf_configs/qwen3-8b.json"), "--chip", "h100,tpu-v5e",
            "--max-chips", "4", "--input-len", "1000", "--output-len", "200", "--price", "h100=2.5,tpu-v5e=1.2",
            "--weights", "bf16,fp8", "--kv", "fp8"]
    data = _json(argv, capsys)
    points = [data["best"]] + data["frontier"]
    assert {p["chip"] for p in points} <= {"h100", "tpu-v5e"} and {p["kv_dtype"] for p in points} == {"fp8"}
    assert {p["weight_dtype"] for p in points} <= {"bf16", "fp8"} and data["best"]["model"] == "qwen3-8b"
    assert all(p["price_per_chip_hour"] == {"h100": 2.5, "tpu-v5e": 1.2}[p["chip"]] for p in points)
    bound = _json(argv + ["--efficiency", "bound"], capsys)
    # every resource at peak: strictly cheaper than the calibrated (typical) efficiency
    assert bound["best"]["dollars_per_million_output_tokens_all_in"] < \
        data["best"]["dollars_per_million_output_tokens_all_in"]


def test_plan_with_p99_targets_gives_every_deployment_the_highest_rate_meeting_them(capsys):
    argv = ["plan", "--model", "llama3-70b", "--chip", "h100", "--max-chips", "8", "--input-len", "2000",
            "--output-len", "500", "--ttft-p99", "2", "--tpot-p99", "0.2", "--price", "2.5"]
    data = _json(argv, capsys)
    assert (data["ttft_p99"], data["tpot_p99"]) == (2.0, 0.2)
    for point in [data["best"], *data["frontier"]]:
        assert point["max_request_rate"] > 0 and point["ttft_p99_s"] <= 2.0 and point["tpot_p99_s"] <= 0.2
    loaded = _json(argv + ["--request-rate", "3"], capsys)
    assert loaded["request_rate"] == 3.0 and loaded["best"]["max_request_rate"] >= 3.0
    assert loaded["best"]["output_tokens_per_s"] == pytest.approx(3.0 * 500, rel=1e-12)


def test_estimate_past_the_saturation_rate_answers_with_what_it_serves_and_says_the_queue_grows(capsys):
    argv = SMALL + ["--input-len", "1000", "--output-len", "200", "--request-rate", "30"]
    load = _json(argv, capsys)["load"]
    assert load["saturated"] and load["offered_rate"] == 30.0 and load["request_rate"] < 30.0
    assert load["ttft_s"] is None and load["queue_s"] is None and load["tpot_s"] > 0
    assert load["output_tokens_per_s"] == pytest.approx(load["request_rate"] * 200, rel=1e-12)
    rows = _rows(_ok(argv, capsys))
    assert rows["TTFT under load"].startswith("unbounded") and "more than the deployment serves" in rows["load"]


def test_plan_on_a_config_without_a_stored_format_searches_its_bf16_and_all_widens_the_search(capsys):
    argv = ["plan", "--config", str(REPO / "book/data/hf_configs/llama-3.1-8b.json"), "--chip", "h100,b200",
            "--max-chips", "1", "--input-len", "1000", "--output-len", "200", "--price", "2"]
    data = _json(argv, capsys)
    assert {p["weight_dtype"] for p in [data["best"], *data["frontier"]]} == {"bf16"}
    assert all(p["quality_caveat"] is None for p in data["frontier"])
    wide = _json(argv + ["--weights", "all"], capsys)
    points = [wide["best"], *wide["frontier"]]
    # every format the reader allowed, nvfp4 and mxfp4 only where they are computed natively
    assert not any(p["weight_dtype"] in ("nvfp4", "mxfp4") and p["chip"] == "h100" for p in points)
    below_8_bits = [p for p in points if p["weight_dtype"] in ("int4", "nvfp4", "mxfp4")]
    assert below_8_bits and all(p["quality_caveat"].startswith(f"{p['weight_dtype']} weights (") for p in below_8_bits)


def test_an_unreachable_target_in_json_says_how_close_the_best_came(capsys):
    assert main(EXAMPLE[:-6] + ["--ttft", "0.001", "--price", "2.5", "--json"]) == 2
    error = _strict(capsys.readouterr().out)
    assert error["target"] == "ttft" and error["requested_s"] == 0.001
    assert error["closest_s"] == error["closest"]["ttft_s"] > 0.001


# --- what each option reads -------------------------------------------------------------------------------------------
READS = [(_count, "1", 1), (_count, str(2**53), 2**53), (_price, "0.5", 0.5), (_price, "1e9", 1e9),
         (_seconds, "0.5", 0.5), (_seconds, "2", 2.0),  # no upper bound on seconds; prices up to 1e9
         (_fraction, "0.5", 0.5), (_fraction, "1", 1.0),  # 1: the whole of HBM is still a share
         (_names, "h100", ("h100",)), (_names, " h100 , tpu-v5e ", ("h100", "tpu-v5e")), (_prices, "2.5", 2.5),
         (_prices, " h100 = 2.5 ,tpu-v5e=1.2", {"h100": 2.5, "tpu-v5e": 1.2})]


@for_each(READS, ids=[f"{r.__name__}({t!r})" for r, t, _ in READS])
def test_an_option_reads_what_it_takes(read, text, value):
    assert read(text) == value


POSITIVE = {_price: r"\(a price in \$ per chip-hour such as 2\.5\)", _seconds: r"\(seconds such as 0\.05\)",
            _fraction: r"\(a share of HBM such as 0\.9\)"}
REFUSED = [
    (_count, "0", r"\bpositive integer up to 2\*\*53\b"), (_count, str(2**53 + 1), r"\bup to 2\*\*53\b"),
    (_count, "-3", r"\bpositive integer\b"), (_count, "2.5", r"\bpositive integer, got '2\.5'"),
    *[(read, bad, rf"\bpositive, finite number\b {words}, got {re.escape(repr(bad))}$")
      for read, words in POSITIVE.items() for bad in ("0", "-0.5", "inf", "-inf", "nan")],
    (_price, "abc", r"\$ per chip-hour such as 2\.5\b"), (_seconds, "abc", r"\bseconds such as 0\.05\b"),
    (_fraction, "abc", r"\ba share of HBM such as 0\.9\b"),
    (_fraction, "1.01", r"\bshare of HBM in \(0, 1\], got '1\.01'"),
    *[(_names, bad, r"\bnames separated by commas\b") for bad in ("h100,,h200", "h100,", " ")],
    *[(_prices, bad, r"\bchip=price pairs such as h100=2\.5,tpu-v5e=1\.2\b") for bad in ("h100=", "=2.5", "h100=2.5,",
                                                                                       " = ")],
    # the price is all after the first "="
    *[(_prices, bad, r"\$ per chip-hour\b") for bad in ("h100=-1", "h100=2.5=3")],
]


@for_each(REFUSED, ids=[f"{r.__name__}({t!r})" for r, t, _ in REFUSED])
def test_an_option_refuses_what_it_does_not_take_saying_what_it_takes(read, text, words):
    with pytest.raises(argparse.ArgumentTypeError, match=words):
        read(text)


def test_the_model_options_are_one_of_a_name_or_a_config_and_their_help_lists_the_names(capsys):
    command = argparse.ArgumentParser(prog="prog")
    _model_options(command)
    helps = {action.dest: action.help for action in command._actions}
    assert re.fullmatch(r"a model name \(" + re.escape(", ".join(model_names())) + r"; spellings such as "
                        r"meta-llama/Llama-3\.1-8B work\)", helps["model"])
    assert re.search(r"\ba Hugging Face config\.json of your own model\b", helps["config"])
    assert command.parse_args(["--model", "llama3-8b"]).model == "llama3-8b"
    assert command.parse_args(["--config", "c.json"]).config == "c.json"
    for argv in ([], ["--model", "llama3-8b", "--config", "c.json"]):  # exactly one of the two
        with pytest.raises(SystemExit):
            command.parse_args(argv)
    capsys.readouterr()


def test_the_help_names_the_command_to_type_and_what_each_option_takes(capsys):
    assert main(["--help"]) == 0
    top = capsys.readouterr().out
    assert top.startswith("usage: python -m scaling_lib") and "The executable textbook's library." in top
    assert main(["plan", "--help"]) == 0
    helped = " ".join(capsys.readouterr().out.split())
    for phrase in ("--input-len INPUT_LEN prompt tokens per request", "cheapest deployment meeting the targets",
                   "KV-cache formats to try", "--json print JSON (SI units) instead of a table"):
        assert phrase in helped, phrase
    assert main(["estimate", "--help"]) == 0
    assert ("--compute COMPUTE matmul dtype (default: the weights' own where the chip computes it natively and it is "
            "fp8, int8, nvfp4 or mxfp4, else bf16; plan follows the same rule)") in " ".join(capsys.readouterr().out.split())
    # a missing option names the help of the command it was missing from
    assert main([arg for arg in EXAMPLE if arg not in ("--price", "2.5")]) == 2
    assert "--price" in (err := capsys.readouterr().err) and "(see `python -m scaling_lib plan --help`)" in err


# --- errors: one line, exit status 2, strict JSON in JSON mode --------------------------------------------------------
ERRORS = [
    (EXAMPLE + ["--moe-layouts", "ep"], "argument --moe-layouts: llama3-70b is dense, with no experts to lay out"),
    (EXAMPLE + ["--moe-layouts", "tp,pp"], "argument --moe-layouts: unknown layout 'pp'; use tp, ep, dp, ep+dp or all"),
    (EXAMPLE[:-6] + ["--ttft", "0.001", "--price", "2.5"], "ttft=0.001 s is out of reach"),
    (EXAMPLE[:-6] + ["--tpot", "0.0001", "--price", "2.5"], "tpot=0.0001 s is out of reach"),
    (EXAMPLE[:3] + ["--chip", "h100,tpu-v5e"] + EXAMPLE[5:-2] + ["--price", "h100=2.5"], "no price for tpu-v5e"),
    (EXAMPLE[:-2] + ["--price", "h100="], "argument --price"),
    (EXAMPLE[:-2] + ["--price", "abc"], "argument --price: must be a price in $ per chip-hour such as 2.5, got 'abc'"),
    (EXAMPLE[:-2] + ["--price", "h100=-1"], "argument --price"),
    (EXAMPLE[:-2] + ["--price", "h999=1"], "unknown chip 'h999'"),
    (EXAMPLE[:3] + ["--chip", "h100,,h200"] + EXAMPLE[5:], "argument --chip"),
    (EXAMPLE[:3] + ["--chip", "h999"] + EXAMPLE[5:], "unknown chip 'h999'"),
    (EXAMPLE + ["--weights", "fp7"], "argument --weights: unknown dtype 'fp7'"),
    (EXAMPLE + ["--kv", "int3"], "argument --kv: unknown dtype 'int3'"),
    (EXAMPLE + ["--efficiency", "fast"], "argument --efficiency"),
    (EXAMPLE + ["--max-chips", "0"], "argument --max-chips"),
    (EXAMPLE + ["--output-len", "1"], "output_len=1"),
    (EXAMPLE + ["--input-len", "2.5"], "argument --input-len"),
    (EXAMPLE + ["--ttft", "0"], "argument --ttft"),
    (EXAMPLE + ["--tpot", "nan"], "argument --tpot"),
    (EXAMPLE[:1] + ["--model", "gpt-9"] + EXAMPLE[3:], "unknown model"),
    (EXAMPLE[:1] + EXAMPLE[3:], "one of the arguments --model --config is required"),
    (EXAMPLE[:7] + ["--max-chips", "1", "--chip", "tpu-v5e"] + EXAMPLE[7:], "does not fit on 1 x tpu-v5e"),
    (ESTIMATE[:-1] + ["3"], "argument --tensor-parallel: 3 does not divide --chips 64; the chips form chips / "
                            "tensor-parallel identical replicas"),
    (ESTIMATE + ["--batch", "12"], "argument --batch: 12 sequences do not split over 8 replicas (--chips 64 / "
                                   "--tensor-parallel 8); use a multiple of 8"),
    (ESTIMATE + ["--input-len", "100"], "arguments --input-len and --output-len: give both (a workload) or neither"),
    (ESTIMATE + ["--output-len", "100"], "give both"),
    (ESTIMATE + ["--memory-utilization", "1.5"], "argument --memory-utilization"),
    (ESTIMATE + ["--memory-utilization", "0.1"], "does not fit"),
    (ESTIMATE + ["--input-len", "100", "--output-len", "1"], "output_len=1"),
    (ESTIMATE + ["--tensor-parallel", "0"], "argument --tensor-parallel"),
    (ESTIMATE + ["--concurrency", "8"], "a load needs its requests; give --input-len and --output-len"),
    (ESTIMATE + ["--input-len", "100", "--output-len", "100", "--concurrency", "8", "--request-rate", "1"],
     "argument --request-rate: not allowed with argument --concurrency"),
    (ESTIMATE + ["--input-len", "100", "--output-len", "100", "--request-rate", "1e6"], "saturation rate"),
    (ESTIMATE + ["--input-len", "100", "--output-len", "100", "--request-rate", "0"], "argument --request-rate"),
    (ESTIMATE + ["--input-len", "100", "--output-len", "100", "--concurrency", "8", "--token-budget", "1"],
     "token_budget=1"),
    (EXAMPLE + ["--ttft-p99", "-1"], "argument --ttft-p99"),
    (EXAMPLE + ["--max-chips", "4", "--request-rate", "1e6", "--tpot-p99", "1"],
     "request_rate=1e+06 requests/s is out of reach"),
    (ESTIMATE + ["--price", "1e308"], "argument --price: must be at most 1e+09 per chip-hour"),  # costs would overflow
    (EXAMPLE[:-2] + ["--price", "h100=2,h100=3"], "argument --price: prices h100 twice"),
    (EXAMPLE[:3] + ["--chip", "tpu-v5e"] + EXAMPLE[5:-2] + ["--price", "v5e=2,tpu-v5e=3"], "names tpu-v5e twice"),
    (ESTIMATE + ["--weights", ""], "argument --weights: unknown dtype ''"),  # not the default bf16
    (EXAMPLE + ["--max-chips", str(2**53)], "argument --max-chips: must be at most 1,048,576 chips"),
    (ESTIMATE[:3] + ["--chip", "mi300x", "--chips", "16"], "tensor_parallel=16 spans 2 mi300x nodes of 8 and the "
                                                          "hardware table has no bandwidth between mi300x nodes"),
    (SMALL[:2] + ["llama-9-9b"] + SMALL[3:], "unknown model"),
    (SMALL[:2] + ["llama3-70b"] + SMALL[3:], "does not fit"),
    (SMALL[:4] + ["h999"] + SMALL[5:], "unknown chip"),
    (SMALL[:-1] + ["0"], "--chips"),
    (SMALL[:-2], "the following arguments are required: --chips"),
    (SMALL + ["--weights", "fp7"], "unknown dtype 'fp7'"),
    (SMALL + ["--kv", "int3"], "unknown dtype 'int3'"),
    (SMALL + ["--compute", "int4"], "compute_dtype"),
    (SMALL + ["--context", "99999999"], "does not fit"),
    (SMALL + ["--batch", "100000000"], "argument --batch: 100,000,000 sequences are more than the "
                                       f"{report('llama3-8b', 'h100', 1).max_batch} that fit"),  # the report's batch
    (SMALL + ["--batch", "8", "--context", "58088"],  # the context is the other half of the cause: named too
     f"are more than the {report('llama3-8b', 'h100', 1, context_len=58088).max_batch} that fit at --context 58,088 "),
    (SMALL + ["--bogus"], "unrecognized arguments: --bogus"),
    (SMALL + ["--context", "100", "--prompt", "1000"], "argument --prompt: 1000 tokens do not fit in --context 100"),
    (SMALL + ["--batch", "1", "--context", "512", "--prompt", "513"],
     "argument --prompt: 513 tokens do not fit in --context 512, the tokens each sequence holds (its prompt included); "
     "raise --context or lower --prompt"),
    (SMALL[:4] + ["tpu-v5e"] + SMALL[5:] + ["--engine", "tensorrt-llm"], "was fitted on gpu rows only and tpu-v5e is "
                                                                         "a tpu chip; use one of typical, vllm, jetstream"),
    # Mistral 7B's config: max_position_embeddings 32,768
    (["estimate", "--config", MISTRAL, "--chip", "h100", "--chips", "1", "--batch", "1", "--context", "32769"],
     "argument --context: 32,769 tokens exceed max_position_embeddings=32,768"),
    (["estimate", "--config", MISTRAL, "--chip", "h100", "--chips", "1", "--batch", "1", "--context", "4096",
      "--input-len", "30000", "--output-len", "2769"],
     "argument --input-len + --output-len: 32,769 tokens exceed max_position_embeddings=32,768"),
    (["plan", "--config", MISTRAL, "--chip", "h100", "--max-chips", "1", "--input-len", "30000", "--output-len",
      "2769", "--price", "2"],
     "argument --input-len + --output-len: 32,769 tokens exceed max_position_embeddings=32,768"),
]


@pytest.mark.parametrize("argv, names", ERRORS, ids=[" ".join(a[1:]).replace(str(REPO), "") for a, _ in ERRORS])
def test_every_error_is_one_line_naming_it_and_exit_2_and_json_in_json_mode(argv, names, capsys):
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.startswith("error: ") and captured.err.count("\n") == 1
    assert names in captured.err, captured.err
    assert main(argv + ["--json"]) == 2
    captured = capsys.readouterr()
    error = _strict(captured.out)
    assert error["schema"] == SCHEMA and names in error["error"] and captured.err.count("\n") == 1


@pytest.mark.parametrize("option, value", [("--chips", "-1"), ("--chips", "0"), ("--chips", "abc"), ("--chips", "2.5"),
                                           ("--chips", "99999999999999999999"), ("--batch", "-3"), ("--batch", "1e3"),
                                           ("--context", "0"), ("--prompt", "-5"), ("--price", "abc"),
                                           ("--price", "nan"), ("--price", "inf"), ("--price", "-2"),
                                           ("--price", "0")])
def test_a_bad_option_value_is_one_line_naming_the_option_and_the_value(option, value, capsys):
    assert main(SMALL + [option, value]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: argument " + option) and repr(value) in err and err.count("\n") == 1, err


LLAMA_8B = json.loads((REPO / "book/data/hf_configs/llama-3.1-8b.json").read_text())
NO_HEAD_DIM = {key: value for key, value in LLAMA_8B.items() if key != "head_dim"}
# A config file's content (bytes, or a JSON value to write) -> what the one-line error must name besides the file.
BAD_CONFIGS = {
    "top-level list": (b"[1, 2]", "a list"),
    "top-level null": (b"null", "null"),
    "top-level number": (b"3", "3 at its top level"),
    "top-level string": (b'"llama"', "the string 'llama'"),
    "invalid JSON": (b'{"model_type": "llama",', "not valid JSON"),
    "invalid UTF-8": (b'\xff\xfe{"model_type": "llama"}', "not UTF-8"),
    "empty file": (b"", "not valid JSON"),
    "nested too deep": (b"[" * 100_000, "too deeply"),
    "a 5,000-digit number": (b'{"hidden_size": ' + b"9" * 5000 + b"}", "thousands of digits"),
    "hidden_size a string, no head_dim": ({**NO_HEAD_DIM, "hidden_size": "4096"}, "'hidden_size'"),
    "zero heads": ({**LLAMA_8B, "num_attention_heads": 0}, "'num_attention_heads'"),
    "negative heads": ({**LLAMA_8B, "num_attention_heads": -32}, "'num_attention_heads'"),
    "heads a float": ({**LLAMA_8B, "num_attention_heads": 32.5}, "'num_attention_heads'"),
    "KV heads do not divide": ({**LLAMA_8B, "num_key_value_heads": 5}, "'num_key_value_heads'"),
    "missing vocab_size": ({k: v for k, v in LLAMA_8B.items() if k != "vocab_size"}, "'vocab_size'"),
    "tie_word_embeddings a string": ({**LLAMA_8B, "tie_word_embeddings": "false"}, "'tie_word_embeddings'"),
    "model_type a list": ({**LLAMA_8B, "model_type": ["llama"]}, "model_type"),
    "NaN layers": (b'{"model_type": "llama", "num_hidden_layers": NaN}', "'num_hidden_layers'"),
    "a directory": ("<a directory>", "is a directory"),
    "a missing file": ("<a missing file>", "no config file at"),
    "an empty path": ("<an empty path>", "config path is empty"),
}


@pytest.mark.parametrize("case", sorted(BAD_CONFIGS))
def test_any_bad_config_file_is_one_line_naming_the_file_and_field_and_exit_2(case, tmp_path, capsys):
    content, names = BAD_CONFIGS[case]
    if isinstance(content, str):  # not a file's content: a path that is no file
        path = {"<a directory>": tmp_path, "<a missing file>": tmp_path / "absent.json", "<an empty path>": ""}[content]
    else:
        path = tmp_path / "my-config.json"
        path.write_bytes(content if isinstance(content, bytes) else json.dumps(content).encode())
    assert main(["estimate", "--config", str(path), "--chip", "h100", "--chips", "8"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.startswith("error: ") and captured.err.count("\n") == 1
    assert str(path) in captured.err and names in captured.err, captured.err


def test_a_failure_is_one_line_on_stderr_and_in_json_mode_strict_json_with_its_extra_fields(capsys):
    assert _one_line(ValueError("a\n  b\tc ")) == "a b c"
    assert _one_line(ValueError()) == "ValueError" and _one_line(TypeError("")) == "TypeError"
    assert _fail(SimpleNamespace(json=False), ValueError("bad\ninput")) == 2
    assert capsys.readouterr() == ("", "error: bad input\n")
    assert _fail(SimpleNamespace(json=True), ValueError("bad"), {"target": "ttft"}) == 2
    captured = capsys.readouterr()
    assert _strict(captured.out) == {"schema": SCHEMA, "error": "bad", "target": "ttft"}
    assert captured.err == "error: bad\n"
    assert _fail(SimpleNamespace(json=True), TypeError()) == 2
    assert _strict(capsys.readouterr().out) == {"schema": SCHEMA, "error": "TypeError"}
    # the extras of an unreachable target are finite seconds; were one not, no NaN or Infinity would be printed
    with pytest.raises(ValueError, match=r"\bJSON compliant\b"):
        _fail(SimpleNamespace(json=True), ValueError("bad"), {"closest_s": math.inf})
    assert capsys.readouterr().out == ""


def test_json_output_is_strict_and_a_non_finite_result_is_an_error_not_nan(monkeypatch, capsys):
    monkeypatch.setattr(cli, "_estimate", lambda args: ({"schema": SCHEMA, "tpot_s": math.nan}, "table"))
    assert main(ESTIMATE + ["--json"]) == 2
    captured = capsys.readouterr()
    assert _strict(captured.out)["schema"] == SCHEMA and re.search(r"\bnot JSON compliant\b", captured.err)


def test_a_malformed_command_line_is_one_line_with_the_help_to_read_and_json_only_when_asked(capsys):
    parser = _OneLineParser(prog="prog")
    with pytest.raises(SystemExit) as done:
        parser.error("bad option")
    assert done.value.code == 2 and capsys.readouterr() == ("", "error: bad option (see `prog --help`)\n")
    parser.json_errors = True
    with pytest.raises(SystemExit) as done:
        parser.error("bad option")
    captured = capsys.readouterr()
    assert done.value.code == 2 and _strict(captured.out) == {"schema": SCHEMA, "error": "bad option"}
    assert captured.err == "error: bad option (see `prog --help`)\n"
    # JSON errors do not outlive the command line that asked for them
    assert main(EXAMPLE + ["--efficiency", "fast", "--json"]) == 2
    assert _strict(capsys.readouterr().out)["error"].startswith("argument --efficiency")
    assert _OneLineParser.json_errors is False
    assert main(EXAMPLE + ["--efficiency", "fast"]) == 2
    assert capsys.readouterr().out == ""


# --- the process: its command line, its output and a closed pipe ------------------------------------------------------
def test_main_reads_the_command_line_of_the_process_and_prints_indented_json(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["scaling_lib", *ESTIMATE, "--json"])
    assert main() == 0
    out = capsys.readouterr().out
    assert out.startswith('{\n  "schema": ') and _strict(out)["n_chips"] == 64


def test_plan_runs_as_a_module_and_a_bad_config_is_one_line_without_a_traceback(tmp_path, capsys):
    done = subprocess.run([sys.executable, "-m", "scaling_lib", *EXAMPLE], capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0 and done.stderr == "" and "frontier" in done.stdout
    path = tmp_path / "list.json"
    path.write_text("[1, 2]")
    assert main(["estimate", "--config", str(path), "--chip", "h100", "--chips", "8"]) == 2  # no exception escapes
    printed = capsys.readouterr()
    assert printed.out == "" and "Traceback" not in printed.err
    assert printed.err.count("\n") == 1 and "list.json" in printed.err


def test_a_closed_pipe_ends_quietly_without_a_traceback():
    process = subprocess.Popen([sys.executable, "-m", "scaling_lib", *ESTIMATE, "--json"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, cwd=REPO)
    process.stdout.close()  # the reader is gone before the first byte (what `| head -1` does to a long output)
    stderr = process.communicate()[1].decode()
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr and process.returncode == 0, stderr


def test_emit_prints_the_text_and_a_newline_and_a_closed_pipe_sends_the_rest_to_devnull(tmp_path, monkeypatch,
                                                                                        capsys):
    assert _emit("a table") is True
    assert capsys.readouterr().out == "a table\n"

    class Closed:
        def __init__(self, fd):
            self.fd = fd

        def write(self, text):
            raise BrokenPipeError

        def flush(self):
            raise BrokenPipeError

        def fileno(self):
            return self.fd

    path = tmp_path / "out"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT)
    try:
        monkeypatch.setattr(sys, "stdout", Closed(fd))
        _emit("lost")  # no exception
        os.write(fd, b"after")  # the descriptor now writes to the null device
    finally:
        os.close(fd)
    assert path.read_bytes() == b""


@pytest.mark.parametrize("stdout, words", [(None, "stdout is closed"),  # `>&-`
                                           ("/dev/full", "No space left on device")])
def test_an_output_that_cannot_be_written_is_one_line_on_stderr_and_exit_2(stdout, words, monkeypatch, capsys):
    if stdout is not None and not os.path.exists(stdout):
        pytest.skip(f"no {stdout} on this system")
    with open(stdout or os.devnull, "w") as sink:
        monkeypatch.setattr(sys, "stdout", sink if stdout else None)
        assert main(ESTIMATE) == 2
    assert capsys.readouterr().err == f"error: cannot write the output: {words}\n" if stdout is None else \
        re.fullmatch(rf"error: cannot write the output: \[Errno \d+\] {words}\n", capsys.readouterr().err)


@pytest.mark.parametrize("name, written", [("\ud800", "\\ud800"),  # a lone surrogate that JSON can hold
                                           ("org/Mod\u00e8le-\u0416", "mod\\xe8le-\\u0436")])
@pytest.mark.parametrize("command", ["estimate", "plan"])
def test_a_model_name_the_terminal_cannot_write_is_printed_escaped(name, written, command, tmp_path, monkeypatch,
                                                                   capsys):
    config = json.loads((REPO / "book/data/hf_configs/llama-3.1-8b.json").read_text())
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**config, "_name_or_path": name}))
    argv = (["estimate", "--chips", "1"] if command == "estimate" else
            ["plan", "--max-chips", "1", "--input-len", "100", "--output-len", "100", "--price", "2"])
    terminal = io.TextIOWrapper(io.BytesIO(), encoding="ascii")
    monkeypatch.setattr(sys, "stdout", terminal)
    assert main(argv[:1] + ["--config", str(path), "--chip", "h100"] + argv[1:]) == 0
    terminal.flush()
    assert written in terminal.buffer.getvalue().decode("ascii").splitlines()[0]


def test_plan_searches_a_mixture_of_experts_layouts_when_asked_and_says_which_it_chose(capsys):
    argv = ["plan", "--model", "qwen3-235b-a22b", "--chip", "h200", "--max-chips", "16", "--input-len", "2000",
            "--output-len", "500", "--tpot", "0.1", "--price", "3", "--weights", "fp8", "--kv", "fp8"]
    assert main(argv + ["--moe-layouts", "all", "--json"]) == 0
    best = json.loads(capsys.readouterr().out)["best"]
    library = plan("qwen3-235b-a22b", "h200", 16, 2000, 500, tpot=0.1, prices=3.0, weight_dtypes="fp8",
                   kv_dtypes="fp8", moe_layouts=("tp", "ep", "dp", "ep+dp")).best
    assert best == pytest.approx(library.as_dict()) and best["attention_data_parallel"]
    assert main(argv + ["--moe-layouts", "all"]) == 0
    assert "attention data-parallel on 16 x h200" in capsys.readouterr().out
