"""scaling_lib.memory: the KV cache and the batch that fits (the chapter 3 claims are in test_claims_memory.py; the
capacity refusals of the step bounds are in test_capacity.py)."""

import re

import numpy as np
import pytest

from scaling_lib.memory import kv_cache_bytes, max_batch_size, memory_footprint_kv_heads, require_fit
from scaling_lib.models import Transformer, param_count


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


def test_require_fit_states_the_weights_and_the_cache_it_needs_in_gb():
    # LLaMA-3-70B in bf16, by hand: 80 layers x (2 x 8,192 x 64 x 128 + 8,192 x 8 x 256 attention + 3 x 8,192 x 28,672
    # FFN) + 2 x 128,256 x 8,192 embeddings = 70,552,387,584 parameters x 2 B = 141.1 GB; 800 sequences x 8,192 tokens
    # x 327,680 B (2 x 80 layers x 8 KV heads x 128 x 2 B) = 2,147.5 GB of cache; 2,288.6 GB in all, on 16 x 16 GB.
    with pytest.raises(ValueError) as err:
        require_fit("llama3-70b", "tpu-v5e", 16, 800, 8192)
    message = str(err.value)
    assert re.match(r"llama3-70b at batch 800 with 8,192 tokens of context each on 16 x tpu-v5e does not fit\b",
                    message), message  # without `what`, the configuration is described
    assert re.search(r"\bneeds 2,288\.6 GB\b", message), message
    assert re.search(r"\b141\.1 GB of weights\b", message), message
    assert re.search(r"\b2,147\.5 GB of KV cache\b", message), message
    assert re.search(r"\bhave 256\.0 GB\b", message), message
    # What is left after the weights, 114.9 GB, holds 42 caches of 8,192 x 327,680 B = 2.68 GB each.
    assert re.search(r"\blargest batch that fits is 42\b", message), message


def test_require_fit_with_other_kv_heads_names_an_unknown_kv_placement():
    with pytest.raises(ValueError, match=r"\bunknown kv_placement 'bogus'"):
        require_fit("llama2-13b", "tpu-v5e", 8, 16, 8192, kv_placement="bogus", n_kv_heads=8)


def test_require_fit_with_other_kv_heads_keeps_the_weight_dtype_it_is_given():
    # LLaMA-2-13B's int8 weights (1 B per parameter) beside a K = 8 bf16 cache: 16 x 8,192 tokens x 2 x 40 layers x
    # 8 heads x 128 x 2 B = 26.8 GB.
    footprint = require_fit("llama2-13b", "tpu-v5e", 8, 16, 8192, weight_dtype="int8", n_kv_heads=8)
    assert footprint.weight_bytes == param_count("llama2-13b")
    assert footprint.kv_bytes == 16 * 8192 * 2 * 40 * 8 * 128 * 2


def test_weights_that_exactly_fill_the_chips_leave_no_room_rather_than_exceeding_them():
    # One layer, D = 1,000, one 1,000-wide head (4e6 attention weights), F = 2e6 (6e9), V = 998,000 untied (1.996e9):
    # 8e9 parameters, 16 GB in bf16, exactly one v5e's HBM.
    exact = Transformer(n_layers=1, d_model=1000, d_ff=2_000_000, n_heads=1, n_kv_heads=1, head_dim=1000,
                        vocab_size=998_000)
    assert param_count(exact) == 8_000_000_000
    with pytest.raises(ValueError, match=r"\bthe largest batch that fits is 0\b"):
        require_fit(exact, "tpu-v5e", 1, 1, 1)


def test_require_fit_with_n_kv_heads_prices_the_cache_in_the_kv_dtype_asked():
    # An int8 cache is half a bf16 one, also when the KV head count is overridden.
    bf16 = require_fit("llama3-8b", "h100", 1, 8, 4096, kv_dtype="bf16", n_kv_heads=4)
    int8 = require_fit("llama3-8b", "h100", 1, 8, 4096, kv_dtype="int8", n_kv_heads=4)
    assert int8.kv_bytes == pytest.approx(bf16.kv_bytes / 2, rel=1e-12)
    # 4 KV heads of 128 dims, K and V, 32 layers, 1 byte, 8 x 4,096 tokens.
    assert int8.kv_bytes == pytest.approx(4 * 128 * 2 * 32 * 8 * 4096, rel=1e-12)
