"""The code a chapter writes out is the code the library runs (scaling_lib.book.saved).

A cell whose first line is `# saved as scaling_lib.X` holds definitions only, and each is the text of the same
definition in module X (the back-link paragraph of a docstring aside). These checks read files only: no JAX.
"""

import json
import re

import pytest

from scaling_lib.book import saved
from tests import REPO

NOTEBOOKS = sorted(REPO.glob("chapters/*.ipynb")) + sorted(REPO.glob("book/*.ipynb"))


def test_every_saved_cell_is_its_modules_code_and_the_decoder_is_written_out_where_the_book_first_decodes():
    problems = saved.differences(REPO, NOTEBOOKS)
    assert not problems, ("a saved cell and its module differ; edit the cell, then `make generate` copies it into "
                          "the module:\n" + "\n".join(problems))
    cells = saved.saved_cells(REPO / "chapters" / "02_kv_cache.ipynb")
    names = {name for cell in cells for name in cell.definitions}
    assert {"attention", "qkv", "mlp", "full_pass", "cached_step", "decode_step_jit"} <= names
    step = next(cell.definitions["cached_step"] for cell in cells if "cached_step" in cell.definitions)
    assert ".at[" in step and "attention(" in step  # the cache update and the attention over the cache


def _notebook(tmp_path, *sources):
    cells = [{"cell_type": "code", "id": f"c{i}", "metadata": {}, "outputs": [], "execution_count": None,
              "source": source} for i, source in enumerate(sources)]
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    return path


def _package(tmp_path, text):
    (tmp_path / "scaling_lib").mkdir(exist_ok=True)
    module = tmp_path / "scaling_lib" / "demo.py"
    module.write_text(text)
    return module


MODULE = '''"""A module."""

import math


def area(r):
    """pi r^2.

    Defined in chapter 1, *Rooflines*.
    """
    return math.pi * r**2


@functools.cache
def volume(r, h):
    """pi r^2 h."""
    return area(r) * h


SCALE = 2
'''


def test_saving_replaces_each_definition_and_leaves_the_rest_of_the_module(tmp_path):
    """A back-link paragraph, and where a docstring's closing quotes sit, are no differences."""
    module = _package(tmp_path, MODULE)
    root = tmp_path
    cell = ("# saved as scaling_lib.demo\n@functools.cache\ndef volume(r, h):\n    \"\"\"pi r^2 h, a cylinder.\"\"\"\n"
            "    return area(r) * h  # base times height\n\n\nSCALE = 3")
    notebook = _notebook(root, cell)
    assert saved.differences(root, [notebook]) == ["nb.ipynb, cell 0: volume differs from scaling_lib.demo.volume",
                                                   "nb.ipynb, cell 0: SCALE differs from scaling_lib.demo.SCALE"]
    assert saved.save(root, [notebook]) == [module]
    text = module.read_text()
    assert "    return area(r) * h  # base times height\n" in text and "SCALE = 3\n" in text
    assert "Defined in chapter 1, *Rooflines*." in text and text.startswith('"""A module."""\n\nimport math\n')
    assert saved.differences(root, [notebook]) == []
    assert saved.save(root, [notebook]) == []  # idempotent
    cell = '# saved as scaling_lib.demo\ndef area(r):\n    """pi r^2."""\n    return math.pi * r**2'
    assert saved.differences(tmp_path, [_notebook(tmp_path, cell)]) == []
    perimeter = _notebook(tmp_path, "# saved as scaling_lib.demo\ndef perimeter(r):\n    return 2 * r")
    assert saved.differences(tmp_path, [perimeter]) == [
        "nb.ipynb, cell 0: perimeter is not defined at the top level of scaling_lib.demo"]


def _refused(call, module, body):
    return lambda tmp_path: call(tmp_path, _notebook(tmp_path, f"# saved as scaling_lib.{module}\n{body}"))


def _read(tmp_path, notebook):
    return saved.saved_cells(notebook)


# A saved cell that is not one the library can hold: (the call on a cell saved as scaling_lib.<module>, what its
# ValueError says).
BAD_CELLS = [
    pytest.param(_refused(_read, "demo", "x = area(2)\nprint(x)"), "`print(x)` is not a definition", id="a call"),
    pytest.param(_refused(_read, "demo", "import math"), "`import math` is not a definition", id="an import"),
    pytest.param(_refused(_read, "demo", "# the area\ndef area(r):\n    return r"),
                 "`# the area` lies outside every definition", id="a comment outside a definition"),
    pytest.param(_refused(_read, "demo", "def area(r):\n    return r\n\n\ndef area(r):\n    return 2 * r"),
                 "area is defined twice", id="one name defined twice"),
    pytest.param(_refused(_read, "demo", "a, b = 1, 2"), "is not a definition", id="a tuple assignment"),
    pytest.param(_refused(lambda root, nb: saved.save(root, [nb]), "demo", "def perimeter(r):\n    return 2 * r"),
                 "add a definition", id="saving a name the module lacks: add it there first"),
    pytest.param(_refused(lambda root, nb: saved.differences(root, [nb]), "nowhere", "X = 1"),
                 "name an existing scaling_lib module", id="a module the library lacks"),
]


@pytest.mark.parametrize("call, problem", BAD_CELLS)
def test_a_saved_cell_holds_only_definitions_of_an_existing_module_and_name(tmp_path, call, problem):
    _package(tmp_path, MODULE)
    with pytest.raises(ValueError, match=re.escape(problem)):
        call(tmp_path)


def test_only_a_first_line_marker_makes_a_cell_saved(tmp_path):
    path = _notebook(tmp_path, "x = 1\n# saved as scaling_lib.demo", "# saved as numpy\nY = 2",
                     "#saved as scaling_lib.demo\nZ = 3")
    assert [(cell.index, cell.module, list(cell.definitions)) for cell in saved.saved_cells(path)] == [
        (2, "scaling_lib.demo", ["Z"])]
