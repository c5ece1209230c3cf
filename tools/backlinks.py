"""Write the one-line back-link "Defined in chapter N, *Title*." into the docstring of every library function a
chapter derives, and generate the library index (book/library_index.md), every public function -> its notebooks.

    .venv/bin/python tools/backlinks.py          # rewrite the lines and the index page (idempotent)
    .venv/bin/python tools/backlinks.py --check  # list what is out of date, exit 1 if anything is

Which notebook derives a function, and which functions are shared helpers with no back-link, is decided in
scaling_lib.book.backlinks (its docstring states the rule). The back-link is the docstring's last paragraph, one line
of at most 120 characters; edit the rest of the docstring by hand, never this line. The "Used in ..." paragraphs the
tool wrote before are replaced. tests/book/test_backlinks.py runs --check.
"""

import ast
import inspect
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from scaling_lib.book.backlinks import (INDEX_PAGE, LEGACY_MARKER, MARKER, documented_sentence, homes,  # noqa: E402
                                       index_page, library_objects, sentence)

WIDTH = 120
_OLD = re.compile(r"\n[ \t]*\n[ \t]*(" + re.escape(MARKER) + "|" + re.escape(LEGACY_MARKER)
                  + r")(chapter|the appendix|every).*\Z", re.DOTALL)


def _node(tree: ast.Module, name: str):
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == name:
            return node
    raise SystemExit(f"{name} is not defined at the top level of its module")


def _rewrite(lines: list[str], node, text: str | None) -> None:
    """Put `text` as the last paragraph of `node`'s docstring in `lines` (in place); None removes the paragraph."""
    first = node.body[0]
    indent = " " * (node.col_offset + 4)
    if text and len(indent + text) > WIDTH:
        raise SystemExit(f"{node.name}: the back-link {text!r} is longer than {WIDTH} characters; shorten the title")
    has_doc = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value,
                                                                                                   str)
    if not has_doc:
        raise SystemExit(f"{node.name} (line {node.lineno}) has no docstring: write one first")
    start, end = first.lineno - 1, first.end_lineno  # lines[start:end] hold the literal
    literal = "".join(lines[start:end])
    head, quote = literal.rstrip("\n"), None
    for candidate in ('"""', "'''"):
        if head.endswith(candidate):
            quote = candidate
    if quote is None:
        raise SystemExit(f"{node.name}: docstring does not end with triple quotes")
    body = head[: -len(quote)].rstrip()
    body = _OLD.sub("", body).rstrip()
    new = f"{body}\n\n{indent}{text}\n{indent}{quote}\n" if text else f"{body}{quote}\n"
    lines[start:end] = [new]


def stale_docstrings() -> dict:
    """{function or class: the back-link it should end with, or None for none} for every docstring that differs."""
    derived = homes(REPO)
    stale = {}
    for value in library_objects():
        expected = sentence(derived[value]) if value in derived else None
        if documented_sentence(value) != expected:
            stale[value] = expected
    return stale


def main(check: bool) -> int:
    stale = stale_docstrings()
    page = REPO / INDEX_PAGE
    index = index_page(REPO)
    index_stale = not page.exists() or page.read_text() != index
    if check:
        for value, text in sorted(stale.items(), key=lambda item: (item[0].__module__, item[0].__qualname__)):
            print(f"{value.__module__}.{value.__qualname__}: {text or 'no back-link: drop the paragraph'}")
        if index_stale:
            print(f"{INDEX_PAGE}: out of date")
        return 1 if stale or index_stale else 0
    by_file = {}
    for value, text in stale.items():
        by_file.setdefault(inspect.getsourcefile(inspect.unwrap(value)), []).append((value.__qualname__, text))
    for file, items in by_file.items():
        source = Path(file).read_text()
        tree = ast.parse(source)
        lines = source.splitlines(keepends=True)
        nodes = sorted(((_node(tree, name), text) for name, text in items), key=lambda item: -item[0].lineno)
        for node, text in nodes:  # bottom-up, so line numbers above stay valid
            _rewrite(lines, node, text)
        Path(file).write_text("".join(lines))
        print(f"{Path(file).relative_to(REPO)}: {len(items)} docstring(s)")
    if index_stale:
        page.write_text(index)
        print(f"{INDEX_PAGE}: written")
    return 0


if __name__ == "__main__":
    sys.exit(main("--check" in sys.argv[1:]))
