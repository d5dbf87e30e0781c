"""CloudTrail ``LookupEvents`` and Cost Explorer ``GetCostAndUsageWithResources`` for the AWS test
peer: moto has neither, so :class:`BillingPeer` answers them beside it, through the fault proxy's
``serve`` hook, in the shapes the real APIs answer (JSON protocol, ``X-Amz-Target``
``com.amazonaws.cloudtrail.v20131101.CloudTrail_20131101.LookupEvents`` and
``AWSInsightsIndexService.GetCostAndUsageWithResources``), so botocore parses them for real.

Fixture: ``billing_peer`` (function): an :class:`BillingPeer` installed on ``aws_peer``'s proxy.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any

import pytest

from tests.aws_peer import AwsPeer, RecordedRequest

ACCOUNT = "123456789012"


@dataclass
class BillingPeer:
    """What CloudTrail recorded and what Cost Explorer billed, as a test arranges them."""

    events: dict[str, list[tuple[str, float]]] = field(default_factory=dict)  # instance id → (name, when)
    costs: list[tuple[str, str, float]] = field(default_factory=list)  # (resource id, day, dollars)
    trail_refusal: str = ""  # an error code CloudTrail answers with (e.g. AccessDeniedException)

    def record(self, instance_id: str, name: str, when: float) -> None:
        self.events.setdefault(instance_id, []).append((name, when))

    def bill(self, resource_id: str, day: str, amount: float) -> None:
        self.costs.append((resource_id, day, amount))

    # ---------------------------------------------------------------- the protocol
    def serve(self, request: RecordedRequest) -> tuple[int, dict[str, Any]] | None:
        if request.service == "cloudtrail" and request.action == "LookupEvents":
            if self.trail_refusal:
                return 400, {"__type": self.trail_refusal,
                             "Message": "User is not authorized to perform: cloudtrail:LookupEvents"}
            return 200, self._lookup_events(request.params)
        if request.service == "ce" and request.action == "GetCostAndUsageWithResources":
            return 200, self._costs_with_resources(request.params)
        return None

    def _lookup_events(self, params: dict[str, Any]) -> dict[str, Any]:
        wanted = {a["AttributeValue"] for a in params.get("LookupAttributes", ()) if a["AttributeKey"] == "ResourceName"}
        start, end = float(params.get("StartTime", 0)), float(params.get("EndTime", 4e9))
        found = [(iid, name, when) for iid, events in self.events.items() if iid in wanted
                 for name, when in events if start <= when <= end]
        found.sort(key=lambda e: -e[2])  # newest first, as CloudTrail lists them
        return {"Events": [self._event(iid, name, when) for iid, name, when in found]}

    @staticmethod
    def _event(instance_id: str, name: str, when: float) -> dict[str, Any]:
        event_id = str(uuid.uuid4())
        record = {
            "eventVersion": "1.09", "eventTime": when, "eventSource": "ec2.amazonaws.com", "eventName": name,
            "awsRegion": "us-east-1", "sourceIPAddress": "203.0.113.7", "eventID": event_id,
            "userIdentity": {"type": "IAMUser", "accountId": ACCOUNT, "userName": "alice"},
            "requestParameters": {"instancesSet": {"items": [{"instanceId": instance_id}]}},
            "readOnly": False, "eventType": "AwsApiCall", "recipientAccountId": ACCOUNT,
        }
        return {
            "EventId": event_id, "EventName": name, "ReadOnly": "false", "AccessKeyId": "AKIDEXAMPLE",
            "EventTime": when, "EventSource": "ec2.amazonaws.com", "Username": "alice",
            "Resources": [{"ResourceType": "AWS::EC2::Instance", "ResourceName": instance_id}],
            "CloudTrailEvent": json.dumps(record),
        }

    def _costs_with_resources(self, params: dict[str, Any]) -> dict[str, Any]:
        period = params["TimePeriod"]
        days = sorted({day for _, day, _ in self.costs if period["Start"] <= day < period["End"]})
        results = []
        for day in days:
            groups = [{"Keys": [resource], "Metrics": {"UnblendedCost": {"Amount": f"{amount:.10f}", "Unit": "USD"}}}
                      for resource, d, amount in self.costs if d == day]
            following = (date.fromisoformat(day) + timedelta(days=1)).isoformat()
            results.append({"TimePeriod": {"Start": day, "End": following}, "Total": {}, "Groups": groups, "Estimated": False})
        return {"GroupDefinitions": [{"Type": "DIMENSION", "Key": "RESOURCE_ID"}], "ResultsByTime": results,
                "DimensionValueAttributes": []}


@pytest.fixture
def billing_peer(aws_peer: AwsPeer) -> Iterator[BillingPeer]:
    peer = BillingPeer()
    aws_peer.proxy.serve = peer.serve
    yield peer
    aws_peer.proxy.serve = None
