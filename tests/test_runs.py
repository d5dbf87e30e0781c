"""Runs rebuilt from state histories and priced from spot price series, checked against a biller
written here from EC2's rules alone: second by second, at least a minute per run, each second
at the price in force, nothing while stopped."""

from __future__ import annotations

from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from gpuconsole.core.money.costs import billed_cost
from gpuconsole.core.money.runs import billing_spans, runs_from_events
from gpuconsole.core.money.storage import month_price, volume_cost
from gpuconsole.model import Volume

T0 = 1_700_000_000  # a whole second


def reference_bill(history: list[tuple[int, bool]], prices: list[tuple[int, float]], default: float,
                   window: tuple[float, float]) -> Fraction:
    """EC2's rules, one second at a time. ``history``: alternating start / stop moments (a start
    first); ``prices``: (from, $/h) sorted by time."""
    def price(second: int) -> Fraction:
        current = Fraction(default)
        for ts, p in prices:
            if ts <= second:
                current = Fraction(p)
        return current

    lo, hi = window
    total = Fraction(0)
    moments = [ts for ts, _ in history]
    pairs = [(moments[k], moments[k + 1] if k + 1 < len(moments) else hi) for k in range(0, len(moments), 2)]
    for start, end in pairs:
        duration = int(end - start)  # partial seconds are dropped
        last = price(int(end) - 1) if end > start else price(start)
        for second in range(start, start + max(60, duration)):
            if lo <= second < hi:
                total += (price(second) if second < end else last) / 3600
    return total


@st.composite
def histories(draw: st.DrawFn) -> tuple[list[tuple[int, bool]], list[tuple[int, float]], float, int]:
    """Alternating start / stop moments with gaps of 1 s to 2 h, a spot price series over the same
    time, an on-demand price, and the moment it is billed at."""
    n = draw(st.integers(1, 8))
    gaps = draw(st.lists(st.integers(1, 7200), min_size=n, max_size=n))
    at, history = T0, []
    for k, gap in enumerate(gaps):
        at += gap
        history.append((at, k % 2 == 0))
    now = at + draw(st.integers(0, 600))
    changes = draw(st.lists(st.tuples(st.integers(T0 - 600, now), st.integers(1, 4000)), max_size=12))
    prices = sorted({ts: Fraction(cents, 100) for ts, cents in changes}.items())
    default = Fraction(draw(st.integers(1, 4000)), 100)
    return history, prices, default, now


@settings(max_examples=150, deadline=None)
@given(histories(), st.data())
def test_estimate_equals_the_reference_biller_to_the_cent(case, data):
    history, prices, default, now = case
    runs = runs_from_events(history, since=T0 - 86400)
    spans = billing_spans(runs, [(ts, float(p)) for ts, p in prices], float(default))
    lo = data.draw(st.integers(T0 - 100, now))
    window = (float(lo), float(now))
    estimate = billed_cost(spans, *window)
    reference = reference_bill(history, prices, default, window)
    assert abs(Fraction(estimate) - reference) < Fraction(1, 10_000), "equal to the cent, a float's noise apart"


def test_a_history_that_begins_mid_run_starts_at_the_lookup_window():
    assert runs_from_events([(500.0, False), (900.0, True)], since=100.0) == ((100.0, 500.0), (900.0, None))


def test_a_start_seen_twice_is_one_run():
    assert runs_from_events([(100.0, True), (130.0, True), (200.0, False), (200.0, False)], since=0.0) == ((100.0, 200.0),)


def test_a_stop_and_a_start_begin_a_new_minimum():
    spans = billing_spans(runs_from_events([(0.0, True), (10.0, False), (20.0, True), (30.0, False)], 0.0), (), 36.0)
    assert billed_cost(spans, 0.0, 1000.0) == 2 * 60 * 36.0 / 3600.0


def test_volume_prices_by_type():
    gp3 = Volume("vol-1", "gp3", 1000, T0, iops=4000, throughput=250)
    assert month_price(gp3) == 1000 * 0.08 + 1000 * 0.005 + 125 * 0.04
    io2 = Volume("vol-2", "io2", 100, T0, iops=40000)
    assert abs(month_price(io2) - (100 * 0.125 + 32000 * 0.065 + 8000 * 0.0455)) < 1e-9
    assert month_price(Volume("vol-3", "io1", 100, T0, iops=1000)) == 100 * 0.125 + 1000 * 0.065
    assert month_price(Volume("vol-4", "gp2", 2000, T0)) == 200.0
    # AWS's own example: 2000 GB of gp2 for 12 hours of a 30-day month (November 2026)
    nov = 1793491200.0  # 2026-11-01T00:00Z
    assert round(volume_cost(Volume("vol-5", "gp2", 2000, nov), nov, nov + 43200), 2) == 3.33
