"""Prefix caching in the serving simulator: cached prompt tokens skip prefill but not decode."""

import numpy as np
import pytest

from scaling_lib.serving import prefill_latency
from scaling_lib.simulator import ENGINES, ServingConfig, Workload, poisson_workload, simulate, trace_workload

CONFIG = ServingConfig("llama3-70b", "tpu-v5e", n_chips=16, max_batch=32, max_context_len=8192)


def test_prefix_cache_shortens_prefill_to_the_new_tokens_only():
    plain = trace_workload([(0.0, 4000, 64)])
    cached = Workload(plain.arrival_s, plain.prompt_len, plain.output_len, cached_len=np.array([3000]))
    for engine in ("interleaved", "naive", "disaggregated"):
        a, b = simulate(CONFIG, plain, engine), simulate(CONFIG, cached, engine)
        assert b.ttft_s[0] == pytest.approx(prefill_latency("llama3-70b", "tpu-v5e", 16, 1000), rel=1e-9)
        assert a.ttft_s[0] == pytest.approx(prefill_latency("llama3-70b", "tpu-v5e", 16, 4000), rel=1e-9)
        # Decode still reads the whole 4,000-token prompt's cache: the time per output token is unchanged.
        assert b.tpot_s[0] == pytest.approx(a.tpot_s[0], rel=1e-9)


def test_shared_prefix_lowers_ttft_under_load_for_every_engine():
    kwargs = dict(rate_per_s=1.0, n_requests=200, prompt_len=(2048, 4096), output_len=(32, 256), seed=3)
    plain = poisson_workload(**kwargs)
    shared = poisson_workload(**kwargs, shared_prefix_len=2000, shared_prefix_fraction=0.8)
    np.testing.assert_array_equal(plain.arrival_s, shared.arrival_s)  # same requests, only the cache differs
    np.testing.assert_array_equal(plain.prompt_len, shared.prompt_len)
    assert 0.7 < np.mean(shared.cached_len > 0) < 0.9
    for engine in ENGINES:
        a, b = simulate(CONFIG, plain, engine), simulate(CONFIG, shared, engine)  # disaggregated: 1 + 1 servers
        assert b.p50_ttft_s < a.p50_ttft_s, engine
        assert b.total_tokens == a.total_tokens == int(plain.output_len.sum())


def test_prefix_cache_defaults_leave_workloads_unchanged_and_bad_input_is_named():
    a = poisson_workload(2.0, 50, prompt_len=(10, 100), seed=1)
    b = poisson_workload(2.0, 50, prompt_len=(10, 100), seed=1, shared_prefix_len=0, shared_prefix_fraction=0.5)
    np.testing.assert_array_equal(a.prompt_len, b.prompt_len)
    assert not a.cached_len.any() and not b.cached_len.any()
    with pytest.raises(ValueError, match="cached_len must lie in"):
        Workload([0.0], [10], [5], cached_len=[10])
    with pytest.raises(ValueError, match="shared_prefix_fraction must be a fraction"):
        poisson_workload(1.0, 10, shared_prefix_fraction=1.5)


# --- A prefill against an existing cache (Pope et al.'s chatbot turn, chapter 12) -----------------------------------

from hypothesis import given, settings, strategies as st  # noqa: E402

from scaling_lib.frontier import layout_cost  # noqa: E402
from scaling_lib.prefix_cache import cached_prefill_cost  # noqa: E402

CHAT_TURN = dict(model="palm-540b", chip="tpu-v4", n_chips=64, ffn_layout="2d-ws", attention_sharding="heads",
                 weight_dtype="int8", pad_heads=True)  # 48 heads on 64 chips: padded to 64, as Pope et al. did


def test_cached_prefill_reads_the_history_once_per_chip_by_hand():
    # PaLM 540B: 118 layers, one (multiquery) KV head of 256; bf16 keys and values: 2 x 118 x 256 x 2 B = 120,832 B
    # per token. Heads-sharded attention replicates that head, so each of the 64 chips reads all 1,920 cached tokens
    # at TPU v4's 1.2 TB/s: 1,920 x 120,832 / 1.2e12 = 193.3 us.
    turn = cached_prefill_cost(new_tokens=64, cached_tokens=1920, **CHAT_TURN)
    assert turn.kv_s == pytest.approx(1920 * 120_832 / 1.2e12, rel=1e-9)
    # The FLOPs, the weight read and the collectives are those of a 64-token prefill: 2 x 540e9-ish x 64 FLOPs.
    plain = layout_cost(CHAT_TURN["model"], "tpu-v4", 64, "prefill", 1, "2d-ws", "heads", context_len=64,
                        weight_dtype="int8", pad_heads=True)
    assert (turn.compute_s, turn.weight_s, turn.network_s, turn.tokens) == \
        (plain.compute_s, plain.weight_s, plain.network_s, 64)
    assert turn.total_s == pytest.approx(max(turn.compute_s, turn.weight_s + turn.kv_s) + turn.network_s, rel=1e-12)


def test_cached_prefill_batch_sharded_reads_only_its_own_sequences():
    # 64 sequences over 64 chips: each chip holds one sequence's 1,000 cached tokens.
    turn = cached_prefill_cost("palm-540b", "tpu-v4", 64, 16, 1000, "2d-ws", "batch", batch=64)
    assert turn.kv_s == pytest.approx(1000 * 120_832 / 1.2e12, rel=1e-9)


@settings(max_examples=40, deadline=None)
@given(new=st.integers(1, 4096), cached=st.integers(0, 32768), more=st.integers(1, 32768))
def test_cached_prefill_grows_with_the_history_and_is_a_plain_prefill_without_one(new, cached, more):
    base = cached_prefill_cost(new_tokens=new, cached_tokens=0, **CHAT_TURN)
    plain = layout_cost(CHAT_TURN["model"], "tpu-v4", 64, "prefill", 1, "2d-ws", "heads", context_len=new,
                        weight_dtype="int8", pad_heads=True)
    assert base.total_s == plain.total_s and base.kv_s == 0.0
    shorter = cached_prefill_cost(new_tokens=new, cached_tokens=cached, **CHAT_TURN)
    longer = cached_prefill_cost(new_tokens=new, cached_tokens=cached + more, **CHAT_TURN)
    assert longer.total_s >= shorter.total_s and longer.kv_s > shorter.kv_s
    assert longer.compute_s == shorter.compute_s == plain.compute_s
