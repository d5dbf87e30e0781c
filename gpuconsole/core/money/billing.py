"""Billing spans into dollars, the way EC2 bills Linux instances: per second, at least a minute
each time an instance starts, the price of each span for the seconds within it."""

from __future__ import annotations

import math
from collections.abc import Sequence
from operator import attrgetter

from gpuconsole.model import BillingSpan

MIN_BILLED_S = 60.0  # EC2 Linux: per-second billing, at least a minute each time it starts
_EPS = 1e-6  # float noise in timestamps: 61.0 s computed as 60.9999999 is still 61 s
_START = attrgetter("start")


def billed_cost(spans: Sequence[BillingSpan], start: float, end: float, *, per_ms: bool = False) -> float:
    """Dollars billed for ``spans`` within the window ``[start, end)``.

    Spans that touch (one's start is the previous one's end) form one *run*: an instance that
    started and kept running, through state changes or spot price changes. Each run is billed
    per second, partial seconds dropped (61.5 s bills 61 s), and never less than 60 seconds:
    a stop and a start begin a new run and a new minimum. A span still open (``end`` None)
    runs to the window's end.

    Within a run each second costs the price of the span it falls in. The minimum belongs to
    the run's first minute: a 30-second run is billed as ``[run start, run start + 60 s)`` at
    its last price, and a window sees the part of that minute it contains. Dropped partial
    seconds come off the run's end. So windows add up: the cost of ``[a, b)`` plus ``[b, c)`` is
    the cost of ``[a, c)``.

    Args:
        spans: billed intervals, any order.
        per_ms: bill per millisecond with no minimum (serverless GPU offers).
    """
    if end <= start or not spans:
        return 0.0
    ordered = spans
    for k in range(1, len(spans)):
        if spans[k].start < spans[k - 1].start:
            ordered = sorted(spans, key=_START)
            break
    n = len(ordered)
    # where each span ends: its end, else the next span's start, else the window's end
    ends = [s.end if s.end is not None else (ordered[k + 1].start if k + 1 < n else max(s.start, end))
            for k, s in enumerate(ordered)]
    total = 0.0
    k = 0
    while k < n:
        first = k
        run_start = ordered[k].start
        run_end = ends[k]
        k += 1
        while k < n and ordered[k].start <= run_end + _EPS:
            run_end = max(run_end, ends[k])
            k += 1
        raw = max(0.0, run_end - run_start)
        if per_ms:
            billed_end = run_start + math.floor(raw * 1000.0 + _EPS) / 1000.0
        else:
            billed_end = run_start + max(MIN_BILLED_S, float(math.floor(raw + _EPS)))
        if billed_end <= start or run_start >= end:
            continue  # the run is outside the window
        for m in range(first, k):
            seconds = min(ends[m], billed_end, end) - max(ordered[m].start, start)
            if seconds > 0:
                total += ordered[m].price_per_hour * seconds / 3600.0
        if billed_end > run_end:  # the rest of the first minute, at the run's last price
            seconds = min(billed_end, end) - max(run_end, start)
            if seconds > 0:
                total += ordered[k - 1].price_per_hour * seconds / 3600.0
    return total


def spent_by(spans: Sequence[BillingSpan], start: float, now: float) -> float:
    """Dollars spent on ``spans`` from ``start`` until ``now``: :func:`billed_cost`, with the
    whole first minute of a run still open counted as soon as it starts (a window that ends
    before that run began is not stretched into it)."""
    minimum_end = _minimum_end(spans)
    if minimum_end - MIN_BILLED_S <= now < minimum_end:
        now = minimum_end
    return billed_cost(spans, start, now)


def _minimum_end(spans: Sequence[BillingSpan]) -> float:
    """Where the first minute of a run still open ends: a run started seconds ago has already
    spent its minimum (EC2 bills it whatever happens next); -inf when no run is open."""
    if not spans or spans[-1].end is not None:
        return float("-inf")
    k = len(spans) - 1
    while k > 0 and spans[k - 1].end is not None and spans[k].start <= spans[k - 1].end + _EPS:
        k -= 1
    return spans[k].start + MIN_BILLED_S
