"""Code a chapter writes out and the library runs: the chapter's cell is the source, the module holds the same text
(d2l's `#@save`).

A code cell whose first line is `# saved as scaling_lib.tiny.model` holds definitions only: functions, classes, and
names bound once (`step = jax.jit(...)`), with no comment outside them. Every one of them is, line for line, the definition of that name at the top level of the module, apart from the "Defined in chapter N" paragraph
that ends a library docstring (tools/backlinks.py writes it). So the page shows the program that runs, a reader can
edit the cell and run it, and there is one text of each function:

- `make generate` (tools/save_cells.py) copies the cells' definitions into their modules;
- `tests/book/test_saved_cells.py` fails when a cell and its module differ, or a cell holds anything but definitions.

Which chapter derives a saved function (its back-link) is the chapter that saves it, as for `show_source`.
"""

import ast
import json
import re
from dataclasses import dataclass
from pathlib import Path

MARKER = re.compile(r"#\s*saved as (scaling_lib(?:\.\w+)+)[ \t]*(?:\(.*\))?[ \t]*$")
_BACKLINK = re.compile(r"\n[ \t]*\n[ \t]*Defined in (?:chapter|the appendix)[^\n]*(?=\n[ \t]*(?:\"\"\"|'''))")
_DEFINITION = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


@dataclass(frozen=True)
class SavedCell:
    """One saved cell: where it is, the module it is saved as, and its definitions {name: text}."""

    notebook: Path
    index: int  # the cell's index in the notebook
    module: str  # e.g. "scaling_lib.tiny.model"
    definitions: dict


def _name(node) -> str | None:
    """The name a top-level statement defines: a def, a class, or one name bound by an assignment; else None."""
    if isinstance(node, _DEFINITION):
        return node.name
    targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
    if len(targets) == 1 and isinstance(targets[0], ast.Name):
        return targets[0].id
    return None


def _span(node) -> tuple[int, int]:
    """(first, last) line of a top-level statement, 1-based, its decorators included."""
    return min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])]), node.end_lineno


def definitions(source: str, where: str = "the code") -> dict:
    """{name: text} for every top-level definition of `source`, each from its first decorator to its last line.
    ValueError for any other top-level statement, or a comment outside the definitions (it would be lost when the
    cell is saved): a saved cell defines, the cells after it run."""
    lines, found, inside = source.splitlines(), {}, set()
    for node in ast.parse(source).body:
        name = _name(node)
        if name is None:
            raise ValueError(f"{where}, line {node.lineno}: `{ast.unparse(node).splitlines()[0]}` is not a definition; "
                             "a saved cell holds only functions, classes and names bound once: run it in another cell")
        if name in found:
            raise ValueError(f"{where}: {name} is defined twice; keep one definition")
        first, last = _span(node)
        found[name] = "\n".join(lines[first - 1:last])
        inside.update(range(first, last + 1))
    stray = [number for number, line in enumerate(lines, 1) if number not in inside and line.strip()]
    if stray:
        raise ValueError(f"{where}, line {stray[0]}: `{lines[stray[0] - 1].strip()}` lies outside every definition; "
                         "move the comment into the definition it explains")
    return found


def saved_cells(path: Path) -> list[SavedCell]:
    """The saved cells of one notebook, in order."""
    cells = json.loads(Path(path).read_text())["cells"]
    found = []
    for index, cell in enumerate(cells):
        source = "".join(cell["source"])
        first = source.split("\n", 1)[0]
        match = MARKER.match(first) if cell["cell_type"] == "code" else None
        if match:
            body = source.split("\n", 1)[1] if "\n" in source else ""
            found.append(SavedCell(Path(path), index, match.group(1),
                                   definitions(body, f"{Path(path).name}, cell {index}")))
    return found


def module_file(repo: Path, module: str) -> Path:
    """The source file of a scaling_lib module, found from the repository (nothing is imported)."""
    path = Path(repo, *module.split(".")).with_suffix(".py")
    if not path.exists():
        raise ValueError(f"{module} has no file {path}; name an existing scaling_lib module after `# saved as`")
    return path


def without_backlink(text: str) -> str:
    """A definition's text without the back-link paragraph ("Defined in chapter N, ...") that ends its docstring."""
    return _BACKLINK.sub("", text)


def comparable(text: str) -> str:
    """A definition's text as the check compares it: no back-link paragraph, and a docstring's closing quotes on
    the line of its last words (the back-link tool moves them to a line of their own)."""
    return re.sub(r"\n[ \t]*(\"\"\"|\'\'\')", r"\1", without_backlink(text))


def differences(repo: Path, notebook_paths) -> list[str]:
    """What differs between the saved cells of these notebooks and their modules, one line per definition."""
    problems = []
    for path in notebook_paths:
        for cell in saved_cells(path):
            module_text = module_file(repo, cell.module).read_text()
            in_module = definitions_in_module(module_text)
            for name, text in cell.definitions.items():
                where = f"{Path(path).name}, cell {cell.index}: {name}"
                if name not in in_module:
                    problems.append(f"{where} is not defined at the top level of {cell.module}")
                elif comparable(in_module[name]) != comparable(text):
                    problems.append(f"{where} differs from {cell.module}.{name}")
    return problems


def definitions_in_module(text: str) -> dict:
    """{name: text} of a module's top-level definitions (its other statements, imports included, are skipped)."""
    lines, found = text.splitlines(), {}
    for node in ast.parse(text).body:
        name = _name(node)
        if name is not None:
            first, last = _span(node)
            found[name] = "\n".join(lines[first - 1:last])
    return found


def save(repo: Path, notebook_paths) -> list[Path]:
    """Copy every saved cell's definitions over the same names in their modules; returns the files changed. A name
    the module lacks is an error (add it to the module where it belongs first). Back-links are left to
    tools/backlinks.py, which `make generate` runs next."""
    changed = []
    by_module = {}
    for path in notebook_paths:
        for cell in saved_cells(path):
            by_module.setdefault(cell.module, {}).update(cell.definitions)
    for module, saved in by_module.items():
        file = module_file(repo, module)
        text = original = file.read_text()
        for name, new in saved.items():
            current = definitions_in_module(text)
            if name not in current:
                raise ValueError(f"{name} is saved as {module} but not defined there; add a definition to move")
            if comparable(current[name]) != comparable(new):
                text = text.replace(current[name], new, 1)
        if text != original:
            file.write_text(text)
            changed.append(file)
    return changed
