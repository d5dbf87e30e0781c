"""Alibaba Cloud's bill and run history through the official SDK against the local peer: what each
instance cost per day (BSS OpenAPI DescribeInstanceBill) and when it ran (ActionTrail
LookupEvents), as AWS's Cost Explorer and CloudTrail give them."""

from __future__ import annotations

import calendar
import socket
import time

import pytest

from gpuconsole.backends.alibaba import AlibabaCloud, AlibabaSettings
from gpuconsole.model import CostLine

REGION = "cn-hangzhou"


def _ts(text: str) -> float:
    return float(calendar.timegm(time.strptime(text, "%Y-%m-%dT%H:%M:%SZ")))


@pytest.fixture
def peer(ecs):
    return ecs


@pytest.fixture
def cloud(peer):
    return AlibabaCloud(AlibabaSettings(regions=(REGION,), endpoint=peer.url))  # BSS and ActionTrail: the same peer


def _bill(instance_id: str, day: str, amount: float) -> dict:
    return {"InstanceID": instance_id, "BillingDate": day, "ProductCode": "ecs", "PretaxAmount": amount,
            "PretaxGrossAmount": amount, "Currency": "CNY", "Region": "China (Hangzhou)", "SubscriptionType": "PayAsYouGo"}


def test_what_each_instance_cost_per_day_from_the_bill(peer, cloud):
    a10 = peer.world.add("ecs.gn7i-c8g1.2xlarge")
    t4 = peer.world.add("ecs.gn6i-c4g1.xlarge")
    peer.world.bills += [_bill(a10, "2026-11-30", 357.6), _bill(a10, "2026-12-01", 357.6), _bill(t4, "2026-12-01", 90.2)]
    peer.world.bills += [_bill(f"i-bp{n:018d}", "2026-12-01", 1.0) for n in range(500, 800)]  # a second page
    rows = cloud.resource_costs(_ts("2026-11-30T00:00:00Z"), _ts("2026-12-02T00:00:00Z"))
    assert (a10, "2026-11-30", 357.6) in rows and (a10, "2026-12-01", 357.6) in rows and (t4, "2026-12-01", 90.2) in rows
    assert len(rows) == 303
    asked = [p for a, p in peer.world.calls if a == "DescribeInstanceBill"]
    assert [(p["BillingCycle"], p["BillingDate"], p.get("NextToken", "")) for p in asked] == [
        ("2026-11", "2026-11-30", ""), ("2026-12", "2026-12-01", ""), ("2026-12", "2026-12-01", "300")]
    lines = cloud.cost_and_usage(_ts("2026-12-01T00:00:00Z"), _ts("2026-12-02T00:00:00Z"))
    assert CostLine("instance", a10, 357.6) in lines and CostLine("instance", t4, 90.2) in lines


def test_when_an_instance_ran_from_actiontrail(peer, cloud):
    iid = peer.world.add("ecs.gn7i-c8g1.2xlarge")
    peer.world.trail += [
        {"resourceName": iid, "eventName": "RunInstances", "eventTime": "2026-12-01T08:00:00Z"},
        {"resourceName": iid, "eventName": "StopInstance", "eventTime": "2026-12-01T20:00:00Z"},
        {"resourceName": iid, "eventName": "StartInstance", "eventTime": "2026-12-02T08:00:00Z", "errorCode": "IncorrectInstanceStatus"},
        {"resourceName": iid, "eventName": "StartInstance", "eventTime": "2026-12-02T09:00:00Z"},
        {"resourceName": iid, "eventName": "RebootInstance", "eventTime": "2026-12-02T10:00:00Z"},
        {"resourceName": "i-bpother0000000000000", "eventName": "StopInstance", "eventTime": "2026-12-02T11:00:00Z"},
    ]
    events = cloud.instance_history(REGION, iid, _ts("2026-12-01T00:00:00Z"), _ts("2026-12-03T00:00:00Z"))
    assert events == ((_ts("2026-12-01T08:00:00Z"), True), (_ts("2026-12-01T20:00:00Z"), False),
                      (_ts("2026-12-02T09:00:00Z"), True))
    [asked] = [p for a, p in peer.world.calls if a == "LookupEvents"]
    assert (asked["LookupAttribute.1.Key"], asked["StartTime"]) == ("ResourceName", "2026-12-01T00:00:00Z")


class _TrailedCloud:
    """Another cloud with a run history of its own (as AWS's CloudTrail is)."""

    name = "aws"
    regions = ("us-east-1",)
    capabilities = frozenset()

    def __init__(self) -> None:
        self.asked: list[str] = []

    def instance_history(self, region, instance_id, since, until):
        self.asked.append(instance_id)
        return ((since, True),)


def test_a_cloud_set_asks_each_instances_own_cloud_for_its_runs(peer, cloud):
    from gpuconsole.backends.clouds import CloudSet

    ecs_id = peer.world.add("ecs.gn7i-c8g1.2xlarge")
    peer.world.trail.append({"resourceName": ecs_id, "eventName": "RunInstances", "eventTime": "2026-12-01T08:00:00Z"})
    other = _TrailedCloud()
    both = CloudSet([other, cloud])
    since, until = _ts("2026-12-01T00:00:00Z"), _ts("2026-12-02T00:00:00Z")
    assert both.instance_history(REGION, ecs_id, since, until) == ((_ts("2026-12-01T08:00:00Z"), True),)
    assert both.instance_history("us-east-1", "i-0123456789abcdef0", since, until) == ((since, True),)
    assert other.asked == ["i-0123456789abcdef0"]


def test_the_bill_and_the_trail_never_leave_127_0_0_1(peer, cloud, monkeypatch):
    reached: list[object] = []
    real = socket.socket.connect

    def connect(self, address):  # records every address, connects as before
        reached.append(address)
        return real(self, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    iid = peer.world.add("ecs.gn7i-c8g1.2xlarge")
    cloud.resource_costs(_ts("2026-12-01T00:00:00Z"), _ts("2026-12-02T00:00:00Z"))
    cloud.instance_history(REGION, iid, _ts("2026-12-01T00:00:00Z"), _ts("2026-12-02T00:00:00Z"))
    assert reached and all(a[0] == "127.0.0.1" for a in reached if isinstance(a, tuple))
