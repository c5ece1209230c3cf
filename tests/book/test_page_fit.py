"""The rendered page fits its reader: every chapter and appendix of the built book, opened in headless
Chromium offline at a laptop's 1280 x 900 and a phone's 390 x 844, measured against the article's text column.

At 1280 x 900 no visible code block, cell output, table or display equation is wider than the column (a block that
scrolls inside itself still counts: the reader meets a scrollbar), and no chapter or appendix holds a table of more
than 25 rows outside a fold (a <details> or a dropdown/toggle container), the notation page's symbol table excepted
(LONG_TABLE_PAGES says why). At 390 x 844 no page scrolls sideways as a
whole: wide blocks scroll inside themselves.

The test measures the run's one strict build of the book (`book_html` in tests/book/conftest.py: `make book`'s build
from the notebooks' stored outputs, which nbval checks in the same run; made once per test run and shared with the
other browser tests). Each failure lists the page, the element's kind and position, its width against the
column in CSS pixels and a snippet, which is the to-do list the check exists for. It also writes, as build artefacts
that git ignores, a screenshot of each page at 1280 x 900 into `_build/screenshots/` and the full measurement (both
widths) into `_build/screenshots/page_fit.json`.

Code fits because ruff formats the notebooks' code at 88 columns (tools/ruff_notebooks.toml, run by `make refresh`),
and printed outputs fit because the notebooks wrap long printed lines with scaling_lib.book.text.wrap_text or print a
table: tests/book/test_notebook_format.py checks both in the .ipynb files, without a browser. The column itself holds 88 characters of code: see
test_the_column_reads_like_a_book.
"""

import json
from pathlib import Path

import pytest
import yaml

from tests import REPO
from tests.book.test_build import _open_offline, _toc_files, _wait_for_mathjax, browser  # noqa: F401 (fixture)

pytestmark = [pytest.mark.tiny, pytest.mark.browser]

SHOTS = REPO / "_build" / "screenshots"
WIDE, PHONE = {"width": 1280, "height": 900}, {"width": 390, "height": 844}
LONG_TABLE_ROWS = 25
SLACK_PX = 1  # sub-pixel rounding

# Run in the page: the article's text column and every block that could be wider than it. An element's width is the
# larger of its box and its scrolling content, so a block that scrolls inside itself is measured by what it holds.
_MEASURE = r"""
() => {
  const article = document.querySelector('article.bd-article') || document.querySelector('main');
  const style = getComputedStyle(article);
  const column = article.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
  const shown = el => el.getClientRects().length > 0 && el.getBoundingClientRect().width > 0 &&
    (!el.checkVisibility || el.checkVisibility({contentVisibilityAuto: true}));  // not inside a closed fold
  const width = el => Math.max(el.getBoundingClientRect().width, el.scrollWidth);
  const longest = text => text.split('\n').reduce((a, b) => (b.length > a.length ? b : a), '').trim();
  const clip = (text, n) => (text.length > n ? text.slice(0, n) + '...' : text);
  const heading = el => {
    let node = el.closest('section');
    return node ? node.id : '';
  };
  const cells = Array.from(article.querySelectorAll('div.cell'));
  const where = el => {
    const cell = el.closest('div.cell');
    return {section: heading(el), cell: cell ? cells.indexOf(cell) : null};
  };
  const found = [];
  const add = (kind, el, snippet) => {
    if (!shown(el)) return;
    const w = width(el);
    if (w > column + %SLACK%) found.push({kind, width: Math.round(w), column: Math.round(column),
                                        snippet: clip(snippet, 110), ...where(el)});
  };
  for (const pre of article.querySelectorAll('pre')) {
    const kind = pre.closest('.cell_output, .output') ? 'output' : 'code';
    add(kind, pre, longest(pre.textContent));
  }
  // Outputs that are not preformatted text (HTML, images, explorers), tables excepted: measured as tables below.
  for (const out of article.querySelectorAll('.cell_output > .output:not(:has(pre)):not(:has(table))')) {
    add('output', out, out.textContent.trim().split('\n')[0]);
  }
  for (const table of article.querySelectorAll('table')) {
    const head = table.querySelector('tr');
    add('table', table, head ? head.innerText.replace(/\s+/g, ' ') : '');
  }
  const items = (window.MathJax && MathJax.startup && MathJax.startup.document)
    ? Array.from(MathJax.startup.document.math) : [];
  for (const item of items) {
    if (!item.display || !item.typesetRoot) continue;
    const root = item.typesetRoot;
    const inner = root.querySelector('mjx-math') || root;
    const w = Math.max(width(root), inner.getBoundingClientRect().width);
    if (shown(root) && w > column + %SLACK%)
      found.push({kind: 'math', width: Math.round(w), column: Math.round(column),
                  snippet: clip(item.math.replace(/\s+/g, ' ').trim(), 110), ...where(root)});
  }
  const folded = el => el.closest('details, .toggle, .toggle-details, .dropdown, .sd-dropdown, .toggle-hidden');
  const long = [];
  for (const table of article.querySelectorAll('table')) {
    const rows = table.querySelectorAll('tbody tr').length || table.querySelectorAll('tr').length - 1;
    if (rows > %ROWS% && !folded(table)) {
      const head = table.querySelector('tr');
      long.push({kind: 'long table', rows, snippet: clip(head ? head.innerText.replace(/\s+/g, ' ') : '', 110),
                 ...where(table)});
    }
  }
  // Prose measure: characters of body text and of monospace per line of the column.
  const canvas = document.createElement('canvas').getContext('2d');
  const perLine = el => {
    const s = getComputedStyle(el);
    canvas.font = `${s.fontWeight} ${s.fontSize} ${s.fontFamily}`;
    const text = el.textContent.replace(/\s+/g, ' ').trim();
    return text.length ? column / (canvas.measureText(text).width / text.length) : null;
  };
  const paragraphs = Array.from(article.querySelectorAll('section > p')).filter(p => p.textContent.length > 200);
  const prose = paragraphs.map(perLine).filter(x => x).sort((a, b) => a - b);
  const pre = article.querySelector('div.cell_input pre') || article.querySelector('pre');
  return {
    column: Math.round(column),
    prose_chars_per_line: prose.length ? Math.round(prose[Math.floor(prose.length / 2)]) : null,
    // characters of code a code cell shows without scrolling when its block is as wide as the column
    mono_chars_per_line: pre ? (() => {
      const s = getComputedStyle(pre); canvas.font = `${s.fontSize} ${s.fontFamily}`;
      const inside = column - (pre.closest('.highlight') || pre).offsetWidth + pre.clientWidth
        - parseFloat(s.paddingLeft) - parseFloat(s.paddingRight);
      return Math.floor(inside / (canvas.measureText('0'.repeat(100)).width / 100)); })() : null,
    page_width: document.scrollingElement.scrollWidth,
    viewport: window.innerWidth,
    wide: found.map(({el, ...rest}) => rest),
    long_tables: long,
  };
}
""".replace("%SLACK%", str(SLACK_PX)).replace("%ROWS%", str(LONG_TABLE_ROWS))


def _pages():
    """Every page of the table of contents (chapters, appendices and the front matter)."""
    return _toc_files()


def _chapters_and_appendices():
    """The pages of the "Chapters" and "Appendices" parts of the table of contents."""
    toc = yaml.safe_load((REPO / "_toc.yml").read_text())
    return {str(Path(chapter["file"]).with_suffix("")) for part in toc["parts"]
            if part.get("caption") in ("Chapters", "Appendices") for chapter in part["chapters"]}


# Pages that may show one long table unfolded, and why. The notation page is the book's symbol table (one paragraph,
# then the table): a reader opens it to look a symbol up (the chapters link to it), not to read through it, so folding
# the table would put the page's content behind a click and shorten nothing a reader reads. Every other page, front
# matter included, keeps the 25-row rule.
LONG_TABLE_PAGES = {"book/notation": 1}


@pytest.fixture(scope="module")
def measured(browser, book_html):  # noqa: F811 (the fixture imported above)
    """{viewport: {page: measurement}} for both viewports; screenshots at 1280 as a side effect."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    result = {}
    for label, viewport in (("1280", WIDE), ("390", PHONE)):
        result[label] = {}
        for name in _pages():
            context, page, _, _ = _open_offline(browser, (book_html / f"{name}.html").as_uri())
            try:
                page.set_viewport_size(viewport)
                _wait_for_mathjax(page)
                page.wait_for_timeout(100)
                result[label][name] = page.evaluate(_MEASURE)
                if label == "1280":
                    page.screenshot(path=str(SHOTS / f"{name.replace('/', '__')}.jpg"), full_page=True,
                                    type="jpeg", quality=60)
            finally:
                context.close()
    (SHOTS / "page_fit.json").write_text(json.dumps(result, indent=1))
    return result


def _listing(problems):
    return "\n".join(f"{page}: {p['kind']} {p['width']} px > column {p['column']} px "
                     f"(section #{p['section']}, cell {p['cell']}): {p['snippet']}" for page, p in problems)


def _wide(measured, kinds, label="1280"):
    return [(page, p) for page, m in measured[label].items() for p in m["wide"] if p["kind"] in kinds]


def test_no_page_scrolls_sideways_on_a_phone(measured):
    pages = {page: (m["page_width"], m["viewport"]) for page, m in measured["390"].items()
             if m["page_width"] > m["viewport"]}
    assert not pages, "pages wider than a 390 px phone (page width, viewport): " + repr(pages)


@pytest.mark.parametrize("kind, what", [("table", "tables"), ("math", "display equations"), ("output", "outputs"),
                                        ("code", "code blocks")])
def test_blocks_of_each_kind_fit_the_column(measured, kind, what):
    problems = _wide(measured, {kind})
    assert not problems, f"{len(problems)} {what} wider than the column at 1280 px:\n" + _listing(problems)


def test_no_table_over_25_rows_outside_a_fold(measured):
    assert len(_chapters_and_appendices()) >= 14 and set(LONG_TABLE_PAGES) <= set(measured["1280"])
    problems = [(page, t) for page, m in measured["1280"].items()
                for t in m["long_tables"][LONG_TABLE_PAGES.get(page, 0):]]
    assert not problems, "tables of more than 25 rows in the text:\n" + "\n".join(
        f"{page}: {t['rows']} rows (section #{t['section']}, cell {t['cell']}): {t['snippet']}" for page, t in problems)
    for page, allowed in LONG_TABLE_PAGES.items():  # the exemption is used, or it goes
        assert len(measured["1280"][page]["long_tables"]) == allowed, (page, measured["1280"][page]["long_tables"])


def test_the_column_reads_like_a_book(measured):
    """At 1280 px a line of prose holds 80 to 100 characters, and a code cell as wide as the column shows at least 88
    characters of code (ruff's line length for the notebooks) inside its padding."""
    prose = {page: m["prose_chars_per_line"] for page, m in measured["1280"].items() if m["prose_chars_per_line"]}
    mono = {page: m["mono_chars_per_line"] for page, m in measured["1280"].items() if m["mono_chars_per_line"]}
    assert prose and all(80 <= n <= 100 for n in prose.values()), prose
    assert all(n >= 88 for n in mono.values()), mono
