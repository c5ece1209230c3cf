"""The set-up every notebook of the book starts with (in a folded cell):

    from scaling_lib.book.notebook import setup

    setup()

It gives JAX 8 emulated CPU devices (or, with SCALING_BOOK_DEVICES=accelerator, the real TPUs or GPUs it can see),
applies the book's plotting style, and makes inline figures PNG (nbval compares no pixels). It prints nothing, so
every chapter's first output is its own, and it changes nothing else in the reader's session: the figure checks
(scaling_lib.book.figure_checks) are switched on only when the tests set SCALING_BOOK_FIGURES.
"""

from ..tiny.xla import setup_devices
from .figure_checks import checking as figures_are_checked
from .figure_checks import install as check_figures_when_shown
from .plotting import apply_style


def setup(devices: int = 8) -> str:
    """Devices, plot style and figure format for a chapter notebook; returns the device mode ("cpu" or
    "accelerator"). Call it first, before any JAX computation.

    `devices`: how many CPU devices to emulate (`tiny.xla.setup_devices`). The sharded demos need 8: chapters 7, 8
    and 10 build meshes of 8 devices (2 x 4, 2 x 2 x 2, 8), chapter 14 one of 4. With SCALING_BOOK_DEVICES=accelerator
    in the environment nothing is emulated and `devices` is unused: the notebooks run on the GPUs or TPUs JAX sees,
    and those chapters need 8 of them (a cell that builds a larger mesh than there are devices stops with an error
    saying how many it needs). Chapter 1's roofline experiment and chapter 11's decode sweep use one device and size
    their calls to it (`tiny.measure`)."""
    mode = setup_devices(devices)
    apply_style()
    if figures_are_checked():  # under the tests only: a figure's data is compared with the library when shown
        check_figures_when_shown()
    try:
        from matplotlib_inline.backend_inline import set_matplotlib_formats  # noqa: PLC0415 - a kernel's only
    except ImportError:  # optional: plain Python (tests, scripts) has no inline backend to configure
        return mode
    set_matplotlib_formats("png")
    return mode
