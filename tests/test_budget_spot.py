"""Budgets that stop the whole spend: persistent spot requests with the ``stop`` behaviour are
stopped, one-time spot instances are terminated by ``terminate-spot``, on a moto server whose
spot requests are shown as EC2 shows them (:mod:`tests.aws_peer_spot`). And arming or disarming
an automatic budget needs an admin's MFA code, from the command line and in the console."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from gpuconsole.backends.aws import AwsCloud
from gpuconsole.cli.main import main
from gpuconsole.core.access.access import UsersTable, current_user
from gpuconsole.core.access.audit import AuditLog
from gpuconsole.core.access.mfa import MfaStore, code_at
from gpuconsole.core.fleet.store import Store
from gpuconsole.core.money import budgets as rules
from gpuconsole.core.ops.actions import ActionError, ActionKind, ActionRequest, check_confirmation
from gpuconsole.model import Budget, BudgetAction, BudgetPeriod, Instance, InstanceState, Market, Threshold
from gpuconsole.ui.screens.budget_form import PAUSE_AT_1000, BudgetForm
from gpuconsole.ui.screens.mfa_prompt import MfaPrompt
from tests.aws_peer import AwsPeer
from tests.aws_peer_spot import refuse_stopping_one_time, request_spot, spot_peer  # noqa: F401 - a fixture
from tests.helpers import wait_until
from tests.test_access_ui import NOW, console_app
from tests.driving import table

RESEARCH = {"Budget": "research"}
ENFORCE = ("budget", "check", "--enforce", "--region", "us-east-1")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def add_research(capsys: pytest.CaptureFixture[str], threshold: str) -> None:
    code, _, err = run(capsys, "budget", "add", "research", "--amount", "0.001", "--period", "custom",
                       "--from", "2020-01-01", "--scope", "tag:Budget=research", "--threshold", threshold, "--automatic")
    assert code == 0, err


def on_demand(peer: AwsPeer, tags: dict[str, str] | None = None) -> str:
    kwargs = {"TagSpecifications": [{"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}]
              } if tags else {}
    answer = peer.client("ec2").run_instances(ImageId=peer.image_id(), InstanceType="p4d.24xlarge", MinCount=1,
                                              MaxCount=1, **kwargs)
    return answer["Instances"][0]["InstanceId"]


def states(peer: AwsPeer) -> dict[str, str]:
    pages = peer.client("ec2").describe_instances()["Reservations"]
    return {i["InstanceId"]: i["State"]["Name"] for r in pages for i in r["Instances"]}


def sent_ids(peer: AwsPeer, action: str) -> list[str]:
    return sorted(v for r in peer.proxy.sent(action) for k, v in r.params.items() if k.startswith("InstanceId."))


@pytest.fixture
def fleet(spot_peer: AwsPeer) -> dict[str, str]:
    """In the research scope: two on-demand, a one-time spot and a persistent spot (stop
    behaviour); outside it: one on-demand and one one-time spot."""
    ids = {
        "od1": on_demand(spot_peer, RESEARCH), "od2": on_demand(spot_peer, RESEARCH),
        "one_time": request_spot(spot_peer, "one-time", "terminate", RESEARCH),
        "persistent": request_spot(spot_peer, "persistent", "stop", RESEARCH),
        "other_od": on_demand(spot_peer),
        "other_spot": request_spot(spot_peer, "one-time", "terminate", {"Budget": "inference"}),
    }
    for key in ("one_time", "other_spot"):
        refuse_stopping_one_time(spot_peer, ids[key])
    return ids


# --------------------------------------------------------------------------- the adapter


def test_the_aws_adapter_tells_spot_request_kinds_apart(spot_peer: AwsPeer, fleet: dict[str, str]) -> None:
    seen = {i.instance_id: i for i in AwsCloud().poll_instances().instances}
    one_time, persistent, od = seen[fleet["one_time"]], seen[fleet["persistent"]], seen[fleet["od1"]]
    assert (one_time.spot_type, one_time.spot_interruption, one_time.one_time_spot) == ("one-time", "terminate", True)
    assert (persistent.spot_type, persistent.spot_interruption, persistent.stoppable_spot) == ("persistent", "stop", True)
    assert persistent.spot_kind == "persistent/stop" and one_time.spot_kind == "one-time"
    assert not persistent.one_time_spot and not one_time.stoppable_spot
    assert od.market is Market.ON_DEMAND and od.spot_kind == "" and not od.stoppable_spot


# --------------------------------------------------------------------------- on moto, end to end


@pytest.mark.slow
def test_stop_all_and_terminate_spot_end_the_whole_spend_in_scope(
        capsys: pytest.CaptureFixture[str], spot_peer: AwsPeer, fleet: dict[str, str]) -> None:
    add_research(capsys, "100:notify+stop-all+terminate-spot")

    code, out, err = run(capsys, *ENFORCE)

    assert code == 1, err  # a threshold is crossed; every enforced action went through
    assert sent_ids(spot_peer, "StopInstances") == sorted([fleet["od1"], fleet["od2"], fleet["persistent"]])
    assert sent_ids(spot_peer, "TerminateInstances") == [fleet["one_time"]]
    now = states(spot_peer)
    for key in ("od1", "od2", "persistent"):
        assert now[fleet[key]] in ("stopping", "stopped"), key
    assert now[fleet["one_time"]] in ("shutting-down", "terminated")
    assert now[fleet["other_od"]] == now[fleet["other_spot"]] == "running"
    assert f"done: budget research at 100%: terminated {fleet['one_time']}" in out
    records = [r for r in AuditLog(_audit_path()).records() if r.action == "terminate" and r.result != "started"]
    assert [r.target for r in records] == [fleet["one_time"]]
    assert json.loads(records[0].params)["confirmation"] == "automatic:research"

    code, out, _ = run(capsys, *ENFORCE)  # once per threshold per period
    assert sent_ids(spot_peer, "TerminateInstances") == [fleet["one_time"]]
    assert len(spot_peer.proxy.sent("StopInstances")) == 3


@pytest.mark.slow
def test_stop_all_alone_stops_a_persistent_spot_request_and_names_the_one_time_one(
        capsys: pytest.CaptureFixture[str], spot_peer: AwsPeer, fleet: dict[str, str]) -> None:
    add_research(capsys, "100:notify+stop-all")

    code, out, err = run(capsys, *ENFORCE)

    assert code == 1, err
    assert sent_ids(spot_peer, "StopInstances") == sorted([fleet["od1"], fleet["od2"], fleet["persistent"]])
    assert spot_peer.proxy.sent("TerminateInstances") == [], "without terminate-spot a budget never terminates"
    assert states(spot_peer)[fleet["one_time"]] == "running"
    assert f"cannot stop one-time spot instance {fleet['one_time']}: terminate it by hand" in out


def _audit_path() -> Path:
    from gpuconsole.core import paths

    return paths.audit_db_path()


# --------------------------------------------------------------------------- the simulated world


def test_the_simulated_world_tells_spot_request_kinds_apart() -> None:
    from gpuconsole.backends.sim import SimWorld

    start = 1_800_000_000.0
    world = SimWorld(seed=7, start=start)
    seeded = [i for i in world.cloud_reading().instances if i.market is Market.SPOT]
    assert seeded and all(i.spot_kind == "one-time" for i in seeded), "the wizard's kind: one-time, terminate"
    kept = world.launch_instance("g5.xlarge", "us-east-1a", Market.SPOT, "kept", persistent=True)
    once = world.launch_instance("g5.xlarge", "us-east-1a", Market.SPOT, "once")
    assert (kept.spot_kind, once.spot_kind) == ("persistent/stop", "one-time")
    world.advance_to(start + 120)
    now = {i.instance_id: i for i in world.cloud_reading().instances}
    assert now[kept.instance_id].state is now[once.instance_id].state is InstanceState.RUNNING
    plan = rules.plan_action(Budget("all", 1.0), Threshold(100.0, actions=(BudgetAction.STOP_ALL,)),
                             BudgetAction.STOP_ALL, list(now.values()))
    assert plan is not None and kept.instance_id in plan.targets and once.instance_id not in plan.targets
    assert world.stop_instance(kept.instance_id).state is InstanceState.STOPPING
    with pytest.raises(ValueError, match="one-time Spot Instance request"):
        world.stop_instance(once.instance_id)


def test_an_interruption_stops_a_persistent_spot_instance_and_ends_a_one_time_one() -> None:
    from gpuconsole.backends.sim import SimWorld

    start = 1_800_000_000.0
    world = SimWorld(seed=7, start=start)
    kept = world.launch_instance("g5.xlarge", "us-east-1a", Market.SPOT, "kept", persistent=True)
    once = world.launch_instance("g5.xlarge", "us-east-1a", Market.SPOT, "once")
    world.advance_to(start + 120)
    world.advance_to(start + 30 * 86400)  # spot instances live 12 hours on average
    now = {i.instance_id: i for i in world.cloud_reading().instances}
    assert now[kept.instance_id].state is InstanceState.STOPPED
    assert once.instance_id not in now or now[once.instance_id].state is InstanceState.TERMINATED


def test_a_user_runs_terminate_spot_only_by_typing_the_budget_name() -> None:
    from gpuconsole.model import SourceState
    from tests.helpers import FrozenClock, demo_console, wait_for

    console = demo_console(clock=FrozenClock())
    console.start(open_store=False)
    try:
        wait_for(lambda: all(s.state is SourceState.LIVE for s in console.snapshot.sources))
        ops = console.services.budget_ops
        ops.add(Budget("spot-cap", 0.01, scope="all", starts=0.0, period=BudgetPeriod.CUSTOM,
                       thresholds=(Threshold(100.0, actions=(BudgetAction.TERMINATE_SPOT,)),)))
        console.refresh()
        wait_for(lambda: any(p.budget == "spot-cap" for p in console.snapshot.pending_actions))
        [pending] = [p for p in console.snapshot.pending_actions if p.budget == "spot-cap"]
        one_time = {i.instance_id for i in console.snapshot.instances if i.one_time_spot and i.state is InstanceState.RUNNING}
        assert set(pending.targets) == one_time and one_time and not pending.automatic
        with pytest.raises(ActionError, match="type spot-cap exactly"):
            ops.run(pending, "yes")
        assert console.services.actions.recent()[-1].message.startswith("refused: not confirmed")
        result = ops.run(pending, "spot-cap")
        assert result.ok and result.message.startswith("budget spot-cap at 100%: terminated ")
        wait_for(lambda: all(i.state.value in ("shutting-down", "terminated") for i in console.snapshot.instances
                             if i.instance_id in one_time), timeout=20)
    finally:
        console.close()


# --------------------------------------------------------------------------- pure rules


def spot(instance_id: str, kind: str, behaviour: str) -> Instance:
    return Instance(instance_id, "p4d.24xlarge", "us-east-1", "us-east-1a", Market.SPOT, InstanceState.RUNNING, 0.0,
                    10.0, spot_type=kind, spot_interruption=behaviour)


def test_each_action_takes_what_it_can_end() -> None:
    fleet = [
        Instance("i-od", "p4d.24xlarge", "us-east-1", "us-east-1a", Market.ON_DEMAND, InstanceState.RUNNING, 0.0, 30.0),
        spot("i-once", "one-time", "terminate"), spot("i-keep", "persistent", "stop"),
        spot("i-hib", "persistent", "hibernate"), spot("i-unknown", "", ""),
    ]
    budget = Budget("all", 1.0)
    both = Threshold(100.0, actions=(BudgetAction.STOP_ALL, BudgetAction.TERMINATE_SPOT))
    stop_all = rules.plan_action(budget, both, BudgetAction.STOP_ALL, fleet)
    assert stop_all is not None and stop_all.targets == ("i-od", "i-keep")
    assert "cannot stop" not in stop_all.detail, "terminate-spot in the same threshold ends those"
    stop_spot = rules.plan_action(budget, both, BudgetAction.STOP_SPOT, fleet)
    assert stop_spot is not None and stop_spot.targets == ("i-keep",)
    ending = rules.plan_action(budget, both, BudgetAction.TERMINATE_SPOT, fleet)
    assert ending is not None and ending.targets == ("i-once",), "never a persistent or unknown request"
    assert ending.detail.startswith("terminate 1 instance: i-once")
    assert "i-unknown of an unknown request kind" in ending.detail
    assert rules.parse_threshold("100:notify+stop-all+terminate-spot").actions[-1] is BudgetAction.TERMINATE_SPOT


def test_an_automatic_terminate_is_accepted_only_for_terminate_spot() -> None:
    params = (("budget", "research"), ("action", "terminate-spot"))
    check_confirmation(ActionRequest(ActionKind.TERMINATE, "i-1", confirmation="automatic:research", params=params))
    with pytest.raises(ActionError, match="never runs automatically"):
        check_confirmation(ActionRequest(ActionKind.TERMINATE, "i-1", confirmation="automatic:research",
                                         params=(("budget", "research"), ("action", "stop-all"))))
    with pytest.raises(ActionError, match="names no automatic budget"):
        check_confirmation(ActionRequest(ActionKind.TERMINATE, "i-1", confirmation="automatic:other", params=params))


def test_the_pause_preset_ends_what_a_stop_cannot() -> None:
    top = max(PAUSE_AT_1000.thresholds, key=lambda t: t.percent)
    assert {BudgetAction.STOP_ALL, BudgetAction.TERMINATE_SPOT} <= set(top.actions) and PAUSE_AT_1000.automatic


async def test_the_pause_preset_says_what_it_stops() -> None:
    from tests.driving import running

    async with running() as (app, pilot):
        await pilot.press("5", "a")
        await wait_until(lambda: isinstance(app.screen, BudgetForm))
        await pilot.press("f2")
        await pilot.pause()
        said = str(app.screen.query_one("#budget-help").content)
        assert "terminates one-time spot instances" in said and "all of the spend stops" in said
        assert "terminate-spot" in app.screen.query_one("#budget-thresholds").value


# --------------------------------------------------------------------------- MFA for automatic budgets


@pytest.fixture
def admin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, AuditLog, Path]:
    """This login is an admin of a users table with MFA enrolled, and no code given yet."""
    me = current_user()
    users = UsersTable(tmp_path / "config" / "users.json")
    users.init(me)
    mfa = MfaStore(tmp_path / "data" / "mfa.json")
    secret, _uri = mfa.enroll(me)
    audit = AuditLog(tmp_path / "state" / "audit.db")
    monkeypatch.setenv("GPUCONSOLE_USERS", str(users.path))
    monkeypatch.setenv("GPUCONSOLE_MFA", str(mfa.path))
    monkeypatch.setenv("GPUCONSOLE_AUDIT_DB", str(audit.path))
    return secret, audit, tmp_path / "cache" / "mfa.db"


def test_adding_an_automatic_budget_needs_a_code(capsys: pytest.CaptureFixture[str], admin) -> None:  # noqa: ANN001
    secret, audit, db = admin
    argv = ["budget", "add", "guard", "--amount", "100", "--threshold", "100:notify+stop-all", "--automatic",
            "--db", str(db)]
    code, _, err = run(capsys, *argv)
    assert code == 1 and err.startswith("gpuconsole: error: denied: budget-add needs a current MFA code")
    assert err.count("\n") == 1
    assert audit.records()[-1].result.startswith("denied: budget-add needs a current MFA code")
    assert Store(db).budgets() == []

    code, out, err = run(capsys, *argv, "--mfa-code", code_at(secret, time.time()))
    assert code == 0, err
    assert [b.name for b in Store(db).budgets()] == ["guard"]

    code, _, err = run(capsys, "budget", "add", "plain", "--amount", "100", "--db", str(db))
    assert code == 0, "a budget that never acts on its own needs no code"


def test_replacing_an_automatic_budget_needs_a_code(capsys: pytest.CaptureFixture[str], admin) -> None:  # noqa: ANN001
    secret, audit, db = admin
    store = Store(db)
    store.save_budget(Budget("guard", 100.0, automatic=True, origin="store",
                             thresholds=(Threshold(100.0, actions=(BudgetAction.NOTIFY, BudgetAction.STOP_ALL)),)))
    store.close()
    harmless = ["budget", "add", "guard", "--amount", "100", "--threshold", "100:notify", "--replace", "--db", str(db)]

    code, _, err = run(capsys, *harmless)

    assert code == 1 and "needs a current MFA code" in err
    [kept] = Store(db).budgets()
    assert kept.automatic, "the automatic budget is still armed"
    last = audit.records()[-1]
    assert last.action == "budget-add" and json.loads(last.params)["replaces-automatic"] == "yes"
    code, _, err = run(capsys, *harmless, "--mfa-code", code_at(secret, time.time()))
    assert code == 0, err
    assert not Store(db).budgets()[0].automatic


async def test_the_console_asks_for_a_code_before_adding_an_automatic_budget(tmp_path: Path) -> None:
    from gpuconsole.core.access.access import Role

    async with console_app(tmp_path, Role.ADMIN) as (app, pilot, secret):
        await pilot.press("5", "a")
        await wait_until(lambda: isinstance(app.screen, BudgetForm))
        await pilot.press("f2", "ctrl+s")
        await wait_until(lambda: isinstance(app.screen, MfaPrompt))
        await pilot.press("escape")
        await pilot.pause(0.2)
        assert app.core.services.budget_ops.get("pause-at-1000") is None, "no code, no automatic budget"
        await pilot.press("a")
        await wait_until(lambda: isinstance(app.screen, BudgetForm))
        await pilot.press("f2", "ctrl+s")
        await wait_until(lambda: isinstance(app.screen, MfaPrompt))
        await pilot.press(*code_at(secret, NOW), "enter")
        await wait_until(lambda: app.core.services.budget_ops.get("pause-at-1000") is not None)
        budget = app.core.services.budget_ops.get("pause-at-1000")
        assert budget.automatic and budget.period is BudgetPeriod.CUSTOM
        await wait_until(lambda: "pause-at-1000" in table(app, "budget-table").shown_keys)


async def test_the_instances_pane_says_which_kind_of_spot_request_a_row_is() -> None:
    from tests.driving import running
    from tests.test_instances_pane import select

    async with running() as (app, pilot):
        await select(app, pilot, lambda i: i.market is Market.SPOT and i.state is InstanceState.RUNNING)
        pane = app.query_one("#instances-pane")
        await wait_until(lambda: "spot (one-time)" in str(pane.query_one(".row-detail").content))
