"""What Azure billed each virtual machine per day, and when each ran, in the documented shapes.

- The bill: ``POST /subscriptions/{id}/providers/Microsoft.CostManagement/query`` (api-version
  2023-11-01) with an ``ActualCost`` dataset of ``Daily`` granularity, the ``Cost`` summed and
  grouped by ``ResourceId``, filtered to ``microsoft.compute/virtualmachines``; the answer is a
  table (``properties.columns`` name each cell of ``properties.rows``: ``Cost``, ``UsageDate`` as
  ``yyyymmdd``, ``ResourceId`` lower-cased, ``Currency``), paged by ``properties.nextLink``. A
  VM's disks and network bill under their own resources and are not counted here. Reading it
  needs the Cost Management Reader role (or Reader) on the subscription; Azure's RBAC decides.
- The runs: the subscription's Activity Log (``GET /subscriptions/{id}/providers/
  microsoft.insights/eventtypes/management/values``, api-version 2015-04-01, ``$filter`` on
  ``eventTimestamp`` and ``resourceUri``, paged by ``nextLink``, kept 90 days). A VM's compute
  bills from its creation (a ``write`` answered ``Created``) or a ``start`` until a
  ``deallocate`` or its ``delete``; a ``powerOff`` does not end it (the VM keeps its hardware
  and bills on). Only operations that ``Succeeded`` count.
"""

from __future__ import annotations

import calendar
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from gpuconsole.backends.base import BackendError

API_VERSION = "2023-11-01"
ACTIVITY_API = "2015-04-01"
MAX_PAGES = 50
Post = Callable[[str, dict[str, Any]], Any]  # (URL, body) → the decoded answer
Get = Callable[[str], Any]  # URL → the decoded answer
VM_OPERATION = "microsoft.compute/virtualmachines/"
STARTS = frozenset({"start/action"})
ENDS = frozenset({"deallocate/action", "delete"})


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
        if not {"cost", "resourceid", "usagedate"} <= where.keys():
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


def vm_runs(get: Get, arm_endpoint: str, subscription: str, vm_id: str, since: float,
            until: float) -> tuple[tuple[float, bool], ...]:
    """The VM's billing starts (True) and ends (False) the Activity Log holds in ``[since, until]``."""
    from urllib.parse import quote

    flt = (f"eventTimestamp ge '{_iso(since)}' and eventTimestamp le '{_iso(until)}' "
           f"and resourceUri eq '{vm_id}'")
    url = (f"{arm_endpoint.rstrip('/')}/subscriptions/{subscription}/providers/microsoft.insights/eventtypes/"
           f"management/values?api-version={ACTIVITY_API}&$filter={quote(flt)}")
    events: set[tuple[float, bool]] = set()
    for _ in range(MAX_PAGES):
        answer = get(url)
        if not isinstance(answer, Mapping) or not isinstance(answer.get("value", []), list):
            raise BackendError("the Azure Activity Log answered something that is not a list of events")
        for event in answer.get("value") or ():
            found = _run_event(event)
            if found is not None:
                events.add(found)
        url = str(answer.get("nextLink") or "")
        if not url:
            break
    return tuple(sorted(events))


def _run_event(event: Any) -> tuple[float, bool] | None:
    """``(time, starts)`` of a succeeded create, start, deallocate or delete; None for others."""
    if not isinstance(event, Mapping) or str((event.get("status") or {}).get("value", "")).lower() != "succeeded":
        return None
    operation = str((event.get("operationName") or {}).get("value", "")).lower()
    if not operation.startswith(VM_OPERATION):
        return None
    verb = operation.removeprefix(VM_OPERATION)
    created = verb == "write" and str((event.get("subStatus") or {}).get("value", "")).lower() == "created"
    if verb not in STARTS and verb not in ENDS and not created:
        return None
    try:
        when = datetime.fromisoformat(str(event.get("eventTimestamp", ""))).timestamp()
    except ValueError:
        return None
    return when, verb not in ENDS


def _iso(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


def _day(value: Any) -> str:
    """``20261201`` (a number, as the API sends it) or an ISO date → ``2026-12-01``; "" otherwise."""
    text = str(int(value)) if isinstance(value, (int, float)) else str(value)[:10]
    try:
        return time.strftime("%Y-%m-%d", time.gmtime(calendar.timegm(time.strptime(text.replace("-", ""), "%Y%m%d"))))
    except ValueError:
        return ""
