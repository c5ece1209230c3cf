"""Reading a Hugging Face config.json (`models.from_hf_config`, `models.read_hf_config`, scaling_lib.hf_config): the
published configs parse to their model cards' parameter totals, each structure is read the way the Hugging Face class
builds it, Hugging Face's defaults fill absent fields, a checkpoint's formats (`quantization_config`) give bytes per
weight group, and a config the book would misread is refused saying why.

The configs are the shipped files of book/data/hf_configs/ and, below, dicts holding the architecture fields of a
model's official config.json on the Hugging Face Hub (the repository named in the comment). The oracle is the
parameter count on the model card, within the precision the card states.
"""

import json
import os
import re

import pytest

from scaling_lib import hf_fields, models
from scaling_lib.__main__ import main
from scaling_lib.flops import decode_step_flops, matmul_params
from scaling_lib.kv_levers import decode_attention_cost, kv_footprint
from scaling_lib.memory import kv_bytes_per_token, kv_cache_bytes
from scaling_lib.models import active_param_count, from_hf_config, get_model, param_count, read_hf_config
from tests import REPO, for_each

CONFIGS = REPO / "book" / "data" / "hf_configs"


def _published(stem):
    return json.loads((CONFIGS / f"{stem}.json").read_text())


LLAMA_CONFIG = dict(model_type="llama", num_hidden_layers=2, hidden_size=64, num_attention_heads=4, vocab_size=256,
                    intermediate_size=128)
GEMMA3 = dict(model_type="gemma3_text", num_hidden_layers=12, hidden_size=64, num_attention_heads=4,
              num_key_value_heads=2, head_dim=16, vocab_size=256, intermediate_size=128, sliding_window=32)
EVERY_SIXTH = ["sliding_attention"] * 5 + ["full_attention"]

# Qwen/Qwen1.5-MoE-A2.7B (card: 14.3B parameters in all, 2.7B activated)
QWEN15_MOE = {"_name_or_path": "Qwen/Qwen1.5-MoE-A2.7B", "architectures": ["Qwen2MoeForCausalLM"],
              "model_type": "qwen2_moe", "decoder_sparse_step": 1, "hidden_size": 2048, "intermediate_size": 5632,
              "max_position_embeddings": 32768, "max_window_layers": 21, "moe_intermediate_size": 1408,
              "num_attention_heads": 16, "num_experts": 60, "num_experts_per_tok": 4, "num_hidden_layers": 24,
              "num_key_value_heads": 16, "shared_expert_intermediate_size": 5632, "sliding_window": 32768,
              "tie_word_embeddings": False, "use_sliding_window": False, "vocab_size": 151936}
# deepseek-ai/DeepSeek-V2-Lite (card: 15.7B parameters, 2.4B activated)
DEEPSEEK_V2_LITE = {"architectures": ["DeepseekV2ForCausalLM"], "model_type": "deepseek_v2",
                    "first_k_dense_replace": 1, "hidden_size": 2048, "intermediate_size": 10944, "kv_lora_rank": 512,
                    "max_position_embeddings": 163840, "moe_intermediate_size": 1408, "moe_layer_freq": 1,
                    "n_routed_experts": 64, "n_shared_experts": 2, "num_attention_heads": 16,
                    "num_experts_per_tok": 6, "num_hidden_layers": 27, "num_key_value_heads": 16, "q_lora_rank": None,
                    "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "tie_word_embeddings": False,
                    "v_head_dim": 128, "vocab_size": 102400}
# microsoft/Phi-4-mini-instruct (card: 3.8B parameters)
PHI4_MINI = {"_name_or_path": "Phi-4-mini-instruct", "architectures": ["Phi3ForCausalLM"], "model_type": "phi3",
             "hidden_size": 3072, "intermediate_size": 8192, "max_position_embeddings": 131072,
             "num_attention_heads": 24, "num_hidden_layers": 32, "num_key_value_heads": 8,
             "partial_rotary_factor": 0.75, "sliding_window": 262144, "tie_word_embeddings": True,
             "vocab_size": 200064}
# microsoft/Phi-3-mini-4k-instruct (card: 3.8B parameters)
PHI3_MINI = {"_name_or_path": "Phi-3-mini-4k-instruct", "architectures": ["Phi3ForCausalLM"], "model_type": "phi3",
             "hidden_size": 3072, "intermediate_size": 8192, "max_position_embeddings": 4096,
             "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 32, "sliding_window": 2047,
             "tie_word_embeddings": False, "vocab_size": 32064}
# Qwen/Qwen2.5-72B-Instruct-AWQ: the 72B shape, its weights 4-bit AWQ
QWEN25_72B_AWQ = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 8192,
                  "intermediate_size": 29696, "max_position_embeddings": 32768, "max_window_layers": 70,
                  "num_attention_heads": 64, "num_hidden_layers": 80, "num_key_value_heads": 8,
                  "quantization_config": {"bits": 4, "group_size": 128, "modules_to_not_convert": None,
                                          "quant_method": "awq", "version": "gemm", "zero_point": True},
                  "sliding_window": 131072, "tie_word_embeddings": False, "use_sliding_window": False,
                  "vocab_size": 152064}
# google/gemma-3-27b-it: the nested multimodal config, its text_config as released (no vocab_size, no
# sliding_window_pattern: Hugging Face's defaults, 262,208 and 6, apply). Card: 27B (the language model)
GEMMA3_27B = {"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
              "text_config": {"head_dim": 128, "hidden_size": 5376, "intermediate_size": 21504,
                              "model_type": "gemma3_text", "num_attention_heads": 32, "num_hidden_layers": 62,
                              "num_key_value_heads": 16, "query_pre_attn_scalar": 168,
                              "rope_scaling": {"factor": 8.0, "rope_type": "linear"}, "sliding_window": 1024}}
# meta-llama/Llama-4-Scout-17B-16E (card: 109B parameters in all, 17B active; the vision encoder is not read)
LLAMA4_SCOUT = {"architectures": ["Llama4ForConditionalGeneration"], "model_type": "llama4",
                "tie_word_embeddings": False,
                "text_config": {"attention_chunk_size": 8192, "head_dim": 128, "hidden_size": 5120,
                                "interleave_moe_layer_step": 1, "intermediate_size": 8192,
                                "intermediate_size_mlp": 16384, "max_position_embeddings": 262144,
                                "model_type": "llama4_text", "moe_layers": list(range(48)),
                                "no_rope_layers": [1, 1, 1, 0] * 12, "num_attention_heads": 40,
                                "num_experts_per_tok": 1, "num_hidden_layers": 48, "num_key_value_heads": 8,
                                "num_local_experts": 16, "vocab_size": 202048}}
SCOUT_TEXT = LLAMA4_SCOUT["text_config"]
# openai/gpt-oss-120b (card: 116.8B parameters, 5.13B active, counting the unembedding and not the embedding)
GPT_OSS_120B = {"architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "hidden_size": 2880,
                "num_hidden_layers": 36, "intermediate_size": 2880, "num_attention_heads": 64,
                "num_key_value_heads": 8, "head_dim": 64, "num_local_experts": 128, "num_experts_per_tok": 4,
                "vocab_size": 201088, "sliding_window": 128,
                "layer_types": ["sliding_attention", "full_attention"] * 18,
                "quantization_config": {"quant_method": "mxfp4"}}
# microsoft/Phi-3.5-MoE-instruct (card: 42B parameters, 41.9B on the Hub, 6.6B active)
PHI35_MOE = {"model_type": "phimoe", "vocab_size": 32064, "hidden_size": 4096, "intermediate_size": 6400,
             "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "num_local_experts": 16,
             "num_experts_per_tok": 2, "max_position_embeddings": 131072}
# allenai/OLMo-2-0425-1B (the Hub's count of its stored weights: 1.48B parameters)
OLMO2_1B = {"architectures": ["Olmo2ForCausalLM"], "model_type": "olmo2", "hidden_size": 2048,
            "intermediate_size": 8192, "num_attention_heads": 16, "num_hidden_layers": 16, "num_key_value_heads": 16,
            "tie_word_embeddings": False, "vocab_size": 100352}


def _nested(depth: int) -> list:
    """[[[...]]], `depth` lists deep: deeper than Python's recursion limit for depth 5,000 (repr of it raises)."""
    outer = inner = []
    for _ in range(depth):
        inner.append([])
        inner = inner[0]
    return outer


DEEP = _nested(5000)


# --- Published configs against their model cards -------------------------------------------------------------------
# name -> (config, card total, card active or None, tolerance). A shipped file's card ("405B") is good to the last
# digit shown: 1%; the transcribed configs are held to 2% on the total and 5% on the active parameters. MLA models'
# and gpt-oss's cards count the weights a token is multiplied by (the input table is a lookup).
CARDS = {
    **{stem: (CONFIGS / f"{stem}.json", total, active, (0.01, 0.01)) for stem, total, active in [
        ("llama-3.1-8b", 8.03e9, None), ("llama-3.1-405b", 405e9, None), ("mistral-7b-v0.1", 7.24e9, None),
        ("mixtral-8x7b", 46.7e9, 12.9e9), ("qwen2.5-7b", 7.61e9, None), ("qwen3-8b", 8.2e9, None),
        ("qwen3-32b", 32.8e9, None),
        ("qwen3-235b-a22b", 235e9, 22e9), ("gemma-2-9b", 9.24e9, None), ("deepseek-v3", 671e9, None)]},
    **{name: (config, total, active, (0.02, 0.05)) for name, config, total, active in [
        ("phi-3.5-moe", PHI35_MOE, 41.9e9, 6.6e9), ("olmo-2-1b", OLMO2_1B, 1.48e9, None),
        ("gemma-3-27b", GEMMA3_27B, 27e9, None), ("llama-4-scout", LLAMA4_SCOUT, 109e9, 17e9),
        ("gpt-oss-120b", GPT_OSS_120B, 116.8e9, 5.13e9), ("qwen1.5-moe-a2.7b", QWEN15_MOE, 14.3e9, 2.7e9),
        ("deepseek-v2-lite", DEEPSEEK_V2_LITE, 15.7e9, 2.4e9), ("phi-4-mini", PHI4_MINI, 3.8e9, None),
        ("phi-3-mini-4k", PHI3_MINI, 3.8e9, None), ("qwen2.5-72b-awq", QWEN25_72B_AWQ, 72.7e9, None)]},
}


@for_each(sorted(CARDS), ids=str)
def test_each_config_parses_to_its_model_cards_parameter_totals(name):
    config, total, active, (total_tolerance, active_tolerance) = CARDS[name]
    model = from_hf_config(config)
    assert param_count(model) == pytest.approx(total, rel=total_tolerance)
    if active is not None:
        touched = matmul_params(model) if model.is_mla or name.startswith("gpt-oss") else active_param_count(model)
        assert touched == pytest.approx(active, rel=active_tolerance)


def test_shapes_read_from_the_shipped_configs_and_the_tables_models_match_their_files():
    deepseek = from_hf_config(CONFIGS / "deepseek-v3.json")
    assert (deepseek.n_layers, deepseek.n_dense_layers, deepseek.n_experts, deepseek.n_active_experts,
            deepseek.n_shared_experts) == (61, 3, 256, 8, 1)
    assert (deepseek.kv_lora_rank, deepseek.rope_head_dim, deepseek.head_dim, deepseek.value_head_dim) == (512, 64,
                                                                                                           192, 128)
    gemma = from_hf_config(CONFIGS / "gemma-2-9b.json")
    assert (gemma.sliding_window, gemma.global_every, gemma.n_global_layers, gemma.tied_embeddings) == (4096, 2, 21,
                                                                                                        True)
    mistral = from_hf_config(CONFIGS / "mistral-7b-v0.1.json")
    assert mistral.sliding_window == 4096 and mistral.n_global_layers == 0
    assert from_hf_config(CONFIGS / "qwen2.5-7b.json").sliding_window is None  # use_sliding_window is false
    for stem, name in (("llama-3.1-405b", "llama3.1-405b"), ("deepseek-v3", "deepseek-v3"),
                       ("jamba-v0.1", "jamba-v0.1")):
        assert from_hf_config(CONFIGS / f"{stem}.json").with_(name="", source="") == get_model(name).with_(
            name="", source="")


def test_transcribed_configs_read_their_experts_latents_windows_and_formats():
    qwen = from_hf_config(QWEN15_MOE)
    assert (qwen.n_experts, qwen.n_active_experts, qwen.n_shared_experts, qwen.d_ff) == (60, 4, 4, 1408)
    assert qwen.name == "qwen1.5-moe-a2.7b"
    lite = from_hf_config(DEEPSEEK_V2_LITE)
    assert (lite.kv_lora_rank, lite.q_lora_rank, lite.rope_head_dim, lite.n_shared_experts, lite.n_dense_layers) == \
        (512, None, 64, 2, 1)
    assert kv_bytes_per_token(lite, "bf16") == 27 * (512 + 64) * 2  # one latent and one RoPE key per layer
    # MLA up-projects the cached latent to per-head keys and values: K = N = 16 whatever num_key_value_heads says
    assert from_hf_config({**DEEPSEEK_V2_LITE, "num_key_value_heads": 1}).n_kv_heads == 16
    phi3 = from_hf_config(PHI3_MINI)
    assert phi3.sliding_window == 2047 and phi3.n_global_layers == 0
    gemma = from_hf_config(GEMMA3_27B)
    assert (gemma.vocab_size, gemma.sliding_window, gemma.global_every, gemma.n_global_layers) == (262208, 1024, 6, 10)
    scout = from_hf_config(LLAMA4_SCOUT)
    assert (scout.n_experts, scout.n_active_experts, scout.n_shared_experts, scout.n_dense_layers) == (16, 1, 1, 0)
    assert (scout.sliding_window, scout.global_every, scout.n_global_layers) == (8192, 4, 12)  # chunks as windows
    oss = read_hf_config(GPT_OSS_120B)
    assert oss.weight_dtype == "mxfp4" and (oss.model.sliding_window, oss.model.global_every) == (128, 2)


# --- Latent attention (MLA): a cached latent, absorbed projections --------------------------------------------------
def test_mla_caches_a_latent_and_a_rope_key_and_its_active_weights_match_the_cards_37b_to_its_two_digits():
    # The card's "37B activated" is rounded to two digits (36.5e9 to 37.5e9). The weights one token is multiplied by
    # (P_mm: routed top-8 plus the shared expert, attention, the output projection; the input table is a lookup)
    # fall inside that band; counting the input table too adds 0.93e9 and falls just above it.
    model = from_hf_config(CONFIGS / "deepseek-v3.json")
    assert 36.5e9 <= matmul_params(model) <= 37.5e9
    assert active_param_count(model) - matmul_params(model) == model.vocab_size * model.d_model
    # DeepSeek-V3 caches, per token and layer, a 512-wide latent and one 64-wide RoPE key: 61 x 576 x 2 B in bf16.
    assert kv_bytes_per_token("deepseek-v3", "bf16") == 61 * (512 + 64) * 2 == 70272
    # The same model with GQA-8 over 192/128-wide heads would cache 61 x 8 x (192 + 128) x 2 B per token.
    gqa = get_model("deepseek-v3").with_(kv_lora_rank=None, q_lora_rank=None, rope_head_dim=0, n_kv_heads=8)
    assert kv_bytes_per_token(gqa, "bf16") == 61 * 8 * (192 + 128) * 2
    assert kv_cache_bytes("deepseek-v3", 32768, batch=2) == 2 * 32768 * 70272
    assert kv_bytes_per_token("llama3-70b") == 2 * 80 * 8 * 128 * 2  # and a GQA model: 2 L K H x 2 B


def test_mla_decode_attention_flops_absorbed_against_a_hand_derivation():
    # Absorbed MLA: per cached token and layer, each of 128 heads scores a 512 + 64 vector and sums a 512 vector.
    cost = decode_attention_cost("deepseek-v3", 1000)
    assert cost.flops == 61 * 1000 * (2 * 128 * (512 + 64) + 2 * 128 * 512)
    assert cost.kv_bytes == 1000 * 70272
    assert 200 < cost.intensity < 300  # near an H100's ridge point: MLA decode attention is far from GQA's ~G FLOPs/B
    # Standard GQA: 4 N H per cached token and layer, G = 8 FLOPs per byte of bf16 cache.
    llama = decode_attention_cost("llama3-70b", 1000)
    assert llama.flops == 80 * 1000 * 4 * 64 * 128 and llama.intensity == pytest.approx(8)
    # Not absorbed, the latents are re-expanded every step: far more FLOPs for the same bytes.
    assert decode_attention_cost("deepseek-v3", 1000, absorbed=False).flops > 50 * cost.flops


# --- Local and global layers: which layers a window limits, as each class decides ----------------------------------
@for_each([
    ({**GEMMA3, "layer_types": EVERY_SIXTH * 2}, 6),  # a periodic pattern gives its period
    (GEMMA3, 6),  # Gemma 3 without a pattern: Hugging Face's default sliding_window_pattern, every sixth layer global
    ({**GEMMA3, "sliding_window_pattern": 3}, 3),
    ({**GEMMA3, "layer_types": ["sliding_attention", "full_attention"] * 6}, 2),
    ({**GEMMA3, "model_type": "gemma2", "sliding_window_pattern": 6}, 2),  # Gemma 2 alternates whatever it says
    ({**GEMMA3, "model_type": "gpt_oss", "num_local_experts": 4, "num_experts_per_tok": 2}, 2),  # gpt-oss too
], ids=str)
def test_a_periodic_local_global_pattern_gives_its_period(config, global_every):
    assert from_hf_config(config).global_every == global_every


@for_each([
    (["sliding_attention"] * 12, 0),
    ((["full_attention"] + ["sliding_attention"] * 5) * 2, 2),
    (EVERY_SIXTH + ["sliding_attention"] * 3 + ["full_attention"] + ["sliding_attention"] * 2, 2),
], ids=str)
def test_a_local_global_pattern_that_is_not_periodic_is_read_as_counts(layer_types, n_global):
    # Where the global layers sit does not change the cost: their number does (global_layers).
    model = from_hf_config({**GEMMA3, "layer_types": layer_types})
    assert (model.n_global_layers, model.sliding_window) == (n_global, GEMMA3["sliding_window"])
    assert models.param_count(model) == models.param_count(from_hf_config(GEMMA3))


def _llama_from_gemma3():
    llama = dict(GEMMA3, model_type="llama", _name_or_path="org/My-Model")
    del llama["num_key_value_heads"], llama["sliding_window"]
    return llama


@for_each([("qwen2", 3, 3), ("qwen3", 0, 0), ("qwen2", None, 12),
                                                                ("qwen3_moe", 3, 0), ("qwen2_moe", 8, 8)], ids=str)
def test_a_qwen_config_that_uses_its_sliding_window_windows_the_layers_its_class_does(kind, max_window_layers,
                                                                                      n_global):
    # Hugging Face: Qwen2/Qwen3 window the layers from max_window_layers on (none when it is absent, its default
    # being every layer); Qwen3-MoE windows every layer; Qwen2-MoE every other layer below max_window_layers.
    config = dict(_llama_from_gemma3(), model_type=kind, use_sliding_window=True, sliding_window=16,
                  max_window_layers=max_window_layers)
    if kind.endswith("moe"):
        config.update(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32)
    model = from_hf_config(config)
    assert model.n_global_layers == n_global
    assert model.sliding_window == (16 if n_global < 12 else None)


def test_a_window_limits_the_cache_of_the_local_layers_only():
    # Gemma 2 9B: 42 layers, 21 global; 8 KV heads of 256: 2 x 8 x 256 x 2 B = 8,192 B per token and layer.
    gemma = from_hf_config(CONFIGS / "gemma-2-9b.json")
    assert kv_cache_bytes(gemma, 8192) == 8192 * (21 * 8192 + 21 * 4096)
    assert kv_cache_bytes(gemma, 8192) == kv_footprint(gemma, [8192]).stored_bytes
    assert kv_cache_bytes(gemma, 2048) == 42 * 2048 * 8192  # shorter than the window: nothing dropped
    all_global = gemma.with_(sliding_window=None, global_every=None)
    assert decode_step_flops(gemma, 8192, skip_masked=True).attention < decode_step_flops(
        all_global, 8192, skip_masked=True).attention
    # Qwen3MoeForCausalLM gives every layer config.sliding_window when use_sliding_window is true (max_window_layers
    # is not read): at 16,384 tokens each layer keeps the last 4,096.
    windowed = {**_published("qwen3-30b-a3b"), "use_sliding_window": True, "sliding_window": 4096,
                "max_window_layers": 28}
    model = from_hf_config(windowed)
    assert (model.sliding_window, model.n_global_layers) == (4096, 0)
    assert kv_cache_bytes(model, 16384) == 4096 * kv_bytes_per_token(model)


# --- Hugging Face's defaults for absent fields ----------------------------------------------------------------------
def test_absent_kv_heads_head_dim_and_name_take_hugging_faces_defaults():
    model = from_hf_config(_llama_from_gemma3())
    assert (model.n_kv_heads, model.name) == (4, "my-model")  # K defaults to N (multi-head); the repository's name
    assert from_hf_config(LLAMA_CONFIG).name == "llama"  # no name, no architectures: the model_type
    assert from_hf_config({**PHI3_MINI, "_name_or_path": "/home/me/models/Phi-3-Mini"}).name == "phi-3-mini"
    assert from_hf_config({**LLAMA_CONFIG, "tie_word_embeddings": True}).tied_embeddings is True
    llama = {key: value for key, value in _published("llama-3.1-8b").items() if key != "head_dim"}
    assert from_hf_config(llama).head_dim == from_hf_config({**llama, "head_dim": None}).head_dim == 4096 // 32
    assert from_hf_config({**llama, "head_dim": 128.0}).head_dim == 128  # JSON has one number type


def test_string_booleans_are_never_read_as_true():
    """bool("false") is True: the string is refused, and a JSON false gives an untied model."""
    llama = _published("llama-3.1-8b")
    assert from_hf_config({**llama, "tie_word_embeddings": False}).tied_embeddings is False
    with pytest.raises(ValueError, match="'tie_word_embeddings'.*true or false without quotes"):
        from_hf_config({**llama, "tie_word_embeddings": "false"})
    qwen = _published("qwen2.5-7b")
    assert from_hf_config({**qwen, "use_sliding_window": False}).sliding_window is None
    with pytest.raises(ValueError, match="'use_sliding_window'.*JSON boolean") as err:
        from_hf_config({**qwen, "use_sliding_window": "false"})
    assert "per-layer window" not in str(err.value)  # the type error, not the unsupported-window one


def test_llama4_without_interleave_moe_layers_intermediate_mlp_or_chunks_takes_hugging_faces_defaults():
    # Hugging Face's default interleave_moe_layer_step is 1: every layer an MoE layer, as Scout lists explicitly.
    text = {k: v for k, v in SCOUT_TEXT.items() if k not in ("interleave_moe_layer_step", "moe_layers")}
    model = from_hf_config({**LLAMA4_SCOUT, "text_config": text})
    assert (model.n_dense_layers, model.n_moe_layers) == (0, 48)
    assert model == from_hf_config(LLAMA4_SCOUT)
    # Scout's layers are all MoE: intermediate_size_mlp (the dense layers' width) is then never needed.
    text = {k: v for k, v in SCOUT_TEXT.items() if k != "intermediate_size_mlp"}
    model = from_hf_config({**LLAMA4_SCOUT, "text_config": text})
    assert (model.n_dense_layers, model.d_ff_dense) == (0, None)
    assert from_hf_config(LLAMA4_SCOUT).d_ff_dense is None
    # Without attention_chunk_size there are no chunks: every layer attends to the whole context.
    del text["attention_chunk_size"]
    unchunked = from_hf_config({**LLAMA4_SCOUT, "text_config": text})
    assert (unchunked.sliding_window, unchunked.global_every, unchunked.n_global_layers) == (None, None, 48)
    # Every 2nd layer global (NoPE) instead of the default every 4th: 24 of the 48 layers attend to everything.
    text = {**SCOUT_TEXT, "no_rope_layer_interval": 2}
    del text["no_rope_layers"]
    model = from_hf_config({**LLAMA4_SCOUT, "text_config": text})
    assert (model.global_every, model.n_global_layers) == (2, 24)
    assert from_hf_config({**LLAMA4_SCOUT, "text_config": {**text, "no_rope_layers": [1, 0] * 24}}).global_every == 2


def test_deepseek_and_qwen_moe_defaults_for_absent_fields_and_their_limits():
    absent = ("moe_layer_freq", "first_k_dense_replace", "n_shared_experts")
    bare = from_hf_config({k: v for k, v in DEEPSEEK_V2_LITE.items() if k not in absent})
    # Hugging Face's defaults: every layer MoE (freq 1), no leading dense layer, no shared expert
    assert (bare.n_dense_layers, bare.n_moe_layers, bare.n_shared_experts) == (0, 27, 0)
    all_dense = from_hf_config({**DEEPSEEK_V2_LITE, "first_k_dense_replace": 27})  # as many as there are layers
    assert (all_dense.n_dense_layers, all_dense.n_moe_layers) == (27, 0)
    # every other layer MoE after the first (DeepseekV2's layer_idx % moe_layer_freq == 0): 13 MoE, 14 dense
    alternate = from_hf_config({**DEEPSEEK_V2_LITE, "moe_layer_freq": 2})
    assert (alternate.n_moe_layers, alternate.n_dense_layers) == (13, 14)
    # n_shared_experts 0: each MoE layer (26 of 27) loses the 2 shared experts of 3 x 2,048 x 1,408 parameters each.
    routed_only = from_hf_config({**DEEPSEEK_V2_LITE, "n_shared_experts": 0})
    assert routed_only.n_shared_experts == 0
    assert param_count(from_hf_config(DEEPSEEK_V2_LITE)) - param_count(routed_only) == 26 * 2 * 3 * 2048 * 1408
    for shared in ({}, {"shared_expert_intermediate_size": 0}):
        config = {k: v for k, v in QWEN15_MOE.items() if k != "shared_expert_intermediate_size"} | shared
        assert from_hf_config(config).n_shared_experts == 0
    unsparse = {k: v for k, v in QWEN15_MOE.items() if k != "decoder_sparse_step"}  # Hugging Face's default: 1
    assert from_hf_config(unsparse) == from_hf_config(QWEN15_MOE)
    # The published Qwen3-Coder-480B-A35B carries shared_expert_intermediate_size 0 (and Qwen3MoeForCausalLM builds
    # none whatever it says): read, and equal to the config without the field.
    coder = _published("qwen3-coder-480b-a35b")
    without = {k: v for k, v in coder.items() if k != "shared_expert_intermediate_size"}
    assert from_hf_config(coder) == from_hf_config(without) and from_hf_config(coder).n_shared_experts == 0


def test_llama4_dense_layers_between_moe_layers_are_counted():
    every_other = {**LLAMA4_SCOUT, "text_config": {**SCOUT_TEXT, "interleave_moe_layer_step": 2, "moe_layers": None}}
    model = from_hf_config(every_other)
    assert (model.n_dense_layers, model.d_ff_dense, model.n_moe_layers) == (24, 16384, 24)
    dense_ffn = 3 * 5120 * 16384
    moe_ffn = (16 + 1) * 3 * 5120 * 8192 + 5120 * 16  # routed and shared experts, the router
    assert param_count(from_hf_config(LLAMA4_SCOUT)) - param_count(model) == 24 * (moe_ffn - dense_ffn)


# --- A nested (multimodal) config: the language model's fields ------------------------------------------------------
def test_a_nested_text_config_takes_the_outer_name_quantization_and_tie_but_keeps_its_own_values():
    outer = {"model_type": "gemma3", "_name_or_path": "google/gemma-3-4b-it", "tie_word_embeddings": False,
             "quantization_config": {"quant_method": "fp8"}, "text_config": {"model_type": "llama"}}
    read = read_hf_config(outer)
    # the text_config is read as a Gemma 3 text model (its model_type overridden) with Hugging Face's defaults
    assert (read.model.name, read.model.tied_embeddings, read.weight_dtype) == ("gemma-3-4b-it", False, "fp8")
    assert (read.model.vocab_size, read.model.global_every) == (262_208, 6)
    inner_wins = {**outer, "text_config": {"tie_word_embeddings": True, "_name_or_path": "inner/name"}}
    assert (from_hf_config(inner_wins).tied_embeddings, from_hf_config(inner_wins).name) == (True, "name")
    # Gemma 3 and Llama 4 keep max_position_embeddings in their text_config (Hugging Face's Gemma 3 default: 131,072)
    assert read_hf_config({"model_type": "gemma3", "text_config": {}}).max_position_embeddings == 131_072
    nested = {"model_type": "gemma3", "text_config": {"max_position_embeddings": 8192}}
    assert read_hf_config(nested).max_position_embeddings == 8192


# --- A checkpoint's formats: quantization_config ----------------------------------------------------------------------
@for_each([
    ({"quant_method": "fbgemm_fp8"}, "fp8"), ({"quant_method": "modelopt", "quant_algo": "FP8"}, "fp8"),
    ({"quant_method": "modelopt", "quant_algo": "NVFP4"}, "nvfp4"), ({"quant_method": "awq", "bits": 8}, "int8"),
    ({"quant_method": "gptq", "bits": 4}, "int4"), ({"quant_method": "awq", "bits": 4}, "int4"),
    ({"quant_method": "gptq", "bits": 8}, "int8"), ({"quant_method": "fp8", "fmt": "e4m3"}, "fp8"),
    ({"quant_method": "mxfp4"}, "mxfp4"), (None, None)], ids=str)
def test_each_quantization_method_names_its_weight_format_and_the_position_limit_is_read_beside_it(quantization,
                                                                                                    weights):
    config = {**PHI3_MINI, "quantization_config": quantization}
    read = read_hf_config(config)
    assert read.weight_dtype == weights and read.max_position_embeddings == 4096
    assert read.model == from_hf_config(config)


def test_the_position_limit_is_an_integer_or_absent():
    assert read_hf_config(LLAMA_CONFIG).max_position_embeddings is None
    assert read_hf_config({**LLAMA_CONFIG, "max_position_embeddings": 4096.0}).max_position_embeddings == 4096


# quantization_config -> (the format named, bytes per weight by group as the method stores them)
GROUPS = {
    "gpt-oss's mxfp4": ({"quant_method": "mxfp4", "modules_to_not_convert": [
        "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]},
        "mxfp4", dict(experts=4.25 / 8, attention=2, router=2, embeddings=2, head=2)),
    "DeepSeek's block fp8": ({"quant_method": "fp8", "weight_block_size": [128, 128]}, "fp8",
                             dict(experts=1 + 4 / 128**2, attention=1 + 4 / 128**2, embeddings=2, head=2, router=2)),
    "AWQ int4, groups of 128 with zeros": ({"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True},
                                           "int4", dict(attention=0.5 + (2 + 0.5) / 128, head=2)),
    "GPTQ int8 with its head": ({"quant_method": "gptq", "bits": 8, "group_size": 128, "lm_head": True}, "int8",
                                dict(feed_forward=1 + 3 / 128, head=1 + 3 / 128, embeddings=2)),
    "compressed-tensors fp8 per channel": ({"quant_method": "compressed-tensors", "format": "float-quantized",
                                            "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
                                                "num_bits": 8, "type": "float", "strategy": "channel"}}},
                                            "ignore": ["lm_head"]}, "fp8", dict(attention=1, head=2)),
    "compressed-tensors nvfp4": ({"quant_method": "compressed-tensors", "config_groups": {"group_0": {
        "targets": ["Linear"], "weights": {"num_bits": 4, "type": "float", "strategy": "tensor_group",
                                           "group_size": 16}}}, "ignore": ["re:.*mlp.gate$", "lm_head"]},
        "nvfp4", dict(experts=4.5 / 8, router=2, head=2)),
    "ModelOpt FP8 with excluded attention": ({"quant_method": "modelopt", "quant_algo": "FP8",
                                              "exclude_modules": ["model.layers.*.self_attn*", "lm_head"]}, "fp8",
                                             dict(attention=2, feed_forward=1)),
    "bitsandbytes nf4, double quantized": ({"quant_method": "bitsandbytes", "load_in_4bit": True,
                                            "bnb_4bit_use_double_quant": True}, "int4",
                                           dict(attention=0.5 + 1 / 64 + 4 / (64 * 256))),
}


@for_each(sorted(GROUPS), ids=str)
def test_each_quantization_method_gives_bytes_per_weight_group_scales_included(case):
    quantization, dtype, groups = GROUPS[case]
    read = read_hf_config({**_published("qwen3-30b-a3b"), "quantization_config": quantization})
    assert read.weight_dtype == dtype
    for group, per_weight in groups.items():
        assert read.weight_dtype.group_bytes(group) == pytest.approx(per_weight, rel=1e-12), group


# --- Where a config comes from: a file, a model folder, a Hugging Face cache entry --------------------------------
def _write(folder, config):
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(config))


def test_a_model_folder_and_a_hugging_face_cache_entry_are_read_and_named(tmp_path):
    _write(tmp_path / "my-model", QWEN15_MOE)
    assert from_hf_config(tmp_path / "my-model").name == "qwen1.5-moe-a2.7b"  # from _name_or_path
    entry = tmp_path / "hub" / "models--Qwen--Qwen1.5-MoE-A2.7B"
    unnamed = {k: v for k, v in QWEN15_MOE.items() if k != "_name_or_path"}
    _write(entry / "snapshots" / "0123abcd", unnamed)
    _write(entry / "snapshots" / "4567ef01", unnamed)
    with pytest.raises(ValueError, match="2 snapshots"):
        from_hf_config(entry)
    (entry / "refs").mkdir()
    (entry / "refs" / "main").write_text("4567ef01\n")
    for path in (entry, entry / "snapshots" / "0123abcd", entry / "snapshots" / "0123abcd" / "config.json"):
        assert from_hf_config(path).name == "qwen1.5-moe-a2.7b", path  # from the cache entry, not the hash
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="is a directory with no config.json"):
        from_hf_config(tmp_path / "empty")
    # A model without a name is named after its class, never its folder.
    _write(tmp_path / "configs", {**LLAMA_CONFIG, "architectures": ["LlamaForCausalLM"]})
    assert from_hf_config(tmp_path / "configs" / "config.json").name == "LlamaForCausalLM"


def test_a_quantization_the_file_holds_is_read_from_the_folder_and_refused_naming_the_file(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**LLAMA_CONFIG, "quantization_config": {"quant_method": "bitnet"}}))
    with pytest.raises(ValueError, match=rf"\bfield 'quantization_config' of {re.escape(str(path))} has"):
        read_hf_config(path)
    path.write_text(json.dumps({**LLAMA_CONFIG, "quantization_config": {"quant_method": "fp8"}}))
    assert read_hf_config(tmp_path).weight_dtype == "fp8"  # the folder, read like the file
    # A combination the model refuses names the config's fields in the file.
    path.write_text(json.dumps({**_published("deepseek-v3"), "n_routed_experts": 1, "num_experts_per_tok": 1}))
    with pytest.raises(ValueError, match=r"n_shared_experts=1 on a dense model .*\(in .*config\.json, where "
                                         r"n_experts is 'n_routed_experts', n_shared_experts is 'n_shared_experts'\)"):
        from_hf_config(path)


@pytest.mark.parametrize("content, says", [(b"[1]", "holds a list (1 items) at its top level"),
                                           (b"null", "holds null at its top level"),
                                           (b"\xff", "is not UTF-8 text (byte 0 is 0xff)"),
                                           (b'{"model_type": "llama", \xff}', "a config.json is JSON saved as UTF-8"),
                                           (b"{", "is not valid JSON: Expecting property name"),
                                           (b"[" * 100_000, "nests lists or objects too deeply"),
                                           (b"[" + b"1" * 5000 + b"]", "thousands of digits")])
def test_a_file_that_is_no_config_is_refused_naming_the_file(content, says, tmp_path):
    path = tmp_path / "odd.json"
    path.write_bytes(content)
    with pytest.raises(ValueError, match="odd.json") as err:
        from_hf_config(path)
    assert says in str(err.value)
    with pytest.raises(ValueError, match="is a directory"):
        from_hf_config(tmp_path)
    with pytest.raises(ValueError, match="cannot open the config file aaaa.*: File name too long"):
        from_hf_config("a" * 5000)
    with open(tmp_path / "weights.json", "wb") as big:
        big.truncate(10**7 + 1)  # sparse: no disk used
    with pytest.raises(ValueError, match="weights.json holds 10,000,001 bytes; a config.json is a few kB"):
        from_hf_config(tmp_path / "weights.json")
    with pytest.raises(ValueError, match="no config file"):
        from_hf_config(tmp_path / "missing.json")


def test_a_config_file_of_exactly_the_size_limit_is_read_one_byte_more_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(hf_fields, "MAX_CONFIG_BYTES", 1000)  # the real limit, 10 MB, is too large to write in a test
    text = json.dumps(LLAMA_CONFIG)
    path = tmp_path / "config.json"
    path.write_text(text + " " * (1000 - len(text)))
    assert from_hf_config(path).n_layers == 2
    path.write_text(text + " " * (1001 - len(text)))
    with pytest.raises(ValueError, match=r"\bholds 1,001 bytes\b"):
        from_hf_config(path)


def test_a_model_folder_whose_config_path_is_too_long_to_open_is_refused_with_a_short_message(tmp_path):
    # A folder path just under the system's PATH_MAX whose config.json path is past it: stat fails on the file
    # (ENAMETOOLONG), and the message names the folder without printing all of its path.
    limit = os.pathconf(tmp_path, "PC_PATH_MAX")
    folder = str(tmp_path)
    while len(folder) < limit - 6:
        folder = os.path.join(folder, "d" * max(1, min(200, limit - 7 - len(folder))))
    assert len(folder) < limit <= len(folder) + len("/config.json")
    os.makedirs(folder)
    with pytest.raises(ValueError, match=r"^cannot read the model folder .*: File name too long$") as err:
        from_hf_config(folder)
    assert len(str(err.value)) < 300 and str(err.value).startswith(f"cannot read the model folder {folder[:100]}")


# --- The command line reads the config's formats and limits ---------------------------------------------------------
def test_the_command_line_takes_the_configs_formats_and_refuses_a_context_past_its_positions(tmp_path, capsys):
    _write(tmp_path / "awq", QWEN25_72B_AWQ)
    config = str(tmp_path / "awq")
    assert main(["estimate", "--config", config, "--chip", "h100", "--chips", "2", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["weight_dtype"] == "int4" and data["model"] == "Qwen2ForCausalLM"  # its class, never the folder
    assert main(["estimate", "--config", config, "--chip", "h100", "--chips", "2", "--weights", "fp8",
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["weight_dtype"] == "fp8"
    assert main(["plan", "--config", config, "--chip", "h100", "--max-chips", "2", "--input-len", "1000",
                 "--output-len", "100", "--price", "2", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert {p["weight_dtype"] for p in [result["best"]] + result["frontier"]} == {"int4"}
    for argv in (["estimate", "--config", config, "--chip", "h100", "--chips", "2", "--context", "40000"],
                 ["plan", "--config", config, "--chip", "h100", "--max-chips", "2", "--input-len", "32000",
                  "--output-len", "1000", "--price", "2"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "max_position_embeddings=32,768" in err and err.count("\n") == 1, err
    # A KV cache format the checkpoint names is the estimate's default.
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**_published("llama-3.1-8b"), "quantization_config": {
        "quant_method": "modelopt", "quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}}))
    read = read_hf_config(path)
    assert (read.weight_dtype, read.kv_dtype) == ("fp8", "fp8")
    assert main(["estimate", "--config", str(path), "--chip", "h100", "--chips", "1", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["kv_dtype"], data["kv_bytes_per_token"]) == ("fp8", kv_bytes_per_token("llama3-8b", "fp8"))


def test_the_table_reports_the_kv_per_token_a_sliding_window_leaves_beside_the_full_one(capsys):
    mistral = CONFIGS / "mistral-7b-v0.1.json"
    argv = ["estimate", "--config", str(mistral), "--chip", "h100", "--chips", "1", "--context", "16384"]
    assert main(argv + ["--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    model = from_hf_config(mistral)
    assert data["kv_bytes_per_token"] == kv_bytes_per_token(model, "bf16")
    assert data["kv_bytes_per_token_effective"] == kv_cache_bytes(model, 16384, 1, "bf16") / 16384
    assert data["kv_bytes_per_token_effective"] == pytest.approx(data["kv_bytes_per_token"] * 4096 / 16384)
    assert main(argv) == 0
    assert "on average over 16,384 tokens: sliding windows keep fewer" in capsys.readouterr().out


# --- A config the book would misread is refused, by architecture, not by label ---------------------------------------
# (config, what the refusal must say): each relabelled or unreadable config is refused with its reason, and no
# refusal suggests another model_type (a relabelling is how misreads happen).
REFUSED = {
    "Cohere relabelled llama": ({**_published("command-r-v01"), "model_type": "llama"},
                                r"model_type 'llama' and architectures CohereForCausalLM .* disagree"),
    "MiniMax relabelled mixtral": ({**_published("minimax-m1"), "model_type": "mixtral"},
                                   r"disagree: .* the class computes MiniMax-01/M1, a hybrid"),
    "Jamba relabelled mixtral": ({**_published("jamba-v0.1"), "model_type": "mixtral"},
                                 r"the class computes Jamba, a hybrid of Mamba and attention layers"),
    "Qwen3-Next relabelled qwen2_moe": ({**_published("qwen3-next-80b-a3b"), "model_type": "qwen2_moe"},
                                        r"the class computes Qwen3-Next"),
    "Qwen1.5-MoE relabelled qwen3_moe": ({**QWEN15_MOE, "model_type": "qwen3_moe"},
                                         r"model_type 'qwen3_moe' and architectures Qwen2MoeForCausalLM .* disagree"),
    "a MiniMax labelled mixtral with no class": (
        {k: v for k, v in {**_published("minimax-m1"), "model_type": "mixtral"}.items() if k != "architectures"},
        r"field 'attn_type_list' .* sets linear-attention layers, which a Mixtral mixture of experts does not have"),
    "a window switched on with no length": ({**_published("qwen3-30b-a3b"), "use_sliding_window": True},
                                            r"field 'use_sliding_window' .* is true but the config has no "
                                            r"'sliding_window'"),
    "chunked attention on a LLaMA": ({**_published("llama-3.1-8b"), "attention_chunk_size": 8192},
                                     r"field 'attention_chunk_size' .* sets chunked attention"),
    "MTP on a Mistral": ({**_published("mistral-7b-v0.1"), "num_nextn_predict_layers": 1},
                         r"field 'num_nextn_predict_layers' .* sets multi-token-prediction layers"),
    "linear attention on a Qwen2": ({**_published("qwen2.5-7b"), "linear_num_key_heads": 16},
                                    r"field 'linear_num_key_heads' .* sets linear-attention layers"),
    "a pure Mamba": ({"model_type": "mamba2", "hidden_size": 2560},
                     r"it has only Mamba-2 layers \(no attention at all\), which this book's models cannot represent"),
    "an unknown family": ({"model_type": "foo", "architectures": ["FooForCausalLM"]},
                          r"not a family this book reads: .* build its shape from the model card with "
                          r"scaling_lib\.models\.Transformer"),
    "a complete GPT-2": ({**LLAMA_CONFIG, "model_type": "gpt2"},
                         r"model_type 'gpt2' in the config dict is not a family this book reads: it has learned "
                         r"positions and an MLP with biases"),
    "a classifier": ({**_published("llama-3.1-8b"), "architectures": ["LlamaForSequenceClassification"]},
                     r"puts a classifier head on the model"),
    "an unknown class": ({**_published("llama-3.1-8b"), "architectures": ["MyLlamaForCausalLM"]},
                         r"a class this book does not know, so it cannot confirm"),
    "two classes": ({**_published("llama-3.1-8b"), "architectures": ["LlamaForCausalLM", "MistralForCausalLM"]},
                    r"names 2 classes"),
    "a MiniMax shared expert": ({**_published("minimax-m1"), "shared_intermediate_size": 9216},
                                r"'shared_intermediate_size' .* a shared expert beside MiniMax's routed ones"),
    "a Nemotron-NAS linear block": (
        {**_published("llama-3.3-nemotron-super-49b"),
         "block_configs": [{"attention": {"replace_with_linear": True}, "ffn": {"ffn_mult": 1.0}}] * 80},
        r"layer 0's attention is replaced by a linear layer"),
    "a layer kind the family lacks": ({**GEMMA3, "layer_types": ["linear_attention"] * 12},
                                      r"\bfield 'layer_types' of the config dict has layers of kind "
                                      r"'linear_attention'; this family's layers are full_attention or "
                                      r"sliding_attention"),
    "a Llama 4 NoPE pattern off the period": ({**LLAMA4_SCOUT, "text_config": {**SCOUT_TEXT,
                                                                                "no_rope_layers": [1, 0] * 24}},
                                              r"'no_rope_layers' .* every 4th layer"),
}


@for_each(sorted(REFUSED), ids=str)
def test_a_config_this_book_would_misread_is_refused_saying_why_and_never_suggesting_a_relabelling(case):
    config, says = REFUSED[case]
    with pytest.raises(ValueError, match=says) as err:
        from_hf_config(config)
    assert "its model_type is" not in str(err.value) and "set model_type" not in str(err.value)


# (config, field, bad value, what the message must say). Every field from_hf_config reads, with a value of the wrong
# JSON type or range: each is refused naming the field, never read as something else.
BAD_FIELDS = [
    *[("llama-3.1-8b", field, bad, "must be") for field in ("num_hidden_layers", "hidden_size", "num_attention_heads",
                                                            "num_key_value_heads", "vocab_size", "intermediate_size",
                                                            "head_dim")
      for bad in ("4096", True, False, 2.5, 0, -8, [8], {"n": 8}, 1e300, float("nan"), 2**60)],
    ("llama-3.1-8b", "head_dim", 0, "positive integer"), ("llama-3.1-8b", "head_dim", False, "the boolean false"),
    ("llama-3.1-8b", "head_dim", -128, "positive integer"),
    ("llama-3.1-8b", "hidden_size", "4096", "write 4096 without quotes"),
    *[("llama-3.1-8b", "tie_word_embeddings", bad, "JSON boolean") for bad in ("false", "true", 0, 1, None, [])],
    *[("qwen2.5-7b", "use_sliding_window", bad, "JSON boolean") for bad in ("false", "true", 0, None)],
    ("mistral-7b-v0.1", "sliding_window", "4096", "must be an integer"),
    ("mistral-7b-v0.1", "sliding_window", 0, "positive integer"),
    ("mistral-7b-v0.1", "sliding_window", True, "the boolean true"),
    ("mixtral-8x7b", "num_local_experts", "8", "must be an integer"),
    ("mixtral-8x7b", "num_experts_per_tok", 0, "positive integer"),
    ("mixtral-8x7b", "num_experts_per_tok", 9, "exceeds 'num_local_experts'"),
    ("qwen3-235b-a22b", "decoder_sparse_step", "1", "must be an integer"),
    ("qwen3-235b-a22b", "mlp_only_layers", "[]", "must be a list"),
    ("qwen3-235b-a22b", "moe_intermediate_size", 1.5, "must be an integer"),
    ("deepseek-v3", "first_k_dense_replace", 62, "exceeds 'num_hidden_layers'"),
    ("deepseek-v3", "first_k_dense_replace", -1, "integer >= 0"),
    ("deepseek-v3", "n_shared_experts", "1", "must be an integer"),
    ("deepseek-v3", "q_lora_rank", 0, "positive integer"),
    ("deepseek-v3", "kv_lora_rank", "512", "must be an integer"),
    ("deepseek-v3", "moe_layer_freq", "1", "must be an integer"),
    ("deepseek-v3", "qk_rope_head_dim", -64, "integer >= 0"),
    ("gemma-2-9b", "_name_or_path", 3, "must be a string"),
]


@for_each(BAD_FIELDS, ids=[f"{stem}-{field}-{bad!r}" for stem, field, bad, _ in BAD_FIELDS])
def test_a_field_of_the_wrong_type_or_range_is_refused_naming_it(stem, field, bad, says):
    with pytest.raises(ValueError) as err:
        from_hf_config({**_published(stem), field: bad})
    assert f"'{field}'" in str(err.value) and says in str(err.value), str(err.value)


# --- Bad input: a ValueError naming the field and the fix -----------------------------------------------------------
def _without(config, *fields):
    return {k: v for k, v in config.items() if k not in fields}


@for_each([
    # a missing or inconsistent shape
    (lambda: from_hf_config({"model_type": "llama"}),
     r"add it, or build the model with scaling_lib\.models\.Transformer"),
    (lambda: from_hf_config({"model_type": "mistral", "num_hidden_layers": 2, "num_attention_heads": 4}),
     r"'hidden_size' \(model_type 'mistral'\)"),
    (lambda: from_hf_config({"model_type": "gpt2"}), "model_type 'gpt2'"),
    (lambda: from_hf_config(_without(_published("llama-3.1-8b"), "num_hidden_layers")), "num_hidden_layers"),
    (lambda: from_hf_config(_without(_published("qwen3-235b-a22b"), "moe_intermediate_size")),
     "'moe_intermediate_size'"),
    (lambda: from_hf_config({"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32,
                             "num_key_value_heads": 5, "num_hidden_layers": 2, "intermediate_size": 11008,
                             "vocab_size": 32000}), "each KV head serves a whole group of query heads"),
    (lambda: from_hf_config({**_without(_published("llama-3.1-8b"), "head_dim"), "hidden_size": 4095}),
     r"'hidden_size' of the config dict \(4095\) is not a multiple of 'num_attention_heads' \(32\) and there is no "
     r"'head_dim'"),
    (lambda: from_hf_config({**GEMMA3, "sliding_window_pattern": 0}),
     r"field 'sliding_window_pattern' .* must be a positive integer"),
    (lambda: from_hf_config({**PHI3_MINI, "model_type": DEEP}),
     r"^field 'model_type' of .* must be a string .*, got a list \(1 items\)"),
    (lambda: from_hf_config({**PHI3_MINI, "_name_or_path": 5}), r"'_name_or_path' .* got 5\b"),
    (lambda: read_hf_config({**LLAMA_CONFIG, "max_position_embeddings": "4096"}),
     r"\bfield 'max_position_embeddings' of the config dict must be an integer"),
    # experts and layers
    (lambda: from_hf_config({**QWEN15_MOE, "shared_expert_intermediate_size": 5000}),
     "'shared_expert_intermediate_size' .* not a multiple"),
    (lambda: from_hf_config({**QWEN15_MOE, "mlp_only_layers": "none"}), r"'mlp_only_layers' .* got the string 'none'"),
    (lambda: from_hf_config({**DEEPSEEK_V2_LITE, "first_k_dense_replace": 28}),
     r"'first_k_dense_replace' .* \(28\) exceeds 'num_hidden_layers' \(27\)"),
    (lambda: from_hf_config({**LLAMA4_SCOUT, "text_config": {**SCOUT_TEXT, "moe_layers": [99]}}), "'moe_layers'"),
    (lambda: from_hf_config({**LLAMA4_SCOUT, "text_config": {**SCOUT_TEXT, "moe_layers": [48]}}),
     r"'moe_layers' .* layer indices below 48, got a list \(1 items\)"),
    (lambda: from_hf_config({**LLAMA4_SCOUT, "text_config": {**SCOUT_TEXT, "moe_layers": "all"}}),
     r"'moe_layers' .* layer indices below 48, got the string 'all'"),
    # a nested config names the field as being inside it
    (lambda: from_hf_config({"model_type": "gemma3", "text_config": {"hidden_size": "big"}}),
     r"\bfield 'hidden_size' of the config dict \(its text_config\) must be"),
    (lambda: from_hf_config({"model_type": "llama4", "text_config": [4]}),
     r"\bfield 'text_config' of the config dict must be an object holding the language model's fields "
     r"\(model_type 'llama4'\), got a list \(1 items\)"),
    (lambda: from_hf_config({"model_type": "gemma3", "text_config": [1]}), "'text_config'"),
    # a quantization this book cannot store says what it reads
    *[(lambda q=q: read_hf_config({**PHI3_MINI, "quantization_config": q}), "'quantization_config'")
      for q in [{"quant_method": "awq", "bits": True}, "awq", [4], {"quant_method": ["fp8"]}, {"quant_method": DEEP},
                {"quant_method": "modelopt", "quant_algo": DEEP}, {"quant_method": "awq", "bits": [4]}]],
    *[(lambda q=q: read_hf_config({**LLAMA_CONFIG, "quantization_config": q}),
       r"\bfield 'quantization_config' of the config dict\b.*" + says) for q, says in [
        ("fp8", r"\bmust be an object with a 'quant_method', got the string 'fp8'"),
        ({"quant_method": "modelopt", "quant_algo": "INT4_AWQ"},
         r"\bhas quant_algo 'INT4_AWQ'; this book reads FP8 and NVFP4\b"),
        ({"quant_method": "bitnet"}, r"\bhas quant_method 'bitnet'; this book reads fp8, fbgemm_fp8, mxfp4, awq, "
                                     r"gptq, compressed-tensors, modelopt and bitsandbytes\b"),
        ({"quant_method": "gptq", "bits": 3}, r"\bgptq with bits=3; this book stores 4 or 8 bits\b"),
        ({"quant_method": "awq"}, r"\bawq with bits=None\b")]],
    # a module kept in another format that no weight group holds whole
    *[(lambda m=m: read_hf_config({**_published("qwen3-30b-a3b"), "quantization_config": {
        "quant_method": "fp8", "modules_to_not_convert": m}}), says) for m, says in [
        (["model.layers.0.mlp"], r"keeps 'model\.layers\.0\.mlp' .* one layer's feed_forward/experts, in another "
                                 r"format"),
        (["the_big_matrix"], r"names module 'the_big_matrix' in modules_to_not_convert, which this book cannot "
                             r"place")]],
], ids=str)
def test_bad_input_gets_a_value_error_naming_the_field_and_the_fix(call, words):
    with pytest.raises(ValueError, match=words):
        call()
