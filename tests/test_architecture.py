"""The package's layout is a contract: closed-form math never imports JAX, imports flow one way (top level <- tiny <-
book) with no cycle, private names stay in their module, `ruff check` passes (imports at the top of modules, no print
in the library, no unused import), every notebook starts with the same set-up and builds its tables with
`markdown_table`, and tests are filed by the module they specify."""

import ast
import functools
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import scaling_lib
from tests import REPO, for_each, fresh_interpreter

PACKAGE = REPO / "scaling_lib"
MODULES = sorted(p for p in PACKAGE.rglob("*.py"))
CLOSED_FORM = sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__" and p.stem != "__main__")
NOTEBOOKS = sorted(REPO.glob("chapters/*.ipynb")) + sorted(REPO.glob("book/*.ipynb"))
SETUP_LINES = ("from scaling_lib.book.notebook import setup", "setup()")  # as the notebooks' formatter writes it
RUFF = Path(sys.executable).with_name("ruff")


def _module_name(path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@functools.cache
def _imports(path) -> tuple:
    """(imported module, names) for every import in a module, relative ones resolved (each module parsed once per
    test run: three tests walk every module's imports)."""
    return tuple(_walk_imports(path))


_IMPORT_LINE = re.compile(r"^[ \t]*(?:from[ \t]+[\w.]+[ \t]+import\b|import[ \t]+[\w.]+)")


def _import_statements(source: str):
    """Each import statement of a module's source as a tree of its own: the lines outside triple-quoted strings that
    start one (at any nesting), with their bracketed or backslashed continuations, dedented and parsed alone. About
    ten times quicker than parsing the whole module; on this package it finds what a walk of the module's tree finds
    (no import of the package sits in a one-line string)."""
    lines = source.splitlines()
    i, quote = 0, None
    while i < len(lines):
        line = lines[i]
        if quote is not None or not _IMPORT_LINE.match(line):
            for found in re.findall(r'"""|\'\'\'', line):  # a docstring opens or closes
                quote = found if quote is None else (None if found == quote else quote)
            i += 1
            continue
        start, depth = i, 0
        while True:
            code = lines[i].split("#", 1)[0]
            depth += code.count("(") - code.count(")")
            if (depth <= 0 and not code.rstrip().endswith("\\")) or i + 1 == len(lines):
                break
            i += 1
        i += 1
        yield from ast.parse("\n".join(lines[start:i]).strip()).body


def _walk_imports(path):
    name = _module_name(path)
    package = name if path.stem == "__init__" else name.rsplit(".", 1)[0]
    for node in _import_statements(path.read_text(encoding="utf-8")):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, ()
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module
            yield module, tuple(alias.name for alias in node.names)


def _internal_graph():
    modules = {_module_name(p): p for p in MODULES}
    graph = {}
    for name, path in modules.items():
        deps = set()
        for module, names in _imports(path):
            submodules = {f"{module}.{imported}" for imported in names} & modules.keys()
            deps |= submodules  # "from . import model" imports a submodule, not the package's own names
            if module in modules and (not names or len(submodules) < len(names)):
                deps.add(module)
        graph[name] = deps - {name}
    return graph


def test_closed_form_modules_import_with_jax_blocked_and_the_math_layer_loads_none_of_the_books_tooling():
    """In a fresh interpreter where any attempt to import jax raises: the math layer (roofline, estimate) loads no
    module of scaling_lib.book, and every top-level module, the exercises and the claims import."""
    assert fresh_interpreter()["math_layer_loads"] == []


def test_imports_flow_top_level_then_tiny_then_book_with_no_cycle_and_no_private_name_crossing_a_module():
    for path in (PACKAGE / "book" / "exercises" / "__init__.py", PACKAGE / "estimate.py", PACKAGE / "book" / "notebook.py"):
        walked = [node for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.Import | ast.ImportFrom)]
        assert [ast.dump(node) for node in _import_statements(path.read_text())] == [
            ast.dump(ast.parse(ast.unparse(node)).body[0]) for node in walked], path  # the quick scan reads the tree's
    leaks = {str(path.relative_to(PACKAGE)): [f"{module}.{name}" for module, names in _imports(path)
                                              if module and module.startswith("scaling_lib")
                                              for name in names if name.startswith("_")] for path in MODULES}
    leaks = {where: names for where, names in leaks.items() if names}
    assert not leaks, f"modules import private names {leaks}; promote them (e.g. to scaling_lib._validate)"
    graph = _internal_graph()
    layer = {name: (2 if name.startswith("scaling_lib.book") else 1 if name.startswith("scaling_lib.tiny") else 0)
             for name in graph}
    for name, deps in graph.items():
        upward = [dep for dep in deps if layer[dep] > layer[name]]
        assert not upward, f"{name} imports {upward}, a layer above it"
    state = {}

    def visit(node, stack):
        state[node] = "open"
        for dep in graph[node]:
            if state.get(dep) == "open":
                pytest.fail("import cycle: " + " -> ".join(stack[stack.index(dep):] + [dep]))
            if dep not in state:
                visit(dep, stack + [dep])
        state[node] = "done"

    for node in graph:
        if node not in state:
            visit(node, [node])


def test_ruff_check_passes_on_the_repository():
    """pyproject's [tool.ruff.lint] rules: in the library, imports at the top of the module (PLC0415; an optional
    dependency imported where it is used says why on its line) and no print outside the command line and the book's
    printing tools (T201); everywhere, no unused import or undefined name (F)."""
    result = subprocess.run([str(RUFF), "check", "--no-cache", "--output-format", "concise", "."], capture_output=True,
                            text=True, cwd=REPO)
    assert result.returncode == 0, f"`.venv/bin/ruff check .` fails:\n{result.stdout}{result.stderr}"


@for_each(NOTEBOOKS, ids=lambda p: p.name)
def test_every_notebook_starts_with_the_one_line_setup_in_a_folded_cell(path):
    cells = json.loads(path.read_text())["cells"]
    first = next(cell for cell in cells if cell["cell_type"] == "code")
    code = [line for line in "".join(first["source"]).splitlines() if line.strip()]
    assert code[0] == SETUP_LINES[0] and code[1].startswith(SETUP_LINES[1])
    assert "hide-input" in first["metadata"].get("tags", [])
    later = ["".join(cell["source"]) for cell in cells if cell["cell_type"] == "code" and cell is not first]
    assert not any("XLA_FLAGS" in source or "apply_style()" in source for source in later)


def _hand_built_tables(source: str) -> list:
    """String literals of a code cell that look like a Markdown table row with an alignment rule ("|---|--:|")."""
    return [node.value for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and node.value.lstrip().startswith("|") and "---" in node.value]


def test_no_notebook_builds_a_markdown_table_by_hand():
    # the detector finds a header rule in a list of rows and in one string, and not markdown_table's call
    assert _hand_built_tables('rows = ["| a | b |", "|---|---:|"]\nrows.append(f"| {x} | {y} |")') == ["|---|---:|"]
    assert _hand_built_tables('rows = ["| a | b |\\n|---|---:|"]') == ["| a | b |\n|---|---:|"]
    assert not _hand_built_tables('display(markdown_table(["a", "b"], rows, "lr"))\nprint("---")')
    found = [(path.name, index, text) for path in NOTEBOOKS
             for index, cell in enumerate(json.loads(path.read_text())["cells"]) if cell["cell_type"] == "code"
             for text in _hand_built_tables("".join(cell["source"]))]
    assert not found, (f"Markdown tables built by hand (notebook, cell, literal): {found}; use "
                       "scaling_lib.book.display.markdown_table(header, rows, align)")


# Import name -> distribution name, where the two differ.
_DISTRIBUTION = {"yaml": "pyyaml", "myst_nb": "myst-nb", "IPython": "ipython", "absl": "absl-py",
                 "matplotlib_inline": "matplotlib-inline", "jupyter_cache": "jupyter-cache"}


def _declared_dependencies() -> set:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    declared = list(project["dependencies"])
    for extra in project.get("optional-dependencies", {}).values():
        declared += extra
    return {d.split("[")[0].split("=")[0].split(">")[0].split("<")[0].strip().lower() for d in declared}


def test_pyproject_declares_every_third_party_import_and_takes_the_packages_one_version():
    third_party = set()
    for path in MODULES:
        for module, _ in _imports(path):
            top = module.split(".")[0]
            if top != "scaling_lib" and top not in sys.stdlib_module_names:
                third_party.add(_DISTRIBUTION.get(top, top).lower())
    missing = sorted(third_party - _declared_dependencies())
    assert not missing, f"imported by scaling_lib but not declared in pyproject.toml: {missing}"
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert "version" not in project and "version" in project["dynamic"], "pyproject must take scaling_lib.__version__"
    assert scaling_lib.__version__.count(".") == 2


# Tests are filed by subject: each top-level module `scaling_lib/<module>.py` has a file `tests/**/test_<module>.py`.
# A leading underscore is dropped (`_validate` -> test_validate.py, `_numpy` -> test_numpy.py), the command line
# (`__main__`) is tested in test_cli.py, and the package root (`__init__`, which only re-exports) is held by the
# import rules above. A test file is named for what it tests, never for how its tests arose (a mutation run's
# survivors, an issue's list of edges, a round of stricter checks).
TEST_FILE_OF_MODULE = {"__main__": "cli"}
HISTORY_WORDS = ("edges", "strict", "survivors", "mutants")
TEST_FILES = sorted((REPO / "tests").rglob("test_*.py"))
# How a test arose, in a test's name, a class, a comment or a docstring: an issue number (a cited project's issue,
# "NCCL issue 1259" or "nccl-tests issue 212", is a source), a sampling seed of the mutation runs, their survivors,
# a campaign or a numbered round.
HISTORY = re.compile(r"(?i)(?<!nccl )(?<!nccl-tests )\bissue\s*#?\d+|\bseed-\d+|\bsurvivors?\b|\bcampaign\b"
                     r"|\bround \d+\b")
HISTORY_FREE = sorted(set((REPO / "tests").rglob("*.py")) - {Path(__file__)})
TOP_LEVEL = sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__")


def _subject_of(module: str) -> str:
    return TEST_FILE_OF_MODULE.get(module, module.lstrip("_"))


def test_tests_are_filed_by_the_module_they_specify_never_by_how_they_arose():
    assert set(TEST_FILE_OF_MODULE) <= set(TOP_LEVEL)
    names = {path.name for path in TEST_FILES}
    without = [f"scaling_lib/{module}.py has no tests/**/test_{_subject_of(module)}.py" for module in TOP_LEVEL
               if f"test_{_subject_of(module)}.py" not in names]
    assert not without, "; ".join(without) + " (tests/math/ for closed-form math)"
    named = [str(path.relative_to(REPO)) for path in TEST_FILES
             if set(path.stem.split("_")) & set(HISTORY_WORDS)]
    assert not named, (f"{named} are named for how their tests arose ({', '.join(HISTORY_WORDS)}); move each test to "
                       "the test_<module>.py of the module whose behaviour it pins, named for that behaviour")
    told = [f"{path.relative_to(REPO)}:{number}: {line.strip()}" for path in HISTORY_FREE
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if HISTORY.search(line)]
    assert not told, "name each test, class and section by the behaviour it states, not how it arose:\n" + "\n".join(
        told)


def test_hop_counting_and_collective_pricing_each_have_one_owner_and_no_module_re_exports():
    """hops counts hops, collectives prices collectives, and a module's `__all__` lists only what it defines (sharding
    once re-exported five names of collectives). The names the public API placed in an older home stay importable
    there, by an import the module marks as such, but no `__all__` lists them."""
    import importlib

    from scaling_lib import collectives, hops, sharding

    assert hops.collective_hops.__module__ == "scaling_lib.hops" and hops.ring_hops.__module__ == "scaling_lib.hops"
    for name in ("collective_time", "mesh_collective", "latency_bound_bytes", "ring_bytes_sent", "Collective"):
        assert getattr(collectives, name).__module__ == "scaling_lib.collectives", name
    for name in ("collective_time", "collective_hops", "CollectiveTime", "COLLECTIVES", "mesh_collective"):
        assert not hasattr(sharding, name), f"sharding still exposes {name}"
    for stem in CLOSED_FORM:
        module = importlib.import_module(f"scaling_lib.{stem}")
        foreign = [name for name in getattr(module, "__all__", ()) if getattr(getattr(module, name), "__module__",
                                                                               module.__name__) != module.__name__]
        assert not foreign, f"scaling_lib.{stem}.__all__ re-exports {foreign}"


# A path the docs name: one under a folder of the repository ("scaling_lib/...", "tests/book/test_x.py"), or a file at
# its root ("TESTING.md", "Makefile"). "<name>" and "*" stand for any name, "NN" for a two-digit number, and must
# match at least one file. What a tool writes into a folder .gitignore names (bench/results/, _build/) is not in a
# clone, and names of other projects' files (the Scaling Book's "tpus.md") are neither.
_NAMED_PATH = re.compile(r"(?<![\w./<>*-])((?:scaling_lib|tests|tools|bench|book|chapters|\.ci)/[\w./<>*-]*[\w>*/]"
                         r"|[A-Z]+\.md|Makefile|pyproject\.toml|requirements\.txt|package(?:-lock)?\.json"
                         r"|_config\.yml|_toc\.yml)(?![\w/])")


SOURCES = sorted(path for folder in ("scaling_lib", "tools", "bench", "tests") for path in (REPO / folder).rglob("*.py"))


def _missing(named: str, ignored: tuple) -> bool:
    """Whether a path named in the docs (`_NAMED_PATH`; <...> and NN are wildcards) is absent from the repository."""
    if named.startswith(ignored):
        return False
    pattern = re.sub(r"<[^>]*>", "*", named.rstrip(".")).replace("NN", "[0-9][0-9]")
    return not (list(REPO.glob(pattern)) if "*" in pattern or "[" in pattern else (REPO / pattern).exists())


def _docs_and_docstrings(ignored: tuple):
    """(where, text) for the README, TESTING.md and every docstring of the package, tools, benchmarks and tests that
    could name a missing path: a file whose whole text names only paths that exist is not parsed (none of its
    docstrings can name another), so only the few that name a missing one anywhere (in a test's string, say) are."""
    for name in ("README.md", "TESTING.md"):
        if (REPO / name).is_file():
            yield name, (REPO / name).read_text(encoding="utf-8")
    for path in SOURCES:
        source = path.read_text(encoding="utf-8")
        if not any(_missing(named, ignored) for named in set(_NAMED_PATH.findall(source))):
            yield str(path.relative_to(REPO)), ""  # scanned: every path it names exists
            continue
        for node in _definitions(ast.parse(source)):
            docstring = ast.get_docstring(node)
            if docstring:
                yield str(path.relative_to(REPO)), docstring


def _definitions(node):
    """The module, classes and functions of a parsed file, found through statements only (a docstring is never
    inside an expression, so the walk skips the expressions that make up most of a tree)."""
    if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
        yield node
    for field in ("body", "orelse", "finalbody", "handlers"):
        for child in getattr(node, field, ()):
            if isinstance(child, ast.stmt | ast.excepthandler):
                yield from _definitions(child)


def test_the_docs_name_every_closed_form_module_and_every_path_they_name_exists():
    """The package docstring and the README's layout table name every public top-level module; every path the README,
    TESTING.md and the docstrings name is in the repository."""
    readme = (REPO / "README.md").read_text()
    public = [name for name in CLOSED_FORM if not name.startswith("_")]
    missing_doc = [name for name in public if f"`{name}`" not in scaling_lib.__doc__]
    missing_readme = [name for name in public if f"`{name}`" not in readme]
    assert not missing_doc, f"scaling_lib's docstring does not name {missing_doc}"
    assert not missing_readme, f"README.md's layout table does not name {missing_readme}"
    ignored = tuple(line.strip().strip("/") + "/" for line in (REPO / ".gitignore").read_text().splitlines()
                    if line.strip().endswith("/"))
    scanned = list(_docs_and_docstrings(ignored))
    missing = [(where, named) for where, text in scanned for named in _NAMED_PATH.findall(text)
               if _missing(named, ignored)]
    assert len(SOURCES) > 200 and len(set(where for where, _ in scanned)) > 50  # the scan reads what it claims to
    assert not missing, f"named but not in the repository: {sorted(set(missing))}"
