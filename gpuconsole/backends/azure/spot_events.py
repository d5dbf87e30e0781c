"""Spot eviction notices from Azure's Scheduled Events, where they are visible.

Scheduled Events are read from inside an Azure VM (the instance metadata service,
``http://169.254.169.254/metadata/scheduledevents?api-version=2020-07-01`` with the header
``Metadata: true``); a ``Preempt`` event names the Spot VMs about to be evicted, at least 30
seconds ahead (``NotBefore``) (https://learn.microsoft.com/azure/virtual-machines/linux/scheduled-events).
gpuconsole reads them only when ``[azure] scheduled_events`` names that URL: nothing probes the
metadata address by itself. Elsewhere an eviction shows in the VM's state: deallocated, or gone
(its eviction policy).
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger(__name__)
TIMEOUT_S = 2.0


def notices(body: dict[str, Any]) -> dict[str, str]:
    """VM name → the eviction notice's line, for each ``Preempt`` event of a Scheduled Events answer."""
    out: dict[str, str] = {}
    for event in body.get("Events") or ():
        if not isinstance(event, dict) or event.get("EventType") != "Preempt":
            continue
        when = str(event.get("NotBefore") or "").strip()
        line = "Spot VM eviction notice (Scheduled Events Preempt" + (f", not before {when})" if when else ")")
        for name in event.get("Resources") or ():
            out[str(name)] = line
    return out


def preempted(url: str) -> dict[str, str]:
    """:func:`notices` read from ``url``; ``{}`` when it cannot be read (the VM state still tells)."""
    import requests

    try:
        answer = requests.get(url, headers={"Metadata": "true"}, timeout=TIMEOUT_S)
        answer.raise_for_status()
        body = answer.json()
    except (requests.RequestException, ValueError) as exc:
        log.info("Scheduled Events unavailable: %s", str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        return {}
    return notices(body) if isinstance(body, dict) else {}
