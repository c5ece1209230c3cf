"""Chapter 6, *Shrinking the KV cache*: its figures' checks."""

import re

from ...kv_levers import kv_lever_table, local_global_kv_bytes
from ...memory import kv_cache_bytes
from ...models import get_model
from .core import close, figure_check, number


@figure_check(r"^LLaMA-3-70B: local layers cap the cache")
def _ch6_local_global(suptitle, axes):
    ax = axes[0]
    full = ax.line(r"^all layers global$")
    close(full.y * 1e9, [kv_cache_bytes("llama3-70b", int(s)) for s in full.x], "all global")
    mixed = ax.line(r"^1 global layer in")
    every, window = (int(number(v)) for v in re.match(r"^1 global layer in (\d+), others w = ([\d,]+)$",
                                                        mixed.label).groups())
    close(mixed.y * 1e9, [local_global_kv_bytes("llama3-70b", int(s), window, every) for s in mixed.x], "mixed")
    local = ax.line(r"^all local, w = ")
    windowed = get_model("llama3-70b").with_(sliding_window=int(number(local.label.split("= ")[1])))
    close(local.y * 1e9, [kv_cache_bytes(windowed, int(s)) for s in local.x], "all local")


@figure_check(r"^LLaMA-2-13B, batch 64 up to 8,192 tokens: KV-cache levers$")
def _ch6_levers(suptitle, axes):
    ax = axes[0]
    rows = {row.lever: row for row in kv_lever_table("llama2-13b", 8192, batch=64)}
    names = ax.yticklabels
    close([w for _, _, w, _ in ax.bars["capacity (bytes stored)"]], [rows[n].stored_saving for n in names],
          "stored savings")
    close([w for _, _, w, _ in ax.bars["bandwidth (bytes read per step)"]], [rows[n].read_saving for n in names],
          "read savings")


@figure_check(r"^.*: a fixed state per sequence stops the cache's growth$")
def _ch6_state_lever(suptitle, axes, *, lever):
    ax = axes[0]
    hybrid = ax.line(r"^hybrid: ")
    close(hybrid.y * 1e9, [lever.hybrid_bytes(s) for s in hybrid.x], "hybrid")
    twin = ax.line(r"^all-attention twin")
    close(twin.y * 1e9, [lever.twin_bytes(s) for s in twin.x], "all-attention twin")
