"""The notebooks' code is formatted for the page it is read on.

The rendered column holds 88 characters of monospace at 1280 px (tests/book/test_page_fit.py measures it), so every
notebook's code is formatted by ruff at that width (tools/ruff_notebooks.toml; `make refresh` runs it before it
executes a notebook) and no line of a code cell is wider: ruff does not split long strings or comments, which
are wrapped by hand; and every line a notebook prints fits the column too. No code cell a reader sees unfolded is
longer than 40 lines either: longer work is split into cells that each do one thing, and bookkeeping is folded
(`hide-input`). These checks read the .ipynb files, so they run in the seconds-long inner loop; the browser check of
the built page is test_page_fit.py's.
"""

import json
import subprocess
import sys
from pathlib import Path

from scaling_lib.book.text import PRINT_WIDTH
from tests import REPO

NOTEBOOKS = sorted(REPO.glob("chapters/*.ipynb")) + sorted(REPO.glob("book/*.ipynb"))
RUFF = Path(sys.executable).with_name("ruff")
CONFIG = REPO / "tools" / "ruff_notebooks.toml"
COLUMNS = 88


def test_every_notebook_is_formatted_by_ruff_at_the_page_width_and_no_code_line_is_wider():
    assert f"line-length = {COLUMNS}" in CONFIG.read_text()  # the formatter's width is the column's
    result = subprocess.run([str(RUFF), "format", "--check", "--config", str(CONFIG), *map(str, NOTEBOOKS)],
                            capture_output=True, text=True, cwd=REPO)
    assert result.returncode == 0, ("run `make refresh` (or `.venv/bin/ruff format --config tools/ruff_notebooks.toml "
                                    f"NOTEBOOK`) and re-execute:\n{result.stdout}{result.stderr}")
    wide = [f"{path.name}, cell {index}: {len(line)} characters: {line.strip()[:60]}..." for path in NOTEBOOKS
            for index, cell in enumerate(json.loads(path.read_text())["cells"]) if cell["cell_type"] == "code"
            for line in "".join(cell["source"]).splitlines() if len(line) > COLUMNS]
    assert not wide, f"lines wider than {COLUMNS} columns (split the string or comment):\n" + "\n".join(wide)


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


def test_every_printed_line_fits_the_column():
    """Every line a chapter or appendix prints (stream output and plain-text results) is at most `PRINT_WIDTH`
    characters, the width `check` wraps its verdicts to: a code block as wide as the column shows 88 at 1280 px, so
    a line of 76 fits with room for the output's padding. Tables (Markdown outputs) and figures are measured in the
    browser (test_page_fit.py). Long lines are wrapped with `scaling_lib.book.text.wrap_text`, or printed as a table."""
    lines = [(path.name, index, line) for path in NOTEBOOKS for index, line in _printed_lines(path)]
    assert len(NOTEBOOKS) >= 19 and len(lines) > 500  # the scan sees what the notebooks print
    wide = [(name, index, len(line), line[:90]) for name, index, line in lines if len(line) > PRINT_WIDTH]
    assert not wide, f"{len(wide)} printed lines wider than {PRINT_WIDTH} characters (notebook, cell, width): {wide}"


VISIBLE_LINES = 40
FOLDED = {"hide-input", "hide-cell", "remove-input", "remove-cell"}


def test_no_visible_code_cell_is_longer_than_40_lines():
    long = [f"{path.name}, cell {index}: {len(lines)} lines: {lines[0][:60]}"
            for path in NOTEBOOKS for index, cell in enumerate(json.loads(path.read_text())["cells"])
            if cell["cell_type"] == "code" and not FOLDED & set(cell["metadata"].get("tags", []))
            for lines in ["".join(cell["source"]).splitlines()] if len(lines) > VISIBLE_LINES]
    assert not long, (f"visible code cells over {VISIBLE_LINES} lines: split each into cells that do one thing "
                      "(the data, then the figure; a table's rows, then its formatting), or fold bookkeeping "
                      "with `hide-input`:\n" + "\n".join(long))
