"""Chapter 11, *How close do real systems come?*: its figures' checks."""

from ...calibration import all_rows, compare, out_of_sample, split_of
from ...estimate import BOUND, TYPICAL
from ...measurements import pope_rows, trtllm_rows
from .core import FigureDataError, close, figure_check


@figure_check(r"^TensorRT-LLM offline throughput, fp8")
def _ch11_fractions(suptitle, axes, *, trt_bound):
    left, right = axes
    bound = {c.row: c for c in (compare(row, BOUND) for row in trtllm_rows())}
    for name, rects in left.bars.items():
        rows = [c for c in trt_bound if c.label.rsplit(" ", 1)[0] == name]
        close([h for *_, h in rects], [1 / bound[c.row].ratio for c in rows], f"achieved fraction, {name}")
    pope = [compare(row, BOUND) for row in pope_rows()]
    close([h for rects in right.bars.values() for *_, h in rects], [1 / c.ratio for c in pope],
          "Pope et al.: achieved fraction")


@figure_check(r"^Typical estimate on every row it was not fitted on$")
def _ch11_held_out(suptitle, axes):
    """One scatter series per chip of every held-out comparison (the calibration's validation rows and the
    out-of-sample runs), predicted against measured, with the y = x line and the 1.5x band."""
    ax = axes[0]
    held_out = [compare(row, TYPICAL) for row in all_rows() if split_of(row) == "validation"]
    expected = {}
    for c in held_out + list(out_of_sample()):
        chip = c.row.chip if hasattr(c.row, "chip") else c.row.gpu
        expected.setdefault(chip, []).append((c.predicted, c.measured))
    if set(ax.points) != set(expected):
        raise FigureDataError(f"{ax.title}: series {sorted(ax.points)} instead of {sorted(expected)}")
    for label, points in expected.items():
        close(ax.points[label], points, f"{ax.title}: {label}")
    diagonal = ax.line(r"^y = x$")
    close(diagonal.y, diagonal.x, f"{ax.title}: y = x")
    band = ax.line(r"^1\.5x$")
    close(band.y, 1.5 * band.x, f"{ax.title}: the 1.5x band")
