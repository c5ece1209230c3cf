"""The input tables: every chip and model of claims.md is present, sourced and self-consistent."""

import pytest

from scaling_lib.book.claims import published
from scaling_lib.hardware import chip_names, get_chip
from scaling_lib.models import get_model, model_names

REQUIRED_CHIPS = ("tpu-v4", "tpu-v5e", "tpu-v5p", "tpu-v6e", "tpu-7x", "h100", "h200", "b200")
REQUIRED_MODELS = ("llama2-13b", "llama3-8b", "llama3-70b", "palm-8b", "palm-62b", "palm-540b")


def test_every_required_chip_and_model_exists_with_a_source():
    assert set(REQUIRED_CHIPS) <= set(chip_names())
    assert set(REQUIRED_MODELS) <= set(model_names())
    for name in chip_names():
        assert get_chip(name).source
    for name in model_names():
        assert get_model(name).source


@pytest.mark.parametrize("name", chip_names())
def test_chip_rates_are_consistent(name):
    chip = get_chip(name)
    assert chip.ici_bidirectional == 2 * chip.ici_link_bandwidth
    assert "bf16" in chip.compute_dtypes
    for dtype in ("int8", "fp8"):
        if dtype in chip.compute_dtypes:  # narrower math is never slower than bf16 on these chips
            assert chip.peak_flops(dtype) >= chip.peak_flops("bf16")


def test_ironwood_ici_per_link_and_v4_per_chip_match_the_sources():
    # Ironwood: 1.2e12 B/s bidirectional per chip over 6 links = 2e11 B/s per link, both directions.
    ironwood = get_chip("ironwood")
    assert ironwood.ici_bidirectional * ironwood.ici_links == pytest.approx(published("S2 Ironwood ICI per chip"))
    # Pope et al.: 270 GB/s of ICI per TPU v4 chip (6 links x 45 GB/s one way).
    v4 = get_chip("tpu-v4")
    assert v4.ici_link_bandwidth * v4.ici_links == pytest.approx(published("P5 v4 ICI per chip"))
