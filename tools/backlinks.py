"""Write the "Used in chapter N, *Title*." paragraph into the docstring of every library function the book uses.

    .venv/bin/python tools/backlinks.py          # rewrite the paragraphs (idempotent)
    .venv/bin/python tools/backlinks.py --check  # list what is out of date, exit 1 if anything is

The paragraph is the docstring's last one and is generated from the notebooks (scaling_lib.book.backlinks); edit the
rest of the docstring by hand, never this paragraph. tests/book/test_backlinks.py fails when it is out of date.
"""

import ast
import inspect
import re
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from scaling_lib.book.backlinks import (MARKER, documented_sentence, library_objects, notebooks, sentence,  # noqa: E402
                                       usage)

WIDTH = 120
_OLD = re.compile(r"\n[ \t]*\n[ \t]*" + re.escape(MARKER) + r"(chapter|the appendix|every).*\Z", re.DOTALL)


def _node(tree: ast.Module, name: str):
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == name:
            return node
    raise SystemExit(f"{name} is not defined at the top level of its module")


def _rewrite(lines: list[str], node, text: str | None) -> None:
    """Put `text` as the last paragraph of `node`'s docstring in `lines` (in place); None removes the paragraph."""
    first = node.body[0]
    indent = " " * (node.col_offset + 4)
    paragraph = textwrap.fill(text or "", WIDTH, initial_indent=indent, subsequent_indent=indent)
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
    new = f"{body}\n\n{paragraph}\n{indent}{quote}\n" if text else f"{body}{quote}\n"
    lines[start:end] = [new]


def main(check: bool) -> int:
    users = usage(REPO)
    every = len(notebooks(REPO))
    stale = {value: sentence(found, every) for value, found in users.items()
             if documented_sentence(value) != sentence(found, every)}
    stale.update({value: None for value in library_objects() if value not in users and documented_sentence(value)})
    if check:
        for value, text in sorted(stale.items(), key=lambda item: (item[0].__module__, item[0].__qualname__)):
            print(f"{value.__module__}.{value.__qualname__}: {text or 'no longer used: drop the paragraph'}")
        return 1 if stale else 0
    by_file = {}
    for value, text in stale.items():
        by_file.setdefault(inspect.getsourcefile(value), []).append((value.__qualname__, text))
    for file, items in by_file.items():
        source = Path(file).read_text()
        tree = ast.parse(source)
        lines = source.splitlines(keepends=True)
        nodes = sorted(((_node(tree, name), text) for name, text in items), key=lambda item: -item[0].lineno)
        for node, text in nodes:  # bottom-up, so line numbers above stay valid
            _rewrite(lines, node, text)
        Path(file).write_text("".join(lines))
        print(f"{Path(file).relative_to(REPO)}: {len(items)} docstring(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main("--check" in sys.argv[1:]))
