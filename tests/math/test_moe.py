"""Mixture-of-experts memory (scaling_lib.moe) against published parameter counts."""

import pytest

from scaling_lib.moe import expert_sharded_memory


def test_expert_sharded_bf16_weights_add_up_to_mixtrals_published_size():
    # Mistral AI's Mixtral 8x7B announcement: 46.7B parameters in all, so 93.4 GB in bf16 (2 bytes each). With the
    # experts split 8 ways and nothing else split, one copy of the weights is 8 chips' expert shares plus the
    # attention, router and embeddings that every chip holds.
    memory = expert_sharded_memory("mixtral-8x7b", "h100", expert_shards=8, model_shards=1, dtype="bf16")
    one_copy = 8 * memory.expert_bytes_per_chip + memory.other_bytes_per_chip
    assert one_copy == pytest.approx(2 * 46.7e9, rel=0.01)
