"""What AWS says about past and billed usage: CloudTrail's instance events, EBS volumes, and Cost
Explorer's resource-level daily cost. Thin translators from one client's answers to plain values;
:class:`~gpuconsole.backends.aws.source.AwsCloud` hands them their clients and maps errors.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from gpuconsole.backends.aws.mapping import COST_METRIC, cost_period
from gpuconsole.model import Volume

# CloudTrail events that start billing an instance, and those that end it. A spot interruption
# is recorded by EC2 itself as ``BidEvictedEvent``.
STARTS = frozenset({"RunInstances", "StartInstances"})
ENDS = frozenset({"StopInstances", "TerminateInstances", "BidEvictedEvent"})
TRAIL_DAYS = 90  # what LookupEvents keeps
MAX_PAGES = 20
# Resource-level costs of instances (compute) and of their volumes (EBS sits in "EC2 - Other").
EC2_SERVICES = ("Amazon Elastic Compute Cloud - Compute", "EC2 - Other")


def _posix(value: Any) -> float:
    if isinstance(value, datetime):
        return (value if value.tzinfo else value.replace(tzinfo=UTC)).timestamp()
    return float(value)


def _pages(client: Any, operation: str, params: dict[str, Any], token_key: str = "NextToken") -> list[dict[str, Any]]:
    """Every page of ``operation`` (at most :data:`MAX_PAGES`), following ``token_key``."""
    pages: list[dict[str, Any]] = []
    token = None
    for _ in range(MAX_PAGES):
        page = getattr(client, operation)(**params, **({token_key: token} if token else {}))
        pages.append(page)
        token = page.get(token_key)
        if not token:
            break
    return pages


def trail_events(cloudtrail: Any, instance_id: str, since: float, until: float) -> tuple[tuple[float, bool], ...]:
    """The instance's starts (True) and ends (False) CloudTrail recorded in ``[since, until)``,
    oldest first; calls that failed (an ``errorCode`` in the record) are left out."""
    params = {
        "LookupAttributes": [{"AttributeKey": "ResourceName", "AttributeValue": instance_id}],
        "StartTime": datetime.fromtimestamp(since, UTC),
        "EndTime": datetime.fromtimestamp(until, UTC),
    }
    events: list[tuple[float, bool]] = []
    for page in _pages(cloudtrail, "lookup_events", params):
        for event in page.get("Events", ()):
            name = event.get("EventName", "")
            if name not in STARTS and name not in ENDS:
                continue
            try:
                record = json.loads(event.get("CloudTrailEvent") or "{}")
            except ValueError:
                record = {}
            if isinstance(record, Mapping) and record.get("errorCode"):
                continue
            events.append((_posix(event["EventTime"]), name in STARTS))
    return tuple(sorted(events))


def volume(raw: Mapping[str, Any]) -> Volume:
    """One ``DescribeVolumes`` entry → :class:`Volume` (attached to its first attachment's instance)."""
    attached = [a.get("InstanceId") for a in raw.get("Attachments") or () if a.get("InstanceId")]
    return Volume(
        volume_id=raw["VolumeId"],
        volume_type=raw.get("VolumeType", "gp2"),
        size_gib=int(raw.get("Size", 0)),
        created=_posix(raw["CreateTime"]),
        availability_zone=raw.get("AvailabilityZone", ""),
        iops=int(raw.get("Iops") or 0),
        throughput=int(raw.get("Throughput") or 0),
        instance_id=attached[0] if attached else None,
    )


def volumes(ec2: Any) -> tuple[Volume, ...]:
    raws = [v for page in ec2.get_paginator("describe_volumes").paginate() for v in page.get("Volumes", ())]
    return tuple(sorted((volume(r) for r in raws), key=lambda v: v.volume_id))


def resource_costs(ce: Any, start: float, end: float) -> tuple[tuple[str, str, float], ...]:
    """``(resource id, UTC day, dollars)`` of EC2 instances and volumes from Cost Explorer's
    resource-level daily cost (``GetCostAndUsageWithResources``: the last 14 days at most,
    where the account has opted in)."""
    params = {
        "TimePeriod": cost_period(start, end),
        "Granularity": "DAILY",
        "Metrics": [COST_METRIC],
        "Filter": {"Dimensions": {"Key": "SERVICE", "Values": list(EC2_SERVICES)}},
        "GroupBy": [{"Type": "DIMENSION", "Key": "RESOURCE_ID"}],
    }
    rows: dict[tuple[str, str], float] = {}
    for page in _pages(ce, "get_cost_and_usage_with_resources", params, "NextPageToken"):
        for result in page.get("ResultsByTime", ()):
            day = result["TimePeriod"]["Start"]
            for group in result.get("Groups", ()):
                resource = (group.get("Keys") or [""])[0]
                amount = float(group["Metrics"][COST_METRIC]["Amount"])
                rows[(resource, day)] = rows.get((resource, day), 0.0) + amount
    return tuple(sorted((r, d, a) for (r, d), a in rows.items()))
