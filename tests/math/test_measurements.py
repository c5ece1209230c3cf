"""scaling_lib.measurements: the published rows (Pope et al. 2022's Tables 2 and 3, TensorRT-LLM's tables) and how
they are looked up; the rows against the estimate are in test_calibration.py and test_validation_runs.py."""

import re

import pytest

from scaling_lib.measurements import pope_row, pope_rows, trtllm_rows


def test_an_unknown_pope_row_lists_the_known_ones():
    with pytest.raises(ValueError) as err:
        pope_row("palm-540b", "no such scenario", "decode")
    known = str(err.value).split("known rows: ", 1)[1]
    assert known.count("), (") == len(pope_rows()) - 1


def test_trtllm_rows_carry_the_tensor_parallel_degree_their_label_names():
    for row in trtllm_rows():
        assert row.tensor_parallel == int(re.search(r"\bTP(\d+)\b", row.label).group(1))


def test_pope_rows_cite_their_table():
    for row in pope_rows():
        assert row.source.startswith("Pope et al. 2022") and re.search(r"Table [23]", row.source)
