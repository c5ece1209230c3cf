"""scaling_lib.dtypes: the bytes one element of each number format takes (an unknown name is in test_bad_input.py)."""

import pytest

from scaling_lib.dtypes import bytes_per_element

from tests import for_each


@for_each([
    ("fp32", 32), ("bf16", 16), ("fp16", 16), ("fp8", 8), ("int8", 8), ("int4", 4),
    ("nvfp4", 4 + 8 / 16),  # 4 bits + one 8-bit scale per 16 values
    ("mxfp4", 4 + 8 / 32),  # 4 bits + one 8-bit scale per 32 values
], ids=str)
def test_a_format_takes_its_bit_width_with_its_block_scales_over_eight_bytes(dtype, bits):
    assert bytes_per_element(dtype) == pytest.approx(bits / 8, rel=1e-12)
