"""utilization: MFU from a published latency and the decode bound beside a measured step. The published values
(Pope et al.'s 76% MFU, the 29 ms decode step) are claim P4 in test_claims_layouts.py; these are hand derivations.
"""

import pytest

from scaling_lib.inference import decode_step_time
from scaling_lib.utilization import DecodeGap, decode_latency_gap, mbu, mfu

from tests import for_each


def test_mfu_is_model_flops_over_the_slice_peak_and_the_gap_the_measured_step_over_the_roofline_bound():
    # By hand: 2 x 1e9 params x 1e6 tokens = 2e15 FLOPs in 10 s on 8 TPU v5e (197 TFLOP/s bf16 each, 1.576e16 FLOPs
    # in those 10 s) = 12.690%.
    assert mfu(1e9, 1e6, 10.0, "tpu-v5e", 8) == pytest.approx(0.126904, rel=1e-5)
    bound = decode_step_time("llama3-8b", "h100", 1, 8, 1024)
    gap = decode_latency_gap("llama3-8b", "h100", 1, 8, 1024, 2 * bound.total_s, weight_dtype="bf16")
    assert gap == DecodeGap(bound, 2 * bound.total_s)
    assert gap.ratio == pytest.approx(2.0, rel=1e-12) and gap.gap_s == pytest.approx(bound.total_s, rel=1e-12)


def test_mbu_is_the_bytes_a_step_must_read_over_what_hbm_streams_in_its_time():
    # Pope et al.'s low-latency decode of PaLM 540B (64 TPU v4 of 1.2 TB/s, batch 64, 2,048 tokens, int8 weights,
    # 1.82 s for 64 steps). By hand: int8 weights 540,354,281,472 B; the multiquery bf16 cache 64 x 2,048 x 2 x 118
    # layers x 1 head x 256 x 2 B = 15,837,691,904 B; over 1.82 / 64 s x 64 x 1.2e12 B/s = 2.184e12 B: 25.47%.
    bytes_read = 540_354_281_472 + 64 * 2048 * 2 * 118 * 256 * 2
    assert mbu(bytes_read, 1.82 / 64, "tpu-v4", 64) == pytest.approx(bytes_read / 2.184e12, rel=1e-12)
    assert mbu(bytes_read, 1.82 / 64, "tpu-v4", 64) == pytest.approx(0.2547, abs=5e-5)
    gap = decode_latency_gap("palm-540b", "tpu-v4", 64, 64, 2048, 1.82 / 64, weight_dtype="int8")
    assert gap.mbu == pytest.approx(mbu(bytes_read, 1.82 / 64, "tpu-v4", 64), rel=1e-12)
    # a memory-bound step measured at its bound streams at full bandwidth: MBU 1
    bound = decode_step_time("llama3-8b", "h100", 1, 8, 1024)
    assert decode_latency_gap("llama3-8b", "h100", 1, 8, 1024, bound.total_s, weight_dtype="bf16").mbu == \
        pytest.approx(1.0, rel=1e-12)


# --- Bad input: a ValueError naming the argument and the fix ---------------------------------------------------------
@for_each([
    (lambda: mbu(1e9, 0, "h100", 1), "seconds must be positive"),
    (lambda: mfu(5.4e11, 1000, 0, "tpu-v4", 64), "seconds must be positive"),
    (lambda: mfu(5.4e11, 1000, 1.0, "tpu-v4", 0), "n_chips"),
    (lambda: decode_latency_gap("palm-540b", "tpu-v4", 64, 64, 2048, 0), "measured_step_s"),
], ids=str)
def test_bad_input_gets_a_value_error_naming_the_argument_and_the_fix(call, words):
    with pytest.raises(ValueError, match=words):
        call()
