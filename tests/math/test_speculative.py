"""scaling_lib.speculative: the roofline-priced speculative step and the best lookahead (the claims of chapter 8 and
the plain-Python oracle of the acceptance counts are in test_claims_serving.py and test_oracles.py)."""

from scaling_lib.inference import decode_step_time
from scaling_lib.speculative import best_lookahead, best_roofline_lookahead, roofline_step


def test_roofline_step_prices_its_plain_step_in_the_dtypes_it_is_given():
    spec = roofline_step("llama3-70b", "tpu-7x", 8, 4, 4096, 3, 0.6, 0.05, "fp8", "fp8", "fp8")
    assert spec.plain_step_s == decode_step_time("llama3-70b", "tpu-7x", 8, 4, 4096, "fp8", "fp8", "fp8").total_s


def test_best_lookahead_default_cap_is_16():
    assert best_lookahead(0.99, 0.0) == 16


def test_best_roofline_lookahead_default_cap_is_16():
    assert best_roofline_lookahead("llama3-70b", "tpu-v5e", 16, 1, 2048, 0.99, 0.0) == 16
