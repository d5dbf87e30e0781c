"""What Azure billed each virtual machine per day: the Cost Management Query API, in its documented shapes.

``POST /subscriptions/{id}/providers/Microsoft.CostManagement/query`` (api-version 2023-11-01)
with an ``ActualCost`` dataset of ``Daily`` granularity, the ``Cost`` summed and grouped by
``ResourceId``, filtered to ``microsoft.compute/virtualmachines``; the answer is a table
(``properties.columns`` name each cell of ``properties.rows``: ``Cost``, ``UsageDate`` as
``yyyymmdd``, ``ResourceId`` lower-cased, ``Currency``), paged by ``properties.nextLink``. A VM's
disks and network bill under their own resources and are not counted here. Reading it needs the
Cost Management Reader role (or Reader) on the subscription; Azure's RBAC decides.
"""

from __future__ import annotations

import calendar
import time
from collections.abc import Callable, Mapping
from typing import Any

from gpuconsole.backends.base import BackendError

API_VERSION = "2023-11-01"
MAX_PAGES = 50
Post = Callable[[str, dict[str, Any]], Any]  # (URL, body) → the decoded answer


def query_body(start: float, end: float) -> dict[str, Any]:
    """The ``QueryDefinition``: each VM's actual cost per day from ``start`` to ``end``."""
    return {
        "type": "ActualCost",
        "timeframe": "Custom",
        "timePeriod": {"from": _iso(start), "to": _iso(end)},
        "dataset": {
            "granularity": "Daily",
            "aggregation": {"totalCost": {"name": "Cost", "function": "Sum"}},
            "grouping": [{"type": "Dimension", "name": "ResourceId"}],
            "filter": {"dimensions": {"name": "ResourceType", "operator": "In",
                                      "values": ["microsoft.compute/virtualmachines"]}},
        },
    }


def vm_costs(post: Post, arm_endpoint: str, subscription: str, start: float, end: float,
             currency: str = "USD") -> tuple[tuple[str, str, float], ...]:
    """``(VM resource id, UTC day, amount)`` in ``currency`` for each day from ``start`` to ``end``.

    Raises:
        BackendError: an answer that is not the documented table, or a bill in another currency.
    """
    url = (f"{arm_endpoint.rstrip('/')}/subscriptions/{subscription}/providers/Microsoft.CostManagement/query"
           f"?api-version={API_VERSION}")
    body = query_body(start, end)
    rows: dict[tuple[str, str], float] = {}
    for _ in range(MAX_PAGES):
        answer = post(url, body)
        props = answer.get("properties") if isinstance(answer, Mapping) else None
        if not isinstance(props, Mapping) or not isinstance(props.get("columns"), list):
            raise BackendError("Azure Cost Management answered something that is not a query result")
        names = [str(c.get("name", "")).lower() for c in props["columns"] if isinstance(c, Mapping)]
        where = {name: names.index(name) for name in ("cost", "usagedate", "resourceid", "currency") if name in names}
        if len(where) < 3 or "cost" not in where or "resourceid" not in where or "usagedate" not in where:
            raise BackendError(f"Azure Cost Management's answer lacks a column it was asked for: {', '.join(names)}")
        for row in props.get("rows") or ():
            if not isinstance(row, list) or len(row) < len(names):
                continue
            billed = str(row[where["currency"]]) if "currency" in where else currency
            if billed.upper() != currency:
                raise BackendError(f"Azure bills this subscription in {billed}: billed spend is read in {currency} only")
            key = (str(row[where["resourceid"]]), _day(row[where["usagedate"]]))
            rows[key] = rows.get(key, 0.0) + float(row[where["cost"]] or 0.0)
        url = str(props.get("nextLink") or "")
        if not url:
            break
    return tuple(sorted((rid, day, round(amount, 6)) for (rid, day), amount in rows.items() if rid and day))


def _iso(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


def _day(value: Any) -> str:
    """``20261201`` (a number, as the API sends it) or an ISO date → ``2026-12-01``; "" otherwise."""
    text = str(int(value)) if isinstance(value, (int, float)) else str(value)[:10]
    try:
        return time.strftime("%Y-%m-%d", time.gmtime(calendar.timegm(time.strptime(text.replace("-", ""), "%Y%m%d"))))
    except ValueError:
        return ""
