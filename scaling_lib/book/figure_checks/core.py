"""The framework of the figure checks: reading a figure's data off its artists, the registry of checks by title,
running them with the inputs the notebook passes, and the `plt.show` wrapper.

A check is a function `check(suptitle, axes, *, input_a, input_b)` registered with `@figure_check(title_pattern)`;
its keyword-only parameters are the inputs it needs from the notebook (a config, the simulation results it plots),
none of them with a default. The notebook passes them when it shows the figure, `show_figure(input_a=...)`; a
missing input is a `TypeError` naming the input and the check, and an input that no check of the shown figures takes
is one too, so renaming a variable in a chapter fails that chapter's cell instead of switching its check off.
"""

import inspect
import os
import re
from dataclasses import dataclass, field

import matplotlib.pyplot as plt
import numpy as np

STRICT_ENV = "SCALING_BOOK_FIGURES"
RTOL = 1e-9


class FigureDataError(AssertionError):
    """A figure's plotted data disagrees with the library (or, in strict mode, has no check)."""


# ---------------------------------------------------------------------------------------------- reading a figure
@dataclass
class Line:
    label: str  # "" for an unlabelled line
    x: np.ndarray
    y: np.ndarray
    color: tuple


@dataclass
class Axes:
    title: str
    lines: list
    bars: dict  # container label -> [(x, y, width, height)] of its rectangles
    blocks: list  # rectangles drawn as patches outside bar containers: (x, y, width, height, text inside)
    xticklabels: list
    yticklabels: list
    points: dict = field(default_factory=dict)  # scatter label -> [N, 2] offsets
    raw: object = field(repr=False, default=None)

    def line(self, pattern: str) -> Line:
        found = [line for line in self.lines if re.search(pattern, line.label)]
        if len(found) != 1:
            raise FigureDataError(f"figure '{self.title}': expected one line labelled like {pattern!r}, found "
                                  f"{[line.label for line in found] or 'none'}")
        return found[0]


def capture(fig) -> tuple:
    """(suptitle, [Axes]) with every line, bar and rectangle of the figure as plain arrays."""
    suptitle = fig.get_suptitle()
    out = []
    for ax in fig.axes:
        lines = [Line("" if line.get_label().startswith("_") else line.get_label(),
                      np.asarray(line.get_xdata(), float), np.asarray(line.get_ydata(), float),
                      tuple(np.round(plt.matplotlib.colors.to_rgba(line.get_color()), 6)))
                 for line in ax.get_lines()]
        bars, in_bars = {}, set()
        for container in ax.containers:
            rects = [(p.get_x(), p.get_y(), p.get_width(), p.get_height()) for p in container.patches]
            bars[container.get_label()] = rects
            in_bars.update(id(p) for p in container.patches)
        texts = [(t.get_position(), t.get_text()) for t in ax.texts]
        blocks = []
        for patch in ax.patches:
            if id(patch) in in_bars or not hasattr(patch, "get_width"):
                continue
            x, y, w, h = patch.get_x(), patch.get_y(), patch.get_width(), patch.get_height()
            inside = [s for (tx, ty), s in texts if x <= tx <= x + w and y <= ty <= y + h]
            blocks.append((x, y, w, h, inside[0] if inside else ""))
        points = {c.get_label(): np.asarray(c.get_offsets(), float) for c in ax.collections
                  if hasattr(c, "get_offsets") and not c.get_label().startswith("_")}
        out.append(Axes(ax.get_title(), lines, bars, blocks, [t.get_text() for t in ax.get_xticklabels()],
                        [t.get_text() for t in ax.get_yticklabels()], points, ax))
    return suptitle, out


def close(actual, expected, what: str, rtol: float = RTOL):
    """Raise FigureDataError unless the arrays agree to rtol (and have the same length)."""
    actual, expected = np.asarray(actual, float), np.asarray(expected, float)
    if actual.shape != expected.shape:
        raise FigureDataError(f"{what}: plotted {actual.shape[0] if actual.ndim else 1} values, expected "
                              f"{expected.shape[0] if expected.ndim else 1}")
    if not np.allclose(actual, expected, rtol=rtol, atol=0):
        worst = int(np.argmax(np.abs(actual - expected) / np.maximum(np.abs(expected), 1e-300)))
        raise FigureDataError(f"{what}: plotted {actual.flat[worst]!r} where the library gives "
                              f"{expected.flat[worst]!r} (point {worst})")


def vline(line: Line) -> float:
    """Where a vertical line (axvline) stands."""
    return float(line.x[0])


def hline(line: Line) -> float:
    """Where a horizontal line (axhline) stands."""
    return float(line.y[0])


def number(text: str) -> float:
    """A number as a title writes it, thousands separated by commas ("8,192")."""
    return float(text.replace(",", ""))


# ---------------------------------------------------------------------------------------------- the registry
@dataclass(frozen=True)
class Check:
    pattern: re.Pattern
    function: object
    inputs: tuple  # the names of its keyword-only parameters: what the notebook must pass

    @property
    def name(self) -> str:
        return f"{self.function.__module__.rsplit('.', 1)[-1]}.{self.function.__name__}"


CHECKS = []  # every registered Check, in registration (chapter) order


def figure_check(pattern: str):
    """Register a check for the figures whose suptitle or any axes title matches `pattern` (re.search). The check's
    keyword-only parameters are its inputs; none may have a default (a default would be a silent fallback)."""
    def register(function):
        parameters = list(inspect.signature(function).parameters.values())
        positional = [p for p in parameters if p.kind is not p.KEYWORD_ONLY]
        inputs = tuple(p.name for p in parameters if p.kind is p.KEYWORD_ONLY)
        if len(positional) != 2:
            raise TypeError(f"figure check {function.__name__} must take (suptitle, axes, *, inputs...)")
        defaulted = [p.name for p in parameters if p.kind is p.KEYWORD_ONLY and p.default is not p.empty]
        if defaulted:
            raise TypeError(f"figure check {function.__name__}: inputs {defaulted} have defaults; a check's inputs "
                            "are required (the notebook passes them to show_figure)")
        CHECKS.append(Check(re.compile(pattern), function, inputs))
        return function
    return register


def checks_for(suptitle: str, axes: list) -> list:
    """The registered Checks whose pattern matches the suptitle or an axes title."""
    titles = [suptitle] + [a.title for a in axes]
    return [check for check in CHECKS if any(check.pattern.search(t) for t in titles if t)]


def _titles(suptitle: str, axes: list) -> list:
    return [t for t in [suptitle] + [a.title for a in axes] if t]


def check_figures(figures, inputs: dict | None = None, strict: bool | None = None) -> int:
    """Run every check matching each figure, each given the inputs it names; returns how many ran.

    FigureDataError on a mismatch, or, when strict (default: SCALING_BOOK_FIGURES=strict), when a figure has no
    check. TypeError when a check's input is missing from `inputs`, or (when strict) when an input is taken by none
    of the checks.
    """
    strict = os.environ.get(STRICT_ENV, "") == "strict" if strict is None else strict
    inputs = dict(inputs or {})
    ran, used = 0, set()
    for fig in figures:
        suptitle, axes = capture(fig)
        found = checks_for(suptitle, axes)
        if not found and strict:
            raise FigureDataError(f"figure {_titles(suptitle, axes)} has no data check; add one to the chapter's "
                                  "module of scaling_lib.book.figure_checks")
        for check in found:
            missing = [name for name in check.inputs if name not in inputs]
            if missing:
                raise TypeError(f"figure check {check.name} (figure {_titles(suptitle, axes)}) needs the input(s) "
                                f"{missing}: pass them when the figure is shown, show_figure({missing[0]}=...)")
            check.function(suptitle, axes, **{name: inputs[name] for name in check.inputs})
            used.update(check.inputs)
            ran += 1
    unused = sorted(set(inputs) - used)
    if unused and strict:  # a reader who retitles a chapter's figure is left alone, as with a figure of their own
        raise TypeError(f"input(s) {unused} are taken by no check of the figures shown; check the names against the "
                        "checks' parameters in scaling_lib.book.figure_checks")
    return ran


def check_figure(fig, inputs: dict | None = None, strict: bool | None = None) -> int:
    """`check_figures` of one figure."""
    return check_figures([fig], inputs, strict)


_ORIGINAL_SHOW = None


def _open_figures() -> list:
    return [plt.figure(number) for number in plt.get_fignums()]


def checking() -> bool:
    """Whether figures are checked when shown: only when SCALING_BOOK_FIGURES is set in the environment (the test
    suite sets it to "strict", so nbval checks every figure of every notebook). A reader's session never sets it, so
    a figure a reader draws, whatever its title and data, shows as it is."""
    return bool(os.environ.get(STRICT_ENV, ""))


def show_figure(**inputs):
    """Show the open figures (`matplotlib.pyplot.show`), first checking each, its checks given these inputs, when
    `checking()`.

    A chapter shows a figure whose check needs the notebook's data with, e.g., `show_figure(results=results)`."""
    if checking():
        check_figures(_open_figures(), inputs)
    return (_ORIGINAL_SHOW or plt.show)()


def install():
    """Check every figure when it is shown (wraps `matplotlib.pyplot.show`; idempotent). A figure shown with plain
    `plt.show()` is checked with no inputs, so a check that needs some raises, naming them. `notebook.setup()` calls
    it only when `checking()`: under the tests, never in a reader's session."""
    global _ORIGINAL_SHOW
    if _ORIGINAL_SHOW is not None:
        return
    _ORIGINAL_SHOW = plt.show

    def show(*args, **kwargs):
        check_figures(_open_figures())
        return _ORIGINAL_SHOW(*args, **kwargs)

    plt.show = show
