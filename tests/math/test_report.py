"""`estimate.report`: one call that agrees with the individual functions of the estimate, its defaults, its
dictionary and its printed table; the command line that prints it is in test_cli.py."""

import re

import pytest

from scaling_lib.estimate import TYPICAL, Deployment, decode_step, max_batch, prefill, report
from scaling_lib.hardware import get_chip
from scaling_lib.inference import decode_step_time
from scaling_lib.memory import kv_bytes_per_token, max_batch_size, param_bytes
from scaling_lib.models import from_hf_config, get_model
from tests import REPO, for_each


# --- what it computes -------------------------------------------------------------------------------------------------
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
    assert r.decode_step_typical_s > r.decode_step_bound_s and r.prefill_typical_s > r.prefill_bound_s
    # tokens/s is the batch over the step, by hand; 8 chips at $2 per chip-hour cost $16 an hour, so dollars per
    # million tokens x tokens per hour / 1e6 = 16
    for bound in ("bound", "typical"):
        tokens_per_s = getattr(r, f"tokens_per_s_{bound}")
        assert tokens_per_s * getattr(r, f"decode_step_{bound}_s") == pytest.approx(64, rel=1e-12)
        assert getattr(r, f"dollars_per_million_tokens_{bound}") * tokens_per_s * 3600 / 1e6 == \
            pytest.approx(16.0, rel=1e-12)


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


def test_report_defaults_to_the_largest_batch_that_fits_a_bf16_cache_and_a_whole_context_prompt():
    # Real int4/int8/fp8 checkpoints keep a bf16 cache unless the engine is told otherwise.
    for weights in ("int8", "int4", "fp8"):
        r = report("llama3-8b", "tpu-v5e", 4, context_len=4096, weight_dtype=weights)
        assert r.deployment.kv_dtype == "bf16" and r.batch == r.max_batch > 0 and r.prompt_len == 4096
    # no price: no cost, and nothing printed in dollars
    assert r.dollars_per_million_tokens_bound is None and r.dollars_per_million_tokens_typical is None
    assert r.as_dict()["dollars_per_million_tokens_typical"] is None and r.as_dict()["price_per_chip_hour"] is None
    assert "$" not in r.describe()
    # LLaMA-3-70B in fp8 on one H200: 70.6 GB of weights leave 70.4 GB; a 300,000-token fp8 cache is
    # 300,000 x 163,840 B = 49.2 GB, so one sequence fits and two (98.3 GB) do not: the report serves one.
    assert report("llama3-70b", "h200", 1, context_len=300_000, weight_dtype="fp8", kv_dtype="fp8").batch == 1
    assert report("llama3-8b", "h100", 1, context_len=4096, prompt_len=1024).prompt_len == 1024
    assert report("llama3-8b", "h100", 1, batch=1, context_len=4096, prompt_len=4096).prompt_len == 4096


def test_a_report_runs_replicas_and_passes_the_engine_settings_through():
    r = report("llama3-70b", "h100", 16, tensor_parallel=8, context_len=4096, kv_dtype="fp8")
    assert r.deployment.replicas == 2 and r.deployment.tensor_parallel == 8
    assert r.max_batch == max_batch(Deployment("llama3-70b", "h100", 16, kv_dtype="fp8", tensor_parallel=8), 4096,
                                    TYPICAL)
    # Two replicas prefill one prompt each at once: as long as one prompt on one chip.
    two = report("llama3-8b", "h100", 2, batch=2, context_len=1024, tensor_parallel=1)
    one = report("llama3-8b", "h100", 1, batch=1, context_len=1024)
    assert (two.prefill_bound_s, two.prefill_typical_s) == (one.prefill_bound_s, one.prefill_typical_s)
    assert two.max_batch == 2 * one.max_batch and two.decode_step_bound_s == one.decode_step_bound_s
    settings = report("llama3-8b", "h100", 1, context_len=1024, max_sequences=16, memory_utilization=0.5,
                      kv_placement="batch-split")
    assert (settings.batch, settings.deployment.memory_utilization, settings.deployment.kv_placement) == \
        (16, 0.5, "batch-split")


def test_a_refused_batch_names_the_largest_batch_the_report_gives():
    # a batch past what the engine runs is refused naming the largest batch the report gives (memory or the cap)
    fits = report("llama3-70b", "h100", 8).max_batch
    with pytest.raises(ValueError, match=f"does not fit.*the largest batch that fits is {fits};"):
        report("llama3-70b", "h100", 8, batch=fits + 1)
    assert report("llama3-70b", "h100", 8, batch=fits).batch == fits


# --- its dictionary and its table -------------------------------------------------------------------------------------
KEYS = {"model", "chip", "n_chips", "tensor_parallel", "expert_parallel", "attention_data_parallel", "weight_dtype",
        "kv_dtype", "compute_dtype", "batch", "context_len", "prompt_len", "weight_bytes", "kv_bytes_per_token",
        "max_batch", "decode_step_bound_s", "decode_step_typical_s", "prefill_bound_s", "prefill_typical_s",
        "tokens_per_s_bound", "tokens_per_s_typical", "price_per_chip_hour", "dollars_per_million_tokens_bound",
        "dollars_per_million_tokens_typical"}


@for_each([
    ("tpu-v5e", 8, dict(weight_dtype="int8", compute_dtype="int8", tensor_parallel=4), ("int8", "bf16", "int8"),
     32 * 8 * 128 * 2 * 2),  # layers x KV heads x head dim x (K, V) x 2 B
    ("h100", 1, dict(weight_dtype="fp8", kv_dtype="fp8"), ("fp8", "fp8", "bf16"), 32 * 8 * 128 * 2 * 1),
], ids=["int8-weights-on-tpus", "an-fp8-cache"])
def test_the_reports_dictionary_holds_every_number_under_its_own_name(chip, n, kwargs, formats, kv_bytes):
    r = report("llama3-8b", chip, n, batch=8, context_len=1024, price_per_chip_hour=2.0, **kwargs)
    data = r.as_dict()
    assert set(data) == KEYS
    for key, value in data.items():
        if key not in ("model", "chip"):
            assert value == getattr(r, key, None) or value == getattr(r.deployment, key), key
    assert (data["model"], data["chip"], data["n_chips"]) == ("llama3-8b", chip, n)
    assert data["tensor_parallel"] == kwargs.get("tensor_parallel", n)
    assert (data["weight_dtype"], data["kv_dtype"], data["compute_dtype"]) == formats
    assert data["weight_bytes"] == param_bytes(get_model("llama3-8b"), formats[0])
    assert data["kv_bytes_per_token"] == kv_bytes


def _numbers(text):
    return [float(x) for x in re.findall(r"\d[\d,]*\.?\d*", text.replace(",", ""))]


def _rows(r):
    return {name.strip(): value.strip() for name, value in
            (re.split(r"\s{2,}", line, maxsplit=1) for line in r.describe().splitlines())}


def test_the_report_prints_each_row_in_its_units():
    r = report("llama3-8b", "h100", 2, batch=8, context_len=4096, prompt_len=1000, price_per_chip_hour=2.0)
    rows = _rows(r)
    assert list(rows) == ["deployment", "weights", "KV cache per token", "largest batch that fits", "batch",
                          "decode step", "prefill", "output tokens/s", "$ per million output tokens"]
    assert rows["deployment"] == r.deployment.describe() and rows["batch"] == "8"
    gb = param_bytes(get_model("llama3-8b")) / 1e9  # 16.1 GB in bf16, 8.0 GB on each of 2 chips
    assert rows["weights"] == f"{gb:,.1f} GB ({gb / 2:,.1f} GB per chip)"
    assert _numbers(rows["KV cache per token"]) == [131.1] and rows["KV cache per token"].endswith(" kB")
    assert rows["largest batch that fits"] == (f"{r.max_batch:,} sequences of 4,096 tokens (the engine's 90% of HBM, "
                                               "at most 2,048 per replica)")
    assert _numbers(rows["output tokens/s"]) == [round(r.tokens_per_s_bound), round(r.tokens_per_s_typical)]
    assert re.fullmatch(r"\d,\d{3} bound, \d,\d{3} typical", rows["output tokens/s"])  # whole tokens, thousands separated
    dollars = rows["$ per million output tokens"]
    assert _numbers(dollars) == pytest.approx([r.dollars_per_million_tokens_bound,
                                               r.dollars_per_million_tokens_typical, 2], abs=5e-4)
    assert "at the bound" in dollars and dollars.endswith("(at $2 per chip-hour)")


@for_each([
    ("llama3-8b", 2, 8, 4096, 1000), ("llama3-70b", 8, 64, 8192, 8192),
    ("llama3-70b", 8, 8, 32768, 32768),  # a prompt of seconds: still milliseconds, to a tenth
], ids=["8b-on-2", "70b-on-8", "70b-long-prompt"])
def test_the_report_prints_its_step_times_in_milliseconds(model, n, batch, context, prompt):
    r = report(model, "h100", n, batch=batch, context_len=context, prompt_len=prompt)
    rows = _rows(r)
    assert _numbers(rows["decode step"]) == pytest.approx([r.decode_step_bound_s * 1e3,
                                                           r.decode_step_typical_s * 1e3], abs=0.005)
    assert re.fullmatch(r"[\d.,]+ ms bound, [\d.,]+ ms typical", rows["decode step"])
    assert _numbers(rows["prefill"].split("(")[0]) == pytest.approx([r.prefill_bound_s * 1e3,
                                                                     r.prefill_typical_s * 1e3], abs=0.05)
    assert rows["prefill"].endswith(f"ms typical ({prompt:,}-token prompt)")
    if prompt == 32768:
        assert r.prefill_typical_s > 1.0


def test_the_report_prints_thousands_with_separators_and_the_kv_cache_by_hand():
    r = report("llama3-8b", "h100", 1, batch=1200, context_len=128, max_sequences=3000)
    rows = _rows(r)
    assert rows["batch"] == "1,200" and "at most 3,000 per replica" in rows["largest batch that fits"]
    # LLaMA 3 70B's KV cache per token by hand: 80 layers x 8 KV heads x 128 dims x 2 (K and V) x 2 bytes (bf16)
    assert _rows(report("llama3-70b", "h100", 8, batch=64))["KV cache per token"] == "327.7 kB"
    assert 80 * 8 * 128 * 2 * 2 == 327_680


# --- bad input: a ValueError naming the argument and the fix ----------------------------------------------------------
BAD_INPUT = {
    "prompt-zero": (lambda: report("llama3-8b", "h100", 1, prompt_len=0), r"\bprompt_len\b"),
    "context-negative": (lambda: report("llama3-8b", "h100", 1, context_len=-5), r"\bcontext_len\b"),
    "price-negative": (lambda: report("llama3-8b", "h100", 1, price_per_chip_hour=-1.0), r"\bprice_per_chip_hour\b"),
    "prompt-longer-than-context": (lambda: report("llama3-8b", "h100", 1, context_len=4096, prompt_len=5000),
                                   r"\bprompt_len=5000 is longer than context_len=4096\b.*\bgive a context at least as "
                                   r"long as the prompt$"),
    # refused at the engine's share of HBM (the report's batch is the typical estimate's), one sequence per replica
    "weights-fit-nowhere": (lambda: report("llama3-70b", "h100", 1),
                            r"^batch 1 at 8,192 tokens\b.*\bdoes not fit\b.*\bthe engine may use 77\.0 GB of one "
                            r"h100's 85\.5 GB\b.*\bweights alone\b"),
    "one-sequence-per-replica": (lambda: report("llama3-70b", "h100", 2, tensor_parallel=1),
                                 r"^batch 2 at 8,192 tokens\b"),
    "over-the-engine-cap": (lambda: report("llama3-70b", "h100", 8, context_len=128, batch=10_000),
                            "exceed max_sequences=2,048, the engine's cap"),
}


@for_each(BAD_INPUT.values(), ids=list(BAD_INPUT))
def test_bad_input_gets_a_value_error_naming_the_argument_and_the_fix(call, words):
    with pytest.raises(ValueError, match=words):
        call()
