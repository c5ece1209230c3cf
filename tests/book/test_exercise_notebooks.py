"""The chapters' exercises as a reader meets them: every registered exercise is asked once, in its own chapter, with
the registry's question and a label derived from its id; no answer is printed earlier in its chapter; and a notebook
opened in JupyterLab shows no solution or quiz answer until the reader unfolds it (cell metadata)."""

import json
import math
import re


from scaling_lib.book.exercises import Choice, Number, exercises
from scaling_lib.book.exercises.index import exercise_cells, label_for, scan_chapters, scan_notebook, toc_appendices
from scaling_lib.units import parse_unit
from tests import REPO, for_each

CHAPTERS = sorted((REPO / "chapters").glob("*.ipynb"))
ROWS = scan_chapters(REPO / "chapters")
REGISTRY = exercises()
BOOK_IDS = sorted(eid for eid in REGISTRY if re.match(r"^ch\d+\.", eid))


def _source(cell) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


def _cells(path):
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def _chapter_number(stem: str) -> int:
    return int(stem.split("_")[0])


def _output_text(cell) -> str:
    """Every text an output of a code cell shows or glues into the prose (images left out)."""
    texts = []
    for output in cell.get("outputs", []):
        if "text" in output:
            texts.append("".join(output["text"]) if isinstance(output["text"], list) else output["text"])
        for mime, data in output.get("data", {}).items():
            if mime.startswith("image/"):
                continue
            texts.append("".join(data) if isinstance(data, list) else str(data))
    return "\n".join(texts)


# --- every exercise asked once, in its chapter, under one id and label scheme -----------------------------------------

def test_every_registered_exercise_is_asked_once_in_its_own_chapter_under_a_label_from_its_id():
    asked = [row.check_id for row in ROWS if row.check_id]
    assert sorted(asked) == BOOK_IDS, (set(BOOK_IDS) ^ set(asked))
    for eid in BOOK_IDS:
        assert re.fullmatch(r"ch([1-9]\d*)\.[a-z0-9]+(-[a-z0-9]+)*", eid), eid
    for row in ROWS:
        number = _chapter_number(row.chapter)
        assert re.fullmatch(rf"ch{number}-ex-[a-z0-9]+(-[a-z0-9]+)*", row.label), row.label
        if row.check_id:
            assert number == int(re.match(r"^ch(\d+)\.", row.check_id).group(1)), row
            assert row.label == label_for(row.check_id), (row.label, row.check_id)
    # the appendices' exercises (the worked problems) follow the same rule: the answer box finds them by it
    appendix_rows = [row for stem in toc_appendices(REPO / "_toc.yml") for row in scan_notebook(REPO / "book" /
                                                                                                 f"{stem}.ipynb")]
    assert sum(bool(row.check_id) for row in appendix_rows) >= 12
    for row in appendix_rows:
        assert re.fullmatch(r"[a-z]+-ex-[a-z0-9]+(-[a-z0-9]+)*", row.label), row.label
        if row.check_id:
            assert row.label == label_for(row.check_id), (row.label, row.check_id)


def test_every_checked_exercise_is_asked_in_the_words_the_registry_writes():
    """The registry is the one source of an exercise's text: each checked exercise's cell is the one
    `exercises.index.exercise_cell` writes from it (`make generate` rewrites them), and every exercise has one."""
    paths = sorted((REPO / "chapters").glob("*.ipynb")) + [REPO / "book" / "worked_problems.ipynb"]
    cells = [(path.name, index, source, written) for path in paths
             for index, source, written in exercise_cells(path, REGISTRY)]
    stale = [(name, index) for name, index, source, written in cells if source != written]
    assert not stale, f"exercise cells not written from the registry (run make generate): {stale}"
    asked = {row.check_id for row in ROWS + scan_notebook(paths[-1]) if row.check_id}
    assert len(cells) == len(asked) == len(REGISTRY), (len(cells), len(asked), len(REGISTRY))


def test_no_question_is_asked_twice_in_the_book():
    questions = [" ".join(ex.question.split()).lower() for ex in REGISTRY.values()]
    assert len(questions) == len(set(questions))
    answers = []
    for eid in BOOK_IDS:
        for part in REGISTRY[eid].parts:
            if isinstance(part, Number):
                answers.append((parse_unit(part.unit)[1], part.expected(), eid))
    for i, (kind, value, eid) in enumerate(answers):
        for other_kind, other, other_id in answers[i + 1:]:
            if kind == other_kind and eid != other_id and not (value == other and float(value).is_integer()
                                                                and value < 1000):
                assert not math.isclose(value, other, rel_tol=1e-3), (eid, other_id, value)


# --- compute, do not copy ---------------------------------------------------------------------------------------------

def _forms(value: float, integer: bool = False) -> set:
    """The answer as a chapter could print it: in its unit to three or more significant figures, or in the unit a
    thousand times larger or smaller to four or more (fewer figures there match unrelated numbers by chance). A count
    is printed as a whole number."""
    forms = set()
    specs = (",.0f", ".0f") if integer else (".3g", ".4g", ",.0f", ".0f", ".1f", ",.1f", ".2f", ".3f", ".4f")
    for scaled, figures in ((value, 3), (value * 1e3, 4), (value / 1e3, 4)):
        for spec in specs:
            text = format(scaled, spec)
            if "e" not in text and len(re.sub(r"\D", "", text).lstrip("0")) >= figures:
                forms.add(text)
    return forms


def _measured(cell) -> bool:
    """A cell whose outputs nbval ignores: timings of this machine, different at every run, so a match with an
    answer there is chance, not a printed answer (chapter 1's CPU experiment)."""
    return _source(cell).lstrip().startswith("# NBVAL_IGNORE_OUTPUT")


_GLUE = re.compile(r"\{glue(?::text)?\}`(?P<name>[A-Za-z_][\w]*)(?::(?P<spec>[^`]*))?`")


def _glued(cells) -> dict:
    """{name: value} of every number a notebook glues into its prose (myst-nb's glue, stored as text)."""
    values = {}
    for cell in cells:
        for output in cell.get("outputs", []):
            name = output.get("metadata", {}).get("scrapbook", {}).get("name")
            text = output.get("data", {}).get("application/papermill.record/text/plain")
            if name and text is not None:
                values[name] = "".join(text) if isinstance(text, list) else text
    return values


def _prose_as_rendered(cell, glued: dict) -> str:
    """A markdown cell with each {glue:text}`name:spec` replaced by the number the reader sees."""
    def render(match):
        raw = glued.get(match.group("name"), "")
        try:
            return format(float(raw), match.group("spec") or "")
        except ValueError:
            return raw.strip("'\"")
    return _GLUE.sub(render, _source(cell))


def _leaks(cells) -> list:
    """(id, part, text) for every answer shown before the exercise's check cell: in an output (timings aside) or in
    the prose, with the numbers it glues in rendered as a reader sees them (summaries and notes included)."""
    leaks = []
    glued = _glued(cells)
    for index, cell in enumerate(cells):
        match = re.match(r'\s*check\("([^"]+)",\s*(None|\{)', _source(cell)) if cell["cell_type"] == "code" else None
        if not match:
            continue
        before = "\n".join(_output_text(c) if c["cell_type"] == "code" else _prose_as_rendered(c, glued)
                           for c in cells[:index] if c["cell_type"] == "markdown" and _GLUE.search(_source(c))
                           or c["cell_type"] == "code" and not _measured(c))
        for part in REGISTRY[match.group(1)].parts:
            if not isinstance(part, Number):
                continue
            for value in [part.expected()] + [other.value() for other in part.also]:
                for form in _forms(value / parse_unit(part.unit)[0], part.integer):
                    if re.search(rf"(?<![\d.,]){re.escape(form)}(?![\d])", before):
                        leaks.append((match.group(1), part.name, form))
    return leaks


@for_each(CHAPTERS + [REPO / "book" / "worked_problems.ipynb"], ids=lambda p: p.stem)
def test_no_answer_appears_before_its_exercise(path):
    assert not _leaks(_cells(path))


def test_the_leak_scan_finds_an_answer_printed_or_glued_into_the_prose_before_its_exercise():
    kv = REGISTRY["ch14.sequence-sharded-kv-palm-62b"].answer.expected()
    for printed in (f"cache {kv / 1e9:.3f} GB", f"{kv / 1e6:,.1f} MB", f"{kv / 1e9:.3g}"):
        cells = [{"cell_type": "code", "source": "x", "outputs": [{"output_type": "stream", "text": printed}]},
                 {"cell_type": "code", "source": 'check("ch14.sequence-sharded-kv-palm-62b", None)', "outputs": []}]
        assert _leaks(cells), printed
        assert not _leaks(cells[::-1]), "an answer printed after its exercise (the solution) is fine"
    glue = {"output_type": "display_data", "data": {"application/papermill.record/text/plain": repr(kv / 1e9)},
            "metadata": {"scrapbook": {"name": "kv_gb"}}}
    cells = [{"cell_type": "code", "source": "glue(...)", "outputs": [glue]},
             {"cell_type": "markdown", "source": "The cache is {glue:text}`kv_gb:.3f` GB."},
             {"cell_type": "code", "source": 'check("ch14.sequence-sharded-kv-palm-62b", None)', "outputs": []}]
    assert _leaks(cells)


# --- solutions folded in JupyterLab -----------------------------------------------------------------------------------

_ANSWER = re.compile(r"^(`{3,}|:{3,})\{admonition\}\s*Answer\s*$", re.MULTILINE)


def _hidden(cell, outputs: bool) -> bool:
    jupyter = cell.get("metadata", {}).get("jupyter", {})
    return jupyter.get("source_hidden") is True and (not outputs or jupyter.get("outputs_hidden") is True)


@for_each(CHAPTERS, ids=lambda p: p.stem)
def test_jupyterlab_shows_no_solution_or_quiz_answer_until_unfolded(path):
    cells = _cells(path)
    in_solution, solutions, answers = False, 0, 0
    for index, cell in enumerate(cells):
        text = _source(cell)
        if cell["cell_type"] == "markdown":
            starts = "{solution-start}" in text
            has_solution = starts or "{solution}" in text or "{solution-end}" in text
            if "{exercise}" in text:
                assert not has_solution and not _ANSWER.search(text), f"cell {index} shows an exercise with its answer"
            if has_solution or in_solution or _ANSWER.search(text):
                assert _hidden(cell, outputs=False), f"{path.name} cell {index} shows a solution: {text[:80]!r}"
                solutions += has_solution
                answers += bool(_ANSWER.search(text))
            if _ANSWER.search(text):
                assert text.lstrip().startswith(tuple("`:")) and len(_ANSWER.findall(text)) == 1, \
                    f"cell {index}: a quiz answer shares its cell with other text"
            in_solution = (in_solution or starts) and "{solution-end}" not in text
        elif in_solution:
            assert _hidden(cell, outputs=True), f"{path.name} cell {index}: solution code or output is visible"
        elif index and _ANSWER.search(_source(cells[index - 1])) and "hide-cell" in cell["metadata"].get("tags", []):
            assert _hidden(cell, outputs=True), f"{path.name} cell {index}: a quiz's answer cell is visible"
    assert solutions >= 4 and not in_solution


# --- choices that test reasoning, not memory --------------------------------------------------------------------------

def _words(text: str) -> list:
    return re.sub(r"[^a-z0-9 ]", " ", text.lower()).split()


def test_a_right_option_is_recognisable_neither_by_its_wording_nor_by_its_letter():
    """A right option that repeats its chapter's prose tests memory, not reasoning: no right option shares a run of
    six words with its chapter's prose (exercises and solutions aside). And the right letters are spread over a, b, c
    and d, each at least three times among the four-option questions."""
    prose = {}
    for path in CHAPTERS:
        texts = [_source(c) for c in _cells(path) if c["cell_type"] == "markdown"
                 and "{exercise}" not in _source(c) and "{solution" not in _source(c)]
        prose[_chapter_number(path.stem)] = " ".join(_words(" ".join(texts)))
    for eid in BOOK_IDS:
        text = prose[int(re.match(r"^ch(\d+)\.", eid).group(1))]
        for part in REGISTRY[eid].parts:
            if isinstance(part, Choice):
                words = _words(part.options[part.correct])
                runs = [" ".join(words[i:i + 6]) for i in range(len(words) - 5)]
                assert not [run for run in runs if run in text], (eid, part.options[part.correct])
    letters = [part.correct for ex in REGISTRY.values() for part in ex.parts if isinstance(part, Choice)]
    four = [part.correct for ex in REGISTRY.values() for part in ex.parts
            if isinstance(part, Choice) and len(part.options) == 4]
    counts = {letter: letters.count(letter) for letter in "abcd"}
    assert max(counts.values()) - min(counts.values()) <= 2, counts
    assert all(four.count(letter) >= 3 for letter in "abcd"), four
