"""The library the rendered book runs in the page (Pyodide: the standard library only) imports and works without
numpy, JAX and matplotlib, and the zip the book serves is built from the package, not kept by hand.

The browser half (answer boxes judged in offline Chromium) is in tests/book/test_answer_boxes_browser.py."""

import importlib.util
import json
import subprocess
import sys
import zipfile

import numpy as np
import pytest

from scaling_lib import _validate
from tests import REPO, for_each, fresh_interpreter

BLOCK = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {"numpy", "jax", "jaxlib", "matplotlib"}:
            raise ImportError(f"{name} is blocked in this test")
sys.meta_path.insert(0, Block())
"""


def _run_blocked(code: str) -> str:
    result = subprocess.run([sys.executable, "-c", BLOCK + code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def test_checker_and_estimate_import_and_run_without_numpy_jax_matplotlib():
    found = fresh_interpreter()
    right, wrong, message, count, table = found["page"]
    blocked, refused = found["loaded_while_blocked"], found["refused"]
    assert right is True and wrong is False
    assert count >= 60
    assert blocked == [] and refused == "numpy is blocked in this test"  # the blocker blocks
    # The same verdict and numbers as in this process, where numpy is importable.
    from scaling_lib.book.exercises import grade
    from scaling_lib.estimate import report
    assert message == grade("ch4.kv-per-token-llama3-70b", "656").message
    assert table == str(report("llama3-70b", "h100", 8, context_len=4096))


def test_flag_takes_numpy_bools_and_integer_checks_still_refuse_them():
    assert _validate.flag("causal", np.True_) is True and _validate.flag("causal", np.False_) is False
    with pytest.raises(ValueError, match="causal must be True or False"):
        _validate.flag("causal", 1)
    with pytest.raises(ValueError, match="n_chips"):
        _validate.positive_int("n_chips", np.True_)
    assert _validate.positive_int("n_chips", np.int64(8)) == 8 and _validate.real("x", np.float32(0.5)) == 0.5


def _answer_boxes_extension():
    spec = importlib.util.spec_from_file_location("answer_boxes", REPO / "book" / "_ext" / "answer_boxes.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.tiny  # a step of the book build: the Sphinx extension writes the zip (it loads Sphinx, as the build does)
def test_library_zip_is_built_from_the_package_and_holds_what_the_page_imports(tmp_path):
    extension = _answer_boxes_extension()
    target = tmp_path / "scaling_lib.zip"
    extension.write_library_zip(target)
    first = target.read_bytes()
    extension.write_library_zip(target)
    assert target.read_bytes() == first, "the zip is not deterministic"
    names = set(zipfile.ZipFile(target).namelist())
    for module in ("scaling_lib/__init__.py", "scaling_lib/estimate.py", "scaling_lib/book/exercises/checker.py",
                   "scaling_lib/book/exercises/ch04.py", "scaling_lib/units.py"):
        assert module in names
    assert any(name.startswith("scaling_lib/data/") for name in names)
    assert not any(name.startswith("scaling_lib/tiny/") for name in names), "the JAX model has no place in the page"
    for name in names:  # each member is the package's file, byte for byte
        assert zipfile.ZipFile(target).read(name) == (REPO / name).read_bytes()
    # Unpacked alone, as the page does (no repository on the path), it judges an answer with numpy blocked.
    unpacked = tmp_path / "lib"
    zipfile.ZipFile(target).extractall(unpacked)
    out = _run_blocked(f"""
sys.path = [p for p in sys.path if "site-packages" not in p and p not in ("", {str(REPO)!r})]
sys.path.insert(0, {str(unpacked)!r})
from scaling_lib.book.exercises.checker import grade
import scaling_lib
print(scaling_lib.__file__.startswith({str(unpacked)!r}), grade("ch4.kv-per-token-llama3-70b", "328 kB").correct)
""")
    assert out.split()[-2:] == ["True", "True"]


def test_report_takes_the_tensor_parallel_degree_of_its_deployment():
    from scaling_lib.estimate import Deployment, report

    assert report("llama3-70b", "h100", 8, tensor_parallel=4).deployment == Deployment("llama3-70b", "h100", 8,
                                                                                       tensor_parallel=4)
    assert report("llama3-70b", "h100", 8).describe() == report("llama3-70b", "h100", 8,
                                                                tensor_parallel=None).describe()


def _page_python() -> dict:
    """The Python the page's worker runs (the PYTHON block of answer_boxes.js), executed here."""
    source = (REPO / "book" / "_ext" / "answer_boxes" / "answer_boxes.js").read_text()
    code = source.split("const PYTHON = `", 1)[1].split("`;", 1)[0]
    namespace = {}
    exec(compile(code, "answer_boxes.js (PYTHON)", "exec"), namespace)
    return namespace


@for_each([
    ('{"a": ' * 5000 + "1" + "}" * 5000, "nested too deeply"),  # json.loads itself recurses
    ("{not json", "error:"),
], ids=str)
def test_the_page_form_answers_a_pasted_config_it_cannot_read_with_one_error_line(config, words):
    fields = {"config": config, "model": "", "chip": "h100", "chips": "1"}
    ok, text = json.loads(_page_python()["_estimate"](json.dumps(fields)))
    assert not ok and text.startswith("error:") and words in text and "\n" not in text and len(text) < 500
