"""Budgets that stop instances, end to end: the Console on AWS against moto's HTTP server.

Instances tagged ``Budget=research`` run next to untagged ones; a budget scoped to the tag whose
amount is long exceeded stops exactly the tagged running on-demand instances (the proxy records
what EC2 was sent), never a spot instance, once per threshold per period — and a budget that is
not automatic stops nothing until a user says yes.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from gpuconsole.core.fleet.console import Console, ConsoleOptions
from gpuconsole.core.fleet.sources import SourceOptions
from gpuconsole.core.fleet.store import Store
from gpuconsole.core.ops.actions import ActionError
from gpuconsole.model import (
    Budget,
    BudgetAction,
    BudgetPeriod,
    InstanceState,
    SourceKind,
    SourceState,
    Threshold,
)
from tests.aws_peer import AwsPeer
from tests.helpers import wait_for

pytestmark = pytest.mark.slow

EAST = "us-east-1"
RULE = (Threshold(100.0, actions=(BudgetAction.NOTIFY, BudgetAction.STOP_ALL)),)


def launch(peer: AwsPeer, *, tags: dict[str, str] | None = None, spot: bool = False) -> str:
    kwargs: dict = {}
    if tags:
        kwargs["TagSpecifications"] = [{"ResourceType": "instance",
                                        "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}]
    if spot:
        kwargs["InstanceMarketOptions"] = {"MarketType": "spot", "SpotOptions": {"SpotInstanceType": "one-time"}}
    answer = peer.client("ec2").run_instances(ImageId=peer.image_id(), InstanceType="p4d.24xlarge",
                                              MinCount=1, MaxCount=1, **kwargs)
    return answer["Instances"][0]["InstanceId"]


def states(peer: AwsPeer) -> dict[str, str]:
    pages = peer.client("ec2").describe_instances()["Reservations"]
    return {i["InstanceId"]: i["State"]["Name"] for r in pages for i in r["Instances"]}


def stopped_ids(peer: AwsPeer) -> list[str]:
    return [r.params["InstanceId.1"] for r in peer.proxy.sent("StopInstances")]


def console_on(store: Store, *, act: bool = True) -> Console:
    # Two minutes ahead of the wall clock: every instance has then cost $1 or more, whatever
    # second moto stamped as its launch time.
    options = ConsoleOptions(sources=SourceOptions(cloud="aws", regions=(EAST,), gpus="off"), interval=0.2, timeout=20,
                             clock=lambda: time.time() + 120, act_on_budgets=act)
    return Console(options, store=store)


def research(amount: float = 0.01, *, automatic: bool = True) -> Budget:
    return Budget("research", amount, BudgetPeriod.CUSTOM, "tag:Budget=research", RULE, automatic=automatic,
                  starts=time.time() - 86400)


@pytest.fixture
def fleet(aws_peer: AwsPeer) -> dict[str, list[str]]:
    tagged = [launch(aws_peer, tags={"Budget": "research", "Name": f"train-{n}"}) for n in range(2)]
    return {
        "tagged": tagged,
        "spot": [launch(aws_peer, tags={"Budget": "research"}, spot=True)],
        "other": [launch(aws_peer), launch(aws_peer, tags={"Budget": "inference"})],
    }


def test_automatic_budget_stops_exactly_the_tagged_on_demand_instances_once(
        aws_peer: AwsPeer, fleet: dict[str, list[str]], tmp_path: Path) -> None:
    store = Store(tmp_path / "cache.db")
    console = console_on(store)
    console.services.budget_ops.add(research())
    console.start(open_store=False)
    try:
        wait_for(lambda: len(stopped_ids(aws_peer)) >= 2, timeout=30)
        assert console.services.budget_ops.wait_idle(30)
        assert sorted(stopped_ids(aws_peer)) == sorted(fleet["tagged"])
        assert not aws_peer.proxy.sent("TerminateInstances"), "a budget never terminates"
        now = states(aws_peer)
        assert {now[i] for i in fleet["tagged"]} <= {"stopping", "stopped"}
        assert all(now[i] == "running" for i in fleet["other"] + fleet["spot"])
        results = [r for r in console.services.actions.recent() if r.request.kind.value == "stop"]
        assert {r.request.confirmation for r in results} == {"automatic:research"}
        wait_for(lambda: any("stopped" in a.message and "cannot stop one-time spot instance" in a.message
                             for a in console.snapshot.alerts), timeout=30)

        # Someone starts one again in the same period: the budget does not stop it again on its
        # own, it shows the stop as pending for a user.
        again = fleet["tagged"][0]
        aws_peer.client("ec2").start_instances(InstanceIds=[again])
        console.refresh()

        def waiting():  # noqa: ANN202
            return [p for p in console.snapshot.pending_actions if p.targets == (again,)]

        wait_for(lambda: bool(waiting()), timeout=30)
        [pending] = waiting()
        assert not pending.automatic and "runs again only when confirmed" in pending.detail
        assert console.services.budget_ops.wait_idle(30) and len(stopped_ids(aws_peer)) == 2
        result = console.services.budget_ops.run(pending, "yes")
        assert result.ok and stopped_ids(aws_peer)[-1] == again
    finally:
        console.close()
        store.close()

    # A new session on the same database: the threshold already acted this period.
    aws_peer.client("ec2").start_instances(InstanceIds=[fleet["tagged"][1]])
    sent = len(stopped_ids(aws_peer))
    store = Store(tmp_path / "cache.db")
    console = console_on(store)
    console.start(open_store=False)
    try:
        wait_for(lambda: any(i.instance_id == fleet["tagged"][1] and i.state is InstanceState.RUNNING
                             for i in console.snapshot.instances), timeout=30)
        time.sleep(0.5)
        assert console.services.budget_ops.wait_idle(30)
        assert len(stopped_ids(aws_peer)) == sent, "once per threshold per period, across sessions"
        # The first poll may still see the other tagged instance stopping: wait for the fleet to
        # settle, then only the restarted one is waiting for a yes.
        wait_for(lambda: [p.targets for p in console.snapshot.pending_actions] == [(fleet["tagged"][1],)], timeout=30)
        assert len(stopped_ids(aws_peer)) == sent
    finally:
        console.close()
        store.close()


def test_a_budget_that_is_not_automatic_stops_nothing_until_a_yes(
        aws_peer: AwsPeer, fleet: dict[str, list[str]], tmp_path: Path) -> None:
    store = Store(tmp_path / "cache.db")
    console = console_on(store)
    console.services.budget_ops.add(research(automatic=False))
    console.start(open_store=False)
    try:
        wait_for(lambda: bool(console.snapshot.pending_actions), timeout=30)
        [pending] = console.snapshot.pending_actions
        assert pending.budget == "research" and not pending.automatic
        assert sorted(pending.targets) == sorted(fleet["tagged"])
        assert f"cannot stop one-time spot instance {fleet['spot'][0]}: terminate it by hand" in pending.detail
        assert any("waits for confirmation" in a.message for a in console.snapshot.alerts)
        time.sleep(0.5)
        assert console.services.budget_ops.wait_idle(30) and aws_peer.proxy.sent("StopInstances") == []
        for refused in ("", "no", "automatic:research"):
            with pytest.raises(ActionError):
                console.services.budget_ops.run(pending, refused)
        assert aws_peer.proxy.sent("StopInstances") == []

        result = console.services.budget_ops.run(pending, "yes")
        assert result.ok
        assert sorted(stopped_ids(aws_peer)) == sorted(fleet["tagged"])
        assert all(states(aws_peer)[i] == "running" for i in fleet["other"] + fleet["spot"])
    finally:
        console.close()
        store.close()


def test_check_path_enforces_only_when_asked(aws_peer: AwsPeer, fleet: dict[str, list[str]], tmp_path: Path) -> None:
    """What ``budget check`` does: a console that does not act, then :meth:`enforce` once."""
    store = Store(tmp_path / "cache.db")
    console = console_on(store, act=False)
    console.services.budget_ops.add(research())
    console.start(open_store=False)
    try:
        console.wait_for_first_answers(30)
        wait_for(lambda: console.snapshot.source(SourceKind.CLOUD).state is SourceState.LIVE, timeout=30)
        time.sleep(0.5)
        assert aws_peer.proxy.sent("StopInstances") == [], "evaluating alone changes nothing"
        console.stop()
        console.services.budget_ops.evaluate(console.snapshot)
        results = console.services.budget_ops.enforce()
        kinds = sorted(r.request.kind.value for r in results)
        assert kinds == ["notify", "stop"] and all(r.ok for r in results)
        assert sorted(stopped_ids(aws_peer)) == sorted(fleet["tagged"])
        assert console.services.budget_ops.enforce() == (), "nothing is due twice"
    finally:
        console.close()
        store.close()
