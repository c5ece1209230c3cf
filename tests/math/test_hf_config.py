"""Your own model: `models.from_hf_config` reads shipped config.json files into the right shapes, and the parameter
totals match the model cards; the new structures (MLA, local/global layers, shared experts, leading dense layers)
are counted the way a hand derivation counts them; a checkpoint's formats (`quantization_config`) and a multimodal
wrapper's text tower are read as `hf_config` documents."""

import json
import re

import pytest

from scaling_lib import hf_config, models
from scaling_lib.flops import decode_step_flops, matmul_params
from scaling_lib.hf_fields import ConfigFields
from scaling_lib.kv_levers import decode_attention_cost, kv_footprint
from scaling_lib.memory import kv_bytes_per_token, kv_cache_bytes
from scaling_lib.models import Transformer, active_param_count, from_hf_config, get_model, param_count
from tests import REPO

CONFIGS = REPO / "book" / "data" / "hf_configs"

# Parameter totals as the model cards state them (the oracle), with the precision each states: "405B" is good to
# the last digit shown, so we allow 1% as the issue asks; "37B" active for DeepSeek-V3 is stated to two digits.
MODEL_CARDS = {
    "llama-3.1-8b": (8.03e9, None),
    "llama-3.1-405b": (405e9, None),
    "mistral-7b-v0.1": (7.24e9, None),
    "mixtral-8x7b": (46.7e9, 12.9e9),
    "qwen2.5-7b": (7.61e9, None),
    "qwen3-8b": (8.2e9, None),
    "qwen3-235b-a22b": (235e9, 22e9),
    "gemma-2-9b": (9.24e9, None),
    "deepseek-v3": (671e9, 37e9),
}


@pytest.mark.parametrize("stem", sorted(MODEL_CARDS))
def test_every_shipped_config_parses_to_the_model_cards_parameter_totals(stem):
    model = from_hf_config(CONFIGS / f"{stem}.json")
    total, active = MODEL_CARDS[stem]
    assert param_count(model) == pytest.approx(total, rel=0.01)
    if active is not None and stem != "deepseek-v3":
        assert active_param_count(model) == pytest.approx(active, rel=0.01)


def test_deepseek_v3_active_weights_match_the_cards_37b_to_its_two_digits():
    """The card's "37B activated" is rounded to two digits (36.5e9 to 37.5e9). The weights one token is multiplied
    by (P_mm: routed top-8 plus the shared expert, attention, the output projection; the input table is a lookup)
    fall inside that band; counting the input table too adds 0.93e9 and falls just above it."""
    model = from_hf_config(CONFIGS / "deepseek-v3.json")
    assert 36.5e9 <= matmul_params(model) <= 37.5e9
    assert active_param_count(model) - matmul_params(model) == model.vocab_size * model.d_model


def test_shapes_read_from_the_configs():
    deepseek = from_hf_config(CONFIGS / "deepseek-v3.json")
    assert (deepseek.n_layers, deepseek.n_dense_layers, deepseek.n_experts, deepseek.n_active_experts,
            deepseek.n_shared_experts) == (61, 3, 256, 8, 1)
    assert (deepseek.kv_lora_rank, deepseek.rope_head_dim, deepseek.head_dim, deepseek.value_head_dim) == (512, 64,
                                                                                                           192, 128)
    gemma = from_hf_config(CONFIGS / "gemma-2-9b.json")
    assert (gemma.sliding_window, gemma.global_every, gemma.n_global_layers, gemma.tied_embeddings) == (4096, 2, 21,
                                                                                                        True)
    mistral = from_hf_config(CONFIGS / "mistral-7b-v0.1.json")
    assert mistral.sliding_window == 4096 and mistral.n_global_layers == 0
    assert from_hf_config(CONFIGS / "qwen2.5-7b.json").sliding_window is None  # use_sliding_window is false
    # The shipped configs of models in the table give the table's shapes.
    assert from_hf_config(CONFIGS / "llama-3.1-405b.json").with_(name="", source="") == get_model(
        "llama3.1-405b").with_(name="", source="")
    assert from_hf_config(CONFIGS / "deepseek-v3.json").with_(name="", source="") == get_model(
        "deepseek-v3").with_(name="", source="")
    assert from_hf_config(CONFIGS / "jamba-v0.1.json").with_(name="", source="") == get_model(
        "jamba-v0.1").with_(name="", source="")


def test_mla_kv_bytes_per_token_against_a_hand_derivation():
    # DeepSeek-V3 caches, per token and layer, a 512-wide latent and one 64-wide RoPE key: 61 x 576 x 2 B in bf16.
    assert kv_bytes_per_token("deepseek-v3", "bf16") == 61 * (512 + 64) * 2 == 70272
    # The same model with GQA-8 over 192/128-wide heads would cache 61 x 8 x (192 + 128) x 2 B per token.
    gqa = get_model("deepseek-v3").with_(kv_lora_rank=None, q_lora_rank=None, rope_head_dim=0, n_kv_heads=8)
    assert kv_bytes_per_token(gqa, "bf16") == 61 * 8 * (192 + 128) * 2
    assert kv_cache_bytes("deepseek-v3", 32768, batch=2) == 2 * 32768 * 70272


def test_mla_decode_attention_flops_absorbed_against_a_hand_derivation():
    # Absorbed MLA: per cached token and layer, each of 128 heads scores a 512 + 64 vector and sums a 512 vector.
    cost = decode_attention_cost("deepseek-v3", 1000)
    assert cost.flops == 61 * 1000 * (2 * 128 * (512 + 64) + 2 * 128 * 512)
    assert cost.kv_bytes == 1000 * 70272
    assert 200 < cost.intensity < 300  # near an H100's ridge point: MLA decode attention is no longer ~G FLOPs/B
    # Standard GQA: 4 N H per cached token and layer, G = 8 FLOPs per byte of bf16 cache.
    llama = decode_attention_cost("llama3-70b", 1000)
    assert llama.flops == 80 * 1000 * 4 * 64 * 128 and llama.intensity == pytest.approx(8)
    # Not absorbed, the latents are re-expanded every step: far more FLOPs for the same bytes.
    assert decode_attention_cost("deepseek-v3", 1000, absorbed=False).flops > 50 * cost.flops


def test_local_global_layers_keep_the_window_on_local_layers_only():
    # Gemma 2 9B: 42 layers, 21 global; 8 KV heads of 256: 2 x 8 x 256 x 2 B = 8,192 B per token and layer.
    gemma = from_hf_config(CONFIGS / "gemma-2-9b.json")
    assert kv_cache_bytes(gemma, 8192) == 8192 * (21 * 8192 + 21 * 4096)
    assert kv_cache_bytes(gemma, 8192) == kv_footprint(gemma, [8192]).stored_bytes
    assert kv_cache_bytes(gemma, 2048) == 42 * 2048 * 8192  # shorter than the window: nothing dropped
    all_global = gemma.with_(sliding_window=None, global_every=None)
    assert decode_step_flops(gemma, 8192, skip_masked=True).attention < decode_step_flops(
        all_global, 8192, skip_masked=True).attention


def test_old_models_count_exactly_as_before():
    # Hand derivation for LLaMA-2-13B: L (D H (2N + 2K) + 3 D F) + 2 V D.
    assert param_count(get_model("llama2-13b")) == 40 * (5120 * 128 * (80 + 80) + 3 * 5120 * 13824) + 2 * 32000 * 5120
    assert kv_bytes_per_token("llama3-70b") == 2 * 80 * 8 * 128 * 2


@pytest.mark.parametrize("spelling, name", [("llama-2-13b", "llama2-13b"), ("meta-llama/Llama-3.1-8B", "llama3-8b"),
                                            ("meta-llama/Llama-3.1-8B-Instruct", "llama3-8b"),
                                            ("Meta-Llama-3-70B-Instruct", "llama3-70b"),
                                            ("meta-llama/Llama-3.3-70B-Instruct", "llama3-70b"),
                                            ("mistralai/Mixtral-8x7B-v0.1", "mixtral-8x7b"),
                                            ("deepseek-ai/DeepSeek-V3", "deepseek-v3"),
                                            ("Qwen/Qwen3-235B-A22B", "qwen3-235b-a22b"), ("PaLM-540B", "palm-540b")])
def test_common_spellings_find_the_model(spelling, name):
    assert get_model(spelling).name == name


def test_from_hf_config_bad_input_names_the_field(tmp_path):
    with pytest.raises(ValueError, match="model_type 'gpt2'"):
        from_hf_config({"model_type": "gpt2"})
    config = json.loads((CONFIGS / "llama-3.1-8b.json").read_text())
    del config["num_hidden_layers"]
    with pytest.raises(ValueError, match="num_hidden_layers"):
        from_hf_config(config)
    moe = json.loads((CONFIGS / "qwen3-235b-a22b.json").read_text())
    with pytest.raises(ValueError, match="'moe_intermediate_size'"):
        from_hf_config({k: v for k, v in moe.items() if k != "moe_intermediate_size"})
    with pytest.raises(ValueError, match="no config file"):
        from_hf_config(tmp_path / "missing.json")
    with pytest.raises(ValueError, match="unknown model"):
        get_model("llama-9-9b")


def test_new_structure_fields_validate_themselves():
    base = dict(n_layers=4, d_model=64, d_ff=128, n_heads=4, n_kv_heads=4, head_dim=16, vocab_size=100)
    with pytest.raises(ValueError, match="global_every needs a sliding_window"):
        Transformer(**base, global_every=2)
    with pytest.raises(ValueError, match="n_shared_experts"):
        Transformer(**base, n_shared_experts=1)
    with pytest.raises(ValueError, match="d_ff_dense"):
        Transformer(**base, n_experts=4, n_active_experts=2, n_dense_layers=1)
    with pytest.raises(ValueError, match="kv_lora_rank"):
        Transformer(**base, rope_head_dim=4)


def _config(stem):
    return json.loads((CONFIGS / f"{stem}.json").read_text())


# (config, field, bad value, what the message must say). Every field from_hf_config reads, with a value of the wrong
# JSON type or range: each is refused naming the field, never read as something else.
BAD_FIELDS = [
    *[("llama-3.1-8b", field, bad, "must be") for field in ("num_hidden_layers", "hidden_size", "num_attention_heads",
                                                            "num_key_value_heads", "vocab_size", "intermediate_size",
                                                            "head_dim")
      for bad in ("4096", True, False, 2.5, 0, -8, [8], {"n": 8}, 1e300, float("nan"), 2**60)],
    ("llama-3.1-8b", "head_dim", 0, "positive integer"), ("llama-3.1-8b", "head_dim", False, "the boolean false"),
    ("llama-3.1-8b", "head_dim", -128, "positive integer"),
    ("llama-3.1-8b", "hidden_size", "4096", "write 4096 without quotes"),
    *[("llama-3.1-8b", "tie_word_embeddings", bad, "JSON boolean") for bad in ("false", "true", 0, 1, None, [])],
    *[("qwen2.5-7b", "use_sliding_window", bad, "JSON boolean") for bad in ("false", "true", 0, None)],
    ("mistral-7b-v0.1", "sliding_window", "4096", "must be an integer"),
    ("mistral-7b-v0.1", "sliding_window", 0, "positive integer"),
    ("mistral-7b-v0.1", "sliding_window", True, "the boolean true"),
    ("mixtral-8x7b", "num_local_experts", "8", "must be an integer"),
    ("mixtral-8x7b", "num_experts_per_tok", 0, "positive integer"),
    ("mixtral-8x7b", "num_experts_per_tok", 9, "exceeds 'num_local_experts'"),
    ("qwen3-235b-a22b", "decoder_sparse_step", "1", "must be an integer"),
    ("qwen3-235b-a22b", "mlp_only_layers", "[]", "must be a list"),
    ("qwen3-235b-a22b", "moe_intermediate_size", 1.5, "must be an integer"),
    ("deepseek-v3", "first_k_dense_replace", 62, "exceeds 'num_hidden_layers'"),
    ("deepseek-v3", "first_k_dense_replace", -1, "integer >= 0"),
    ("deepseek-v3", "n_shared_experts", "1", "must be an integer"),
    ("deepseek-v3", "q_lora_rank", 0, "positive integer"),
    ("deepseek-v3", "kv_lora_rank", "512", "must be an integer"),
    ("deepseek-v3", "moe_layer_freq", "1", "must be an integer"),
    ("deepseek-v3", "qk_rope_head_dim", -64, "integer >= 0"),
    ("gemma-2-9b", "_name_or_path", 3, "must be a string"),
]


@pytest.mark.parametrize("stem, field, bad, says", BAD_FIELDS,
                         ids=[f"{stem}-{field}-{bad!r}" for stem, field, bad, _ in BAD_FIELDS])
def test_from_hf_config_refuses_a_field_of_the_wrong_type_or_range_naming_it(stem, field, bad, says):
    with pytest.raises(ValueError) as err:
        from_hf_config({**_config(stem), field: bad})
    assert f"'{field}'" in str(err.value) and says in str(err.value), str(err.value)


def test_string_booleans_are_never_read_as_true():
    """bool("false") is True: the string is refused, and a JSON false gives an untied model (the issue's -6.5%)."""
    llama = _config("llama-3.1-8b")
    assert from_hf_config({**llama, "tie_word_embeddings": False}).tied_embeddings is False
    with pytest.raises(ValueError, match="'tie_word_embeddings'.*true or false without quotes"):
        from_hf_config({**llama, "tie_word_embeddings": "false"})
    qwen = _config("qwen2.5-7b")
    assert from_hf_config({**qwen, "use_sliding_window": False}).sliding_window is None
    with pytest.raises(ValueError, match="'use_sliding_window'.*JSON boolean") as err:
        from_hf_config({**qwen, "use_sliding_window": "false"})
    assert "per-layer window" not in str(err.value)  # the type error, not the unsupported-window one


def test_head_dim_absent_or_null_falls_back_to_d_over_n_and_nothing_else_does():
    llama = {key: value for key, value in _config("llama-3.1-8b").items() if key != "head_dim"}
    assert from_hf_config(llama).head_dim == from_hf_config({**llama, "head_dim": None}).head_dim == 4096 // 32
    with pytest.raises(ValueError, match="'hidden_size' of the config dict \\(4095\\) is not a multiple of "
                                         "'num_attention_heads' \\(32\\) and there is no 'head_dim'"):
        from_hf_config({**llama, "hidden_size": 4095})
    # a whole float is the integer it holds (JSON has one number type)
    assert from_hf_config({**llama, "head_dim": 128.0}).head_dim == 128


def test_a_combination_the_model_refuses_names_the_config_fields(tmp_path):
    deepseek = {**_config("deepseek-v3"), "n_routed_experts": 1, "num_experts_per_tok": 1}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(deepseek))
    with pytest.raises(ValueError, match=r"n_shared_experts=1 on a dense model .*\(in .*config\.json, where "
                                         r"n_experts is 'n_routed_experts', n_shared_experts is 'n_shared_experts'\)"):
        from_hf_config(path)


@pytest.mark.parametrize("content, says", [(b"[1]", "holds a list (1 items) at its top level"),
                                           (b"null", "holds null at its top level"),
                                           (b"\xff", "is not UTF-8 text (byte 0 is 0xff)"),
                                           (b"{", "is not valid JSON: Expecting property name"),
                                           (b"[" * 100_000, "nests lists or objects too deeply"),
                                           (b"[" + b"1" * 5000 + b"]", "thousands of digits")])
def test_from_hf_config_file_problems_name_the_file(content, says, tmp_path):
    path = tmp_path / "odd.json"
    path.write_bytes(content)
    with pytest.raises(ValueError, match="odd.json") as err:
        from_hf_config(path)
    assert says in str(err.value)
    with pytest.raises(ValueError, match="is a directory"):
        from_hf_config(tmp_path)
    with pytest.raises(ValueError, match="cannot open the config file aaaa.*: File name too long"):
        from_hf_config("a" * 5000)
    with open(tmp_path / "weights.json", "wb") as big:
        big.truncate(10**7 + 1)  # sparse: no disk used
    with pytest.raises(ValueError, match="weights.json holds 10,000,001 bytes; a config.json is a few kB"):
        from_hf_config(tmp_path / "weights.json")


# --- formats and nested configs ---------------------------------------------------------------------------------------
LLAMA_CONFIG = dict(model_type="llama", num_hidden_layers=2, hidden_size=64, num_attention_heads=4, vocab_size=256,
                    intermediate_size=128)


def _fields(**config):
    return ConfigFields(config, "here.json")


@pytest.mark.parametrize("quantization, weights", [({"quant_method": "fbgemm_fp8"}, "fp8"),
                                                   ({"quant_method": "modelopt", "quant_algo": "FP8"}, "fp8"),
                                                   ({"quant_method": "modelopt", "quant_algo": "NVFP4"}, "nvfp4"),
                                                   ({"quant_method": "awq", "bits": 8}, "int8"),
                                                   ({"quant_method": "gptq", "bits": 4}, "int4")])
def test_each_quantization_method_names_its_weight_format(quantization, weights):
    assert hf_config._read_quantization(_fields(quantization_config=quantization))[0] == weights


@pytest.mark.parametrize("quantization, says", [
    ("fp8", r"\bmust be an object with a 'quant_method', got the string 'fp8'"),
    ({"quant_method": "modelopt", "quant_algo": "INT4_AWQ"}, r"\bhas quant_algo 'INT4_AWQ'; this book reads FP8 and "
                                                             r"NVFP4\b"),
    ({"quant_method": "bitnet"}, r"\bhas quant_method 'bitnet'; this book reads fp8, fbgemm_fp8, mxfp4, awq, gptq, "
                                 r"compressed-tensors, modelopt and bitsandbytes\b"),
    ({"quant_method": "gptq", "bits": 3}, r"\bgptq with bits=3; this book stores 4 or 8 bits\b"),
    ({"quant_method": "awq"}, r"\bawq with bits=None\b"),
])
def test_a_quantization_this_book_cannot_store_says_what_it_reads(quantization, says):
    with pytest.raises(ValueError, match=r"\bfield 'quantization_config' of here\.json\b") as err:
        hf_config._read_quantization(_fields(quantization_config=quantization))[0]
    assert re.search(says, str(err.value)), str(err.value)


def test_read_hf_config_reads_the_position_limit_and_names_a_bad_one():
    assert models.read_hf_config(LLAMA_CONFIG).max_position_embeddings is None
    assert models.read_hf_config({**LLAMA_CONFIG, "max_position_embeddings": 4096.0}).max_position_embeddings == 4096
    with pytest.raises(ValueError, match=r"\bfield 'max_position_embeddings' of the config dict must be an integer"):
        models.read_hf_config({**LLAMA_CONFIG, "max_position_embeddings": "4096"})


def test_read_hf_config_names_the_file_of_a_bad_quantization(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**LLAMA_CONFIG, "quantization_config": {"quant_method": "bitnet"}}))
    with pytest.raises(ValueError, match=rf"\bfield 'quantization_config' of {re.escape(str(path))} has"):
        models.read_hf_config(path)
    path.write_text(json.dumps({**LLAMA_CONFIG, "quantization_config": {"quant_method": "fp8"}}))
    assert models.read_hf_config(tmp_path).weight_dtype == "fp8"  # the folder, read like the file


def test_a_nested_text_config_takes_the_outer_name_quantization_and_tie_but_keeps_its_own_values():
    outer = {"model_type": "gemma3", "_name_or_path": "google/gemma-3-4b-it", "tie_word_embeddings": False,
             "quantization_config": {"quant_method": "fp8"}, "text_config": {"model_type": "llama"}}
    read = models.read_hf_config(outer)
    # the text_config is read as a Gemma 3 text model (its model_type overridden) with Hugging Face's defaults
    assert (read.model.name, read.model.tied_embeddings, read.weight_dtype) == ("gemma-3-4b-it", False, "fp8")
    assert (read.model.vocab_size, read.model.global_every) == (262_208, 6)
    inner_wins = {**outer, "text_config": {"tie_word_embeddings": True, "_name_or_path": "inner/name"}}
    assert (from_hf_config(inner_wins).tied_embeddings, from_hf_config(inner_wins).name) == (True, "name")


def test_a_nested_config_allows_the_positions_its_language_model_does():
    # Gemma 3 and Llama 4 keep max_position_embeddings in their text_config (it was read from the outer config: None)
    nested = {"model_type": "gemma3", "text_config": {}}
    assert models.read_hf_config(nested).max_position_embeddings == 131_072  # Hugging Face's Gemma 3 default
    nested["text_config"]["max_position_embeddings"] = 8192
    assert models.read_hf_config(nested).max_position_embeddings == 8192


def test_a_field_inside_a_text_config_is_named_as_being_there():
    with pytest.raises(ValueError, match=r"\bfield 'hidden_size' of the config dict \(its text_config\) must be"):
        from_hf_config({"model_type": "gemma3", "text_config": {"hidden_size": "big"}})
    with pytest.raises(ValueError, match=r"\bfield 'text_config' of the config dict must be an object holding the "
                                         r"language model's fields \(model_type 'llama4'\), got a list \(1 items\)"):
        from_hf_config({"model_type": "llama4", "text_config": [4]})


# --- by architecture, not by label ------------------------------------------------------------------------------------
def _published(stem):
    return json.loads((CONFIGS / f"{stem}.json").read_text())


# (config, what the refusal must say): each relabelled or unreadable config is refused with its reason, and no
# refusal suggests another model_type (a relabelling is how the audit's misreads happened).
REFUSED = {
    "Cohere relabelled llama": ({**_published("command-r-v01"), "model_type": "llama"},
                                r"model_type 'llama' and architectures CohereForCausalLM .* disagree"),
    "MiniMax relabelled mixtral": ({**_published("minimax-m1"), "model_type": "mixtral"},
                                   r"disagree: .* the class computes MiniMax-01/M1, a hybrid"),
    "Jamba relabelled mixtral": ({**_published("jamba-v0.1"), "model_type": "mixtral"},
                                 r"the class computes Jamba, a hybrid of Mamba and attention layers"),
    "Qwen3-Next relabelled qwen2_moe": ({**_published("qwen3-next-80b-a3b"), "model_type": "qwen2_moe"},
                                        r"the class computes Qwen3-Next"),
    "a MiniMax labelled mixtral with no class": (
        {k: v for k, v in {**_published("minimax-m1"), "model_type": "mixtral"}.items() if k != "architectures"},
        r"field 'attn_type_list' .* sets linear-attention layers, which a Mixtral mixture of experts does not have"),
    "chunked attention on a LLaMA": ({**_published("llama-3.1-8b"), "attention_chunk_size": 8192},
                                     r"field 'attention_chunk_size' .* sets chunked attention"),
    "MTP on a Mistral": ({**_published("mistral-7b-v0.1"), "num_nextn_predict_layers": 1},
                         r"field 'num_nextn_predict_layers' .* sets multi-token-prediction layers"),
    "linear attention on a Qwen2": ({**_published("qwen2.5-7b"), "linear_num_key_heads": 16},
                                    r"field 'linear_num_key_heads' .* sets linear-attention layers"),
    "a pure Mamba": ({"model_type": "mamba2", "hidden_size": 2560}, r"it has only Mamba-2 layers \(no attention at "
                                                                    r"all\), which this book's models cannot represent"),
    "an unknown family": ({"model_type": "foo", "architectures": ["FooForCausalLM"]},
                          r"not a family this book reads: .* build its shape from the model card with "
                          r"scaling_lib\.models\.Transformer"),
    "a classifier": ({**_published("llama-3.1-8b"), "architectures": ["LlamaForSequenceClassification"]},
                     r"puts a classifier head on the model"),
    "an unknown class": ({**_published("llama-3.1-8b"), "architectures": ["MyLlamaForCausalLM"]},
                         r"a class this book does not know, so it cannot confirm"),
    "two classes": ({**_published("llama-3.1-8b"), "architectures": ["LlamaForCausalLM", "MistralForCausalLM"]},
                    r"names 2 classes"),
    "a MiniMax shared expert": ({**_published("minimax-m1"), "shared_intermediate_size": 9216},
                                r"'shared_intermediate_size' .* a shared expert beside MiniMax's routed ones"),
    "a Nemotron-NAS linear block": (
        {**_published("llama-3.3-nemotron-super-49b"),
         "block_configs": [{"attention": {"replace_with_linear": True}, "ffn": {"ffn_mult": 1.0}}] * 80},
        r"layer 0's attention is replaced by a linear layer"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_a_config_this_book_would_misread_is_refused_saying_why_and_never_suggesting_a_relabelling(case):
    config, says = REFUSED[case]
    with pytest.raises(ValueError, match=says) as err:
        from_hf_config(config)
    assert "its model_type is" not in str(err.value) and "set model_type" not in str(err.value)


def test_qwen3_coders_shared_expert_of_width_zero_is_no_shared_expert():
    # The published Qwen3-Coder-480B-A35B carries shared_expert_intermediate_size 0 (and Qwen3MoeForCausalLM builds
    # none whatever it says): read, and equal to the config without the field.
    coder = _published("qwen3-coder-480b-a35b")
    without = {k: v for k, v in coder.items() if k != "shared_expert_intermediate_size"}
    assert from_hf_config(coder) == from_hf_config(without) and from_hf_config(coder).n_shared_experts == 0


def test_qwen3_moe_that_uses_its_sliding_window_is_priced_with_the_window_on_every_layer(capsys):
    # Qwen3MoeForCausalLM gives every layer config.sliding_window when use_sliding_window is true (max_window_layers
    # is not read): at 16,384 tokens each layer keeps the last 4,096.
    windowed = {**_published("qwen3-30b-a3b"), "use_sliding_window": True, "sliding_window": 4096,
                "max_window_layers": 28}
    model = from_hf_config(windowed)
    assert (model.sliding_window, model.n_global_layers) == (4096, 0)
    assert kv_cache_bytes(model, 16384) == 4096 * kv_bytes_per_token(model)


# quantization_config -> (the format named, bytes per weight by group as the method stores them)
GROUPS = {
    "gpt-oss's mxfp4": ({"quant_method": "mxfp4", "modules_to_not_convert": [
        "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]},
        "mxfp4", dict(experts=4.25 / 8, attention=2, router=2, embeddings=2, head=2)),
    "DeepSeek's block fp8": ({"quant_method": "fp8", "weight_block_size": [128, 128]}, "fp8",
                             dict(experts=1 + 4 / 128**2, attention=1 + 4 / 128**2, embeddings=2, head=2, router=2)),
    "AWQ int4, groups of 128 with zeros": ({"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True},
                                           "int4", dict(attention=0.5 + (2 + 0.5) / 128, head=2)),
    "GPTQ int8 with its head": ({"quant_method": "gptq", "bits": 8, "group_size": 128, "lm_head": True}, "int8",
                                dict(feed_forward=1 + 3 / 128, head=1 + 3 / 128, embeddings=2)),
    "compressed-tensors fp8 per channel": ({"quant_method": "compressed-tensors", "format": "float-quantized",
                                            "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
                                                "num_bits": 8, "type": "float", "strategy": "channel"}}},
                                            "ignore": ["lm_head"]}, "fp8", dict(attention=1, head=2)),
    "compressed-tensors nvfp4": ({"quant_method": "compressed-tensors", "config_groups": {"group_0": {
        "targets": ["Linear"], "weights": {"num_bits": 4, "type": "float", "strategy": "tensor_group",
                                           "group_size": 16}}}, "ignore": ["re:.*mlp.gate$", "lm_head"]},
        "nvfp4", dict(experts=4.5 / 8, router=2, head=2)),
    "ModelOpt FP8 with excluded attention": ({"quant_method": "modelopt", "quant_algo": "FP8",
                                              "exclude_modules": ["model.layers.*.self_attn*", "lm_head"]}, "fp8",
                                             dict(attention=2, feed_forward=1)),
    "bitsandbytes nf4, double quantized": ({"quant_method": "bitsandbytes", "load_in_4bit": True,
                                            "bnb_4bit_use_double_quant": True}, "int4",
                                           dict(attention=0.5 + 1 / 64 + 4 / (64 * 256))),
}


@pytest.mark.parametrize("case", sorted(GROUPS))
def test_each_quantization_method_gives_bytes_per_weight_group_scales_included(case):
    quantization, dtype, groups = GROUPS[case]
    read = models.read_hf_config({**_published("qwen3-30b-a3b"), "quantization_config": quantization})
    assert read.weight_dtype == dtype
    for group, per_weight in groups.items():
        assert read.weight_dtype.group_bytes(group) == pytest.approx(per_weight, rel=1e-12), group


@pytest.mark.parametrize("modules, says", [
    (["model.layers.0.mlp"], r"keeps 'model\.layers\.0\.mlp' .* one layer's feed_forward/experts, in another format"),
    (["the_big_matrix"], r"names module 'the_big_matrix' in modules_to_not_convert, which this book cannot place"),
])
def test_a_module_kept_in_another_format_that_no_group_holds_whole_is_refused(modules, says):
    config = {**_published("qwen3-30b-a3b"), "quantization_config": {"quant_method": "fp8",
                                                                      "modules_to_not_convert": modules}}
    with pytest.raises(ValueError, match=says):
        models.read_hf_config(config)


def test_a_kv_cache_format_the_checkpoint_names_is_the_estimates_default(capsys, tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**_published("llama-3.1-8b"), "quantization_config": {
        "quant_method": "modelopt", "quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}}))
    read = models.read_hf_config(path)
    assert (read.weight_dtype, read.kv_dtype) == ("fp8", "fp8")
    from scaling_lib.__main__ import main
    assert main(["estimate", "--config", str(path), "--chip", "h100", "--chips", "1", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["kv_dtype"], data["kv_bytes_per_token"]) == ("fp8", kv_bytes_per_token("llama3-8b", "fp8"))
