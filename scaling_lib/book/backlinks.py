"""Where the book derives each library function: the one-line "Defined in chapter N, *Title*." that ends its
docstring (as d2l does), and the library index, the appendix page that maps every public function to the notebooks
that call it.

A reader who meets `roofline.critical_batch_size` in the library should find where the book derives it. This module
scans the code cells of every notebook in `_toc.yml`, resolves each name a cell takes from `scaling_lib` (imported
directly, or as an attribute of an imported module) to the function or class that defines it, and decides each
function's home, the one notebook that derives it:

1. the notebook that shows its code (`show_source(f)`, placed where the chapter derives `f`), or writes it out in a
   saved cell (`scaling_lib.book.saved`: the cell is the function's source);
2. otherwise, unless it is a shared helper, the first notebook in reading order that calls it.

A shared helper gets no back-link, unless a chapter shows its code: what lives in a HELPER_MODULES module (the book's
own tooling in `scaling_lib.book`; the input tables and their readers in `hardware`, `models` and `measurements`;
`units`' formatting; the meshes and compiled-cost readers of `tiny.xla`), and any function called by SHARED_FROM
chapters or more (`max_batch_size` is shown in chapter 4, so it has a home; the tiny model's `init_params` has none).
Such a function is a tool the chapters use, not a result one of them derives. The library index lists them with every
other public function. `tools/backlinks.py` writes the lines and the index page;
`tests/book/test_backlinks.py` fails when either is out of date.
"""

import ast
import functools
import importlib
import inspect
import json
import os
import pkgutil
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from .exercises.index import notebook_title
from .saved import saved_cells

PACKAGE = "scaling_lib"
MARKER = "Defined in "  # the generated line, always the docstring's last paragraph, starts with this
LEGACY_MARKER = "Used in "  # the paragraph the generator wrote before (issue 22); the tool replaces it
SHARED_FROM = 5  # a function called by this many chapters or more, and shown in none, is a shared helper
TOOLING = PACKAGE + ".book"  # the book's own tooling: never a result a chapter derives
HELPER_MODULES = tuple(f"{PACKAGE}.{name}" for name in ("book", "hardware", "models", "measurements", "units",
                                                         "tiny.xla"))
INDEX_PAGE = "book/library_index.md"
SHOW = "show_source"
_MAGIC = re.compile(r"^\s*[%!]")


@dataclass(frozen=True)
class Notebook:
    """One notebook of the book, as a docstring names it."""

    path: Path
    number: int | None  # the chapter number, None for an appendix
    title: str  # its first "# " heading

    def citation(self) -> str:
        """`chapter 5, *A model of the decode step*` or `the appendix *Claims ledger*`."""
        if self.number is None:
            return f"the appendix *{self.title}*"
        return f"chapter {self.number}, *{self.title}*"


def _toc_files(repo: Path) -> list[tuple[str, bool]]:
    """(file, numbered) for every entry of `_toc.yml`, in reading order."""
    toc = yaml.safe_load((repo / "_toc.yml").read_text())
    return [(entry["file"], part.get("numbered", False)) for part in toc["parts"] for entry in part["chapters"]]


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text())["cells"]


def _title(path: Path, cells: list[dict]) -> str:
    title = notebook_title(cells)
    if title is None:
        raise ValueError(f"{path} has no '# ' title; give its first markdown cell one")
    return title


def notebooks(repo: Path) -> list[Notebook]:
    """The book's notebooks in `_toc.yml` order; numbered parts count chapters from 1."""
    found, number = [], 0
    for file, numbered in _toc_files(repo):
        path = repo / f"{file}.ipynb"
        if not path.exists():
            continue
        if numbered:
            number += 1
        found.append(Notebook(path, number if numbered else None, _title(path, _cells(path))))
    return found


def _code(cells: list[dict]) -> str:
    """The notebook's code cells as one Python module (IPython magics and shell lines dropped)."""
    sources = ("".join(cell["source"]) for cell in cells if cell["cell_type"] == "code")
    return "\n".join("\n".join(line for line in source.splitlines() if not _MAGIC.match(line)) for source in sources)


def _defined(value):
    """The scaling_lib function or class `value` is, or None (modules, constants, instances, outside objects)."""
    if not (inspect.isfunction(value) or inspect.isclass(value)):
        return None
    if not getattr(value, "__module__", "").startswith(PACKAGE + "."):
        return None
    return value


def _resolve(module: str, name: str):
    """The object `module.name` (a submodule when it is one), or None when it does not exist."""
    try:
        owner = importlib.import_module(module)
    except ImportError:
        return None
    if hasattr(owner, name):
        return getattr(owner, name)
    try:
        return importlib.import_module(f"{module}.{name}")
    except ImportError:
        return None


@functools.lru_cache(maxsize=512)
def _scan(source: str, imports_count: bool = True) -> tuple[frozenset, frozenset]:
    """(used, shown): the scaling_lib functions and classes a block of notebook code names (by import, unless not
    `imports_count`, or as a module's attribute or an imported name), and those among them passed to `show_source`.
    Cached by the code itself: the index, the homes and the back-links each scan every notebook."""
    tree = ast.parse(source)
    modules, names, used = {}, {}, set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == PACKAGE:
            for alias in node.names:
                value = _resolve(node.module, alias.name)
                if inspect.ismodule(value):
                    modules[alias.asname or alias.name] = value
                elif _defined(value):
                    names[alias.asname or alias.name] = value
                    if imports_count:
                        used.add(value)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == PACKAGE and alias.asname:
                    modules[alias.asname] = importlib.import_module(alias.name)

    def value_of(node):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules:
            return _defined(getattr(modules[node.value.id], node.attr, None))
        if isinstance(node, ast.Name):
            return names.get(node.id)
        return None

    shown = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) or (not imports_count and isinstance(node, ast.Name)):
            value = value_of(node)
            if value is not None:
                used.add(value)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == SHOW:
            shown.update(value for value in map(value_of, node.args) if value is not None)
    return frozenset(used), frozenset(shown)


def used_objects(source: str) -> set:
    """The scaling_lib functions and classes a block of notebook code names (by import or as a module's attribute)."""
    return _scan(source)[0]


def shown_objects(source: str) -> set:
    """The scaling_lib functions and classes a block of notebook code shows with `show_source(...)`."""
    return _scan(source)[1]


def cell_objects(path: Path) -> list[tuple[int, set, set]]:
    """(cell index, used, shown) for each code cell of a notebook: the scaling_lib functions and classes the cell
    itself names (imports anywhere in the notebook resolve the names; an import alone is no use) and shows."""
    cells = _cells(path)
    imports = "\n".join(ast.unparse(node) for node in ast.walk(ast.parse(_code(cells)))
                        if isinstance(node, (ast.Import, ast.ImportFrom)))
    found = []
    for index, cell in enumerate(cells):
        if cell["cell_type"] == "code":
            used, shown = _scan(imports + "\n" + _code([cell]), imports_count=False)
            found.append((index, used, shown))
    return found


def _by_notebook(repo: Path, scan) -> dict:
    """{function or class: [the notebooks whose code `scan` finds it in, in reading order]}."""
    found = {}
    for notebook in notebooks(repo):
        for value in scan(_code(_cells(notebook.path))):
            found.setdefault(value, []).append(notebook)
    return found


def usage(repo: Path) -> dict:
    """{function or class: [the notebooks that use it, in reading order]}."""
    return _by_notebook(repo, used_objects)


def saved_objects(path: Path) -> set:
    """The scaling_lib functions and classes a notebook writes out in saved cells (`scaling_lib.book.saved`)."""
    found = set()
    for cell in saved_cells(path):
        module = importlib.import_module(cell.module)
        found.update(value for value in (_defined(getattr(module, name, None)) for name in cell.definitions)
                     if value is not None)
    return found


def showing(repo: Path) -> dict:
    """{function or class: [the notebooks that show its source, with show_source or in a saved cell]} (one each,
    tests/book checks)."""
    found = {}
    for notebook in notebooks(repo):
        for value in shown_objects(_code(_cells(notebook.path))) | saved_objects(notebook.path):
            found.setdefault(value, []).append(notebook)
    return found


def is_tooling(value) -> bool:
    """True for the book's own tooling (scaling_lib.book), which no chapter derives."""
    return value.__module__ == TOOLING or value.__module__.startswith(TOOLING + ".")


def is_helper(value) -> bool:
    """True for what lives in a HELPER_MODULES module (tooling, input tables, formatting, meshes)."""
    return any(value.__module__ == name or value.__module__.startswith(name + ".") for name in HELPER_MODULES)


def home(value, users: list[Notebook], shown: list[Notebook] = ()) -> Notebook | None:
    """The notebook that derives `value` (see the module docstring), or None for a shared helper or an unused one."""
    if shown:
        return shown[0]
    if is_helper(value) or not users:
        return None
    if sum(notebook.number is not None for notebook in users) >= SHARED_FROM:
        return None
    return users[0]


def homes(repo: Path) -> dict:
    """{function or class: the notebook that derives it}, for every function that has one."""
    users, shown = usage(repo), showing(repo)
    found = {}
    for value in set(users) | set(shown):
        where = home(value, users.get(value, []), shown.get(value, []))
        if where is not None:
            found[value] = where
    return found


def sentence(notebook: Notebook) -> str:
    """The docstring's last line for a function that `notebook` derives."""
    return f"{MARKER}{notebook.citation()}."


def documented_sentence(value) -> str | None:
    """The last paragraph of `value`'s own docstring on one line when it is a back-link (either marker), else None."""
    doc = value.__dict__.get("__doc__") if inspect.isclass(value) else value.__doc__
    if not doc:
        return None
    paragraphs = re.split(r"\n\s*\n", inspect.cleandoc(doc).strip())
    last = " ".join(paragraphs[-1].split())
    return last if last.startswith((MARKER, LEGACY_MARKER)) else None


def public_objects() -> list:
    """Every public function and class of the library (no leading underscore, in no private module), in module order."""
    def layer(value):  # the math first, then the JAX model, then the book's tooling (the order of the package)
        return (value.__module__.startswith(PACKAGE + ".tiny") + 2 * is_tooling(value), value.__module__)

    public = [value for value in library_objects()
              if not value.__name__.startswith("_") and not any(part.startswith("_")
                                                                for part in value.__module__.split("."))]
    return sorted(public, key=layer)  # stable: source order within a module


def _link(notebook: Notebook, page: Path, repo: Path) -> str:
    """A {doc} link from `page` to `notebook`: "1" for chapter 1, the title for an appendix."""
    target = Path(os.path.relpath(notebook.path.with_suffix(""), (repo / page).parent)).as_posix()
    text = str(notebook.number) if notebook.number is not None else notebook.title
    return f"{{doc}}`{text} <{target}>`"


def index_page(repo: Path) -> str:
    """The library index (Markdown): every public function and class by module, with the notebooks that call it;
    the one that derives it first and in bold."""
    users, derived = usage(repo), homes(repo)
    page = Path(INDEX_PAGE)
    lines = ["# Library index", "",
             "Every public function and class of `scaling_lib`, module by module, with the notebooks that call it "
             "(numbers are chapters). **Bold** marks the chapter that derives it, whose name its docstring ends with "
             "(\"Defined in chapter N\"); the book's tooling and the helpers most chapters call (`get_chip`, "
             "`get_model`, ...) are derived nowhere. Generated by `tools/backlinks.py` from the notebooks: do not "
             "edit by hand.", ""]
    module = None
    for value in public_objects():
        if value.__module__ != module:
            module = value.__module__
            lines += ["", f"## `{module}`", ""]
        where = derived.get(value)
        others = [notebook for notebook in users.get(value, []) if notebook != where]
        links = ([f"**{_link(where, page, repo)}**"] if where else []) + [_link(n, page, repo) for n in others]
        kind = "class" if inspect.isclass(value) else "function"
        lines.append(f"- `{value.__qualname__}` ({kind}): {', '.join(links) if links else 'not called in the book'}")
    return "\n".join(lines).replace("\n\n\n", "\n\n") + "\n"


def library_objects() -> list:
    """Every function and class defined in scaling_lib (each module imported once), in module order."""
    package = importlib.import_module(PACKAGE)
    found = []
    for info in sorted(pkgutil.walk_packages(package.__path__, PACKAGE + "."), key=lambda info: info.name):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if _defined(value) is not None and value.__module__ == info.name:
                found.append(value)
    return found
