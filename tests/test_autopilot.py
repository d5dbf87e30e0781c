"""The autopilot: rule parsing, the rule language against a reference, and the engine on a
fixed clock (scale-out after its duration, cooldowns, min/max, the budget guard, idle-stop,
spot recovery), acting through the action path on the simulated cloud."""

from __future__ import annotations

import json
import operator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuconsole.backends.sim import make_sim
from tests.showcase import FrozenClock
from gpuconsole.core.access.access import UsersTable
from gpuconsole.core.access.audit import AuditLog
from gpuconsole.core.access.guard import Guard
from gpuconsole.core.access.mfa import MfaStore
from gpuconsole.core.ops.actions import ActionLog
from gpuconsole.core.ops.autopilot.actuator import CloudActuator, next_zone
from gpuconsole.core.ops.autopilot.engine import ActionFailed, Engine
from gpuconsole.core.ops.autopilot.expr import Comparison, ExpressionError, evaluate, parse, parse_duration
from gpuconsole.core.ops.autopilot.rules import RuleError, rule_from_table
from gpuconsole.core.ops.autopilot.state import AutopilotState
from gpuconsole.core.ops.cloud_ops import CloudOps
from gpuconsole.model import (
    Budget,
    BudgetStatus,
    FleetSnapshot,
    Gpu,
    GpuProcess,
    Instance,
    InstanceState,
    Job,
    JobState,
    Market,
    SourceKind,
    SourceState,
    SourceStatus,
)

POOL = {"name": "train-pool", "kind": "scale", "pool": "tag:Pool=train",
        "launch": {"type": "g5.xlarge", "region": "us-east-1", "ami": "ami-0abc1234", "tags": {"Pool": "train"}},
        "scale_out": "gpu_util > 80 for 10m", "scale_in": "gpu_util < 20 for 30m",
        "min": 0, "max": 2, "step": 1, "cooldown": "15m"}


# --------------------------------------------------------------------------- parsing

@pytest.mark.parametrize(("change", "key", "words"), [
    ({"scale_out": "gpu_util >> 80"}, "scale_out", "expected a number"),
    ({"scale_out": "gpu_util > 80 %"}, "scale_out", "unexpected"),
    ({"scale_out": "gpu_utl > 80"}, "scale_out", "unknown figure"),
    ({"scale_out": "gpu_util > 80 for 10x"}, "scale_out", "unknown unit"),
    ({"scale_out": "gpu_util > 80 and"}, "scale_out", "ends where"),
    ({"scale_out": "(gpu_util > 80"}, "scale_out", "ends where"),
    ({"scale_out": "gpu_util > high"}, "scale_out", "expected a number"),
    ({"cooldown": "15 minutes"}, "cooldown", "not a duration"),
    ({"cooldown": "15y"}, "cooldown", "unknown unit"),
    ({"pool": "tags:Pool=train"}, "pool", "not a scope"),
    ({"pool": "tag:Pool"}, "pool", "tag:KEY=VALUE"),
    ({"min": 3}, "min", "above max"),
    ({"max": "four"}, "max", "whole number"),
    ({"step": 0}, "step", "whole number"),
    ({"colour": "red"}, "colour", "unknown key"),
    ({"kind": "scaler"}, "kind", "not a kind"),
    ({"launch": {"type": "g5.xlarge", "region": "us-east-1"}}, "launch.ami", "non-empty"),
    ({"launch": {**POOL["launch"], "market": "cheap"}}, "launch.market", "on-demand or spot"),
    ({"launch": {**POOL["launch"], "tags": {"Pool": "infer"}}}, "launch.tags", "the pool's"),
    ({"spot": "sometimes"}, "spot", "keep or terminate"),
    ({"launch": {**POOL["launch"], "ami": "ami-xyz"}}, "launch.ami", "hex digits"),
    ({"launch": {**POOL["launch"], "region": "mars-1"}}, "launch.region", "region name"),
])
def test_every_bad_field_is_one_line_naming_the_rule_and_the_key(change: dict, key: str, words: str) -> None:
    with pytest.raises(RuleError) as err:
        rule_from_table({**POOL, **change})
    text = str(err.value)
    assert "\n" not in text
    assert "rule 'train-pool'" in text and f"key {key}:" in text and words in text


def test_a_scale_rule_without_a_pool_names_the_pool_once() -> None:
    table = {k: v for k, v in POOL.items() if k not in ("pool", "scope")}
    with pytest.raises(RuleError) as err:
        rule_from_table(table)
    text = str(err.value)
    assert "key pool: required" in text and "key scope" not in text and text.count("rule 'train-pool'") == 1


def test_idle_stop_and_spot_recover_errors_name_their_keys() -> None:
    with pytest.raises(RuleError, match=r"rule 'autostop' key idle_for: .*not a duration"):
        rule_from_table({"name": "autostop", "kind": "idle-stop", "idle_for": "soon"})
    with pytest.raises(RuleError, match=r"rule 'spot' key scope: .*not a scope"):
        rule_from_table({"name": "spot", "kind": "spot-recover", "scope": "pool=train"})
    with pytest.raises(RuleError, match=r"rule 'spot' key fallback_after"):
        rule_from_table({"name": "spot", "kind": "spot-recover", "fallback_after": -1})


def test_the_issue_example_parses() -> None:
    rule = rule_from_table({**POOL, "scale_out": "gpu_util > 80 for 10m or pending_gpus > 0 for 5m"})
    assert rule.launch is not None and rule.launch.tag("Pool") == "train"
    assert rule.cooldown_s == 900 and rule.actor == "autopilot:train-pool"
    assert parse_duration("1.5h") == 5400


# --------------------------------------------------------------------------- the language vs a reference

OPS = {">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le, "==": operator.eq, "!=": operator.ne}


def reference_held(series: list[tuple[float, float]], op: str, threshold: float, duration: float, now: float) -> bool:
    """Straight from the definition: some sample at or before now - duration exists, and every
    sample from the last such one to the end satisfies the comparison."""
    anchors = [i for i, (ts, _) in enumerate(series) if ts <= now - duration]
    if not anchors:
        return False
    return all(OPS[op](v, threshold) for _, v in series[anchors[-1]:])


def reference(node: object, series: dict, now: float) -> bool:
    if isinstance(node, Comparison):
        return reference_held(series.get(node.figure, []), node.op, node.threshold, node.duration_s, now)
    if type(node).__name__ == "Not":
        return not reference(node.inner, series, now)  # type: ignore[attr-defined]
    results = [reference(p, series, now) for p in node.parts]  # type: ignore[attr-defined]
    return all(results) if node.op == "and" else any(results)  # type: ignore[attr-defined]


samples = st.lists(st.tuples(st.integers(0, 60), st.integers(0, 100)), max_size=30).map(
    lambda pts: [(float(sum(d for d, _ in pts[: i + 1])), float(v)) for i, (_, v) in enumerate(pts)])
comparison = st.builds(lambda f, op, t, d: f"{f} {op} {t}" + (f" for {d}s" if d else ""),
                       st.sampled_from(["gpu_util", "pending_gpus"]), st.sampled_from(list(OPS)),
                       st.integers(0, 100), st.sampled_from([0, 30, 60, 300, 600]))
expression = st.recursive(comparison, lambda inner: st.one_of(
    st.builds(lambda a, b: f"({a}) and ({b})", inner, inner),
    st.builds(lambda a, b: f"({a}) or ({b})", inner, inner),
    st.builds(lambda a: f"not ({a})", inner)), max_leaves=5)


@settings(max_examples=300, deadline=None)
@given(text=expression, util=samples, pending=samples, extra=st.integers(0, 120))
def test_the_evaluator_matches_the_reference_on_random_series(text: str, util: list, pending: list, extra: int) -> None:
    node = parse(text)
    series = {"gpu_util": util, "pending_gpus": pending}
    now = max([ts for ts, _ in util + pending], default=0.0) + extra
    assert evaluate(node, series, now) == reference(node, series, now)


def test_bad_expressions_raise() -> None:
    for text in ("", "gpu_util", "gpu_util >", "gpu_util > 1 for", "gpu_util > 1 or or gpu_util < 2", "x > 1", "gpu_util > 1)"):
        with pytest.raises(ExpressionError):
            parse(text)


# --------------------------------------------------------------------------- the engine on a fixed clock

LIVE = tuple(SourceStatus(k.value, k, SourceState.LIVE, 0.0) for k in SourceKind)


def inst(iid: str, node: str, *, market: Market = Market.ON_DEMAND, state: InstanceState = InstanceState.RUNNING,
         pool: str = "train", zone: str = "us-east-1a", reason: str = "") -> Instance:
    return Instance(iid, "g5.xlarge", "us-east-1", zone, market, state, 0.0, 1.0, gpus=1, node=node,
                    tags=(("Pool", pool),), state_reason=reason)


def gpu(node: str, util: float, *, process: bool = False) -> Gpu:
    procs = (GpuProcess(42, f"GPU-{node}", "python", 1000),) if process else ()
    return Gpu(f"GPU-{node}", node, 0, "A10G", util, 1000, 24000, 50, 100.0, 300.0, processes=procs)


def snap(now: float, instances: tuple[Instance, ...], gpus: tuple[Gpu, ...], *, jobs: tuple[Job, ...] = (),
         budgets: tuple[BudgetStatus, ...] = (), sources: tuple[SourceStatus, ...] = LIVE) -> FleetSnapshot:
    return FleetSnapshot(now, gpus=gpus, instances=instances, jobs=jobs, budgets=budgets, sources=sources)


class Hands:
    """The cloud boundary, recording what it was asked (and failing when told to)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, ...]] = []
        self.fail = False

    def launch(self, rule: object, count: int, figures: str) -> str:
        self._maybe_fail()
        self.calls.append(("launch", str(count)))
        return f"launched {count}"

    def stop(self, rule: object, instance: Instance, terminate: bool, figures: str) -> str:
        self._maybe_fail()
        self.calls.append(("terminate" if terminate else "stop", instance.instance_id))
        return "stopped"

    def relaunch(self, rule: object, instance: Instance, on_demand: bool, figures: str) -> str:
        self._maybe_fail()
        self.calls.append(("relaunch", instance.instance_id, "on-demand" if on_demand else "spot"))
        return "relaunched"

    def _maybe_fail(self) -> None:
        if self.fail:
            raise ActionFailed("InsufficientInstanceCapacity")


def engine_for(*tables: dict, state: AutopilotState | None = None) -> Engine:
    return Engine([rule_from_table(t) for t in tables], state or AutopilotState())


def test_scale_out_after_the_duration_and_not_before_then_cooldown_then_max() -> None:
    engine, hands = engine_for(POOL), Hands()
    pool = (inst("i-1", "n1"),)
    busy = (gpu("n1", 95.0),)
    for t in range(0, 600, 60):  # 0 … 540 s: under ten minutes of high utilization
        [d] = engine.tick(snap(float(t), pool, busy), hands)
        assert d.verb == "none" and not hands.calls
    [d] = engine.tick(snap(600.0, pool, busy), hands)
    assert d.verb == "launch" and d.ok and hands.calls == [("launch", "1")]
    assert dict(d.figures)["gpu_util"] == 95.0
    [d] = engine.tick(snap(660.0, pool, busy), hands)  # the new instance is not listed yet
    assert d.verb == "wait" and "cooldown 840 s left" in d.reason and len(hands.calls) == 1
    pool2 = (*pool, inst("i-2", "n2"))
    busy2 = (*busy, gpu("n2", 95.0))
    [d] = engine.tick(snap(600.0 + 900, pool2, busy2), hands)  # cooldown over, but max 2 reached
    assert d.verb == "none" and "max" in d.reason and len(hands.calls) == 1


def test_cooldown_holds_across_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "autopilot.db"
    table = {**POOL, "scale_out": "gpu_util > 80"}
    hands = Hands()
    engine_for(table, state=AutopilotState(path)).tick(snap(0.0, (inst("i-1", "n1"),), (gpu("n1", 95.0),)), hands)
    assert hands.calls == [("launch", "1")]
    again = engine_for(table, state=AutopilotState(path))  # a new process
    [d] = again.tick(snap(60.0, (inst("i-1", "n1"),), (gpu("n1", 95.0),)), hands)
    assert d.verb == "wait" and len(hands.calls) == 1


def test_min_holds_and_scale_in_never_goes_below_it() -> None:
    engine, hands = engine_for({**POOL, "min": 1, "scale_in": "gpu_util < 20"}), Hands()
    [d] = engine.tick(snap(0.0, (), ()), hands)
    assert d.verb == "launch" and "below min" in d.reason
    engine2, hands2 = engine_for({**POOL, "min": 1, "scale_in": "gpu_util < 20"}), Hands()
    [d] = engine2.tick(snap(0.0, (inst("i-1", "n1"),), (gpu("n1", 0.0),)), hands2)
    assert d.verb == "none" and "min" in d.reason and not hands2.calls


def test_scale_in_stops_the_idlest_instance_never_one_with_a_process() -> None:
    engine, hands = engine_for({**POOL, "scale_in": "gpu_util < 20"}), Hands()
    pool = (inst("i-1", "n1"), inst("i-2", "n2"), inst("i-3", "n3"))
    gpus = (gpu("n1", 0.0, process=True), gpu("n2", 9.0), gpu("n3", 3.0))
    [d] = engine.tick(snap(0.0, pool, gpus), hands)
    assert d.verb == "stop" and hands.calls == [("stop", "i-3")]


def test_the_budget_guard_blocks_a_launch() -> None:
    team = Budget("team-a", 1000.0)
    over = BudgetStatus(team, spent=400.0, forecast=1200.0, burn_per_hour=5.0)
    engine, hands = engine_for({**POOL, "scale_out": "gpu_util > 80", "budget_guard": "team-a"}), Hands()
    [d] = engine.tick(snap(0.0, (inst("i-1", "n1"),), (gpu("n1", 95.0),), budgets=(over,)), hands)
    assert d.verb == "blocked" and "team-a" in d.reason and "forecast" in d.reason and not hands.calls


def test_no_action_on_stale_data() -> None:
    stale = tuple(SourceStatus(s.name, s.kind, SourceState.STALE if s.kind is SourceKind.GPUS else s.state, 0.0)
                  for s in LIVE)
    engine, hands = engine_for({**POOL, "scale_out": "gpu_util > 80"}), Hands()
    [d] = engine.tick(snap(30.0, (inst("i-1", "n1"),), (gpu("n1", 95.0),), sources=stale), hands)
    assert d.verb == "wait" and "stale" in d.reason and not hands.calls


IDLE = {"name": "autostop", "kind": "idle-stop", "scope": "all", "idle_for": "30m"}


def test_idle_stop_never_touches_a_gpu_with_a_process_nor_unknown_telemetry() -> None:
    engine, hands = engine_for(IDLE), Hands()
    fleet = (inst("i-proc", "n1"), inst("i-idle", "n2"), inst("i-unmapped", "n9"),
             inst("i-spot", "n3", market=Market.SPOT))
    gpus = (gpu("n1", 0.0, process=True), gpu("n2", 0.0), gpu("n3", 0.0))
    for t in range(0, 1800, 300):
        [d] = engine.tick(snap(float(t), fleet, gpus), hands)
        assert d.verb == "none"
    [d] = engine.tick(snap(1800.0, fleet, gpus), hands)
    assert d.verb == "stop" and hands.calls == [("stop", "i-idle")]  # spot kept: spot = "keep"


def test_a_rule_failing_three_times_pauses_itself_and_alerts() -> None:
    alerts: list[str] = []
    engine = Engine([rule_from_table({**POOL, "scale_out": "gpu_util > 80"})], AutopilotState(), on_alert=alerts.append)
    hands = Hands()
    hands.fail = True
    verdicts = [engine.tick(snap(float(t), (inst("i-1", "n1"),), (gpu("n1", 95.0),)), hands)[0] for t in range(4)]
    assert [v.ok for v in verdicts[:3]] == [False, False, False]
    assert verdicts[3].verb == "paused" and len(alerts) == 1 and "train-pool" in alerts[0]


SPOT = {"name": "spot", "kind": "spot-recover", "scope": "tag:Pool=train", "fallback_after": 2}


def test_spot_recover_relaunches_in_another_zone_then_on_demand() -> None:
    engine, hands = engine_for(SPOT), Hands()
    gone = inst("i-s", "n1", market=Market.SPOT, state=InstanceState.TERMINATED,
                reason="Server.SpotInstanceTermination: Spot instance termination")
    job = Job("u1", "train-a", "ml", JobState.RUNNING, 0.0, gpus=1, node="n1")
    hands.fail = True
    first = engine.tick(snap(0.0, (gone,), (), jobs=(job,)), hands)[0]
    second = engine.tick(snap(60.0, (gone,), (), jobs=(job,)), hands)[0]
    hands.fail = False
    third = engine.tick(snap(120.0, (gone,), (), jobs=(job,)), hands)[0]
    assert "ml/train-a" in first.reason
    assert [c[2] for c in hands.calls] == ["on-demand"] and not first.ok and not second.ok and third.ok
    assert "spot in another zone" in first.reason and "on-demand" in third.reason
    assert engine.tick(snap(180.0, (gone,), ()), hands)[0].verb == "none"  # relaunched once only
    grouped = inst("i-g", "n2", market=Market.SPOT, state=InstanceState.TERMINATED,
                   reason="Server.SpotInstanceTermination: Spot instance termination")
    grouped = Instance(**{**{f: getattr(grouped, f) for f in grouped.__struct_fields__},
                          "tags": (("Pool", "train"), ("eks:nodegroup-name", "g5-spot"))})
    assert engine.tick(snap(240.0, (grouped,), ()), hands)[0].verb == "none"  # its node group replaces it
    assert next_zone(("us-east-1a", "us-east-1b", "us-east-1c"), "us-east-1b") == "us-east-1c"
    assert next_zone(("us-east-1a", "us-east-1b"), "us-east-1b") == "us-east-1a"


def test_actions_go_through_the_action_path_audited_as_the_rule(tmp_path: Path) -> None:
    now = [1_800_000_000.0]
    _gpus, _jobs, cloud = make_sim(seed=7, clock=lambda: now[0])
    audit = AuditLog(tmp_path / "audit.db", lambda: now[0])
    guard = Guard(UsersTable(tmp_path / "users.toml"), MfaStore(tmp_path / "mfa.json"), audit, user="ops")
    ops = CloudOps(cloud, lambda: None, clock=lambda: now[0], log=ActionLog(guard=guard))
    engine = engine_for({**POOL, "scale_out": "gpu_util > 80"})
    [d] = engine.tick(snap(now[0], (inst("i-1", "n1"),), (gpu("n1", 95.0),)), CloudActuator(ops))
    assert d.ok, d.outcome
    [record] = [r for r in audit.records() if r.action == "launch" and r.result != "started"]
    assert record.actor == "autopilot:train-pool"
    params = json.loads(record.params)
    assert params["rule"] == "train-pool" and "gpu_util=95" in params["figures"] and params["tag:Pool"] == "train"


# --------------------------------------------------------------------------- the simulated cloud

def sim_snapshot(gpus_face, jobs_face, cloud_face) -> FleetSnapshot:
    g, j, c = gpus_face.poll_gpus(), jobs_face.poll_jobs(), cloud_face.poll_instances()
    return FleetSnapshot(c.taken_at, gpus=g.gpus, jobs=j.jobs, instances=c.instances, sources=LIVE)


def test_spot_recover_on_the_simulator_relaunches_in_another_zone() -> None:
    now = [1_800_000_000.0]
    faces = make_sim(seed=7, clock=lambda: now[0], interrupt_spot_after=60)
    ops = CloudOps(faces[2], lambda: None, clock=lambda: now[0])
    engine = engine_for({**SPOT, "scope": "all"})
    [d] = engine.tick(sim_snapshot(*faces), CloudActuator(ops))
    assert d.verb == "none"  # nothing interrupted yet
    now[0] += 200
    snapshot = sim_snapshot(*faces)
    [gone] = [i for i in snapshot.instances if "SpotInstanceTermination" in i.state_reason]
    [d] = engine.tick(snapshot, CloudActuator(ops))
    assert d.verb == "relaunch" and d.ok, d.outcome
    [new] = [i for i in faces[2].poll_instances().instances if i.tag("gpuconsole:replaces") == gone.instance_id]
    assert new.instance_type == gone.instance_type and new.market is Market.SPOT
    assert new.availability_zone != gone.availability_zone
    assert engine.tick(sim_snapshot(*faces), CloudActuator(ops))[0].verb == "none"  # once only


def test_a_spot_storm_interrupts_every_spot_instance_at_once() -> None:
    from gpuconsole.backends.sim import FaultPlan

    with pytest.raises(ValueError, match="write cloud:spot-storm"):
        FaultPlan.parse("gpus:spot-storm")
    now = [1_800_000_000.0]
    faces = make_sim(seed=7, clock=lambda: now[0], faults=FaultPlan.parse("cloud:spot-storm=120"))
    spot = [i for i in faces[2].poll_instances().instances if i.market is Market.SPOT]
    assert len(spot) >= 2 and all(i.state is InstanceState.RUNNING for i in spot)
    now[0] += 119
    assert all(i.state is InstanceState.RUNNING for i in faces[2].poll_instances().instances if i.market is Market.SPOT)
    now[0] += 2
    after = {i.instance_id: i for i in faces[2].poll_instances().instances}
    assert all(after[i.instance_id].state is InstanceState.SHUTTING_DOWN and
               "SpotInstanceTermination" in after[i.instance_id].state_reason for i in spot)


def test_scale_out_on_the_simulator_waits_for_what_it_launched() -> None:
    now = [1_800_000_000.0]
    faces = make_sim(seed=7, clock=lambda: now[0])
    ops = CloudOps(faces[2], lambda: None, clock=lambda: now[0])
    table = {**POOL, "pool": "tag:Pool=burst", "launch": {**POOL["launch"], "tags": {"Pool": "burst"}},
             "scale_out": "pending_gpus > 0", "cooldown": "0s", "max": 3}
    engine = engine_for(table)
    [d] = engine.tick(sim_snapshot(*faces), CloudActuator(ops))
    assert d.verb == "launch" and d.ok
    launched = [i for i in faces[2].poll_instances().instances if i.tag("Pool") == "burst"]
    assert [(i.instance_type, i.state) for i in launched] == [("g5.xlarge", InstanceState.PENDING)]
    [d] = engine.tick(sim_snapshot(*faces), CloudActuator(ops))
    assert d.verb == "wait" and "still starting" in d.reason


def test_idle_stop_waits_while_gpu_or_job_data_is_stale() -> None:
    engine, hands = engine_for({**IDLE, "idle_for": "0s"}), Hands()
    fleet, gpus = (inst("i-idle", "n2"),), (gpu("n2", 0.0),)
    for kind in (SourceKind.GPUS, SourceKind.JOBS):
        stale = tuple(SourceStatus(s.name, s.kind, SourceState.ERROR if s.kind is kind else s.state, 0.0, error="down")
                      for s in LIVE)
        [d] = engine.tick(snap(0.0, fleet, gpus, sources=stale), hands)
        assert d.verb == "wait" and kind.value in d.reason and not hands.calls
    [d] = engine.tick(snap(1.0, fleet, gpus), hands)
    assert d.verb == "stop" and hands.calls == [("stop", "i-idle")]


def sim_console(tables: tuple[dict, ...], clock: FrozenClock, tmp_path: Path):  # noqa: ANN201 - a Console
    """The seeded demo console on a fixed clock, running ``tables`` as its rules."""
    import tomllib

    from tests.showcase import showcase_console

    config = tmp_path / "config.toml"
    config.write_text("".join(f"[[rules]]\n{_toml(t)}\n" for t in tables))
    assert tomllib.loads(config.read_text())["rules"]
    console = showcase_console(clock=clock)
    console.options.config_path = config
    console.services.autopilot.reload()
    return console


def _toml(table: dict) -> str:
    def value(v: object) -> str:
        if isinstance(v, dict):
            return "{ " + ", ".join(f"{k} = {value(x)}" for k, x in v.items()) + " }"
        return json.dumps(v)

    return "".join(f"{k} = {value(v)}\n" for k, v in table.items())


def step(console, clock: FrozenClock, seconds: int) -> FleetSnapshot:  # noqa: ANN001 - a Console
    clock.advance(seconds)
    console.hub.poll_once()
    return console.compose()


def test_on_the_simulator_idle_stop_never_touches_a_gpu_with_a_process(tmp_path: Path) -> None:
    from gpuconsole.core.ops.autopilot.actuator import CloudActuator as Hands_

    clock = FrozenClock()
    rule = {"name": "sweep", "kind": "idle-stop", "scope": "all", "idle_for": "1m", "spot": "terminate",
            "threshold": 100}  # any utilization counts as idle here: only processes, pods and jobs protect
    console = sim_console((rule,), clock, tmp_path)
    stopped: list[str] = []
    try:
        for _ in range(40):  # ten minutes, a refresh every 15 s
            snapshot = step(console, clock, 15)
            for d in console.services.autopilot.engine.tick(snapshot, Hands_(console.services.cloud)):
                if d.verb in ("stop", "terminate") and d.ok:
                    by_id = {i.instance_id: i for i in snapshot.instances}
                    for target in d.targets:
                        node = by_id[target].node
                        on_node = [g for g in snapshot.gpus if g.node == node]
                        if by_id[target].state is InstanceState.STOPPED:  # an Azure VM stopped, still billed
                            assert by_id[target].bills_now and not on_node, target  # powered off: runs nothing
                            stopped.append(target)
                            continue
                        assert on_node and not any(g.processes for g in on_node), target
                        assert not any(j.node == node and j.state is JobState.RUNNING for j in snapshot.jobs)
                        stopped.append(target)
    finally:
        console.close()
    assert stopped  # it did act: on the instances that ran nothing


def test_on_the_simulator_scale_out_comes_after_the_duration_not_before(tmp_path: Path) -> None:
    from gpuconsole.core.ops.autopilot.actuator import CloudActuator as Hands_

    clock = FrozenClock()
    rule = {"name": "burst", "kind": "scale", "pool": "tag:Project=vision", "scope": "namespace:team-vision",
            "launch": {"type": "g5.12xlarge", "region": "us-east-1", "ami": "ami-0a1b2c3d4e5f60718",
                       "tags": {"Project": "vision"}},
            "scale_out": "pending_gpus > 0 for 2m", "max": 9, "cooldown": "10m"}
    console = sim_console((rule,), clock, tmp_path)
    try:
        first = step(console, clock, 0)
        assert dict(console.services.autopilot.engine.tick(first, Hands_(console.services.cloud))[0].figures)["pending_gpus"] > 0
        verbs = [console.services.autopilot.engine.tick(step(console, clock, 15), Hands_(console.services.cloud))[0].verb for _ in range(8)]
    finally:
        console.close()
    assert verbs[:7] == ["none"] * 7  # 15 … 105 s: pending, but not for two minutes yet
    assert verbs[7] == "launch"  # 120 s


def test_on_a_shared_machine_a_logins_own_rule_plans_and_never_acts(tmp_path: Path) -> None:
    """Site settings exist: rules that act come from the site config (or ``rule add``); a rule
    in a login's own config file is kept, plan only, and says so in its decision."""
    from gpuconsole.core.ops.autopilot.loading import console_rules

    rule = '[[rules]]\nname = "{name}"\nkind = "idle-stop"\nscope = "all"\nidle_for = "30m"\n'
    site = tmp_path / "site.toml"
    site.write_text(rule.format(name="site-idle"))
    mine = tmp_path / "mine.toml"
    mine.write_text(rule.format(name="my-idle") + rule.format(name="site-idle"))  # the site's name: the site's wins
    rules = console_rules(mine, AutopilotState(), demo=False, site_config=site)
    assert [(r.name, r.plan_only) for r in rules] == [("site-idle", False), ("my-idle", True)]
    assert [(r.name, r.plan_only) for r in console_rules(mine, AutopilotState(), demo=False)] == [
        ("my-idle", False), ("site-idle", False)]  # a machine of one login: its own rules act
    engine, hands = Engine(list(rules), AutopilotState()), Hands()
    pool = (inst("i-1", "n1"),)
    idle = (gpu("n1", 0.0),)
    engine.tick(snap(0.0, pool, idle), hands)
    decisions = {d.rule: d for d in engine.tick(snap(1900.0, pool, idle), hands)}
    assert decisions["site-idle"].verb == "stop" and decisions["site-idle"].ok
    assert decisions["my-idle"].verb == "stop" and decisions["my-idle"].ok is None
    assert "plan only: on a shared machine a rule acts only from the site config" in decisions["my-idle"].reason
    assert hands.calls == [("stop", "i-1")]  # the site's rule alone
