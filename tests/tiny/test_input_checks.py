"""Nothing silently wrong on the JAX side (issue 14): every row of the issue's list used to return wrong logits or
leak blocks; each now raises a ValueError that names the mismatch, or leaves the state as it was.

Shapes match tests/tiny/test_model.py and test_paged.py (B=2, T=8, the 2-layer tiny config) so little new compiles.
"""

from functools import lru_cache

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from scaling_lib.tiny import model, paged
from scaling_lib.tiny import quantize as qz
from scaling_lib.tiny import sharding as sharded
from scaling_lib.tiny.xla import parse_collectives

B, T = 2, 8
PROMPT = np.random.default_rng(0).integers(0, 256, size=(B, T), dtype=np.int32)


@lru_cache(maxsize=None)
def params_for(**changes):
    return model.init_params(model.tiny_config(**changes), seed=0)


def fresh_cache(params=None, batch=B, cache_len=T + 4):
    params = params or params_for()
    return model.prefill(params, PROMPT[:batch], cache_len=cache_len)[1]


# --- model.decode_step checks its cache against the params and the tokens ------------------------------------------
def test_decode_step_with_two_tokens_against_a_batch_one_cache_raises():
    cache = fresh_cache(batch=1)
    with pytest.raises(ValueError, match=r"token has 2 rows but the cache holds 1 sequence"):
        model.decode_step(params_for(), np.zeros(2, np.int32), cache)


@pytest.mark.parametrize("other, message", [
    (dict(n_layers=1), r"cache has 2 layers but the params have 1 \(n_layers\)"),
    (dict(n_kv_heads=1), r"cache has 2 KV heads but the params have 1 \(n_kv_heads\)"),
])
def test_decode_step_with_another_configs_params_raises(other, message):
    with pytest.raises(ValueError, match=message):
        model.decode_step(params_for(**other), np.zeros(B, np.int32), fresh_cache())


def test_decode_step_with_another_head_dim_or_dtype_raises():
    wide = model.init_params(model.tiny_config().with_(head_dim=32), seed=0)
    with pytest.raises(ValueError, match=r"cache has head_dim 16 but the params have 32"):
        model.decode_step(wide, np.zeros(B, np.int32), fresh_cache())
    bf16 = model.init_params(model.tiny_config(), seed=0, dtype=jnp.bfloat16)
    with pytest.raises(ValueError, match=r"cache holds float32 but the params compute in bfloat16"):
        model.decode_step(bf16, np.zeros(B, np.int32), fresh_cache())


def test_decode_step_refuses_out_of_vocabulary_tokens():
    with pytest.raises(ValueError, match=r"vocab_size=256"):
        model.decode_step(params_for(), np.array([0, 256], np.int32), fresh_cache())


# --- sharded decode steps check capacity, batch and tokens too -----------------------------------------------------
CONFIG8 = model.tiny_config(n_heads=8, n_kv_heads=2)


@pytest.fixture(scope="module")
def params8():
    return model.init_params(CONFIG8, seed=0)


@pytest.mark.parametrize("make", [sharded.megatron_decode, sharded.auto_decode, sharded.fsdp_decode])
def test_sharded_decode_on_a_full_cache_raises(params8, make):
    _, full = model.prefill(params8, np.tile(PROMPT, (4, 1)))  # B=8, cache_len = T: no room left
    decode = make(CONFIG8, 8, (2, 4))
    placed, token, cache = decode.place(params8, np.zeros(8, np.int32), full)
    with pytest.raises(ValueError, match=r"the cache is full \(S=8 slots\)"):
        decode.step(placed, token, cache)


def test_sharded_decode_refuses_a_cache_for_another_batch(params8):
    _, cache = model.prefill(params8, np.tile(PROMPT, (4, 1)), cache_len=T + 2)
    decode = sharded.megatron_decode(CONFIG8, 8, (8,))
    placed, _, cache = decode.place(params8, cache=cache)
    with pytest.raises(ValueError, match=r"token has 4 rows but the cache holds 8 sequences"):
        decode.step(placed, jnp.zeros(4, jnp.int32), cache)


def test_sequence_parallel_prefill_in_generate_refuses_an_out_of_vocabulary_id(params8):
    prompt = np.tile(PROMPT, (4, 1))
    prompt[3, 5] = CONFIG8.vocab_size  # one past the last id: used to be clamped by the embedding gather
    decode = sharded.megatron_decode(CONFIG8, 8, (8,))
    prefill = sharded.sequence_parallel_prefill(CONFIG8, (8,), T)
    with pytest.raises(ValueError, match=r"token ids must lie in \[0, 256\).*max 256"):
        sharded.generate(decode, params8, prompt, 2, prefill=prefill)
    with pytest.raises(ValueError, match=r"vocab_size=256"):
        prefill.prefill(params8, prompt)


# --- the paged cache ------------------------------------------------------------------------------------------------
def test_paged_cache_for_one_layer_used_with_two_layer_params_raises():
    one_layer = model.tiny_config(n_layers=1)
    cache = paged.PagedKVCache(one_layer, B, 16, 4, 4)
    with pytest.raises(ValueError, match=r"cache has 1 layers? but the params have 2 \(n_layers\)"):
        paged.paged_prefill(params_for(), PROMPT, cache)


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


# --- helpers that used to corrupt -----------------------------------------------------------------------------------
@pytest.mark.parametrize("bad", [np.inf, -np.inf, np.nan])
def test_quantize_refuses_inf_and_nan(bad):
    x = jnp.asarray(np.array([[1.0, 2.0, bad, 4.0], [1.0, 2.0, 3.0, 4.0]], np.float32))
    for dtype in ("int8", "fp8"):
        with pytest.raises(ValueError, match=r"quantize: x has 1 non-finite value"):
            qz.quantize(x, dtype, -1)
    w = np.ones((4, 3), np.float32)
    w[1, 2] = bad
    with pytest.raises(ValueError, match="non-finite"):
        qz.quantize_weight(w, 1, 1)


def test_quantize_still_works_under_jit_where_it_cannot_look_at_values():
    x = jnp.arange(8.0).reshape(2, 4)
    values, scale = jax.jit(lambda x: qz.quantize(x, "int8", -1))(x)
    np.testing.assert_allclose(np.asarray(qz.dequantize(values, scale)), np.asarray(x), atol=float(scale.max()) / 2)


def test_parse_collectives_refuses_an_hlo_dtype_it_does_not_know():
    hlo = "  %ag = f4e2m1fn[16]{0} all-gather(%c), replica_groups={{0,1}}, dimensions={0}\n"
    with pytest.raises(ValueError, match=r"unknown HLO element type 'f4e2m1fn'.*_HLO_BYTES"):
        parse_collectives(hlo, n_devices=2)
