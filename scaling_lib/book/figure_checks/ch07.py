"""Chapter 7, *Sharding prefill and generation* (and the device-block helpers chapter 8 shares): its figures' checks."""

import re

from ...models import get_model
from ...sharding import beta, decode_step_components, max_decode_model_parallelism
from ...tiny.sharding import named
from ...tiny.xla import device_blocks
from .core import FigureDataError, close, figure_check, number, vline


def blocks_tile(ax):
    """The rectangles of a device-block panel tile the array once and every device holds part of it."""
    if not ax.blocks:
        raise FigureDataError(f"{ax.title}: no blocks drawn")
    width = max(x + w for x, _, w, _, _ in ax.blocks) - min(x for x, _, _, _, _ in ax.blocks)
    height = max(y + h for _, y, _, h, _ in ax.blocks) - min(y for _, y, _, _, _ in ax.blocks)
    close(sum(w * h for _, _, w, h, _ in ax.blocks), width * height, f"{ax.title}: blocks tile the array once")


def blocks_match(ax, blocks, shade_prefix=""):
    """The drawn rectangles are exactly `blocks` (from xla.device_blocks), each labelled with its devices."""
    drawn = sorted((round(y), round(y + h), round(x), round(x + w)) for x, y, w, h, _ in ax.blocks)
    expected = sorted((b.rows[0], b.rows[1], b.cols[0], b.cols[1]) for b in blocks)
    if drawn != expected:
        raise FigureDataError(f"{ax.title}: drew blocks {drawn}, the sharding has {expected}")


@figure_check(r"^Megatron decode on 8 devices: who holds which block")
def _ch7_megatron_blocks(suptitle, axes, *, mesh, specs, params, cache):
    """The notebook's `mesh`, its Megatron `specs` (weights', cache's PartitionSpecs), `params` and KV `cache`."""
    for ax in axes:
        blocks_tile(ax)
    params_sh, cache_sh = (named(mesh, tree) for tree in specs)
    panels = ((params_sh.wq, params.wq.shape, (1, 2)), (params_sh.w_down, params.w_down.shape, (1, 2)),
              (cache_sh.k, cache.k.shape, (1, 3)))
    for ax, (sharding, shape, dims) in zip(axes, panels):
        blocks_match(ax, device_blocks(sharding, shape, dims))


@figure_check(r"^\S+: LLaMA-3-70B, B=\d+, S=[\d,]+$")
def _ch7_components(suptitle, axes, *, tori):
    llama = get_model("llama3-70b")
    for ax in axes:
        chip, batch, context = re.match(r"^(\S+): LLaMA-3-70B, B=(\d+), S=([\d,]+)$", ax.title).groups()
        batch, context = int(batch), int(number(context))
        shapes = tori[chip]  # the notebook's {chip: {chip count: torus shape}}
        total = ax.line(r"^total$")
        chips = [int(n) for n in total.x]
        parts = [decode_step_components(llama, chip, n, batch, context, mesh_shape=shapes[n],
                                        check_capacity=False)
                 for n in chips]
        for label, attribute in (("weights (HBM)", "weights_s"), ("KV cache (HBM)", "kv_s"), ("FLOPs", "flops_s"),
                                 ("ICI collectives", "ici_s"), ("total", "total_s")):
            close(ax.line(f"^{re.escape(label)}$").y, [getattr(p, attribute) * 1e3 for p in parts],
                  f"{ax.title}: {label}")
        close(vline(ax.line(r"^F/\(B beta\)")), max_decode_model_parallelism(llama.d_ff, batch, beta(chip)),
              f"{ax.title}: F/(B beta)")
