"""The book's numeric exercises, one module per chapter (`chNN.py`), each registering `Exercise`s on import.

Every expected value is a call into scaling_lib, evaluated when the reader checks an answer.
"""

import importlib
import pkgutil


def load_all() -> None:
    """Import every chapter module in this package (each registers its exercises)."""
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda module: module.name):
        importlib.import_module(f"{__name__}.{info.name}")
