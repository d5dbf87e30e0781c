"""The text of a describe: an object as YAML, then its events as ``kubectl describe`` lists them.

Shared by the Kubernetes adapter and the simulator, so both faces of the jobs interface read the
same way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

MAX_EVENTS = 20


@dataclass(frozen=True, slots=True)
class EventLine:
    """One event about an object (or about one of a Job's pods)."""

    type: str  # Normal / Warning
    reason: str
    at: float | None  # when it last happened
    source: str  # the component that reported it
    message: str
    count: int = 1
    about: str = ""  # "pod/<name>" when it is about a pod of the object


def short_age(seconds: float) -> str:
    s = max(0, int(seconds))
    if s < 120:
        return f"{s}s"
    if s < 7200:
        return f"{s // 60}m"
    if s < 2 * 86400:
        return f"{s // 3600}h"
    return f"{s // 86400}d"


def object_yaml(obj: Mapping[str, Any]) -> str:
    """The object as YAML, without the bookkeeping nobody reads (``managedFields``)."""
    doc = dict(obj)
    meta = doc.get("metadata")
    if isinstance(meta, Mapping):
        doc["metadata"] = {k: v for k, v in meta.items() if k != "managedFields"}
    import yaml  # only when YAML is shown: it is not needed to start

    return yaml.safe_dump(doc, sort_keys=False, default_flow_style=False, width=100).rstrip()


def describe_text(obj: Mapping[str, Any], events: Sequence[EventLine], now: float) -> str:
    """YAML, a blank line, then ``Events:`` with the most recent :data:`MAX_EVENTS`, oldest first.

    Each event takes two lines, what happened and then its message, so a scheduler's long
    explanation reads whole on an 80-column terminal::

          Warning  FailedScheduling  12s ago  default-scheduler
            pod/train-a-x7k2p: 0/4 nodes are available: 4 Insufficient nvidia.com/gpu.
    """
    lines = [object_yaml(obj), "", "Events:"]
    recent = sorted(events, key=lambda e: e.at or 0.0)[-MAX_EVENTS:]
    if not recent:
        lines.append("  <none>")
        return "\n".join(lines)
    rows = []
    for event in recent:
        when = f"{short_age(now - event.at)} ago" if event.at is not None else "-"
        if event.count > 1:
            when = f"{when} (x{event.count})"
        rows.append((event.type, event.reason, when, event.source))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for event, row in zip(recent, rows, strict=True):
        lines.append("  " + "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip())
        about = f"{event.about}: " if event.about else ""
        lines.append(f"    {about}{' '.join(event.message.split())}")
    return "\n".join(lines)
