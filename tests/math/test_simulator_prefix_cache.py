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
        extra = dict(n_prefill_servers=1, n_decode_servers=1) if engine == "disaggregated" else {}
        a, b = simulate(CONFIG, plain, engine, **extra), simulate(CONFIG, shared, engine, **extra)
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
