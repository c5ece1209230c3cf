"""The book's tests, mirroring the package: math/ (closed form), tiny/ (JAX), book/ (the book's tooling and build)."""

import functools
import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# Property tests draw `examples(n)` Hypothesis examples each (derandomized: the same ones on every run). `make test`
# and `make mutation` set SCALING_BOOK_FUZZ=thorough and draw all n; the seconds-long inner loop
# (`pytest -m "not tiny"`) draws a fifth of them (at least 5), which still includes each strategy's first listed
# edge values, since Hypothesis tries the simplest examples first; a property run hundreds of times in the inner loop
# (once per public function) or whose every example prices hundreds of published rows names its own inner count.
FUZZ_ENV = "SCALING_BOOK_FUZZ"
THOROUGH = os.environ.get(FUZZ_ENV, "").strip().lower() == "thorough"


def examples(thorough: int, inner: int | None = None) -> int:
    """Hypothesis examples for a property that the thorough run (`make test`) checks on `thorough` examples; the
    inner loop draws `inner` of them where given, else a fifth (at least 5)."""
    if THOROUGH:
        return thorough
    return max(5, thorough // 5) if inner is None else inner


def for_each(cases, ids=repr):
    """Make a check of one case into one test of every case: `@for_each(CASES, ids=...)` over `def test_...(case)`
    (or of several arguments, each case a tuple of them) runs the check on each case in turn and fails once, naming
    every case that failed and why. A table of hundreds of one-line cases is one test, not hundreds of pytest items
    (each costs the seconds-long inner loop about half a millisecond)."""
    import inspect

    import pytest

    listed_ids = None if callable(ids) else [str(name) for name in ids]
    rows, names = [], []
    for i, case in enumerate(cases):
        name = None if listed_ids is None else listed_ids[i]
        if isinstance(case, type(pytest.param(None))):  # pytest.param(values..., id=...): its values, its id
            if case.marks:
                raise TypeError(f"for_each takes no marks ({case.marks}); parametrize that test instead")
            name = case.id if case.id is not None else name
            case = case.values if len(case.values) > 1 else case.values[0]
        rows.append(case)
        names.append(ids(case) if name is None else name)

    def wrap(check):
        unpack = len(inspect.signature(check).parameters) > 1

        def test():
            failures = []
            for name, case in zip(names, rows, strict=True):
                try:
                    check(*case) if unpack else check(case)
                except (Exception, pytest.fail.Exception) as error:  # every failing case is named, then the test fails
                    failures.append(f"[{name}] {type(error).__name__}: {error}")
            if failures:
                listed = "\n".join(failures[:25]) + (f"\n... and {len(failures) - 25} more" if len(failures) > 25 else "")
                pytest.fail(f"{len(failures)} of {len(rows)} cases failed:\n{listed}", pytrace=False)

        test.__name__, test.__qualname__, test.__doc__ = check.__name__, check.__qualname__, check.__doc__
        test.__module__ = check.__module__
        return test

    return wrap


_FRESH_INTERPRETER = """
import importlib, json, sys
BLOCKED = {"numpy", "jax", "jaxlib", "matplotlib"}
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"{name} is blocked in this test")
sys.meta_path.insert(0, Block())
import scaling_lib.roofline, scaling_lib.estimate as estimate
report = {"math_layer_loads": sorted(m for m in sys.modules if m.startswith("scaling_lib.book"))}
from scaling_lib.book.exercises import checker, exercises
right, wrong = (checker.grade("ch4.kv-per-token-llama3-70b", answer) for answer in ("328", "656"))
report["page"] = [right.correct, wrong.correct, wrong.message, len(exercises()),
                  str(estimate.report("llama3-70b", "h100", 8, context_len=4096))]
report["loaded_while_blocked"] = sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED)
try:
    import numpy
    report["refused"] = ""
except ImportError as error:
    report["refused"] = str(error)
BLOCKED.difference_update({"numpy", "matplotlib"})  # JAX alone from here
for name in sys.argv[1:]:
    importlib.import_module(name)
import scaling_lib.book.exercises, scaling_lib.book.claims
print(json.dumps(report))
"""


@functools.cache
def fresh_interpreter() -> dict:
    """What a fresh Python does with numpy, JAX and matplotlib blocked from import (as in the page's Pyodide, where
    the answer boxes run): `math_layer_loads`, the scaling_lib.book modules that importing roofline and estimate
    loads; `page`, the checker's verdicts on a right and a wrong answer, the exercises' count and an estimate report;
    `loaded_while_blocked`; `refused`, the blocker's message for numpy. Then, with JAX alone blocked, it imports every
    closed-form module, the exercises and the claims (a failure raises here). One subprocess, run once for the tests
    of tests/test_architecture.py and tests/book/test_answer_boxes_library.py that need one."""
    import json
    import subprocess
    import sys

    modules = sorted(f"scaling_lib.{p.stem}" for p in (REPO / "scaling_lib").glob("*.py")
                     if p.stem not in ("__init__", "__main__"))
    result = subprocess.run([sys.executable, "-c", _FRESH_INTERPRETER, *modules], capture_output=True, text=True,
                            cwd=REPO, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.splitlines()[-1])
