"""Re-execute notebooks in place so their stored outputs are the ones today's code produces.

    .venv/bin/python tools/refresh_notebooks.py chapters/05_step_time.ipynb [more.ipynb ...]

First formats the notebook's code with ruff at the page's 88 columns (tools/ruff_notebooks.toml), then runs every
cell, including the interactive-explorer cells tagged `skip-execution` (the book build skips those, so
the HTML page never needs the widget JavaScript from a CDN), then removes the saved widget state and the explorer
cells' outputs, and joins consecutive stream outputs (a loaded machine splits a print's text from its newline): what
remains in the file is deterministic and is what nbval compares.
"""

import subprocess
import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

RUFF = Path(sys.executable).with_name("ruff")
RUFF_CONFIG = Path(__file__).with_name("ruff_notebooks.toml")


def format_code(*paths: Path) -> None:
    """Format the notebooks' code cells in place with ruff at the width of the page's column."""
    subprocess.run([str(RUFF), "format", "--quiet", "--config", str(RUFF_CONFIG), *map(str, paths)], check=True)


def coalesce_streams(outputs: list) -> list:
    """Consecutive stream outputs of one stream joined into one: the kernel sends a print's text and its newline as
    it flushes them, and on a loaded machine they arrive as separate outputs, which would churn the stored file."""
    joined = []
    for output in outputs:
        if joined and output.get("output_type") == "stream" and joined[-1].get("output_type") == "stream" \
                and joined[-1].get("name") == output.get("name"):
            joined[-1]["text"] = "".join(joined[-1]["text"]) + "".join(output["text"])
            continue
        joined.append(output)
    return joined


def refresh(path: Path) -> None:
    format_code(path)
    notebook = nbformat.read(path, as_version=4)
    NotebookClient(notebook, timeout=300, kernel_name="python3", skip_cells_with_tag="never-skip",
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    notebook.metadata.pop("widgets", None)
    for cell in notebook.cells:
        cell.metadata.pop("execution", None)  # timestamps: noise in every diff
        if cell.cell_type == "code":
            cell.outputs = coalesce_streams(cell.outputs)
    for cell in notebook.cells:
        if cell.cell_type == "code" and "skip-execution" in cell.metadata.get("tags", []):
            cell.outputs = []
    nbformat.write(notebook, path)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for name in sys.argv[1:]:
        refresh(Path(name))
        print(f"refreshed {name}")
