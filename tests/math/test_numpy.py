"""scaling_lib._numpy: the stand-in for NumPy that imports it on first use (the simulators import it at the top so that
the closed-form modules import where NumPy is absent)."""

import numpy

from scaling_lib._numpy import np


def test_an_attribute_of_the_stand_in_is_numpys():
    assert np.float64 is numpy.float64 and np.arange is numpy.arange


def test_an_attribute_read_once_is_kept_on_the_stand_in():
    lazy = type(np)()  # a fresh stand-in, nothing read yet
    assert "median" not in vars(lazy)
    assert lazy.median is numpy.median
    assert vars(lazy)["median"] is numpy.median


def test_the_stand_in_says_what_it_is():
    assert repr(np) == "<numpy, imported on first use>"
