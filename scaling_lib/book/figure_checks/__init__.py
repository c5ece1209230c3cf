"""Every figure of the book checks its own plotted data against the library before it is shown.

nbval compares a notebook's text outputs but not its PNGs, so a plotting bug (the wrong series, a unit off by 1e3, a
curve for the wrong chip) would never fail a test. Here each chapter figure has a check, found by its title, that
reads the data off the matplotlib artists (line x/y, bar heights, block rectangles: `capture`) and compares it with
values recomputed by `scaling_lib` (to 1e-9 relative, since both sides compute the same numbers). The checks run
only under the tests: the suite sets SCALING_BOOK_FIGURES=strict, and then `book.notebook.setup()` calls `install()`,
which wraps `plt.show` so the check runs when the figure is shown (a wrong figure raises in its cell, which fails
nbval), and a figure without a check raises too, so every figure is covered. A reader's session sets nothing: setup()
leaves `plt.show` alone and `show_figure` just shows, so a reader's figure, whatever its title, is never judged.

A check that needs the notebook's inputs (a config, a list of loads, the simulation results it plots) names them as
keyword-only parameters, and the notebook passes them where it shows the figure:

    show_figure(results=results, loads=LOADS)   # instead of plt.show()

A missing input is a `TypeError` naming the input and the check; nothing is read from the kernel's namespace. What a
check compares against is always a library computation, never the plotted array itself.

The framework is `core`; the checks live in one module per chapter (`ch01` ... `ch14`) and per appendix
(`appendix_your_model`, `appendix_worked`), each registering its checks on import.
"""

from . import (appendix_worked, appendix_your_model, ch01, ch02, ch03, ch04, ch05, ch06, ch07, ch08, ch09, ch10, ch11,
               ch12, ch13, ch14)
from .core import (CHECKS, RTOL, STRICT_ENV, Axes, Check, FigureDataError, Line, capture, check_figure, check_figures,
                   checking, checks_for, close, figure_check, install, show_figure)

CHAPTERS = (ch01, ch02, ch03, ch04, ch05, ch06, ch07, ch08, ch09, ch10, ch11, ch12, ch13, ch14, appendix_your_model,
            appendix_worked)

__all__ = ["CHAPTERS", "CHECKS", "RTOL", "STRICT_ENV", "Axes", "Check", "FigureDataError", "Line", "capture",
           "check_figure", "check_figures", "checking", "checks_for", "close", "figure_check", "install", "show_figure"]
