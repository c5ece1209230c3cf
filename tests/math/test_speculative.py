"""scaling_lib.speculative: the roofline-priced speculative step and the best lookahead (the claims of chapter 8 and
the plain-Python oracle of the acceptance counts are in test_claims_serving.py and tests/tiny/test_speculative.py)."""

import pytest

from scaling_lib.inference import decode_step_time
from scaling_lib.speculative import (best_lookahead, best_roofline_lookahead, expected_tokens_per_step, roofline_step,
                                     speedup)

from tests import for_each


def test_roofline_step_prices_its_plain_step_in_the_dtypes_it_is_given():
    spec = roofline_step("llama3-70b", "tpu-7x", 8, 4, 4096, 3, 0.6, 0.05, "fp8", "fp8", "fp8")
    assert spec.plain_step_s == decode_step_time("llama3-70b", "tpu-7x", 8, 4, 4096, "fp8", "fp8", "fp8").total_s


def test_the_best_lookahead_is_capped_at_16_by_default():
    assert best_lookahead(0.99, 0.0) == 16
    assert best_roofline_lookahead("llama3-70b", "tpu-v5e", 16, 1, 2048, 0.99, 0.0) == 16


# --- Bad input: a ValueError naming the argument and the fix ---------------------------------------------------------
@for_each([
    (lambda: expected_tokens_per_step(3, 1.2), "acceptance must be a probability"),
    (lambda: speedup(-1, 0.5, 0.1), "lookahead must be a non-negative integer"),
], ids=str)
def test_bad_input_gets_a_value_error_naming_the_argument_and_the_fix(call, words):
    with pytest.raises(ValueError, match=words):
        call()
