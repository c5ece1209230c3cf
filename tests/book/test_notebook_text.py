"""What a reader sees as text: no control characters in any notebook's Markdown or stored output, and no reference to
files outside the repository.

A control character in a page is always a slip: a "\\alpha" in a non-raw Python string becomes BEL + "lpha" (chapter 10
once rendered a table header as "acceptance \\x07lpha"), a "\\b" a backspace, a "\\f" a form feed. Newlines and tabs
are the only ones allowed in stored outputs; prose (Markdown cells and book pages) allows no tab either, since
"\\text" in a non-raw string becomes TAB + "ext" (the glossary once showed "W_<TAB>ext{ici}"). The claims list and every source the tests read live in the repository (book/claims.md),
so nothing may point at a sibling folder such as ../shared.
"""

import json
import re
import subprocess


from tests import REPO, for_each

NOTEBOOKS = sorted(REPO.glob("chapters/*.ipynb")) + sorted(REPO.glob("book/*.ipynb"))
PAGES = sorted(REPO.glob("book/*.md"))
# C0 controls except tab and newline, DEL, and the C1 controls; in prose the tab too.
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
PROSE_CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]")


def _control_characters(text: str, pattern=CONTROL) -> list:
    """(offset, repr of the character, a little context) for every control character in `text`."""
    return [(m.start(), repr(m.group()), text[max(0, m.start() - 20):m.start() + 20]) for m in pattern.finditer(text)]


def _output_texts(output):
    """Every text a stored output shows: stream text, tracebacks, and the text-like MIME types of display data."""
    if "text" in output:
        yield "stream", "".join(output["text"])
    if "traceback" in output:
        yield "traceback", "\n".join(output["traceback"])
    for mime, data in output.get("data", {}).items():
        if mime.startswith("text/") or mime in ("application/json", "image/svg+xml"):
            yield mime, data if isinstance(data, str) else "".join(data) if isinstance(data, list) else json.dumps(data)


def test_the_detectors_find_the_bel_of_a_non_raw_alpha_and_in_prose_the_tab_of_a_non_raw_text():
    assert _control_characters("acceptance \alpha")  # "\a" is BEL: chapter 10's slip
    assert not _control_characters("acceptance $\\alpha$\n\tγ ≥ κ, 14.0 → 7.0 ms")
    assert _control_characters("$W_\text{ici}$", PROSE_CONTROL)  # "\t" is TAB: the glossary's slip
    assert not _control_characters("$W_\\text{ici}$\n", PROSE_CONTROL)


@for_each(NOTEBOOKS + PAGES, ids=lambda p: p.name)
def test_no_prose_or_stored_output_contains_a_control_character(path):
    """A notebook's Markdown cells and stored outputs, and every book page; prose allows no tab."""
    if path.suffix == ".md":
        found = _control_characters(path.read_text(), PROSE_CONTROL)
        assert not found, f"{path.name}: control characters (offset, char, context): {found}"
        return
    found = []
    for index, cell in enumerate(json.loads(path.read_text())["cells"]):
        if cell["cell_type"] == "markdown":
            found += [(index, "markdown", *hit) for hit in _control_characters("".join(cell["source"]), PROSE_CONTROL)]
        for output in cell.get("outputs", []):
            for kind, text in _output_texts(output):
                found += [(index, kind, *hit) for hit in _control_characters(text)]
    assert not found, f"{path.name}: control characters (cell, where, offset, char, context): {found}"


def test_nothing_in_the_repository_points_outside_it():
    files = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, text=True,
                           check=True).stdout.split("\0")
    outside = re.compile(r"\.\./shared|(?<![\w.-])shared/(?:claims|seeds|measurements|DESIGN)|/work/")
    found = []
    for name in filter(None, files):
        path = REPO / name
        if path.suffix not in (".py", ".md", ".ipynb", ".bib", ".yml", ".toml", ".txt", ".cfg") or path == \
                REPO / "tests" / "book" / "test_notebook_text.py" or not path.is_file():
            continue
        for match in outside.finditer(path.read_text(errors="replace")):
            found.append((name, match.group()))
    assert not found, f"references to files outside the repository: {found}"
    assert (REPO / "book" / "claims.md").is_file()  # the claims list the ledger and its test read
