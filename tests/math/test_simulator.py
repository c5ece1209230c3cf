"""The serving simulator (scaling_lib.simulator): what a bad argument is told."""

import pytest

from scaling_lib.simulator import ServingConfig, poisson_workload, simulate


def test_too_many_requests_are_refused_saying_why_there_is_a_limit():
    with pytest.raises(ValueError, match="n_requests.*the simulator runs each one in Python"):
        poisson_workload(1.0, 10**9)


def test_a_disaggregated_prefill_config_must_be_a_serving_config():
    config = ServingConfig("llama3-8b", "h100", 1, 8, 4096)
    with pytest.raises(ValueError, match="prefill_config must be a ServingConfig, got str"):
        simulate(config, poisson_workload(1.0, 5, 128, 16), "disaggregated", n_prefill_servers=1,
                 n_decode_servers=1, prefill_config="llama3-8b")


def test_a_length_range_includes_both_ends_and_nothing_beyond():
    lengths = poisson_workload(1.0, 200, prompt_len=(100, 101), output_len=16).prompt_len
    assert sorted(set(lengths.tolist())) == [100, 101]


def test_a_disaggregated_run_needs_a_prefill_server_and_says_which_count():
    config = ServingConfig("llama3-8b", "h100", 1, 8, 4096)
    with pytest.raises(ValueError, match="n_prefill_servers must be a positive integer, got 0"):
        simulate(config, poisson_workload(1.0, 5, 128, 16), "disaggregated", n_prefill_servers=0,
                 n_decode_servers=1)
