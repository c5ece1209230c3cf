"""scaling_lib._numpy: the stand-in for NumPy that imports it on first use (the simulators import it at the top so that
the closed-form modules import where NumPy is absent)."""

import numpy

from scaling_lib._numpy import np


def test_the_stand_in_gives_numpys_attributes_keeps_each_once_read_and_says_what_it_is():
    assert np.float64 is numpy.float64 and np.arange is numpy.arange
    lazy = type(np)()  # a fresh stand-in, nothing read yet
    assert "median" not in vars(lazy)
    assert lazy.median is numpy.median
    assert vars(lazy)["median"] is numpy.median
    assert repr(np) == "<numpy, imported on first use>"
