"""Reading a config.json's fields one at a time (`hf_fields.ConfigFields`): JSON types checked and named with the
file, the model's name from a Hugging Face cache entry, and the model folder or cache snapshot that holds the file."""

import json
import re
from pathlib import Path

import pytest

from scaling_lib import hf_fields
from scaling_lib.hf_fields import ConfigFields
from scaling_lib.models import from_hf_config

LLAMA_CONFIG = dict(model_type="llama", num_hidden_layers=2, hidden_size=64, num_attention_heads=4, vocab_size=256,
                    intermediate_size=128)


@pytest.mark.parametrize("parts, origin", [
    (("hub", "models--Qwen--Qwen1.5-MoE-A2.7B", "snapshots", "abc", "config.json"), "Qwen/Qwen1.5-MoE-A2.7B"),
    (("work", "my-model", "config.json"), "my-model"),
    (("config.json",), "config"),  # no folder: the file's stem
])
def test_a_config_is_named_after_its_cache_entry_or_its_folder(parts, origin):
    assert hf_fields._origin(Path(*parts)) == origin


@pytest.mark.parametrize("value, text", [("4096", "the string '4096'"), (True, "the boolean true"),
                                         (False, "the boolean false"), (None, "null"), ([1, 2], "a list (2 items)"),
                                         ((1,), "a list (1 items)"), ({"a": 1}, "an object (1 fields)"),
                                         (2.5, "2.5")])
def test_json_values_are_named_as_json_calls_them(value, text):
    assert ConfigFields.json_text(value) == text


def _fields(**config):
    return ConfigFields(config, "here.json")


@pytest.mark.parametrize("value, says", [
    ("4096", r"\bmust be an integer, got the string '4096'; write 4096 without quotes\b"),
    (" -8 ", r"\bwrite -8 without quotes\b"), ("many", r"\bgot the string 'many'(?!\S)"),
    ("X12", r"\bgot the string 'X12'(?!\S)"), (True, r"\bthe boolean true\b"),
    ([8], r"\bgot a list \(1 items\)"), (2.5, r"\bmust be an integer, got 2\.5\b"), (float("inf"), r"\bgot inf\b"),
    (2**53 + 1, r"\bup to 2\*\*53\b"), (0, r"\bmust be a positive integer, got 0\b"),
])
def test_a_count_field_of_the_wrong_type_or_range_is_named_with_its_file(value, says):
    with pytest.raises(ValueError, match=r"\bfield 'n' of here\.json\b") as err:
        _fields(n=value).count("n")
    assert re.search(says, str(err.value)), str(err.value)


def test_a_count_field_takes_whole_floats_its_bounds_and_its_default():
    assert _fields(n=128.0).count("n") == 128 and type(_fields(n=128.0).count("n")) is int
    assert _fields(n=2**53).count("n") == 2**53 and _fields(n=1).count("n") == 1
    assert _fields(n=0).count("n", minimum=0) == 0
    with pytest.raises(ValueError, match=r"\bmust be an integer >= 0, got -1\b"):
        _fields(n=-1).count("n", minimum=0)
    assert _fields(n=None).count("n", 7) == 7 and _fields().count("n", None) is None
    with pytest.raises(ValueError, match=r"\bhere\.json has no usable 'n' \(model_type 'llama'\); add it, or build "
                                         r"the model with scaling_lib\.models\.Transformer"):
        _fields(model_type="llama").count("n")


def test_a_flag_field_is_a_json_boolean_or_its_default():
    assert _fields().flag("f", True) is True and _fields().flag("f", False) is False
    assert _fields(f=False).flag("f", True) is False
    with pytest.raises(ValueError, match=r"\bfield 'f' of here\.json must be a JSON boolean, true or false without "
                                         r"quotes, got the string 'false'"):
        _fields(f="false").flag("f", True)


def test_layer_types_are_a_list_of_strings_one_per_layer():
    assert _fields().layer_types(3) is None
    assert _fields(layer_types=["a", "b", "c"]).layer_types(3) == ["a", "b", "c"]
    for bad, text in (("full_attention", "the string 'full_attention'"),
                      (["full_attention", 1], r"a list \(2 items\)")):
        with pytest.raises(ValueError, match=r"\bfield 'layer_types' of here\.json must be a list of strings such "
                                             rf"as \"full_attention\", got {text}"):
            _fields(layer_types=bad).layer_types(2)
    with pytest.raises(ValueError, match=r"\bfield 'layer_types' of here\.json lists 2 layers but "
                                         r"'num_hidden_layers' is 3; give one entry per layer"):
        _fields(layer_types=["a", "b"]).layer_types(3)


def _write(folder, config=LLAMA_CONFIG):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    return folder / "config.json"


def test_a_cache_entry_with_one_snapshot_is_read_whatever_refs_main_says(tmp_path):
    entry = tmp_path / "models--org--Tiny-Model"
    only = _write(entry / "snapshots" / "aaa")
    (entry / "snapshots" / "bbb").mkdir()  # a revision without a config.json does not count
    assert hf_fields._config_in_folder(entry) == (only, True)
    (entry / "refs").mkdir()
    (entry / "refs" / "main").write_text("zzz")  # names a revision that is not there
    assert hf_fields._config_in_folder(entry) == (only, True)
    assert from_hf_config(entry).name == "tiny-model"


def test_a_cache_entry_with_two_snapshots_takes_the_one_refs_main_names(tmp_path):
    entry = tmp_path / "models--org--m"
    _write(entry / "snapshots" / "aaa")
    second = _write(entry / "snapshots" / "bbb")
    with pytest.raises(ValueError) as err:
        hf_fields._config_in_folder(entry)
    assert re.search(r"\bholds 2 snapshots with a config\.json and no refs/main naming one; pass one of them, e\.g\. "
                     rf"{re.escape(str(entry / 'snapshots' / 'aaa' / 'config.json'))}", str(err.value))
    (entry / "refs").mkdir()
    (entry / "refs" / "main").write_text(" bbb\n")
    assert hf_fields._config_in_folder(entry) == (second, True)


def test_a_folder_with_its_own_config_is_read_before_any_snapshot(tmp_path):
    own = _write(tmp_path / "m")
    _write(tmp_path / "m" / "snapshots" / "aaa")
    assert hf_fields._config_in_folder(tmp_path / "m") == (own, True)
    (tmp_path / "e" / "snapshots").mkdir(parents=True)
    with pytest.raises(ValueError, match=r"\bis a directory with no config\.json in it \(nor a Hugging Face cache "
                                         r"snapshot\); pass the model's folder or the path of its config\.json\b"):
        hf_fields._config_in_folder(tmp_path / "e")
