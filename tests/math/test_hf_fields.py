"""Reading a config.json's fields one at a time (`hf_fields.ConfigFields`): JSON types checked and named with the
file, the model's name from a Hugging Face cache entry, and the model folder or cache snapshot that holds the file."""

import json
import re
from pathlib import Path

import pytest

from scaling_lib import hf_fields
from scaling_lib.hf_fields import ConfigFields
from scaling_lib.models import from_hf_config

from tests import for_each

LLAMA_CONFIG = dict(model_type="llama", num_hidden_layers=2, hidden_size=64, num_attention_heads=4, vocab_size=256,
                    intermediate_size=128)


def _fields(**config):
    return ConfigFields(config, "here.json")


def _write(folder, config=LLAMA_CONFIG):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    return folder / "config.json"


# --- Names: the model's, and the JSON values' -----------------------------------------------------------------------
@for_each([
    (("hub", "models--Qwen--Qwen1.5-MoE-A2.7B", "snapshots", "abc", "config.json"), "Qwen/Qwen1.5-MoE-A2.7B"),
    (("work", "my-model", "config.json"), "my-model"),
    (("config.json",), "config"),  # no folder: the file's stem
], ids=str)
def test_a_config_is_named_after_its_cache_entry_or_its_folder(parts, origin):
    assert hf_fields._origin(Path(*parts)) == origin


@for_each([("4096", "the string '4096'"), (True, "the boolean true"),
                                         (False, "the boolean false"), (None, "null"), ([1, 2], "a list (2 items)"),
                                         ((1,), "a list (1 items)"), ({"a": 1}, "an object (1 fields)"),
                                         (2.5, "2.5")], ids=str)
def test_json_values_are_named_as_json_calls_them(value, text):
    assert ConfigFields.json_text(value) == text


# --- Fields: a count, a flag, a list of layer kinds -----------------------------------------------------------------
def test_a_field_is_read_as_its_json_type_within_its_bounds_or_takes_its_default():
    assert _fields(n=128.0).count("n") == 128 and type(_fields(n=128.0).count("n")) is int  # JSON has one number type
    assert _fields(n=2**53).count("n") == 2**53 and _fields(n=1).count("n") == 1
    assert _fields(n=0).count("n", minimum=0) == 0
    assert _fields(n=None).count("n", 7) == 7 and _fields().count("n", None) is None
    assert _fields().flag("f", True) is True and _fields().flag("f", False) is False
    assert _fields(f=False).flag("f", True) is False
    assert _fields().layer_types(3) is None
    assert _fields(layer_types=["a", "b", "c"]).layer_types(3) == ["a", "b", "c"]


# --- Where the file is: a model folder, a Hugging Face cache entry and its snapshots --------------------------------
def test_a_folder_holds_its_own_config_or_one_snapshot_or_the_one_refs_main_names(tmp_path):
    own = _write(tmp_path / "m")
    _write(tmp_path / "m" / "snapshots" / "aaa")
    assert hf_fields._config_in_folder(tmp_path / "m") == (own, True)  # its own config before any snapshot
    # One snapshot with a config is read whatever refs/main says.
    entry = tmp_path / "models--org--Tiny-Model"
    only = _write(entry / "snapshots" / "aaa")
    (entry / "snapshots" / "bbb").mkdir()  # a revision without a config.json does not count
    assert hf_fields._config_in_folder(entry) == (only, True)
    (entry / "refs").mkdir()
    (entry / "refs" / "main").write_text("zzz")  # names a revision that is not there
    assert hf_fields._config_in_folder(entry) == (only, True)
    assert from_hf_config(entry).name == "tiny-model"
    # Of two snapshots, the one refs/main names; without it, a refusal that names one to pass.
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
    (tmp_path / "e" / "snapshots").mkdir(parents=True)
    with pytest.raises(ValueError, match=r"\bis a directory with no config\.json in it \(nor a Hugging Face cache "
                                         r"snapshot\); pass the model's folder or the path of its config\.json\b"):
        hf_fields._config_in_folder(tmp_path / "e")


# --- Bad input: a ValueError naming the field, its file and the fix -------------------------------------------------
@for_each([
    *[(lambda value=value: _fields(n=value).count("n"), r"\bfield 'n' of here\.json\b.*" + says) for value, says in [
        ("4096", r"\bmust be an integer, got the string '4096'; write 4096 without quotes\b"),
        (" -8 ", r"\bwrite -8 without quotes\b"), ("many", r"\bgot the string 'many'(?!\S)"),
        ("X12", r"\bgot the string 'X12'(?!\S)"), (True, r"\bthe boolean true\b"),
        ([8], r"\bgot a list \(1 items\)"), (2.5, r"\bmust be an integer, got 2\.5\b"), (float("inf"), r"\bgot inf\b"),
        (2**53 + 1, r"\bup to 2\*\*53\b"), (0, r"\bmust be a positive integer, got 0\b")]],
    (lambda: _fields(n=-1).count("n", minimum=0), r"\bmust be an integer >= 0, got -1\b"),
    (lambda: _fields(model_type="llama").count("n"),
     r"\bhere\.json has no usable 'n' \(model_type 'llama'\); add it, or build the model with "
     r"scaling_lib\.models\.Transformer"),
    (lambda: _fields(f="false").flag("f", True),
     r"\bfield 'f' of here\.json must be a JSON boolean, true or false without quotes, got the string 'false'"),
    (lambda: _fields(layer_types="full_attention").layer_types(2),
     r"\bfield 'layer_types' of here\.json must be a list of strings such as \"full_attention\", got the string "
     r"'full_attention'"),
    (lambda: _fields(layer_types=["full_attention", 1]).layer_types(2),
     r"\bfield 'layer_types' of here\.json must be a list of strings such as \"full_attention\", got a list "
     r"\(2 items\)"),
    (lambda: _fields(layer_types=["a", "b"]).layer_types(3),
     r"\bfield 'layer_types' of here\.json lists 2 layers but 'num_hidden_layers' is 3; give one entry per layer"),
], ids=str)
def test_bad_input_gets_a_value_error_naming_the_field_its_file_and_the_fix(call, words):
    with pytest.raises(ValueError, match=words):
        call()
