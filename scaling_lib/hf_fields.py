"""A Hugging Face `config.json` on disk or in memory, and its fields read one at a time with their JSON type checked.

`ConfigFields.from_source` finds and parses the file (a path, a model folder, a Hugging Face cache entry or one of
its snapshots, or the parsed dict); `ConfigFields` reads one field at a time (an integer size, a JSON boolean, a list of per-layer
kinds), names the field and the file when it refuses a value, and records which fields were read, so that
`hf_config` can refuse a field that changes the math and that no reader looked at. `hf_families` reads each family's
fields with it; `models.from_hf_config` is the entry point.
"""

import json
import math
from dataclasses import dataclass, field
from pathlib import Path, PurePath

from ._validate import MAX_INT

REQUIRED = object()  # the default of a field that must be present
MAX_CONFIG_BYTES = 10**7  # the largest config.json read: real ones are a few kB; a larger file is something else


@dataclass
class ConfigFields:
    """A parsed config.json and where it came from (`where`, for messages); each reader checks one field's JSON type
    and range and names the field and the file when it refuses it. `read` collects the fields a reader looked at
    (`hf_config` refuses a field that changes the math and that no reader looked at); `notes`, what a reader decided
    that the report should say (a field the architecture ignores, ...)."""

    config: dict
    where: str
    read: set = field(default_factory=set)
    notes: list = field(default_factory=list)

    @classmethod
    def from_source(cls, path_or_dict) -> tuple:
        """(the fields of a config, its origin: the model's name when the config gives none) from a path, a model
        folder, a Hugging Face cache entry or a parsed dict (`_load_config`)."""
        config, origin, where = _load_config(path_or_dict)
        return cls(config, where), origin

    @staticmethod
    def json_text(value) -> str:
        """How a JSON value reads in a message: the string '4096', the boolean true, null, a list, an object, 2.5."""
        if isinstance(value, str):
            return f"the string {value!r}"
        if isinstance(value, bool):
            return f"the boolean {str(value).lower()}"
        if value is None:
            return "null"
        if isinstance(value, (list, tuple)):
            return f"a list ({len(value)} items)"
        if isinstance(value, dict):
            return f"an object ({len(value)} fields)"
        return repr(value)

    @staticmethod
    def value_text(value) -> str:
        """A JSON value as a message quotes it: repr of a scalar, a list or an object by its size (the repr of a list
        nested thousands deep raises RecursionError)."""
        return ConfigFields.json_text(value) if isinstance(value, (list, tuple, dict)) else repr(value)

    def get(self, name: str, default=None):
        """A field's raw JSON value (`default` when absent), recorded as read."""
        self.read.add(name)
        return self.config.get(name, default)

    def consume(self, *names: str) -> None:
        """Record fields as read without using them: ones Hugging Face itself ignores in this configuration (a
        sliding_window with use_sliding_window false)."""
        self.read.update(names)

    def error(self, name: str, problem: str) -> ValueError:
        return ValueError(f"field {name!r} of {self.where} {problem}")

    def missing(self, name: str) -> ValueError:
        return ValueError(f"{self.where} has no usable {name!r} (model_type {self.value_text(self.config.get('model_type'))}); "
                          "add it, or build the model with scaling_lib.models.Transformer(...)")

    def count(self, name: str, default=REQUIRED, minimum: int = 1):
        """An integer field >= minimum (a JSON number with no fraction; true/false and strings refused).
        Absent or null: `default` (None when the field is optional), or an error when it is required."""
        value = self.get(name)
        if value is None:
            if default is REQUIRED:
                raise self.missing(name)
            return default
        if isinstance(value, str):
            hint = f"; write {value.strip()} without quotes" if value.strip().lstrip("-").isdigit() else ""
            raise self.error(name, f"must be an integer, got {self.json_text(value)}{hint}")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.error(name, f"must be an integer, got {self.json_text(value)}")
        if isinstance(value, float) and not (math.isfinite(value) and value == int(value)):
            raise self.error(name, f"must be an integer, got {self.value_text(value)}")
        if value > MAX_INT:
            raise self.error(name, f"must be an integer up to 2**53 (no real size is larger), got {value!r}")
        if value < minimum:
            bound = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
            raise self.error(name, f"must be {bound}, got {value!r}")
        return int(value)

    def flag(self, name: str, default: bool) -> bool:
        """A boolean field: JSON true or false (absent: `default`). The strings "true"/"false", 0, 1 and null are
        refused rather than guessed: bool("false") is True."""
        self.read.add(name)
        if name not in self.config:
            return default
        value = self.config[name]
        if not isinstance(value, bool):
            raise self.error(name, "must be a JSON boolean, true or false without quotes, got "
                                   f"{self.json_text(value)}")
        return value

    def layer_types(self, n_layers: int):
        """The per-layer attention kinds (a list of strings, one per layer), or None when absent."""
        types = self.get("layer_types")
        if types is None:
            return None
        if not isinstance(types, list) or not all(isinstance(kind, str) for kind in types):
            raise self.error("layer_types", f"must be a list of strings such as \"full_attention\", got "
                                            f"{self.json_text(types)}")
        if len(types) != n_layers:
            raise self.error("layer_types", f"lists {len(types)} layers but 'num_hidden_layers' is {n_layers}; "
                                            "give one entry per layer")
        return types


def _load_config(path_or_dict) -> tuple:
    """(the config as a dict, its origin for the model's source and name, where it came from for messages)."""
    if isinstance(path_or_dict, dict):
        return dict(path_or_dict), "config", "the config dict"
    if not isinstance(path_or_dict, (str, PurePath)):
        raise ValueError(f"path_or_dict must be the path of a Hugging Face config.json or its parsed dict, got "
                         f"{path_or_dict!r}")
    if not str(path_or_dict).strip():
        raise ValueError("the config path is empty; pass the path of a Hugging Face config.json or its dict")
    path = Path(path_or_dict)
    try:
        is_dir, is_file = path.is_dir(), path.is_file()
        size = path.stat().st_size if is_file else 0
    except OSError as err:  # a name too long for the file system, a loop of links, ...
        raise ValueError(f"cannot open the config file {str(path)[:200]}: {err.strerror or err}") from None
    if is_dir:
        try:
            path, is_file = _config_in_folder(path)
            size = path.stat().st_size
        except OSError as err:
            raise ValueError(f"cannot read the model folder {str(path)[:200]}: {err.strerror or err}") from None
    if not is_file:
        raise ValueError(f"no config file at {path}; pass the path of a Hugging Face config.json or its dict")
    if size > MAX_CONFIG_BYTES:
        raise ValueError(f"{path} holds {size:,} bytes; a config.json is a few kB (is this the weights file?)")
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except OSError as err:
        raise ValueError(f"cannot read the config file {path}: {err.strerror or err}") from None
    except UnicodeDecodeError as err:
        raise ValueError(f"{path} is not UTF-8 text (byte {err.start} is {err.object[err.start]:#04x}); a "
                         "config.json is JSON saved as UTF-8") from None
    try:
        config = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"{path} is not valid JSON: {err.msg} at line {err.lineno}, column {err.colno}") from None
    except RecursionError:
        raise ValueError(f"{path} nests lists or objects too deeply to read; a config.json is one flat object") \
            from None
    except ValueError:  # Python refuses to read an integer of more than 4,300 digits
        raise ValueError(f"{path} holds a number of thousands of digits; no field of a config.json is that large") \
            from None
    if not isinstance(config, dict):
        raise ValueError(f"{path} holds {ConfigFields.json_text(config)} at its top level; a config.json is one JSON object "
                         "{...} of fields such as \"model_type\" and \"hidden_size\"")
    return config, _origin(path), str(path)


def _config_in_folder(folder: Path) -> tuple:
    """The config.json of a model folder, or of a Hugging Face cache entry (models--org--name, whose snapshots/
    hold one folder per revision: the one refs/main names, else the only one); a ValueError otherwise."""
    if (folder / "config.json").is_file():
        return folder / "config.json", True
    snapshots = folder / "snapshots"
    if snapshots.is_dir():
        ref = folder / "refs" / "main"
        revision = ref.read_text().strip() if ref.is_file() else None
        found = sorted(p for p in snapshots.iterdir() if (p / "config.json").is_file())
        chosen = [p for p in found if p.name == revision] or (found if len(found) == 1 else [])
        if chosen:
            return chosen[0] / "config.json", True
        if found:
            raise ValueError(f"{folder} holds {len(found)} snapshots with a config.json and no refs/main naming one; "
                             f"pass one of them, e.g. {found[0] / 'config.json'}")
    raise ValueError(f"{folder} is a directory with no config.json in it (nor a Hugging Face cache snapshot); pass "
                     "the model's folder or the path of its config.json")


def _origin(path: Path) -> str:
    """The model's name when the config does not give one: org/name of a Hugging Face cache entry
    (.../models--org--name/snapshots/<hash>/config.json), else the folder holding the file."""
    for part in reversed(path.parts):
        if part.startswith("models--"):
            return part[len("models--"):].replace("--", "/")
    return path.parent.name or path.stem
