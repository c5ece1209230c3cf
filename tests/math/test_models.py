"""scaling_lib.models: the model table and the names that find its models, a Transformer's checks of its own fields,
and its parameters counted by hand on small models (reading Hugging Face config.json files is in test_hf_config.py)."""

import numpy as np
import pytest

from scaling_lib import models
from scaling_lib.models import Transformer, get_model, model_names

from tests import for_each

REQUIRED_MODELS = ("llama2-13b", "llama3-8b", "llama3-70b", "palm-8b", "palm-62b", "palm-540b")
SMALL = dict(n_layers=2, d_model=64, d_ff=128, n_heads=4, n_kv_heads=2, head_dim=16, vocab_size=256)
REQUIRED_FIELDS = ("n_layers", "d_model", "d_ff", "n_heads", "n_kv_heads", "head_dim", "vocab_size", "n_experts",
                   "n_active_experts")
OPTIONAL_FIELDS = ("sliding_window", "global_every", "d_ff_dense", "kv_lora_rank", "q_lora_rank", "v_head_dim")
COUNT_FIELDS = ("n_shared_experts", "n_dense_layers", "rope_head_dim")


# --- The table and the names that find its models -------------------------------------------------------------------
def test_every_required_model_exists_and_every_model_has_a_source():
    assert set(REQUIRED_MODELS) <= set(model_names())
    for name in model_names():
        assert get_model(name).source


@for_each([
    # Hugging Face repositories, file names and people write the same model with dashes, underscores or spaces,
    # with the organisation, in any case, with suffixes such as -Instruct or -hf.
    ("llama3_70b", "llama3-70b"), ("Llama 3 70B", "llama3-70b"), ("meta-llama/llama_3-70b", "llama3-70b"),
    (" LLAMA3-8B ", "llama3-8b"), ("llama-2-13b", "llama2-13b"), ("Llama-2-13b-chat-hf", "llama2-13b"),
    ("meta-llama/Llama-3.1-8B", "llama3-8b"), ("meta-llama/Llama-3.1-8B-Instruct", "llama3-8b"),
    ("Meta-Llama-3-70B-Instruct", "llama3-70b"), ("meta-llama/Meta-Llama-3-70B-Instruct", "llama3-70b"),
    ("meta-llama/Llama-3.3-70B-Instruct", "llama3-70b"), ("mistralai/Mixtral-8x7B-v0.1", "mixtral-8x7b"),
    ("deepseek-ai/DeepSeek-V3", "deepseek-v3"), ("Qwen/Qwen3-235B-A22B", "qwen3-235b-a22b"),
    ("PaLM-540B", "palm-540b"),
], ids=str)
def test_a_name_finds_its_model_whatever_separates_its_words_and_whatever_suffixes_it_carries(spelling, name):
    assert get_model(spelling) is models.MODELS[name]


@for_each([
    ("meta-llama/Llama-3.1-8B-Instruct", "llama3.18b"), ("  Foo_Bar baz-Qux ", "foobarbazqux"),
    ("org/sub/My-Model-Instruct-FP8", "mymodel"), ("Mixtral-8x7B-v0.1-Chat-HF", "mixtral8x7b"),
    ("instruct", "instruct"), ("HF", "hf"),  # a name that is only a suffix keeps it
], ids=str)
def test_a_name_is_compared_without_its_organisation_case_separators_and_stacked_suffixes(spelling, canonical):
    assert models._canonical(spelling) == canonical


def test_a_transformer_passes_through_and_a_table_name_is_found_as_written_when_another_folds_to_it(monkeypatch):
    small = Transformer(**SMALL)
    assert get_model(small) is small
    # "tiny" and "tiny-instruct" both fold to "tiny"; the table's own spelling of each must still give that entry.
    base, chat = Transformer(**SMALL, name="tiny"), Transformer(**SMALL, name="tiny-instruct")
    monkeypatch.setitem(models.MODELS, "tiny", base)
    monkeypatch.setitem(models.MODELS, "tiny-instruct", chat)
    assert get_model("tiny") is base and get_model(" TINY ") is base and get_model("tiny-instruct") is chat


# --- A Transformer's fields -------------------------------------------------------------------------------------------
def test_a_model_given_whole_floats_or_numpy_numbers_is_the_same_model_and_prints_the_same():
    ints = Transformer(n_layers=4, d_model=64, d_ff=128, n_heads=4, n_kv_heads=4, head_dim=16, vocab_size=256,
                       n_experts=4, n_active_experts=2, sliding_window=8, global_every=2, n_shared_experts=1,
                       n_dense_layers=1, d_ff_dense=96, kv_lora_rank=8, q_lora_rank=12, rope_head_dim=4, v_head_dim=8,
                       tied_embeddings=True)
    floats = Transformer(n_layers=4.0, d_model=64.0, d_ff=128.0, n_heads=4.0, n_kv_heads=4.0, head_dim=16.0,
                         vocab_size=256.0, n_experts=4.0, n_active_experts=2.0, sliding_window=8.0, global_every=2.0,
                         n_shared_experts=1.0, n_dense_layers=1.0, d_ff_dense=96.0, kv_lora_rank=8.0,
                         q_lora_rank=12.0, rope_head_dim=4.0, v_head_dim=8.0, tied_embeddings=np.bool_(True))
    numpy = Transformer(n_layers=np.int64(4), d_model=np.int32(64), d_ff=np.int64(128), n_heads=np.int16(4),
                        n_kv_heads=np.int8(4), head_dim=np.uint8(16), vocab_size=np.int64(256), n_experts=np.int64(4),
                        n_active_experts=np.int64(2), sliding_window=np.int64(8), global_every=np.int64(2),
                        n_shared_experts=np.int64(1), n_dense_layers=np.int64(1), d_ff_dense=np.int64(96),
                        kv_lora_rank=np.int64(8), q_lora_rank=np.int64(12), rope_head_dim=np.int64(4),
                        v_head_dim=np.int64(8), tied_embeddings=np.bool_(True))
    for same in (floats, numpy):
        assert same == ints and repr(same) == repr(ints) and hash(same) == hash(ints)


def test_a_models_repr_shows_every_shape_field_and_only_the_structure_fields_set():
    text = repr(Transformer(**SMALL))
    assert text.startswith("Transformer(n_layers=2, d_model=64, d_ff=128, n_heads=4, n_kv_heads=2, head_dim=16, "
                           "vocab_size=256, n_experts=1, n_active_experts=1, tied_embeddings=False, "
                           "sliding_window=None, name='custom', source='')")
    assert "global_every" not in text and "kv_lora_rank" not in text
    windowed = repr(Transformer(**SMALL, sliding_window=8, global_every=2))
    assert windowed.endswith(", sliding_window=8, name='custom', source='', global_every=2)")


def test_each_structural_bound_sits_where_the_docstring_puts_it():
    # As many active experts as experts; shared experts on an MoE of two; every layer dense; a RoPE part one
    # narrower than the head; a global period with its window.
    assert Transformer(**SMALL, n_experts=4, n_active_experts=4).n_active_experts == 4
    assert Transformer(**SMALL, n_experts=2, n_shared_experts=1).n_shared_experts == 1
    assert Transformer(**SMALL, n_dense_layers=2, d_ff_dense=96).n_dense_layers == 2  # SMALL has 2 layers
    assert Transformer(**SMALL, kv_lora_rank=8, rope_head_dim=15).rope_head_dim == 15  # head_dim 16
    assert Transformer(**SMALL, sliding_window=8, global_every=2).n_global_layers == 1


# --- Parameters counted by hand, one structure at a time ----------------------------------------------------------
def test_parameters_of_a_dense_model_and_of_a_gqa_model_with_narrower_value_heads_counted_by_hand():
    # LLaMA-2-13B: L (D H (2N + 2K) + 3 D F) + 2 V D.
    assert models.param_count(get_model("llama2-13b")) == \
        40 * (5120 * 128 * (80 + 80) + 3 * 5120 * 13824) + 2 * 32000 * 5120
    # L=2, D=64, F=128, N=4, K=2, H=16, H_v=8, V=256, untied. Per layer: W_Q 64x64 = 4,096, W_K 64x32 = 2,048,
    # W_V 64x16 = 1,024, W_O 32x64 = 2,048 (9,216); FFN 3 x 64 x 128 = 24,576; embeddings 2 x 256 x 64.
    parts = models.param_breakdown(Transformer(**SMALL, v_head_dim=8))
    assert parts == models.ParamCount(attention=2 * 9216, feed_forward=2 * 24576, router=0, embeddings=32768)
    assert parts.total == 18432 + 49152 + 32768
    assert models.param_breakdown(Transformer(**SMALL, v_head_dim=8), active_only=True) == parts


@for_each([n for n in model_names() if get_model(n).n_experts == 1], ids=str)
def test_a_dense_models_parts_add_up_to_its_total_which_is_all_active(name):
    model = get_model(name)
    parts = models.param_breakdown(model)
    assert parts.total == models.param_count(model) == models.active_param_count(model)
    assert parts.embeddings == model.vocab_size * model.d_model * (1 if model.tied_embeddings else 2)


def test_parameters_of_an_moe_with_a_shared_expert_and_a_leading_dense_layer_counted_by_hand():
    # L=4, D=64, N=K=4, H=16, V=100 tied; 8 experts of F=32, 2 active, 1 shared; layer 0 dense of F=96.
    # Attention per layer 4 x 64 x 64 = 16,384. An expert is 3 x 64 x 32 = 6,144: 3 MoE layers x 9 experts (8 + the
    # shared one) = 165,888, or x 3 (2 active + shared) = 55,296 active; the dense layer 3 x 64 x 96 = 18,432.
    # Router 64 x 8 on each of the 3 MoE layers; one 100 x 64 table.
    moe = Transformer(n_layers=4, d_model=64, d_ff=32, n_heads=4, n_kv_heads=4, head_dim=16, vocab_size=100,
                      n_experts=8, n_active_experts=2, n_shared_experts=1, n_dense_layers=1, d_ff_dense=96,
                      tied_embeddings=True)
    assert models.param_breakdown(moe) == models.ParamCount(65536, 165888 + 18432, 1536, 6400)
    assert models.param_breakdown(moe, active_only=True) == models.ParamCount(65536, 55296 + 18432, 1536, 6400)
    assert models.active_param_count(moe) == 65536 + 73728 + 1536 + 6400
    # A dense model made an MoE of 16 experts, 2 active: 16 and 2 copies of its FFN.
    dense = get_model("llama3-8b")
    moe = dense.with_(n_experts=16, n_active_experts=2)
    assert models.param_count(moe) > models.active_param_count(moe) > models.active_param_count(dense)
    ffn_dense = models.param_breakdown(dense).feed_forward
    assert models.param_breakdown(moe).feed_forward == 16 * ffn_dense
    assert models.param_breakdown(moe, active_only=True).feed_forward == 2 * ffn_dense


@for_each([(None, 64 * 4 * 16), (12, 64 * 12 + 12 * 4 * 16)], ids=str)
def test_parameters_of_latent_attention_counted_by_hand(q_lora_rank, w_q):
    # MLA, L=2, D=64, N=4, H=16 of which 4 RoPE, H_v=8, r_kv=8: W_DKV 64 x (8 + 4) = 768, W_UKV 8 x 4 x (12 + 8)
    # = 640, W_O 4 x 8 x 64 = 2,048, and W_Q either 64 x 64 or through a 12-wide bottleneck 64 x 12 + 12 x 64.
    mla = Transformer(**{**SMALL, "n_kv_heads": 4}, kv_lora_rank=8, q_lora_rank=q_lora_rank, rope_head_dim=4,
                      v_head_dim=8)
    assert models.param_breakdown(mla).attention == 2 * (w_q + 768 + 640 + 2048)


# --- Bad input: a ValueError naming the argument and the fix ---------------------------------------------------------
@for_each([
    # the table
    (lambda: get_model("gpt-9"), r"\bunknown model 'gpt-9'; known models: llama2-13b, llama3-8b, llama3-70b\b"),
    (lambda: get_model("gpt-9"), r"'llama-2-13b' or 'meta-llama/Llama-3\.1-8B' work too"),
    (lambda: get_model("gpt-9"), r"\bbuild your own with scaling_lib\.models\.Transformer\(\.\.\.\) or "
                                 r"models\.from_hf_config\('config\.json'\)"),
    (lambda: get_model("llama-9-9b"), "unknown model"),
    (lambda: get_model(3), r"\bmodel must be a name or a Transformer, got 3\b"),
    (lambda: models.param_breakdown("llama3-8b", active_only="yes"), r"\bactive_only\b"),
    # every size, optional size and count field names itself
    *[(lambda f=f: Transformer(**{**SMALL, f: 0}), rf"\b{f} must be a positive integer, got 0\b")
      for f in REQUIRED_FIELDS],
    *[(lambda f=f: Transformer(**SMALL, **{f: 0}), rf"\b{f} must be a positive integer\b.*\bor None\b")
      for f in OPTIONAL_FIELDS],
    *[(lambda f=f: Transformer(**SMALL, **{f: -1}), rf"\b{f} must be a non-negative integer\b")
      for f in COUNT_FIELDS],
    (lambda: Transformer(**SMALL, name=3), "name must be a string, got 3"),
    (lambda: Transformer(**SMALL, source=None), r"\bsource must be a string\b"),
    (lambda: Transformer(**SMALL, tied_embeddings=1), "tied_embeddings must be True or False, got 1"),
    # the structure's rules
    (lambda: Transformer(**{**SMALL, "n_kv_heads": 3}), r"\bn_kv_heads=3 does not divide n_heads=4\b.*"
                                                        r"\bpick a divisor of 4\b"),
    (lambda: Transformer(**SMALL, n_experts=4, n_active_experts=5),
     r"\bn_active_experts=5 exceeds n_experts=4\b.*\bcannot be routed to more experts than exist\b"),
    (lambda: Transformer(**SMALL, global_every=2),
     r"\bglobal_every needs a sliding_window\b.*\bwhich layers escape the window"),
    (lambda: Transformer(**SMALL, n_shared_experts=1),
     r"\bn_shared_experts=1 on a dense model \(n_experts=1\).*\bset n_experts > 1 or drop them\b"),
    (lambda: get_model("llama3-8b").with_(n_shared_experts=1), "shared experts belong to an MoE layer"),
    (lambda: Transformer(**SMALL, n_dense_layers=3, d_ff_dense=96), r"\bn_dense_layers=3 exceeds n_layers=2\b"),
    (lambda: Transformer(**SMALL, n_dense_layers=1), r"\bn_dense_layers > 0 needs d_ff_dense\b.*\bdense FFN\b"),
    (lambda: Transformer(**SMALL, n_experts=4, n_active_experts=2, n_dense_layers=1), "d_ff_dense"),
    (lambda: Transformer(**dict(SMALL, n_kv_heads=4), n_dense_layers=-1),
     "n_dense_layers must be a non-negative integer"),
    *[(lambda mla=mla: Transformer(**SMALL, **mla), r"\bq_lora_rank and rope_head_dim describe multi-head latent "
                                                    r"attention: set kv_lora_rank too\b")
      for mla in (dict(q_lora_rank=8), dict(rope_head_dim=4))],
    (lambda: Transformer(**SMALL, kv_lora_rank=8, rope_head_dim=16),
     r"\brope_head_dim=16 must be smaller than head_dim=16, which counts it\b"),
], ids=str)
def test_bad_input_gets_a_value_error_naming_the_argument_and_the_fix(call, words):
    with pytest.raises(ValueError, match=words):
        call()
