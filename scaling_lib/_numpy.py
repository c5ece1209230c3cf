"""NumPy, imported on first use: `from ._numpy import np` in a module that needs NumPy only inside its functions.

The closed-form modules, the exercise checker and `estimate` must import where NumPy is absent (the rendered book runs
them in the page, in Pyodide, with the standard library only); the simulators import this module at the top and
NumPy itself the first time one of them runs. Such a module starts with `from __future__ import annotations` so that
its `np.ndarray` annotations are never evaluated at import.
"""


class _LazyNumpy:
    """Stands for the numpy module: the first attribute read imports NumPy, then each name is kept on this object."""

    def __getattr__(self, name):
        import numpy  # noqa: PLC0415 - on first use: the page (Pyodide) runs the math without NumPy

        value = getattr(numpy, name)
        setattr(self, name, value)
        return value

    def __repr__(self):
        return "<numpy, imported on first use>"


np = _LazyNumpy()
