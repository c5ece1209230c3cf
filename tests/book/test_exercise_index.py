"""The exercises index (scaling_lib.book.exercises.index): every chapter asks at least four exercises of the three kinds,
climbing from recompute to explain to explore; labels are unique; every checked exercise is registered with
`scaling_lib.book.exercises`; and the scan reads kinds, labels and questions from a chapter's cells."""

import json

import pytest

from scaling_lib.book.exercises import Choice, exercises
from scaling_lib.book.exercises.index import (EVERY_CHAPTER, KINDS, kind_counts, scan_chapters, scan_notebook, toc_appendices,
                                             toc_chapters)
from tests import REPO, for_each

CHAPTERS = sorted((REPO / "chapters").glob("*.ipynb"))
ROWS = scan_chapters(REPO / "chapters")


@for_each(CHAPTERS, ids=lambda p: p.stem)
def test_each_chapter_asks_four_exercises_of_the_three_kinds_climbing_from_recompute_to_explore(path):
    rows = scan_notebook(path)
    assert len(rows) >= 4, f"{path.name}: {len(rows)} exercises"
    counts = kind_counts(rows)[path.stem]
    missing = [kind for kind in EVERY_CHAPTER if counts[kind] == 0]
    assert not missing, f"{path.name} has no {', '.join(missing)} exercise ({counts})"
    assert counts.get("other", 0) == 0, f"{path.name}: exercises of unknown kind {[r.label for r in rows]}"
    assert all(row.label and row.question for row in rows)
    kinds = [row.kind for row in rows]
    assert [KINDS.index(kind) for kind in kinds] == sorted(KINDS.index(kind) for kind in kinds), f"{path.name}: {kinds}"


def test_labels_are_unique_and_every_checked_exercise_is_registered():
    labels = [row.label for row in ROWS]
    assert len(labels) == len(set(labels))
    registry = exercises()
    unknown = [(row.label, row.check_id) for row in ROWS if row.check_id and row.check_id not in registry]
    assert not unknown, f"check ids with no registered Exercise: {unknown}"
    assert all(row.check_id for row in ROWS if row.kind == "recompute")
    explains = [row for row in ROWS if row.kind == "explain"]  # each has a checked multiple-choice sub-question
    assert explains and all(isinstance(registry[row.check_id].answer, Choice) for row in explains if row.check_id)
    assert all(row.check_id for row in explains)


def _notebook(tmp_path, *cells):
    path = tmp_path / "99_demo.ipynb"
    path.write_text(json.dumps({"cells": [{"cell_type": kind, "source": source, "metadata": {}}
                                          for kind, source in cells], "metadata": {}, "nbformat": 4,
                                "nbformat_minor": 5}))
    return path


def test_scan_reads_each_exercise_s_kind_label_and_question_and_refuses_a_missing_file(tmp_path):
    """The kind comes from the question's prefix (*Explain.*, *Explore.*) or a check cell that follows it."""
    path = _notebook(
        tmp_path,
        ("markdown", "# Demo chapter\n\nText."),
        ("markdown", "```{exercise}\n:label: d-ex-1\n\nHow big is it, in GB? Use the table.\n```"),
        ("code", 'check("demo.size", None)  # replace None with your answer'),
        ("markdown", "```{exercise}\n:label: d-ex-2\n*Explain.* Why so?\n```\n\n```{exercise}\n:label: d-ex-3\n\n"
                     "*Explore.* Change it. Then plot.\n```\n\n```{solution} d-ex-3\n:class: dropdown\nNo.\n```"),
        ("code", 'check("demo.other", None)'),  # follows a solution, not an exercise
        ("markdown", "::::{exercise}\n:label: d-ex-4\nA question with no check.\n::::"),
    )
    rows = scan_notebook(path)
    assert [(r.label, r.kind, r.check_id) for r in rows] == [
        ("d-ex-1", "recompute", "demo.size"), ("d-ex-2", "explain", None), ("d-ex-3", "explore", None),
        ("d-ex-4", "other", None)]
    assert rows[0].question == "How big is it, in GB? Use the table." and rows[2].question == "Change it. Then plot."
    assert {r.chapter_title for r in rows} == {"Demo chapter"}
    with pytest.raises(ValueError, match="no chapters folder"):
        scan_chapters(tmp_path / "missing")
    with pytest.raises(ValueError, match="no notebook"):
        scan_notebook(tmp_path / "missing.ipynb")
    with pytest.raises(ValueError, match="no table of contents"):
        toc_chapters(tmp_path / "_toc.yml")


def test_toc_chapters_lists_the_toc_chapters_in_order(tmp_path):
    stems = toc_chapters(REPO / "_toc.yml")
    assert stems and stems[0] == "01_rooflines"
    assert set(stems) <= {path.stem for path in CHAPTERS}
    toc = tmp_path / "_toc.yml"
    toc.write_text("root: book/intro\nparts:\n  - chapters:\n      - file: chapters/05_b\n      - file: book/glossary\n"
                   "      - file: chapters/02_a\n")
    assert toc_chapters(toc) == ("05_b", "02_a")
    assert {row.chapter for row in scan_chapters(REPO / "chapters", only=("04_memory",))} == {"04_memory"}


def test_the_stored_index_lists_every_exercise_of_the_chapters_and_the_worked_problems():
    # The index says it lists every exercise; the appendix's worked problems are among them. Its stored table must
    # name every label the scan finds (a renamed or added exercise leaves it stale until the notebook is re-executed).
    appendices = toc_appendices(REPO / "_toc.yml")
    assert "worked_problems" in appendices
    rows = [row for stem in appendices for row in scan_notebook(REPO / "book" / f"{stem}.ipynb")]
    worked = {row.check_id for row in rows if row.check_id}
    assert worked == {eid for eid in exercises() if eid.startswith("wp.")}
    assert len(rows) >= 13 and set(EVERY_CHAPTER) <= {row.kind for row in rows} <= set(KINDS)
    source = (REPO / "book" / "exercises.ipynb").read_text(encoding="utf-8")
    in_toc = scan_chapters(REPO / "chapters", only=toc_chapters(REPO / "_toc.yml"))
    stale = sorted(row.label for row in (*in_toc, *rows) if f"{{ref}}`{row.label}`" not in source)
    assert not stale, f"book/exercises.ipynb does not list {stale}: re-execute it (make refresh NB=book/exercises.ipynb)"
    assert "toc_appendices" in source and "scan_notebook" in source
