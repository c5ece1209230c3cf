"""Closed-form serving details (scaling_lib.serving): what a bad argument is told."""

import pytest

from scaling_lib.serving import prefill_saturating_tokens


def test_an_mfu_above_one_is_refused_saying_what_mfu_is():
    with pytest.raises(ValueError, match="mfu.*the fraction of peak FLOP/s achieved"):
        prefill_saturating_tokens("llama3-8b", "h100", mfu=1.5)
