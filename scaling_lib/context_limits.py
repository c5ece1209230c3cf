"""How long a context fits: the KV cache against the weights, and the longest context by attention sharding.

Pope et al. 2022 ("Efficiently Scaling Transformer Inference", sec. 3.3 and Table 1): a multihead model's KV cache
outgrows its weights at large batch and long context (claim P2: 3 TB for PaLM 540B at batch 512 and 2,048 tokens,
about three times the weights), and how the cache is sharded over chips sets the longest context that fits in a share
of each chip's HBM (claim P3). Sharding attention by KV heads splits the cache K ways at most, so a multiquery model's
single KV head is replicated on every chip; sharding it by batch splits the sequences instead
(`attention_sharding.attention_collectives` counts what that resharding moves). Symbols as in book/notation.md:
B batch, S context, L layers, K KV heads, H head dimension.
"""

import math
from dataclasses import dataclass

from ._validate import choice, fraction, items, positive, positive_int
from .attention_sharding import ATTENTION_SHARDINGS
from .hardware import get_chip
from .memory import kv_bytes_per_token, kv_cache_bytes, param_bytes
from .models import get_model


@dataclass(frozen=True)
class KvVersusWeights:
    kv_bytes: float
    weight_bytes: float

    @property
    def ratio(self) -> float:
        return self.kv_bytes / self.weight_bytes


def kv_versus_weights(model, batch: int, context_len: int, kv_dtype: str = "bf16",
                      weight_dtype: str = "bf16") -> KvVersusWeights:
    """Claim P2: B x S x 2 L K H bytes of KV cache against the weight bytes (Pope et al. sec. 2.1).

    Defined in chapter 8, *Partitioning layouts*.
    """
    positive("context_len", context_len, allow_zero=True)
    return KvVersusWeights(kv_cache_bytes(model, context_len, batch, kv_dtype), param_bytes(model, weight_dtype))


def max_context_length(model, chip, n_chips: int, batch: int, attention_sharding: str, kv_fraction: float = 0.3,
                       kv_dtype: str = "bf16") -> int:
    """Longest context whose KV cache fits in kv_fraction of each chip's HBM (Pope et al. sec. 3.3, Table 1).

    S_max = floor(kv_fraction x HBM / (sequences per chip x 2 L x heads per chip x H x bytes)), with
      "heads": KV heads split over chips, ceil(K / n) per chip (a multiquery head is replicated on every chip;
               48 multihead heads on 64 chips take one each, as if padded to 64), every chip holds all B sequences;
      "batch": sequences split over chips, ceil(B / n) per chip, all K heads each.

    Defined in chapter 8, *Partitioning layouts*.
    """
    m, chip = get_model(model), get_chip(chip)
    choice("attention_sharding", attention_sharding, ATTENTION_SHARDINGS)
    n_chips, batch = positive_int("n_chips", n_chips), positive_int("batch", batch)
    fraction("kv_fraction", kv_fraction, "the share of HBM kept for the KV cache")
    if attention_sharding == "heads":
        heads, sequences = math.ceil(m.n_kv_heads / n_chips), batch
    else:
        heads, sequences = m.n_kv_heads, math.ceil(batch / n_chips)
    per_token = kv_bytes_per_token(m, kv_dtype) * heads / m.n_kv_heads
    return int(kv_fraction * chip.hbm_capacity // (sequences * per_token))


@dataclass(frozen=True)
class ContextLengthRow:
    variant: str
    model: str
    attention_sharding: str
    head_dim: int
    batches: tuple
    context_lengths: tuple


def context_length_table(chip="tpu-v4", n_chips: int = 64, batches=(128, 512), kv_fraction: float = 0.3) -> tuple:
    """Claim P3, Pope et al. Table 1: multihead, multiquery sharded over heads, multiquery sharded over batch.

    Defined in chapter 8, *Partitioning layouts*.
    """
    if isinstance(batches, (str, bytes)) or not hasattr(batches, "__iter__") or not list(batches):
        raise ValueError(f"batches must list at least one batch size, e.g. (128, 512), got {batches!r}")
    batches = items("batches", batches, positive_int)
    variants = (("multihead", "palm-540b-multihead", "heads"), ("baseline multiquery", "palm-540b", "heads"),
                ("optimized multiquery", "palm-540b", "batch"))
    return tuple(ContextLengthRow(label, name, sharding, get_model(name).head_dim, tuple(batches),
                                  tuple(max_context_length(name, chip, n_chips, b, sharding, kv_fraction)
                                        for b in batches))
                 for label, name, sharding in variants)
