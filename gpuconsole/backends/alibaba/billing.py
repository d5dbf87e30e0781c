"""Alibaba Cloud's bill and run history, in the documented shapes.

- What each instance cost per day: BSS OpenAPI ``DescribeInstanceBill`` (version 2017-12-14,
  ``Granularity=DAILY`` with a ``BillingDate``, paged by ``NextToken``), ``PretaxAmount`` in the
  account's currency (https://www.alibabacloud.com/help/en/bss-openapi/developer-reference/api-bssopenapi-2017-12-14-describeinstancebill).
- When it ran: ActionTrail ``LookupEvents`` (version 2020-07-06) on the instance's
  ``ResourceName``: its RunInstances and StartInstance calls start a run, StopInstance and
  DeleteInstance end one; a call that failed (``errorCode``) is left out, as CloudTrail's are.
"""

from __future__ import annotations

import calendar
import time
from collections.abc import Callable
from typing import Any

STARTS = frozenset({"RunInstances", "CreateInstance", "StartInstance", "StartInstances"})
ENDS = frozenset({"StopInstance", "StopInstances", "DeleteInstance", "DeleteInstances"})
MAX_PAGES = 100
Call = Callable[[str, dict[str, str]], dict[str, Any]]


def _day(ts: float) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(ts))


def _rows(data: Any) -> list[dict[str, Any]]:
    items = (data or {}).get("Items")
    if isinstance(items, dict):  # some answers wrap arrays once more ({"Item": [...]})
        items = items.get("Item")
    return [x for x in (items or []) if isinstance(x, dict)]


def bill_rows(call: Call, start: float, end: float) -> tuple[tuple[str, str, float], ...]:
    """``(instance id, UTC day, amount)`` of ECS instances for each whole day in ``[start, end)``."""
    rows: dict[tuple[str, str], float] = {}
    day = calendar.timegm(time.strptime(_day(start), "%Y-%m-%d"))
    while day < end:
        date, token = _day(day), ""
        for _ in range(MAX_PAGES):
            query = {"BillingCycle": date[:7], "Granularity": "DAILY", "BillingDate": date, "ProductCode": "ecs",
                     "MaxResults": "300", **({"NextToken": token} if token else {})}
            data = call("DescribeInstanceBill", query).get("Data") or {}
            for item in _rows(data):
                key = (str(item.get("InstanceID", "")), str(item.get("BillingDate") or date))
                rows[key] = rows.get(key, 0.0) + float(item.get("PretaxAmount") or 0.0)
            token = str(data.get("NextToken") or "")
            if not token:
                break
        day += 86400
    return tuple(sorted((i, d, round(a, 6)) for (i, d), a in rows.items() if i))


def _iso(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


def trail_events(call: Call, instance_id: str, since: float, until: float) -> tuple[tuple[float, bool], ...]:
    """The instance's starts (True) and ends (False) ActionTrail recorded in ``[since, until)``."""
    events: list[tuple[float, bool]] = []
    token = ""
    for _ in range(MAX_PAGES):
        query = {"LookupAttribute.1.Key": "ResourceName", "LookupAttribute.1.Value": instance_id,
                 "StartTime": _iso(since), "EndTime": _iso(until), "MaxResults": "50",
                 **({"NextToken": token} if token else {})}
        body = call("LookupEvents", query)
        for event in body.get("Events") or ():
            name = str(event.get("eventName", ""))
            if name not in STARTS and name not in ENDS or event.get("errorCode"):
                continue
            try:
                at = float(calendar.timegm(time.strptime(str(event.get("eventTime", ""))[:19], "%Y-%m-%dT%H:%M:%S")))
            except ValueError:
                continue
            if since <= at < until:
                events.append((at, name in STARTS))
        token = str(body.get("NextToken") or "")
        if not token:
            break
    return tuple(sorted(events))
