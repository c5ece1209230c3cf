"""The book's tests, mirroring the package: math/ (closed form), tiny/ (JAX), book/ (the book's tooling and build)."""

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# Property tests draw `examples(n)` Hypothesis examples each (derandomized: the same ones on every run). `make test`
# and `make mutation` set SCALING_BOOK_FUZZ=thorough and draw all n; the seconds-long inner loop
# (`pytest -m "not tiny"`) draws a fifth of them (at least 5), which still includes each strategy's first listed
# edge values, since Hypothesis tries the simplest examples first.
FUZZ_ENV = "SCALING_BOOK_FUZZ"
THOROUGH = os.environ.get(FUZZ_ENV, "").strip().lower() == "thorough"


def examples(thorough: int) -> int:
    """Hypothesis examples for a property that the thorough run (`make test`) checks on `thorough` examples."""
    return thorough if THOROUGH else max(5, thorough // 5)
