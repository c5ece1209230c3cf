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
from scaling_lib.book.portable import AGREEMENT_RUNGS, ERROR_RUNGS, at_least, between, relative_difference
from tests import REPO, for_each

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


def test_the_scan_counts_significant_digits_and_finds_a_raw_float_in_glue_and_print_but_not_in_a_version():
    for written, digits in (("0.5806584504897584", 16), ("1490650.0", 6), (".25", 2), ("2188.89", 6),
                            ("1.2345678901", 11), ("0.000120", 2)):  # from the first to the last nonzero digit
        assert significant_digits(written) == digits, written
    glued = {"output_type": "display_data", "metadata": {"scrapbook": {"name": "x"}},
             "data": {"application/papermill.record/text/plain": "0.5806584504897584"}}
    printed = {"output_type": "stream", "name": "stdout", "text": ["ratio 13.098883248730964\n", "jax 0.10.2\n"]}
    rounded = {"output_type": "stream", "name": "stdout", "text": ["ratio 13.0989 at 2188.89 B/s\n"]}
    assert long_floats([{"outputs": [glued]}, {"outputs": [printed, rounded]}]) == [
        "cell 0: 0.5806584504897584", "cell 1: 13.098883248730964"]


@for_each(NOTEBOOKS, ids=lambda p: p.name)
def test_a_notebook_stores_no_cpu_dependent_float_glues_portably_and_never_removes_a_glue_cell(path):
    cells = json.loads(path.read_text())["cells"]
    found = long_floats(cells)
    assert not found, (f"{path.name}: floats whose last digits depend on the CPU (glue with "
                       "scaling_lib.book.portable.glue, print with a format such as :.3g):\n" + "\n".join(found))
    sources = ["".join(cell["source"]) for cell in cells if cell["cell_type"] == "code"]
    assert not any(re.search(r"from myst_nb import .*\bglue\b|myst_nb\.glue\(", source) for source in sources), (
        f"{path.name}: import glue from scaling_lib.book.portable, which rounds floats to the digits a page can use")
    if path.parent.name == "chapters":
        removed = [index for index, cell in enumerate(cells) if cell["cell_type"] == "code"
                   and "glue(" in "".join(cell["source"]) and "remove-cell" in cell.get("metadata", {}).get("tags", [])]
        assert not removed, f"{path.name}: cells {removed} glue numbers but are removed from the page; tag them " \
                            "hide-input"


@for_each([
    (2188.8888888888887, 6, 2188.89), (0.5806584504897584, 6, 0.580658), (1.3e-7, 6, 1.3e-7),
    (-240.2439024390244, 6, -240.244), (3.0, 6, 3.0), (1490649.6, 8, 1490649.6), (1490649.6, 2, 1500000.0),
], ids=str)
def test_significant_keeps_the_digits_asked_for_six_by_default(value, digits, stored):
    assert portable.significant(value, digits) == stored
    if digits == portable.GLUE_DIGITS:
        assert portable.significant(value) == stored


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


def test_a_value_printed_on_a_ladder_names_the_rungs_around_it():
    """What a notebook prints for a value whose last digits depend on the CPU: the rungs of a fixed ladder around it
    ("1% to 3%") or the highest rung it reaches ("at least 95%"); a value equal to a rung counts as above it."""
    assert ERROR_RUNGS == tuple(sorted(ERROR_RUNGS)) and AGREEMENT_RUNGS == tuple(sorted(AGREEMENT_RUNGS))
    assert between(0.0214) == "1% to 3%" and between(0.005) == "below 1%" and between(0.5) == "above 30%"
    assert between(0.03) == "3% to 10%"
    assert at_least(1.0) == "at least 95%" and at_least(0.9) == "at least 75%" and at_least(0.1) == "below 50%"
    assert between(0.0237, (0.05, 0.3), "{:g}") == "below 0.05"
    assert relative_difference([1.0, 2.0], [1.0, 4.0]) == 0.5 and relative_difference([0.0], [0.0]) == 0.0


@pytest.mark.parametrize("call, says", [
    pytest.param(lambda: portable.significant(1.0, 0), "digits", id="significant: 0 digits"),
    pytest.param(lambda: portable.significant(1.0, 11), "digits", id="significant: 11 digits"),
    pytest.param(lambda: portable.significant(1.0, 2.0), "digits", id="significant: a float count"),
    pytest.param(lambda: portable.significant(1.0, True), "digits", id="significant: a bool count"),
    pytest.param(lambda: portable.significant(1.0, "6"), "digits", id="significant: a string count"),
    pytest.param(lambda: portable.glue("x", [1.0, 2.0]), "a number or a string", id="glue: a list"),
    pytest.param(lambda: portable.glue("x", {"x": 1.0}), "a number or a string", id="glue: a dict"),
    pytest.param(lambda: portable.glue("x", None), "a number or a string", id="glue: None"),
    pytest.param(lambda: portable.glue("x", float("nan")), "finite", id="glue: nan"),
    pytest.param(lambda: between(0.1, (0.3, 0.1)), "increasing", id="between: rungs out of order"),
    pytest.param(lambda: at_least(float("nan")), "value", id="at_least: nan"),
])
def test_bad_digits_values_and_ladders_are_refused(recorded, call, says):
    with pytest.raises(ValueError, match=says):
        call()
    assert recorded == []  # nothing reached myst-nb
