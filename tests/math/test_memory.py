"""Memory footprints (scaling_lib.memory): what a bad argument is told."""

import pytest

from scaling_lib.memory import require_fit


def test_an_unknown_kv_placement_is_named_with_the_choices():
    with pytest.raises(ValueError, match="unknown kv_placement 'bogus'; use one of batch-split, replicated"):
        require_fit("llama3-8b", "h100", 1, 1, 1000, kv_placement="bogus")
