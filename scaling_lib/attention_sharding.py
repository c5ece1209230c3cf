"""Attention sharding for multiquery attention in a decode step, and the collectives it needs (Pope et al. 2022,
sec. 3.3, Fig. 4).

ATTENTION_SHARDINGS: "heads" splits attention by heads (a multiquery model's one KV head is then replicated on every
chip: no communication, but every chip holds the whole cache); "batch" splits the KV cache by sequence, at the cost of
two all-to-alls per attention layer that move the queries into batch sharding and the outputs back
(`sharding.kv_cache_sharding` counts them). `context_limits.max_context_length` prices what each sharding lets fit;
`tiny.layouts` executes both and checks these collectives against the compiled HLO.
"""

import math

from ._validate import choice, positive_int, torus_mesh
from .collectives import Collective
from .dtypes import bytes_per_element
from .sharding import kv_cache_sharding

ATTENTION_SHARDINGS = ("heads", "batch")


def attention_collectives(attention_sharding: str, batch: int, n_heads: int, head_dim: int, mesh_shape,
                          activation_dtype: str = "bf16") -> tuple:
    """The collectives of one multiquery attention layer in a decode step (Pope et al. sec. 3.3, Fig. 4).

    The projections leave q [B, N, H] split over heads on all n chips. "heads": the one KV head is replicated on every
    chip and each chip attends with its N/n heads: no communication. "batch": the KV cache is split over the batch,
    so q is resharded to [B/n, N, H] by an all-to-all and the output returned to head sharding by a second one; each
    moves the chip's b_a B N H / n block (sharding.kv_cache_sharding counts the two all-to-alls).
    """
    choice("attention_sharding", attention_sharding, ATTENTION_SHARDINGS)
    for name, value in (("batch", batch), ("n_heads", n_heads), ("head_dim", head_dim)):
        positive_int(name, value)
    group = torus_mesh(mesh_shape)
    n = math.prod(group)
    if attention_sharding == "heads" or n == 1:
        return ()
    count = kv_cache_sharding(1, batch, n).all_to_alls_per_attention_layer  # one KV head: the rest splits B
    block = bytes_per_element(activation_dtype) * batch * n_heads * head_dim / n
    return tuple(Collective("all-to-all", "activations", block, group) for _ in range(count))
