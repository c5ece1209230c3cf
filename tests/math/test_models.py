"""scaling_lib.models: the model table, the Transformer's field checks and `from_hf_config`'s defaults and refusals
(the shipped config.json files and the config types are in test_hf_config.py and test_hf_config_types.py)."""

import json
import os

import numpy as np
import pytest

from scaling_lib import models
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


@pytest.mark.parametrize("layer_types", [
    ["sliding_attention"] * 12,
    (["full_attention"] + ["sliding_attention"] * 5) * 2,
    EVERY_SIXTH + ["sliding_attention"] * 3 + ["full_attention"] + ["sliding_attention"] * 2,
])
def test_a_local_global_pattern_that_is_not_periodic_with_the_global_layer_last_is_refused(layer_types):
    with pytest.raises(ValueError, match="is not a periodic local/global pattern with the global layer last in "
                                         "each period; this book's models cannot represent it"):
        from_hf_config({**GEMMA3, "layer_types": layer_types})


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


@pytest.mark.parametrize("config", [dict(_llama_from_gemma3(), model_type="qwen2", use_sliding_window=True),
                                    dict(LLAMA_CONFIG, model_type="qwen3", use_sliding_window=True)])
def test_a_qwen_config_that_uses_its_sliding_window_is_refused(config):
    with pytest.raises(ValueError, match="use_sliding_window=true"):
        from_hf_config(config)


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


def test_a_model_read_from_a_dict_without_a_name_is_named_config():
    model = from_hf_config(LLAMA_CONFIG)
    assert model.name == "config" and model.source == "Hugging Face config.json (config)"


def test_a_complete_config_of_a_type_this_book_does_not_read_is_refused_naming_the_type():
    gpt2_shaped = {**LLAMA_CONFIG, "model_type": "gpt2"}  # every field a llama has, but another architecture
    with pytest.raises(ValueError, match=r"model_type 'gpt2' in the config dict is not one this book reads"):
        from_hf_config(gpt2_shaped)


def test_a_config_file_of_exactly_the_size_limit_is_read_one_byte_more_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(models, "_MAX_CONFIG_BYTES", 1000)  # the real limit, 10 MB, is too large to write in a test
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
