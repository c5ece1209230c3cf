"""The book's tests, mirroring the package: math/ (closed form), tiny/ (JAX), book/ (the book's tooling and build)."""

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

    cases, given = [], list(cases)
    names = [str(name) for name in ids] if not callable(ids) else [None] * len(given)
    for i, case in enumerate(given):
        if isinstance(case, type(pytest.param(None))):  # pytest.param(values..., id=...): its values, its id
            if case.marks:
                raise TypeError(f"for_each takes no marks ({case.marks}); parametrize that test instead")
            names[i] = case.id if case.id is not None else names[i]
            case = case.values if len(case.values) > 1 else case.values[0]
        cases.append(case)
        if names[i] is None:
            names[i] = ids(case)

    def wrap(check):
        unpack = len(inspect.signature(check).parameters) > 1

        def test():
            failures = []
            for name, case in zip(names, cases, strict=True):
                try:
                    check(*case) if unpack else check(case)
                except (Exception, pytest.fail.Exception) as error:  # every failing case is named, then the test fails
                    failures.append(f"[{name}] {type(error).__name__}: {error}")
            if failures:
                listed = "\n".join(failures[:25]) + (f"\n... and {len(failures) - 25} more" if len(failures) > 25 else "")
                pytest.fail(f"{len(failures)} of {len(cases)} cases failed:\n{listed}", pytrace=False)

        test.__name__, test.__qualname__, test.__doc__ = check.__name__, check.__qualname__, check.__doc__
        test.__module__ = check.__module__
        test.cases = cases
        return test

    return wrap
