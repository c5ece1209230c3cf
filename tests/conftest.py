"""Test set-up shared by every test module.

Eight emulated CPU devices must be requested before JAX initialises its backend, so this runs at collection time.
Tests are marked by what they need: everything under tests/tiny/, the book build and browser checks, and nbval's
notebook cells are `tiny` (they run JAX or build the book), and so is every test that loads what the inner loop never
loads: tests/book/test_backlinks.py and the tests that resolve every name the notebooks import (the JAX model, Qwix
and Flax; about 1.5 s), tests/book/test_figure_checks.py (the checks of the JAX chapters' figures import the tiny
model; about 0.6 s), tests/book/test_execution_cache.py (the build's cache: jupyter-cache and SQLAlchemy; about
0.8 s), the answer boxes' zip, which the build's Sphinx extension writes (about 1 s), and tests/book/test_explorers.py
(the HTML book's live figures: Plotly, matplotlib and ipywidgets, which nothing else in the inner loop imports, about
1 s, and the three figures built, about 1 s more). `pytest -m "not tiny"` runs the closed-form math and the rest of
the book's tooling in seconds, and never imports JAX.
"""

import os
import sys
from pathlib import Path

import pytest

# Appended to any XLA_FLAGS already set (e.g. `make test-portable`'s --xla_cpu_max_isa=AVX2), never replacing them.
if "--xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=8".strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")
# Every figure a notebook shows must have a data check (scaling_lib.book.figure_checks); nbval's kernels inherit this.
os.environ.setdefault("SCALING_BOOK_FIGURES", "strict")

from tests import REPO

# Compiled bytecode, pytest's assertion-rewritten test modules included, is cached under .venv/pycache even where the
# environment sets PYTHONDONTWRITEBYTECODE (the tree stays free of __pycache__ folders either way): rewriting and
# compiling the test modules again on every run costs about 3 s of the seconds-long `-m "not tiny"` loop. Python
# checks each cached file against its source's size and time, so an edited module is compiled afresh.
if sys.dont_write_bytecode:
    sys.pycache_prefix = str(REPO / ".venv" / "pycache")
    sys.dont_write_bytecode = False

_TINY_TESTS = REPO / "tests" / "tiny"
# Test modules whose every test is tiny: the book build, and those that import what the inner loop never loads.
_TINY_MODULES = frozenset(REPO / "tests" / "book" / name
                          for name in ("test_build.py", "test_backlinks.py", "test_execution_cache.py", "test_figure_checks.py",
                                       "test_explorers.py", "test_answer_boxes_browser.py", "test_page_fit.py"))


def _all_tiny(path: Path) -> bool:
    """Whether every test in the file at `path` (resolved) is tiny: a notebook, tests/tiny/, or a _TINY_MODULES file."""
    return path.suffix == ".ipynb" or path in _TINY_MODULES or _TINY_TESTS in path.parents


def _inner_loop(config) -> bool:
    """Whether this run is the inner loop, `-m "not tiny"`."""
    return config.getoption("markexpr", "").strip() == "not tiny"


def pytest_ignore_collect(collection_path, config):
    """Under -m "not tiny", do not even import what holds only tiny tests (importing them loads JAX, Qwix or the
    build's cache)."""
    if _inner_loop(config) and _all_tiny(Path(collection_path).resolve()):
        return True
    return None


def pytest_collection_modifyitems(items):
    tiny = {}  # per module, decided once (thousands of items share a few dozen modules)
    for item in items:
        if item.path not in tiny:
            tiny[item.path] = _all_tiny(item.path.resolve())
        if tiny[item.path]:
            item.add_marker(pytest.mark.tiny)
        if "browser" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.browser)


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the number of processes
def pytest_cmdline_main(config):
    """The whole inner loop (`pytest -m "not tiny"`, no path named) runs its tests on two processes (pytest-xdist, as
    `make test` does), about 9 s instead of 13 s on two cores; a run of named files or with -n, --pdb or
    --collect-only given, and a machine of one core, stay as asked."""
    if (_inner_loop(config) and config.args_source == pytest.Config.ArgsSource.TESTPATHS
            and config.pluginmanager.hasplugin("xdist") and config.getoption("numprocesses", None) is None
            and not config.getoption("usepdb", False) and not config.getoption("collectonly", False)
            and not hasattr(config, "workerinput") and (os.cpu_count() or 1) > 1):
        config.option.numprocesses = 2
        config.option.dist = "worksteal"


_WORKERS_THAT_IMPORTED_JAX = []


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook: each worker's report reaches the controlling process
def pytest_testnodedown(node, error):
    if getattr(node, "workeroutput", {}).get("imported_jax"):
        _WORKERS_THAT_IMPORTED_JAX.append(node.gateway.id)


def pytest_sessionfinish(session, exitstatus):
    """The inner loop (-m "not tiny") never imports JAX: a test that needs it is tiny. Fail the run if one slipped in
    (in a run on several processes, each worker says whether it did)."""
    if not _inner_loop(session.config):
        return
    if hasattr(session.config, "workerinput"):  # a pytest-xdist worker: its answer goes back with its results
        session.config.workeroutput["imported_jax"] = "jax" in sys.modules
        return
    if "jax" in sys.modules or _WORKERS_THAT_IMPORTED_JAX:
        writer = session.config.get_terminal_writer()
        writer.line()
        writer.line(
            'error: the -m "not tiny" run imported jax; mark the test that needs it tiny (see tests/conftest.py)',
            red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
