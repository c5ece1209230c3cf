"""A JAX step handed state that does not fit it refuses it: a decode step (plain, sharded or paged) handed a cache
built for other params (layers, KV heads, head_dim, dtype) or another batch, a full cache, or a token id outside the
vocabulary (checked before the int32 cast, which would wrap 2**32 to token 0) raises a ValueError that names the
mismatch, instead of returning wrong logits; and a failed paged allocation leaves the pool as it was. Each module's
own argument checks are in its test file's table of bad inputs (test_model.py, test_paged.py, ...).

Shapes match tests/tiny/test_model.py and test_paged.py (B=2, T=8, the 2-layer tiny config) so little new compiles.
"""

from functools import lru_cache

import jax.numpy as jnp
import numpy as np
import pytest

from scaling_lib.tiny import model, paged
from scaling_lib.tiny import sharding as sharded

B, T = 2, 8
PROMPT = np.random.default_rng(0).integers(0, 256, size=(B, T), dtype=np.int32)
CONFIG8 = model.tiny_config(n_heads=8, n_kv_heads=2)  # splits over the 8 emulated devices


@lru_cache(maxsize=None)
def params_for(**changes):
    return model.init_params(model.tiny_config(**changes), seed=0)


@lru_cache(maxsize=None)
def params8():
    return model.init_params(CONFIG8, seed=0)


def fresh_cache(batch=B, cache_len=T + 4):
    return model.prefill(params_for(), PROMPT[:batch], cache_len=cache_len)[1]


def decode(token, cache=None, params=params_for):
    """A plain decode step of `params()` (built when the test runs, not when it is collected) on `cache()`."""
    return lambda: model.decode_step(params(), np.asarray(token), fresh_cache() if cache is None else cache())


def sharded_step_on_a_full_cache(make):
    """A sharded decode step of batch 8 whose cache has no slot left (cache_len = T)."""
    _, full = model.prefill(params8(), np.tile(PROMPT, (4, 1)))
    placed, token, cache = make(CONFIG8, 8, (2, 4)).place(params8(), np.zeros(8, np.int32), full)
    return lambda: make(CONFIG8, 8, (2, 4)).step(placed, token, cache)


def sharded_step_for_another_batch():
    _, cache = model.prefill(params8(), np.tile(PROMPT, (4, 1)), cache_len=T + 2)
    decode8 = sharded.megatron_decode(CONFIG8, 8, (8,))
    placed, _, cache = decode8.place(params8(), cache=cache)
    return decode8.step(placed, jnp.zeros(4, jnp.int32), cache)


def sequence_parallel_out_of_vocabulary(through_generate):
    prompt = np.tile(PROMPT, (4, 1))
    prompt[3, 5] = CONFIG8.vocab_size  # one past the last id: the embedding gather used to clamp it
    prefill = sharded.sequence_parallel_prefill(CONFIG8, (8,), T)
    if through_generate:
        return sharded.generate(sharded.megatron_decode(CONFIG8, 8, (8,)), params8(), prompt, 2, prefill=prefill)
    return prefill.prefill(params8(), prompt)


# (the call, what its ValueError says)
MISMATCHES = [
    pytest.param(decode(np.zeros(2, np.int32), lambda: fresh_cache(batch=1)),
                 r"token has 2 rows but the cache holds 1 sequence", id="two tokens for a batch-1 cache"),
    pytest.param(decode(np.zeros(B, np.int32), params=lambda: params_for(n_layers=1)),
                 r"cache has 2 layers but the params have 1 \(n_layers\)", id="params of another layer count"),
    pytest.param(decode(np.zeros(B, np.int32), params=lambda: params_for(n_kv_heads=1)),
                 r"cache has 2 KV heads but the params have 1 \(n_kv_heads\)", id="params of another KV head count"),
    pytest.param(decode(np.zeros(B, np.int32), params=lambda: model.init_params(
                     model.tiny_config().with_(head_dim=32), seed=0)),
                 r"cache has head_dim 16 but the params have 32", id="params of another head_dim"),
    pytest.param(decode(np.zeros(B, np.int32), params=lambda: model.init_params(
                     model.tiny_config(), seed=0, dtype=jnp.bfloat16)),
                 r"cache holds float32 but the params compute in bfloat16", id="params of another dtype"),
    pytest.param(decode(np.array([0, 256], np.int32)), r"vocab_size=256", id="a token past the vocabulary"),
    *(pytest.param(decode(token, lambda: fresh_cache(cache_len=T + 1)),
                   r"token ids must lie in \[0, 256\)", id=f"a token id that int32 wraps to 0: {name}")
      for name, token in (("2**40", np.array([2**40, 1])), ("2**32 as uint64", np.array([2**32, 1], np.uint64)),
                          ("a list", [1, 2**40]), ("2**63", np.array([1, 2**63], np.uint64)))),
    pytest.param(decode(np.zeros(B, np.int32), lambda: fresh_cache(cache_len=T)), "cache is full",
                 id="a full cache"),
    *(pytest.param(lambda make=make: sharded_step_on_a_full_cache(make)(), r"the cache is full \(S=8 slots\)",
                   id=f"a full cache, {make.__name__}")
      for make in (sharded.megatron_decode, sharded.auto_decode, sharded.fsdp_decode)),
    pytest.param(sharded_step_for_another_batch, r"token has 4 rows but the cache holds 8 sequences",
                 id="a sharded step's tokens for another batch"),
    pytest.param(lambda: sequence_parallel_out_of_vocabulary(True), r"token ids must lie in \[0, 256\).*max 256",
                 id="sequence-parallel prefill in generate: a token past the vocabulary"),
    pytest.param(lambda: sequence_parallel_out_of_vocabulary(False), r"vocab_size=256",
                 id="sequence-parallel prefill: a token past the vocabulary"),
    pytest.param(lambda: paged.paged_prefill(params_for(), PROMPT, paged.PagedKVCache(model.tiny_config(n_layers=1),
                                                                                     B, 16, 4, 4)),
                 r"cache has 1 layers? but the params have 2 \(n_layers\)", id="a paged cache of one layer"),
]


@pytest.mark.parametrize("call, says", MISMATCHES)
def test_a_step_handed_state_that_does_not_fit_it_refuses_it(call, says):
    with pytest.raises(ValueError, match=says):
        call()


def test_a_failed_paged_allocation_leaves_the_pool_as_it_was():
    # Sequence 0 needs 2 blocks of 4 and gets them; sequence 1 needs 2 more but only 1 is left: out of blocks.
    cache = paged.PagedKVCache(params_for().config, B, 4, 4, 4)  # 3 usable blocks
    before = (cache.block_table.copy(), cache.refcount.copy(), cache.n_free_blocks, cache.lengths.copy())
    with pytest.raises(ValueError, match="out of blocks"):
        paged.paged_prefill(params_for(), PROMPT, cache)
    after = (cache.block_table, cache.refcount, cache.n_free_blocks, cache.lengths)
    np.testing.assert_array_equal(after[0], before[0])
    np.testing.assert_array_equal(after[1], before[1])
    assert after[2] == before[2] == 3
    np.testing.assert_array_equal(after[3], before[3])
    # ...so a prefill that fits still works on the same cache.
    paged.paged_prefill(params_for(), PROMPT, cache, lengths=[4, 4])
    assert cache.n_free_blocks == 1
