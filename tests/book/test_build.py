"""The book as a whole, as a reader meets it.

- every notebook is listed in the table of contents, titled, and stored executed;
- the strict build (warnings are errors, a failing cell fails it) renders every page, with MathJax copied locally;
- in headless Chromium with the network cut off: every page loads with no console error and no request leaving the
  machine, math is typeset, every figure loads, exercise solutions are hidden until clicked, search finds a term,
  and every internal link points at a page (and anchor) that exists.

The browser tests need Debian's Chromium (`apt-get install -y chromium`); `.ci/run` installs it. Without it they are
skipped with that message.
"""

import json
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
import yaml

from tests import REPO

ROOT = REPO
NOTEBOOKS = sorted(ROOT.glob("chapters/*.ipynb")) + sorted(ROOT.glob("book/*.ipynb"))
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-quic"]


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
    return sorted({str(Path(name).with_suffix("")) for name in found})


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_in_toc_titled_and_stored_executed(path):
    assert str(path.relative_to(ROOT).with_suffix("")) in _toc_files()
    notebook = json.loads(path.read_text())
    cells = notebook["cells"]
    assert cells[0]["cell_type"] == "markdown" and "".join(cells[0]["source"]).startswith("# ")
    unexecuted = [i for i, cell in enumerate(cells) if cell["cell_type"] == "code" and cell["execution_count"] is None]
    assert not unexecuted, f"{path.name}: cells {unexecuted} have no stored outputs; re-execute the notebook"
    errors = [i for i, cell in enumerate(cells) if cell["cell_type"] == "code"
              for out in cell.get("outputs", []) if out.get("output_type") == "error"]
    assert not errors, f"{path.name}: cells {errors} stored an error"
    # Saved widget state would make the HTML page fetch the widget JavaScript from a CDN.
    assert "widgets" not in notebook.get("metadata", {}), f"{path.name}: strip the saved widget state"


def test_strict_build_renders_every_page_with_local_scripts_only(book_html):
    """jupyter-book build -W -n --keep-going: a warning or a notebook that fails to execute fails this test. MathJax
    is copied locally, no page loads a script or style from the network, and only the pages with an explorer load
    plotly.js."""
    assert (book_html / "index.html").exists()
    for name in _toc_files():
        assert (book_html / f"{name}.html").exists(), f"{name}.html was not rendered"
    assert (book_html / "_static" / "mathjax" / "tex-chtml.js").exists(), "MathJax was not copied locally"
    remote = re.compile(r"<script[^>]+src=\"https?://|<link[^>]+href=\"https?://[^\"]+\.(?:css|js)\"")
    for page in book_html.rglob("*.html"):
        assert not remote.search(page.read_text(errors="replace")), f"{page.name} loads a script or style remotely"
    assert "plotly.min.js" not in (book_html / "chapters" / "04_memory.html").read_text(encoding="utf-8"), (
        "a page without an explorer loads plotly")


class _LinksAndIds(HTMLParser):
    def __init__(self):
        super().__init__()
        self.links, self.ids = [], set()

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("id"):
            self.ids.add(attrs["id"])
        if tag == "a" and attrs.get("href"):
            self.links.append(attrs["href"])


def _parse(page: Path) -> _LinksAndIds:
    parser = _LinksAndIds()
    parser.feed(page.read_text(errors="replace"))
    return parser


def test_internal_links_resolve(book_html):
    pages = [book_html / f"{name}.html" for name in _toc_files()] + [book_html / "genindex.html"]
    parsed = {}
    broken = []
    for page in pages:
        for href in _parse(page).links:
            parts = urlsplit(href)
            if parts.scheme or href.startswith("//") or href.startswith("mailto:"):
                continue
            target = (page.parent / unquote(parts.path)).resolve() if parts.path else page
            if not target.exists():
                broken.append(f"{page.relative_to(book_html)} -> {href}")
                continue
            if parts.fragment and target.suffix == ".html":
                ids = parsed.setdefault(target, _parse(target).ids)
                if unquote(parts.fragment) not in ids:
                    broken.append(f"{page.relative_to(book_html)} -> {href} (no such anchor)")
    assert not broken, "broken internal links:\n" + "\n".join(broken)


@pytest.fixture(scope="module")
def browser():
    if CHROMIUM is None:
        pytest.skip("Chromium is not installed: `apt-get install -y chromium` (.ci/run does this)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


def _open_offline(browser, url):
    """A fresh page whose every non-file request is blocked and recorded, with console errors recorded."""
    context = browser.new_context()
    leaks, errors = [], []
    context.route(re.compile(r"^(?!file:).*"), lambda route: (leaks.append(route.request.url), route.abort()))
    page = context.new_page()
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda exception: errors.append(str(exception)))
    page.goto(url, wait_until="load")
    return context, page, leaks, errors


def _wait_for_mathjax(page):
    """Wait until MathJax has typeset the page (Sphinx loads it only on pages that contain math)."""
    if page.locator("script[src*='mathjax']").count() == 0:
        return
    page.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise", timeout=15000)
    page.evaluate("() => MathJax.startup.promise")


def test_every_page_loads_offline_with_math_typeset_and_figures(book_html, browser):
    for name in _toc_files():
        context, page, leaks, errors = _open_offline(browser, (book_html / f"{name}.html").as_uri())
        try:
            _wait_for_mathjax(page)
            assert not leaks, f"{name}: requests left the machine: {leaks}"
            assert not errors, f"{name}: console errors: {errors}"
            text = page.inner_text("article")
            assert "$$" not in text and "\\(" not in text and "\\[" not in text, f"{name}: raw TeX left on the page"
            raw_math = page.locator(".math:not(:has(mjx-container))").count()
            assert raw_math == 0, f"{name}: {raw_math} math elements were not typeset"
            images = page.evaluate("() => Array.from(document.images).map(i => [i.src, i.complete && "
                                   "i.naturalWidth > 0, i.alt])")
            broken = [src for src, ok, _ in images if not ok]
            assert not broken, f"{name}: images failed to load: {broken}"
            if name.startswith("chapters/"):
                assert page.locator("mjx-container").count() > 0, f"{name}: no typeset math"
        finally:
            context.close()


def test_exercise_solutions_are_hidden_until_clicked(book_html, browser):
    chapters = [name for name in _toc_files() if name.startswith("chapters/")]
    assert chapters
    for name in chapters:
        context, page, _, _ = _open_offline(browser, (book_html / f"{name}.html").as_uri())
        try:
            solutions = page.locator("div.solution")
            assert solutions.count() >= 4, f"{name}: expected at least four exercise solutions"
            first = solutions.first
            body = first.locator(":scope > :not(.admonition-title)").first
            assert not body.is_visible(), f"{name}: the first solution is visible before any click"
            first.locator(":scope > .admonition-title").click()
            body.wait_for(state="visible", timeout=5000)
        finally:
            context.close()


def test_search_page_finds_a_term(book_html, browser):
    context, page, leaks, _ = _open_offline(browser, (book_html / "search.html").as_uri() + "?q=roofline")
    try:
        page.wait_for_function("() => /found [1-9]\\d* page/.test(document.body.innerText)", timeout=15000)
        assert page.locator("#search-results li").count() >= 1
        assert not leaks
    finally:
        context.close()


EXPLORER_PAGES = {"chapters/01_rooflines": "roofline-explorer", "chapters/05_step_time": "step-time-explorer",
                  "chapters/09_serving": "serving-explorer"}


def _traces(page, div_id):
    return page.evaluate(f"() => document.getElementById('{div_id}').data.map(t => [t.x, t.y, t.visible])")


def test_live_explorers_respond_to_their_controls_offline(book_html, browser):
    """Each explorer draws with the book's own plotly.js, and moving its slider or choosing from its dropdown changes
    the plotted data, with no request leaving the page."""
    assert (book_html / "_static" / "explorers" / "plotly.min.js").is_file()
    for name, div_id in EXPLORER_PAGES.items():
        context, page, leaks, errors = _open_offline(browser, (book_html / f"{name}.html").as_uri())
        try:
            page.wait_for_function(f"() => document.getElementById('{div_id}') && "
                                   f"document.getElementById('{div_id}').data", timeout=20000)
            assert page.locator("script[src*='explorers/plotly.min.js']").count() == 1
            before = _traces(page, div_id)
            rail = page.locator(f"#{div_id} .slider-rail-touch-rect").first
            box = rail.bounding_box()
            rail.click(position={"x": 0.03 * box["width"], "y": box["height"] / 2})  # the slider's first step
            page.wait_for_timeout(300)
            after_slider = _traces(page, div_id)
            assert after_slider != before, f"{name}: moving the slider did not change the plot"
            page.locator(f"#{div_id} .updatemenu-header-group").first.click()
            page.locator(f"#{div_id} .updatemenu-dropdown-button").last.click()  # never the active entry
            page.wait_for_timeout(300)
            after_dropdown = _traces(page, div_id)
            assert [t[2] for t in after_dropdown] != [t[2] for t in after_slider], \
                f"{name}: the dropdown did not change which traces are shown"
            assert not leaks, f"{name}: requests left the machine: {leaks}"
            assert not errors, f"{name}: console errors: {errors}"
        finally:
            context.close()
