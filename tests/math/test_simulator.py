"""simulator: the co-located engines (`simulate`) and the disaggregated one (`simulate_disaggregated`), each taking
only its own arguments (issue 22). The engines' behaviour is claim V3 (test_claims_serving.py); these pin the split."""

import numpy as np
import pytest

from scaling_lib.simulator import ServingConfig, poisson_workload, simulate, simulate_disaggregated

CONFIG = ServingConfig("llama3-8b", "h100", n_chips=1, max_batch=8, max_context_len=4096)
WORKLOAD = poisson_workload(4.0, 40, prompt_len=(100, 1000), output_len=(10, 100), seed=3)


def test_the_disaggregated_engine_named_in_simulate_is_one_prefill_and_one_decode_server():
    named = simulate(CONFIG, WORKLOAD, "disaggregated")
    direct = simulate_disaggregated(CONFIG, WORKLOAD, n_prefill_servers=1, n_decode_servers=1)
    assert named.engine == direct.engine == "disaggregated" and named.n_chips == direct.n_chips == 2
    np.testing.assert_array_equal(named.ttft_s, direct.ttft_s)
    np.testing.assert_array_equal(named.finish_s, direct.finish_s)


def test_each_function_counts_the_chips_of_its_own_servers():
    assert simulate(CONFIG, WORKLOAD, "chunked", n_servers=3).n_chips == 3
    assert simulate_disaggregated(CONFIG, WORKLOAD, n_prefill_servers=2, n_decode_servers=3).n_chips == 5


def test_each_function_refuses_the_other_engines_arguments_and_names_the_right_call():
    with pytest.raises(ValueError, match="simulate_disaggregated"):
        simulate(CONFIG, WORKLOAD, "disaggregated", n_servers=2)
    with pytest.raises(TypeError, match="n_prefill_servers"):
        simulate(CONFIG, WORKLOAD, "interleaved", n_prefill_servers=2)
    with pytest.raises(TypeError, match="n_servers"):
        simulate_disaggregated(CONFIG, WORKLOAD, n_servers=2)
    with pytest.raises(ValueError, match="prefill_config must be a ServingConfig"):
        simulate_disaggregated(CONFIG, WORKLOAD, prefill_config="h100")
