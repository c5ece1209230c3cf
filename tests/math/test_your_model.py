"""The page's estimate form and the command line agree: both print `your_model.estimate_deployment`'s table. The form's
Python (the code answer_boxes.js runs in Pyodide) is run here in CPython with the strings a reader types, and its
output compared with `python -m scaling_lib estimate` given the same inputs; then what the form must state: weights
per chip are the tensor-parallel group's, a pasted config's formats are used, its position limit is enforced."""

import json
import re

import pytest

from scaling_lib.__main__ import main
from scaling_lib.models import param_count
from scaling_lib.your_model import CLI_NAMES, estimate_deployment
from tests import REPO, for_each

CONFIGS = REPO / "book" / "data" / "hf_configs"
JS = REPO / "book" / "_ext" / "answer_boxes" / "answer_boxes.js"


@pytest.fixture(scope="module")
def form():
    """The form's Python function, `_estimate(fields_json) -> [ok, text]`, as the page defines it."""
    source = re.search(r"const PYTHON = `(.*?)`;", JS.read_text(), re.S).group(1)
    namespace = {}
    exec(compile(source, str(JS), "exec"), namespace)  # the page's own code, run by CPython
    return lambda fields: json.loads(namespace["_estimate"](json.dumps(fields)))


FP8 = {**json.loads((CONFIGS / "llama-3.1-8b.json").read_text()),
       "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}}
# (the form's fields as typed, the same deployment on the command line)
CASES = {
    "a pasted fp8 config": ({"model": "llama3-70b", "config": json.dumps(FP8), "chip": "h100", "chips": "1",
                             "tensor_parallel": "", "batch": "", "context_len": "", "weight_dtype": "",
                             "kv_dtype": "", "compute_dtype": "", "price_per_chip_hour": ""},
                            ["--config", "{config}", "--chip", "h100", "--chips", "1"]),
    "tensor parallelism": ({"model": "llama3-70b", "config": "", "chip": "h200", "chips": "8", "tensor_parallel": "2",
                            "batch": "16", "context_len": "4096", "weight_dtype": "", "kv_dtype": "",
                            "compute_dtype": "", "price_per_chip_hour": "3"},
                           ["--model", "llama3-70b", "--chip", "h200", "--chips", "8", "--tensor-parallel", "2",
                            "--batch", "16", "--context", "4096", "--price", "3"]),
    "a mixture of experts, expert parallel with attention data-parallel, under vLLM's profile": (
        {"model": "qwen3-235b-a22b", "config": "", "chip": "h200", "chips": "8", "tensor_parallel": "", "batch": "",
         "context_len": "", "weight_dtype": "fp8", "kv_dtype": "", "compute_dtype": "", "price_per_chip_hour": "",
         "engine": "vllm", "moe_layout": "ep+dp"},
        ["--model", "qwen3-235b-a22b", "--chip", "h200", "--chips", "8", "--weights", "fp8", "--engine", "vllm",
         "--expert-parallel", "--attention-data-parallel"]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_form_prints_what_the_command_line_prints_for_the_same_inputs(case, form, tmp_path, capsys):
    fields, argv = CASES[case]
    path = tmp_path / "config.json"
    path.write_text(fields["config"])
    assert main(["estimate"] + [a.replace("{config}", str(path)) for a in argv]) == 0
    printed = capsys.readouterr().out.strip()
    ok, shown = form(fields)
    assert ok and shown.strip() == printed


def test_weights_per_chip_are_the_tensor_parallel_groups_in_the_pasted_configs_formats_unless_others_are_chosen(form):
    # LLaMA-3-70B in bf16 on 8 chips as 4 replicas of 2: each chip holds half the weights, 70.6 GB (not an eighth)
    ok, shown = form(CASES["tensor parallelism"][0])
    per_chip = param_count("llama3-70b") * 2 / 2
    assert ok and f"({per_chip / 1e9:,.1f} GB per chip of the 2-way group)" in shown
    # A pasted config's formats are used unless others are chosen.
    fields = CASES["a pasted fp8 config"][0]
    ok, shown = form(fields)
    # fp8 linear layers (one fp32 scale per 128 x 128 block) and the two 128,256 x 4,096 tables in bf16
    layers = param_count("llama3-8b") - 2 * 128256 * 4096
    weights = layers * (1 + 4 / 128**2) + 2 * 128256 * 4096 * 2
    assert ok and re.search(rf"\bweights\s+{weights / 1e9:,.1f} GB\b", shown) and "weights fp8" in shown
    ok, shown = form({**fields, "weight_dtype": "bf16"})
    assert ok and re.search(rf"\bweights\s+{param_count('llama3-8b') * 2 / 1e9:,.1f} GB\b", shown)


def test_a_pasted_configs_position_limit_is_enforced_as_on_the_command_line(form):
    config = json.dumps({**FP8, "max_position_embeddings": 4096})
    ok, shown = form({**CASES["a pasted fp8 config"][0], "config": config, "context_len": "8192"})
    assert not ok and "context_len: 8,192 tokens exceed max_position_embeddings=4,096" in shown
    ok, shown = form({**CASES["a pasted fp8 config"][0], "config": config})  # no context given: the config's limit
    assert ok and "sequences of 4,096 tokens" in shown


@for_each([
    (dict(model="llama3-8b", config=str(CONFIGS / "qwen3-8b.json")), r"\bgive model .* or config\b"),
    (dict(model=None), r"\bgive model .* or config\b"),
    (dict(names={"batch": "--batch"}), r"\bnames must map each of\b"),
    (dict(input_len=100), r"\barguments --input-len and --output-len: give both\b"),
    (dict(prompt_len=9000, context_len=8192), r"\bargument --prompt: 9000 tokens do not fit in --context 8192\b"),
    (dict(expert_parallel=True), r"\bargument --expert-parallel: llama3-8b is dense\b.*drop --expert-parallel"),
    (dict(model="mixtral-8x7b", n_chips=16, tensor_parallel=16, expert_parallel=True),
     r"\bargument --expert-parallel: mixtral-8x7b's 8 routed experts do not split evenly over --tensor-parallel 16\b"),
    # a trillion chips is refused at once, before any search over its divisors
    (dict(n_chips=2**40), r"\bis more than 1,048,576, the most this function takes: more chips than any machine has"),
], ids=str)
def test_bad_input_gets_a_value_error_in_the_callers_words(kwargs, says):
    arguments = {**dict(model="llama3-8b", chip="h100", n_chips=1, names=CLI_NAMES), **kwargs}
    with pytest.raises(ValueError, match=says):
        estimate_deployment(**arguments)


def test_heads_that_do_not_split_over_the_chips_get_the_largest_group_that_does_and_a_note(capsys):
    # Qwen2.5-7B's 28 query heads do not split 8 ways: 2 replicas of 4 chips, said in a note
    result = estimate_deployment(config=str(CONFIGS / "qwen2.5-7b.json"), chip="h200", n_chips=8)
    assert (result.data["tensor_parallel"], result.data["replicas"]) == (4, 2)
    assert any("largest group of the 8 chips that splits the 28 query heads" in note for note in result.data["notes"])


def test_a_mixture_of_experts_served_expert_and_attention_data_parallel_is_the_deployment_the_library_prices(capsys):
    # The command line's flags reach estimate.Deployment: its JSON is the report of that deployment, and attention
    # data-parallel stops replicating Qwen3-235B's 4 KV heads over 8 chips, so more sequences fit than under tensor
    # parallelism alone.
    from scaling_lib.estimate import report

    argv = ["estimate", "--model", "qwen3-235b-a22b", "--chip", "h200", "--chips", "8", "--weights", "fp8", "--json"]
    runs = {}
    for flags in ((), ("--expert-parallel",), ("--expert-parallel", "--attention-data-parallel")):
        assert main(argv + list(flags)) == 0
        runs[flags] = json.loads(capsys.readouterr().out)
    both = runs[("--expert-parallel", "--attention-data-parallel")]
    direct = report("qwen3-235b-a22b", "h200", 8, weight_dtype="fp8", compute_dtype="fp8", expert_parallel=True,
                    attention_data_parallel=True)
    assert (both["expert_parallel"], both["attention_data_parallel"]) == (True, True)
    assert both["decode_step_typical_s"] == pytest.approx(direct.decode_step_typical_s, rel=1e-12)
    assert both["max_batch"] == direct.max_batch > runs[()]["max_batch"]
    assert (runs[()]["expert_parallel"], runs[()]["attention_data_parallel"]) == (False, False)
