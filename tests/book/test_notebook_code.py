"""The code a chapter shows: the library's functions appear where the chapter derives them, the JAX the book runs is on
its pages, and the glue that feeds numbers into the prose stays out of the teaching cells.

"Visible" code is what the rendered page shows unfolded or behind a "show" button of its own: every code cell except
those tagged `remove-cell`, `remove-input` or `hide-input` (Jupyter Book's tags for a cell whose input the page drops
or folds with the set-up; `hide-cell` quiz cells count as visible). A glue line is a line that starts a `glue(...)`
call. Lines are non-blank source lines.
"""

import json
import re

import pytest

from scaling_lib.book.backlinks import cell_objects, notebooks
from tests import REPO

HIDDEN = {"remove-cell", "remove-input", "hide-input"}
NUMBERS_PROMPT = "Show how this section's numbers are computed"  # the fold of a section's glue cell
MIN_SHOWN, MIN_CHAPTERS = 14, 8  # at least 14 functions shown, in at least 8 chapters

CHAPTERS = [book for book in notebooks(REPO) if book.number is not None]


def _code_cells(path):
    return [(index, cell) for index, cell in enumerate(json.loads(path.read_text())["cells"])
            if cell["cell_type"] == "code"]


def _visible(cell) -> bool:
    return not HIDDEN & set(cell.get("metadata", {}).get("tags", []))


def _lines(cell) -> list[str]:
    return [line for line in "".join(cell["source"]).splitlines() if line.strip()]


# Tests that resolve every name the notebooks import load the JAX model, Qwix and Flax: they are tiny (tests/conftest.py).
resolves_the_notebooks_imports = pytest.mark.tiny


@pytest.fixture(scope="module")
def shown():
    """[(chapter, cell index, function, the chapter's cells as cell_objects gives them)] for every show_source."""
    found = []
    for book in CHAPTERS:
        cells = cell_objects(book.path)
        for index, _, values in cells:
            found += [(book, index, value, cells) for value in values]
    return found


def test_each_section_gathers_its_glue_in_one_hidden_cell():
    """A section's glued values sit in one folded cell (`hide-input`, its button labelled NUMBERS_PROMPT), not one per
    computing cell. A cell that nbval ignores (its values are timings) stays apart: merged, it would hide the rest
    from nbval's comparison."""
    crowded = []
    for book in CHAPTERS:
        section, per_section = "(before the first section)", {}
        for cell in json.loads(book.path.read_text())["cells"]:
            source = "".join(cell["source"])
            if cell["cell_type"] == "markdown":
                section = next((line for line in source.splitlines() if line.startswith("## ")), section)
            elif (cell.get("metadata", {}).get("mystnb", {}).get("code_prompt_show") == NUMBERS_PROMPT
                  and "NBVAL" not in source):
                per_section[section] = per_section.get(section, 0) + 1
        crowded += [f"chapter {book.number}, {name}: {n} glue cells" for name, n in per_section.items() if n > 1]
    assert not crowded, "gather each section's glue calls in one hidden cell:\n" + "\n".join(crowded)


@resolves_the_notebooks_imports
def test_the_chapters_show_at_least_14_functions_each_once_in_the_chapter_that_derives_and_calls_it(shown):
    """At least 14 functions in at least 8 chapters, none shown twice; each in the chapter that uses it: the chapter
    calls it outside the show_source cell, and either its prose names the function or the visible code cell just
    before the show_source cell calls it (the show follows the derivation and the computation it feeds)."""
    functions = {value for _, _, value, _ in shown}
    chapters = {book.number for book, _, _, _ in shown}
    assert len(functions) >= MIN_SHOWN, sorted(f.__qualname__ for f in functions)
    assert len(chapters) >= MIN_CHAPTERS, sorted(chapters)
    where = {}
    for book, _, value, _ in shown:
        where.setdefault(value, []).append(book.number)
    twice = {value.__qualname__: numbers for value, numbers in where.items() if len(numbers) > 1}
    assert not twice, f"show each function in the one chapter that derives it: {twice}"
    wrong = []
    for book, index, value, cells in shown:
        raw = json.loads(book.path.read_text())["cells"]
        calls = [i for i, used, showing in cells if value in used and not showing]
        prose = "\n".join("".join(cell["source"]) for cell in raw if cell["cell_type"] == "markdown")
        before = [i for i, _, showing in cells if i < index and not showing and _visible(raw[i])]
        named = re.search(rf"`[\w.]*\b{value.__name__}\b", prose) is not None
        if not calls or not (named or (before and before[-1] in calls)):
            wrong.append(f"chapter {book.number}, cell {index}: {value.__module__}.{value.__qualname__}")
    assert not wrong, "\n".join(wrong)


def test_show_source_cells_are_visible_and_do_only_that():
    for book in CHAPTERS:
        for index, cell in _code_cells(book.path):
            source = "".join(cell["source"])
            if "show_source(" in source and "import" not in source:
                assert _visible(cell), (book.number, index)
                assert re.fullmatch(r"show_source\([\w., ]+\)", source.strip()), (book.number, index, source)
                assert cell["outputs"] and "text/markdown" in cell["outputs"][0]["data"], (book.number, index)


# The JAX the book runs is on its pages: visible (unfolded) code cells, never only a library call.
JAX_LINE = re.compile(r"jax\.|jnp\.|lax\.|\bP\(|PartitionSpec|NamedSharding|shard_map")
FOLDED = HIDDEN | {"hide-cell"}


def _unfolded_code(path) -> list[str]:
    return ["".join(cell["source"]) for _, cell in _code_cells(path)
            if not FOLDED & set(cell.get("metadata", {}).get("tags", []))]


def _chapter(number):
    return next(book.path for book in CHAPTERS if book.number == number)


def test_the_jax_the_book_runs_is_on_its_pages():
    """At least 150 unfolded code lines of the chapters are JAX; the sharding chapters (7 and 8) show their partition
    specs and their mapped programs; and the decode step, with its cache update and its attention over the cache, is
    on the page where the book first decodes (chapter 2 or 3)."""
    per_chapter = {book.number: sum(bool(JAX_LINE.search(line)) for source in _unfolded_code(book.path)
                                    for line in source.splitlines()) for book in CHAPTERS}
    assert sum(per_chapter.values()) >= 150, per_chapter
    for number in (7, 8):
        code = "\n".join(_unfolded_code(_chapter(number)))
        assert re.search(r"\bP\(|PartitionSpec", code) and re.search(r"NamedSharding|shard_map", code), number
    sources = [source for number in (2, 3) for source in _unfolded_code(_chapter(number))]
    assert any(".at[" in source and "attention(" in source and "k_cache" in source for source in sources)
