"""Test set-up shared by every test module.

Eight emulated CPU devices must be requested before JAX initialises its backend, so this runs at collection time.
Tests are marked by what they need: everything under tests/tiny/, the book build and browser checks, and nbval's
notebook cells are `tiny` (they run JAX); `pytest -m "not tiny"` runs the closed-form math and the book's tooling
in seconds.
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
_BUILD_TESTS = REPO / "tests" / "book" / "test_build.py"


def pytest_ignore_collect(collection_path, config):
    """Under -m "not tiny", do not even import tests/tiny/ (every test there is tiny; importing them loads Qwix)."""
    if config.getoption("markexpr", "").strip() == "not tiny" and _TINY_TESTS in Path(collection_path).resolve().parents:
        return True
    return None


def pytest_collection_modifyitems(items):
    resolved = {}  # a module's path, resolved once (thousands of items share a few dozen modules)
    for item in items:
        path = resolved.setdefault(item.path, item.path.resolve())
        if path.suffix == ".ipynb" or path == _BUILD_TESTS or _TINY_TESTS in path.parents:
            item.add_marker(pytest.mark.tiny)
        if "browser" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.browser)
