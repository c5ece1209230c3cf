"""Model shapes and parameter counting.

Symbols (book/notation.md): L layers, D model width, F feed-forward width, N query heads, K key/value heads,
H head dimension, V vocabulary, E experts, k active experts, G = N/K query heads per KV head.

Sources: LLaMA-2 (Touvron et al. 2023) and LLaMA-3 (Meta 2024) model cards, as quoted in the Scaling Book ch. 7;
PaLM (Chowdhery et al. 2022) as used by Pope et al. 2022.
"""

import re
from dataclasses import dataclass, fields, replace

from ._validate import flag, non_negative_int, positive_int
from .hf_config import read_config
from .mixers import SparseIndexer, StateMixer, mamba

_ALWAYS_SHOWN = ("n_layers", "d_model", "d_ff", "n_heads", "n_kv_heads", "head_dim", "vocab_size", "n_experts",
                 "n_active_experts", "tied_embeddings", "sliding_window", "name", "source")



@dataclass(frozen=True)
class Transformer:
    """A decoder-only transformer with a gated (SwiGLU-style) feed-forward block and grouped-query attention.

    n_kv_heads == n_heads is multi-head attention, 1 is multiquery, anything dividing n_heads is GQA.
    n_experts > 1 makes every feed-forward block a mixture of experts with n_active_experts routed per token
    (plus n_shared_experts every token uses); the first n_dense_layers keep a dense FFN of width d_ff_dense.
    sliding_window, when set, limits attention layers to the last `sliding_window` positions: all of them, or all
    but every global_every-th layer (Gemma's local/global pattern).
    kv_lora_rank set makes attention multi-head latent attention (MLA, DeepSeek-V2/V3): each token caches one
    latent of kv_lora_rank values plus one RoPE key of rope_head_dim values, shared by all heads; head_dim is the
    q/k width per head (its RoPE part included) and v_head_dim the value width.

    Real checkpoints are less uniform, and what their cost depends on is how many layers of each kind there are,
    never where they sit, so the rest of the structure is counts (chapter 6, *A fixed-size state*):
    - n_attention_layers of the n_layers have softmax attention and a KV cache (None: all of them); of the others,
      n_state_layers carry the recurrent mixer `state` (`mixers.StateMixer`: linear attention, DeltaNet, Mamba),
      a fixed-size state per sequence, and the rest have no token mixer (Nemotron-NAS's skipped attention);
    - global_layers: how many attention layers escape the sliding window when the local ones are not every
      global_every-th (Qwen's max_window_layers, Cohere's pattern read from layer_types); chunked_attention makes the
      local layers attend within fixed chunks of sliding_window tokens (Llama 4) instead of a sliding window;
    - n_ffn_layers of the layers have a feed-forward block (None: all; Nemotron-H's blocks hold either a mixer or
      an FFN); ffn_widths gives a dense model's per-layer widths when they differ (Nemotron-NAS); gated_ffn False is
      an FFN of two matrices (up, down: squared ReLU) instead of three;
    - n_mtp_layers: multi-token-prediction modules (DeepSeek-V3, GLM-4.5), counted apart (`mtp_param_count`), not
      in the model's parameters or its step; indexer: DeepSeek-V3.2's sparse-attention indexer (`mixers`).
    """

    n_layers: int
    d_model: int
    d_ff: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    vocab_size: int
    n_experts: int = 1
    n_active_experts: int = 1
    tied_embeddings: bool = False
    sliding_window: int | None = None
    name: str = "custom"
    source: str = ""
    # The structure of some real models (all default to a uniform decoder, so the book's examples ignore them):
    global_every: int | None = None  # with sliding_window: layers g-1, 2g-1, ... attend globally (None: none do)
    n_shared_experts: int = 0  # experts every token passes through on each MoE layer (DeepSeek-V3: 1)
    n_dense_layers: int = 0  # leading layers whose FFN is dense, of width d_ff_dense (DeepSeek-V3: 3)
    d_ff_dense: int | None = None
    kv_lora_rank: int | None = None  # multi-head latent attention (MLA): width of the cached latent c_KV
    q_lora_rank: int | None = None  # MLA: queries pass a low-rank bottleneck of this width (None: full-rank W_Q)
    rope_head_dim: int = 0  # MLA: the RoPE part of each q/k head, whose key is cached once for all heads
    v_head_dim: int | None = None  # width of a value head when it differs from head_dim (the q/k width)
    n_attention_layers: int | None = None  # layers with softmax attention and a KV cache (None: every layer)
    n_state_layers: int = 0  # layers whose token mixer is `state` (a fixed-size state per sequence)
    state: StateMixer | None = None
    global_layers: int | None = None  # with sliding_window: attention layers attending globally, when not periodic
    chunked_attention: bool = False  # local layers attend within chunks of sliding_window tokens (Llama 4)
    n_ffn_layers: int | None = None  # layers with a feed-forward block (None: every layer)
    ffn_widths: tuple | None = None  # a dense model's FFN width per FFN layer, when they differ (Nemotron-NAS)
    gated_ffn: bool = True  # False: an FFN of two matrices (up, down), not three
    n_mtp_layers: int = 0  # multi-token-prediction modules, counted apart (`mtp_param_count`)
    indexer: SparseIndexer | None = None  # DeepSeek-V3.2's sparse-attention indexer

    def __post_init__(self):
        for field_name in ("n_layers", "d_model", "d_ff", "n_heads", "n_kv_heads", "head_dim", "vocab_size",
                           "n_experts", "n_active_experts"):
            # NumPy integers are accepted and stored as Python ints, so the model stays hashable and prints cleanly.
            object.__setattr__(self, field_name, positive_int(field_name, getattr(self, field_name)))
        if self.n_heads % self.n_kv_heads:
            raise ValueError(
                f"n_kv_heads={self.n_kv_heads} does not divide n_heads={self.n_heads}; grouped-query attention "
                f"shares each KV head among n_heads / n_kv_heads query heads, so pick a divisor of {self.n_heads}"
            )
        if self.n_active_experts > self.n_experts:
            raise ValueError(
                f"n_active_experts={self.n_active_experts} exceeds n_experts={self.n_experts}; "
                "a token cannot be routed to more experts than exist"
            )
        for field_name in ("sliding_window", "global_every", "d_ff_dense", "kv_lora_rank", "q_lora_rank",
                           "v_head_dim"):
            value = getattr(self, field_name)
            if value is not None:
                try:
                    object.__setattr__(self, field_name, positive_int(field_name, value))
                except ValueError as err:
                    raise ValueError(f"{err} (a positive integer, or None)") from None
        for field_name in ("n_shared_experts", "n_dense_layers", "rope_head_dim"):
            object.__setattr__(self, field_name, non_negative_int(field_name, getattr(self, field_name)))
        object.__setattr__(self, "tied_embeddings", flag("tied_embeddings", self.tied_embeddings))
        for field_name in ("name", "source"):
            if not isinstance(getattr(self, field_name), str):
                raise ValueError(f"{field_name} must be a string, got {getattr(self, field_name)!r}")
        if self.global_every is not None and self.sliding_window is None:
            raise ValueError("global_every needs a sliding_window: it says which layers escape the window")
        if self.n_shared_experts and self.n_experts == 1:
            raise ValueError(f"n_shared_experts={self.n_shared_experts} on a dense model (n_experts=1); shared experts "
                             "belong to an MoE layer: set n_experts > 1 or drop them")
        if self.n_dense_layers > self.n_layers:
            raise ValueError(f"n_dense_layers={self.n_dense_layers} exceeds n_layers={self.n_layers}")
        if self.n_dense_layers and self.d_ff_dense is None:
            raise ValueError("n_dense_layers > 0 needs d_ff_dense, the width of those layers' dense FFN")
        if self.kv_lora_rank is None and (self.q_lora_rank is not None or self.rope_head_dim):
            raise ValueError("q_lora_rank and rope_head_dim describe multi-head latent attention: set kv_lora_rank too")
        if self.rope_head_dim >= self.head_dim:
            raise ValueError(f"rope_head_dim={self.rope_head_dim} must be smaller than head_dim={self.head_dim}, "
                             "which counts it")
        self._check_layer_kinds()

    def _check_layer_kinds(self):
        """The counts of a hybrid or heterogeneous model (class docstring) fit in its n_layers."""
        for field_name in ("n_attention_layers", "n_ffn_layers", "global_layers"):
            value = getattr(self, field_name)
            if value is not None:
                object.__setattr__(self, field_name, non_negative_int(field_name, value))
        object.__setattr__(self, "n_state_layers", non_negative_int("n_state_layers", self.n_state_layers))
        object.__setattr__(self, "n_mtp_layers", non_negative_int("n_mtp_layers", self.n_mtp_layers))
        for field_name in ("chunked_attention", "gated_ffn"):
            object.__setattr__(self, field_name, flag(field_name, getattr(self, field_name)))
        attention, ffn = self.attention_layers, self.ffn_layers
        if attention > self.n_layers or attention + self.n_state_layers > self.n_layers:
            raise ValueError(f"n_attention_layers={attention} and n_state_layers={self.n_state_layers} exceed "
                             f"n_layers={self.n_layers}: each layer has one token mixer (attention, a state, or none)")
        if attention + self.n_state_layers == 0:
            raise ValueError("a model with no attention layer and no state layer mixes no tokens: set "
                             "n_attention_layers > 0 or n_state_layers > 0")
        if (self.state is None) != (self.n_state_layers == 0):
            raise ValueError(f"n_state_layers={self.n_state_layers} with state={self.state!r}: give both (the count "
                             "and a mixers.StateMixer) or neither")
        if self.state is not None and not isinstance(self.state, StateMixer):
            raise ValueError(f"state must be a mixers.StateMixer (mixers.mamba2(...), ...), got {self.state!r}")
        if ffn > self.n_layers:
            raise ValueError(f"n_ffn_layers={ffn} exceeds n_layers={self.n_layers}")
        if self.n_dense_layers > ffn:
            raise ValueError(f"n_dense_layers={self.n_dense_layers} exceeds the {ffn} layers with a feed-forward block")
        if self.global_layers is not None:
            if self.sliding_window is None:
                raise ValueError("global_layers needs a sliding_window: it counts the layers that escape the window")
            if self.global_layers > attention:
                raise ValueError(f"global_layers={self.global_layers} exceeds the {attention} attention layers")
        if self.chunked_attention and self.sliding_window is None:
            raise ValueError("chunked_attention needs sliding_window, the chunk's length in tokens")
        if self.ffn_widths is not None:
            self._check_ffn_widths(ffn)
        if self.indexer is not None and (not self.is_mla or not isinstance(self.indexer, SparseIndexer)):
            raise ValueError(f"indexer={self.indexer!r}: DeepSeek's sparse-attention indexer is a mixers.SparseIndexer "
                             "on a model with latent attention (kv_lora_rank set)")

    def _check_ffn_widths(self, ffn: int):
        widths = self.ffn_widths
        if not isinstance(widths, (tuple, list)) or len(widths) != ffn:
            raise ValueError(f"ffn_widths must be a tuple of one width per feed-forward layer ({ffn}), got "
                             f"{widths!r}")
        widths = tuple(positive_int("ffn_widths[i]", w) for w in widths)
        if self.n_experts > 1 or self.n_dense_layers:
            raise ValueError("ffn_widths describes a dense model's layers; a mixture of experts uses d_ff (expert "
                             "width) and d_ff_dense (its dense layers)")
        if max(widths) != self.d_ff:
            raise ValueError(f"d_ff={self.d_ff} must be the largest of ffn_widths ({max(widths)}), the width one "
                             "FFN matrix has at most")
        object.__setattr__(self, "ffn_widths", widths)

    def __repr__(self) -> str:
        """The fields every model has, then only the structure fields that differ from a uniform decoder's."""
        shown = []
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in _ALWAYS_SHOWN or value != f.default:
                shown.append(f"{f.name}={value!r}")
        return f"Transformer({', '.join(shown)})"

    @property
    def group_size(self) -> int:
        """G = N / K, query heads per key/value head."""
        return self.n_heads // self.n_kv_heads

    @property
    def is_mla(self) -> bool:
        """True for multi-head latent attention (kv_lora_rank set)."""
        return self.kv_lora_rank is not None

    @property
    def value_head_dim(self) -> int:
        """Width of one value head: v_head_dim, or head_dim when they are equal."""
        return self.head_dim if self.v_head_dim is None else self.v_head_dim

    @property
    def attention_layers(self) -> int:
        """Layers with softmax attention and a KV cache: n_attention_layers, or every layer."""
        return self.n_layers if self.n_attention_layers is None else self.n_attention_layers

    @property
    def ffn_layers(self) -> int:
        """Layers with a feed-forward block: n_ffn_layers, or every layer."""
        return self.n_layers if self.n_ffn_layers is None else self.n_ffn_layers

    @property
    def n_global_layers(self) -> int:
        """Attention layers attending to the whole context: all of them without a window; with one, global_layers
        or every global_every-th layer (none when neither is set)."""
        if self.sliding_window is None:
            return self.attention_layers
        if self.global_layers is not None:
            return self.global_layers
        return 0 if self.global_every is None else self.attention_layers // self.global_every

    @property
    def n_moe_layers(self) -> int:
        """Layers whose FFN is a mixture of experts (0 for a dense model)."""
        return 0 if self.n_experts == 1 else self.ffn_layers - self.n_dense_layers

    @property
    def fine_grained_experts(self) -> bool:
        """True for a mixture of experts whose routed experts are narrower than the model (F < D): DeepSeekMoE's
        fine-grained segmentation splits each expert into narrower ones and routes every token through more of them
        (the DeepSeek-V2 paper, section 2.2). The estimate misses such models more widely than others, so it prints
        their own held-out spread (`efficiency.Profile.spread_on`; chapter 11)."""
        return self.n_experts > 1 and self.d_ff < self.d_model

    @property
    def ffn_matrices(self) -> int:
        """Matrices of D x F in one FFN (or expert): 3 gated (in, gate, out), 2 otherwise."""
        return 3 if self.gated_ffn else 2

    def with_(self, **changes) -> "Transformer":
        """A copy with some fields changed (validated again), e.g. `model.with_(n_kv_heads=8)`."""
        return replace(self, **changes)


@dataclass(frozen=True)
class ParamCount:
    """Parameters by block. `embeddings` counts the input table, plus the output projection unless tied; `state`
    the recurrent mixers of a hybrid's state layers."""

    attention: int
    feed_forward: int
    router: int
    embeddings: int
    state: int = 0

    @property
    def total(self) -> int:
        return self.attention + self.feed_forward + self.router + self.embeddings + self.state


def param_breakdown(model: Transformer, active_only: bool = False) -> ParamCount:
    """Count parameters by block.

    attention per attention layer: D*H*(2N + 2K) for standard attention (W_Q: D x NH, W_K and W_V: D x KH each,
        W_O: NH x D; with a value width H_v != H it is D N H + D K H + D K H_v + N H_v D); for MLA, W_Q (D N H, or
        D r_q + r_q N H through the q bottleneck) + W_DKV (D (r_kv + H_rope)) + W_UKV (r_kv N (H - H_rope + H_v)) +
        W_O (N H_v D), plus DeepSeek-V3.2's indexer (`mixers.SparseIndexer.params`); times the attention layers
    state: the recurrent mixer's weights (`mixers`) times the state layers
    feed-forward: m*D*F per expert (m = 3 gated: W_in, W_gate, W_out; 2 otherwise), times E (or k when active_only)
        plus the shared experts, on each MoE layer; m*D*F_dense on each dense layer of a mixture of experts; for a
        dense model m*D*F on each FFN layer (m*D*sum(ffn_widths) when the widths differ)
    router per MoE layer: D*E when E > 1
    embeddings: V*D for the input table, plus V*D for the output projection when untied.
    Norm gains and biases (O(L*D), under 0.01% of any model here) are not counted; multi-token-prediction modules
    neither (`mtp_param_count`).

    Defined in chapter 4, *The KV cache dominates memory*.
    """
    m = get_model(model)
    flag("active_only", active_only)
    d, n, h, hv = m.d_model, m.n_heads, m.head_dim, m.value_head_dim
    if m.is_mla:
        w_q = d * n * h if m.q_lora_rank is None else d * m.q_lora_rank + m.q_lora_rank * n * h
        attention = w_q + d * (m.kv_lora_rank + m.rope_head_dim) + m.kv_lora_rank * n * (h - m.rope_head_dim + hv)
        attention += n * hv * d + (0 if m.indexer is None else m.indexer.params(d, m.q_lora_rank))
    else:
        attention = d * n * h + d * m.n_kv_heads * (h + hv) + n * hv * d
    per_width = m.ffn_matrices * d  # weights per unit of FFN width: 3 D gated, 2 D otherwise
    if m.ffn_widths is not None:  # a dense model whose FFN widths differ by layer
        feed_forward = per_width * sum(m.ffn_widths)
    else:
        experts = (m.n_active_experts if active_only else m.n_experts) + m.n_shared_experts
        feed_forward = (m.ffn_layers - m.n_dense_layers) * per_width * m.d_ff * experts
        feed_forward += m.n_dense_layers * per_width * m.d_ff_dense if m.n_dense_layers else 0
    router = m.n_moe_layers * d * m.n_experts
    embeddings = m.vocab_size * d * (1 if m.tied_embeddings else 2)
    state = m.n_state_layers * (m.state.params if m.state is not None else 0)
    return ParamCount(m.attention_layers * attention, feed_forward, router, embeddings, state)


def mtp_param_count(model: Transformer) -> int:
    """Weights of the multi-token-prediction modules (DeepSeek-V3's MTP, GLM-4.5's next-n layers), not counted in
    `param_count`: each is one more decoder layer (attention and a mixture-of-experts FFN with every expert, or the
    dense FFN of a dense model: `param_breakdown` of that one layer) plus the projection of [hidden; embedding] to
    D (2 D x D); the embedding table and the output projection are the main model's, shared. DeepSeek-V3: 11.6B,
    which with its own copies of the shared embedding and head in the checkpoint is the card's "14B of MTP module
    weights"."""
    m = get_model(model)
    if not m.n_mtp_layers:
        return 0
    layer = param_breakdown(m.with_(n_layers=1, n_attention_layers=None, n_state_layers=0, state=None,
                                    n_ffn_layers=None, n_dense_layers=0, ffn_widths=None, global_layers=None,
                                    global_every=None, sliding_window=None, chunked_attention=False,
                                    d_ff=max(m.ffn_widths) if m.ffn_widths else m.d_ff))
    return m.n_mtp_layers * (layer.attention + layer.feed_forward + layer.router + 2 * m.d_model * m.d_model)


def param_count(model: Transformer) -> int:
    """Total parameters, counting every expert and both embedding tables (one if tied); see `param_breakdown`.

    Defined in chapter 4, *The KV cache dominates memory*.
    """
    return param_breakdown(model).total


def active_param_count(model: Transformer) -> int:
    """Parameters one token touches: like `param_count` but with k of the E experts. Equal for dense models."""
    return param_breakdown(model, active_only=True).total


_LLAMA_CARD = "Scaling Book ch. 7 (LLaMA model card values)"
_PALM = "Chowdhery et al. 2022 (PaLM), as used by Pope et al. 2022; SwiGLU, multiquery, d_ff = 4 D, tied embeddings"
MODELS = {
    "llama2-13b": Transformer(n_layers=40, d_model=5120, d_ff=13824, n_heads=40, n_kv_heads=40, head_dim=128,
                              vocab_size=32000, name="llama2-13b", source=_LLAMA_CARD),
    "llama3-8b": Transformer(n_layers=32, d_model=4096, d_ff=14336, n_heads=32, n_kv_heads=8, head_dim=128,
                             vocab_size=128256, name="llama3-8b", source=_LLAMA_CARD),
    "llama3-70b": Transformer(n_layers=80, d_model=8192, d_ff=28672, n_heads=64, n_kv_heads=8, head_dim=128,
                              vocab_size=128256, name="llama3-70b", source=_LLAMA_CARD),
    "palm-8b": Transformer(n_layers=32, d_model=4096, d_ff=16384, n_heads=16, n_kv_heads=1, head_dim=256,
                           vocab_size=256000, tied_embeddings=True, name="palm-8b", source=_PALM),
    "palm-62b": Transformer(n_layers=64, d_model=8192, d_ff=32768, n_heads=32, n_kv_heads=1, head_dim=256,
                            vocab_size=256000, tied_embeddings=True, name="palm-62b", source=_PALM),
    "palm-540b": Transformer(n_layers=118, d_model=18432, d_ff=73728, n_heads=48, n_kv_heads=1, head_dim=256,
                             vocab_size=256000, tied_embeddings=True, name="palm-540b", source=_PALM),
}


def model_names() -> tuple:
    """Canonical names of every model in the table."""
    return tuple(MODELS)


# Other spellings readers use: Hugging Face repository ids, dashes, "-instruct" suffixes. `_canonical` folds case,
# an organisation prefix, separators and common suffixes away before this table is read.
ALIASES = {
    "llama3.18b": "llama3-8b", "llama3.170b": "llama3-70b", "llama3.370b": "llama3-70b",
    "metallama38b": "llama3-8b", "metallama370b": "llama3-70b", "llama3.1405b": "llama3.1-405b",
    "mixtral8x7b": "mixtral-8x7b", "mixtral8x7bv0.1": "mixtral-8x7b", "qwen3235ba22b": "qwen3-235b-a22b",
    "deepseekv3": "deepseek-v3",
}
_SUFFIXES = ("instruct", "chat", "hf", "base", "fp8", "v0.1")


def _canonical(name: str) -> str:
    """'meta-llama/Llama-3.1-8B-Instruct' -> 'llama3.18b': no organisation, case, separators or common suffixes."""
    key = name.strip().lower().rsplit("/", 1)[-1]
    for separator in ("-", "_", " "):
        key = key.replace(separator, "")
    stripped = True
    while stripped:  # "...-instruct-fp8": peel suffixes until none is left
        stripped = False
        for suffix in _SUFFIXES:
            if key.endswith(suffix) and len(key) > len(suffix):
                key, stripped = key[:-len(suffix)], True
    return key


def get_model(name) -> Transformer:
    """Look a model up by name: case, separators, an organisation prefix and suffixes such as "-Instruct" do not
    matter ("llama-2-13b", "meta-llama/Llama-3.1-8B" work). A `Transformer` passes through unchanged."""
    if isinstance(name, Transformer):
        return name
    if not isinstance(name, str):
        raise ValueError(f"model must be a name or a Transformer, got {name!r}")
    if name.strip().lower() in MODELS:
        return MODELS[name.strip().lower()]
    key = _canonical(name)
    table = {_canonical(known): known for known in MODELS}
    table.update({alias: target for alias, target in ALIASES.items()})
    if key not in table:
        raise ValueError(f"unknown model {name!r}; known models: {', '.join(MODELS)} (other spellings such as "
                         "'llama-2-13b' or 'meta-llama/Llama-3.1-8B' work too; build your own with "
                         "scaling_lib.models.Transformer(...) or models.from_hf_config('config.json'))")
    return MODELS[table[key]]


# The model the Scaling Book ch. 7 invents for its worked problems ("based on LLaMA-2 13B"): 64 layers, D = 4,096,
# F = 4 D, 32 query heads, 8 KV heads of dimension 256, a 32,128-token vocabulary. Its answers count the embedding
# once (D x V), so it is stored with tied embeddings: 18.4e9 parameters dense, 212e9 as a 16-expert top-2 MoE.
MODELS["sb7-worked"] = Transformer(n_layers=64, d_model=4096, d_ff=16384, n_heads=32, n_kv_heads=8, head_dim=256,
                                   vocab_size=32128, tied_embeddings=True, name="sb7-worked",
                                   source="Scaling Book ch. 7, worked problems (model 'based on LLaMA-2 13B')")


# Pope et al. 2022 (sec. 4.2, Table 1) compare PaLM 540B with a multihead variant of about the same size: every one
# of the 48 query heads keeps its own key/value head, and the head dimension is halved (256 -> 128) so the attention
# weights stay roughly the same size (5.2e10 vs 5.5e10 parameters). Its KV cache is 48 x 128 / 256 = 24x PaLM's.
_PALM_540B = MODELS["palm-540b"]
MODELS["palm-540b-multihead"] = _PALM_540B.with_(
    n_kv_heads=_PALM_540B.n_heads, head_dim=128, name="palm-540b-multihead",
    source="Pope et al. 2022, sec. 4.2 / Table 1: PaLM 540B's multihead comparison model, 48 heads x 128 head dim",
)


# Models the book's measurements and readers' questions need (each a `from_hf_config` of its published config.json;
# tests/math/test_hf_config.py checks the parameter totals against the model cards).
_HF = "Hugging Face config.json of {} (model card: {} parameters)"
MODELS["llama3.1-405b"] = Transformer(n_layers=126, d_model=16384, d_ff=53248, n_heads=128, n_kv_heads=8,
                                      head_dim=128, vocab_size=128256, name="llama3.1-405b",
                                      source=_HF.format("meta-llama/Llama-3.1-405B", "405B"))
MODELS["mixtral-8x7b"] = Transformer(n_layers=32, d_model=4096, d_ff=14336, n_heads=32, n_kv_heads=8, head_dim=128,
                                     vocab_size=32000, n_experts=8, n_active_experts=2, name="mixtral-8x7b",
                                     source=_HF.format("mistralai/Mixtral-8x7B-v0.1", "46.7B total, 12.9B active"))
MODELS["qwen3-235b-a22b"] = Transformer(n_layers=94, d_model=4096, d_ff=1536, n_heads=64, n_kv_heads=4, head_dim=128,
                                        vocab_size=151936, n_experts=128, n_active_experts=8, name="qwen3-235b-a22b",
                                        source=_HF.format("Qwen/Qwen3-235B-A22B", "235B total, 22B active"))
MODELS["deepseek-v3"] = Transformer(n_layers=61, d_model=7168, d_ff=2048, n_heads=128, n_kv_heads=128, head_dim=192,
                                    vocab_size=129280, n_experts=256, n_active_experts=8, n_shared_experts=1,
                                    n_dense_layers=3, d_ff_dense=18432, kv_lora_rank=512, q_lora_rank=1536,
                                    rope_head_dim=64, v_head_dim=128, n_mtp_layers=1, name="deepseek-v3",
                                    source=_HF.format("deepseek-ai/DeepSeek-V3", "671B total, 37B active; its "
                                                      "multi-token-prediction module counted apart"))

# The calibration rows of chapter 11 also measured these (book/data/hf_configs/ holds their configs;
# tests/math/test_calibration.py checks `from_hf_config` of each file gives the same shapes).
MODELS["llama2-7b"] = Transformer(n_layers=32, d_model=4096, d_ff=11008, n_heads=32, n_kv_heads=32, head_dim=128,
                                  vocab_size=32000, name="llama2-7b",
                                  source=_HF.format("meta-llama/Llama-2-7b-hf", "6.7B"))
MODELS["llama2-70b"] = Transformer(n_layers=80, d_model=8192, d_ff=28672, n_heads=64, n_kv_heads=8, head_dim=128,
                                   vocab_size=32000, name="llama2-70b",
                                   source=_HF.format("meta-llama/Llama-2-70b-hf", "69B"))
MODELS["mixtral-8x22b"] = Transformer(n_layers=56, d_model=6144, d_ff=16384, n_heads=48, n_kv_heads=8, head_dim=128,
                                      vocab_size=32768, n_experts=8, n_active_experts=2, name="mixtral-8x22b",
                                      source=_HF.format("mistralai/Mixtral-8x22B-v0.1", "141B total, 39B active"))
ALIASES.update({"mixtral8x22b": "mixtral-8x22b", "mixtral8x22bv0.1": "mixtral-8x22b"})

# A hybrid for chapter 6's state lever: Jamba-v0.1 keeps softmax attention in 4 of its 32 layers (every 8th, from the
# 5th) and a Mamba state in the other 28 (D_in = 2 D, N_s = 16, a 4-wide convolution, step rank D / 16); a 16-expert
# top-2 FFN on every other layer, dense FFNs of the same width between (book/data/hf_configs/jamba-v0.1.json).
MODELS["jamba-v0.1"] = Transformer(n_layers=32, d_model=4096, d_ff=14336, n_heads=32, n_kv_heads=8, head_dim=128,
                                   vocab_size=65536, n_experts=16, n_active_experts=2, n_dense_layers=16,
                                   d_ff_dense=14336, n_attention_layers=4, n_state_layers=28,
                                   state=mamba(4096, 8192, 16, 4, 256), name="jamba-v0.1",
                                   source=_HF.format("ai21labs/Jamba-v0.1", "52B total, 12B active"))

# ----------------------------------------------------------------------------------------------- your own model
@dataclass(frozen=True)
class HfConfig:
    """What a Hugging Face config says besides the shape: the weight format its `quantization_config` stores (None:
    unquantized, the checkpoint's bf16 or fp16; a `dtypes.MixedWeights` with bytes per weight group), the KV-cache
    format it names (None: none), its `max_position_embeddings` (None when absent), the family it was read as and
    notes for the report (a text tower read alone, a model_type read as its architecture, the formats' split)."""

    model: Transformer
    weight_dtype: str | None
    max_position_embeddings: int | None
    kv_dtype: str | None = None
    family: str = ""
    notes: tuple = ()

    def check_positions(self, tokens: int, argument: str) -> None:
        """A ValueError naming `argument` when `tokens` exceed max_position_embeddings (no limit when absent)."""
        if self.max_position_embeddings is not None and tokens > self.max_position_embeddings:
            raise ValueError(f"argument {argument}: {tokens:,} tokens exceed max_position_embeddings="
                             f"{self.max_position_embeddings:,} of {self.model.name}'s config, the longest sequence "
                             "it was built for; use a shorter one")


def read_hf_config(path_or_dict) -> HfConfig:
    """A Hugging Face config (a file, a model folder, a Hugging Face cache entry or the parsed dict) read by
    architecture (`hf_config`): the `Transformer`, the checkpoint's formats, its position limit and notes. Behind
    `python -m scaling_lib estimate --config` and `plan --config`, which default the weights (and the KV cache) to
    those formats and refuse a longer context."""
    reading = read_config(path_or_dict)
    try:
        model = Transformer(**reading.fields, name=reading.name,
                            source=f"Hugging Face config.json ({reading.origin}), read as {reading.family}")
    except ValueError as err:  # a combination the model's own checks refuse: say which config.json fields those are
        named = [f"{field} is {hf!r}" for field, hf in reading.hf_names.items() if re.search(rf"\b{field}\b",
                                                                                             str(err))]
        raise ValueError(f"{err} (in {reading.where}, where {', '.join(named)})" if named else
                         f"{err} (in {reading.where})") from None
    return HfConfig(model=model, weight_dtype=reading.weight_dtype, max_position_embeddings=reading.max_positions,
                    kv_dtype=reading.kv_dtype, family=reading.family, notes=reading.notes)


def from_hf_config(path_or_dict) -> Transformer:
    """A `Transformer` from a Hugging Face `config.json` (a path, the model's folder, a Hugging Face cache entry
    models--org--name or one of its snapshots, or the parsed dict), read by architecture, not by label
    (`hf_config`): model_type and architectures resolved together and refused when they disagree; a multimodal
    wrapper's text tower; every field that changes the math read or refused by name. Named from `_name_or_path`,
    else the cache entry's repository id, else the architecture class, never a folder's name.

    Families read (`hf_families.READERS`): LLaMA and its kin (InternLM2/3, OLMo 2, Granite, EXAONE, Cohere and
    Cohere 2, ChatGLM/GLM-4), Mistral, Mixtral, Phi-3 and Phi-3.5-MoE, Qwen2/3 and their MoE, Gemma 1-3, gpt-oss,
    DeepSeek-V2/V3/V3.2 and Kimi K2 (latent attention), GLM-4.5, Llama 4 (chunked attention), the hybrids Qwen3-Next,
    MiniMax-M1, Jamba and Nemotron-H (a fixed-size state per sequence: `mixers`), Llama-Nemotron (NAS), and the
    text towers of Gemma 3, Llama 4, Qwen2-VL/2.5-VL/3-VL, Mistral 3 and LLaVA. A field this book cannot represent,
    a missing one, one of the wrong JSON type (sizes are integers; flags are true or false, never the strings
    "true"/"false"), or values that make no model raise ValueError naming the field and the file."""
    return read_hf_config(path_or_dict).model


def tiny_transformer(n_kv_heads: int = 2, sliding_window=None, n_heads: int = 4, n_layers: int = 2,
                     vocab_size: int = 256) -> Transformer:
    """The shape of the book's tiny JAX decoder (`tiny.model.tiny_config` returns it): D = 64, F = 128, heads of
    H = 16; n_kv_heads = n_heads is MHA, fewer is GQA, 1 is MQA. A shape, not a published model: the closed-form
    library prices it for the exercises that predict what the tiny model's compiled programs do."""
    return Transformer(n_layers=n_layers, d_model=64, d_ff=128, n_heads=n_heads, n_kv_heads=n_kv_heads, head_dim=16,
                       vocab_size=vocab_size, sliding_window=sliding_window, name="tiny")
