"""Plain-text helpers with no dependency beyond the standard library, so that the exercise checker can use them in
the rendered page (Pyodide, no IPython): printed lines wrapped to the page's code column."""

import sys
import textwrap

PRINT_WIDTH = 76  # monospace characters the book's text column holds beside a code block's padding, phone aside


def wrap_text(text, width: int = PRINT_WIDTH) -> str:
    """`text` with every line longer than `width` wrapped at spaces, its continuation lines indented two spaces more
    than the line they continue: printed output that fits the page instead of scrolling sideways (issue 27)."""
    out = []
    for line in str(text).split("\n"):
        indent = " " * (len(line) - len(line.lstrip(" ")))
        out.extend(textwrap.wrap(line, width, subsequent_indent=indent + "  ", break_long_words=False,
                                 break_on_hyphens=False) if len(line) > width else [line])
    return "\n".join(out)


def print_text(text: str) -> None:
    """print(text), and on a terminal whose encoding cannot write a character of it (an ASCII-only locale, a reader's
    answer with a lone surrogate) the same text with those characters as backslash escapes, never an exception."""
    try:
        print(text)
    except UnicodeEncodeError:
        encoding = getattr(sys.stdout, "encoding", None) or "ascii"
        print(text.encode(encoding, "backslashreplace").decode(encoding, "replace"))
