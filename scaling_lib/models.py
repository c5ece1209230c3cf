"""Model shapes and parameter counting.

Symbols (book/notation.md): L layers, D model width, F feed-forward width, N query heads, K key/value heads,
H head dimension, V vocabulary, E experts, k active experts, G = N/K query heads per KV head.

Sources: LLaMA-2 (Touvron et al. 2023) and LLaMA-3 (Meta 2024) model cards, as quoted in the Scaling Book ch. 7;
PaLM (Chowdhery et al. 2022) as used by Pope et al. 2022.
"""

import json
from dataclasses import dataclass, fields, replace
from pathlib import Path, PurePath

from ._validate import flag, non_negative_int, positive_int

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
    def n_global_layers(self) -> int:
        """Layers attending to the whole context: all of them without a window; every global_every-th with one."""
        if self.sliding_window is None:
            return self.n_layers
        return 0 if self.global_every is None else self.n_layers // self.global_every

    @property
    def n_moe_layers(self) -> int:
        """Layers whose FFN is a mixture of experts (0 for a dense model)."""
        return 0 if self.n_experts == 1 else self.n_layers - self.n_dense_layers

    def with_(self, **changes) -> "Transformer":
        """A copy with some fields changed (validated again), e.g. `model.with_(n_kv_heads=8)`."""
        return replace(self, **changes)


@dataclass(frozen=True)
class ParamCount:
    """Parameters by block. `embeddings` counts the input table, plus the output projection unless tied."""

    attention: int
    feed_forward: int
    router: int
    embeddings: int

    @property
    def total(self) -> int:
        return self.attention + self.feed_forward + self.router + self.embeddings


def param_breakdown(model: Transformer, active_only: bool = False) -> ParamCount:
    """Count parameters by block.

    attention per layer: D*H*(2N + 2K) for standard attention (W_Q: D x NH, W_K and W_V: D x KH each, W_O: NH x D;
        with a value width H_v != H it is D N H + D K H + D K H_v + N H_v D); for MLA, W_Q (D N H, or D r_q + r_q N H
        through the q bottleneck) + W_DKV (D (r_kv + H_rope)) + W_UKV (r_kv N (H - H_rope + H_v)) + W_O (N H_v D)
    feed-forward: 3*D*F per expert (gated: W_in, W_gate, W_out), times E (or k when active_only) plus the shared
        experts, on each MoE layer; 3*D*F_dense on each of the n_dense_layers leading dense layers
    router per MoE layer: D*E when E > 1
    embeddings: V*D for the input table, plus V*D for the output projection when untied.
    Norm gains and biases (O(L*D), under 0.01% of any model here) are not counted.

    Used in chapter 4, *The KV cache dominates memory*; the appendix *Worked problems*; and the appendix *Apply the book
    to your model*.
    """
    m = get_model(model)
    flag("active_only", active_only)
    d, n, h, hv = m.d_model, m.n_heads, m.head_dim, m.value_head_dim
    if m.is_mla:
        w_q = d * n * h if m.q_lora_rank is None else d * m.q_lora_rank + m.q_lora_rank * n * h
        attention = w_q + d * (m.kv_lora_rank + m.rope_head_dim) + m.kv_lora_rank * n * (h - m.rope_head_dim + hv)
        attention += n * hv * d
    else:
        attention = d * n * h + d * m.n_kv_heads * (h + hv) + n * hv * d
    experts = (m.n_active_experts if active_only else m.n_experts) + m.n_shared_experts
    ffn_layers = m.n_layers - m.n_dense_layers
    feed_forward = ffn_layers * 3 * d * m.d_ff * experts
    if m.n_dense_layers:
        feed_forward += m.n_dense_layers * 3 * d * m.d_ff_dense
    router = m.n_moe_layers * d * m.n_experts
    embeddings = m.vocab_size * d * (1 if m.tied_embeddings else 2)
    return ParamCount(m.n_layers * attention, feed_forward, router, embeddings)


def param_count(model: Transformer) -> int:
    """Total parameters, counting every expert and both embedding tables (one if tied); see `param_breakdown`.

    Used in chapter 2, *Sampling and the KV cache*; chapter 4, *The KV cache dominates memory*; chapter 5, *A model of
    the decode step*; chapter 8, *Partitioning layouts*; chapter 12, *Choosing a layout by the metric*; the appendix
    *Worked problems*; and the appendix *Apply the book to your model*.
    """
    return param_breakdown(model).total


def active_param_count(model: Transformer) -> int:
    """Parameters one token touches: like `param_count` but with k of the E experts. Equal for dense models.

    Used in chapter 3, *Prefill and generation are different workloads*.
    """
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
    """Canonical names of every model in the table.

    Used in chapter 5, *A model of the decode step*.
    """
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
    matter ("llama-2-13b", "meta-llama/Llama-3.1-8B" work). A `Transformer` passes through unchanged.

    Used in chapter 2, *Sampling and the KV cache*; chapter 3, *Prefill and generation are different workloads*; chapter
    4, *The KV cache dominates memory*; chapter 5, *A model of the decode step*; chapter 6, *Shrinking the KV cache*;
    chapter 7, *Sharding prefill and generation*; chapter 8, *Partitioning layouts*; chapter 11, *How close do real
    systems come?*; chapter 12, *Choosing a layout by the metric*; chapter 14, *Serving details*; and the appendix
    *Worked problems*.
    """
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
                                    rope_head_dim=64, v_head_dim=128, name="deepseek-v3",
                                    source=_HF.format("deepseek-ai/DeepSeek-V3", "671B total, 37B active; the "
                                                      "multi-token-prediction module is not counted"))

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

# ----------------------------------------------------------------------------------------------- your own model
_HF_TYPES = ("llama", "mistral", "mixtral", "qwen2", "qwen3", "qwen3_moe", "gemma", "gemma2", "gemma3_text",
             "deepseek_v3")


def _field(config: dict, name: str, default=None, required: bool = True):
    value = config.get(name, default)
    if value is None and required:
        raise ValueError(f"config.json has no usable {name!r} (model_type {config.get('model_type')!r}); "
                         "add it, or build the model with scaling_lib.models.Transformer(...)")
    return value


def _layer_pattern(config: dict) -> int | None:
    """Every how many layers a global (full-attention) layer comes, for Gemma's local/global mix."""
    types = config.get("layer_types")
    if types:
        globals_at = [i for i, kind in enumerate(types) if kind == "full_attention"]
        period = globals_at[0] + 1 if globals_at else None
        if not globals_at or globals_at != list(range(period - 1, len(types), period)):
            raise ValueError(f"layer_types {types[:8]}... is not a periodic local/global pattern with the global "
                             "layer last in each period; this book's models cannot represent it")
        return period
    if config["model_type"] == "gemma2":
        return 2  # Gemma 2 alternates sliding-window and global layers
    return _field(config, "sliding_window_pattern", required=True)


def from_hf_config(path_or_dict) -> Transformer:
    """A `Transformer` from a Hugging Face `config.json` (a path or the parsed dict).

    Understood model types: LLaMA, Mistral, Mixtral, Qwen2, Qwen3 (dense and MoE), Gemma 1-3 (local/global layers)
    and DeepSeek-V3 (multi-head latent attention, shared experts, leading dense layers). A field this book cannot
    represent (a sparse-step MoE, a shared expert of another width, ...) or a missing one raises ValueError naming it.

    Used in the appendix *Apply the book to your model*.
    """
    if isinstance(path_or_dict, dict):
        config, origin = dict(path_or_dict), "config"
    elif not isinstance(path_or_dict, (str, PurePath)):
        raise ValueError(f"path_or_dict must be the path of a Hugging Face config.json or its parsed dict, got "
                         f"{path_or_dict!r}")
    else:
        path = Path(path_or_dict)
        if not path.is_file():
            raise ValueError(f"no config file at {path}; pass the path of a Hugging Face config.json or its dict")
        config, origin = json.loads(path.read_text(encoding="utf-8")), path.parent.name or path.stem
    kind = config.get("model_type")
    if kind not in _HF_TYPES:
        raise ValueError(f"model_type {kind!r} is not one this book reads; supported: {', '.join(_HF_TYPES)}")
    n_heads = _field(config, "num_attention_heads")
    d_model = _field(config, "hidden_size")
    fields = dict(n_layers=_field(config, "num_hidden_layers"), d_model=d_model, n_heads=n_heads,
                  n_kv_heads=_field(config, "num_key_value_heads", n_heads),
                  head_dim=_field(config, "head_dim", None, required=False) or d_model // n_heads,
                  vocab_size=_field(config, "vocab_size"), d_ff=_field(config, "intermediate_size"),
                  tied_embeddings=bool(config.get("tie_word_embeddings", kind.startswith("gemma"))))
    if kind in ("mistral", "gemma2", "gemma3_text") and config.get("sliding_window"):
        fields["sliding_window"] = config["sliding_window"]
        if kind != "mistral":
            fields["global_every"] = _layer_pattern(config)
    if kind in ("qwen2", "qwen3") and config.get("use_sliding_window"):
        raise ValueError("use_sliding_window=true with max_window_layers: a per-layer window this book's models "
                         "cannot represent; set it to false to estimate the full-attention model")
    if kind == "mixtral":
        fields.update(n_experts=_field(config, "num_local_experts"), n_active_experts=_field(config,
                                                                                             "num_experts_per_tok"))
    if kind == "qwen3_moe":
        if config.get("decoder_sparse_step", 1) != 1 or config.get("mlp_only_layers"):
            raise ValueError("decoder_sparse_step != 1 or mlp_only_layers: dense layers between MoE layers are not "
                             "representable; this book's MoE models put experts in every layer after the first dense")
        fields.update(n_experts=_field(config, "num_experts"), n_active_experts=_field(config, "num_experts_per_tok"),
                      d_ff=_field(config, "moe_intermediate_size"))
    if kind == "deepseek_v3":
        if config.get("moe_layer_freq", 1) != 1:
            raise ValueError("moe_layer_freq != 1: MoE layers interleaved with dense ones are not representable")
        rope, nope = _field(config, "qk_rope_head_dim"), _field(config, "qk_nope_head_dim")
        fields.update(n_kv_heads=n_heads, head_dim=nope + rope, rope_head_dim=rope, v_head_dim=_field(config,
                      "v_head_dim"), kv_lora_rank=_field(config, "kv_lora_rank"),
                      q_lora_rank=config.get("q_lora_rank"), n_experts=_field(config, "n_routed_experts"),
                      n_active_experts=_field(config, "num_experts_per_tok"),
                      n_shared_experts=config.get("n_shared_experts") or 0,
                      n_dense_layers=config.get("first_k_dense_replace") or 0,
                      d_ff=_field(config, "moe_intermediate_size"), d_ff_dense=fields["d_ff"])
    name = str(config.get("_name_or_path") or origin).rsplit("/", 1)[-1].lower()
    return Transformer(**fields, name=name, source=f"Hugging Face config.json ({origin})")
