"""The shape of each family of Hugging Face checkpoint, read from its config.json fields.

One reader per family (`READERS`), each a function of `hf_fields.ConfigFields` returning the keyword arguments of
`models.Transformer` (without name and source). Families that differ from LLaMA only in field names or small details
share `_decoder` (ChatGLM's `num_layers`, `ffn_hidden_size`, `kv_channels`, `multi_query_group_num` and
`padded_vocab_size`; Cohere's tied embeddings; GPT-NeoX's MLP of two matrices with no gate); GPT-J reads GPT-2's
field names (`n_layer`, `n_embd`, `n_head`, `n_inner`) with the same gateless MLP. The sliding-window rules follow
what each Hugging Face class does with the same fields (`_layer_kinds`): Mistral and Phi-3 window every layer, Qwen2 _windows the layers from
`max_window_layers` on, Qwen3-MoE every layer, Qwen2-MoE every other layer below `max_window_layers`, Gemma,
Cohere 2 and EXAONE 4 every layer but each `sliding_window_pattern`-th (EXAONE's may be a string such as "LLLG"), an
explicit `layer_types` list overriding them all.

Hybrids (chapter 6, *A fixed-size state*): Qwen3-Next (gated DeltaNet, `layer_types` or `full_attention_interval`),
MiniMax-M1 and -Text-01 (lightning attention, `attn_type_list` or `layer_types`), Jamba (Mamba, `attn_layer_period`
and `attn_layer_offset`), Nemotron-H (Mamba-2, `hybrid_override_pattern`). Nemotron-NAS (`block_configs`): layers
without attention and feed-forward widths that differ by layer.

A reader reads every field it uses through `ConfigFields`, which records it; `hf_config` then refuses any field that
changes the math and that the family's reader did not read.
"""

import math

from .hf_fields import REQUIRED, ConfigFields
from .mixers import SparseIndexer, gated_deltanet, lightning_attention, mamba, mamba2


def _first(f: ConfigFields, names: tuple, default=REQUIRED, minimum: int = 1):
    """The integer field under the first of `names` the config has (every spelling recorded as read)."""
    for name in names:
        if f.get(name) is not None:
            f.consume(*names)
            return f.count(name, default, minimum)
    return f.count(names[0], default, minimum)


def _decoder(f: ConfigFields, *, tie: bool = False, layers=("num_hidden_layers",), kv_heads=("num_key_value_heads",),
            ffn=("intermediate_size",), vocab=("vocab_size",), head_dim=("head_dim",)) -> dict:
    """The fields every decoder has: layers, width, heads, KV heads (default: as many as heads), head width (default
    D / N), FFN width, vocabulary and tied embeddings (default `tie`, the family's). Alternative spellings first."""
    n_layers, d_model = _first(f, layers), f.count("hidden_size")
    n_heads = f.count("num_attention_heads")
    n_kv_heads = _first(f, kv_heads, n_heads)
    if n_heads % n_kv_heads:
        raise f.error(kv_heads[0], f"({n_kv_heads}) does not divide 'num_attention_heads' ({n_heads}); each KV head "
                                   "serves a whole group of query heads")
    width = _first(f, head_dim, None)
    if width is None:
        if d_model % n_heads:
            raise f.error("hidden_size", f"({d_model}) is not a multiple of 'num_attention_heads' ({n_heads}) and "
                                         f"there is no '{head_dim[0]}'; add {head_dim[0]}, the width of one attention "
                                         "head")
        width = d_model // n_heads
    return dict(n_layers=n_layers, d_model=d_model, n_heads=n_heads, n_kv_heads=n_kv_heads, head_dim=width,
                vocab_size=_first(f, vocab), d_ff=_first(f, ffn), tied_embeddings=f.flag("tie_word_embeddings", tie))


# --------------------------------------------------------------------------------------------- local/global layers
def _periodic(f: ConfigFields, n_layers: int, period: int) -> list:
    """Every `period`-th layer global, the others sliding (Gemma, Cohere 2, gpt-oss)."""
    return ["full_attention" if (i + 1) % period == 0 else "sliding_attention" for i in range(n_layers)]


def _layer_kinds(f: ConfigFields, n_layers: int, rule: str) -> list | None:
    """Each layer's attention, "full_attention" or "sliding_attention", as the Hugging Face class of the family
    derives it (module docstring), or None when no layer has a window. `layer_types`, when given, wins."""
    if rule in ("qwen2", "qwen3_moe", "qwen2_moe") and not f.flag("use_sliding_window", False):
        # Hugging Face sets no window at all: the other fields are checked, then left aside
        f.count("sliding_window", None), f.count("max_window_layers", None, minimum=0), f.layer_types(n_layers)
        return None
    window = f.count("sliding_window", None)
    explicit = f.layer_types(n_layers)
    if window is None:
        if rule in ("qwen2", "qwen3_moe", "qwen2_moe"):  # use_sliding_window is true here
            raise f.error("use_sliding_window", "is true but the config has no 'sliding_window': the window's length "
                                                "is not stated (Hugging Face would fall back on its class default); "
                                                "add sliding_window, or set use_sliding_window to false")
        if explicit is not None and any(kind == "sliding_attention" for kind in explicit):
            raise f.error("layer_types", "has sliding_attention layers but the config has no 'sliding_window'; add "
                                         "the window's length in tokens")
        f.consume("sliding_window_pattern", "max_window_layers")
        return None
    if explicit is not None:
        f.consume("sliding_window_pattern", "max_window_layers")
        return explicit
    if rule == "all" or rule == "qwen3_moe":
        f.consume("max_window_layers")
        return ["sliding_attention"] * n_layers
    if rule == "qwen2":
        first_full = f.count("max_window_layers", n_layers, minimum=0)
        return ["sliding_attention" if i >= first_full else "full_attention" for i in range(n_layers)]
    if rule == "qwen2_moe":
        below = f.count("max_window_layers", n_layers, minimum=0)
        return ["sliding_attention" if i % 2 == 0 and i < below else "full_attention" for i in range(n_layers)]
    if rule == "alternate":
        f.consume("sliding_window_pattern")
        return _periodic(f, n_layers, 2)
    pattern = f.get("sliding_window_pattern")
    if rule == "exaone4" and isinstance(pattern, str):  # EXAONE 4 may spell it as a string: "LLLG"
        if not pattern or set(pattern) - {"L", "G"}:
            raise f.error("sliding_window_pattern", f"must be a period of L (local) and G (global) layers such as "
                                                    f"\"LLLG\", or an integer, got {f.json_text(pattern)}")
        return ["full_attention" if pattern[i % len(pattern)] == "G" else "sliding_attention"
                for i in range(n_layers)]
    return _periodic(f, n_layers, f.count("sliding_window_pattern", {"gemma3": 6, "cohere2": 4, "exaone4": 4}[rule]))


def _windows(f: ConfigFields, n_layers: int, rule: str) -> dict:
    """The Transformer fields of `_layer_kinds`: the window, and which layers escape it (every global_every-th when
    the pattern is periodic with the global layer last, else their count in global_layers)."""
    kinds = _layer_kinds(f, n_layers, rule)
    if kinds is None:
        return {}
    unknown = sorted(set(kinds) - {"full_attention", "sliding_attention"})
    if unknown:
        raise f.error("layer_types", f"has layers of kind {unknown[0]!r}; this family's layers are full_attention or "
                                     "sliding_attention")
    globals_at = [i for i, kind in enumerate(kinds) if kind == "full_attention"]
    if len(globals_at) == n_layers:
        return {}
    fields = dict(sliding_window=f.count("sliding_window"))
    if globals_at:
        period = globals_at[0] + 1
        if globals_at == list(range(period - 1, n_layers, period)):
            fields["global_every"] = period
        else:
            fields["global_layers"] = len(globals_at)
    return fields


# ---------------------------------------------------------------------------------------------------- experts
def _experts(f: ConfigFields, count: str) -> dict:
    n, k = f.count(count), f.count("num_experts_per_tok")
    if k > n:
        raise f.error("num_experts_per_tok", f"({k}) exceeds {count!r} ({n}); a token cannot use more experts than "
                                             "exist")
    return dict(n_experts=n, n_active_experts=k)


def _shared_in_expert_widths(f: ConfigFields, name: str, width: int) -> int:
    """A shared expert of `name`'s width, as that many routed-width experts (0 when absent or 0)."""
    shared = f.count(name, 0, minimum=0)
    if shared % width:
        raise f.error(name, f"({shared}) is not a multiple of the routed experts' width ({width}); this book's MoE "
                            "models count a shared expert in routed-expert widths, so this model cannot be represented "
                            "exactly: build it with scaling_lib.models.Transformer(...) choosing n_shared_experts")
    return shared // width


def _moe_layers(f: ConfigFields, n_layers: int) -> int:
    """Qwen-MoE's MoE layers: not in `mlp_only_layers`, and every `decoder_sparse_step`-th (Hugging Face's rule)."""
    step = f.count("decoder_sparse_step", 1)
    only_mlp = f.get("mlp_only_layers")
    if only_mlp is None:
        only_mlp = []
    if not isinstance(only_mlp, list) or not all(type(i) is int and 0 <= i < n_layers for i in only_mlp):
        raise f.error("mlp_only_layers", f"must be a list of layer indices below {n_layers}, got "
                                         f"{f.json_text(only_mlp)}")
    return sum(1 for i in range(n_layers) if i not in only_mlp and (i + 1) % step == 0)


def _dense_between(f: ConfigFields, fields: dict, n_moe: int, dense_width: int) -> dict:
    """The dense layers of a mixture of experts (the layers that are not MoE), at `dense_width`."""
    n_dense = fields.get("n_ffn_layers", fields["n_layers"]) - n_moe
    return dict(n_dense_layers=n_dense, d_ff_dense=dense_width) if n_dense else {}


# ------------------------------------------------------------------------------------------------------ readers
def _read_llama(f: ConfigFields) -> dict:
    """LLaMA and the families that differ only in names or in cost-free details (InternLM2/3, OLMo 2, Granite, EXAONE
    3's `num_layers`, Yi): no window (LlamaForCausalLM ignores a `sliding_window`, and so does this reader, saying
    so), untied embeddings by default."""
    if f.get("sliding_window") is not None:
        f.notes.append("sliding_window is ignored: this architecture attends to the whole context on every layer")
    return _decoder(f, layers=("num_hidden_layers", "num_layers"))


def _read_cohere(f: ConfigFields) -> dict:
    """Cohere (Command R, Aya 23): LLaMA's shapes with tied embeddings by default (CohereConfig)."""
    return _decoder(f, tie=True)


def _read_windowed(rule: str, tie: bool = False):
    """A decoder whose windows follow `rule` (`_layer_kinds`)."""
    def read(f: ConfigFields) -> dict:
        fields = _decoder(f, tie=tie)
        return {**fields, **_windows(f, fields["n_layers"], rule)}
    read.__doc__ = f"A decoder with the sliding windows of rule {rule!r} (`_layer_kinds`); tied embeddings: {tie}."
    return read


# Activations of a two-matrix MLP (up, then down, no gate) as Hugging Face names them; a gated one would be a third
# matrix, which these families do not have.
_UNGATED = ("gelu", "gelu_new", "gelu_fast", "gelu_pytorch_tanh", "gelu_python", "relu", "quick_gelu")


def _ungated(f: ConfigFields, name: str, default: str) -> None:
    """Check that the MLP's activation (`name`) is one of `_UNGATED`: the FFN is two matrices, D x F and F x D."""
    activation = f.get(name, default)
    if activation not in _UNGATED:
        raise f.error(name, f"is {f.json_text(activation)}; this family's MLP is read as two matrices with an "
                            f"elementwise activation between them ({', '.join(_UNGATED)})")


_PARALLEL_NOTE = ("attention and the MLP read the same normed input in parallel: the same matmuls as one after the "
                  "other, so the same cost")
_BIAS_NOTE = "biases are not counted (D + F per layer and V for the output layer: under 0.1% of the weights)"


def _read_gptj(f: ConfigFields) -> dict:
    """GPT-J (EleutherAI's GPT-J 6B, MLPerf's GPT-J benchmark): GPT-2's field names, `n_layer` layers of width
    `n_embd`, `n_head` heads each with its own keys and values, an MLP of `n_inner` (default 4 x n_embd) with no
    gate, an untied output layer; rotary embedding on `rotary_dim` channels of each head (no extra cost); attention
    and MLP in parallel; biases not counted (notes)."""
    _ungated(f, "activation_function", "gelu_new")
    d_model, n_heads = f.count("n_embd"), f.count("n_head")
    if d_model % n_heads:
        raise f.error("n_embd", f"({d_model}) is not a multiple of 'n_head' ({n_heads}): each head is n_embd / n_head "
                                "channels wide")
    f.count("rotary_dim", None)
    f.notes.extend([_PARALLEL_NOTE, _BIAS_NOTE])
    return dict(n_layers=f.count("n_layer"), d_model=d_model, n_heads=n_heads, n_kv_heads=n_heads,
                head_dim=d_model // n_heads, vocab_size=f.count("vocab_size"),
                d_ff=f.count("n_inner", None) or 4 * d_model, tied_embeddings=f.flag("tie_word_embeddings", False),
                gated_ffn=False)


def _read_gpt_neox(f: ConfigFields) -> dict:
    """GPT-NeoX (GPT-NeoX-20B, the Pythia suite): LLaMA's field names with an MLP of two matrices (no gate), every
    head its own keys and values, an untied output layer; `use_parallel_residual` (attention and MLP in parallel)
    and `rotary_pct` change no cost; biases not counted (notes)."""
    _ungated(f, "hidden_act", "gelu")
    fields = _decoder(f)
    f.flag("use_parallel_residual", True)
    f.get("rotary_pct")
    f.notes.append(_BIAS_NOTE)
    return {**fields, "gated_ffn": False}


def _read_chatglm(f: ConfigFields) -> dict:
    """ChatGLM 2/3 and GLM-4 (THUDM's remote code): LLaMA's shapes under other names; `multi_query_group_num` KV heads
    when `multi_query_attention` is true, else as many as heads; `seq_length` its positions."""
    grouped = f.flag("multi_query_attention", False)
    if not grouped:
        f.consume("multi_query_group_num")
    return _decoder(f, layers=("num_layers", "num_hidden_layers"),
                   kv_heads=("multi_query_group_num",) if grouped else ("num_key_value_heads",),
                   ffn=("ffn_hidden_size", "intermediate_size"), vocab=("padded_vocab_size", "vocab_size"),
                   head_dim=("kv_channels", "head_dim"))


def _read_mixtral(rule: str = "all"):
    def read(f: ConfigFields) -> dict:
        fields = _decoder(f)
        return {**fields, **_windows(f, fields["n_layers"], rule), **_experts(f, "num_local_experts")}
    read.__doc__ = "Mixtral, Phi-3.5-MoE, gpt-oss: every layer a mixture of `num_local_experts` of intermediate_size."
    return read


def _read_minimax_m2(f: ConfigFields) -> dict:
    """MiniMax-M2: softmax attention on every layer (unlike M1's lightning layers) and a mixture of
    `num_local_experts` of intermediate_size, Mixtral's layout; its multi-token-prediction modules (`use_mtp`:
    `num_mtp_modules` of `mtp_transformer_layers` layers each) kept apart as MTP layers, as DeepSeek-V3's are. A
    `shared_intermediate_size` above 0 (a shared expert, which the released models do not have) is refused."""
    if f.count("shared_intermediate_size", 0, minimum=0):
        raise f.error("shared_intermediate_size", "is above 0; this book reads MiniMax-M2 without a shared expert: "
                                                  "build the model with scaling_lib.models.Transformer(...)")
    mtp = f.count("num_mtp_modules", 0, minimum=0) * f.count("mtp_transformer_layers", 1)
    return {**_read_mixtral()(f), "n_mtp_layers": mtp if f.flag("use_mtp", False) else 0}


def _read_gpt_oss(f: ConfigFields) -> dict:
    """gpt-oss: alternating 128-token _windows and global layers, `num_local_experts` experts (its biases and attention
    sinks, under 0.1% of the weights, are not counted); `experts_per_token` repeats num_experts_per_tok."""
    f.consume("experts_per_token")
    return _read_mixtral("alternate")(f)


def _read_qwen_moe(rule: str, shared: bool):
    def read(f: ConfigFields) -> dict:
        fields = _decoder(f)
        n = fields["n_layers"]
        fields.update(**_windows(f, n, rule), **_experts(f, "num_experts"), d_ff=f.count("moe_intermediate_size"))
        n_moe = _moe_layers(f, n)
        fields.update(_dense_between(f, fields, n_moe, f.count("intermediate_size")))
        if shared:
            fields["n_shared_experts"] = _shared_in_expert_widths(f, "shared_expert_intermediate_size",
                                                                  fields["d_ff"])
        elif f.get("shared_expert_intermediate_size"):  # Qwen3-Coder publishes 0
            f.notes.append("shared_expert_intermediate_size is ignored: a Qwen3-MoE layer has no shared expert "
                           "(Qwen3MoeForCausalLM builds none whatever this field says)")
        return fields
    read.__doc__ = ("Qwen2-MoE / Qwen3-MoE: `num_experts` of `moe_intermediate_size` on the layers `decoder_sparse_step`"
                    " and `mlp_only_layers` leave MoE, dense layers of intermediate_size between them"
                    + (", one shared expert (in routed widths)." if shared else "; no shared expert."))
    return read


def _deepseek_moe(f: ConfigFields, fields: dict) -> dict:
    """DeepSeek-style experts (DeepSeek-V2/V3, Kimi K2, GLM-4.5): `n_routed_experts` of `moe_intermediate_size` with
    `n_shared_experts` beside them on the layers from `first_k_dense_replace` on (every `moe_layer_freq`-th), dense
    layers of intermediate_size before; `num_nextn_predict_layers` multi-token-prediction modules."""
    n = fields["n_layers"]
    dense = f.count("first_k_dense_replace", 0, minimum=0)
    if dense > n:
        raise f.error("first_k_dense_replace", f"({dense}) exceeds 'num_hidden_layers' ({n})")
    freq = f.count("moe_layer_freq", 1)
    n_moe = sum(1 for i in range(dense, n) if i % freq == 0)
    moe = dict(_experts(f, "n_routed_experts"), d_ff=f.count("moe_intermediate_size"),
               n_shared_experts=f.count("n_shared_experts", 0, minimum=0),
               n_mtp_layers=f.count("num_nextn_predict_layers", 0, minimum=0))
    return {**moe, **_dense_between(f, fields, n_moe, fields["d_ff"])}


def _read_deepseek(f: ConfigFields) -> dict:
    """DeepSeek-V2/V3/R1, Kimi K2, DeepSeek-V3.2: multi-head latent attention (each token caches a kv_lora_rank latent
    and a qk_rope_head_dim key; every query head its own up-projected key and value), DeepSeek-style experts
    (`_deepseek_moe`), and for V3.2 the sparse-attention indexer (`index_n_heads`, `index_head_dim`, `index_topk`)."""
    fields = _decoder(f, kv_heads=("num_attention_heads",), head_dim=("qk_nope_head_dim",))
    f.consume("num_key_value_heads", "head_dim")  # MLA: every query head has its own key and value
    rope = f.count("qk_rope_head_dim", minimum=0)
    fields.update(head_dim=f.count("qk_nope_head_dim") + rope, rope_head_dim=rope, v_head_dim=f.count("v_head_dim"),
                  kv_lora_rank=f.count("kv_lora_rank"), q_lora_rank=f.count("q_lora_rank", None))
    fields.update(_deepseek_moe(f, fields))
    if f.get("index_topk") is not None or f.get("index_n_heads") is not None:
        fields["indexer"] = SparseIndexer(n_heads=f.count("index_n_heads"), head_dim=f.count("index_head_dim"),
                                          topk=f.count("index_topk"))
    return fields


def _read_glm4_moe(f: ConfigFields) -> dict:
    """GLM-4.5 / 4.6 (`glm4_moe`): grouped-query attention (head_dim given) with DeepSeek-style experts
    (`_deepseek_moe`), a multi-token-prediction layer (`num_nextn_predict_layers`)."""
    fields = _decoder(f)
    return {**fields, **_deepseek_moe(f, fields)}


def _read_llama4(f: ConfigFields) -> dict:
    """Llama 4's text model: MoE layers (every interleave_moe_layer_step-th, or those moe_layers lists) with one
    shared expert of the routed width, dense layers of intermediate_size_mlp between them, and chunked attention
    (attention_chunk_size) on every layer but each no_rope_layer_interval-th, whose NoPE layers attend globally."""
    fields = _decoder(f)
    fields.update(_experts(f, "num_local_experts"))
    n_layers = fields["n_layers"]
    step = f.count("interleave_moe_layer_step", 1)
    moe_layers = f.get("moe_layers")
    if moe_layers is None:
        n_moe = len(range(step - 1, n_layers, step))
    elif isinstance(moe_layers, list) and all(type(i) is int and 0 <= i < n_layers for i in moe_layers):
        n_moe = len(set(moe_layers))
    else:
        raise f.error("moe_layers", f"must be a list of layer indices below {n_layers}, got {f.json_text(moe_layers)}")
    fields.update(n_shared_experts=1, n_dense_layers=n_layers - n_moe)
    if n_moe < n_layers:
        fields["d_ff_dense"] = f.count("intermediate_size_mlp")
    else:
        f.consume("intermediate_size_mlp")
    chunk = f.count("attention_chunk_size", None)
    if chunk is not None:
        period = f.count("no_rope_layer_interval", 4)
        no_rope = f.get("no_rope_layers")
        expected = [0 if (i + 1) % period == 0 else 1 for i in range(n_layers)]
        if no_rope not in (None, [], expected):
            raise f.error("no_rope_layers", f"is not the pattern of every {period}th layer global (NoPE) that this "
                                            "book can represent")
        fields.update(sliding_window=chunk, global_every=period, chunked_attention=True)
    return fields


def _read_gemma3_text(f: ConfigFields) -> dict:
    """Gemma 3's language model: every sliding_window_pattern-th layer global (default 6), tied embeddings."""
    return _read_windowed("gemma3", tie=True)(f)


# ------------------------------------------------------------------------------------------------------ hybrids
def _mixer_counts(f: ConfigFields, name: str, kinds: list, attention: str, state: str) -> tuple:
    """(attention layers, state layers) of a per-layer list of kinds; any other kind refused, naming `name`."""
    unknown = sorted(set(kinds) - {attention, state})
    if unknown:
        raise f.error(name, f"has layers of kind {unknown[0]!r}; this model's layers are {attention!r} or {state!r}")
    n_attention = sum(kind == attention for kind in kinds)
    if n_attention == 0:
        raise f.error(name, f"leaves no {attention!r} layer; some must be: this book reads hybrids with softmax "
                            "attention (a pure recurrent model has no KV cache: build it with scaling_lib.models."
                            "Transformer(n_attention_layers=0, ...))")
    return n_attention, len(kinds) - n_attention


def _with_state(n_attention: int, n_state: int, state) -> dict:
    """The Transformer fields of a hybrid's layer counts (no state when no layer keeps one)."""
    return dict(n_attention_layers=n_attention, n_state_layers=n_state, state=state if n_state else None)


def _qwen_hybrid_mixers(f: ConfigFields, n_layers: int, d_model: int) -> dict:
    """Qwen3-Next's and Qwen3.5's token mixers: gated DeltaNet layers (`linear_*` fields) and every
    `full_attention_interval`-th layer (or those `layer_types` names "full_attention") gated softmax attention."""
    kinds, name = f.layer_types(n_layers), "layer_types"
    if kinds is None:
        interval, name = f.count("full_attention_interval", 4), "full_attention_interval"
        kinds = ["full_attention" if (i + 1) % interval == 0 else "linear_attention" for i in range(n_layers)]
    else:
        f.consume("full_attention_interval")
    n_attention, n_state = _mixer_counts(f, name, kinds, "full_attention", "linear_attention")
    state = gated_deltanet(d_model, f.count("linear_num_key_heads"), f.count("linear_key_head_dim"),
                           f.count("linear_num_value_heads"), f.count("linear_value_head_dim"),
                           f.count("linear_conv_kernel_dim", 4))
    return _with_state(n_attention, n_state, state)


def _read_qwen3_next(f: ConfigFields) -> dict:
    """Qwen3-Next: gated DeltaNet layers and gated softmax attention (`_qwen_hybrid_mixers`); Qwen2-MoE's experts with
    a shared expert. The attention's output gate (D x N H more per attention layer, about 0.1% of the weights) is not
    counted."""
    fields = _decoder(f)
    n = fields["n_layers"]
    fields.update(**_experts(f, "num_experts"), **_qwen_hybrid_mixers(f, n, fields["d_model"]),
                  d_ff=f.count("moe_intermediate_size"), n_mtp_layers=f.count("mtp_num_hidden_layers", 0, minimum=0))
    f.consume("use_sliding_window", "sliding_window", "max_window_layers")
    if f.flag("use_sliding_window", False):
        raise f.error("use_sliding_window", "is true; Qwen3-Next's attention layers have no window in this book")
    fields.update(_dense_between(f, fields, _moe_layers(f, n), f.count("intermediate_size")))
    fields["n_shared_experts"] = _shared_in_expert_widths(f, "shared_expert_intermediate_size", fields["d_ff"])
    return fields


def _read_qwen3_5(f: ConfigFields) -> dict:
    """Qwen3.5's language model: Qwen3-Next's token mixers (`_qwen_hybrid_mixers`), as a dense model (its text_config
    of type qwen3_5_text: FFN `intermediate_size`) or a mixture of experts with a shared expert (qwen3_5_moe_text:
    every layer routed unless `mlp_only_layers` names it, the only layers that need an `intermediate_size`). The
    attention's output gate is not counted, as for Qwen3-Next; the multimodal rotary sections change no cost."""
    moe = f.get("num_experts") is not None
    fields = _decoder(f, ffn=("moe_intermediate_size",) if moe else ("intermediate_size",))
    n = fields["n_layers"]
    fields.update(**_qwen_hybrid_mixers(f, n, fields["d_model"]),
                  n_mtp_layers=f.count("mtp_num_hidden_layers", 0, minimum=0))
    if moe:
        fields.update(**_experts(f, "num_experts"))
        n_moe = _moe_layers(f, n)
        if n_moe < n:
            fields.update(_dense_between(f, fields, n_moe, f.count("intermediate_size")))
        fields["n_shared_experts"] = _shared_in_expert_widths(f, "shared_expert_intermediate_size", fields["d_ff"])
    return fields


def _read_minimax(f: ConfigFields) -> dict:
    """MiniMax-Text-01 and MiniMax-M1: lightning attention (`attn_type_list` 0, or layer_types "linear_attention")
    and softmax attention (1, "full_attention"), every layer a mixture of `num_local_experts` of intermediate_size."""
    fields = _decoder(f)
    n = fields["n_layers"]
    listed = f.get("attn_type_list")
    if listed is not None:
        if not isinstance(listed, list) or len(listed) != n or not all(v in (0, 1) for v in listed):
            raise f.error("attn_type_list", f"must list 0 (lightning) or 1 (softmax) for each of the {n} layers, got "
                                            f"{f.json_text(listed)}")
        kinds = ["full_attention" if v == 1 else "linear_attention" for v in listed]
        f.consume("layer_types")
    else:
        kinds = f.layer_types(n)
        if kinds is None:  # MiniMaxConfig's default: alternating, starting with lightning attention
            kinds = ["full_attention" if (i + 1) % 2 == 0 else "linear_attention" for i in range(n)]
    name = "attn_type_list" if listed is not None else "layer_types"
    n_attention, n_state = _mixer_counts(f, name, kinds, "full_attention", "linear_attention")
    shared = f.get("shared_intermediate_size")
    if shared not in (None, 0, [0]):
        raise f.error("shared_intermediate_size", f"is {f.json_text(shared)}: a shared expert beside MiniMax's routed "
                                                  "ones, which this book does not read; build the model with "
                                                  "scaling_lib.models.Transformer(n_shared_experts=...)")
    state = lightning_attention(fields["d_model"], fields["n_heads"], fields["head_dim"])
    return {**fields, **_experts(f, "num_local_experts"), **_with_state(n_attention, n_state, state)}


def _read_jamba(f: ConfigFields) -> dict:
    """Jamba: attention on the layers i with i % attn_layer_period == attn_layer_offset, Mamba on the others;
    mixtures of `num_experts` on the layers i % expert_layer_period == expert_layer_offset, dense FFNs of the same
    intermediate_size between (JambaConfig's layers_block_type and layers_num_experts)."""
    fields = _decoder(f)
    n, d = fields["n_layers"], fields["d_model"]
    period, offset = f.count("attn_layer_period", 8), f.count("attn_layer_offset", 4, minimum=0)
    e_period, e_offset = f.count("expert_layer_period", 2), f.count("expert_layer_offset", 1, minimum=0)
    for name, off, per in (("attn_layer_offset", offset, period), ("expert_layer_offset", e_offset, e_period)):
        if off >= per:
            raise f.error(name, f"({off}) must be smaller than its period ({per}), as JambaConfig requires")
    n_attention = sum(1 for i in range(n) if i % period == offset)
    n_moe = sum(1 for i in range(n) if i % e_period == e_offset)
    d_inner = f.count("mamba_expand", 2) * d
    rank = f.get("mamba_dt_rank")
    rank = math.ceil(d / 16) if rank in (None, "auto") else f.count("mamba_dt_rank")
    state = mamba(d, d_inner, f.count("mamba_d_state", 16), f.count("mamba_d_conv", 4), rank,
                  conv_bias=f.flag("mamba_conv_bias", True), proj_bias=f.flag("mamba_proj_bias", False))
    fields.update(_with_state(n_attention, n - n_attention, state))
    if f.count("num_experts", 16) > 1:
        fields.update(_experts(f, "num_experts"))
        fields.update(_dense_between(f, fields, n_moe, fields["d_ff"]))
    return fields


_NEMOTRON_H_KINDS = {"M": "a Mamba-2 layer", "*": "an attention layer", "-": "an MLP layer", "E": "a mixture of experts"}


def _read_nemotron_h(f: ConfigFields) -> dict:
    """Nemotron-H: `hybrid_override_pattern` names each block, M Mamba-2, * attention, - an MLP of two matrices
    (squared ReLU), E a mixture of experts; a block holds a mixer or an FFN, never both."""
    pattern = f.get("hybrid_override_pattern")
    if not isinstance(pattern, str) or not pattern or set(pattern) - set(_NEMOTRON_H_KINDS):
        raise f.error("hybrid_override_pattern", "must be a string of M (Mamba-2), * (attention), - (MLP) and E "
                                                 f"(experts), one per block, got {f.json_text(pattern)}")
    fields = _decoder(f, head_dim=("attention_head_dim", "head_dim"))
    if fields["n_layers"] != len(pattern):
        raise f.error("hybrid_override_pattern", f"names {len(pattern)} blocks but 'num_hidden_layers' is "
                                                 f"{fields['n_layers']}")
    activation = f.get("mlp_hidden_act", "relu2")
    if activation != "relu2":
        raise f.error("mlp_hidden_act", f"is {f.json_text(activation)}; this book reads Nemotron-H's squared-ReLU MLP "
                                        "(two matrices)")
    state = mamba2(fields["d_model"], f.count("mamba_num_heads"), f.count("mamba_head_dim"), f.count("n_groups", 1),
                   f.count("ssm_state_size"), f.count("conv_kernel", 4), conv_bias=f.flag("use_conv_bias", True),
                   proj_bias=f.flag("mamba_proj_bias", False))
    fields.update(**_with_state(pattern.count("*"), pattern.count("M"), state),
                  n_ffn_layers=pattern.count("-") + pattern.count("E"), gated_ffn=False)
    if "E" in pattern:
        width = f.count("moe_intermediate_size")
        fields.update(_experts(f, "n_routed_experts"), d_ff=width,
                      n_shared_experts=_shared_in_expert_widths(f, "moe_shared_expert_intermediate_size", width))
        fields.update(_dense_between(f, fields, pattern.count("E"), f.count("intermediate_size")))
    return fields


def _ffn_mult_width(mult: float, d_model: int) -> int:
    """DeciLM's FFN width for a multiplier: 2/3 x mult x D rounded up to a multiple of 256 (its remote code)."""
    width = int(2 * mult * d_model / 3)
    return width + (-width) % 256


def _read_nemotron_nas(f: ConfigFields) -> dict:
    """Llama-Nemotron (Nemotron-NAS, DeciLM): `block_configs` gives each layer's attention (`n_heads_in_group`, or
    no_op: none) and FFN (`ffn_mult`, or no_op). The attention layers must share one head grouping."""
    blocks = f.get("block_configs")
    n_layers, d_model, n_heads = f.count("num_hidden_layers"), f.count("hidden_size"), f.count("num_attention_heads")
    if not isinstance(blocks, list) or len(blocks) != n_layers or not all(isinstance(b, dict) for b in blocks):
        raise f.error("block_configs", f"must list one object per layer ({n_layers}), got {f.json_text(blocks)}")
    f.consume("num_key_value_heads", "intermediate_size")
    groups, widths = set(), []
    for i, block in enumerate(blocks):
        attention, ffn = block.get("attention", {}), block.get("ffn", {})
        for part, what in ((attention, "attention"), (ffn, "ffn")):
            if part.get("replace_with_linear") or part.get("sparsify") or part.get("window_length"):
                raise f.error("block_configs", f"layer {i}'s {what} is replaced by a linear layer, sparsified or "
                                               "windowed; this book reads attention and FFN blocks that are whole "
                                               "or absent (no_op)")
        if not attention.get("no_op"):
            groups.add(attention.get("n_heads_in_group"))
        if not ffn.get("no_op"):
            mult = ffn.get("ffn_mult")
            if isinstance(mult, bool) or not isinstance(mult, (int, float)) or mult <= 0:
                raise f.error("block_configs", f"layer {i}'s ffn_mult must be a positive number, got "
                                               f"{f.json_text(mult)}")
            widths.append(_ffn_mult_width(mult, d_model))
    if len(groups) != 1 or not all(type(g) is int and g > 0 and n_heads % g == 0 for g in groups):
        raise f.error("block_configs", f"groups query heads {sorted(groups, key=str)} ways across its attention layers;"
                                       " this book reads one n_heads_in_group dividing num_attention_heads")
    group = groups.pop()
    return dict(n_layers=n_layers, d_model=d_model, n_heads=n_heads, n_kv_heads=n_heads // group,
                head_dim=d_model // n_heads, vocab_size=f.count("vocab_size"), d_ff=max(widths),
                tied_embeddings=f.flag("tie_word_embeddings", False),
                n_attention_layers=sum(1 for b in blocks if not b.get("attention", {}).get("no_op")),
                n_ffn_layers=len(widths), ffn_widths=tuple(widths))


# The reader of each family, by the model_type of its language model (`hf_config` resolves the type with the
# config's architectures first).
READERS = {
    "llama": _read_llama, "internlm2": _read_llama, "internlm3": _read_llama, "olmo2": _read_llama,
    "granite": _read_llama, "exaone": _read_llama, "cohere": _read_cohere, "chatglm": _read_chatglm,
    "mistral": _read_windowed("all"), "phi3": _read_windowed("all"), "qwen2": _read_windowed("qwen2"),
    "qwen3": _read_windowed("qwen2"), "gemma": _read_windowed("gemma3", tie=True),
    "gemma2": _read_windowed("alternate", tie=True), "gemma3_text": _read_gemma3_text,
    "cohere2": _read_windowed("cohere2", tie=True), "exaone4": _read_windowed("exaone4"), "mixtral": _read_mixtral(), "phimoe": _read_mixtral(),
    "gpt_oss": _read_gpt_oss, "qwen2_moe": _read_qwen_moe("qwen2_moe", shared=True),
    "qwen3_moe": _read_qwen_moe("qwen3_moe", shared=False), "deepseek_v2": _read_deepseek, "deepseek_v3": _read_deepseek,
    "deepseek_v32": _read_deepseek, "glm4_moe": _read_glm4_moe, "llama4_text": _read_llama4,
    "qwen3_next": _read_qwen3_next, "qwen3_5_text": _read_qwen3_5, "minimax": _read_minimax,
    "minimax_m2": _read_minimax_m2, "jamba": _read_jamba, "nemotron_h": _read_nemotron_h,
    "nemotron-nas": _read_nemotron_nas, "gptj": _read_gptj, "gpt_neox": _read_gpt_neox,
}
