"""Copy the chapters' saved cells into the library: every code cell whose first line is `# saved as scaling_lib.X`
replaces the definitions of the same names in module X (scaling_lib.book.saved states the rule).

    .venv/bin/python tools/save_cells.py          # write the modules (idempotent); then run tools/backlinks.py
    .venv/bin/python tools/save_cells.py --check  # list what differs, exit 1 if anything does

`make generate` runs it before the back-links; tests/book/test_saved_cells.py runs the check.
"""

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from scaling_lib.book.saved import differences, save  # noqa: E402

NOTEBOOKS = sorted(REPO.glob("chapters/*.ipynb")) + sorted(REPO.glob("book/*.ipynb"))

if __name__ == "__main__":
    if "--check" in sys.argv[1:]:
        problems = differences(REPO, NOTEBOOKS)
        print("\n".join(problems) or "every saved cell matches its module")
        sys.exit(1 if problems else 0)
    for path in save(REPO, NOTEBOOKS):
        print(f"wrote {path.relative_to(REPO)}")
