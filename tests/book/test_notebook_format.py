"""The notebooks' code is formatted for the page it is read on (issue 27).

The rendered column holds 88 characters of monospace at 1280 px (tests/book/test_page_fit.py measures it), so every
notebook's code is formatted by ruff at that width (tools/ruff_notebooks.toml; `make refresh` runs it before it
executes a notebook) and no line of a code cell is wider: ruff does not split long strings or comments, which
are wrapped by hand. No code cell a reader sees unfolded is longer than 40 lines either: longer work is split into
cells that each do one thing, and bookkeeping is folded (`hide-input`). These checks read the .ipynb files, so they
run in the seconds-long inner loop; the browser check of the built page is test_page_fit.py's.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests import REPO

NOTEBOOKS = sorted(REPO.glob("chapters/*.ipynb")) + sorted(REPO.glob("book/*.ipynb"))
RUFF = Path(sys.executable).with_name("ruff")
CONFIG = REPO / "tools" / "ruff_notebooks.toml"
COLUMNS = 88


def test_the_formatter_width_is_the_columns_the_page_holds():
    assert f"line-length = {COLUMNS}" in CONFIG.read_text()


def test_every_notebook_is_formatted_by_ruff_at_the_page_width():
    result = subprocess.run([str(RUFF), "format", "--check", "--config", str(CONFIG), *map(str, NOTEBOOKS)],
                            capture_output=True, text=True, cwd=REPO)
    assert result.returncode == 0, ("run `make refresh` (or `.venv/bin/ruff format --config tools/ruff_notebooks.toml "
                                    f"NOTEBOOK`) and re-execute:\n{result.stdout}{result.stderr}")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_code_line_is_wider_than_the_column(path):
    cells = json.loads(path.read_text())["cells"]
    wide = [f"cell {index}: {len(line)} characters: {line.strip()[:60]}..."
            for index, cell in enumerate(cells) if cell["cell_type"] == "code"
            for line in "".join(cell["source"]).splitlines() if len(line) > COLUMNS]
    assert not wide, f"{path.name}: lines wider than {COLUMNS} columns (split the string or comment):\n" + "\n".join(wide)


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
