"""Which chapter uses which library function: the "Used in chapter N, *Title*" line of each docstring (as d2l does).

A reader who meets `roofline.critical_batch_size` in the library should find where the book derives it. This module
scans the code cells of every notebook in `_toc.yml`, resolves each name a cell takes from `scaling_lib` (imported
directly, or as an attribute of an imported module) to the function or class that defines it, and gives the sentence
its docstring must end with. `tools/backlinks.py` writes the sentences; `tests/book/test_backlinks.py` checks that
every function the book uses carries exactly its sentence, so a chapter that starts or stops using a function fails
the tests until the docstring says so.
"""

import ast
import importlib
import inspect
import json
import pkgutil
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from .exercises.index import notebook_title

PACKAGE = "scaling_lib"
MARKER = "Used in "  # the generated paragraph, always the last one of the docstring, starts with this
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


def used_objects(source: str) -> set:
    """The scaling_lib functions and classes a block of notebook code names (by import or as a module's attribute)."""
    tree = ast.parse(source)
    modules, used = {}, set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == PACKAGE:
            for alias in node.names:
                value = _resolve(node.module, alias.name)
                if inspect.ismodule(value):
                    modules[alias.asname or alias.name] = value
                elif _defined(value):
                    used.add(value)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == PACKAGE and alias.asname:
                    modules[alias.asname] = importlib.import_module(alias.name)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules:
            value = _defined(getattr(modules[node.value.id], node.attr, None))
            if value is not None:
                used.add(value)
    return used


def usage(repo: Path) -> dict:
    """{function or class: [the notebooks that use it, in reading order]}."""
    users = {}
    for notebook in notebooks(repo):
        for value in used_objects(_code(_cells(notebook.path))):
            users.setdefault(value, []).append(notebook)
    return users


def sentence(users: list[Notebook], every: int) -> str:
    """The docstring's last paragraph for a function used by `users` (of `every` notebooks in the book)."""
    if len(users) == every:
        return MARKER + "every notebook of the book."
    names = [notebook.citation() for notebook in users]
    if len(names) == 1:
        return f"{MARKER}{names[0]}."
    if len(names) == 2:
        return f"{MARKER}{names[0]} and {names[1]}."
    return f"{MARKER}{'; '.join(names[:-1])}; and {names[-1]}."


def documented_sentence(value) -> str | None:
    """The last paragraph of `value`'s own docstring on one line when it starts with MARKER, else None."""
    doc = value.__dict__.get("__doc__") if inspect.isclass(value) else value.__doc__
    if not doc:
        return None
    paragraphs = re.split(r"\n\s*\n", inspect.cleandoc(doc).strip())
    last = " ".join(paragraphs[-1].split())
    return last if last.startswith(MARKER) else None


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
