"""An index of the book's exercises, scanned from the chapter notebooks (the appendix "Exercises index").

Each chapter writes its exercises as sphinx-exercise directives in markdown cells:

    ```{exercise}
    :label: ch4-ex-kv-llama3-70b

    *Recompute.* LLaMA-3-70B has ...
    ```

followed, for a checked exercise, by a code cell `check("ch4.kv-per-token-llama3-70b", None)`. The kind of an
exercise is its italic prefix (*Recompute.*, *Predict.*, *Explain.*, *Explore.*) when it has one, else "recompute" when a
`check("...")` cell follows it directly, else "other". Labels follow one scheme, `chN-ex-<slug>`, and a checked
exercise's label is its check id with "-ex-" for the first dot (`label_for`).
"""

import json
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import yaml

KINDS = ("recompute", "predict", "explain", "explore")
EVERY_CHAPTER = ("recompute", "explain", "explore")  # the kinds each chapter asks; "predict" where it runs code

_OPEN = re.compile(r"^(?P<fence>`{3,}|:{3,})\{(?P<name>exercise|exercise-start)\}[^\n]*$")
_PREFIX = re.compile(r"^\s*(\*{1,2}|_)(?P<kind>Recompute|Predict|Explain|Explore)\.?(\*{1,2}|_)\.?\s*", re.IGNORECASE)
_CHECK = re.compile(r"""\bcheck\(\s*["'](?P<id>[^"']+)["']""")


@dataclass(frozen=True)
class ExerciseRow:
    """One exercise of one chapter."""

    chapter: str  # notebook file stem, e.g. "04_memory"
    chapter_title: str  # the notebook's first "# " heading
    label: str  # the directive's :label:, the target of {ref}
    kind: str  # "recompute", "predict" (change a visible cell, say what it will do, run it), "explain", "explore"
    # or "other"
    question: str  # the whole exercise text, prefix removed, on one line
    check_id: str | None = None  # the exercises.check id of the cell after it, if any


def label_for(check_id: str) -> str:
    """The label of the exercise a check id belongs to: 'ch4.kv-per-token' -> 'ch4-ex-kv-per-token'."""
    return check_id.replace(".", "-ex-", 1)


def _source(cell) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _blocks(markdown: str):
    """(label, body, ends_cell) for every exercise directive in one markdown cell, in order."""
    lines = markdown.split("\n")
    i = 0
    found = []
    while i < len(lines):
        match = _OPEN.match(lines[i].strip())
        if not match:
            i += 1
            continue
        fence, name = match.group("fence"), match.group("name")
        j = i + 1
        while j < len(lines) and not (lines[j].strip().startswith(fence[0] * 3)
                                      and set(lines[j].strip()) == {fence[0]} and len(lines[j].strip()) >= len(fence)):
            j += 1
        inner = lines[i + 1:j]
        end = j + 1
        label = next((line.split(":label:", 1)[1].strip() for line in inner if line.strip().startswith(":label:")),
                     "")
        body = [line for line in inner if not re.match(r"^\s*:[\w-]+:", line)]
        if name == "exercise-start":  # gated form: the body runs to {exercise-end}
            k = end
            while k < len(lines) and "{exercise-end}" not in lines[k]:
                k += 1
            body = lines[end:k]
            end = k + 2  # the {exercise-end} fence and its closing line
        rest = "\n".join(lines[end:]).strip()
        found.append((label, "\n".join(body).strip(), rest == ""))
        i = end
    return found


def notebook_title(cells) -> str | None:
    """The first "# " heading in a notebook's markdown cells (its chapter title), or None when it has none."""
    for cell in cells:
        if cell.get("cell_type") == "markdown":
            heading = next((line[2:].strip() for line in _source(cell).split("\n") if line.startswith("# ")), None)
            if heading:
                return heading
    return None


def scan_notebook(path) -> tuple:
    """The `ExerciseRow`s of one chapter notebook, in reading order."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"no notebook at {path}; pass the path of a chapter .ipynb")
    cells = json.loads(path.read_text(encoding="utf-8")).get("cells", [])
    title = notebook_title(cells) or path.stem
    rows = []
    for _, label, body, check_id in _directives(cells):
        prefix = _PREFIX.match(body)
        if prefix:
            kind = prefix.group("kind").lower()
            body = body[prefix.end():]
        else:
            kind = "recompute" if check_id else "other"
        rows.append(ExerciseRow(path.stem, title, label, kind, _one_line(body), check_id))
    return tuple(rows)


def _directives(cells):
    """(cell index, label, body, check id or None) for every exercise directive of a notebook's cells, in reading
    order: the check id of the `check(...)` cell that follows a directive ending its cell."""
    for index, cell in enumerate(cells):
        if cell.get("cell_type") != "markdown":
            continue
        for label, body, ends_cell in _blocks(_source(cell)):
            check_id = None
            following = cells[index + 1] if index + 1 < len(cells) else None
            if ends_cell and following is not None and following.get("cell_type") == "code":
                match = _CHECK.search(_source(following))
                check_id = match.group("id") if match else None
            yield index, label, body, check_id


def scan_chapters(folder, only=None) -> tuple:
    """The `ExerciseRow`s of every *.ipynb in `folder` (the book's chapters/), by file name; with `only` (file
    stems, e.g. from `toc_chapters(...)`), just those chapters."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ValueError(f"no chapters folder at {folder}; pass the folder holding the chapter notebooks")
    paths = sorted(folder.glob("*.ipynb"))
    if only is not None:
        only = set(only)
        paths = [path for path in paths if path.stem in only]
    return tuple(row for path in paths for row in scan_notebook(path))


def _toc_stems(toc_file, folder: str, notebooks_only: bool = False) -> tuple:
    """Stems of the `folder`/ files listed in _toc.yml, in toc order (only those that are notebooks, if asked)."""
    toc_file = Path(toc_file)
    if not toc_file.is_file():
        raise ValueError(f"no table of contents at {toc_file}; pass the path of the book's _toc.yml")
    found = []

    def walk(node):
        if isinstance(node, dict):
            name = node.get("file")
            if isinstance(name, str) and Path(name).parent.name == folder and (
                    not notebooks_only or (toc_file.parent / f"{name}.ipynb").is_file()):
                found.append(Path(name).stem)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(yaml.safe_load(toc_file.read_text(encoding="utf-8")))
    return tuple(dict.fromkeys(found))


def toc_chapters(toc_file) -> tuple:
    """Stems of the chapters/ notebooks listed in the book's _toc.yml (pass its path), in toc order.

    A chapter still being written may sit in chapters/ before it is in the table of contents; the book's index lists
    only built chapters, so that every link in it resolves."""
    return _toc_stems(toc_file, "chapters")


def toc_appendices(toc_file) -> tuple:
    """Stems of the book/ notebooks listed in _toc.yml (pass its path), in toc order: the appendices, some of which
    (the worked problems) have exercises of their own for the index to list."""
    return _toc_stems(toc_file, "book", notebooks_only=True)


def kind_counts(rows) -> dict:
    """{chapter: {kind: count}} over `rows`, every kind of KINDS present (0 when missing)."""
    counts = {}
    for row in rows:
        per = counts.setdefault(row.chapter, dict.fromkeys(KINDS, 0))
        per[row.kind] = per.get(row.kind, 0) + 1
    return counts


def exercise_cell(exercise, kind: str, fence: str = "```") -> str:
    """The markdown cell that asks a checked exercise, written from the registry (one source for its text): the
    directive with its label (`label_for`), the kind's italic prefix, and `Exercise.markdown()` (preamble, question,
    options)."""
    if kind not in KINDS:
        raise ValueError(f"kind={kind!r}: use one of {KINDS}")
    return (f"{fence}{{exercise}}\n:label: {label_for(exercise.id)}\n\n*{kind.capitalize()}.* {exercise.markdown()}\n"
            f"{fence}")


def exercise_cells(path, registry) -> tuple:
    """((cell index, source now, source written from the registry), ...) for every markdown cell of the notebook at
    `path` that is one checked exercise directive followed by its `check(...)` cell (`exercise_cell`; the fence and
    the kind are the cell's own). `make generate` writes the new sources (tools/exercise_cells.py); a test fails when
    one differs."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"no notebook at {path}; pass the path of a chapter .ipynb")
    cells = json.loads(path.read_text(encoding="utf-8")).get("cells", [])
    directives = list(_directives(cells))
    per_cell = Counter(index for index, *_ in directives)
    found = []
    for index, _, body, check_id in directives:
        source = _source(cells[index])
        opening = _OPEN.match(source.split("\n", 1)[0].strip())
        prefix = _PREFIX.match(body)
        if (per_cell[index] != 1 or not check_id or check_id not in registry or not opening
                or opening.group("name") != "exercise" or not prefix):
            continue  # the cell is not one checked exercise directive of the registry
        written = exercise_cell(registry[check_id], prefix.group("kind").lower(), opening.group("fence"))
        found.append((index, source, written))
    return tuple(found)
