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
