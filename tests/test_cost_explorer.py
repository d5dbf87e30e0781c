"""Cost Explorer: the mapping, the daily bound on paid requests, the cached answer — and the
adapter against moto's server, counting the requests that went through the proxy."""

from __future__ import annotations

import json
import urllib.request
from datetime import UTC, datetime

import pytest

from gpuconsole.backends.aws import mapping as aws_mapping
from gpuconsole.backends.aws.source import AwsCloud
from gpuconsole.backends.base import BackendError
from gpuconsole.core.fleet.store import Store
from gpuconsole.core.money.cost_explorer import CallLimitReached, CostExplorer
from gpuconsole.model import CostLine
from tests.aws_peer import AwsPeer

NOW = datetime(2026, 11, 16, 14, 0, tzinfo=UTC).timestamp()
DAY = 86400.0


class Clock:
    def __init__(self, t: float = NOW) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


class FakeCosts:
    """A provider that counts its calls and can be told to fail."""

    def __init__(self) -> None:
        self.calls: list[tuple[float, float, str | None]] = []
        self.fail = False

    def cost_and_usage(self, start: float, end: float, group_by_tag: str | None) -> tuple[CostLine, ...]:
        self.calls.append((start, end, group_by_tag))
        if self.fail:
            raise BackendError("Cost Explorer: ThrottlingException: slow down")
        return (CostLine("day", "2026-11-15", 100.0), CostLine("day", "2026-11-16", 25.5 * len(self.calls)))


# --------------------------------------------------------------------------- mapping


def test_cost_period_is_whole_utc_days():
    start = datetime(2026, 11, 1, tzinfo=UTC).timestamp()
    assert aws_mapping.cost_period(start, NOW) == {"Start": "2026-11-01", "End": "2026-11-17"}
    midnight = datetime(2026, 11, 16, tzinfo=UTC).timestamp()
    assert aws_mapping.cost_period(start, midnight) == {"Start": "2026-11-01", "End": "2026-11-16"}
    assert aws_mapping.cost_period(midnight, midnight + 60) == {"Start": "2026-11-16", "End": "2026-11-17"}
    assert aws_mapping.cost_period(midnight, midnight) == {"Start": "2026-11-16", "End": "2026-11-17"}, "at least a day"


def _day(start: str, end: str, total: str | None = None, groups: dict[str, str] | None = None) -> dict:
    return {
        "TimePeriod": {"Start": start, "End": end},
        "Total": {"UnblendedCost": {"Amount": total, "Unit": "USD"}} if total is not None else {},
        "Groups": [{"Keys": [key], "Metrics": {"UnblendedCost": {"Amount": amount, "Unit": "USD"}}}
                   for key, amount in (groups or {}).items()],
        "Estimated": False,
    }


def test_cost_lines_per_day_and_per_tag():
    page = {"ResultsByTime": [_day("2026-11-01", "2026-11-02", "10.5"), _day("2026-11-02", "2026-11-03", "0")]}
    assert aws_mapping.cost_lines([page]) == (CostLine("day", "2026-11-01", 10.5), CostLine("day", "2026-11-02", 0.0))
    by_owner = [
        {"ResultsByTime": [_day("2026-11-01", "2026-11-02", groups={"Owner$alice": "3", "Owner$": "1.25"})]},
        {"ResultsByTime": [_day("2026-11-02", "2026-11-03", groups={"Owner$alice": "4", "Owner$bob": "5"})]},
    ]
    assert aws_mapping.cost_lines(by_owner, "Owner") == (
        CostLine("tag:Owner", "alice", 7.0), CostLine("tag:Owner", "bob", 5.0), CostLine("tag:Owner", "(untagged)", 1.25))


# --------------------------------------------------------------------------- the bound and the cache


def test_bounded_per_utc_day_and_counted_through_the_store(tmp_path):
    clock, provider = Clock(), FakeCosts()
    with Store(tmp_path / "c.db") as store:
        explorer = CostExplorer(provider, store, clock, max_calls_per_day=2)
        assert explorer.answer() is None and explorer.age_text() == "never fetched"
        lines, fetched = explorer.fetch()
        assert fetched == NOW and provider.calls == [(datetime(2026, 11, 1, tzinfo=UTC).timestamp(), NOW, None)]
        explorer.fetch()
        # a second console on the same cache (or a restart) sees the calls already made
        again = CostExplorer(provider, store, clock, max_calls_per_day=2)
        assert again.calls_today() == 2 and again.calls_left() == 0
        with pytest.raises(CallLimitReached, match="2 times today"):
            again.fetch()
        assert len(provider.calls) == 2
        assert again.answer() == explorer.answer(), "the answer is in the Store too"
        assert again.answer()[0][1].amount == 51.0
        clock.t = datetime(2026, 11, 17, 0, 0, 1, tzinfo=UTC).timestamp()  # a new UTC day
        assert again.calls_today() == 0
        again.fetch()
        assert len(provider.calls) == 3


def test_failed_attempts_count(tmp_path):
    clock, provider = Clock(), FakeCosts()
    provider.fail = True
    with Store(tmp_path / "c.db") as store:
        explorer = CostExplorer(provider, store, clock, max_calls_per_day=3)
        for _ in range(3):
            with pytest.raises(BackendError):
                explorer.fetch()
        with pytest.raises(CallLimitReached):
            explorer.fetch()
        assert len(provider.calls) == 3 and explorer.answer() is None


def test_refresh_only_when_due(tmp_path):
    clock, provider = Clock(), FakeCosts()
    explorer = CostExplorer(provider, Store(tmp_path / "c.db"), clock)  # 4 a day: every 6 h
    assert explorer.refresh() is True
    clock.t += 5 * 3600
    assert explorer.refresh() is False and explorer.age_text() == "5 h old"
    clock.t += 3600
    assert explorer.refresh() is True and explorer.age_text() == "just now"
    clock.t += 90
    assert explorer.age_text() == "1 min old"
    assert explorer.refresh(max_age_s=60) is True
    assert explorer.refresh(max_age_s=0) is True
    assert explorer.calls_left() == 0 and explorer.refresh(max_age_s=0) is False
    assert len(provider.calls) == 4
    clock.t += 3 * DAY
    assert explorer.age_text() == "3 d old"
    explorer.store.close()


def test_without_a_store_the_count_lives_in_memory():
    clock, provider = Clock(), FakeCosts()
    explorer = CostExplorer(provider, None, clock, max_calls_per_day=1, group_by_tag="Owner")
    explorer.fetch()
    with pytest.raises(CallLimitReached):
        explorer.fetch()
    assert provider.calls[0][2] == "Owner" and explorer.total() == pytest.approx(125.5)


def test_groupings_are_cached_apart(tmp_path):
    clock, provider = Clock(), FakeCosts()
    with Store(tmp_path / "c.db") as store:
        CostExplorer(provider, store, clock).fetch()
        by_owner = CostExplorer(provider, store, clock, group_by_tag="Owner")
        assert by_owner.answer() is None and by_owner.calls_today() == 1, "one bound for the account"


# --------------------------------------------------------------------------- against moto


def _canned(peer: AwsPeer, *results: dict) -> None:
    request = urllib.request.Request(
        f"{peer.moto_url}/moto-api/static/ce/cost-and-usage-results", method="POST",
        data=json.dumps({"results": list(results)}).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 - 127.0.0.1 only
        assert response.status == 201


def test_cost_and_usage_against_moto(aws_peer: AwsPeer):
    _canned(aws_peer, {"ResultsByTime": [
        _day("2026-11-01", "2026-11-02", groups={"Owner$alice": "120.25", "Owner$": "3.5"}),
        _day("2026-11-02", "2026-11-03", groups={"Owner$alice": "100", "Owner$bob": "40"}),
    ]})
    cloud = AwsCloud(regions=("us-west-2",))
    start = datetime(2026, 11, 1, tzinfo=UTC).timestamp()
    lines = cloud.cost_and_usage(start, NOW, "Owner")
    assert lines == (CostLine("tag:Owner", "alice", 220.25), CostLine("tag:Owner", "bob", 40.0),
                     CostLine("tag:Owner", "(untagged)", 3.5))
    (sent,) = aws_peer.proxy.sent("GetCostAndUsage")
    assert sent.region == "us-east-1", "Cost Explorer answers in us-east-1 whatever regions are watched"
    assert sent.params == {"TimePeriod": {"Start": "2026-11-01", "End": "2026-11-17"}, "Granularity": "DAILY",
                           "Metrics": ["UnblendedCost"], "GroupBy": [{"Type": "TAG", "Key": "Owner"}]}
    cloud.close()


def test_cost_and_usage_errors_are_backend_errors(aws_peer: AwsPeer):
    aws_peer.proxy.fail("GetCostAndUsage", "AccessDeniedException", "not authorized to perform ce:GetCostAndUsage")
    cloud = AwsCloud(regions=("us-east-1",))
    with pytest.raises(BackendError, match="Cost Explorer: AccessDeniedException"):
        cloud.cost_and_usage(NOW - DAY, NOW, None)
    cloud.close()


def test_requests_sent_respect_the_daily_bound(aws_peer: AwsPeer, tmp_path):
    _canned(aws_peer, {"ResultsByTime": [_day("2026-11-16", "2026-11-17", "42.5")]})
    clock = Clock()
    cloud = AwsCloud(regions=("us-east-1",))
    with Store(tmp_path / "c.db") as store:
        explorer = CostExplorer(cloud, store, clock, max_calls_per_day=4)
        refused = 0
        for hour in range(10):  # a console asking every hour, restarted half-way
            if hour == 5:
                explorer = CostExplorer(cloud, store, clock, max_calls_per_day=4)
            try:
                explorer.fetch()
            except CallLimitReached:
                refused += 1
            clock.t += 3600
        assert len(aws_peer.proxy.sent("GetCostAndUsage")) == 4 and refused == 6
        lines, fetched = explorer.answer()
        assert lines == (CostLine("day", "2026-11-16", 42.5),) and fetched == NOW + 3 * 3600
        assert explorer.age_text() == "7 h old"
    cloud.close()


def test_a_store_opened_late(tmp_path):
    clock, provider = Clock(), FakeCosts()
    with Store(tmp_path / "c.db") as store:
        CostExplorer(provider, store, clock, max_calls_per_day=2).fetch()  # an earlier session
        explorer = CostExplorer(provider, None, clock, max_calls_per_day=2)
        assert explorer.answer() is None
        explorer.use_store(store)
        assert explorer.answer() is not None and explorer.calls_left() == 1
