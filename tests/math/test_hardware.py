"""hardware: chip rows against their published sources."""

import pytest

from scaling_lib.hardware import get_chip


def test_ironwood_hbm_is_192_gib_as_google_clouds_tpu7x_page_gives_it():
    # Google Cloud's TPU7x page: "HBM capacity per chip (GiB)": 192 (issue 24, items 17 and the TPU7x row)
    chip = get_chip("ironwood")
    assert "192 GiB" in chip.source
    assert chip.hbm_capacity == pytest.approx(192 * 2**30, rel=1e-12)  # 206.2e9 B, not 192e9
