"""scaling_lib.moe: mixture-of-experts weights, the experts a batch touches, expert-sharded memory and the routing
all-to-all. Values are worked by hand from the model shapes (the MoE claims are in test_claims_serving.py)."""

import pytest

from scaling_lib.moe import (as_moe, capacity_buffer_bytes, expected_experts_touched, expert_sharded_memory,
                             moe_weights, routing_all_to_all)
from scaling_lib.models import from_hf_config, get_model

from tests import REPO, for_each

# sb7-worked as a 16-expert MoE: 64 layers x 3 x 4,096 x 16,384 x 16 experts = 206,158,430,208 FFN parameters.
SB7_EXPERT_PARAMS = 64 * 3 * 4096 * 16384 * 16


def test_a_batch_touches_every_expert_when_all_are_active_and_none_when_idle():
    assert expected_experts_touched(4, 4, 3) == 4.0
    # An expected token count of zero (an idle step) is allowed: E (1 - (1 - k/E)^0) = 0.
    assert expected_experts_touched(16, 2, 0) == 0.0


def test_expert_sharded_weights_by_hand_and_against_mixtrals_published_size():
    # int8 over 16 expert shards (and the default 1 model shard): 12,884,901,888 B per chip; bf16 by default, so
    # bytes per element (2) multiplies: 206,158,430,208 x 2 / 16 shards.
    moe = as_moe("sb7-worked", 16, 2)
    assert expert_sharded_memory(moe, "tpu-v5e", expert_shards=16, dtype="int8").expert_bytes_per_chip == \
        SB7_EXPERT_PARAMS / 16
    assert expert_sharded_memory(moe, "tpu-v5e", expert_shards=16).expert_bytes_per_chip == SB7_EXPERT_PARAMS * 2 / 16
    # Mistral AI's Mixtral 8x7B announcement: 46.7B parameters in all, so 93.4 GB in bf16 (2 bytes each). With the
    # experts split 8 ways and nothing else split, one copy of the weights is 8 chips' expert shares plus the
    # attention, router and embeddings that every chip holds.
    memory = expert_sharded_memory("mixtral-8x7b", "h100", expert_shards=8, model_shards=1, dtype="bf16")
    one_copy = 8 * memory.expert_bytes_per_chip + memory.other_bytes_per_chip
    assert one_copy == pytest.approx(2 * 46.7e9, rel=0.01)
    # The weights of a model that is already an MoE start from its dense form.
    assert moe_weights(as_moe("sb7-worked", 8, 2), 16, 2) == moe_weights("sb7-worked", 16, 2)


@for_each([(16, 2), (8, 1), (64, 8)], ids=str)
def test_a_buffer_that_can_drop_nothing_moves_e_over_k_times_the_routed_activations(experts, active):
    # With one slot per expert for every token of the batch, no token is ever dropped, and the buffer carries
    # E slots per token where routing fills k of them: E / k times the B x k x D of routing_all_to_all.
    moe, batch = as_moe("sb7-worked", experts, active), 32
    routed = routing_all_to_all(moe, "tpu-v5e", batch, expert_shards=1, activation_dtype="int8").bytes_each
    assert capacity_buffer_bytes(experts, batch, moe.d_model, "int8") == routed * experts / active


# --- Bad input: a ValueError naming the argument and the fix ---------------------------------------------------------
@for_each([
    (lambda: routing_all_to_all(as_moe("sb7-worked", 16, 2), "tpu-v5e", batch=16, expert_shards=3),
     r"expert_shards=3 does not divide n_experts=16; pick one of \[1, 2, 4, 8, 16\]"),
    (lambda: routing_all_to_all("llama3-8b", "tpu-v5e", 16, 8), "is dense"),
    (lambda: expert_sharded_memory(as_moe("sb7-worked", 16, 2), "tpu-v5e", expert_shards=3),
     "expert_shards=3 does not divide n_experts=16"),
    (lambda: expected_experts_touched(2, 4, 10), "n_active_experts=4 exceeds"),
], ids=str)
def test_bad_input_gets_a_value_error_naming_the_argument_and_the_fix(call, words):
    with pytest.raises(ValueError, match=words):
        call()


@for_each([("qwen3-235b-a22b", True), ("deepseek-v3", True), ("mixtral-8x7b", False), ("mixtral-8x22b", False),
           ("jamba-v0.1", False), ("llama3-8b", False)], ids=lambda v: str(v))
def test_fine_grained_experts_are_routed_experts_narrower_than_the_model(name, fine):
    # Qwen3-235B-A22B: experts 1,536 wide in a 4,096-wide model; DeepSeek-V3: 2,048 in 7,168 (the config.json
    # files); Mixtral 8x7B: 14,336 in 4,096; Mixtral 8x22B 16,384 in 6,144; Jamba's experts 14,336 in 4,096;
    # LLaMA-3-8B is dense (its FFN, 14,336, is wider anyway).
    assert get_model(name).fine_grained_experts is fine
    # a dense model narrower in its FFN than in its residual stream has no experts, so none are fine-grained
    assert not get_model("llama3-8b").with_(d_ff=1024).fine_grained_experts


def test_experts_as_wide_as_the_model_are_not_fine_grained():
    # gpt-oss-120b: experts 2,880 wide in a 2,880-wide model (its config.json), the boundary F = D
    gpt_oss = from_hf_config(REPO / "book" / "data" / "hf_configs" / "gpt-oss-120b.json")
    assert (gpt_oss.d_ff, gpt_oss.d_model, gpt_oss.fine_grained_experts) == (2880, 2880, False)
    assert gpt_oss.with_(d_ff=2879).fine_grained_experts
