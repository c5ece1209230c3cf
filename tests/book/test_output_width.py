"""Printed outputs fit the text column (issue 27), read from the notebooks' stored outputs, no browser needed.

Every line a chapter or appendix prints (stream output and plain-text results) is at most `PRINT_WIDTH` characters,
the width `check` wraps its verdicts to: a code block as wide as the column shows 88 at 1280 px
(test_page_fit.test_the_column_reads_like_a_book), so a line of 76 fits with room for the output's padding. Tables
(Markdown outputs) and figures are measured in the browser by test_page_fit. Long lines are wrapped with
`scaling_lib.book.text.wrap_text`, or printed as a table.
"""

import json

import pytest

from scaling_lib.book.text import PRINT_WIDTH
from tests import REPO

NOTEBOOKS = sorted((REPO / "chapters").glob("*.ipynb")) + sorted((REPO / "book").glob("*.ipynb"))


def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else value


def _printed_lines(path):
    """(cell index, line) for every line of plain text a notebook's stored outputs show."""
    for index, cell in enumerate(json.loads(path.read_text(encoding="utf-8"))["cells"]):
        for output in cell.get("outputs", []):
            if output.get("output_type") == "stream":
                texts = [_text(output["text"])]
            else:
                data = output.get("data", {})
                shown_as_text = not any(m.startswith("image/") or m in ("text/html", "text/markdown") for m in data)
                texts = [_text(data["text/plain"])] if "text/plain" in data and shown_as_text else []
            for text in texts:
                yield from ((index, line) for line in text.splitlines())


def test_the_scan_sees_printed_lines():
    lines = [line for path in NOTEBOOKS for _, line in _printed_lines(path)]
    assert len(NOTEBOOKS) >= 19 and len(lines) > 500


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_printed_line_fits_the_column(path):
    wide = [(index, len(line), line[:90]) for index, line in _printed_lines(path) if len(line) > PRINT_WIDTH]
    assert not wide, f"{len(wide)} printed lines wider than {PRINT_WIDTH} characters (cell, width, line): {wide}"
