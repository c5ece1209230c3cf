"""attention_sharding: the collectives of multiquery attention in a decode step (Pope et al. 2022, sec. 3.3).
tests/tiny/test_layouts.py checks the same collectives against the compiled HLO; these are hand derivations."""

import pytest

from scaling_lib.attention_sharding import ATTENTION_SHARDINGS, attention_collectives
from scaling_lib.collectives import ring_bytes_sent

from tests import for_each


def test_head_sharding_moves_nothing_and_batch_sharding_two_all_to_alls_of_the_query_block():
    assert ATTENTION_SHARDINGS == ("heads", "batch")
    assert attention_collectives("heads", 512, 48, 256, (4, 4, 4)) == ()
    two = attention_collectives("batch", 512, 48, 256, (4, 4, 4))
    # By hand: each chip's block of q is b_a B N H / n = 2 x 512 x 48 x 256 / 64 = 196,608 bytes.
    assert [(c.op, c.tensor, c.bytes_per_chip, c.group) for c in two] == [
        ("all-to-all", "activations", 196_608.0, (4, 4, 4))] * 2
    # A ring of 64 passes 63 of the 64 blocks through each chip.
    assert ring_bytes_sent(two[0]) == pytest.approx(196_608 * 63 / 64, rel=1e-12)


def test_one_chip_needs_no_collective_and_two_need_both_all_to_alls_over_a_padded_mesh():
    assert attention_collectives("batch", 8, 4, 16, (1,)) == ()
    # Multiquery: with the KV head unsplittable, 2 chips split the batch and need both all-to-alls.
    two = attention_collectives("batch", 8, 4, 16, (2,))
    assert [(c.op, c.tensor) for c in two] == [("all-to-all", "activations")] * 2
    assert two[0].group == (2, 1, 1)


# --- Bad input: a ValueError naming the argument and the fix ---------------------------------------------------------
@for_each([
    (lambda: attention_collectives("sequence", 8, 4, 16, (2,)), "attention_sharding"),
    (lambda: attention_collectives("batch", 0, 4, 16, (2,)), "batch"),
    (lambda: attention_collectives("batch", 8, 4, 16, (2, 2, 2, 2)), "mesh_shape"),
    (lambda: attention_collectives("batch", 3, 4, 16, (2,)), "batch"),
], ids=str)
def test_bad_input_gets_a_value_error_naming_the_argument_and_the_fix(call, words):
    with pytest.raises(ValueError, match=words):
        call()
