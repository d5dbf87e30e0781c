"""Budgets that act: thresholds in words, scopes, periods, the configuration file, notifications
fired once per period (on a controllable clock), pending actions, the demo sprint, launch impact."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from gpuconsole.core.config import ConfigError
from gpuconsole.core.fleet.store import Store
from gpuconsole.core.money import budgets as rules
from gpuconsole.core.money.budget_config import load_config, parse_config
from gpuconsole.core.money.budget_evaluation import Crossing
from gpuconsole.core.ops.actions import (
    ActionError,
    ActionKind,
    ActionRequest,
    automatic_confirmation,
    check_confirmation,
)
from gpuconsole.core.ops.budget_ops import BudgetOps
from gpuconsole.model import (
    DEFAULT_THRESHOLDS,
    Budget,
    BudgetAction,
    BudgetPeriod,
    CronJob,
    FleetSnapshot,
    Instance,
    InstanceState,
    Job,
    JobState,
    Market,
    Severity,
    SourceKind,
    SourceState,
    SourceStatus,
    Threshold,
    ThresholdBasis,
)
from tests.helpers import START, FrozenClock, demo_console, wait_for

NOTIFY, STOP_SPOT, STOP_ALL, SUSPEND = (BudgetAction.NOTIFY, BudgetAction.STOP_SPOT, BudgetAction.STOP_ALL,
                                        BudgetAction.SUSPEND_CRONJOBS)
MONTH = rules.costs.month_start(START)


def inst(iid: str, *, price: float = 10.0, market: Market = Market.ON_DEMAND, state: InstanceState = InstanceState.RUNNING,
         tags: tuple[tuple[str, str], ...] = (), node: str | None = None, launch: float = MONTH) -> Instance:
    return Instance(instance_id=iid, instance_type="p4de.24xlarge", region="us-east-1", availability_zone="us-east-1a",
                    market=market, state=state, launch_time=launch, price_per_hour=price, gpus=8, node=node, tags=tags)


def snapshot(now: float, instances=(), cronjobs=(), jobs=(), state: SourceState = SourceState.LIVE) -> FleetSnapshot:
    sources = tuple(SourceStatus("test", kind, state, updated_at=now) for kind in SourceKind)
    return FleetSnapshot(taken_at=now, instances=tuple(instances), cronjobs=tuple(cronjobs), jobs=tuple(jobs),
                         sources=sources)


# --------------------------------------------------------------------------- words


@pytest.mark.parametrize(("text", "expected"), [
    ("100:notify+stop-all", Threshold(100.0, ThresholdBasis.ACTUAL, (NOTIFY, STOP_ALL))),
    ("100f:notify", Threshold(100.0, ThresholdBasis.FORECAST, (NOTIFY,))),
    ("80", Threshold(80.0)),
    (" 62.5% : Stop-Spot ", Threshold(62.5, actions=(STOP_SPOT,))),
    ("90:suspend-cronjobs+notify+notify", Threshold(90.0, actions=(SUSPEND, NOTIFY))),
])
def test_parse_threshold(text: str, expected: Threshold) -> None:
    parsed = rules.parse_threshold(text)
    assert parsed == expected
    assert rules.parse_threshold(rules.format_threshold(parsed)) == parsed


def test_format_threshold_round_trips_the_defaults() -> None:
    assert [rules.format_threshold(t) for t in DEFAULT_THRESHOLDS] == ["50:notify", "80:notify", "100:notify", "100f:notify"]
    assert rules.format_threshold(Threshold(100.0, actions=(NOTIFY, STOP_ALL))) == "100:notify+stop-all"


@pytest.mark.parametrize(("text", "words"), [
    ("", "use PCT[f]:ACTION"),
    ("forecast:100:notify", "use PCT[f]:ACTION"),
    ("0:notify", "more than 0"),
    ("5000:notify", "at most 1000"),
    ("nan:notify", "more than 0"),
    ("80:boom", "unknown action 'boom'"),
    ("80:", "an empty action"),
    ("80:notify+", "an empty action"),
])
def test_bad_thresholds_are_one_line(text: str, words: str) -> None:
    with pytest.raises(rules.BudgetError) as info:
        rules.parse_threshold(text)
    assert words in str(info.value) and "\n" not in str(info.value)


def test_scopes_and_dates() -> None:
    assert rules.parse_scope("tag:Budget=research") == ("tag", "Budget", "research")
    assert rules.parse_scope("namespace:nlp") == ("namespace", "nlp", "")
    for bad in ("tag:=x", "namespace:", "team=nlp", ""):
        with pytest.raises(rules.ScopeError):
            rules.parse_scope(bad)
    assert issubclass(rules.ScopeError, rules.BudgetError)
    day = datetime(2026, 11, 30, tzinfo=UTC).timestamp()
    assert rules.parse_date("2026-11-30") == day
    assert rules.parse_date("2026-11-30", end=True) == day + 86400
    assert rules.parse_date("2026-11-30T12:00") == day + 43200
    assert rules.parse_date("2026-11-30T13:00+01:00") == day + 43200
    with pytest.raises(rules.BudgetError, match="bad date"):
        rules.parse_date("30/11/2026")
    custom = Budget("c", 10.0, BudgetPeriod.CUSTOM, starts=day - 29 * 86400, ends=day + 86400)
    assert rules.describe_period(custom) == "2026-11-01 to 2026-11-30"
    assert rules.describe_period(Budget("o", 10.0, BudgetPeriod.CUSTOM, starts=START)) == "from 2026-11-16T14:00Z (cumulative)"


@pytest.mark.parametrize(("changes", "words"), [
    ({"name": "has space"}, "bad budget name"),
    ({"amount": 0.0}, "bad amount"),
    ({"scope": "team"}, "bad budget scope"),
    ({"thresholds": ()}, "no thresholds"),
    ({"period": BudgetPeriod.CUSTOM}, "needs a start date"),
    ({"period": BudgetPeriod.CUSTOM, "starts": START, "ends": START - 1}, "ends before it starts"),
    ({"starts": START}, "custom periods only"),
    ({"webhook": "http://hooks.example.com/x"}, "https://"),
    ({"webhook": "http://localhost.example.com/x"}, "https://"),
    ({"notify_command": "a\nb"}, "one line"),
])
def test_validate(changes: dict, words: str) -> None:
    base = dict(name="ok", amount=10.0)
    with pytest.raises(rules.BudgetError, match=words):
        rules.validate(Budget(**{**base, **changes}))
    assert rules.validate(Budget("ok", 1.0, webhook="http://127.0.0.1:8080/hook"))


# --------------------------------------------------------------------------- scopes and spend


def test_scopes_select_instances_and_cronjobs() -> None:
    a = inst("i-a", tags=(("Budget", "research"),), node="n1")
    b = inst("i-b", node="n2")
    jobs = [Job("j1", "train", "nlp", JobState.RUNNING, 0.0, node="n2")]
    assert rules.in_scope([a, b], "all") == [a, b]
    assert rules.in_scope([a, b], "tag:Budget=research") == [a]
    assert rules.in_scope([a, b], "namespace:nlp", jobs) == [b]
    crons = [CronJob("c1", "nightly", "nlp", "0 2 * * *", 0.0), CronJob("c2", "bench", "research", "0 * * * *", 0.0)]
    assert [c.uid for c in rules.cronjobs_in_scope(crons, "all")] == ["c1", "c2"]
    assert [c.uid for c in rules.cronjobs_in_scope(crons, "namespace:research")] == ["c2"]
    assert rules.cronjobs_in_scope(crons, "tag:Budget=research") == []


def test_custom_period_counts_only_its_window() -> None:
    start, end = START - 3600, START + 3600
    budget = Budget("window", 100.0, BudgetPeriod.CUSTOM, starts=start, ends=end, thresholds=(Threshold(10.0),))
    running = [inst("i-a", price=10.0, launch=START - 86400)]
    status = rules.evaluate(budget, running, START)
    assert status.spent == pytest.approx(10.0)  # one hour of the window at $10/h
    assert status.forecast == pytest.approx(20.0)
    assert status.crossed == (Threshold(10.0),)
    assert rules.evaluate(budget, running, end + 7200).spent == pytest.approx(20.0), "spend stops at the end"
    before = rules.evaluate(budget, running, start - 60)
    assert before.spent == 0.0 and before.forecast == pytest.approx(20.0)
    assert not rules.period_open(budget, end) and rules.period_open(budget, START)
    cumulative = Budget("cum", 100.0, BudgetPeriod.CUSTOM, starts=START - 7200)
    status = rules.evaluate(cumulative, running, START)
    assert status.spent == pytest.approx(20.0)
    assert status.forecast == pytest.approx(20.0 + 10.0 * 30 * 24), "an open end forecasts 30 days ahead"


# --------------------------------------------------------------------------- pending actions


def test_stop_all_targets_running_on_demand_and_names_spot_it_cannot_stop() -> None:
    tagged = (("Budget", "research"),)
    fleet = [
        inst("i-od1", tags=tagged, price=40.96608),
        inst("i-od2", tags=tagged),
        inst("i-stopped", tags=tagged, state=InstanceState.STOPPED),
        inst("i-spot", tags=tagged, market=Market.SPOT),
        inst("i-other"),
    ]
    budget = Budget("research", 10.0, scope="tag:Budget=research")
    t = Threshold(100.0, actions=(NOTIFY, STOP_ALL))
    plan = rules.plan_action(budget, t, STOP_ALL, fleet)
    assert plan is not None and plan.targets == ("i-od1", "i-od2")
    assert plan.detail.startswith("stop 2 instances: i-od1 (p4de.24xlarge, $40.97/h), i-od2")
    assert "cannot stop one-time spot instance i-spot: terminate it by hand" in plan.detail
    spot_only = rules.plan_action(budget, t, STOP_SPOT, fleet)
    assert spot_only is not None and spot_only.targets == ()
    assert spot_only.detail == "cannot stop one-time spot instance i-spot: terminate it by hand"
    assert rules.plan_action(budget, t, NOTIFY, fleet) is None
    assert rules.plan_action(Budget("none", 1.0, scope="tag:Budget=none"), t, STOP_ALL, fleet) is None


def test_suspend_cronjobs_follows_the_scope() -> None:
    crons = [CronJob("c1", "nightly", "nlp", "0 2 * * *", 0.0), CronJob("c2", "bench", "nlp", "0 * * * *", 0.0, suspended=True),
             CronJob("c3", "eval", "research", "0 * * * *", 0.0)]
    t = Threshold(100.0, actions=(SUSPEND,))
    plan = rules.plan_action(Budget("nlp", 1.0, scope="namespace:nlp"), t, SUSPEND, [], crons)
    assert plan is not None and plan.targets == ("c1",) and plan.detail == "suspend 1 CronJob: nlp/nightly"
    everything = rules.plan_action(Budget("all", 1.0), t, SUSPEND, [], crons)
    assert everything is not None and everything.targets == ("c1", "c3")
    assert rules.plan_action(Budget("tagged", 1.0, scope="tag:Project=nlp"), t, SUSPEND, [], crons) is None


def test_automatic_confirmation_is_never_accepted_for_a_terminate() -> None:
    params = (("budget", "research"),)
    check_confirmation(ActionRequest(ActionKind.STOP, "i-1", confirmation=automatic_confirmation("research"), params=params))
    check_confirmation(ActionRequest(ActionKind.SUSPEND_CRONJOB, "c1", confirmation="automatic:research", params=params))
    with pytest.raises(ActionError, match="never runs automatically"):
        check_confirmation(ActionRequest(ActionKind.TERMINATE, "i-1", confirmation="automatic:research", params=params))
    with pytest.raises(ActionError, match="names no automatic budget"):
        check_confirmation(ActionRequest(ActionKind.STOP, "i-1", confirmation="automatic:other", params=params))
    with pytest.raises(ActionError, match="needs a yes"):
        check_confirmation(ActionRequest(ActionKind.SUSPEND_CRONJOB, "c1"))


# --------------------------------------------------------------------------- fired once per period


class FakeCloud:
    """Stands in for CloudOps: records the requests it would send."""

    def __init__(self) -> None:
        self.requests: list[ActionRequest] = []

    def perform(self, request: ActionRequest):  # noqa: ANN201
        check_confirmation(request)
        self.requests.append(request)


def test_notify_fires_once_per_threshold_per_period(tmp_path: Path) -> None:
    clock = FrozenClock(START)
    out = tmp_path / "notified"
    budget = Budget("research", 1000.0, scope="tag:Budget=research", thresholds=(Threshold(50.0), Threshold(80.0)),
                    notify_command=f'echo "$GPUCONSOLE_BUDGET $GPUCONSOLE_THRESHOLD $GPUCONSOLE_BUDGET_PERCENT" >> {out}')
    hours = (START - MONTH) / 3600
    fleet = [inst("i-a", price=600.0 / hours, tags=(("Budget", "research"),))]  # $600 so far this month
    ops = BudgetOps(clock=clock)
    ops.add(budget)
    statuses, pending, alerts = ops.evaluate(snapshot(START, fleet))
    assert [t.percent for t in statuses[0].crossed] == [50.0] and pending == ()
    assert any(a.message.startswith("budget research passed 50%") for a in alerts)
    assert ops.wait_idle(10)
    assert out.read_text().split("\n")[0] == "research 50 60.0"
    assert ops.take_bell() and not ops.take_bell()
    for _ in range(3):  # every poll: still crossed, not notified again
        clock.advance(60)
        ops.evaluate(snapshot(clock(), fleet))
    assert ops.wait_idle(10)
    assert out.read_text().count("\n") == 1 and ops.bell_count == 1

    next_month = rules.costs.month_end(START) + 20 * 86400  # 20 days into December: $600 again
    clock.t = next_month
    fleet_dec = [inst("i-a", price=600.0 / (20 * 24), tags=(("Budget", "research"),), launch=MONTH)]
    ops.evaluate(snapshot(next_month, fleet_dec))
    assert ops.wait_idle(10)
    assert out.read_text().splitlines()[1].startswith("research 50 ")
    assert ops.bell_count == 2


def test_fired_state_outlives_a_restart_in_the_store(tmp_path: Path) -> None:
    clock = FrozenClock(START)
    hits = tmp_path / "hits"
    budget = Budget("all", 1.0, thresholds=(Threshold(100.0),), notify_command=f"echo x >> {hits}")
    fleet = [inst("i-a")]
    with Store(tmp_path / "cache.db") as store:
        first = BudgetOps(store=store, clock=clock)
        first.add(budget)
        first.evaluate(snapshot(START, fleet))
        assert first.wait_idle(10)
        first.close()
        again = BudgetOps(store=store, clock=clock)  # a new session on the same database
        assert [b.name for b in again.budgets()] == ["all"]
        again.evaluate(snapshot(START + 60, fleet))
        assert again.wait_idle(10)
        assert hits.read_text() == "x\n" and again.bell_count == 0
        again.close()


def test_nothing_fires_until_the_store_is_attached(tmp_path: Path) -> None:
    hits = tmp_path / "hits"
    ops = BudgetOps(store_pending=True, clock=lambda: START)
    ops.add(Budget("all", 1.0, thresholds=(Threshold(100.0),), notify_command=f"echo x >> {hits}"))
    ops.evaluate(snapshot(START, [inst("i-a")]))
    assert ops.wait_idle(5) and not hits.exists() and ops.bell_count == 0
    with Store(tmp_path / "cache.db") as store:
        ops.attach_store(store)
        assert [b.name for b in store.budgets()] == ["all"], "a budget added while the store opened is saved"
        ops.evaluate(snapshot(START, [inst("i-a")]))
        assert ops.wait_idle(10) and hits.read_text() == "x\n"
        ops.close()


class Hook(BaseHTTPRequestHandler):
    received: list[dict] = []
    status = 204

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers["Content-Length"]))
        Hook.received.append({"type": self.headers["Content-Type"], "body": json.loads(body)})
        self.send_response(Hook.status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def hook_url():
    Hook.received, Hook.status = [], 204
    server = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hooks/secret-token"
    finally:
        server.shutdown()
        server.server_close()


def test_webhook_gets_json_and_a_failure_is_an_alert(hook_url: str) -> None:
    clock = FrozenClock(START)
    ops = BudgetOps(clock=clock)
    ops.add(Budget("all", 1.0, thresholds=(Threshold(100.0),), webhook=hook_url))
    ops.evaluate(snapshot(START, [inst("i-a")]))
    assert ops.wait_idle(10)
    [hit] = Hook.received
    assert hit["type"] == "application/json"
    body = hit["body"]
    assert body["budget"] == "all" and body["threshold"] == {"percent": 100.0, "basis": "actual", "actions": ["notify"]}
    assert body["spent"] > 1.0 and body["message"].startswith("budget all passed 100%")

    Hook.status = 500
    ops.add(Budget("other", 1.0, thresholds=(Threshold(100.0),), webhook=hook_url))
    ops.evaluate(snapshot(START, [inst("i-a")]))
    assert ops.wait_idle(10)
    _, _, alerts = ops.evaluate(snapshot(START, [inst("i-a")]))
    failed = [a for a in alerts if "notify failed" in a.message]
    assert failed and "HTTP 500" in failed[0].message
    assert "secret-token" not in failed[0].message, "a webhook's path is never shown"


def test_a_hanging_notify_command_is_killed_after_its_timeout(tmp_path: Path) -> None:
    ops = BudgetOps(clock=lambda: START, notify_timeout=0.5)
    ops.add(Budget("slow", 1.0, thresholds=(Threshold(100.0),), notify_command="sleep 30 & sleep 30"))
    ops.evaluate(snapshot(START, [inst("i-a")]))
    assert ops.wait_idle(10), "the timeout holds even when the command started children"
    _, _, alerts = ops.evaluate(snapshot(START, [inst("i-a")]))
    assert any("did not finish in 0.5 s" in a.message for a in alerts)


def test_crossing_environment_and_message() -> None:
    budget = Budget("research", 1000.0, scope="tag:Budget=research")
    crossing = Crossing(budget, Threshold(100.0, ThresholdBasis.FORECAST), 820.0, 1500.0, MONTH, START)
    env = crossing.environment()
    assert env["GPUCONSOLE_BUDGET"] == "research" and env["GPUCONSOLE_THRESHOLD_BASIS"] == "forecast"
    assert env["GPUCONSOLE_BUDGET_SPENT"] == "820.00" and env["GPUCONSOLE_BUDGET_PERIOD_START"] == "2026-11-01T00:00:00Z"
    assert crossing.message() == "budget research forecast passed 100%: heading for $1,500 of $1,000 (now 82%)"


# --------------------------------------------------------------------------- automatic and confirmed actions


def test_automatic_stop_runs_once_and_a_restarted_instance_waits_for_a_user() -> None:
    clock = FrozenClock(START)
    cloud = FakeCloud()
    ops = BudgetOps(clock=clock, cloud=lambda: cloud)
    ops.add(Budget("research", 1.0, scope="tag:Budget=research", automatic=True,
                   thresholds=(Threshold(100.0, actions=(NOTIFY, STOP_ALL)),)))
    tagged = (("Budget", "research"),)
    fleet = [inst("i-a", tags=tagged), inst("i-spot", tags=tagged, market=Market.SPOT), inst("i-untagged")]
    _, pending, _ = ops.evaluate(snapshot(clock(), fleet))
    assert [(p.targets, p.automatic) for p in pending] == [(("i-a",), True)]
    assert ops.wait_idle(10)
    assert [(r.kind, r.target, r.region, r.confirmation) for r in cloud.requests] == [
        (ActionKind.STOP, "i-a", "us-east-1", "automatic:research")]
    _, _, alerts = ops.evaluate(snapshot(clock(), fleet))  # the poll that still shows i-a running predates the stop
    assert any("stopped i-a" in a.message and "cannot stop one-time spot instance i-spot" in a.message for a in alerts)
    assert ops.pending() == ()

    clock.advance(60)  # a later poll: someone started i-a again in the same period
    _, pending, alerts = ops.evaluate(snapshot(clock(), fleet))
    assert ops.wait_idle(10) and len(cloud.requests) == 1, "not stopped automatically a second time"
    [again] = pending
    assert again.targets == ("i-a",) and not again.automatic and "runs again only when confirmed" in again.detail
    assert any("waits for confirmation" in a.message for a in alerts)
    with pytest.raises(ActionError, match="needs a yes"):
        ops.run(again, "")
    result = ops.run(again, "yes")
    assert result.ok and "stopped i-a" in result.message and cloud.requests[-1].confirmation == "yes"


def test_automatic_actions_wait_for_a_live_source() -> None:
    cloud = FakeCloud()
    ops = BudgetOps(clock=lambda: START, cloud=lambda: cloud)
    ops.add(Budget("all", 1.0, automatic=True, thresholds=(Threshold(100.0, actions=(STOP_ALL,)),)))
    for state in (SourceState.STALE, SourceState.ERROR):
        ops.evaluate(snapshot(START, [inst("i-a")], state=state))
    assert ops.wait_idle(5) and cloud.requests == [], "never on cached or stale data"


def test_a_manual_budget_stops_nothing_until_confirmed() -> None:
    cloud = FakeCloud()
    ops = BudgetOps(clock=lambda: START, cloud=lambda: cloud)
    ops.add(Budget("all", 1.0, thresholds=(Threshold(100.0, actions=(STOP_ALL,)),)))
    _, [pending], _ = ops.evaluate(snapshot(START, [inst("i-a"), inst("i-b")]))
    assert not pending.automatic and pending.targets == ("i-a", "i-b")
    assert ops.wait_idle(5) and cloud.requests == []
    with pytest.raises(ActionError, match="not automatic"):
        ops.run(pending, "automatic:all")
    assert ops.run(pending, "yes").ok
    assert [r.target for r in cloud.requests] == ["i-a", "i-b"]


def test_suspend_cronjobs_through_the_job_backend() -> None:
    class Jobs:
        suspended: list[str] = []

        def suspend_cronjob(self, uid: str, suspended: bool = True) -> None:
            self.suspended.append(uid)

    jobs = Jobs()
    ops = BudgetOps(clock=lambda: START, jobs=lambda: jobs)
    ops.add(Budget("nlp", 1.0, scope="namespace:nlp", automatic=True, thresholds=(Threshold(100.0, actions=(SUSPEND,)),)))
    crons = [CronJob("c1", "nightly", "nlp", "0 2 * * *", 0.0)]
    running = [Job("j", "train", "nlp", JobState.RUNNING, 0.0, node="n1")]
    ops.evaluate(snapshot(START, [inst("i-a", node="n1")], crons, running))
    assert ops.wait_idle(10) and jobs.suspended == ["c1"]
    assert ops.log.recent()[-1].request.kind is ActionKind.SUSPEND_CRONJOB


def test_add_and_remove_check_where_a_budget_comes_from(tmp_path: Path) -> None:
    config = parse_config('[[budgets]]\nname = "declared"\namount = 5\n', tmp_path / "config.toml")
    ops = BudgetOps(config=config, demo_start=START)
    assert [b.origin for b in ops.budgets()] == ["demo"] * 5 + ["config"]
    with pytest.raises(ActionError, match=r"declared in the config file .*config.toml: it cannot be removed"):
        ops.remove("declared")
    with pytest.raises(ActionError, match="demo budget"):
        ops.remove("fleet")
    with pytest.raises(ActionError, match="no budget named nope"):
        ops.remove("nope")
    with pytest.raises(ActionError, match="bad amount"):
        ops.add(Budget("x", -1.0))
    assert "session only" in ops.add(Budget("mine", 10.0)).message
    with pytest.raises(ActionError, match="exists"):
        ops.add(Budget("mine", 20.0))
    assert ops.add(Budget("mine", 20.0), replace=True).message.startswith("replaced budget mine: $20")
    assert ops.remove("mine").ok and ops.get("mine") is None
    # The three refused removes are recorded as failed attempts (an audit names every attempt).
    done = [(r.request.kind, r.ok) for r in ops.log.recent()]
    assert done.count((ActionKind.BUDGET_REMOVE, False)) == 3
    assert [k for k, ok in done if ok] == [ActionKind.BUDGET_ADD, ActionKind.BUDGET_ADD, ActionKind.BUDGET_REMOVE]


# --------------------------------------------------------------------------- the configuration file


def test_config_file_budgets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "config.toml"
    path.write_text("""
[[budgets]]
name = "research"
amount = 1000
scope = "tag:Budget=research"
thresholds = ["80:notify", "100:notify+stop-all"]
automatic = true
webhook = "https://hooks.example.com/gpu"

[[budgets]]
name = "november"
amount = 5_000.5
starts = 2026-11-01
ends = "2026-11-30"
notify_command = "logger budget"
""")
    config = load_config(path)
    research, november = config.budgets
    assert research == Budget("research", 1000.0, BudgetPeriod.MONTHLY, "tag:Budget=research",
                              (Threshold(80.0), Threshold(100.0, actions=(NOTIFY, STOP_ALL))), automatic=True,
                              webhook="https://hooks.example.com/gpu", origin="config")
    assert november.period is BudgetPeriod.CUSTOM and november.thresholds == DEFAULT_THRESHOLDS
    assert rules.describe_period(november) == "2026-11-01 to 2026-11-30"
    monkeypatch.setenv("GPUCONSOLE_CONFIG", str(path))
    assert load_config().budgets == config.budgets
    monkeypatch.delenv("GPUCONSOLE_CONFIG")
    assert load_config().path is None, "no file at the default place: no configuration"


@pytest.mark.parametrize(("text", "words"), [
    ('[[budgets]]\nname = "a"\namount = -1\n', "[[budgets]] #1 (a) key amount: expected a number of dollars"),
    ('[[budgets]]\nname = "a"\namount = 1\ncolour = "red"\n', "[[budgets]] #1 key colour: unknown key"),
    ('[[budgets]]\nname = "a"\namount = 1\nthresholds = ["80:boom"]\n', "(a) key thresholds: bad threshold '80:boom'"),
    ('[[budgets]]\nname = "a"\namount = 1\nthresholds = "80"\n', "key thresholds: expected a list of strings"),
    ('[[budgets]]\nname = "a"\namount = 1\nscope = "team"\n', "key scope: bad budget scope"),
    ('[[budgets]]\nname = "a"\namount = 1\nperiod = "weekly"\n', "key period: bad period 'weekly'"),
    ('[[budgets]]\nname = "a"\namount = 1\nperiod = "custom"\n', "key starts: "),
    ('[[budgets]]\nname = "a"\namount = 1\nstarts = 2026-11-05\nends = 2026-11-01\n', "key ends: "),
    ('[[budgets]]\nname = "a"\namount = 1\nautomatic = "yes"\n', "key automatic: expected true or false"),
    ('[[budgets]]\nname = "a"\namount = 1\nwebhook = "http://x.example"\n', "key webhook: "),
    ('[[budgets]]\nname = "a"\namount = 1\n[[budgets]]\nname = "a"\namount = 2\n', "#2 key name: budget 'a' is declared twice"),
    ('[[budgets]]\namount = 1\n', "#1 key name: every budget needs a name"),
    ('budgets = 3\n', "key budgets: write each budget as a [[budgets]] table"),
    ('[[budgets]\nname = "a"\n', "not valid TOML"),
])
def test_config_errors_name_the_file_and_the_key(tmp_path: Path, text: str, words: str) -> None:
    path = tmp_path / "config.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert message.startswith(f"{path}: ") and words in message and "\n" not in message


def test_a_named_config_file_must_exist(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such configuration file"):
        load_config(tmp_path / "missing.toml")


def test_the_console_opens_with_a_bad_config_file_and_says_so(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('[[budgets]]\nname = "a"\n')
    from gpuconsole.core.fleet.console import Console, ConsoleOptions
    from gpuconsole.core.fleet.sources import SourceOptions

    console = Console(ConsoleOptions(sources=SourceOptions(cloud="off", gpus="off"), config_path=path))
    try:
        [alert] = [a for a in console.snapshot.alerts if a.source == "config"]
        assert alert.severity is Severity.WARNING and str(path) in alert.message and "key amount" in alert.message
    finally:
        console.close()


# --------------------------------------------------------------------------- the demo and the launch wizard


def test_the_demo_sprint_passes_50_and_80_percent_in_the_first_minutes() -> None:
    clock = FrozenClock()
    console = demo_console(clock=clock)
    console.start(open_store=False)
    try:
        wait_for(lambda: all(s.state is SourceState.LIVE for s in console.snapshot.sources))

        def sprint():  # noqa: ANN202
            return next(b for b in console.snapshot.budgets if b.budget.name == "sprint")

        first = sprint()
        assert first.budget.origin == "demo" and first.budget.starts == START and first.spent == 0.0
        assert first.budget.amount == pytest.approx(first.burn_per_hour * rules.SPRINT_FULL_S / 3600, abs=0.01)
        for minutes, passed in ((3.0, {50.0}), (4.5, {50.0, 80.0})):
            clock.t = START + minutes * 60
            console.refresh()
            wait_for(lambda passed=passed: {t.percent for t in sprint().crossed} == passed)
        assert not [p for p in console.snapshot.pending_actions if p.budget == "sprint"]
        clock.t = START + 6 * 60
        console.refresh()
        wait_for(lambda: any(p.budget == "sprint" for p in console.snapshot.pending_actions))
        [stop] = [p for p in console.snapshot.pending_actions if p.budget == "sprint"]
        assert stop.action is STOP_ALL and not stop.automatic and stop.targets
        assert "cannot stop one-time spot instances" in stop.detail
        # Everything that bills and can be stopped: running on-demand instances, the Azure Spot VM
        # (stopped and started like them), and the Azure VM stopped but not deallocated.
        stoppable = {i.instance_id for i in console.snapshot.instances
                     if (i.state is InstanceState.RUNNING and (i.market is Market.ON_DEMAND or i.stoppable_spot))
                     or (i.state is InstanceState.STOPPED and i.bills_now)}
        assert set(stop.targets) == stoppable
        assert any(i.instance_id in stop.targets and i.state is InstanceState.STOPPED for i in console.snapshot.instances)
    finally:
        console.close()


def test_launch_impact() -> None:
    now = MONTH + 10 * 86400  # ten days into November: 20 days left
    ops = BudgetOps(clock=lambda: now)
    ops.add(Budget("research", 1000.0, scope="tag:Budget=research"))
    ops.add(Budget("fleet", 50_000.0))
    ops.add(Budget("daily", 50_000.0, period=BudgetPeriod.DAILY))
    tagged = (("Budget", "research"),)
    ops.evaluate(snapshot(now, [inst("i-a", price=820.0 / 240, tags=tagged, launch=MONTH)]))
    line = ops.launch_impact("research", 98.0)
    assert line == "budget research: $820 of $1,000 now; this launch adds $98/h → forecast $49,500 (4950%) by period end"
    assert ops.launch_impact("", 1.0).startswith("budget fleet: $820 of $50,000 now")
    assert ops.launch_impact("nobody", 1.0) is None
    ops.add(Budget("gpu-team", 2000.0, scope="tag:Budget=team-x"))
    ops.evaluate(snapshot(now, []))
    assert ops.launch_impact("team-x", 1.0).startswith("budget gpu-team: $0.00 of $2,000 now")
