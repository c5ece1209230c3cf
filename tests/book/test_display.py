"""The display helpers (scaling_lib.book.display) keep the rendered page reading like a book: a long table folds, a
long label is clipped at a sentence or a word (never inside math or a role), printed text wraps to the column, and a
function's code is shown as the page holds it."""

import ast

import pytest

from scaling_lib import memory, roofline
from scaling_lib.book.backlinks import showing
from scaling_lib.book.display import (SHOWN_CODE_COLUMNS, clip_text, formatted_for_the_page, markdown_table, show_source,
                                      source_code, wrap_text)
from tests import REPO


def _rows(n):
    return [(f"row {i}", i) for i in range(n)]


def test_a_table_of_25_rows_stays_in_the_text_and_26_rows_fold():
    short = markdown_table(["name", "value"], _rows(25)).data
    assert "<details>" not in short and short.count("\n") == 26  # header, alignment row, 25 rows
    long = markdown_table(["name", "value"], _rows(26), summary="All of them").data
    assert long.startswith("<details>\n<summary>All of them (click to show)</summary>\n\n| name | value |")
    assert long.endswith("| row 25 | 25 |\n\n</details>")  # blank lines around the table: parsed as Markdown
    assert "The table: 26 rows" in markdown_table(["name", "value"], _rows(26)).data
    assert "<details>" not in markdown_table(["name", "value"], _rows(100), fold_over=None).data
    assert "<details>" in markdown_table(["name", "value"], _rows(3), fold_over=2).data


def test_clip_text_keeps_the_first_sentence_or_cuts_at_a_word_never_inside_math_or_a_role():
    assert clip_text("How big is it, in GB? Use the table.") == "How big is it, in GB? Use the table."
    assert clip_text("Change it.  Then\nplot.") == "Change it."
    long = "word " * 40
    assert clip_text(long, 30) == "word word word word word word ..."
    assert len(clip_text(long, 30)) <= 34
    for text in ("Find the time $t = \\frac{2PT}{nC}$ for the model at batch 64 and more words",
                 "Run {ref}`the explorer <ch1-explorer>` and read off the batch at which it turns"):
        for limit in range(10, len(text)):
            short = clip_text(text, limit)
            assert short.count("$") % 2 == 0 and short.count("`") % 2 == 0, (limit, short)


def test_wrap_text_fits_printed_lines_to_the_column_and_keeps_every_word():
    line = "[ch1.bcrit-v6e-int4] No answer yet: replace None with your answer (in tokens, within ±2%)."
    text = "short line\n" + line + "\n    " + line
    wrapped = wrap_text(text, 40)
    assert all(len(row) <= 40 for row in wrapped.splitlines())
    assert wrapped.split() == text.split()  # nothing lost or reordered
    assert wrapped.splitlines()[0] == "short line" and wrapped.splitlines()[2].startswith("  ")
    assert max(len(row) for row in wrap_text(line).splitlines()) <= 76


def test_show_source_shows_a_function_s_code_without_its_docstring_and_refuses_anything_else():
    text = show_source(memory.kv_bytes_per_token).data
    assert text.startswith("`scaling_lib.memory.kv_bytes_per_token`, in `scaling_lib/memory.py`:\n\n```python\n"
                           "def kv_bytes_per_token(")
    assert text.endswith("\n```") and '"""' not in text  # the docstring is left out
    code = source_code(memory.kv_bytes_per_token)
    compile(code, "<shown>", "exec")  # what the reader sees is the function, still valid Python
    assert '"""' in source_code(memory.kv_bytes_per_token, docstring=True)
    both = show_source(roofline.ridge_point, roofline.critical_batch_size).data
    assert both.count("```python") == 2 and both.index("ridge_point") < both.index("critical_batch_size")
    with pytest.raises(TypeError, match="without calling it"):
        show_source(memory.kv_bytes_per_token("llama3-8b"))
    with pytest.raises(TypeError, match="at least one"):
        show_source()


@pytest.mark.tiny  # resolves every name the notebooks import, which loads the JAX model, Qwix and Flax
def test_code_shown_in_the_book_fits_an_output_block_and_is_the_same_program():
    # Every function a chapter shows, as the page shows it: ruff changes only line breaks (the parsed program is the
    # same), and no line is wider than an output's code block holds (test_page_fit measures the rendered page).
    for value in showing(REPO):
        code = source_code(value)
        shown = formatted_for_the_page(code)
        assert ast.dump(ast.parse(shown)) == ast.dump(ast.parse(code)), value.__qualname__
        assert max(map(len, shown.splitlines())) <= SHOWN_CODE_COLUMNS, value.__qualname__
