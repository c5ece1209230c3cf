"""Write every checked exercise's question cell in the chapters and the worked problems from the exercise registry
(`scaling_lib.book.exercises`), the one place its text lives: `make generate` runs it after an exercise's question,
preamble or options change. Only markdown cells change, so no notebook needs executing again."""

import sys
from pathlib import Path

import nbformat

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from scaling_lib.book.exercises import exercises  # noqa: E402
from scaling_lib.book.exercises.index import exercise_cells  # noqa: E402

NOTEBOOKS = sorted((REPO / "chapters").glob("*.ipynb")) + [REPO / "book" / "worked_problems.ipynb"]


def main() -> int:
    registry = exercises()
    for path in NOTEBOOKS:
        changed = [(index, written) for index, source, written in exercise_cells(path, registry) if source != written]
        if not changed:
            continue
        notebook = nbformat.read(path, as_version=nbformat.NO_CONVERT)
        for index, written in changed:
            notebook.cells[index].source = written
        nbformat.write(notebook, path)
        print(f"{path.relative_to(REPO)}: {len(changed)} exercise cell(s) written from the registry")
    return 0


if __name__ == "__main__":
    sys.exit(main())
