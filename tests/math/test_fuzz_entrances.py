"""Property-based tests (Hypothesis) of the two entrances that read a user's text: `models.from_hf_config` (every
field it reads) and `python -m scaling_lib estimate` (every option, and any bytes as --config), in the style of
test_fuzz_inputs.py.

The properties: a field of the wrong JSON type is refused with a ValueError naming it (a string, a boolean or a
fraction is never read as a size; anything but true/false is never read as a flag); a good value gives a model that
holds it; nothing else ever escapes (no TypeError, AttributeError, ZeroDivisionError). The command line answers
with exit status 0, or 2 and exactly one line on stderr; never a traceback. `test_every_field_and_option_has_a_spec`
reads the fields from models.py's source and the options from the parser, so a new field or option without a spec
fails.

Examples are derandomized (the same on every run) and few, so the file runs in a few seconds.
"""

import inspect
import json
import re

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from scaling_lib import hf_config, hf_families, hf_fields
from scaling_lib.__main__ import main, parser
from scaling_lib.models import Transformer, from_hf_config
from tests import REPO, examples, for_each

KNOWN_TYPES = set(hf_families.READERS) | set(hf_config.TYPE_ALIASES) | set(hf_config.WRAPPERS)
# Each property below runs once per config field or command-line option (some 60 in all): the inner loop draws 3
# examples of each, `make test` all of them.
SETTINGS = settings(max_examples=examples(15, inner=3), deadline=None, derandomize=True, database=None,
                    suppress_health_check=list(HealthCheck))
CONFIGS = REPO / "book" / "data" / "hf_configs"


def _shipped(stem):
    return json.loads((CONFIGS / f"{stem}.json").read_text())


GEMMA3 = dict(model_type="gemma3_text", num_hidden_layers=12, hidden_size=64, num_attention_heads=4,
              num_key_value_heads=2, head_dim=16, vocab_size=256, intermediate_size=128, sliding_window=32,
              sliding_window_pattern=6)
_SMALL = dict(num_hidden_layers=8, hidden_size=64, num_attention_heads=4, num_key_value_heads=2, vocab_size=256,
              intermediate_size=128)
_MOE = dict(num_experts=8, num_experts_per_tok=2, moe_intermediate_size=32)
# A config of each model type whose reader uses the field (the field is in that config or read with a default).
BASES = {"llama": _shipped("llama-3.1-8b"), "qwen2": _shipped("qwen2.5-7b"), "mistral": _shipped("mistral-7b-v0.1"),
         "mixtral": _shipped("mixtral-8x7b"), "qwen3_moe": _shipped("qwen3-235b-a22b"),
         "deepseek_v3": _shipped("deepseek-v3"), "gemma3_text": GEMMA3,
         "qwen2_moe": dict(model_type="qwen2_moe", num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                           intermediate_size=128, moe_intermediate_size=16, shared_expert_intermediate_size=64,
                           num_experts=8, num_experts_per_tok=2, vocab_size=256),
         "chatglm": dict(model_type="chatglm", num_layers=2, hidden_size=64, num_attention_heads=4,
                         multi_query_attention=True, multi_query_group_num=2, kv_channels=16, ffn_hidden_size=128,
                         padded_vocab_size=256, seq_length=4096),
         "deepseek_v32": dict(_shipped("deepseek-v3"), model_type="deepseek_v32",
                              architectures=["DeepseekV32ForCausalLM"], index_n_heads=64,
                              index_head_dim=128, index_topk=2048),
         "glm4_moe": dict(_SMALL, **_MOE, model_type="glm4_moe", n_routed_experts=8, n_shared_experts=1,
                          first_k_dense_replace=1, num_nextn_predict_layers=1, head_dim=16),
         "llama4_text": dict(_SMALL, model_type="llama4_text", num_local_experts=4, num_experts_per_tok=1,
                             interleave_moe_layer_step=2, intermediate_size_mlp=256, attention_chunk_size=64,
                             no_rope_layer_interval=4),
         "qwen3_next": dict(_SMALL, **_MOE, model_type="qwen3_next", full_attention_interval=4,
                            linear_num_key_heads=2, linear_key_head_dim=16, linear_num_value_heads=4,
                            linear_value_head_dim=16, linear_conv_kernel_dim=4, shared_expert_intermediate_size=32),
         "minimax": dict(_SMALL, model_type="minimax_m1", num_local_experts=4, num_experts_per_tok=2,
                         attn_type_list=[0, 0, 0, 1] * 2, shared_intermediate_size=0, head_dim=16),
         "minimax_m2": dict(_SMALL, model_type="minimax_m2", num_local_experts=4, num_experts_per_tok=2, head_dim=16,
                            use_mtp=True, num_mtp_modules=3, mtp_transformer_layers=1),
         "jamba": dict(_SMALL, model_type="jamba", num_experts=4, num_experts_per_tok=2, attn_layer_period=4,
                       attn_layer_offset=2, expert_layer_period=2, expert_layer_offset=1, mamba_d_state=16,
                       mamba_d_conv=4, mamba_expand=2, mamba_dt_rank="auto", mamba_conv_bias=True,
                       mamba_proj_bias=False),
         "nemotron_h": dict(_SMALL, model_type="nemotron_h", hybrid_override_pattern="M-M*M-M-", attention_head_dim=16,
                            mamba_num_heads=4, mamba_head_dim=16, n_groups=1, ssm_state_size=16, conv_kernel=4,
                            use_conv_bias=True, mamba_proj_bias=False, mlp_hidden_act="relu2"),
         "nemotron_h_moe": dict(_SMALL, model_type="nemotron_h", hybrid_override_pattern="MEM*MEM-",
                                attention_head_dim=16, mamba_num_heads=4, mamba_head_dim=16, n_groups=1,
                                ssm_state_size=16, n_routed_experts=4, num_experts_per_tok=2,
                                moe_intermediate_size=32, moe_shared_expert_intermediate_size=32),
         "nemotron-nas": dict(model_type="nemotron-nas", num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                              vocab_size=256, block_configs=[{"attention": {"n_heads_in_group": 2},
                                                              "ffn": {"ffn_mult": 2.0}},
                                                             {"attention": {"no_op": True}, "ffn": {"ffn_mult": 1.0}}]),
         "gptj": _shipped("gpt-j-6b"), "gpt_neox": _shipped("pythia-1b"),
         "gpt_oss": dict(_SMALL, model_type="gpt_oss", num_local_experts=4, num_experts_per_tok=2,
                         experts_per_token=2, sliding_window=16, head_dim=16)}

# field -> (kind, the config it is read from). Kinds: "size" a positive integer, "size0" a non-negative one,
# "size?" a positive integer or null, "flag" a JSON boolean, and a few of their own (_must_refuse).
FIELDS = {
    "num_hidden_layers": ("size", "llama"), "hidden_size": ("size", "llama"), "num_attention_heads": ("size", "llama"),
    "num_key_value_heads": ("size", "llama"), "head_dim": ("size?", "llama"), "vocab_size": ("size", "llama"),
    "intermediate_size": ("size", "llama"), "tie_word_embeddings": ("flag", "llama"),
    "use_sliding_window": ("flag", "qwen2"), "sliding_window": ("size?", "mistral"),
    "num_local_experts": ("size", "mixtral"), "num_experts_per_tok": ("size", "mixtral"),
    "num_experts": ("size", "qwen3_moe"), "moe_intermediate_size": ("size", "qwen3_moe"),
    "decoder_sparse_step": ("size", "qwen3_moe"), "mlp_only_layers": ("indices", "qwen3_moe"),
    "n_routed_experts": ("size", "deepseek_v3"), "qk_rope_head_dim": ("size0", "deepseek_v3"),
    "qk_nope_head_dim": ("size", "deepseek_v3"), "v_head_dim": ("size", "deepseek_v3"),
    "kv_lora_rank": ("size", "deepseek_v3"), "q_lora_rank": ("size?", "deepseek_v3"),
    "n_shared_experts": ("size0", "deepseek_v3"), "first_k_dense_replace": ("size0", "deepseek_v3"),
    "moe_layer_freq": ("size", "deepseek_v3"), "sliding_window_pattern": ("size", "gemma3_text"),
    "layer_types": ("layers", "gemma3_text"), "model_type": ("type", "llama"), "_name_or_path": ("name", "llama"),
    "shared_expert_intermediate_size": ("size0", "qwen2_moe"), "max_window_layers": ("size0", "qwen2"),
    "max_position_embeddings": ("size?", "llama"), "architectures": ("classes", "llama"),
    "quantization_config": ("any", "llama"), "text_config": ("any", "llama"),
    "num_layers": ("size", "chatglm"), "multi_query_attention": ("flag", "chatglm"),
    "multi_query_group_num": ("size", "chatglm"), "kv_channels": ("size?", "chatglm"),
    "ffn_hidden_size": ("size", "chatglm"), "padded_vocab_size": ("size", "chatglm"), "seq_length": ("size?", "chatglm"),
    "index_n_heads": ("size", "deepseek_v32"), "index_head_dim": ("size", "deepseek_v32"),
    "index_topk": ("size", "deepseek_v32"), "num_nextn_predict_layers": ("size0", "glm4_moe"),
    "interleave_moe_layer_step": ("size", "llama4_text"), "moe_layers": ("indices", "llama4_text"),
    "intermediate_size_mlp": ("size", "llama4_text"), "attention_chunk_size": ("size?", "llama4_text"),
    "no_rope_layer_interval": ("size", "llama4_text"), "no_rope_layers": ("any", "llama4_text"),
    "full_attention_interval": ("size", "qwen3_next"), "linear_num_key_heads": ("size", "qwen3_next"),
    "linear_key_head_dim": ("size", "qwen3_next"), "linear_num_value_heads": ("size", "qwen3_next"),
    "linear_value_head_dim": ("size", "qwen3_next"), "linear_conv_kernel_dim": ("size", "qwen3_next"),
    "mtp_num_hidden_layers": ("size0", "qwen3_next"), "attn_type_list": ("any", "minimax"),
    "shared_intermediate_size": ("zero", "minimax"), "use_mtp": ("flag", "minimax_m2"),
    "num_mtp_modules": ("size0", "minimax_m2"), "mtp_transformer_layers": ("size", "minimax_m2"),
    "attn_layer_period": ("size", "jamba"),
    "attn_layer_offset": ("size0", "jamba"), "expert_layer_period": ("size", "jamba"),
    "expert_layer_offset": ("size0", "jamba"), "mamba_d_state": ("size", "jamba"), "mamba_d_conv": ("size", "jamba"),
    "mamba_expand": ("size", "jamba"), "mamba_dt_rank": ("any", "jamba"), "mamba_conv_bias": ("flag", "jamba"),
    "mamba_proj_bias": ("flag", "jamba"), "hybrid_override_pattern": ("pattern", "nemotron_h"),
    "attention_head_dim": ("size", "nemotron_h"), "mamba_num_heads": ("size", "nemotron_h"),
    "mamba_head_dim": ("size", "nemotron_h"), "n_groups": ("size", "nemotron_h"),
    "ssm_state_size": ("size", "nemotron_h"), "conv_kernel": ("size", "nemotron_h"),
    "use_conv_bias": ("flag", "nemotron_h"), "mlp_hidden_act": ("any", "nemotron_h"),
    "moe_shared_expert_intermediate_size": ("size0", "nemotron_h_moe"), "block_configs": ("any", "nemotron-nas"),
    "experts_per_token": ("any", "gpt_oss"), "n_embd": ("size", "gptj"), "n_head": ("size", "gptj"),
    "n_layer": ("size", "gptj"), "n_inner": ("size?", "gptj"), "rotary_dim": ("size?", "gptj"),
    "rotary_pct": ("any", "gpt_neox"), "use_parallel_residual": ("flag", "gpt_neox"),
}
JSON_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=True),
                         st.text(max_size=12), st.sampled_from(["4096", "8", "0", "-1", "true", "false", "null",
                                                                "1e3", "2.5", " 16 ", ""]))
JSON_VALUES = st.recursive(JSON_SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                                 st.dictionaries(st.text(max_size=6), inner,
                                                                                 max_size=4)), max_leaves=4)


def _is_size(value, minimum=1):
    """Whether a JSON value is a size the reader must accept: an integer (or a whole float) >= minimum, <= 2**53."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return value == value and abs(value) != float("inf") and value == int(value) and minimum <= value <= 2**53


def _must_refuse(kind, value) -> bool:
    """Values a field of this kind must refuse whatever the rest of the config says."""
    if kind in ("size", "size0"):
        return value is not None and not _is_size(value, 0 if kind == "size0" else 1)
    if kind == "size?":
        return value is not None and not _is_size(value)
    if kind == "flag":
        return not isinstance(value, bool)
    if kind == "type":  # under LlamaForCausalLM: llama, no type at all, or a type the book does not know
        return value is not None and not isinstance(value, str) or value in KNOWN_TYPES and value != "llama"
    if kind == "indices":
        return value is not None and not (isinstance(value, list) and all(type(i) is int and i >= 0 for i in value))
    if kind == "name":
        return value is not None and not isinstance(value, str)
    if kind == "classes":
        return value not in (None, [], ["LlamaForCausalLM"])
    if kind == "pattern":
        return not isinstance(value, str) or not value or bool(set(value) - set("M*-E"))
    if kind == "zero":
        return value not in (None, 0, [0])
    return False


@for_each(sorted(FIELDS), ids=str)
def test_any_json_value_in_any_field_is_read_or_refused_naming_the_field(field):
    kind, base = FIELDS[field]

    @SETTINGS
    @given(JSON_VALUES)
    def check(value):
        config = {**BASES[base], field: value}
        try:
            model = from_hf_config(config)
        except ValueError as err:
            message = str(err)
            assert field in message or "model_type" in message or "layer_types" in message, message
            return
        assert isinstance(model, Transformer)
        assert not _must_refuse(kind, value), f"{field}={value!r} was accepted: {model!r}"

    check()


@for_each(sorted(f for f, (kind, _) in FIELDS.items() if kind in ("size", "size?")), ids=str)
def test_a_good_size_is_read_as_that_size_or_refused_for_what_it_makes(field):
    """Good integers either give a model or a ValueError about the combination (heads that do not divide, ...)."""
    base = FIELDS[field][1]

    @SETTINGS
    @given(st.one_of(st.integers(1, 4096), st.integers(1, 64).map(float)))
    def check(value):
        try:
            model = from_hf_config({**BASES[base], field: value})
        except ValueError as err:
            assert "divide" in str(err) or "multiple" in str(err) or "exceeds" in str(err) or "must be" in str(err), err
            return
        shown = {"num_hidden_layers": model.n_layers, "hidden_size": model.d_model, "vocab_size": model.vocab_size,
                 "num_attention_heads": model.n_heads}
        if field in shown:
            assert shown[field] == value

    check()


@SETTINGS
@given(st.binary(max_size=64) | JSON_VALUES.map(lambda v: json.dumps(v).encode()))
def test_any_bytes_as_a_config_file_give_a_model_or_one_value_error_naming_the_file(tmp_path_factory, content):
    path = tmp_path_factory.mktemp("cfg") / "fuzzed.json"
    path.write_bytes(content)
    try:
        from_hf_config(path)
    except ValueError as err:
        assert "fuzzed.json" in str(err), str(err)


# --- the command line -------------------------------------------------------------------------------------------------
_COUNTS = st.one_of(st.integers(-3, 10**20).map(str), st.sampled_from(["0", "1", "8", "1.5", "1e3", "abc", "", " 8",
                                                                      "0x10", "NaN", "-0", "٣"]))
OPTIONS = {  # option -> the texts Hypothesis tries
    "--model": st.sampled_from(["llama3-8b", "llama3-70b", "gpt-9", "", "meta-llama/Llama-3.1-8B", "deepseek-v3"]),
    "--config": st.sampled_from([str(CONFIGS / "qwen3-8b.json"), str(CONFIGS), "no/such.json", ""]),
    "--chip": st.sampled_from(["h100", "tpu-v5e", "v5e", "h999", "", "H100"]),
    "--chips": _COUNTS, "--batch": _COUNTS, "--context": _COUNTS, "--prompt": _COUNTS,
    "--weights": st.sampled_from(["bf16", "fp8", "int8", "int4", "fp7", "", "BF16"]),
    "--kv": st.sampled_from(["bf16", "fp8", "int4", "int3", ""]),
    "--compute": st.sampled_from(["bf16", "fp8", "int8", "int4", "fp32", "x"]),
    "--price": st.one_of(st.floats(allow_nan=True).map(str), st.sampled_from(["2", "-1", "0", "abc", "", "1e400"])),
    "--json": st.just(None),  # a flag: present or not
    "--expert-parallel": st.just(None), "--attention-data-parallel": st.just(None),
    "--tensor-parallel": _COUNTS, "--input-len": _COUNTS, "--output-len": _COUNTS,
    "--memory-utilization": st.one_of(st.floats(allow_nan=True).map(str), st.sampled_from(["0.9", "1", "0", "1.5",
                                                                                          "abc", ""])),
    "--concurrency": _COUNTS, "--token-budget": _COUNTS,
    # a burst is run step by step: small ones, and ones past the simulator's limit (refused)
    "--burst": st.one_of(st.integers(-3, 64).map(str), st.sampled_from(["0", "10000000", "1e3", "abc", "", "NaN"])),
    # so is a benchmark's count of requests (with --concurrency; refused without it or below it)
    "--requests": st.one_of(st.integers(-3, 64).map(str), st.sampled_from(["0", "10000000", "1e3", "abc", ""])),
    "--schedule": st.sampled_from(["mixed", "prefill-first", "fifo", ""]),
    "--request-rate": st.one_of(st.floats(allow_nan=True).map(str), st.sampled_from(["8", "-1", "0", "abc", "", "1e400"])),
    "--engine": st.sampled_from(["typical", "tensorrt-llm", "vllm", "jetstream", "mi300x", "sglang", ""]),
}
FLAGS = ("--json", "--expert-parallel", "--attention-data-parallel")  # options without a value: present or not
BASE_ARGV = ["estimate", "--model", "llama3-8b", "--chip", "h100", "--chips", "1", "--batch", "8"]


def _run(argv, capsys):
    status = main(argv)
    out, err = capsys.readouterr()
    assert status in (0, 2), (argv, status)
    if status == 2:
        assert err.startswith("error: ") and err.count("\n") == 1 and out == "", (argv, err)
    else:
        assert err == "" and out, argv
    return status, err


@pytest.mark.parametrize("option", sorted(OPTIONS))
def test_any_value_of_any_option_exits_0_or_2_with_one_line(option, capsys):
    @settings(SETTINGS, max_examples=examples(12, inner=3))
    @given(OPTIONS[option])
    def check(value):
        argv = list(BASE_ARGV)
        if option in ("--model", "--config"):  # the two are exclusive: this one replaces --model
            argv[1:3] = [option, value]
        elif option in FLAGS:
            argv.append(option)
        else:
            argv += [option, value]
        status, err = _run(argv, capsys)
        if status == 2 and option not in ("--model", "--config"):
            assert option in err or "unknown" in err or "does not fit" in err or "_dtype" in err or "chip" in err, err

    check()


@settings(SETTINGS, max_examples=examples(25))
@given(st.binary(max_size=48) | JSON_VALUES.map(lambda v: json.dumps(v).encode()))
@example(b"[")
@example(b"{}")
@example(b"\x00\xff")
@example(b'{"model_type": "llama", "hidden_size": "1"}')
@example(b"[]" * 3)
def test_any_bytes_as_config_exit_2_with_one_line_naming_the_file(tmp_path_factory, capsys, content):
    path = tmp_path_factory.mktemp("cli") / "fuzzed.json"
    path.write_bytes(content)
    status, err = _run(["estimate", "--config", str(path), "--chip", "h100", "--chips", "8"], capsys)
    assert status == 2 and "fuzzed.json" in err, err  # no fuzzed bytes make a whole model


def test_every_field_and_option_has_a_spec():
    source = "".join(inspect.getsource(module) for module in (hf_fields, hf_families, hf_config))
    read = set(re.findall(r'\bf\.(?:count|flag|get)\("(\w+)"', source))
    read |= set(re.findall(r'config\.get\("(\w+)"', source)) | set(re.findall(r'self\.get\("(\w+)"', source))
    for spellings in re.findall(r'(?:_first\(f, |(?:layers|kv_heads|ffn|vocab|head_dim)=)\(([^)]*)\)', source):
        read |= set(re.findall(r'"(\w+)"', spellings))
    missing = sorted(read - set(FIELDS))
    assert not missing, f"fields from_hf_config reads without a spec in {__file__}: {missing}"
    options = {opt for action in parser()._subparsers._group_actions[0].choices["estimate"]._actions
               for opt in action.option_strings if opt.startswith("--") and opt != "--help"}
    assert not sorted(options - set(OPTIONS)), f"CLI options without a spec: {sorted(options - set(OPTIONS))}"
