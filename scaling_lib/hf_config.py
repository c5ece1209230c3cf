"""Which model a Hugging Face config.json describes, read by architecture, not by label.

`read_config` (behind `models.from_hf_config` and `models.read_hf_config`) does four things in order
(`_resolve_family`, `_text_tower`, `hf_families.READERS` and `_audit`, `_read_quantization`):

1. **Resolve the family.** `model_type` is a label anyone can edit; `architectures` names the class that computes the
   model (what vLLM and SGLang load). Both are read: a config whose two disagree (a Jamba relabelled `mixtral`, Aya
   relabelled `llama`) is refused with the reason; a type the book does not know under a class it does (Kimi K2's
   `kimi_k2` under `DeepseekV3ForCausalLM`) is read as the class, and the report says so.
2. **Unwrap a multimodal wrapper** (Gemma 3, Llama 4, Qwen2-VL/2.5-VL/3-VL, Mistral 3, LLaVA) to its language model:
   text tower only, the vision encoder's weights not counted, and the report says so.
3. **Read the family's fields** (`hf_families`), then **audit**: every field that changes the math (`MATH_FIELDS`)
   that the family's reader did not read is refused by name, never ignored.
4. **Read the checkpoint's formats** (`quantization_config`): bytes per weight group (`dtypes.MixedWeights`) for
   MXFP4 with `modules_to_not_convert`, block-scaled FP8, compressed-tensors, AWQ, GPTQ, ModelOpt and bitsandbytes,
   and the KV cache's format when the checkpoint names one.

Refusals say what the config has that the book cannot represent and what to do next; none suggests a relabelling.
"""

import math
import re
from dataclasses import dataclass

from .dtypes import BYTES_PER_ELEMENT, MixedWeights
from .hf_families import READERS
from .hf_fields import ConfigFields

# What each architecture class computes: the model_types it is published with, the first being how it is read.
CLASSES = {
    "LlamaForCausalLM": ("llama",), "MistralForCausalLM": ("mistral",), "MixtralForCausalLM": ("mixtral",),
    "Qwen2ForCausalLM": ("qwen2",), "Qwen3ForCausalLM": ("qwen3",), "Qwen2MoeForCausalLM": ("qwen2_moe",),
    "Qwen3MoeForCausalLM": ("qwen3_moe",), "Qwen3NextForCausalLM": ("qwen3_next",),
    "GemmaForCausalLM": ("gemma",), "Gemma2ForCausalLM": ("gemma2",), "Gemma3ForCausalLM": ("gemma3_text",),
    "Gemma3ForConditionalGeneration": ("gemma3",), "Phi3ForCausalLM": ("phi3",), "PhiMoEForCausalLM": ("phimoe",),
    "Olmo2ForCausalLM": ("olmo2",), "DeepseekV2ForCausalLM": ("deepseek_v2",),
    "DeepseekV3ForCausalLM": ("deepseek_v3",), "DeepseekV32ForCausalLM": ("deepseek_v32",),
    "Llama4ForConditionalGeneration": ("llama4",), "Llama4ForCausalLM": ("llama4_text",),
    "GptOssForCausalLM": ("gpt_oss",), "CohereForCausalLM": ("cohere",), "Cohere2ForCausalLM": ("cohere2",),
    "InternLM2ForCausalLM": ("internlm2",), "InternLM3ForCausalLM": ("internlm3",),
    "ChatGLMModel": ("chatglm",), "ChatGLMForConditionalGeneration": ("chatglm",),
    "ExaoneForCausalLM": ("exaone",), "Exaone4ForCausalLM": ("exaone4",), "GraniteForCausalLM": ("granite",), "Glm4MoeForCausalLM": ("glm4_moe",),
    "DeciLMForCausalLM": ("nemotron-nas",), "MiniMaxM1ForCausalLM": ("minimax_m1",),
    "MiniMaxText01ForCausalLM": ("minimax_text_01",), "MiniMaxForCausalLM": ("minimax",),
    "MiniMaxM2ForCausalLM": ("minimax_m2",),
    "JambaForCausalLM": ("jamba",), "NemotronHForCausalLM": ("nemotron_h",),
    "Qwen2VLForConditionalGeneration": ("qwen2_vl",), "Qwen2_5_VLForConditionalGeneration": ("qwen2_5_vl",),
    "Qwen3VLForConditionalGeneration": ("qwen3_vl",), "Qwen3VLMoeForConditionalGeneration": ("qwen3_vl_moe",),
    "Qwen3_5ForConditionalGeneration": ("qwen3_5",), "Qwen3_5MoeForConditionalGeneration": ("qwen3_5_moe",),
    "Qwen3_5ForCausalLM": ("qwen3_5_text",), "Qwen3_5MoeForCausalLM": ("qwen3_5_moe_text",),
    "Mistral3ForConditionalGeneration": ("mistral3",), "LlavaForConditionalGeneration": ("llava",),
    "GPTJForCausalLM": ("gptj",), "GPTNeoXForCausalLM": ("gpt_neox",),
}
# model_types read by another type's reader (the same architecture under another name).
TYPE_ALIASES = {"minimax_m1": "minimax", "minimax_text_01": "minimax",
                "qwen2_vl_text": "qwen2", "qwen2_5_vl_text": "qwen2", "qwen3_vl_text": "qwen3",
                "qwen3_vl_moe_text": "qwen3_moe", "qwen3_5_moe_text": "qwen3_5_text"}
# Multimodal wrappers: the model_type their text tower is read as (None: the text_config's own), and whether an older
# release keeps the language model's fields at the top level instead of in a text_config (Qwen2-VL, Qwen2.5-VL).
WRAPPERS = {"gemma3": ("gemma3_text", False), "llama4": ("llama4_text", False), "qwen2_vl": ("qwen2", True),
            "qwen2_5_vl": ("qwen2", True), "qwen3_vl": ("qwen3", False), "qwen3_vl_moe": ("qwen3_moe", False),
            "qwen3_5_moe": ("qwen3_5_text", False), "qwen3_5": ("qwen3_5_text", False), "mistral3": (None, False),
            "llava": (None, False)}
# Hugging Face's defaults (transformers' Gemma3TextConfig) for the fields a Gemma 3 text_config may leave out: the
# released configs omit vocab_size, sliding_window_pattern and, for the 4B, the head counts.
GEMMA3_TEXT_DEFAULTS = dict(vocab_size=262_208, hidden_size=2304, intermediate_size=9216, num_hidden_layers=26,
                            num_attention_heads=8, num_key_value_heads=4, head_dim=256, sliding_window=4096,
                            sliding_window_pattern=6, max_position_embeddings=131_072, tie_word_embeddings=True)

# What each family computes, in words, for the messages.
DESCRIPTIONS = {
    "llama": "a LLaMA-style decoder", "internlm2": "InternLM2", "internlm3": "InternLM3", "olmo2": "OLMo 2",
    "granite": "Granite", "exaone": "EXAONE", "exaone4": "EXAONE 4 (sliding windows)", "cohere": "Cohere's decoder (tied embeddings)", "chatglm": "ChatGLM",
    "mistral": "a Mistral decoder (sliding window)", "phi3": "Phi-3", "qwen2": "Qwen2", "qwen3": "Qwen3",
    "gemma": "Gemma", "gemma2": "Gemma 2", "gemma3_text": "Gemma 3's language model", "cohere2": "Cohere 2",
    "mixtral": "a Mixtral mixture of experts", "phimoe": "Phi-3.5-MoE", "gpt_oss": "gpt-oss",
    "qwen2_moe": "a Qwen2-MoE mixture of experts (shared expert)", "qwen3_moe": "a Qwen3-MoE mixture of experts",
    "deepseek_v2": "DeepSeek-V2 (latent attention)", "deepseek_v3": "DeepSeek-V3 (latent attention)",
    "deepseek_v32": "DeepSeek-V3.2 (latent attention, sparse-attention indexer)",
    "glm4_moe": "GLM-4.5 (mixture of experts)", "llama4_text": "Llama 4's language model",
    "qwen3_next": "Qwen3-Next, a hybrid of gated DeltaNet and attention layers",
    "qwen3_5_text": "Qwen3.5's language model, a hybrid of gated DeltaNet and attention layers",
    "minimax_m2": "MiniMax-M2, a mixture of experts with softmax attention on every layer",
    "minimax": "MiniMax-01/M1, a hybrid of lightning-attention and softmax layers",
    "jamba": "Jamba, a hybrid of Mamba and attention layers",
    "nemotron_h": "Nemotron-H, a hybrid of Mamba-2 and attention layers",
    "nemotron-nas": "Llama-Nemotron (NAS: layers without attention, FFN widths by layer)",
    "gptj": "GPT-J (no gate in the MLP)", "gpt_neox": "GPT-NeoX (no gate in the MLP)",
    "gemma3": "Gemma 3 (multimodal)", "llama4": "Llama 4 (multimodal)", "qwen2_vl": "Qwen2-VL (multimodal)",
    "qwen2_5_vl": "Qwen2.5-VL (multimodal)", "qwen3_vl": "Qwen3-VL (multimodal)",
    "qwen3_vl_moe": "Qwen3-VL-MoE (multimodal)", "mistral3": "Mistral 3 (multimodal)", "llava": "LLaVA (multimodal)",
}
# Families this book cannot represent, with what they have that it lacks (a refusal names it and the next step).
UNREPRESENTABLE = {
    "mamba": "only Mamba layers (no attention at all)", "mamba2": "only Mamba-2 layers (no attention at all)",
    "falcon_mamba": "only Mamba layers (no attention at all)", "rwkv": "only RWKV recurrent layers",
    "mllama": "cross-attention layers reading image tokens", "gemma3n": "per-layer embeddings and KV caches shared "
                                                                      "across layers",
    "gpt2": "learned positions and an MLP with biases", "bloom": "ALiBi attention and an MLP with biases",
}

# Fields that change the math when set: a family's reader reads each one it supports; any other is refused by name.
MATH_FIELDS = {
    "sliding_window": "a sliding attention window", "use_sliding_window": "a sliding attention window",
    "sliding_window_pattern": "which layers keep a sliding window", "layer_types": "each layer's kind of attention",
    "max_window_layers": "which layers keep a sliding window", "attention_chunk_size": "chunked attention",
    "dual_chunk_attention_config": "dual-chunk attention", "num_nextn_predict_layers": "multi-token-prediction layers",
    "mtp_num_hidden_layers": "multi-token-prediction layers", "num_mtp_modules": "multi-token-prediction layers",
    "full_attention_interval": "linear-attention layers", "attn_type_list": "linear-attention layers",
    "layers_block_type": "Mamba layers", "hybrid_override_pattern": "Mamba layers",
    "attn_layer_period": "Mamba layers", "attn_layer_offset": "Mamba layers",
    "expert_layer_period": "mixture-of-experts layers", "expert_layer_offset": "mixture-of-experts layers",
    "linear_num_key_heads": "linear-attention layers", "linear_num_value_heads": "linear-attention layers",
    "linear_key_head_dim": "linear-attention layers", "linear_value_head_dim": "linear-attention layers",
    "linear_attn_config": "linear-attention layers", "mamba_d_state": "Mamba layers", "mamba_expand": "Mamba layers",
    "ssm_state_size": "Mamba layers", "mamba_num_heads": "Mamba layers", "mamba_n_heads": "Mamba layers",
    "mamba_head_dim": "Mamba layers", "mamba_d_head": "Mamba layers", "block_configs": "layers of different shapes",
    "num_experts": "a mixture of experts", "num_local_experts": "a mixture of experts",
    "n_routed_experts": "a mixture of experts", "moe_intermediate_size": "a mixture of experts",
    "shared_expert_intermediate_size": "a shared expert", "shared_intermediate_size": "a shared expert",
    "n_shared_experts": "shared experts", "num_shared_experts": "shared experts",
    "moe_shared_expert_intermediate_size": "a shared expert", "decoder_sparse_step": "dense layers between MoE layers",
    "mlp_only_layers": "dense layers between MoE layers", "first_k_dense_replace": "leading dense layers",
    "moe_layer_freq": "dense layers between MoE layers", "interleave_moe_layer_step": "dense layers between MoE layers",
    "moe_layers": "which layers are MoE", "intermediate_size_mlp": "dense layers between MoE layers",
    "kv_lora_rank": "latent attention", "q_lora_rank": "latent attention", "index_topk": "sparse attention",
    "index_n_heads": "sparse attention", "index_head_dim": "sparse attention",
    "cross_attention_layers": "cross-attention layers", "num_kv_shared_layers": "KV caches shared across layers",
    "multi_query_group_num": "grouped-query attention", "num_kv_heads": "grouped-query attention",
    "kv_channels": "the head width", "ffn_hidden_size": "the FFN width", "padded_vocab_size": "the vocabulary",
}


# config.json's name for each Transformer field, so an error raised by the model's own checks names the file's field
# (`Reading.hf_names`, with the experts' count under the name this config uses).
HF_NAMES = dict(n_layers="num_hidden_layers", d_model="hidden_size", d_ff="intermediate_size",
                n_heads="num_attention_heads", n_kv_heads="num_key_value_heads", head_dim="head_dim",
                vocab_size="vocab_size", n_experts="num_experts", n_active_experts="num_experts_per_tok",
                sliding_window="sliding_window",
                global_every="sliding_window_pattern", n_shared_experts="n_shared_experts",
                n_dense_layers="first_k_dense_replace", kv_lora_rank="kv_lora_rank", q_lora_rank="q_lora_rank",
                rope_head_dim="qk_rope_head_dim", v_head_dim="v_head_dim")


def _neutral(name: str, value) -> bool:
    """A value that leaves the model as if the field were absent."""
    if value is None or value is False or value == 0 or value == [] or value == {} or value == [0]:
        return True
    if name == "layer_types" and isinstance(value, list):
        return all(kind == "full_attention" for kind in value)
    return name == "attn_type_list" and isinstance(value, list) and all(kind == 1 for kind in value)


@dataclass(frozen=True)
class Reading:
    """What `read_config` found: the Transformer's fields, its name, the family read, the weight and KV formats the
    checkpoint stores (None: not quantized), its position limit, and notes the report prints."""

    fields: dict
    name: str
    origin: str
    where: str
    family: str
    notes: tuple
    weight_dtype: object
    kv_dtype: str | None
    max_positions: int | None
    hf_names: dict


def _classes(config: dict, where: str) -> str | None:
    classes = config.get("architectures")
    if classes is None or classes == []:
        return None
    if not isinstance(classes, list) or not all(isinstance(c, str) and c for c in classes):
        raise ValueError(f"field 'architectures' of {where} must be a list of class names such as "
                         f"[\"LlamaForCausalLM\"], got {ConfigFields.json_text(classes)}")
    if len(set(classes)) > 1:
        raise ValueError(f"field 'architectures' of {where} names {len(set(classes))} classes ({', '.join(classes)}); "
                         "a checkpoint is one model: keep the class its weights were saved from")
    return classes[0]


def _known(kind) -> bool:
    return isinstance(kind, str) and (kind in READERS or kind in TYPE_ALIASES or kind in WRAPPERS)


def _unknown_type(kind, cls, where: str) -> ValueError:
    what = UNREPRESENTABLE.get(kind)
    has = f"it has {what}, which" if what else "the book cannot tell from it which layers the model has and what"
    tail = " this book's models cannot represent" if what else " each costs"
    families = ", ".join(sorted({*READERS, *TYPE_ALIASES, *WRAPPERS}))
    return ValueError(f"model_type {kind!r}{f' (architectures {cls})' if cls else ''} in {where} is not a family "
                      f"this book reads: {has}{tail}. Families it reads: {families}. To estimate it anyway, build its "
                      "shape from the model card with scaling_lib.models.Transformer(n_layers=..., d_model=..., "
                      "d_ff=..., n_heads=..., n_kv_heads=..., head_dim=..., vocab_size=...) and pass it to "
                      "scaling_lib.estimate.report")


def _resolve_family(config: dict, where: str) -> tuple:
    """(the model_type to read, a note or None): `model_type` and `architectures` resolved together (module
    docstring); a ValueError when they disagree, or when neither names a family this book reads."""
    kind, cls = config.get("model_type"), _classes(config, where)
    if kind is not None and not isinstance(kind, str):
        raise ValueError(f"field 'model_type' of {where} must be a string such as \"llama\", got "
                         f"{ConfigFields.json_text(kind)}")
    if cls is None:
        if not _known(kind):
            raise _unknown_type(kind, None, where)
        return kind, None
    if cls not in CLASSES:
        head = cls.split("For", 1)[-1]
        if head in ("SequenceClassification", "TokenClassification", "QuestionAnswering", "RewardModel"):
            raise ValueError(f"architectures {cls} in {where} puts a classifier head on the model, not a language "
                             "model's output projection; this book estimates generation: use the config of the "
                             "model it was fine-tuned from")
        if not _known(kind):
            raise _unknown_type(kind, cls, where)
        raise ValueError(f"architectures {cls} in {where} is a class this book does not know, so it cannot confirm "
                         f"that model_type {kind!r} ({DESCRIPTIONS.get(TYPE_ALIASES.get(kind, kind), kind)}) is what "
                         "the checkpoint computes (model_type alone is a label); the classes it reads are "
                         f"{', '.join(sorted(CLASSES))}. If the model is one of those, its published config names it")
    published = CLASSES[cls]
    if kind in published:
        return kind, None
    if not _known(kind):
        return published[0], (f"model_type {kind!r} is not a type this book knows; its architectures, {cls}, is, and "
                              f"the config was read as that class computes it ({published[0]})")
    said, says = (DESCRIPTIONS.get(TYPE_ALIASES.get(t, t), t) for t in (kind, published[0]))
    raise ValueError(f"model_type {kind!r} and architectures {cls} in {where} disagree: the type says {said}, the "
                     f"class computes {says} (published as model_type {published[0]!r}). An engine loads the class, "
                     "so reading the label would misprice the model: restore the config as published (both fields) "
                     "and read it again")


def _text_tower(config: dict, kind: str, where: str) -> tuple:
    """(the language model's config, its model_type, where it is, a note or None) of a multimodal wrapper; the
    config itself otherwise. The wrapper's name, quantization and embedding tying carry over when the tower has none."""
    if kind not in WRAPPERS:
        return config, TYPE_ALIASES.get(kind, kind), where, None
    inner_kind, flat = WRAPPERS[kind]
    text = config.get("text_config")
    if text is None and flat:
        text, inner_where = {k: v for k, v in config.items() if k not in ("vision_config", "architectures")}, where
    elif not isinstance(text, dict):
        raise ValueError(f"field 'text_config' of {where} must be an object holding the language model's fields "
                         f"(model_type {kind!r}), got {ConfigFields.json_text(text)}")
    else:
        outer = {key: config[key] for key in ("_name_or_path", "quantization_config", "tie_word_embeddings")
                 if key in config}
        text, inner_where = {**outer, **text}, f"{where} (its text_config)"
    inner = inner_kind or text.get("model_type") or {"mistral3": "mistral", "llava": "llama"}[kind]
    inner = TYPE_ALIASES.get(inner, inner)
    if inner not in READERS:
        raise _unknown_type(inner, None, inner_where)
    text = {**text, "model_type": inner}
    if inner == "gemma3_text":
        text = {**GEMMA3_TEXT_DEFAULTS, **text}
    counted = ("the vision encoder's weights (vision_config) are not counted" if "vision_config" in config
               else "no vision encoder is counted")
    return text, inner, inner_where, f"text tower only, read as {DESCRIPTIONS[inner]} ({kind} config): {counted}"


def _audit(f: ConfigFields, kind: str) -> None:
    """Refuse a field that changes the math (`MATH_FIELDS`) that the family's reader did not read."""
    for name, value in f.config.items():
        if name in MATH_FIELDS and name not in f.read and not _neutral(name, value):
            raise ValueError(f"field {name!r} of {f.where} ({ConfigFields.json_text(value)}) sets {MATH_FIELDS[name]}, which "
                             f"{DESCRIPTIONS.get(kind, kind)} does not have in this book (model_type {kind!r}): "
                             "reading the rest would misprice the model. If the published config has this field, the "
                             "model is a variant this book cannot represent; build its shape with scaling_lib.models."
                             "Transformer(...) (its docstring lists the structures it can hold)")


def _name(text: dict, config: dict, origin: str, cls: str | None, f: ConfigFields) -> str:
    """`_name_or_path` (the language model's, else the wrapper's), else the Hugging Face cache entry's repository
    id, else the architecture class, else the model_type: never the name of a folder or file the reader chose."""
    name = text.get("_name_or_path", config.get("_name_or_path"))
    f.consume("_name_or_path")
    if name is not None and not isinstance(name, str):
        raise f.error("_name_or_path", f"must be a string (the model's name), got {ConfigFields.json_text(name)}")
    if name and name.strip("/"):
        return name.rstrip("/").rsplit("/", 1)[-1].lower()
    if "/" in origin:  # a Hugging Face cache entry models--org--name: the repository id
        return origin.rsplit("/", 1)[-1].lower()
    return cls or config.get("model_type") or "custom"


def read_config(path_or_dict) -> Reading:
    """The fields, name, formats and position limit of a Hugging Face config (module docstring)."""
    outer, origin = ConfigFields.from_source(path_or_dict)
    config, where = outer.config, outer.where
    kind, resolved = _resolve_family(config, where)
    text, kind, text_where, tower = _text_tower(config, kind, where)
    f = ConfigFields({**text, "model_type": kind}, text_where)
    fields = READERS[kind](f)
    _audit(f, kind)
    name = _name(text, config, origin, _classes(config, where), f)
    weights, kv_dtype, quant_note = _read_quantization(f, _groups_present(fields))
    positions = f.count("seq_length" if kind == "chatglm" and "max_position_embeddings" not in text else
                        "n_positions" if kind == "gptj" else "max_position_embeddings", None)
    notes = tuple(n for n in (resolved, tower, *f.notes, quant_note) if n)
    experts = next((k for k in ("num_local_experts", "num_experts", "n_routed_experts") if k in text), None)
    hf_names = dict(HF_NAMES, n_experts=experts or HF_NAMES["n_experts"])
    return Reading(fields=fields, name=name, origin=origin, where=text_where, family=kind, notes=notes,
                   weight_dtype=weights, kv_dtype=kv_dtype, max_positions=positions, hf_names=hf_names)


# ------------------------------------------------------------------------------------------------ quantization_config
# The module names of a checkpoint, as `modules_to_not_convert` / `ignore` list them, and the weight group each
# belongs to (the first match wins). Modules outside the text tower (a vision encoder) are None: not counted.
_MODULE_GROUPS = (
    (("lm_head", "output_layer"), ("head",)), (("embed_tokens", "wte", "word_embeddings", "embedding"),
                                               ("embeddings",)),
    (("visual", "vision_tower", "vision_model", "multi_modal_projector", "mm_projector", "vision"), ()),
    (("shared_expert", "shared_experts", "shared_mlp"), ("feed_forward",)), (("experts",), ("experts",)),
    (("router", "gate", "e_score_correction_bias"), ("router",)), (("mamba", "mixer", "linear_attn"), ("state",)),
    (("self_attn", "attention", "attn", "q_proj", "k_proj", "v_proj", "o_proj", "qkv_proj"), ("attention",)),
    (("mlp", "feed_forward", "ffn", "block_sparse_moe"), ("feed_forward", "experts")),
)
# The groups a method quantizes unless told otherwise: every linear layer, never the embedding table (a lookup);
# the output projection and the routers stay in bf16 (Hugging Face's quantizers skip the head; a router is a few
# D x E weights). MXFP4 (gpt-oss) stores the routed experts only.
_LINEAR = ("attention", "state", "experts", "feed_forward")


def _groups_of(module: str, where: str, field: str) -> tuple:
    """The weight groups a module name (or pattern) covers; a ValueError for one this book cannot place."""
    tokens = [t for t in re.split(r"[^A-Za-z0-9_]+", module) if t]
    if "layers" in tokens:
        after = tokens[tokens.index("layers") + 1:tokens.index("layers") + 2]
        indexed = bool(after) and after[0].isdigit()
    else:
        indexed = False
    for names, groups in _MODULE_GROUPS:
        if any(t in names for t in tokens):
            if indexed and groups not in ((), ("router",)):
                raise ValueError(f"field 'quantization_config' of {where} keeps {module!r} ({field}), one layer's "
                                 f"{'/'.join(groups)}, in another format; this book prices a group's format over all "
                                 "its layers and cannot split it by layer. For the two ends, estimate with --weights "
                                 "bf16 and with --weights set to the quantized format")
            return groups
    raise ValueError(f"field 'quantization_config' of {where} names module {module!r} in {field}, which this book "
                     "cannot place in a weight group (attention, experts, feed-forward, router, embeddings, head, "
                     "state); name the module as the checkpoint's weights do (e.g. model.layers.*.self_attn)")


def _kept(f: ConfigFields, q: dict, field: str) -> set:
    """The groups a list of modules keeps unquantized."""
    listed = q.get(field)
    if listed is None:
        return set()
    if not isinstance(listed, list) or not all(isinstance(m, str) for m in listed):
        raise f.error("quantization_config", f"has {field} {ConfigFields.json_text(listed)}; it must be a list of module names")
    return {g for module in listed for g in _groups_of(module, f.where, field)}


def _mixed(dtype: str, quantized_bytes: float, quantized: set, method: str, kept_bytes: float = 2.0) -> MixedWeights:
    return MixedWeights(dtype, method, **{g: quantized_bytes if g in quantized else kept_bytes
                                          for g in ("attention", "state", "experts", "feed_forward", "router",
                                                    "embeddings", "head")})


def _bits(f: ConfigFields, value, method: str, allowed=(4, 8)) -> int:
    if isinstance(value, bool) or value not in allowed:
        raise f.error("quantization_config", f"{method} with bits={ConfigFields.value_text(value)}; this book stores "
                                             f"{' or '.join(map(str, allowed))} bits")
    return value


def _group_scales(f: ConfigFields, group_size, method: str) -> float:
    """Scale entries per weight for a group size (-1 or None: one per column, negligible)."""
    if group_size in (None, -1, 0):
        return 0.0
    if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size < 1:
        raise f.error("quantization_config", f"{method} with group_size={ConfigFields.value_text(group_size)}; a group is a positive number "
                                             "of weights (or -1: one scale per column)")
    return 1.0 / group_size


def _compressed_tensors(f: ConfigFields, q: dict) -> tuple:
    """(dtype, bytes per weight, quantized groups) of a compressed-tensors config (LLM Compressor): its config_groups'
    weight schemes by target (`Linear` for every linear layer), less what `ignore` lists."""
    groups = q.get("config_groups")
    if not isinstance(groups, dict) or not groups:
        raise f.error("quantization_config", "is compressed-tensors without config_groups; nothing says how the "
                                             "weights are stored")
    schemes = []
    for scheme in groups.values():
        weights = scheme.get("weights") if isinstance(scheme, dict) else None
        targets = scheme.get("targets", []) if isinstance(scheme, dict) else []
        if not isinstance(weights, dict):
            continue  # activations only: the weights stay as they are
        bits, kind = weights.get("num_bits"), weights.get("type")
        size, strategy = weights.get("group_size"), weights.get("strategy")
        if kind == "float" and bits == 4:
            dtype = {16: "nvfp4", 32: "mxfp4"}.get(size)
        else:
            dtype = {("float", 8): "fp8", ("int", 8): "int8", ("int", 4): "int4"}.get((kind, bits))
        if dtype is None:
            raise f.error("quantization_config", f"stores weights as {kind} with {bits} bits (group {size}); this "
                                                 "book stores fp8, int8, int4, nvfp4 and mxfp4")
        per_weight = BYTES_PER_ELEMENT[dtype]
        if dtype in ("int4", "int8") and strategy == "group":
            per_weight += 2 * _group_scales(f, size, "compressed-tensors") * (1 if weights.get("symmetric", True)
                                                                              else 2)
        covered = set(_LINEAR) if "Linear" in targets else {g for t in targets for g in _groups_of(t, f.where,
                                                                                                   "targets")}
        schemes.append((dtype, per_weight, covered))
    if not schemes:
        raise f.error("quantization_config", "is compressed-tensors with no weight scheme; nothing says how the "
                                             "weights are stored")
    if len({(d, b) for d, b, _ in schemes}) > 1:
        raise f.error("quantization_config", "stores different groups in different formats (mixed-precision "
                                             "config_groups); this book reads one quantized format per checkpoint")
    dtype, per_weight = schemes[0][:2]
    return dtype, per_weight, set().union(*(c for _, _, c in schemes)) - _kept(f, q, "ignore")


def _groups_present(fields: dict) -> tuple:
    """The weight groups a model read from a config has (for the note on its formats)."""
    moe = fields.get("n_experts", 1) > 1
    dense = not moe or fields.get("n_dense_layers") or fields.get("n_shared_experts")
    present = {"attention": True, "state": fields.get("n_state_layers", 0) > 0, "experts": moe,
               "feed_forward": bool(dense), "router": moe, "embeddings": True,
               "head": not fields.get("tied_embeddings", False)}
    return tuple(g for g, has in present.items() if has)


def _read_quantization(f: ConfigFields, groups: tuple = ("attention", "experts", "feed_forward", "router",
                                                        "embeddings", "head")) -> tuple:
    """(weight format, KV-cache format, note) of `quantization_config`: None, None, None when absent. The weight
    format is a `dtypes.MixedWeights`: bytes per weight by group, block scales and zero points included:

        fp8 (block-scaled, DeepSeek): 1 + 4 / (block area) bytes (one fp32 scale per block)
        mxfp4: 4.25 bits (E8M0 scale per 32), the routed experts only (Hugging Face's MXFP4)
        awq: bits / 8 + (2 + bits / 8 with zero points) / group_size (an fp16 scale and a zero per group)
        gptq: bits / 8 + (2 + bits / 8) / group_size (scales and packed zeros per group)
        compressed-tensors: its scheme's bits (nvfp4: 4.5 bits), 2 bytes of scale per group for int groups
        modelopt: FP8 (1 byte) or NVFP4 (4.5 bits); bitsandbytes: nf4/fp4 with a scale per 64 weights, or int8
    Every method leaves the embedding table (a lookup), the output projection and the routers in bf16 unless it says
    otherwise (`modules_to_not_convert`, `ignore`, `exclude_modules`, `llm_int8_skip_modules`, gptq's `lm_head`)."""
    q = f.get("quantization_config")
    if q is None:
        return None, None, None
    if not isinstance(q, dict):
        raise f.error("quantization_config", f"must be an object with a 'quant_method', got {ConfigFields.json_text(q)}")
    method, kv = q.get("quant_method"), None
    if method in ("fp8", "fbgemm_fp8"):
        block = q.get("weight_block_size")
        area = math.prod(block) if isinstance(block, list) and block and all(type(b) is int and b > 0
                                                                               for b in block) else None
        per_weight = 1.0 + (4.0 / area if area else 0.0)
        weights = _mixed("fp8", per_weight, set(_LINEAR) - _kept(f, q, "modules_to_not_convert"), method)
    elif method == "mxfp4":
        quantized = {"experts"} - _kept(f, q, "modules_to_not_convert")
        weights = _mixed("mxfp4", BYTES_PER_ELEMENT["mxfp4"], quantized, method)
    elif method in ("awq", "gptq"):
        bits = _bits(f, q.get("bits"), method)
        zeros = 1 if method == "gptq" or q.get("zero_point", True) else 0
        per_weight = bits / 8 + (2 + zeros * bits / 8) * _group_scales(f, q.get("group_size"), method)
        quantized = set(_LINEAR) - _kept(f, q, "modules_to_not_convert")
        if method == "gptq" and q.get("lm_head") is True:
            quantized.add("head")
        weights = _mixed({4: "int4", 8: "int8"}[bits], per_weight, quantized, method)
    elif method == "compressed-tensors":
        dtype, per_weight, quantized = _compressed_tensors(f, q)
        weights = _mixed(dtype, per_weight, quantized, method)
        scheme = q.get("kv_cache_scheme")
        if isinstance(scheme, dict):
            kind_bits = (scheme.get("type"), scheme.get("num_bits"))
            kv = "fp8" if kind_bits == ("float", 8) else "int8" if kind_bits == ("int", 8) else None
    elif method == "modelopt":
        algo = q.get("quant_algo")
        if algo not in ("FP8", "NVFP4"):
            raise f.error("quantization_config", f"has quant_algo {ConfigFields.value_text(algo)}; this book reads FP8 and NVFP4")
        kept = _kept(f, q, "exclude_modules") | _kept(f, q, "ignore")
        weights = _mixed(algo.lower(), BYTES_PER_ELEMENT[algo.lower()], set(_LINEAR) - kept, method)
        kv = "fp8" if q.get("kv_cache_quant_algo") == "FP8" else None
    elif method == "bitsandbytes":
        if q.get("load_in_4bit") is True:
            double = q.get("bnb_4bit_use_double_quant") is True
            per_weight = 0.5 + (1 / 64 + 4 / (64 * 256) if double else 4 / 64)
            weights = _mixed("int4", per_weight, set(_LINEAR) - _kept(f, q, "llm_int8_skip_modules"), method)
        elif q.get("load_in_8bit") is True:
            weights = _mixed("int8", 1.0, set(_LINEAR) - _kept(f, q, "llm_int8_skip_modules"), method)
        else:
            raise f.error("quantization_config", "is bitsandbytes with neither load_in_4bit nor load_in_8bit true")
    else:
        raise f.error("quantization_config", f"has quant_method {ConfigFields.value_text(method)}; this book reads fp8, fbgemm_fp8, mxfp4, "
                                             "awq, gptq, compressed-tensors, modelopt and bitsandbytes")
    quantized_bytes = min(weights.group_bytes(g) for g in groups)
    kept = [g for g in groups if weights.group_bytes(g) != quantized_bytes]
    note = (f"quantization_config ({method}): {weights} weights at {quantized_bytes:.5g} bytes each (scales "
            f"included), {', '.join(kept) or 'nothing'} kept in bf16")
    return weights, kv, note
