"""The book as a whole: every notebook is listed, titled, stored executed, and the strict build passes offline."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(ROOT.glob("chapters/*.ipynb")) + sorted(ROOT.glob("book/*.ipynb"))


def _toc_files():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    found = [toc["root"]]

    def walk(node):
        if isinstance(node, dict):
            if "file" in node:
                found.append(node["file"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(toc)
    return {str(Path(name).with_suffix("")) for name in found}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_in_toc_titled_and_stored_executed(path):
    assert str(path.relative_to(ROOT).with_suffix("")) in _toc_files()
    cells = json.loads(path.read_text())["cells"]
    assert cells[0]["cell_type"] == "markdown" and "".join(cells[0]["source"]).startswith("# ")
    unexecuted = [i for i, cell in enumerate(cells) if cell["cell_type"] == "code" and cell["execution_count"] is None]
    assert not unexecuted, f"{path.name}: cells {unexecuted} have no stored outputs; re-execute the notebook"
    errors = [i for i, cell in enumerate(cells) if cell["cell_type"] == "code"
              for out in cell.get("outputs", []) if out.get("output_type") == "error"]
    assert not errors, f"{path.name}: cells {errors} stored an error"


def test_strict_build_renders_every_page_with_local_mathjax(tmp_path):
    """jupyter-book build -W -n --keep-going: a warning or a notebook that fails to execute fails this test."""
    jupyter_book = Path(sys.executable).with_name("jupyter-book")
    result = subprocess.run([str(jupyter_book), "build", str(ROOT), "--path-output", str(tmp_path), "-W", "-n",
                             "--keep-going"], capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    html = tmp_path / "_build" / "html"
    assert (html / "index.html").exists()
    for name in _toc_files():
        assert (html / f"{name}.html").exists(), f"{name}.html was not rendered"
    assert (html / "_static" / "mathjax" / "tex-chtml.js").exists(), "MathJax was not copied locally"
    remote = re.compile(r"<script[^>]+src=\"https?://|<link[^>]+href=\"https?://[^\"]+\.(?:css|js)\"")
    for page in html.rglob("*.html"):
        assert not remote.search(page.read_text(errors="replace")), f"{page.name} loads a script or style remotely"
