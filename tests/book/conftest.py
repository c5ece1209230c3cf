"""One strict build of the book per test run, shared by every browser test (tests/book/test_build.py,
test_answer_boxes_browser.py, test_page_fit.py).

The build is `make book`'s: `jupyter-book build . -W -n --keep-going` into the repository's `_build`, so a warning or a
notebook that fails to execute fails it, and notebooks that did not change come from its execution cache. Under
pytest-xdist every worker is its own session: a lock makes the first worker that needs the book build it and the
others wait, and a stamp naming the run (xdist's run id) lets them reuse it instead of building again. BOOK_HTML=path
tests a build already made instead.
"""

import fcntl
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from scaling_lib.book.execution_cache import drop_if_stale, mark_built
from tests import REPO

_RUN = os.environ.get("PYTEST_XDIST_TESTRUNUID") or uuid.uuid4().hex  # one id per test run, shared by its workers


@pytest.fixture(scope="session")
def book_html() -> Path:
    """The HTML folder of this run's strict build of the book."""
    if os.environ.get("BOOK_HTML"):
        return Path(os.environ["BOOK_HTML"]).resolve()
    build = REPO / "_build"
    build.mkdir(exist_ok=True)
    stamp = build / ".tests-built"
    with open(build / ".tests-build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not (stamp.is_file() and stamp.read_text() == _RUN):
            stamp.unlink(missing_ok=True)
            drop_if_stale(REPO)  # as `make book` does: outputs cached before a library change are not reused
            jupyter_book = Path(sys.executable).with_name("jupyter-book")
            result = subprocess.run([str(jupyter_book), "build", str(REPO), "-W", "-n", "--keep-going"],
                                    capture_output=True, text=True, timeout=1800)
            assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-4000:]
            mark_built(REPO)
            stamp.write_text(_RUN)
    return build / "html"
