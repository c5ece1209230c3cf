"""scaling_lib.dtypes: the bytes one element of each number format takes (an unknown name is in test_bad_input.py)."""

import pytest

from scaling_lib.dtypes import bytes_per_element


@pytest.mark.parametrize("dtype, bits", [("fp32", 32), ("bf16", 16), ("fp16", 16), ("fp8", 8), ("int8", 8),
                                         ("int4", 4)])
def test_a_plain_format_takes_its_bit_width_over_eight_bytes(dtype, bits):
    assert bytes_per_element(dtype) == bits / 8


def test_fp4_formats_count_their_block_scales():
    # nvfp4: 4 bits + one 8-bit scale per 16 values = 4.5 bits; mxfp4: one 8-bit scale per 32 = 4.25 bits.
    assert 8 * bytes_per_element("nvfp4") == pytest.approx(4 + 8 / 16) == pytest.approx(4.5)
    assert 8 * bytes_per_element("mxfp4") == pytest.approx(4 + 8 / 32) == pytest.approx(4.25)
