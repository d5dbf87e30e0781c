"""An instance's runs, rebuilt from what happened to it, and priced the way EC2 prices them.

A real cloud's describe call says only how an instance is now and when it last started; the
month's earlier runs and the spot prices in force during them are gone. They come back from
history: CloudTrail's ``RunInstances`` / ``StartInstances`` / ``StopInstances`` /
``TerminateInstances`` events and spot interruptions, then what the console itself observes
between polls. This module turns such events into runs, and runs plus a price series into
:class:`~gpuconsole.model.BillingSpan` values; :func:`gpuconsole.core.money.costs.billed_cost`
then bills them, the same rules the simulated cloud's spans are billed by (per second, at
least a minute per run, each second at the price in force, nothing while stopped).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence

from gpuconsole.model import BillingSpan

Run = tuple[float, float | None]  # start, end (None: still running)
Event = tuple[float, bool]  # when, and whether billing starts (True) or ends (False) then
PricePoint = tuple[float, float]  # from when, $/h


def runs_from_events(events: Iterable[Event], since: float) -> tuple[Run, ...]:
    """The runs ``events`` describe, oldest first.

    A start while a run is open (a ``StartInstances`` on a running instance, or a start seen
    twice: once in CloudTrail, once by a poll) and an end while none is open are ignored,
    except the first end: the instance was running before the history begins, so that run
    starts at ``since``. Events at the same moment keep their order, an end before a start.
    """
    ordered = sorted(events, key=lambda e: (e[0], e[1]))
    runs: list[Run] = []
    open_at: float | None = None
    seen_any = False
    for ts, starts in ordered:
        if starts:
            if open_at is None:
                open_at = ts
        elif open_at is not None:
            runs.append((open_at, ts))
            open_at = None
        elif not seen_any and ts > since:
            runs.append((since, ts))
        seen_any = True
    if open_at is not None:
        runs.append((open_at, None))
    return tuple(runs)


def price_at(prices: Sequence[PricePoint], ts: float, default: float) -> float:
    """The price in force at ``ts``: the last point at or before it; before the first point
    (or with none), ``default``. ``prices`` is sorted by time."""
    k = bisect.bisect_right(prices, ts, key=lambda p: p[0])
    return prices[k - 1][1] if k else default


def billing_spans(runs: Iterable[Run], prices: Sequence[PricePoint] = (), default: float = 0.0) -> tuple[BillingSpan, ...]:
    """Runs split where the price changes: one span per run and price (an open run's last span
    stays open). ``prices`` (sorted by time) is a spot price series; without one every
    second costs ``default``, the catalog's on-demand price."""
    spans: list[BillingSpan] = []
    changes = [p[0] for p in prices]
    for start, end in runs:
        at = start
        price = price_at(prices, start, default)
        k = bisect.bisect_right(changes, start)
        while k < len(changes) and (end is None or changes[k] < end):
            if prices[k][1] != price:
                spans.append(BillingSpan(at, changes[k], price))
                at, price = changes[k], prices[k][1]
            k += 1
        spans.append(BillingSpan(at, end, price))
    return tuple(spans)
