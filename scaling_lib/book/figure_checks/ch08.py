"""Chapter 8, *Partitioning layouts*: its figures' checks."""

from ...layouts import comm_volume_curves, ffn_comm_time, ffn_comm_volume
from ...tiny.layouts import FFN_SPECS
from ...tiny.xla import device_blocks
from .ch07 import blocks_match, blocks_tile
from .core import close, figure_check, vline


@figure_check(r"^Which device holds which block, per layout")
def _ch8_layout_blocks(suptitle, axes, *, mesh, tokens, d_model, d_ff):
    fields = {"x as stored [T, D]": "x", "W_in as stored [D, F]": "w_in", "W_in in the matmul [D, F]": "w_in_used"}
    for ax in axes:
        if not ax.title:
            continue
        blocks_tile(ax)
        layout, panel = ax.title.split(": ", 1)
        shape = (tokens, d_model) if fields[panel] == "x" else (d_model, d_ff)
        blocks_match(ax, device_blocks(getattr(FFN_SPECS[layout], fields[panel]), shape, mesh=mesh))


@figure_check(r"^Communication volume per layer, PaLM 540B, 4x4x4$")
def _ch8_comm(suptitle, axes, *, chip):
    volume_ax, time_ax = axes
    for line in volume_ax.lines:
        if line.label in ("1d-ws", "2d-ws", "wg-x", "wg-xy", "wg-xyz"):
            close(line.y * 1e6, [ffn_comm_volume(line.label, "palm-540b", t, (4, 4, 4)).total_bytes for t in line.x],
                  f"volume of {line.label}")
            close(time_ax.line(f"^{line.label}$").y / 1e3,
                  [ffn_comm_time(line.label, "palm-540b", chip, t, (4, 4, 4)) for t in line.x], f"time of {line.label}")
    cheapest = volume_ax.line(r"^cheapest$")
    layouts = ("1d-ws", "2d-ws", "wg-x", "wg-xy", "wg-xyz")
    close(cheapest.y * 1e6, [min(ffn_comm_volume(name, "palm-540b", t, (4, 4, 4)).total_bytes for name in layouts)
                             for t in cheapest.x], "the cheapest layout")
    switches = comm_volume_curves("palm-540b", (4, 4, 4), list(cheapest.x)).switch_points
    drawn = sorted(vline(line) for line in volume_ax.lines if not line.label and len(line.x) == 2
                   and line.x[0] == line.x[1])
    close(drawn, sorted(p.tokens for p in switches), "switch points")
