"""scaling_lib.memory: the KV cache and the batch that fits (the chapter 3 claims are in test_claims_memory.py; the
capacity refusals of the step bounds are in test_capacity.py)."""

import numpy as np
import pytest

from scaling_lib.memory import kv_cache_bytes, max_batch_size, memory_footprint_kv_heads, require_fit


def test_memory_footprint_of_an_empty_context_has_no_kv_cache():
    assert memory_footprint_kv_heads("llama2-13b", 8, "tpu-v5e", 8, 16, 0).kv_bytes == 0.0


def test_max_batch_size_refuses_half_a_chip():
    with pytest.raises(ValueError, match="n_chips must be a positive integer, got 0.5"):
        max_batch_size("llama3-8b", "h100", n_chips=0.5, context_len=4096)


def test_kv_cache_bytes_accepts_numpy_integers():
    assert kv_cache_bytes("llama3-8b", np.int64(100), batch=np.int32(3)) == kv_cache_bytes("llama3-8b", 100, 3)


def test_an_unknown_kv_placement_is_named_with_the_choices():
    with pytest.raises(ValueError, match="unknown kv_placement 'bogus'; use one of batch-split, replicated"):
        require_fit("llama3-8b", "h100", 1, 1, 1000, kv_placement="bogus")
