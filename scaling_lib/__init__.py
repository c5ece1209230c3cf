"""scaling_lib: the math (and, in `model` and `mesh`, the tiny JAX programs) behind the book.

Pure-Python modules, importable without JAX: dtypes, hardware, models, roofline, memory, inference, units, exercises.
"""

from . import dtypes, exercises, hardware, inference, memory, models, roofline, units  # noqa: F401
from .exercises import check  # noqa: F401
from .hardware import get_chip  # noqa: F401
from .models import get_model  # noqa: F401

__version__ = "0.1.0"
