"""Money in more than one currency: each cloud bills in its account's own (an AWS account in US
dollars, an Alibaba Cloud account on the China site in yuan), and a sum never adds two currencies.

``[money] rates`` in the configuration file says what one unit of a currency is worth in US
dollars::

    [money]
    rates = { CNY = 0.138, EUR = 1.08 }

With a rate for both sides, an instance's prices and cost are converted; without, its spend is
left out of the total, and the total says so (:func:`convert`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import msgspec

from gpuconsole.model import Instance

BASE = "USD"
Rates = tuple[tuple[str, float], ...]


def factor(source: str, target: str, rates: Mapping[str, float]) -> float | None:
    """How many units of ``target`` one unit of ``source`` is worth; None when unknown."""
    if source == target:
        return 1.0
    known = {BASE: 1.0, **rates}
    if source in known and target in known and known[target] > 0:
        return known[source] / known[target]
    return None


def in_currency(instance: Instance, target: str, rate: float) -> Instance:
    """``instance`` with its prices and cost in ``target`` (``rate``: target units per unit)."""
    if instance.currency == target:
        return instance
    spans = tuple(msgspec.structs.replace(s, price_per_hour=s.price_per_hour * rate) for s in instance.billing)
    return msgspec.structs.replace(instance, currency=target, price_per_hour=instance.price_per_hour * rate,
                                   accrued_cost=instance.accrued_cost * rate, billing=spans)


def convert(instances: Iterable[Instance], target: str, rates: Rates | Mapping[str, float] = ()
            ) -> tuple[list[Instance], str]:
    """The instances whose money can be counted in ``target`` (converted), and a line naming the
    spend left out (``""`` when none is)."""
    table = dict(rates)
    counted: list[Instance] = []
    left: dict[str, int] = {}
    for instance in instances:
        rate = factor(instance.currency, target, table)
        if rate is None:
            left[instance.currency] = left.get(instance.currency, 0) + 1
        else:
            counted.append(in_currency(instance, target, rate))
    return counted, left_out_line(left)


def left_out_line(left: Mapping[str, int]) -> str:
    if not left:
        return ""
    parts = [f"{n} instance{'s' if n != 1 else ''} billed in {code}" for code, n in sorted(left.items())]
    return f"leaves out {', '.join(parts)} (no [money] rates for {', '.join(sorted(left))})"


def currencies(instances: Sequence[Instance]) -> tuple[str, ...]:
    """The currencies the instances bill in, the base first."""
    found = {i.currency for i in instances}
    return tuple(sorted(found, key=lambda c: (c != BASE, c)))
