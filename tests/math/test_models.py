"""scaling_lib.models: the model table, the Transformer's field checks and `from_hf_config`'s defaults and refusals
(the shipped config.json files and the config types are in test_hf_config.py and test_hf_config_types.py)."""

import json
import re
import os

import numpy as np
import pytest

from scaling_lib import hf_fields, models
from scaling_lib.models import Transformer, from_hf_config, get_model, model_names

REQUIRED_MODELS = ("llama2-13b", "llama3-8b", "llama3-70b", "palm-8b", "palm-62b", "palm-540b")
SMALL = dict(n_layers=2, d_model=64, d_ff=128, n_heads=4, n_kv_heads=2, head_dim=16, vocab_size=256)
GEMMA3 = dict(model_type="gemma3_text", num_hidden_layers=12, hidden_size=64, num_attention_heads=4,
              num_key_value_heads=2, head_dim=16, vocab_size=256, intermediate_size=128, sliding_window=32)
EVERY_SIXTH = ["sliding_attention"] * 5 + ["full_attention"]
LLAMA_CONFIG = dict(model_type="llama", num_hidden_layers=2, hidden_size=64, num_attention_heads=4, vocab_size=256,
                    intermediate_size=128)


# --- the table --------------------------------------------------------------------------------------------------------
def test_every_required_model_exists_and_every_model_has_a_source():
    assert set(REQUIRED_MODELS) <= set(model_names())
    for name in model_names():
        assert get_model(name).source


def test_an_unknown_model_name_shows_the_spellings_that_work():
    with pytest.raises(ValueError, match=r"'llama-2-13b' or 'meta-llama/Llama-3\.1-8B' work too"):
        get_model("gpt-9")


# --- the Transformer's fields -----------------------------------------------------------------------------------------
def test_transformer_refuses_a_name_that_is_not_a_string():
    with pytest.raises(ValueError, match="name must be a string, got 3"):
        Transformer(**SMALL, name=3)


def test_transformer_refuses_a_tie_that_is_not_a_bool():
    with pytest.raises(ValueError, match="tied_embeddings must be True or False, got 1"):
        Transformer(**SMALL, tied_embeddings=1)


def test_transformer_takes_numpy_integers_and_stores_python_ints():
    small = Transformer(n_layers=np.int64(2), d_model=np.int32(64), d_ff=128, n_heads=4, n_kv_heads=np.int8(2),
                        head_dim=16, vocab_size=256)
    assert small.n_layers == 2 and type(small.n_layers) is int and type(small.n_kv_heads) is int


def test_transformer_stores_a_numpy_bool_tie_as_a_python_bool():
    tied = Transformer(**SMALL, tied_embeddings=np.bool_(True))
    assert type(tied.tied_embeddings) is bool and tied.tied_embeddings is True


def test_an_mla_rope_head_dim_must_be_smaller_than_the_head_dim():
    with pytest.raises(ValueError, match="rope_head_dim=16 must be smaller than head_dim=16"):
        Transformer(**dict(SMALL, n_kv_heads=4), kv_lora_rank=8, rope_head_dim=16)


def test_the_number_of_leading_dense_layers_must_be_non_negative():
    with pytest.raises(ValueError, match="n_dense_layers must be a non-negative integer"):
        Transformer(**dict(SMALL, n_kv_heads=4), n_dense_layers=-1)


def test_shared_experts_need_an_moe_layer():
    with pytest.raises(ValueError, match="shared experts belong to an MoE layer"):
        get_model("llama3-8b").with_(n_shared_experts=1)


# --- from_hf_config: defaults and refusals ----------------------------------------------------------------------------
def test_a_periodic_local_global_pattern_gives_the_period():
    assert from_hf_config({**GEMMA3, "layer_types": EVERY_SIXTH * 2}).global_every == 6


@pytest.mark.parametrize("layer_types, n_global", [
    (["sliding_attention"] * 12, 0),
    ((["full_attention"] + ["sliding_attention"] * 5) * 2, 2),
    (EVERY_SIXTH + ["sliding_attention"] * 3 + ["full_attention"] + ["sliding_attention"] * 2, 2),
])
def test_a_local_global_pattern_that_is_not_periodic_is_read_as_counts(layer_types, n_global):
    # Where the global layers sit does not change the cost: their number does (global_layers).
    model = from_hf_config({**GEMMA3, "layer_types": layer_types})
    assert (model.n_global_layers, model.sliding_window) == (n_global, GEMMA3["sliding_window"])
    assert models.param_count(model) == models.param_count(from_hf_config(GEMMA3))


def test_gemma3_without_a_pattern_takes_hugging_faces_default_of_every_sixth_layer_global():
    assert from_hf_config(GEMMA3).global_every == 6  # Hugging Face's default sliding_window_pattern (issue 25)


def test_a_sliding_window_pattern_of_zero_is_refused_by_field_name():
    with pytest.raises(ValueError, match=r"field 'sliding_window_pattern' .* must be a positive integer"):
        from_hf_config({**GEMMA3, "sliding_window_pattern": 0})


def _llama_from_gemma3():
    llama = dict(GEMMA3, model_type="llama", _name_or_path="org/My-Model")
    del llama["num_key_value_heads"], llama["sliding_window"]
    return llama


def test_kv_heads_default_to_the_query_heads_and_the_name_to_the_repository():
    model = from_hf_config(_llama_from_gemma3())
    assert (model.n_kv_heads, model.name) == (4, "my-model")  # K defaults to N (multi-head)


@pytest.mark.parametrize("kind, max_window_layers, n_global", [("qwen2", 3, 3), ("qwen3", 0, 0), ("qwen2", None, 12),
                                                                ("qwen3_moe", 3, 0), ("qwen2_moe", 8, 8)])
def test_a_qwen_config_that_uses_its_sliding_window_windows_the_layers_its_class_does(kind, max_window_layers,
                                                                                      n_global):
    # Hugging Face: Qwen2/Qwen3 window the layers from max_window_layers on (none when it is absent, its default
    # being every layer); Qwen3-MoE windows every layer; Qwen2-MoE every other layer below max_window_layers.
    config = dict(_llama_from_gemma3(), model_type=kind, use_sliding_window=True, sliding_window=16,
                  max_window_layers=max_window_layers)
    if kind.endswith("moe"):
        config.update(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32)
    model = from_hf_config(config)
    assert model.n_global_layers == n_global
    assert model.sliding_window == (16 if n_global < 12 else None)


def test_tied_word_embeddings_are_read():
    assert from_hf_config({**LLAMA_CONFIG, "tie_word_embeddings": True}).tied_embeddings is True


def test_a_config_missing_its_shape_says_how_to_build_the_model_by_hand():
    with pytest.raises(ValueError, match=r"add it, or build the model with scaling_lib\.models\.Transformer"):
        from_hf_config({"model_type": "llama"})
    with pytest.raises(ValueError, match=r"'hidden_size' \(model_type 'mistral'\)"):
        from_hf_config({"model_type": "mistral", "num_hidden_layers": 2, "num_attention_heads": 4})


def test_a_name_matches_whatever_separates_its_words():
    # Hugging Face repositories, file names and people write the same model with dashes, underscores or spaces.
    for spelling in ("llama3_70b", "Llama 3 70B", "meta-llama/llama_3-70b"):
        assert get_model(spelling) == get_model("llama3-70b")


def test_a_config_that_is_not_utf8_is_told_what_a_config_json_is(tmp_path):
    path = tmp_path / "config.json"
    path.write_bytes(b'{"model_type": "llama", \xff}')
    with pytest.raises(ValueError, match="a config.json is JSON saved as UTF-8"):
        from_hf_config(path)


def test_kv_heads_that_do_not_divide_the_query_heads_are_refused_with_the_reason(tmp_path):
    config = {"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 5,
              "num_hidden_layers": 2, "intermediate_size": 11008, "vocab_size": 32000}
    with pytest.raises(ValueError, match="each KV head serves a whole group of query heads"):
        from_hf_config(config)


def test_a_model_without_a_name_is_named_after_its_architecture_never_its_folder(tmp_path):
    assert from_hf_config(LLAMA_CONFIG).name == "llama"  # no architectures: the model_type
    folder = tmp_path / "configs"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({**LLAMA_CONFIG, "architectures": ["LlamaForCausalLM"]}))
    assert from_hf_config(folder / "config.json").name == "LlamaForCausalLM"


def test_a_complete_config_of_a_type_this_book_does_not_read_is_refused_naming_the_type():
    gpt2_shaped = {**LLAMA_CONFIG, "model_type": "gpt2"}  # every field a llama has, but another architecture
    with pytest.raises(ValueError, match=r"model_type 'gpt2' in the config dict is not a family this book reads: it "
                                         r"has learned positions and an MLP with biases"):
        from_hf_config(gpt2_shaped)


def test_a_config_file_of_exactly_the_size_limit_is_read_one_byte_more_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(hf_fields, "MAX_CONFIG_BYTES", 1000)  # the real limit, 10 MB, is too large to write in a test
    text = json.dumps(LLAMA_CONFIG)
    path = tmp_path / "config.json"
    path.write_text(text + " " * (1000 - len(text)))
    assert from_hf_config(path).n_layers == 2
    path.write_text(text + " " * (1001 - len(text)))
    with pytest.raises(ValueError, match=r"\bholds 1,001 bytes\b"):
        from_hf_config(path)


def test_a_model_folder_whose_config_path_is_too_long_to_open_is_refused_with_a_short_message(tmp_path):
    # A folder path just under the system's PATH_MAX whose config.json path is past it: stat fails on the file
    # (ENAMETOOLONG), and the message names the folder without printing all of its path.
    limit = os.pathconf(tmp_path, "PC_PATH_MAX")
    folder = str(tmp_path)
    while len(folder) < limit - 6:
        folder = os.path.join(folder, "d" * max(1, min(200, limit - 7 - len(folder))))
    assert len(folder) < limit <= len(folder) + len("/config.json")
    os.makedirs(folder)
    with pytest.raises(ValueError, match=r"^cannot read the model folder .*: File name too long$") as err:
        from_hf_config(folder)
    assert len(str(err.value)) < 300 and str(err.value).startswith(f"cannot read the model folder {folder[:100]}")


# --- every field check of Transformer names its field, and each bound sits where the docstring puts it ---------------
_REQUIRED_FIELDS = ("n_layers", "d_model", "d_ff", "n_heads", "n_kv_heads", "head_dim", "vocab_size", "n_experts",
                    "n_active_experts")
_OPTIONAL_FIELDS = ("sliding_window", "global_every", "d_ff_dense", "kv_lora_rank", "q_lora_rank", "v_head_dim")
_COUNT_FIELDS = ("n_shared_experts", "n_dense_layers", "rope_head_dim")


@pytest.mark.parametrize("field", _REQUIRED_FIELDS)
def test_each_size_field_of_zero_is_refused_naming_that_field(field):
    with pytest.raises(ValueError, match=rf"\b{field} must be a positive integer, got 0\b"):
        Transformer(**{**SMALL, field: 0})


@pytest.mark.parametrize("field", _OPTIONAL_FIELDS)
def test_each_optional_size_of_zero_is_refused_naming_it_and_saying_none_is_allowed(field):
    with pytest.raises(ValueError, match=rf"\b{field} must be a positive integer\b.*\bor None\b"):
        Transformer(**SMALL, **{field: 0})


@pytest.mark.parametrize("field", _COUNT_FIELDS)
def test_each_count_field_below_zero_is_refused_naming_that_field(field):
    with pytest.raises(ValueError, match=rf"\b{field} must be a non-negative integer\b"):
        Transformer(**SMALL, **{field: -1})


def test_every_integer_field_given_as_a_whole_float_is_stored_as_a_python_int():
    mla = Transformer(n_layers=4.0, d_model=64.0, d_ff=128.0, n_heads=4.0, n_kv_heads=4.0, head_dim=16.0,
                      vocab_size=256.0, n_experts=4.0, n_active_experts=2.0, sliding_window=8.0, global_every=2.0,
                      n_shared_experts=1.0, n_dense_layers=1.0, d_ff_dense=96.0, kv_lora_rank=8.0, q_lora_rank=12.0,
                      rope_head_dim=4.0, v_head_dim=8.0)
    for f in (*_REQUIRED_FIELDS, *_OPTIONAL_FIELDS, *_COUNT_FIELDS):
        assert type(getattr(mla, f)) is int, f
    assert (mla.sliding_window, mla.global_every, mla.d_ff_dense, mla.kv_lora_rank, mla.q_lora_rank,
            mla.v_head_dim, mla.n_shared_experts, mla.n_dense_layers, mla.rope_head_dim) == (8, 2, 96, 8, 12, 8, 1,
                                                                                           1, 4)


def test_a_source_that_is_not_a_string_is_refused_naming_source():
    with pytest.raises(ValueError, match=r"\bsource must be a string\b"):
        Transformer(**SMALL, source=None)


def test_as_many_active_experts_as_experts_is_allowed_one_more_is_not():
    assert Transformer(**SMALL, n_experts=4, n_active_experts=4).n_active_experts == 4
    with pytest.raises(ValueError, match=r"\bn_active_experts=5 exceeds n_experts=4\b.*\bcannot be routed to more "
                                         r"experts than exist\b"):
        Transformer(**SMALL, n_experts=4, n_active_experts=5)


def test_kv_heads_that_do_not_divide_the_query_heads_name_a_fix():
    with pytest.raises(ValueError, match=r"\bn_kv_heads=3 does not divide n_heads=4\b.*\bpick a divisor of 4\b"):
        Transformer(**{**SMALL, "n_kv_heads": 3})


def test_a_global_layer_period_without_a_window_is_refused_with_the_reason():
    with pytest.raises(ValueError, match=r"\bglobal_every needs a sliding_window\b.*\bwhich layers escape the window"):
        Transformer(**SMALL, global_every=2)
    assert Transformer(**SMALL, sliding_window=8, global_every=2).n_global_layers == 1


def test_shared_experts_on_a_dense_model_are_refused_and_allowed_on_two_experts():
    with pytest.raises(ValueError, match=r"\bn_shared_experts=1 on a dense model \(n_experts=1\).*\bset n_experts > 1 "
                                         r"or drop them\b"):
        Transformer(**SMALL, n_shared_experts=1)
    assert Transformer(**SMALL, n_experts=2, n_shared_experts=1).n_shared_experts == 1


def test_every_layer_may_be_dense_but_not_more_layers_than_the_model_has():
    assert Transformer(**SMALL, n_dense_layers=2, d_ff_dense=96).n_dense_layers == 2  # SMALL has 2 layers
    with pytest.raises(ValueError, match=r"\bn_dense_layers=3 exceeds n_layers=2\b"):
        Transformer(**SMALL, n_dense_layers=3, d_ff_dense=96)


def test_dense_layers_need_their_width():
    with pytest.raises(ValueError, match=r"\bn_dense_layers > 0 needs d_ff_dense\b.*\bdense FFN\b"):
        Transformer(**SMALL, n_dense_layers=1)


@pytest.mark.parametrize("mla_field", [dict(q_lora_rank=8), dict(rope_head_dim=4)])
def test_a_latent_attention_field_without_kv_lora_rank_is_refused_naming_it(mla_field):
    with pytest.raises(ValueError, match=r"\bq_lora_rank and rope_head_dim describe multi-head latent attention: set "
                                         r"kv_lora_rank too\b"):
        Transformer(**SMALL, **mla_field)


def test_a_rope_part_one_narrower_than_the_head_is_allowed():
    assert Transformer(**SMALL, kv_lora_rank=8, rope_head_dim=15).rope_head_dim == 15  # head_dim 16
    with pytest.raises(ValueError, match=r"\bwhich counts it\b"):
        Transformer(**SMALL, kv_lora_rank=8, rope_head_dim=16)


# --- param_breakdown by hand on small models, one structure field at a time -------------------------------------------
def test_parameters_of_a_gqa_model_whose_value_heads_are_narrower_counted_by_hand():
    # L=2, D=64, F=128, N=4, K=2, H=16, H_v=8, V=256, untied. Per layer: W_Q 64x64 = 4,096, W_K 64x32 = 2,048,
    # W_V 64x16 = 1,024, W_O 32x64 = 2,048 (9,216); FFN 3 x 64 x 128 = 24,576; embeddings 2 x 256 x 64.
    parts = models.param_breakdown(Transformer(**SMALL, v_head_dim=8))
    assert parts == models.ParamCount(attention=2 * 9216, feed_forward=2 * 24576, router=0, embeddings=32768)
    assert parts.total == 18432 + 49152 + 32768
    assert models.param_breakdown(Transformer(**SMALL, v_head_dim=8), active_only=True) == parts


def test_parameters_of_an_moe_with_a_shared_expert_and_a_leading_dense_layer_counted_by_hand():
    # L=4, D=64, N=K=4, H=16, V=100 tied; 8 experts of F=32, 2 active, 1 shared; layer 0 dense of F=96.
    # Attention per layer 4 x 64 x 64 = 16,384. An expert is 3 x 64 x 32 = 6,144: 3 MoE layers x 9 experts (8 + the
    # shared one) = 165,888, or x 3 (2 active + shared) = 55,296 active; the dense layer 3 x 64 x 96 = 18,432.
    # Router 64 x 8 on each of the 3 MoE layers; one 100 x 64 table.
    moe = Transformer(n_layers=4, d_model=64, d_ff=32, n_heads=4, n_kv_heads=4, head_dim=16, vocab_size=100,
                      n_experts=8, n_active_experts=2, n_shared_experts=1, n_dense_layers=1, d_ff_dense=96,
                      tied_embeddings=True)
    assert models.param_breakdown(moe) == models.ParamCount(65536, 165888 + 18432, 1536, 6400)
    assert models.param_breakdown(moe, active_only=True) == models.ParamCount(65536, 55296 + 18432, 1536, 6400)
    assert models.active_param_count(moe) == 65536 + 73728 + 1536 + 6400


@pytest.mark.parametrize("q_lora_rank, w_q", [(None, 64 * 4 * 16), (12, 64 * 12 + 12 * 4 * 16)])
def test_parameters_of_latent_attention_counted_by_hand(q_lora_rank, w_q):
    # MLA, L=2, D=64, N=4, H=16 of which 4 RoPE, H_v=8, r_kv=8: W_DKV 64 x (8 + 4) = 768, W_UKV 8 x 4 x (12 + 8)
    # = 640, W_O 4 x 8 x 64 = 2,048, and W_Q either 64 x 64 or through a 12-wide bottleneck 64 x 12 + 12 x 64.
    mla = Transformer(**{**SMALL, "n_kv_heads": 4}, kv_lora_rank=8, q_lora_rank=q_lora_rank, rope_head_dim=4,
                      v_head_dim=8)
    assert models.param_breakdown(mla).attention == 2 * (w_q + 768 + 640 + 2048)


def test_param_breakdown_refuses_an_active_only_that_is_not_a_bool():
    with pytest.raises(ValueError, match=r"\bactive_only\b"):
        models.param_breakdown("llama3-8b", active_only="yes")


# --- names, repr and the readers of config.json's fields --------------------------------------------------------------
@pytest.mark.parametrize("spelling, canonical", [
    ("meta-llama/Llama-3.1-8B-Instruct", "llama3.18b"), ("  Foo_Bar baz-Qux ", "foobarbazqux"),
    ("org/sub/My-Model-Instruct-FP8", "mymodel"), ("Mixtral-8x7B-v0.1-Chat-HF", "mixtral8x7b"),
    ("instruct", "instruct"), ("HF", "hf"),  # a name that is only a suffix keeps it
])
def test_canonical_drops_the_organisation_case_separators_and_stacked_suffixes(spelling, canonical):
    assert models._canonical(spelling) == canonical


def test_get_model_passes_a_transformer_through_and_finds_any_spelling():
    small = Transformer(**SMALL)
    assert get_model(small) is small
    assert get_model(" LLAMA3-8B ") is models.MODELS["llama3-8b"]
    assert get_model("meta-llama/Meta-Llama-3-70B-Instruct") is models.MODELS["llama3-70b"]  # an alias
    assert get_model("Llama-2-13b-chat-hf") is models.MODELS["llama2-13b"]  # a table name, spelled differently


def test_get_model_refuses_what_is_not_a_name_and_lists_the_known_ones():
    with pytest.raises(ValueError, match=r"\bmodel must be a name or a Transformer, got 3\b"):
        get_model(3)
    with pytest.raises(ValueError) as err:
        get_model("gpt-9")
    message = str(err.value)
    assert re.search(r"\bunknown model 'gpt-9'; known models: llama2-13b, llama3-8b, llama3-70b\b", message)
    assert re.search(r"\bbuild your own with scaling_lib\.models\.Transformer\(\.\.\.\) or "
                     r"models\.from_hf_config\('config\.json'\)", message)


def test_a_models_repr_shows_every_shape_field_and_only_the_structure_fields_set():
    text = repr(Transformer(**SMALL))
    assert text.startswith("Transformer(n_layers=2, d_model=64, d_ff=128, n_heads=4, n_kv_heads=2, head_dim=16, "
                           "vocab_size=256, n_experts=1, n_active_experts=1, tied_embeddings=False, "
                           "sliding_window=None, name='custom', source='')")
    assert "global_every" not in text and "kv_lora_rank" not in text
    windowed = repr(Transformer(**SMALL, sliding_window=8, global_every=2))
    assert windowed.endswith(", sliding_window=8, name='custom', source='', global_every=2)")


def test_gemma2_alternates_local_and_global_layers_whatever_its_pattern_field_says():
    gemma2 = {**GEMMA3, "model_type": "gemma2", "sliding_window_pattern": 6}
    assert from_hf_config(gemma2).global_every == 2
    gpt_oss = {**gemma2, "model_type": "gpt_oss", "num_local_experts": 4, "num_experts_per_tok": 2}
    assert from_hf_config(gpt_oss).global_every == 2  # gpt-oss alternates too (its 128-token windows)
    assert from_hf_config({**GEMMA3, "sliding_window_pattern": 3}).global_every == 3
    assert from_hf_config({**GEMMA3, "layer_types": ["sliding_attention", "full_attention"] * 6}).global_every == 2


def test_a_layer_kind_this_family_does_not_have_is_refused_naming_it_and_the_file():
    with pytest.raises(ValueError, match=r"\bfield 'layer_types' of the config dict has layers of kind "
                                         r"'linear_attention'; this family's layers are full_attention or "
                                         r"sliding_attention"):
        from_hf_config({**GEMMA3, "layer_types": ["linear_attention"] * 12})


def test_a_table_name_is_found_as_written_even_when_another_name_folds_to_the_same_key(monkeypatch):
    # "tiny" and "tiny-instruct" both fold to "tiny"; the table's own spelling of each must still give that entry.
    base, chat = Transformer(**SMALL, name="tiny"), Transformer(**SMALL, name="tiny-instruct")
    monkeypatch.setitem(models.MODELS, "tiny", base)
    monkeypatch.setitem(models.MODELS, "tiny-instruct", chat)
    assert get_model("tiny") is base and get_model(" TINY ") is base and get_model("tiny-instruct") is chat
