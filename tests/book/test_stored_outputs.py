"""What the notebooks store reads the same on every machine, and every number in the prose can be traced.

nbval compares each stored output with a fresh run's, character for character. A float printed or glued with all of
its digits ends in digits that depend on the CPU's floating-point kernels (NumPy's BLAS and LAPACK, XLA's CPU code),
so it fails on a machine with another CPU and passes on the one that stored it. These checks read the stored files,
so they fail on the machine that wrote such an output, before anyone else meets it:

- no stored output and no glue record holds a float written with more than 10 significant digits;
- the notebooks glue through `scaling_lib.book.portable.glue`, which keeps 6;
- the code that computes a glued number is folded in the page (`hide-input`), never removed, so a reader can open it.
"""

import json
import re
import sys
import types

import pytest

from scaling_lib.book import portable
from tests import REPO

NOTEBOOKS = sorted(REPO.glob("chapters/*.ipynb")) + sorted(REPO.glob("book/*.ipynb"))
MAX_DIGITS = 10
# A decimal number with a point, optionally in exponent form; not a piece of a longer token (a version, a name).
FLOAT = re.compile(r"(?<![\w.])(\d*\.\d+)(?:[eE][-+]?\d+)?(?![\w.])")


def significant_digits(written: str) -> int:
    """Significant digits of a decimal written with a point: '0.5806584504897584' -> 16, '1490650.0' -> 6."""
    return len(written.replace(".", "").lstrip("0").rstrip("0"))


def _texts(output) -> list[str]:
    texts = ["".join(output["text"])] if "text" in output else []
    for mime, value in output.get("data", {}).items():
        if mime.startswith("image/") and not mime.endswith("svg+xml"):
            continue  # PNG and JPEG: pixels, which nbval does not compare
        texts.append("".join(value) if isinstance(value, list) else value if isinstance(value, str) else json.dumps(value))
    return texts


def long_floats(cells) -> list[str]:
    """'cell N: <float>' for every float of more than MAX_DIGITS significant digits in the cells' stored outputs."""
    found = []
    for index, cell in enumerate(cells):
        for output in cell.get("outputs", []):
            for text in _texts(output):
                found += [f"cell {index}: {m.group(0)}" for m in FLOAT.finditer(text)
                          if significant_digits(m.group(1)) > MAX_DIGITS]
    return found


@pytest.mark.parametrize("written, digits", [("0.5806584504897584", 16), ("1490650.0", 6), (".25", 2),
                                             ("2188.89", 6), ("1.2345678901", 11), ("0.000120", 2)])
def test_significant_digits_count_from_the_first_to_the_last_nonzero_digit(written, digits):
    assert significant_digits(written) == digits


def test_the_scan_finds_a_raw_float_in_a_glue_record_and_in_printed_text_but_not_in_a_version():
    glued = {"output_type": "display_data", "metadata": {"scrapbook": {"name": "x"}},
             "data": {"application/papermill.record/text/plain": "0.5806584504897584"}}
    printed = {"output_type": "stream", "name": "stdout", "text": ["ratio 13.098883248730964\n", "jax 0.10.2\n"]}
    rounded = {"output_type": "stream", "name": "stdout", "text": ["ratio 13.0989 at 2188.89 B/s\n"]}
    assert long_floats([{"outputs": [glued]}, {"outputs": [printed, rounded]}]) == [
        "cell 0: 0.5806584504897584", "cell 1: 13.098883248730964"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_stored_output_holds_a_float_with_more_than_10_significant_digits(path):
    found = long_floats(json.loads(path.read_text())["cells"])
    assert not found, (f"{path.name}: floats whose last digits depend on the CPU (glue with "
                       "scaling_lib.book.portable.glue, print with a format such as :.3g):\n" + "\n".join(found))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebooks_glue_through_the_portable_glue(path):
    sources = ["".join(cell["source"]) for cell in json.loads(path.read_text())["cells"] if cell["cell_type"] == "code"]
    assert not any(re.search(r"from myst_nb import .*\bglue\b|myst_nb\.glue\(", source) for source in sources), (
        f"{path.name}: import glue from scaling_lib.book.portable, which rounds floats to the digits a page can use")


@pytest.mark.parametrize("path", sorted(REPO.glob("chapters/*.ipynb")), ids=lambda p: p.name)
def test_no_chapter_removes_a_cell_that_computes_a_glued_number(path):
    removed = [index for index, cell in enumerate(json.loads(path.read_text())["cells"])
               if cell["cell_type"] == "code" and "glue(" in "".join(cell["source"])
               and "remove-cell" in cell.get("metadata", {}).get("tags", [])]
    assert not removed, f"{path.name}: cells {removed} glue numbers but are removed from the page; tag them hide-input"


@pytest.mark.parametrize("value, stored", [(2188.8888888888887, 2188.89), (0.5806584504897584, 0.580658),
                                           (1.3e-7, 1.3e-7), (-240.2439024390244, -240.244), (3.0, 3.0)])
def test_significant_keeps_six_digits_by_default(value, stored):
    assert portable.significant(value) == stored


def test_significant_keeps_the_digits_asked_for():
    assert portable.significant(1490649.6, digits=8) == 1490649.6
    assert portable.significant(1490649.6, digits=2) == 1500000.0


@pytest.mark.parametrize("digits", [0, 11, 2.0, True, "6"])
def test_significant_refuses_digits_outside_1_to_10(digits):
    with pytest.raises(ValueError, match="digits"):
        portable.significant(1.0, digits)


@pytest.fixture
def recorded(monkeypatch):
    """What `glue` hands to myst-nb, with myst-nb replaced by a recorder (the inner loop never imports it)."""
    calls = []
    stub = types.ModuleType("myst_nb")
    stub.glue = lambda name, value, display=True: calls.append((name, value, display))
    monkeypatch.setitem(sys.modules, "myst_nb", stub)
    return calls


def test_glue_stores_a_float_with_six_significant_digits_and_other_values_as_they_are(recorded):
    np = pytest.importorskip("numpy")
    portable.glue("a", 0.5806584504897584)
    portable.glue("b", np.float32(1) / np.float32(3))
    portable.glue("c", np.int64(7))
    portable.glue("d", 70_553_706_496)
    portable.glue("e", "fp8")
    assert recorded == [("a", 0.580658, False), ("b", 0.333333, False), ("c", 7, False),
                        ("d", 70_553_706_496, False), ("e", "fp8", False)]
    assert type(recorded[2][1]) is int


@pytest.mark.parametrize("value", [[1.0, 2.0], {"x": 1.0}, None, float("nan")])
def test_glue_refuses_what_is_not_one_number_or_text(recorded, value):
    with pytest.raises(ValueError):
        portable.glue("x", value)
    assert recorded == []
