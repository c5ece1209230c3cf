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
