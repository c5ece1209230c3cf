"""Shrinking the KV cache: what each lever saves, in bytes stored and bytes read per decode step.

Every decode step reads every cached key and value of every sequence (Scaling Book ch. 7), so the KV cache costs
twice: HBM capacity (how many sequences fit) and HBM bandwidth (the B x KV / W_hbm term of the step time). The levers
the Scaling Book lists {cite}`scalingbook`, each changing one factor of  B x S x 2 L K H x bytes:
  GQA / MQA             fewer KV heads K (a model choice, `Transformer.n_kv_heads`);
  local attention       a layer keeps only the last w tokens: S -> min(S, w), often on most but not all layers;
  cross-layer sharing   s consecutive layers share one K/V: stored L -> ceil(L / s); each layer still attends over
                        it, so the bytes READ per step need not fall (unless the shared KV stays on chip between layers);
  quantization          bytes per element: bf16 2 -> int8 / fp8 1 -> int4 0.5;
  paged attention       a ragged batch stores and reads sum ceil(len_b / block) x block slots instead of B x S_max;
  latent attention      (MLA, DeepSeek-V2/V3) cache one compressed latent per token and layer instead of K heads'
                        keys and values: 2 K H -> r_kv + H_rope values (`memory.kv_bytes_per_token` handles it), paid
                        for with more attention FLOPs per cached token (`decode_attention_cost`);
  a fixed-size state    (hybrids: linear attention, DeltaNet, Mamba) most layers keep a state that does not grow
                        with S instead of a cache that does: L -> L_attn in the term that grows, plus M_state per
                        sequence (`state_lever`, `mixers`).
`kv_footprint` applies any combination; `kv_lever_table` costs them one at a time and together.
"""

import math
from dataclasses import dataclass

from ._validate import MAX_REQUESTS, at_most, flag, non_negative_int, positive, positive_int
from .dtypes import bytes_per_element
from .memory import kv_bytes_per_token, state_bytes_per_sequence
from .models import get_model


def _lengths(lengths):
    if isinstance(lengths, (str, bytes)) or not hasattr(lengths, "__iter__"):
        lengths = [lengths]
    lengths = [non_negative_int(f"lengths[{i}]", n) for i, n in enumerate(lengths)]
    if not lengths:
        raise ValueError("lengths must list at least one sequence length")
    return lengths


@dataclass(frozen=True)
class RaggedReads:
    """KV slots (tokens x layers x heads omitted: one slot = one token) a decode step touches for a ragged batch."""
    useful_slots: int  # sum_b len_b: tokens actually cached
    contiguous_slots: int  # B x max_b len_b: a rectangular cache read whole
    paged_slots: int  # sum_b ceil(len_b / block) x block: whole blocks

    @property
    def contiguous_padding(self) -> float:
        """Fraction of a contiguous read that is padding: 1 - useful / contiguous."""
        return 1.0 - self.useful_slots / self.contiguous_slots if self.contiguous_slots else 0.0

    @property
    def paged_padding(self) -> float:
        """Fraction of a paged read that is padding (the unfilled tail of each last block)."""
        return 1.0 - self.useful_slots / self.paged_slots if self.paged_slots else 0.0


def ragged_kv_reads(lengths, block_size: int) -> RaggedReads:
    """Slots read by one decode step over sequences of the given lengths: contiguous B x S_max versus paged
    sum ceil(len / block_size) x block_size (PagedAttention, {cite}`kwon2023paged`; Scaling Book ch. 7).

    Defined in chapter 6, *Shrinking the KV cache*.
    """
    lengths = _lengths(lengths)
    block_size = positive_int("block_size", block_size)
    return RaggedReads(useful_slots=sum(lengths), contiguous_slots=len(lengths) * max(lengths),
                       paged_slots=sum(math.ceil(n / block_size) * block_size for n in lengths))


@dataclass(frozen=True)
class KVBytes:
    """KV cache of a whole batch: bytes held in HBM and bytes one decode step reads."""
    stored_bytes: float
    read_bytes: float


def kv_footprint(model, lengths, dtype: str = "bf16", window: int | None = None, global_every: int | None = None,
                 share_every: int = 1, block_size: int | None = None) -> KVBytes:
    """Bytes stored and read per decode step by the KV cache of sequences of `lengths` tokens, for any mix of levers.

    Per layer and token: 2 K H x bytes(dtype) (K from the model: pass `model.with_(n_kv_heads=...)` for GQA/MQA).
    Tokens per sequence and layer: len on a global layer, min(len, w) on a local one (w = `window`, or the model's
    sliding_window); with `global_every = g`, layers g-1, 2g-1, ... stay global and the others are local
    (None: all local when a window is set). Storage: one cache per group of `share_every` consecutive layers
    (cross-layer sharing); reads: every layer reads the cache it attends to. Without `block_size`, each sequence
    is padded to the longest (a rectangular cache); with it, to whole blocks (paged).
    """
    m = get_model(model)
    lengths = _lengths(lengths)
    if window is None and global_every is None:
        global_every = m.global_every  # the model's own local/global pattern (None for most models)
    window = m.sliding_window if window is None else positive_int("window", window)
    if global_every is not None:
        global_every = positive_int("global_every", global_every)
    share_every = positive_int("share_every", share_every)
    if block_size is not None:
        block_size = positive_int("block_size", block_size)
    per_token_layer = kv_bytes_per_token(m, dtype) / m.n_layers

    def slots(kept):  # tokens held for each sequence on one layer
        if block_size is None:
            return len(kept) * max(kept)
        return sum(math.ceil(n / block_size) * block_size for n in kept)

    layer_bytes = []
    for layer in range(m.n_layers):
        is_global = window is None or (global_every is not None and (layer + 1) % global_every == 0)
        kept = lengths if is_global else [min(n, window) for n in lengths]
        layer_bytes.append(slots(kept) * per_token_layer)
    # A sharing group stores one cache, as long as its longest-reaching layer needs (a global layer in the group
    # keeps every token).
    stored = sum(max(layer_bytes[i:i + share_every]) for i in range(0, m.n_layers, share_every))
    return KVBytes(stored_bytes=stored, read_bytes=sum(layer_bytes))


def _batch(batch) -> int:
    return at_most("batch", positive_int("batch", batch), MAX_REQUESTS, "the footprint lists one length per sequence")


def local_global_kv_bytes(model, tokens: int, window: int, global_every: int, batch: int = 1,
                          dtype: str = "bf16") -> float:
    """KV bytes of `batch` sequences of `tokens` tokens when every `global_every`-th layer attends globally and the
    rest only to the last `window` tokens: B x 2 K H bytes x (L_global S + L_local min(S, w)).

    Defined in chapter 6, *Shrinking the KV cache*.
    """
    return kv_footprint(model, [non_negative_int("tokens", tokens)] * _batch(batch), dtype,
                        positive_int("window", window), positive_int("global_every", global_every)).stored_bytes


def cross_layer_kv_bytes(model, tokens: int, share_every: int, batch: int = 1, dtype: str = "bf16") -> KVBytes:
    """KV stored and read when groups of `share_every` consecutive layers share one K/V: storage falls by about
    share_every x, reads per decode step do not (each layer still attends over the shared cache).

    Defined in chapter 6, *Shrinking the KV cache*.
    """
    return kv_footprint(model, [non_negative_int("tokens", tokens)] * _batch(batch), dtype,
                        share_every=positive_int("share_every", share_every))


@dataclass(frozen=True)
class LeverRow:
    """One lever (or a combination) applied to a baseline: the batch's KV bytes stored and read per step."""
    lever: str
    setting: str
    stored_bytes: float
    read_bytes: float
    baseline_stored: float
    baseline_read: float

    @property
    def stored_saving(self) -> float:
        """Baseline over lever bytes stored (2.0 = halves the cache)."""
        return self.baseline_stored / self.stored_bytes

    @property
    def read_saving(self) -> float:
        """Baseline over lever bytes read per decode step."""
        return self.baseline_read / self.read_bytes


def evenly_ragged_lengths(context_len: int, batch: int) -> list:
    """A ragged batch for costing paging: lengths (b + 1) / B x S for b = 0..B-1, rounded up (mean about S / 2)."""
    context_len, batch = positive_int("context_len", context_len), positive_int("batch", batch)
    at_most("batch", batch, MAX_REQUESTS, "it lists one length per sequence")
    return [-(-(b + 1) * context_len // batch) for b in range(batch)]


def kv_lever_table(model, context_len: int, batch: int, n_kv_heads: int = 8, window: int = 1024,
                   global_every: int = 6, share_every: int = 2, kv_dtype: str = "int8",
                   block_size: int = 16) -> tuple:
    """Each lever alone on `model` (bf16 KV, a rectangular cache), then all together, as `LeverRow`s.

    The batch is ragged (`evenly_ragged_lengths`: up to `context_len` tokens); the baseline pads every sequence to
    the longest. Settings are illustrative, not from a source: GQA to `n_kv_heads` (if the model has more) and MQA,
    local attention of `window` tokens on all but every `global_every`-th layer, cross-layer sharing in groups of
    `share_every`, `kv_dtype` entries, pages of `block_size` tokens.

    Defined in chapter 6, *Shrinking the KV cache*.
    """
    m = get_model(model)
    lengths = evenly_ragged_lengths(context_len, batch)
    bytes_per_kv = bytes_per_element(kv_dtype)
    n_kv_heads, window = positive_int("n_kv_heads", n_kv_heads), positive_int("window", window)
    global_every, share_every = positive_int("global_every", global_every), positive_int("share_every", share_every)
    block_size = positive_int("block_size", block_size)
    base = kv_footprint(m, lengths)
    levers = []
    if n_kv_heads < m.n_kv_heads:
        levers.append(("GQA", f"K = {m.n_kv_heads} -> {n_kv_heads}", dict(model=m.with_(n_kv_heads=n_kv_heads))))
    if m.n_kv_heads > 1:
        levers.append(("MQA", f"K = {m.n_kv_heads} -> 1", dict(model=m.with_(n_kv_heads=1))))
    levers += [
        ("local attention", f"w = {window:,}, 1 global layer in {global_every}",
         dict(window=window, global_every=global_every)),
        ("cross-layer sharing", f"{share_every} layers per K/V", dict(share_every=share_every)),
        ("KV quantization", f"bf16 -> {kv_dtype} ({bytes_per_kv:g} B)", dict(dtype=kv_dtype)),
        ("paged attention", f"blocks of {block_size} tokens, ragged batch", dict(block_size=block_size)),
    ]
    rows = []
    combined = dict(model=m)
    for lever, setting, kwargs in levers:
        args = dict(model=m) | kwargs
        fp = kv_footprint(args.pop("model"), lengths, **args)
        rows.append(LeverRow(lever, setting, fp.stored_bytes, fp.read_bytes, base.stored_bytes, base.read_bytes))
        if lever != "MQA":
            combined |= kwargs
    fp = kv_footprint(combined.pop("model"), lengths, **combined)
    rows.append(LeverRow("all of the above", "every lever but MQA", fp.stored_bytes, fp.read_bytes,
                         base.stored_bytes, base.read_bytes))
    return tuple(rows)


@dataclass(frozen=True)
class AttentionCost:
    """One decode token's attention over its cached context, summed over the layers: FLOPs and KV bytes read."""

    flops: float
    kv_bytes: float

    @property
    def intensity(self) -> float:
        """FLOPs per byte of cache read: compare with the chip's ridge point C / W_hbm (chapter 1)."""
        return self.flops / self.kv_bytes


def decode_attention_cost(model, context_len: int, kv_dtype: str = "bf16", absorbed: bool = True) -> AttentionCost:
    """FLOPs and KV bytes of one decode token's attention to `context_len` cached tokens (all layers).

    Standard (GQA/MQA/MHA) attention: 2 N (H + H_v) FLOPs per cached token and layer (scores and the weighted sum
    of values; 4 N H when H_v = H) for L K (H + H_v) x bytes read: intensity about G = N / K in bf16 (chapter 3).
    Multi-head latent attention (MLA, DeepSeek-V2 {cite}`deepseekv2`) caches r_kv latent values and H_rope RoPE-key
    values per token and layer. With the up-projections absorbed into the query and output (the usual decode
    kernel), every head scores against the latent and sums latents: 2 N (r_kv + H_rope) + 2 N r_kv FLOPs per cached
    token and layer, for (r_kv + H_rope) x bytes. Not absorbed, each step first re-expands every cached latent into
    per-head keys and values: 2 r_kv N (H - H_rope + H_v) more FLOPs per cached token and layer.
    The fixed per-token projections (W_Q, W_O, the absorbed matrices) are left out: they do not grow with context.

    Defined in chapter 6, *Shrinking the KV cache*.
    """
    m = get_model(model)
    positive("context_len", context_len)
    absorbed = flag("absorbed", absorbed)
    n = m.n_heads
    if m.is_mla:
        r, rope = m.kv_lora_rank, m.rope_head_dim
        per_token = 2 * n * (r + rope) + 2 * n * r
        if not absorbed:
            per_token = 2 * n * (m.head_dim + m.value_head_dim) + 2 * r * n * (m.head_dim - rope + m.value_head_dim)
    else:
        per_token = 2 * n * (m.head_dim + m.value_head_dim)
    flops = m.attention_layers * context_len * per_token
    return AttentionCost(flops=float(flops), kv_bytes=kv_bytes_per_token(m, kv_dtype) * context_len)


@dataclass(frozen=True)
class StateLever:
    """A hybrid beside its all-attention twin (the same layers and heads, softmax attention in each layer that has a
    token mixer), per
    sequence: the fixed state (`state_bytes`, M_state), the KV per token of the hybrid's attention layers and of the
    twin's; bytes per sequence at S tokens are S x KV + M_state for the hybrid and S x KV_twin for the twin."""

    state_bytes: float
    kv_bytes_per_token: float
    twin_kv_bytes_per_token: float

    @property
    def crossover_tokens(self) -> float:
        """S_state = M_state / (KV_twin - KV): the context above which the hybrid's sequence holds fewer bytes than
        the twin's, M_state / (2 L_state K H b_kv) for a state in every non-attention layer."""
        return self.state_bytes / (self.twin_kv_bytes_per_token - self.kv_bytes_per_token)

    def hybrid_bytes(self, tokens: float) -> float:
        """Bytes one sequence of `tokens` tokens holds in the hybrid: its attention layers' KV and its state."""
        return positive("tokens", tokens, allow_zero=True) * self.kv_bytes_per_token + self.state_bytes

    def twin_bytes(self, tokens: float) -> float:
        """Bytes one sequence of `tokens` tokens holds in the all-attention twin: KV in every layer."""
        return positive("tokens", tokens, allow_zero=True) * self.twin_kv_bytes_per_token


def state_lever(model, kv_dtype: str = "bf16") -> StateLever:
    """The lever that removes the cache's growth: a hybrid (`models.Transformer` with state layers, `mixers`) beside
    its all-attention twin (softmax attention with the hybrid's heads in every layer that mixes tokens, no state). Per sequence the hybrid
    holds S x 2 L_attn K H b_kv + M_state, the twin S x 2 L K H b_kv, so the hybrid holds less past
    S_state = M_state / (2 (L - L_attn) K H b_kv) tokens (`StateLever.crossover_tokens`). M_state is in the engines'
    bf16 (`memory.state_bytes_per_sequence`); the KV in `kv_dtype`.

    Defined in chapter 6, *Shrinking the KV cache*.
    """
    m = get_model(model)
    if not m.n_state_layers:
        raise ValueError(f"model {m.name!r} has no state layers (n_state_layers=0): the state lever compares a hybrid "
                         "with its all-attention twin; read a hybrid (Jamba, Qwen3-Next, MiniMax-M1, Nemotron-H) or "
                         "build one with Transformer(n_attention_layers=..., n_state_layers=..., state=...)")
    twin = m.with_(n_attention_layers=m.attention_layers + m.n_state_layers, n_state_layers=0, state=None)
    return StateLever(state_bytes=state_bytes_per_sequence(m), kv_bytes_per_token=kv_bytes_per_token(m, kv_dtype),
                      twin_kv_bytes_per_token=kv_bytes_per_token(twin, kv_dtype))
