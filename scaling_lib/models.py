"""Model shapes and parameter counting.

Symbols (book/notation.md): L layers, D model width, F feed-forward width, N query heads, K key/value heads,
H head dimension, V vocabulary, E experts, k active experts, G = N/K query heads per KV head.

Sources: LLaMA-2 (Touvron et al. 2023) and LLaMA-3 (Meta 2024) model cards, as quoted in the Scaling Book ch. 7;
PaLM (Chowdhery et al. 2022) as used by Pope et al. 2022.
"""

import json
import math
import re
from dataclasses import dataclass, fields, replace
from pathlib import Path, PurePath

from ._validate import MAX_INT, flag, non_negative_int, positive_int

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

    Defined in chapter 4, *The KV cache dominates memory*.
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
             "deepseek_v3", "deepseek_v2", "phi3", "phimoe", "olmo2", "qwen2_moe", "gemma3", "llama4", "llama4_text",
             "gpt_oss")
# Multimodal configs whose language model is a nested text_config of another type (read with that type's defaults).
_NESTED = {"gemma3": "gemma3_text", "llama4": "llama4_text"}
# Hugging Face's defaults (transformers' Gemma3TextConfig) for the fields a Gemma 3 text_config may leave out: the
# released configs omit vocab_size, sliding_window_pattern and, for the 4B, the head counts.
_GEMMA3_TEXT_DEFAULTS = dict(vocab_size=262_208, hidden_size=2304, intermediate_size=9216, num_hidden_layers=26,
                             num_attention_heads=8, num_key_value_heads=4, head_dim=256, sliding_window=4096,
                             sliding_window_pattern=6, max_position_embeddings=131_072, tie_word_embeddings=True)
_MLA_TYPES = ("deepseek_v2", "deepseek_v3")  # multi-head latent attention, shared experts, leading dense layers
_WINDOWED_TYPES = ("mistral", "phi3", "phimoe")  # a sliding_window on every layer when set
_REQUIRED = object()  # the default of a field that must be present
_MAX_CONFIG_BYTES = 10**7  # the largest config.json read: real ones are a few kB; a larger file is something else
# config.json's name for each Transformer field, so an error raised by the model's own checks names the file's field.
_HF_NAMES = dict(n_layers="num_hidden_layers", d_model="hidden_size", d_ff="intermediate_size",
                 n_heads="num_attention_heads", n_kv_heads="num_key_value_heads", head_dim="head_dim",
                 vocab_size="vocab_size", n_experts="num_experts", n_active_experts="num_experts_per_tok",
                 sliding_window="sliding_window", global_every="sliding_window_pattern",
                 n_shared_experts="n_shared_experts", n_dense_layers="first_k_dense_replace",
                 kv_lora_rank="kv_lora_rank", q_lora_rank="q_lora_rank", rope_head_dim="qk_rope_head_dim",
                 v_head_dim="v_head_dim")


def _value_text(value) -> str:
    """A JSON value as a message quotes it: repr of a scalar, a list or an object by its size (the repr of a list
    nested thousands deep raises RecursionError)."""
    return _json_text(value) if isinstance(value, (list, tuple, dict)) else repr(value)


def _json_text(value) -> str:
    """How a JSON value reads in a message: the string '4096', the boolean true, null, a list, an object, 2.5."""
    if isinstance(value, str):
        return f"the string {value!r}"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if value is None:
        return "null"
    if isinstance(value, (list, tuple)):
        return f"a list ({len(value)} items)"
    if isinstance(value, dict):
        return f"an object ({len(value)} fields)"
    return repr(value)


class _Fields:
    """A parsed config.json and where it came from (`where`, for messages); each reader checks one field's JSON type
    and range and names the field and the file when it refuses it."""

    def __init__(self, config: dict, where: str):
        self.config, self.where = config, where

    def error(self, name: str, problem: str) -> ValueError:
        return ValueError(f"field {name!r} of {self.where} {problem}")

    def missing(self, name: str) -> ValueError:
        return ValueError(f"{self.where} has no usable {name!r} (model_type {self.config.get('model_type')!r}); "
                          "add it, or build the model with scaling_lib.models.Transformer(...)")

    def count(self, name: str, default=_REQUIRED, minimum: int = 1):
        """An integer field >= minimum (a JSON number with no fraction; true/false and strings refused).
        Absent or null: `default` (None when the field is optional), or an error when it is required."""
        value = self.config.get(name)
        if value is None:
            if default is _REQUIRED:
                raise self.missing(name)
            return default
        if isinstance(value, str):
            hint = f"; write {value.strip()} without quotes" if value.strip().lstrip("-").isdigit() else ""
            raise self.error(name, f"must be an integer, got {_json_text(value)}{hint}")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.error(name, f"must be an integer, got {_json_text(value)}")
        if isinstance(value, float) and not (math.isfinite(value) and value == int(value)):
            raise self.error(name, f"must be an integer, got {value!r}")
        if value > MAX_INT:
            raise self.error(name, f"must be an integer up to 2**53 (no real size is larger), got {value!r}")
        if value < minimum:
            bound = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
            raise self.error(name, f"must be {bound}, got {value!r}")
        return int(value)

    def flag(self, name: str, default: bool) -> bool:
        """A boolean field: JSON true or false (absent: `default`). The strings "true"/"false", 0, 1 and null are
        refused rather than guessed: bool("false") is True."""
        if name not in self.config:
            return default
        value = self.config[name]
        if not isinstance(value, bool):
            raise self.error(name, f"must be a JSON boolean, true or false without quotes, got {_json_text(value)}")
        return value

    def layer_types(self, n_layers: int):
        """The per-layer attention kinds (a list of strings, one per layer), or None when absent."""
        types = self.config.get("layer_types")
        if types is None:
            return None
        if not isinstance(types, list) or not all(isinstance(kind, str) for kind in types):
            raise self.error("layer_types", f"must be a list of strings such as \"full_attention\", got "
                                            f"{_json_text(types)}")
        if len(types) != n_layers:
            raise self.error("layer_types", f"lists {len(types)} layers but 'num_hidden_layers' is {n_layers}; "
                                            "give one entry per layer")
        return types


def _load_config(path_or_dict) -> tuple:
    """(the config as a dict, its origin for the model's source and name, where it came from for messages)."""
    if isinstance(path_or_dict, dict):
        return dict(path_or_dict), "config", "the config dict"
    if not isinstance(path_or_dict, (str, PurePath)):
        raise ValueError(f"path_or_dict must be the path of a Hugging Face config.json or its parsed dict, got "
                         f"{path_or_dict!r}")
    if not str(path_or_dict).strip():
        raise ValueError("the config path is empty; pass the path of a Hugging Face config.json or its dict")
    path = Path(path_or_dict)
    try:
        is_dir, is_file = path.is_dir(), path.is_file()
        size = path.stat().st_size if is_file else 0
    except OSError as err:  # a name too long for the file system, a loop of links, ...
        raise ValueError(f"cannot open the config file {str(path)[:200]}: {err.strerror or err}") from None
    if is_dir:
        try:
            path, is_file = _config_in_folder(path)
            size = path.stat().st_size
        except OSError as err:
            raise ValueError(f"cannot read the model folder {str(path)[:200]}: {err.strerror or err}") from None
    if not is_file:
        raise ValueError(f"no config file at {path}; pass the path of a Hugging Face config.json or its dict")
    if size > _MAX_CONFIG_BYTES:
        raise ValueError(f"{path} holds {size:,} bytes; a config.json is a few kB (is this the weights file?)")
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except OSError as err:
        raise ValueError(f"cannot read the config file {path}: {err.strerror or err}") from None
    except UnicodeDecodeError as err:
        raise ValueError(f"{path} is not UTF-8 text (byte {err.start} is {err.object[err.start]:#04x}); a "
                         "config.json is JSON saved as UTF-8") from None
    try:
        config = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"{path} is not valid JSON: {err.msg} at line {err.lineno}, column {err.colno}") from None
    except RecursionError:
        raise ValueError(f"{path} nests lists or objects too deeply to read; a config.json is one flat object") \
            from None
    except ValueError:  # Python refuses to read an integer of more than 4,300 digits
        raise ValueError(f"{path} holds a number of thousands of digits; no field of a config.json is that large") \
            from None
    if not isinstance(config, dict):
        raise ValueError(f"{path} holds {_json_text(config)} at its top level; a config.json is one JSON object "
                         "{...} of fields such as \"model_type\" and \"hidden_size\"")
    return config, _origin(path), str(path)


def _config_in_folder(folder: Path) -> tuple:
    """The config.json of a model folder, or of a Hugging Face cache entry (models--org--name, whose snapshots/
    hold one folder per revision: the one refs/main names, else the only one); a ValueError otherwise."""
    if (folder / "config.json").is_file():
        return folder / "config.json", True
    snapshots = folder / "snapshots"
    if snapshots.is_dir():
        ref = folder / "refs" / "main"
        revision = ref.read_text().strip() if ref.is_file() else None
        found = sorted(p for p in snapshots.iterdir() if (p / "config.json").is_file())
        chosen = [p for p in found if p.name == revision] or (found if len(found) == 1 else [])
        if chosen:
            return chosen[0] / "config.json", True
        if found:
            raise ValueError(f"{folder} holds {len(found)} snapshots with a config.json and no refs/main naming one; "
                             f"pass one of them, e.g. {found[0] / 'config.json'}")
    raise ValueError(f"{folder} is a directory with no config.json in it (nor a Hugging Face cache snapshot); pass "
                     "the model's folder or the path of its config.json")


def _origin(path: Path) -> str:
    """The model's name when the config does not give one: org/name of a Hugging Face cache entry
    (.../models--org--name/snapshots/<hash>/config.json), else the folder holding the file."""
    for part in reversed(path.parts):
        if part.startswith("models--"):
            return part[len("models--"):].replace("--", "/")
    return path.parent.name or path.stem


def _layer_pattern(fields: _Fields, n_layers: int) -> int | None:
    """Every how many layers a global (full-attention) layer comes, for Gemma's local/global mix."""
    types = fields.layer_types(n_layers)
    if types:
        globals_at = [i for i, kind in enumerate(types) if kind == "full_attention"]
        period = globals_at[0] + 1 if globals_at else None
        if not globals_at or globals_at != list(range(period - 1, len(types), period)):
            raise ValueError(f"layer_types {types[:8]}... is not a periodic local/global pattern with the global "
                             f"layer last in each period; this book's models cannot represent it ({fields.where})")
        return period
    if fields.config["model_type"] in ("gemma2", "gpt_oss"):
        return 2  # Gemma 2 and gpt-oss alternate sliding-window and global layers
    return fields.count("sliding_window_pattern")


def _language_model(config: dict, where: str) -> tuple:
    """(the config of the language model, where it is): a multimodal config's text_config (Gemma 3, Llama 4) with
    the outer name, quantization and embedding tying where it has none; a Gemma 3 text config with Hugging Face's
    defaults for the fields it leaves out."""
    kind = config.get("model_type")
    if isinstance(kind, str) and kind in _NESTED:
        text = config.get("text_config")
        if not isinstance(text, dict):
            raise ValueError(f"field 'text_config' of {where} must be an object holding the language model's fields "
                             f"(model_type {kind!r}), got {_json_text(text)}")
        outer = {key: config[key] for key in ("_name_or_path", "quantization_config", "tie_word_embeddings")
                 if key in config}
        config, where = {**outer, **text, "model_type": _NESTED[kind]}, f"{where} (its text_config)"
    if config.get("model_type") == "gemma3_text":
        config = {**_GEMMA3_TEXT_DEFAULTS, **config}
    return config, where


def _llama4(f: _Fields, n_layers: int) -> dict:
    """Llama 4's feed-forward and attention: MoE layers (every interleave_moe_layer_step-th, or those moe_layers
    lists) with one shared expert of the routed width beside the routed ones, dense layers of intermediate_size_mlp
    between them (counted as n_dense_layers: their number, not their places, sets the weights and the FLOPs), and
    chunked attention (attention_chunk_size) on every layer but each no_rope_layer_interval-th, whose NoPE layers
    attend globally: a chunk keeps at most that many tokens, as a window does."""
    step = f.count("interleave_moe_layer_step", 1)
    moe_layers = f.config.get("moe_layers")
    if moe_layers is None:
        n_moe = len(range(step - 1, n_layers, step))
    elif isinstance(moe_layers, list) and all(type(i) is int and 0 <= i < n_layers for i in moe_layers):
        n_moe = len(set(moe_layers))
    else:
        raise f.error("moe_layers", f"must be a list of layer indices below {n_layers}, got {_json_text(moe_layers)}")
    extra = dict(n_shared_experts=1, n_dense_layers=n_layers - n_moe)
    if n_moe < n_layers:
        extra["d_ff_dense"] = f.count("intermediate_size_mlp")
    chunk = f.count("attention_chunk_size", None)
    if chunk is not None:
        period = f.count("no_rope_layer_interval", 4)
        no_rope = f.config.get("no_rope_layers")
        expected = [0 if (i + 1) % period == 0 else 1 for i in range(n_layers)]
        if no_rope not in (None, [], expected):
            raise f.error("no_rope_layers", f"is not the pattern of every {period}th layer global (NoPE) that this "
                                            "book can represent")
        extra.update(sliding_window=chunk, global_every=period)
    return extra


def from_hf_config(path_or_dict) -> Transformer:
    """A `Transformer` from a Hugging Face `config.json` (a path, the model's folder, a Hugging Face cache entry
    models--org--name or one of its snapshots, or the parsed dict), named from `_name_or_path` (else the cache
    entry's org/name, else the folder).

    Understood model types: LLaMA, Mistral, Mixtral, Qwen2, Qwen3 (dense and MoE), Qwen2-MoE (its shared expert,
    of a multiple of the routed width, counted as that many routed-width experts; its one-row gate, D weights per
    layer, is not counted), Gemma 1-3 (local/global layers), Phi-3 and Phi-3.5-MoE (a window on every layer when
    set), OLMo 2, DeepSeek-V2/V3 (multi-head latent attention, shared experts, leading dense layers), Gemma 3's
    multimodal config (its text_config, with Hugging Face's defaults), Llama 4 (`_llama4`) and gpt-oss (alternating
    128-token windows; its biases and attention sinks, under 0.1% of the weights, are not counted). A field
    this book cannot
    represent (a sparse-step MoE, a shared expert of another width, ...), a missing one, one of the wrong JSON type
    (sizes are integers; flags are true or false, never the strings "true"/"false"), or values that make no model
    (heads that do not divide, zero layers) raise ValueError naming the field and the file."""
    config, origin, where = _load_config(path_or_dict)
    config, where = _language_model(config, where)
    kind = config.get("model_type")
    if not isinstance(kind, str) or kind not in _HF_TYPES:
        raise ValueError(f"model_type {_value_text(kind)} in {where} is not one this book reads; supported: "
                         f"{', '.join(_HF_TYPES)}")
    f = _Fields(config, where)
    n_layers, n_heads, d_model = f.count("num_hidden_layers"), f.count("num_attention_heads"), f.count("hidden_size")
    n_kv_heads = f.count("num_key_value_heads", n_heads)
    if n_heads % n_kv_heads:
        raise f.error("num_key_value_heads", f"({n_kv_heads}) does not divide 'num_attention_heads' ({n_heads}); "
                                             "each KV head serves a whole group of query heads")
    head_dim = f.count("head_dim", None)
    if kind in _MLA_TYPES:
        head_dim = None  # MLA's heads are qk_nope_head_dim + qk_rope_head_dim wide, read below
    elif head_dim is None:
        if d_model % n_heads:
            raise f.error("hidden_size", f"({d_model}) is not a multiple of 'num_attention_heads' ({n_heads}) and "
                                         "there is no 'head_dim'; add head_dim, the width of one attention head")
        head_dim = d_model // n_heads
    fields = dict(n_layers=n_layers, d_model=d_model, n_heads=n_heads, n_kv_heads=n_kv_heads, head_dim=head_dim,
                  vocab_size=f.count("vocab_size"), d_ff=f.count("intermediate_size"),
                  tied_embeddings=f.flag("tie_word_embeddings", kind.startswith("gemma")))
    if kind in _WINDOWED_TYPES + ("gemma2", "gemma3_text", "gpt_oss"):
        window = f.count("sliding_window", None)
        if window is not None:
            fields["sliding_window"] = window
            if kind not in _WINDOWED_TYPES:
                fields["global_every"] = _layer_pattern(f, n_layers)
    if kind in ("qwen2", "qwen3", "qwen2_moe", "qwen3_moe") and f.flag("use_sliding_window", False):
        raise ValueError(f"use_sliding_window=true in {where} with max_window_layers: a per-layer window this "
                         "book's models cannot represent; set it to false to estimate the full-attention model")
    experts = None
    if kind in ("mixtral", "phimoe", "qwen3_moe", "qwen2_moe", "llama4_text", "gpt_oss") + _MLA_TYPES:
        experts = {"mixtral": "num_local_experts", "phimoe": "num_local_experts", "llama4_text": "num_local_experts",
                   "gpt_oss": "num_local_experts", "qwen3_moe": "num_experts",
                   "qwen2_moe": "num_experts", "deepseek_v2": "n_routed_experts",
                   "deepseek_v3": "n_routed_experts"}[kind]
        fields.update(n_experts=f.count(experts), n_active_experts=f.count("num_experts_per_tok"))
        if fields["n_active_experts"] > fields["n_experts"]:
            raise f.error("num_experts_per_tok", f"({fields['n_active_experts']}) exceeds {experts!r} "
                                                 f"({fields['n_experts']}); a token cannot use more experts than exist")
    if kind == "qwen3_moe" and config.get("shared_expert_intermediate_size") is not None:
        raise f.error("shared_expert_intermediate_size", "describes a shared expert, which model_type qwen3_moe does "
                                                         "not have (Hugging Face ignores it there); if the model has "
                                                         "one, its model_type is qwen2_moe")
    if kind in ("qwen3_moe", "qwen2_moe"):
        mlp_only = config.get("mlp_only_layers")
        if mlp_only is not None and not isinstance(mlp_only, list):
            raise f.error("mlp_only_layers", f"must be a list of layer indices, got {_json_text(mlp_only)}")
        if f.count("decoder_sparse_step", 1) != 1 or mlp_only:
            raise ValueError(f"decoder_sparse_step != 1 or mlp_only_layers in {where}: dense layers between MoE "
                             "layers are not representable; this book's MoE models put experts in every layer after "
                             "the first dense")
        fields.update(d_ff=f.count("moe_intermediate_size"))
    if kind == "llama4_text":
        fields.update(_llama4(f, n_layers))
    if kind == "qwen2_moe":  # one shared expert of its own width, gated: counted as that many routed-width experts
        shared = f.count("shared_expert_intermediate_size", 0, minimum=0)
        if shared % fields["d_ff"]:
            raise f.error("shared_expert_intermediate_size", f"({shared}) is not a multiple of "
                                                             f"'moe_intermediate_size' ({fields['d_ff']}); this book's "
                                                             "MoE models count shared experts in routed-expert widths")
        fields.update(n_shared_experts=shared // fields["d_ff"])
    if kind in _MLA_TYPES:
        if f.count("moe_layer_freq", 1) != 1:
            raise ValueError(f"moe_layer_freq != 1 in {where}: MoE layers interleaved with dense ones are not "
                             "representable")
        rope, nope = f.count("qk_rope_head_dim", minimum=0), f.count("qk_nope_head_dim")
        dense = f.count("first_k_dense_replace", 0, minimum=0)
        if dense > n_layers:
            raise f.error("first_k_dense_replace", f"({dense}) exceeds 'num_hidden_layers' ({n_layers})")
        fields.update(n_kv_heads=n_heads, head_dim=nope + rope, rope_head_dim=rope, v_head_dim=f.count("v_head_dim"),
                      kv_lora_rank=f.count("kv_lora_rank"), q_lora_rank=f.count("q_lora_rank", None),
                      n_shared_experts=f.count("n_shared_experts", 0, minimum=0), n_dense_layers=dense,
                      d_ff=f.count("moe_intermediate_size"), d_ff_dense=fields["d_ff"])
    name = config.get("_name_or_path")
    if name is not None and not isinstance(name, str):
        raise f.error("_name_or_path", f"must be a string (the model's name), got {_json_text(name)}")
    name = (name or origin).rsplit("/", 1)[-1].lower()
    try:
        return Transformer(**fields, name=name, source=f"Hugging Face config.json ({origin})")
    except ValueError as err:  # a combination the model's own checks refuse: say which config.json fields those are
        hf_names = dict(_HF_NAMES, n_experts=experts) if fields.get("n_experts") else _HF_NAMES
        named = [f"{field} is {hf!r}" for field, hf in hf_names.items() if re.search(rf"\b{field}\b", str(err))]
        raise ValueError(f"{err} (in {where}, where {', '.join(named)})" if named else f"{err} (in {where})") from None


# quantization_config's quant_method -> the weight format it stores (the bits decide for the integer methods).
_QUANT_METHODS = {"fp8": "fp8", "fbgemm_fp8": "fp8", "mxfp4": "mxfp4", "awq": None, "gptq": None}
_INT_BITS = {4: "int4", 8: "int8"}


@dataclass(frozen=True)
class HfConfig:
    """What a Hugging Face config says besides the shape: the weight format its `quantization_config` stores (None:
    unquantized, the checkpoint's bf16 or fp16) and its `max_position_embeddings` (None when absent)."""

    model: Transformer
    weight_dtype: str | None
    max_position_embeddings: int | None


def _quantized_format(fields: _Fields) -> str | None:
    """The weight format of `quantization_config`: fp8 (quant_method fp8 or fbgemm_fp8), mxfp4, int4 or int8 (AWQ
    and GPTQ by their `bits`), NVIDIA ModelOpt's FP8 and NVFP4 (`quant_algo`); anything else a ValueError."""
    q = fields.config.get("quantization_config")
    if q is None:
        return None
    if not isinstance(q, dict):
        raise fields.error("quantization_config", f"must be an object with a 'quant_method', got {_json_text(q)}")
    method = q.get("quant_method")
    if method == "modelopt":
        algo = q.get("quant_algo")
        if algo in ("FP8", "NVFP4"):
            return algo.lower()
        raise fields.error("quantization_config", f"has quant_algo {_value_text(algo)}; this book reads FP8 and NVFP4")
    if not isinstance(method, str) or method not in _QUANT_METHODS:
        raise fields.error("quantization_config", f"has quant_method {_value_text(method)}; this book reads "
                                                  f"{', '.join(_QUANT_METHODS)} and modelopt")
    if _QUANT_METHODS[method] is not None:
        return _QUANT_METHODS[method]
    bits = q.get("bits")
    if not isinstance(bits, int) or isinstance(bits, bool) or bits not in _INT_BITS:
        raise fields.error("quantization_config", f"{method} with bits={_value_text(bits)}; this book stores 4 or 8 bits")
    return _INT_BITS[bits]


def read_hf_config(path_or_dict) -> HfConfig:
    """`from_hf_config` of a config (a file, a model folder, a Hugging Face cache entry or a dict), with the weight
    format its `quantization_config` names and its `max_position_embeddings`. Behind `python -m scaling_lib
    estimate --config` and `plan --config`, which default the weights to that format and refuse a longer context.
    """
    model = from_hf_config(path_or_dict)
    config, _, where = _load_config(path_or_dict)
    fields = _Fields(*_language_model(config, where))  # a nested text_config holds the positions (Gemma 3, Llama 4)
    return HfConfig(model=model, weight_dtype=_quantized_format(fields),
                    max_position_embeddings=fields.count("max_position_embeddings", None))


def tiny_transformer(n_kv_heads: int = 2, sliding_window=None, n_heads: int = 4, n_layers: int = 2,
                     vocab_size: int = 256) -> Transformer:
    """The shape of the book's tiny JAX decoder (`tiny.model.tiny_config` returns it): D = 64, F = 128, heads of
    H = 16; n_kv_heads = n_heads is MHA, fewer is GQA, 1 is MQA. A shape, not a published model: the closed-form
    library prices it for the exercises that predict what the tiny model's compiled programs do."""
    return Transformer(n_layers=n_layers, d_model=64, d_ff=128, n_heads=n_heads, n_kv_heads=n_kv_heads, head_dim=16,
                       vocab_size=vocab_size, sliding_window=sliding_window, name="tiny")
