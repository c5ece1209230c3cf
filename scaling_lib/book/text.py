"""Plain-text helpers with no dependency beyond the standard library, so that the exercise checker can use them in
the rendered page (Pyodide, no IPython): printed lines wrapped to the page's code column."""

import textwrap

PRINT_WIDTH = 76  # monospace characters the book's text column holds beside a code block's padding, phone aside


def wrap_text(text, width: int = PRINT_WIDTH) -> str:
    """`text` with every line longer than `width` wrapped at spaces, its continuation lines indented two spaces more
    than the line they continue: printed output that fits the page instead of scrolling sideways (issue 27).

    Used in chapter 2, *Sampling and the KV cache*; chapter 3, *Prefill and generation are different workloads*; chapter
    4, *The KV cache dominates memory*; chapter 5, *A model of the decode step*; chapter 6, *Shrinking the KV cache*;
    chapter 7, *Sharding prefill and generation*; chapter 8, *Partitioning layouts*; chapter 9, *Serving engines*;
    chapter 10, *Speculative decoding, mixture of experts and quantization*; chapter 11, *How close do real systems
    come?*; chapter 12, *Choosing a layout by the metric*; chapter 13, *Quantizing with Qwix*; chapter 14, *Serving
    details*; the appendix *Worked problems*; and the appendix *Apply the book to your model*.
    """
    out = []
    for line in str(text).split("\n"):
        indent = " " * (len(line) - len(line.lstrip(" ")))
        out.extend(textwrap.wrap(line, width, subsequent_indent=indent + "  ", break_long_words=False,
                                 break_on_hyphens=False) if len(line) > width else [line])
    return "\n".join(out)
