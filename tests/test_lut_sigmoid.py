"""Seed 003's three sigmoid approaches, checked against bounds derived by hand."""

import math

import numpy as np

from npukit.lut.sigmoid import (
    SIGMOID_TABLE,
    fast_sigmoid,
    format_errors,
    sigmoid_errors,
    table_sigmoid,
    taylor_sigmoid,
)


def _sigmoid(x):
    x = np.asarray(x, dtype=np.float64)
    return 0.5 * (1 + np.tanh(x / 2))


# sigma'' = sigma (1 - sigma)(1 - 2 sigma) peaks in size at 1/(6 sqrt 3); for |x| >= 2 it is
# largest at |x| = 2, where sigma(2) = 0.880797 gives 0.0799627.
SIGMA2_MAX = 1 / (6 * math.sqrt(3))
SIGMA2_BEYOND_2 = 0.880797 * 0.119203 * 0.761594
H = 0.5                      # the table's step
# The seed's table: 6 decimals (5e-7), except two pairs of entries the seed got wrong:
# x = -4.5 holds 0.011109 where sigmoid is 0.0109869 (and 4.5 mirrors it), x = -6.5 holds
# 0.001503 where sigmoid is 0.0015012 (and 6.5 mirrors it).
TABLE_DEVIATION = 0.011109 - 0.0109869 + 1e-7
ROUNDING = TABLE_DEVIATION + 1e-6      # the table's values and float32 arithmetic


def test_the_seed_table_holds_sigmoid_at_half_steps():
    x = -8 + 0.5 * np.arange(33)
    deviation = np.abs(SIGMOID_TABLE - _sigmoid(x))
    typos = np.isin(x, [-6.5, -4.5, 4.5, 6.5])
    assert SIGMOID_TABLE.size == 33
    assert np.max(deviation[~typos]) <= 5e-7 + 1e-7
    assert 1e-4 < np.max(deviation[typos]) <= TABLE_DEVIATION


def test_interpolated_table_is_within_about_0_01_over_the_whole_float_range():
    # linear interpolation: |error| <= h^2/8 max|sigma''| = 0.00301 plus the table's own
    # deviation; beyond the clamp (x >= 7.5 returns T[31]) it is at most 1 - T[31] = 0.000553.
    bound = H * H / 8 * SIGMA2_MAX + ROUNDING
    x = np.concatenate([np.linspace(-20, 20, 200001), [-3e38, 3e38, -np.inf, np.inf]])
    err = np.abs(table_sigmoid(x) - _sigmoid(x))
    assert np.max(err) <= bound <= 0.01


def test_interpolated_table_is_within_about_0_005_outside_minus_2_2():
    bound = H * H / 8 * SIGMA2_BEYOND_2 + ROUNDING
    x = np.concatenate([np.linspace(-40, -2, 50001), np.linspace(2, 40, 50001)])
    assert np.max(np.abs(table_sigmoid(x) - _sigmoid(x))) <= bound <= 0.005


def test_taylor_is_good_inside_minus_2_2_and_poor_outside():
    # sigma(x) - 1/2 = tanh(x/2)/2 has an alternating series with shrinking terms for
    # |x/2| <= 1, so the error is at most the first omitted term 17 x^7 / 80640, plus the
    # rounding of the seed's constants (1/48 ~ 0.020833, 1/480 ~ 0.002083).
    def bound(r):
        return 17 * r**7 / 80640 + (1 / 48 - 0.020833) * r**3 + (0.002083 - 1 / 480) * r**5 \
            + 1e-6

    for r in (0.5, 1.0, 2.0):
        x = np.linspace(-r, r, 20001)
        assert np.max(np.abs(taylor_sigmoid(x) - _sigmoid(x))) <= abs(bound(r))
    # at x = 4 the polynomial is 0.5 + 1 - 0.020833*64 + 0.002083*1024 = 2.29968
    x = np.linspace(2, 8, 6001)
    assert np.max(np.abs(taylor_sigmoid(x) - _sigmoid(x))) >= 2.29968 - 1 > 1


def test_fast_sigmoid_formula():
    # 0.5 (x / (1 + |x|) + 1): at 1 -> 0.75, at -3 -> 0.125, at 2 -> 5/6 (error 0.0475)
    assert fast_sigmoid([1.0, -3.0]).tolist() == [0.75, 0.125]
    assert abs(float(fast_sigmoid(2.0)) - 5 / 6) < 1e-7
    x = np.linspace(-8, 8, 16001)
    assert np.max(np.abs(fast_sigmoid(x) - _sigmoid(x))) >= 5 / 6 - float(_sigmoid(2.0)) - 1e-7


def test_error_table_covers_every_approach_and_range():
    rows = sigmoid_errors(2001)
    assert {(r.approach, r.range) for r in rows} == {
        (a, r) for a in ("fast", "taylor", "table")
        for r in ("[-2, 2]", "[-8, -2] u [2, 8]", "[-8, 8]", "[-100, 100]")}
    by = {(r.approach, r.range): r for r in rows}
    assert by["table", "[-100, 100]"].max_abs <= 0.0031
    assert by["taylor", "[-2, 2]"].max_abs < by["fast", "[-2, 2]"].max_abs
    assert by["taylor", "[-8, -2] u [2, 8]"].max_abs > 1
    assert all(r.mean_abs <= r.max_abs for r in rows)
    text = format_errors(rows)
    assert text.splitlines()[0].split()[0] == "approach" and len(text.splitlines()) == 4
    assert "taylor" in text and "[-100, 100]" in text
