"""The mutation audit's tool (tools/mutation_score.py, `make mutation`): mutmut runs in a fresh copy of the tree in
`.mutation/`, which the tool makes and marks; a folder it did not make (a reader's `mutants/` or `.mutation/`) is
never removed, and nothing in the repository root is; the runs that audit a change draw every property example."""

import importlib.util
import re

import pytest

import tests
from tests import REPO

_SPEC = importlib.util.spec_from_file_location("mutation_score", REPO / "tools" / "mutation_score.py")
mutation_score = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(mutation_score)


def _fake_repo(root):
    (root / "scaling_lib" / "__pycache__").mkdir(parents=True)
    (root / "scaling_lib" / "x.py").write_text("X = 1\n")
    (root / "scaling_lib" / "__pycache__" / "x.pyc").write_bytes(b"")
    (root / "tests").mkdir()
    (root / "tests" / "test_x.py").write_text("def test(): pass\n")
    (root / "book").mkdir()
    (root / "book" / "a.md").write_text("# A\n")
    (root / "_toc.yml").write_text("root: a\n")
    (root / "pyproject.toml").write_text('[tool.mutmut]\nsource_paths = ["scaling_lib/"]\n'
                                         'also_copy = ["book/", "_toc.yml", "absent/"]\n')
    return root


def test_the_work_tree_is_a_fresh_marked_copy_of_every_path_mutmut_reads(tmp_path):
    repo, work = _fake_repo(tmp_path / "repo"), tmp_path / "repo" / ".mutation"
    mutation_score.fresh_work_tree(repo, work)
    made = sorted(str(p.relative_to(work)) for p in work.rglob("*") if p.is_file())
    assert made == sorted([mutation_score.MARKER, "_toc.yml", "book/a.md", "pyproject.toml", "scaling_lib/x.py",
                           "tests/test_x.py"])
    (work / "mutants").mkdir()  # what mutmut writes there
    (repo / "scaling_lib" / "x.py").write_text("X = 2\n")
    mutation_score.fresh_work_tree(repo, work)  # the next run: its own folder replaced by a fresh copy
    assert not (work / "mutants").exists() and (work / "scaling_lib" / "x.py").read_text() == "X = 2\n"
    paths = {str(p) for p in mutation_score.copied_paths(REPO)}  # the real tree's: every path pyproject names
    assert {"pyproject.toml", "tests", "scaling_lib", "chapters", "book"} <= paths
    assert mutation_score.WORK == REPO / ".mutation"


def test_nothing_the_tool_did_not_make_is_ever_removed(tmp_path):
    repo = _fake_repo(tmp_path / "repo")
    theirs = repo / ".mutation"
    theirs.mkdir()
    (theirs / "notes.txt").write_text("mine")
    with pytest.raises(SystemExit, match="was not made by mutation_score.py; move it away"):
        mutation_score.fresh_work_tree(repo, theirs)
    assert (theirs / "notes.txt").read_text() == "mine"
    recipe = re.search(r"^mutation:.*?(?=^\S|\Z)", (REPO / "Makefile").read_text(), re.M | re.S).group(0)
    assert "rm " not in recipe and "mutants" not in recipe
    source = (REPO / "tools" / "mutation_score.py").read_text()
    assert source.count("rmtree(") == 1 and "cwd=REPO" not in source
    assert "/.mutation/" in (REPO / ".gitignore").read_text().splitlines()


def test_make_test_and_the_mutation_run_draw_every_property_example():
    # tests/__init__.py: the inner loop draws a fifth of each property's examples, the runs that gate a change all.
    test_recipe = REPO.joinpath("Makefile").read_text().split("\ntest:", 1)[1].split("\n\n", 1)[0]
    assert f"{tests.FUZZ_ENV}=thorough" in test_recipe
    assert f'os.environ["{tests.FUZZ_ENV}"] = "thorough"' in REPO.joinpath("tools", "mutation_score.py").read_text()
