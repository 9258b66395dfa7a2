"""``npukit.measure.interleaved``: every case once per round in a rotating order after one
warm-up round; each case's median, lowest and highest time (on a clock the cases advance)."""

import npukit.measure as measure


def test_rounds_rotate_and_spreads_are_the_rounds_median_low_high(monkeypatch):
    now = [0.0]
    monkeypatch.setattr(measure.time, "perf_counter", lambda: now[0])
    calls = []
    # Seconds each call of a case takes; the first call is the warm-up round's (not counted).
    costs = {"a": iter([100, 3, 1, 2, 9, 4]), "b": iter([100, 5, 5, 5, 5, 6]),
             "c": iter([100, 1, 1, 1, 1, 1])}

    def case(name):
        def run():
            calls.append(name)
            now[0] += next(costs[name])
        return run

    s = measure.interleaved({k: case(k) for k in "abc"}, 5)
    assert calls == list("cab" + "abc" + "bca" + "cab" + "abc" + "bca")
    assert s["a"] == measure.Spread(3, 1, 9)
    assert s["b"] == measure.Spread(5, 5, 6)
    assert s["c"] == measure.Spread(1, 1, 1)
    assert s["a"].ms() == "3e+03 ms (1e+03-9e+03)"
    assert measure.Spread(0.00215, 0.002, 0.0031).ms() == "2.15 ms (2-3.1)"
