"""Partitioning layouts (scaling_lib.layouts): the arguments its tables take."""

import numpy as np

from scaling_lib.layouts import context_length_table


def test_a_numpy_array_of_batches_is_read_as_the_list_it_holds():
    # A notebook reader's batches often come from np.arange or an array; any sized iterable of sizes is a list.
    assert context_length_table(batches=np.array([128, 512])) == context_length_table(batches=(128, 512))
