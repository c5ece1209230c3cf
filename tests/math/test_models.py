"""Model names and Hugging Face configs (scaling_lib.models): how a name is matched and what a bad config is told."""

import json

import pytest

from scaling_lib.models import from_hf_config, get_model


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
