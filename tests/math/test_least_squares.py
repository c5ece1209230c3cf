"""The bounded least-squares fit behind the calibration (scaling_lib._least_squares), against closed forms."""

import pytest

from scaling_lib._least_squares import bounded_least_squares, solve


def test_solve_returns_the_hand_solved_answer_whatever_the_pivot_order():
    # 2x + y = 5, x + 3y = 10: x = 1, y = 3; the same system with its rows swapped, and a 3x3 with a zero pivot.
    assert solve([[2.0, 1.0], [1.0, 3.0]], [5.0, 10.0]) == pytest.approx([1.0, 3.0])
    assert solve([[1.0, 3.0], [2.0, 1.0]], [10.0, 5.0]) == pytest.approx([1.0, 3.0])
    assert solve([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 4.0]], [2.0, 7.0, 8.0]) == pytest.approx([7.0, 2.0, 2.0])
    with pytest.raises(ValueError, match="singular"):
        solve([[1.0, 2.0], [2.0, 4.0]], [1.0, 2.0])


def test_a_straight_line_fit_lands_on_the_normal_equations_answer():
    # y = a + b x through four points: the least-squares a, b by the normal equations, computed here by hand.
    xs, ys = [0.0, 1.0, 2.0, 3.0], [1.1, 2.9, 5.2, 6.8]
    n, sx, sy = len(xs), sum(xs), sum(ys)
    sxx, sxy = sum(x * x for x in xs), sum(x * y for x, y in zip(xs, ys))
    b = (n * sxy - sx * sy) / (n * sxx - sx * sx)
    a = (sy - b * sx) / n
    found = bounded_least_squares(lambda v: [v["a"] + v["b"] * x - y for x, y in zip(xs, ys)],
                                  {"a": (-10.0, 10.0), "b": (-10.0, 10.0)}, {"a": 0.0, "b": 0.0})
    assert found.values["a"] == pytest.approx(a, abs=1e-6) and found.values["b"] == pytest.approx(b, abs=1e-6)
    assert found.at_edge == ()
    assert found.loss == pytest.approx(sum((a + b * x - y) ** 2 for x, y in zip(xs, ys)), rel=1e-6)


def test_a_minimum_outside_the_box_stops_on_its_edge_and_says_which():
    # (x - 2)^2 + (y - 0.3)^2 over x in [0, 1], y in [0, 1]: x ends at 1 (on the edge), y at 0.3 (inside).
    found = bounded_least_squares(lambda v: [v["x"] - 2.0, v["y"] - 0.3], {"x": (0.0, 1.0), "y": (0.0, 1.0)},
                                  {"x": 0.5, "y": 0.5})
    assert found.values["x"] == pytest.approx(1.0) and found.values["y"] == pytest.approx(0.3, abs=1e-6)
    assert found.at_edge == ("x",)
