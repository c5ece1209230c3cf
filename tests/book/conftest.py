"""One strict build of the book per test run, shared by every browser test (tests/book/test_build.py,
test_answer_boxes_browser.py, test_page_fit.py).

The build is `make book`'s (`jupyter-book build . -W -n --keep-going`, so a warning fails it) with one difference: it
renders the notebooks' stored outputs instead of executing them again (`execute_notebooks: off`). The same test run
executes every notebook under nbval, which fails on any stored output that a fresh run does not reproduce, so the
pages are the ones an executing build renders (only the cells nbval ignores, timings, may differ) and the notebooks
are not executed twice in one run. `make book` itself executes every notebook, as before. The build goes into
`_build/tests/_build/html`, with its own Sphinx environment (so an incremental run rebuilds only changed pages and
never disturbs `make book`'s `_build/html`); its configuration is `_config.yml` with execution off, written to
`_build/tests/_config.yml`.

Under pytest-xdist every worker is its own session: a lock makes the first worker that needs the book build it and the
others wait, and a stamp naming the run (xdist's run id) lets them reuse it instead of building again. BOOK_HTML=path
tests a build already made instead (for example `make book`'s `_build/html`).
"""

import fcntl
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import yaml

from tests import REPO

_RUN = os.environ.get("PYTEST_XDIST_TESTRUNUID") or uuid.uuid4().hex  # one id per test run, shared by its workers
TESTS_BUILD = REPO / "_build" / "tests"


def stored_output_config(repo: Path = REPO) -> dict:
    """`_config.yml` with notebook execution off; the local extensions' folders made absolute, because the written
    configuration lives in another folder than the book's."""
    config = yaml.safe_load((repo / "_config.yml").read_text(encoding="utf-8"))
    config["execute"]["execute_notebooks"] = "off"
    extensions = config["sphinx"]["local_extensions"]
    config["sphinx"]["local_extensions"] = {name: str(repo / folder) for name, folder in extensions.items()}
    return config


@pytest.fixture(scope="session")
def book_html() -> Path:
    """The HTML folder of this run's strict build of the book."""
    if os.environ.get("BOOK_HTML"):
        return Path(os.environ["BOOK_HTML"]).resolve()
    TESTS_BUILD.mkdir(parents=True, exist_ok=True)
    stamp = TESTS_BUILD / ".tests-built"
    with open(TESTS_BUILD / ".tests-build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not (stamp.is_file() and stamp.read_text() == _RUN):
            stamp.unlink(missing_ok=True)
            config = TESTS_BUILD / "_config.yml"
            config.write_text(yaml.safe_dump(stored_output_config(), sort_keys=False), encoding="utf-8")
            jupyter_book = Path(sys.executable).with_name("jupyter-book")
            result = subprocess.run([str(jupyter_book), "build", str(REPO), "--config", str(config), "--path-output",
                                     str(TESTS_BUILD), "-W", "-n", "--keep-going"],
                                    capture_output=True, text=True, timeout=1800)
            assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-4000:]
            stamp.write_text(_RUN)
    return TESTS_BUILD / "_build" / "html"
