"""Sizes, rates and counts that used to poison a result or loop for minutes: each is refused with
a ValueError naming the argument, or handled in time that does not grow with the count."""

import math

import pytest

from scaling_lib._validate import MAX_CHIPS, divisors
from scaling_lib.flops import generation_flops_curve
from scaling_lib.kv_levers import evenly_ragged_lengths
from scaling_lib.layouts import optimal_2d_mesh
from scaling_lib.prefix_cache import CacheTiers, TieredLru, chat_workload, route, simulate_chat
from scaling_lib.simulator import ServingConfig, poisson_workload, simulate, trace_workload
from scaling_lib.speculative import best_lookahead, best_roofline_lookahead

from tests import for_each

NAN, INF = float("nan"), float("inf")
TIERS = CacheTiers(hbm_bytes=100, host_bytes=1000, host_bandwidth=1e9)


@for_each([(NAN, "size must be a finite number"), (INF, "size must be a finite"),
                                           (-5, "size must be non-negative"), ("5", "size must be a number"),
                                           (None, "size must be a number")], ids=str)
def test_a_prefix_of_nan_inf_or_negative_bytes_is_refused(size, message):
    with pytest.raises(ValueError, match=message):
        TieredLru(TIERS).store("k", 5, size)


def test_after_refusing_a_nan_size_the_tiers_still_evict_by_bytes():
    lru = TieredLru(TIERS)
    with pytest.raises(ValueError):
        lru.store("poison", 5, NAN)
    for key in range(12):  # 12 prefixes of 60 B: HBM holds 1 (100 B), host 16 (1,000 B): 11 demoted, none dropped
        lru.store(key, 5, 60.0)
    assert list(lru.hbm) == [11] and list(lru.host) == list(range(11))
    assert lru.lookup("poison") == ("miss", 0)


@for_each([
    (lambda: TieredLru(TIERS).store("k", -1, 10.0), "tokens must be a non-negative integer"),
    (lambda: TieredLru(TIERS).store("k", 2.5, 10.0), "tokens must be a non-negative integer"),
    (lambda: TieredLru(TIERS).store(["k"], 5, 10.0), "key must be hashable"),
    (lambda: TieredLru(TIERS).lookup({}), "key must be hashable"),
    (lambda: TieredLru((1e9, 1e9, 1e9)), "tiers must be a CacheTiers"),
    (lambda: chat_workload(2**20, 2**10, 100, 20, 20, 1.0, 5.0), "n_sessions x turns = 1,073,741,824 requests"),
    (lambda: poisson_workload(1.0, 2**40), "n_requests=1,099,511,627,776 is more than 1,000,000"),
    (lambda: optimal_2d_mesh(2**40, "palm-540b"), "n_chips=1,099,511,627,776 is more than 1,048,576"),
    (lambda: best_lookahead(0.6, 0.05, 2**40), "max_lookahead=1,099,511,627,776 is more than 1,024"),
    (lambda: best_roofline_lookahead("llama3-70b", "tpu-v5e", 16, 1, 2048, 0.6, 0.05, 10**9), "max_lookahead="),
    (lambda: evenly_ragged_lengths(8192, 2**40), "batch=1,099,511,627,776 is more than 1,000,000"),
    (lambda: generation_flops_curve("llama3-8b", 16, 2**40), "n_tokens=1,099,511,627,776 is more than 65,536"),
    (lambda: ServingConfig("llama3-8b", "h100", 2**12, 2**20, 16), "max_batch=1,048,576"),
], ids=str)
def test_counts_that_would_loop_for_minutes_are_refused_naming_the_argument(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_divisors_by_trial_division_to_the_square_root_agree_with_the_definition():
    for n in list(range(1, 200)) + [2**20, 3**12, 9973, 5040]:
        expected = [d for d in range(1, n + 1) if n % d == 0] if n < 10**4 else None
        found = divisors(n)
        assert found == sorted(set(found)) and all(n % d == 0 for d in found)
        assert expected is None or found == expected
    assert len(divisors(2**20)) == 21 and divisors(MAX_CHIPS)[-1] == MAX_CHIPS


def test_more_servers_or_replicas_than_requests_give_the_same_result_as_one_per_request():
    config = ServingConfig("llama3-8b", "h100", n_chips=1, max_batch=4, max_context_len=4096)
    workload = trace_workload([(0.0, 100, 5), (0.01, 300, 3), (0.02, 50, 1)])
    three, many = simulate(config, workload, n_servers=3), simulate(config, workload, n_servers=2**40)
    assert many.ttft_s.tolist() == three.ttft_s.tolist() and many.n_chips == 2**40
    chat = chat_workload(n_sessions=4, turns=3, system_len=100, user_len=20, output_len=20, rate_per_s=1.0,
                         think_s=5.0)
    few, lots = route(chat, "llama3-8b", 12, TIERS), route(chat, "llama3-8b", 2**40, TIERS)
    assert lots.replica.tolist() == few.replica.tolist() == [int(s) for s in chat.session]
    result = simulate_chat(config, chat, 2**40, TIERS)
    assert all(math.isfinite(t) for t in result.ttft_s)


def test_a_percentile_outside_0_to_100_is_refused_naming_q():
    config = ServingConfig("llama3-8b", "h100", n_chips=1, max_batch=4, max_context_len=4096)
    result = simulate(config, trace_workload([(0.0, 100, 5), (0.01, 300, 3)]))
    for q in (150, -1, NAN, "50"):
        with pytest.raises(ValueError, match="q must be"):
            result.ttft_percentile(q)
    assert result.ttft_percentile(100) == max(result.ttft_s)
