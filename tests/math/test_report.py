"""One call and a command: `estimate.report` agrees with the individual functions, and `python -m scaling_lib
estimate` prints it, as JSON on request, with a one-line error and exit status 2 for bad input."""

import json
import subprocess
import sys

import pytest

from scaling_lib.__main__ import main
from scaling_lib.estimate import TYPICAL, Deployment, decode_step, max_batch, prefill, report
from scaling_lib.memory import kv_bytes_per_token, param_bytes
from scaling_lib.models import from_hf_config, get_model
from tests import REPO


def test_report_agrees_with_the_individual_functions():
    r = report("llama3-70b", "h100", 8, batch=64, context_len=8192, weight_dtype="fp8", price_per_chip_hour=2.0)
    d = Deployment("llama3-70b", "h100", 8, weight_dtype="fp8", kv_dtype="fp8")
    assert r.weight_bytes == param_bytes(get_model("llama3-70b"), "fp8")
    assert r.kv_bytes_per_token == kv_bytes_per_token("llama3-70b", "fp8")
    assert r.max_batch == max_batch(d, 8192, TYPICAL)  # the engine's batch: memory_utilization, max_sequences
    assert r.decode_step_bound_s == decode_step(d, 64, 8192).total_s
    assert r.decode_step_typical_s == decode_step(d, 64, 8192, TYPICAL).total_s
    assert r.prefill_bound_s == prefill(d, 8192).total_s
    assert r.tokens_per_s_bound == pytest.approx(64 / r.decode_step_bound_s)
    # $ per million tokens, by hand: $2 x 8 chips per hour for tokens_per_s x 3600 tokens per hour.
    assert r.dollars_per_million_tokens_bound == pytest.approx(2.0 * 8 / (r.tokens_per_s_bound * 3600) * 1e6)
    assert r.decode_step_typical_s > r.decode_step_bound_s and r.prefill_typical_s > r.prefill_bound_s


def test_report_defaults_batch_to_the_largest_that_fits_and_kv_to_the_weight_dtype():
    r = report("llama3-8b", "tpu-v5e", 4, context_len=4096, weight_dtype="int8")
    assert r.deployment.kv_dtype == "int8" and r.batch == r.max_batch > 0 and r.prompt_len == 4096
    assert r.dollars_per_million_tokens_bound is None and "$" not in r.describe()


def test_report_refuses_what_does_not_fit_naming_the_bytes():
    with pytest.raises(ValueError, match="does not fit.*GB"):
        report("llama3-70b", "h100", 1)
    with pytest.raises(ValueError, match="does not fit"):
        report("llama3-70b", "h100", 8, batch=10_000)
    with pytest.raises(ValueError, match="price_per_chip_hour"):
        report("llama3-8b", "h100", 1, price_per_chip_hour=-1)


def test_cli_prints_the_table_and_json(capsys):
    assert main(["estimate", "--model", "llama3-70b", "--chip", "h100", "--chips", "8", "--batch", "64",
                 "--context", "8192", "--weights", "fp8", "--price", "2"]) == 0
    table = capsys.readouterr().out
    assert "decode step" in table and "$ per million output tokens" in table
    assert main(["estimate", "--config", str(REPO / "book/data/hf_configs/qwen3-8b.json"), "--chip", "tpu-v5e",
                 "--chips", "4", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    expected = report(from_hf_config(REPO / "book/data/hf_configs/qwen3-8b.json"), "tpu-v5e", 4)
    assert data["model"] == "qwen3-8b" and data["batch"] == expected.batch
    assert data["decode_step_bound_s"] == pytest.approx(expected.decode_step_bound_s)


@pytest.mark.parametrize("argv, message", [
    (["estimate", "--model", "llama-9-9b", "--chip", "h100", "--chips", "1"], "unknown model"),
    (["estimate", "--model", "llama3-70b", "--chip", "h100", "--chips", "1"], "does not fit"),
    (["estimate", "--model", "llama3-8b", "--chip", "h999", "--chips", "1"], "unknown chip"),
    (["estimate", "--model", "llama3-8b", "--chip", "h100", "--chips", "0"], "n_chips"),
])
def test_cli_bad_input_is_one_line_and_exit_status_2(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1


def test_cli_runs_as_a_module_and_argparse_errors_exit_2():
    command = [sys.executable, "-m", "scaling_lib", "estimate", "--model", "llama3-8b", "--chip", "h100"]
    missing = subprocess.run(command, capture_output=True, text=True, cwd=REPO)
    assert missing.returncode == 2 and "--chips" in missing.stderr
    ok = subprocess.run(command + ["--chips", "1", "--batch", "8"], capture_output=True, text=True, cwd=REPO)
    assert ok.returncode == 0 and "output tokens/s" in ok.stdout
