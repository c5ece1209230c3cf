"""The book's tests, mirroring the package: math/ (closed form), tiny/ (JAX), book/ (the book's tooling and build)."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
