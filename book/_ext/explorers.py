"""A tiny Sphinx extension: serve plotly.js from the built book itself, on the pages that have a live explorer.

The explorers (scaling_lib.book.explorers) are notebook outputs: a <div class="book-explorer"> and a script calling
`Plotly.newPlot`. This extension copies plotly.min.js from the installed `plotly` package (pinned in
requirements.txt) into _build/html/_static/explorers/ and adds it, in the page head, only to pages whose body holds
an explorer, so every other page stays as light as before and no page fetches anything from a CDN.
"""

import shutil
from pathlib import Path

import plotly

PLOTLY_JS = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
TARGET = "explorers/plotly.min.js"


def _add_plotly_where_needed(app, pagename, templatename, context, doctree):
    if 'class="book-explorer"' in context.get("body", ""):
        app.add_js_file(TARGET)


def _copy_plotly(app, exception):
    if exception is None and app.builder.format == "html":
        target = Path(app.outdir) / "_static" / TARGET
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.exists() or target.stat().st_size != PLOTLY_JS.stat().st_size:
            shutil.copyfile(PLOTLY_JS, target)


def setup(app):
    app.connect("html-page-context", _add_plotly_where_needed)
    app.connect("build-finished", _copy_plotly)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
