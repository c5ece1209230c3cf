"""One call and a command: `estimate.report` agrees with the individual functions, and `python -m scaling_lib
estimate` prints it, as JSON on request, with a one-line error and exit status 2 for bad input."""

import json

import pytest

from scaling_lib.__main__ import main
from scaling_lib.estimate import TYPICAL, Deployment, decode_step, max_batch, prefill, report
from scaling_lib.hardware import get_chip
from scaling_lib.inference import decode_step_time
from scaling_lib.memory import kv_bytes_per_token, max_batch_size, param_bytes
from scaling_lib.models import from_hf_config, get_model
from tests import REPO


def test_report_agrees_with_the_individual_functions():
    r = report("llama3-70b", "h100", 8, batch=64, context_len=8192, weight_dtype="fp8", kv_dtype="fp8",
               price_per_chip_hour=2.0)
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


def test_report_defaults_batch_to_the_largest_that_fits_and_kv_to_bf16_whatever_the_weights():
    # Real int4/int8/fp8 checkpoints keep a bf16 cache unless the engine is told otherwise (issue 25).
    for weights in ("int8", "int4", "fp8"):
        r = report("llama3-8b", "tpu-v5e", 4, context_len=4096, weight_dtype=weights)
        assert r.deployment.kv_dtype == "bf16" and r.batch == r.max_batch > 0 and r.prompt_len == 4096
    assert r.dollars_per_million_tokens_bound is None and "$" not in r.describe()


def test_report_takes_tensor_parallel_as_replicas_and_refuses_a_prompt_longer_than_the_context():
    r = report("llama3-70b", "h100", 16, tensor_parallel=8, context_len=4096, kv_dtype="fp8")
    assert r.deployment.replicas == 2 and r.deployment.tensor_parallel == 8
    assert r.max_batch == max_batch(Deployment("llama3-70b", "h100", 16, kv_dtype="fp8", tensor_parallel=8), 4096,
                                    TYPICAL)
    with pytest.raises(ValueError, match="prompt_len=5000 is longer than context_len=4096"):
        report("llama3-8b", "h100", 1, context_len=4096, prompt_len=5000)


def test_report_refuses_what_does_not_fit_naming_the_bytes():
    with pytest.raises(ValueError, match="does not fit.*GB"):
        report("llama3-70b", "h100", 1)
    # a batch past what the engine runs is refused naming the largest batch the report gives (memory or the cap)
    fits = report("llama3-70b", "h100", 8).max_batch
    with pytest.raises(ValueError, match=f"does not fit.*the largest batch that fits is {fits};"):
        report("llama3-70b", "h100", 8, batch=fits + 1)
    assert report("llama3-70b", "h100", 8, batch=fits).batch == fits
    with pytest.raises(ValueError, match="exceed max_sequences=2,048, the engine's cap"):
        report("llama3-70b", "h100", 8, context_len=128, batch=10_000)
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
    (["estimate", "--model", "llama3-8b", "--chip", "h100", "--chips", "0"], "--chips"),
])
def test_cli_bad_input_is_one_line_and_exit_status_2(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1


def test_cli_argparse_errors_exit_2_naming_the_option(capsys):
    # As a process (python -m scaling_lib), in tests/math/test_cli.py
    assert main(["estimate", "--model", "llama3-8b", "--chip", "h100"]) == 2 and "--chips" in capsys.readouterr().err
    assert main(["estimate", "--model", "llama3-8b", "--chip", "h100", "--chips", "1", "--batch", "8"]) == 0
    assert "output tokens/s" in capsys.readouterr().out


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
}


@pytest.mark.parametrize("case", sorted(BAD_CONFIGS))
def test_cli_any_bad_config_file_is_one_line_naming_the_file_and_field_and_exit_2(case, tmp_path, capsys):
    content, names = BAD_CONFIGS[case]
    path = tmp_path / "my-config.json"
    path.write_bytes(content if isinstance(content, bytes) else json.dumps(content).encode())
    assert main(["estimate", "--config", str(path), "--chip", "h100", "--chips", "8"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.startswith("error: ") and captured.err.count("\n") == 1
    assert "my-config.json" in captured.err and names in captured.err, captured.err


def test_cli_a_directory_a_missing_file_and_an_empty_path_as_config(tmp_path, capsys):
    for path, names in ((tmp_path, "is a directory"), (tmp_path / "absent.json", "no config file at"),
                        ("", "config path is empty")):
        assert main(["estimate", "--config", str(path), "--chip", "h100", "--chips", "8"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and names in err and str(path) in err, err


@pytest.mark.parametrize("option, value", [("--chips", "-1"), ("--chips", "0"), ("--chips", "abc"), ("--chips", "2.5"),
                                           ("--chips", "99999999999999999999"), ("--batch", "-3"), ("--batch", "1e3"),
                                           ("--context", "0"), ("--prompt", "-5"), ("--price", "abc"),
                                           ("--price", "nan"), ("--price", "inf"), ("--price", "-2"),
                                           ("--price", "0")])
def test_cli_bad_option_values_are_one_line_naming_the_option_and_exit_2(option, value, capsys):
    argv = ["estimate", "--model", "llama3-8b", "--chip", "h100", "--chips", "1", option, value]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: argument " + option) and repr(value) in err and err.count("\n") == 1, err


@pytest.mark.parametrize("argv, names", [
    (["--weights", "fp7"], "unknown dtype 'fp7'"), (["--kv", "int3"], "unknown dtype 'int3'"),
    (["--compute", "int4"], "compute_dtype"), (["--context", "99999999"], "does not fit"),
    (["--batch", "100000000"], "argument --batch: 100,000,000 sequences are more than the "
                               f"{report('llama3-8b', 'h100', 1).max_batch} that fit"),  # the report's largest batch
    (["--bogus"], "unrecognized arguments: --bogus"),
    (["--context", "100", "--prompt", "1000"], "argument --prompt: 1000 tokens do not fit in --context 100"),
])
def test_cli_other_bad_options_are_one_line_and_exit_2(argv, names, capsys):
    assert main(["estimate", "--model", "llama3-8b", "--chip", "h100", "--chips", "1", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and names in err and err.count("\n") == 1, err


def test_the_estimate_s_bound_and_batch_differ_from_the_chapters_by_the_embedding_read_and_the_engine_s_reserve():
    # Qwen3-8B on one H100 at batch 32, 8,192 tokens (the appendix *Apply the book to your model*): the chapters'
    # bound reads every weight, the estimate's only what a step multiplies; the 151,936 x 4,096 bf16 input table is
    # 1.245e9 B, 0.372 ms at 3.35e12 B/s. Chapter 4 fills all 85.5e9 B of HBM with caches (57 of 8,192 tokens at
    # 147,456 B per token beside 16.38e9 B of weights); the engine keeps 10% back (50).
    model = from_hf_config(REPO / "book" / "data" / "hf_configs" / "qwen3-8b.json")
    r = report(model, "h100", 1, batch=32, context_len=8192, prompt_len=2048)
    table = 151_936 * 4_096 * 2
    chapters = decode_step_time(model, "h100", 1, 32, 8192).total_s
    assert chapters - r.decode_step_bound_s == pytest.approx(table / 3.35e12, rel=1e-9)
    assert max_batch_size(model, "h100", 1, 8192) == 57 and r.max_batch == 50
    free = 0.9 * get_chip("h100").hbm_capacity - param_bytes(model)
    assert r.max_batch == int(free // (8192 * kv_bytes_per_token(model)))
