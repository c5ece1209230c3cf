"""utilization: MFU from a published latency and the decode bound beside a measured step. The published values
(Pope et al.'s 76% MFU, the 29 ms decode step) are claim P4 in test_claims_layouts.py; these are hand derivations.
"""

import pytest

from scaling_lib.inference import decode_step_time
from scaling_lib.utilization import DecodeGap, decode_latency_gap, mfu


def test_mfu_is_model_flops_over_the_slice_peak():
    # By hand: 2 x 1e9 params x 1e6 tokens = 2e15 FLOPs in 10 s on 8 TPU v5e (197 TFLOP/s bf16 each, 1.576e16 FLOPs
    # in those 10 s) = 12.690%.
    assert mfu(1e9, 1e6, 10.0, "tpu-v5e", 8) == pytest.approx(0.126904, rel=1e-5)


def test_the_gap_is_the_measured_step_over_the_roofline_bound():
    bound = decode_step_time("llama3-8b", "h100", 1, 8, 1024)
    gap = decode_latency_gap("llama3-8b", "h100", 1, 8, 1024, 2 * bound.total_s, weight_dtype="bf16")
    assert gap == DecodeGap(bound, 2 * bound.total_s)
    assert gap.ratio == pytest.approx(2.0, rel=1e-12) and gap.gap_s == pytest.approx(bound.total_s, rel=1e-12)


@pytest.mark.parametrize("call, message", [
    (lambda: mfu(5.4e11, 1000, 0, "tpu-v4", 64), "seconds must be positive"),
    (lambda: mfu(5.4e11, 1000, 1.0, "tpu-v4", 0), "n_chips"),
    (lambda: decode_latency_gap("palm-540b", "tpu-v4", 64, 64, 2048, 0), "measured_step_s"),
])
def test_utilization_bad_input(call, message):
    with pytest.raises(ValueError, match=message):
        call()
