"""Each family `hf_families` reads, on a config file written from the published one (book/data/hf_configs/README.md
names each source): the parameter count against the model card (with the convention and precision the card states),
the KV cache per token and, for the hybrids, the fixed-size state per sequence against a hand count; and the same
numbers through `python -m scaling_lib estimate --config FILE --chip h200 --chips 8 --json`.

Hand counts: keys and values of every attention layer, 2 x (attention layers) x K x H x 2 bytes in bf16 (latent
attention: the latent and the RoPE key, r_kv + H_rope, per layer); a state as the serving engines allocate it per
sequence and layer (vLLM's state shapes): lightning attention one H x H matrix per head; gated DeltaNet one
H_k x H_v matrix per value head plus a convolution window of (kernel - 1) x (2 N_k H_k + N_v H_v); Mamba
D_in x N_s plus (kernel - 1) x D_in; Mamba-2 N_h x P x N_s plus (kernel - 1) x (D_in + 2 G N_s); 2 bytes each.
"""

import json

import pytest

from scaling_lib.__main__ import main
from scaling_lib.flops import matmul_params
from scaling_lib.memory import kv_bytes_per_token, state_bytes_per_sequence
from scaling_lib.models import active_param_count, from_hf_config, mtp_param_count, param_count, read_hf_config
from tests import REPO, for_each

CONFIGS = REPO / "book" / "data" / "hf_configs"
B = 1e9


def _without_tables(m):
    """The parameters without either embedding table (what MiniMax's and GLM's cards call activated)."""
    return active_param_count(m) - m.vocab_size * m.d_model * (1 if m.tied_embeddings else 2)


def _non_embedding(m):
    return param_count(m) - m.vocab_size * m.d_model * (1 if m.tied_embeddings else 2)


# stem -> (card total, its relative precision, (card active, how the card counts it, precision) or None,
#          hand-counted bf16 KV bytes per token, hand-counted state bytes per sequence)
FAMILIES = {
    "qwen3-coder-480b-a35b": (480 * B, 0.02, (35 * B, active_param_count, 0.02), 2 * 62 * 4 * 128 * 2 * 2, 0),
    "kimi-k2": (1e12, 0.05, (32 * B, matmul_params, 0.02), 61 * (512 + 64) * 2, 0),  # "1T": one digit
    "deepseek-v3.2": (671 * B, 0.02, (37 * B, matmul_params, 0.05), 61 * ((512 + 64) * 2 + 128 + 4), 0),
    "deepseek-r1": (671 * B, 0.02, (37 * B, matmul_params, 0.02), 61 * (512 + 64) * 2, 0),
    "llama-4-scout": (109 * B, 0.02, (17 * B, active_param_count, 0.02), 2 * 48 * 8 * 128 * 2, 0),
    "llama-4-maverick": (400 * B, 0.02, (17 * B, active_param_count, 0.02), 2 * 48 * 8 * 128 * 2, 0),
    "llama-3.3-nemotron-super-49b": (49 * B, 0.02, None, 2 * 49 * 8 * 128 * 2, 0),  # 31 of 80 layers without attention
    "gpt-oss-120b": (116.8 * B, 0.01, (5.1 * B, matmul_params, 0.02), 2 * 36 * 8 * 64 * 2, 0),
    "gpt-oss-20b": (20.9 * B, 0.01, (3.6 * B, matmul_params, 0.02), 2 * 24 * 8 * 64 * 2, 0),
    "qwen3-vl-30b-a3b": (30.5 * B, 0.01, (3.3 * B, active_param_count, 0.02), 2 * 48 * 4 * 128 * 2, 0),
    "glm-4.5": (355 * B, 0.02, (32 * B, _without_tables, 0.02), 2 * 92 * 8 * 128 * 2, 0),
    # "230B total, 10B activated": its three multi-token-prediction modules apart, the activated without the tables
    "minimax-m2.5": (230 * B, 0.02, (10 * B, _without_tables, 0.05), 2 * 62 * 8 * 128 * 2, 0),
    "granite-3.0-8b": (8.1 * B, 0.02, None, 2 * 40 * 8 * 128 * 2, 0),
    "chatglm3-6b": (6 * B, 0.05, None, 2 * 28 * 2 * 128 * 2, 0),  # "6B": one digit
    "internlm2.5-7b": (7_737_708_544, 0.001, None, 2 * 32 * 8 * 128 * 2, 0),  # the loaded weights' count
    "command-r-v01": (35 * B, 0.02, None, 2 * 40 * 64 * 128 * 2, 0),
    "command-r7b": (7 * B, 0.02, None, 2 * 32 * 8 * 128 * 2, 0),  # its "7B" are the layers (non-embedding)
    "exaone-3.5-7.8b": (7.8 * B, 0.01, None, 2 * 32 * 8 * 128 * 2, 0),
    "exaone-4.0-32b": (32 * B, 0.02, None, 2 * 64 * 8 * 128 * 2, 0),
    "qwen2.5-vl-7b": (7.61 * B, 0.01, None, 2 * 28 * 4 * 128 * 2, 0),  # the text tower: Qwen2.5-7B's card
    "mistral-small-3.1-24b": (24 * B, 0.02, None, 2 * 40 * 8 * 128 * 2, 0),
    # two MLP matrices, no gate; the cards count the biases and norms the book leaves out (under 0.1%)
    "gpt-j-6b": (6_053_381_344, 0.001, None, 2 * 28 * 16 * 256 * 2, 0),
    "pythia-1b": (1_011_781_632, 0.001, None, 2 * 16 * 8 * 256 * 2, 0),
    # the six hybrids: the KV of their attention layers only, and a state that does not grow
    "qwen3.5-397b-a17b": (397 * B, 0.01, (17 * B, active_param_count, 0.02), 2 * 15 * 2 * 256 * 2,
                          45 * (64 * 128 * 128 + 3 * (2 * 16 * 128 + 64 * 128)) * 2),
    # its card's 27B counts the vision encoder (27 blocks 1,152 wide, about 0.4B) that the text tower leaves out
    "qwen3.5-27b": (27 * B, 0.03, None, 2 * 16 * 4 * 256 * 2,
                    48 * (48 * 128 * 128 + 3 * (2 * 16 * 128 + 48 * 128)) * 2),
    "qwen3-next-80b-a3b": (80 * B, 0.02, (3 * B, matmul_params, 0.2), 2 * 12 * 2 * 256 * 2,
                           36 * (32 * 128 * 128 + 3 * (2 * 16 * 128 + 32 * 128)) * 2),  # "3B": one digit
    "minimax-m1": (456 * B, 0.01, (45.9 * B, _without_tables, 0.01), 2 * 10 * 8 * 128 * 2, 70 * 64 * 128 * 128 * 2),
    "jamba-v0.1": (52 * B, 0.02, (12 * B, active_param_count, 0.02), 2 * 4 * 8 * 128 * 2,
                   28 * (8192 * 16 + 3 * 8192) * 2),
    "nemotron-h-56b": (56 * B, 0.02, None, 2 * 10 * 8 * 128 * 2,
                       54 * (256 * 64 * 256 + 3 * (16384 + 2 * 8 * 256)) * 2),
}
# Counted the way the card counts: non-embedding for Command R7B and EXAONE's second figure, else everything.
NON_EMBEDDING = {"command-r7b"}
# A second figure the card gives: EXAONE 3.5's 6.98B without embeddings (two 102,400 x 4,096 tables, untied).
SECOND_FIGURE = {"exaone-3.5-7.8b": (6.98 * B, 0.001)}


@for_each(sorted(FAMILIES), ids=str)
def test_each_family_reads_to_its_cards_parameters_and_a_hand_counted_cache(stem):
    total, precision, active, kv, state = FAMILIES[stem]
    model = from_hf_config(CONFIGS / f"{stem}.json")
    counted = _non_embedding(model) if stem in NON_EMBEDDING else param_count(model)
    assert counted == pytest.approx(total, rel=precision)
    if active is not None:
        card, convention, tolerance = active
        assert convention(model) == pytest.approx(card, rel=tolerance)
    if stem in SECOND_FIGURE:
        assert _non_embedding(model) == pytest.approx(SECOND_FIGURE[stem][0], rel=SECOND_FIGURE[stem][1])
    assert kv_bytes_per_token(model, "bf16") == kv
    assert state_bytes_per_sequence(model) == state


@pytest.mark.parametrize("stem", sorted(FAMILIES))
def test_every_published_config_reads_through_the_command_line_with_its_name(stem, capsys):
    """The acceptance command: all read, `model` is the model's name (the last part of _name_or_path), and the JSON
    carries the parameters, the KV per token and the state beside it."""
    assert main(["estimate", "--config", str(CONFIGS / f"{stem}.json"), "--chip", "h200", "--chips", "8",
                 "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    name = json.loads((CONFIGS / f"{stem}.json").read_text())["_name_or_path"].rsplit("/", 1)[-1].lower()
    total, _, _, kv, state = FAMILIES[stem]
    assert data["model"] == name
    assert data["kv_bytes_per_token"] == kv and data["state_bytes_per_sequence"] == state
    assert data["parameters"] == param_count(from_hf_config(CONFIGS / f"{stem}.json"))


def test_gpt_oss_120b_weighs_what_its_checkpoint_holds_mxfp4_experts_and_bf16_for_the_rest(capsys):
    # The published checkpoint holds about 65.2 GB: the 128 experts of 36 layers in MXFP4 (4.25 bits), attention,
    # router, embedding and head in bf16 (its quantization_config's modules_to_not_convert).
    command = ["estimate", "--config", str(CONFIGS / "gpt-oss-120b.json"), "--chip", "h200", "--chips", "8", "--json"]
    assert main(command) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["weight_bytes"] == pytest.approx(65.2e9, rel=0.02)
    experts = 36 * 128 * 3 * 2880 * 2880  # gate, up and down of 2,880 x 2,880 per expert
    assert data["weight_bytes_by_group"]["experts"] == pytest.approx(experts * 4.25 / 8)
    assert data["weight_bytes_by_group"]["head"] == 201088 * 2880 * 2
    assert data["weight_bytes_per_chip"] == data["weight_bytes"] / 8


def test_multi_token_prediction_is_its_own_line_one_more_layer_and_its_projection():
    # DeepSeek-R1's MTP module is one more MoE layer (the main model with 62 layers instead of 61 shows its size) and
    # the projection of [hidden; embedding] to D; the embedding and head are shared, so not counted again.
    r1 = from_hf_config(CONFIGS / "deepseek-r1.json")
    one_more_layer = param_count(r1.with_(n_layers=62)) - param_count(r1)
    assert mtp_param_count(r1) == one_more_layer + 2 * 7168 * 7168
    assert (r1.n_mtp_layers, from_hf_config(CONFIGS / "kimi-k2.json").n_mtp_layers) == (1, 0)
    assert param_count(r1) == param_count(r1.with_(n_mtp_layers=0))  # not in the model's count


@for_each([
    ("kimi-k2", "deepseek_v3", ["model_type 'kimi_k2' is not a type this book knows; its architectures, "
                                "DeepseekV3ForCausalLM, is"]),
    ("qwen3-vl-30b-a3b", "qwen3_moe", ["text tower only", "the vision encoder's weights (vision_config) are not "
                                                         "counted"]),
    ("qwen2.5-vl-7b", "qwen2", ["text tower only"]), ("mistral-small-3.1-24b", "mistral", ["text tower only"]),
    ("deepseek-v3.2", "deepseek_v32", ["fp8 weights at 1.0002 bytes each", "router, embeddings, head kept in bf16"]),
], ids=str)
def test_what_the_reader_decided_is_said_in_notes(stem, kind, notes):
    read = read_hf_config(CONFIGS / f"{stem}.json")
    assert read.family == kind
    said = " | ".join(read.notes)
    for words in notes:
        assert words in said, said


def test_chunked_attention_keeps_the_current_chunk_and_sliding_windows_the_last_w(capsys):
    # Llama 4 Scout: 36 of 48 layers attend within 8,192-token chunks. At 12,288 tokens a chunked layer holds the
    # 4,096 tokens of the current chunk (a window would hold 8,192): 12 x 12,288 + 36 x 4,096 tokens over 48 layers.
    command = ["estimate", "--config", str(CONFIGS / "llama-4-scout.json"), "--chip", "h200", "--chips", "8",
               "--context", "12288", "--json"]
    assert main(command) == 0
    data = json.loads(capsys.readouterr().out)
    per_layer = 2 * 8 * 128 * 2
    assert data["kv_bytes_per_token_effective"] * 12288 == (12 * 12288 + 36 * 4096) * per_layer
