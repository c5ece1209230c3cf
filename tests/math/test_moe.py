"""scaling_lib.moe: mixture-of-experts weights, the experts a batch touches, expert-sharded memory and the routing
all-to-all. Values are worked by hand from the model shapes (the MoE claims are in test_claims_serving.py)."""

import pytest

from scaling_lib.moe import as_moe, capacity_buffer_bytes, expected_experts_touched, expert_sharded_memory, moe_weights, routing_all_to_all

# sb7-worked as a 16-expert MoE: 64 layers x 3 x 4,096 x 16,384 x 16 experts = 206,158,430,208 FFN parameters.
SB7_EXPERT_PARAMS = 64 * 3 * 4096 * 16384 * 16


def test_every_expert_active_touches_all_of_them():
    assert expected_experts_touched(4, 4, 3) == 4.0


def test_expert_sharded_memory_in_int8_by_hand_with_the_default_model_shards():
    # int8 over 16 expert shards (and the default 1 model shard): 12,884,901,888 B per chip.
    memory = expert_sharded_memory(as_moe("sb7-worked", 16, 2), "tpu-v5e", expert_shards=16, dtype="int8")
    assert memory.expert_bytes_per_chip == SB7_EXPERT_PARAMS / 16


def test_expert_sharded_memory_defaults_to_bf16():
    # bf16 this time, so bytes per element (2) multiplies: 206,158,430,208 x 2 / 16 shards.
    memory = expert_sharded_memory(as_moe("sb7-worked", 16, 2), "tpu-v5e", expert_shards=16)
    assert memory.expert_bytes_per_chip == SB7_EXPERT_PARAMS * 2 / 16


def test_moe_weights_of_a_model_that_is_already_an_moe_start_from_its_dense_form():
    assert moe_weights(as_moe("sb7-worked", 8, 2), 16, 2) == moe_weights("sb7-worked", 16, 2)


def test_routing_all_to_all_refuses_expert_shards_that_do_not_divide_the_experts():
    with pytest.raises(ValueError, match=r"expert_shards=3 does not divide n_experts=16; pick one of \[1, 2, 4, 8, 16\]"):
        routing_all_to_all(as_moe("sb7-worked", 16, 2), "tpu-v5e", batch=16, expert_shards=3)


def test_expert_sharded_bf16_weights_add_up_to_mixtrals_published_size():
    # Mistral AI's Mixtral 8x7B announcement: 46.7B parameters in all, so 93.4 GB in bf16 (2 bytes each). With the
    # experts split 8 ways and nothing else split, one copy of the weights is 8 chips' expert shares plus the
    # attention, router and embeddings that every chip holds.
    memory = expert_sharded_memory("mixtral-8x7b", "h100", expert_shards=8, model_shards=1, dtype="bf16")
    one_copy = 8 * memory.expert_bytes_per_chip + memory.other_bytes_per_chip
    assert one_copy == pytest.approx(2 * 46.7e9, rel=0.01)


def test_no_tokens_touch_no_experts():
    # An expected token count of zero (an idle step) is allowed: E (1 - (1 - k/E)^0) = 0.
    assert expected_experts_touched(16, 2, 0) == 0.0


@pytest.mark.parametrize("experts, active", [(16, 2), (8, 1), (64, 8)])
def test_a_buffer_that_can_drop_nothing_moves_e_over_k_times_the_routed_activations(experts, active):
    # With one slot per expert for every token of the batch, no token is ever dropped, and the buffer carries
    # E slots per token where routing fills k of them: E / k times the B x k x D of routing_all_to_all.
    moe, batch = as_moe("sb7-worked", experts, active), 32
    routed = routing_all_to_all(moe, "tpu-v5e", batch, expert_shards=1, activation_dtype="int8").bytes_each
    assert capacity_buffer_bytes(experts, batch, moe.d_model, "int8") == routed * experts / active

