"""``serve-scale`` autopilot rules: a service's replicas follow its serving figures within min and
max, after the condition's duration, never inside the cooldown, never on stale figures, never
beside an HPA that scales the same service; a replica waiting for GPUs counts as pending GPUs for
a ``scale`` rule; and on the seeded demo the embedding service gets a replica within five
minutes, through the one action path, audited as the rule."""

from __future__ import annotations

import json

import pytest

from gpuconsole.core.ops.autopilot.engine import Engine
from gpuconsole.core.ops.autopilot.figures import GpuIndex
from gpuconsole.core.ops.autopilot.rules import RuleError, Scope, rule_from_table
from gpuconsole.core.ops.autopilot.state import AutopilotState
from gpuconsole.model import (
    FleetSnapshot,
    Service,
    ServiceHpa,
    ServiceReplica,
    SourceKind,
    SourceState,
    SourceStatus,
)
from tests.helpers import FrozenClock, demo_console
from tests.showcase import run_autopilot

LIVE = tuple(SourceStatus(k.value, k, SourceState.LIVE, 0.0) for k in SourceKind)
RULE = {"name": "chat-scale", "kind": "serve-scale", "service": "chat/llm", "scale_out": "p99_ms > 300 for 2m",
        "scale_in": "rps < 1 for 10m", "min": 2, "max": 4, "step": 1, "cooldown": "5m"}


def service(*, replicas: int = 2, ready: int | None = None, p99: float | None = 200.0, rps: float | None = 10.0,
            hpa: ServiceHpa | None = None) -> Service:
    return Service("chat", "llm", replicas_desired=replicas, replicas_ready=replicas if ready is None else ready,
                   p99_ms=p99, rps=rps, hpa=hpa)


def snap(now: float, *services: Service, sources: tuple[SourceStatus, ...] = LIVE) -> FleetSnapshot:
    return FleetSnapshot(now, services=services, sources=sources)


class Hands:
    """The cluster boundary: records each scale it is asked for."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

    def scale_service(self, rule: object, svc: Service, replicas: int, figures: str) -> str:
        self.calls.append((svc.key, replicas))
        return f"scaled to {replicas}"


def engine_for(table: dict, state: AutopilotState | None = None) -> Engine:
    return Engine([rule_from_table(table)], state or AutopilotState())


def test_a_p99_breach_raises_replicas_after_its_duration_then_the_cooldown_holds() -> None:
    engine, hands = engine_for(RULE), Hands()
    for t in (0.0, 60.0):
        [d] = engine.tick(snap(t, service(p99=450.0)), hands)
        assert d.verb == "none" and not hands.calls  # not yet two minutes
    [d] = engine.tick(snap(120.0, service(p99=450.0)), hands)
    assert d.verb == "scale" and "2 → 3" in d.reason and d.ok and d.targets == ("chat/llm",)
    assert hands.calls == [("chat/llm", 3)] and ("p99_ms", 450.0) in d.figures
    [d] = engine.tick(snap(180.0, service(replicas=3, p99=450.0)), hands)
    assert d.verb == "wait" and "cooldown" in d.reason and len(hands.calls) == 1
    [d] = engine.tick(snap(480.0, service(replicas=4, p99=450.0)), hands)
    assert d.verb == "none" and "at max" in d.reason and len(hands.calls) == 1


def test_no_action_on_stale_figures_and_the_duration_starts_over() -> None:
    stale = tuple(SourceStatus(s.name, s.kind, SourceState.STALE if s.kind is SourceKind.SERVICES else s.state, 0.0)
                  for s in LIVE)
    engine, hands = engine_for(RULE), Hands()
    engine.tick(snap(0.0, service(p99=450.0)), hands)
    [d] = engine.tick(snap(120.0, service(p99=450.0), sources=stale), hands)
    assert d.verb == "wait" and "stale" in d.reason and not hands.calls
    [d] = engine.tick(snap(130.0, service(p99=450.0)), hands)
    assert d.verb == "none" and not hands.calls  # two minutes of live figures again before it acts


def test_an_unknown_p99_never_holds() -> None:
    engine, hands = engine_for(RULE), Hands()
    for t in range(0, 600, 60):
        [d] = engine.tick(snap(float(t), service(p99=None, rps=None)), hands)
    assert d.verb == "none" and not hands.calls


def test_it_refuses_in_one_line_to_fight_an_hpa() -> None:
    engine, hands = engine_for(RULE), Hands()
    hpa = ServiceHpa("llm", 2, 8, 2, 2, ("cpu 80%",))
    for t in (0.0, 120.0, 240.0):
        [d] = engine.tick(snap(t, service(p99=900.0, hpa=hpa)), hands)
    assert d.verb == "blocked" and "HPA llm" in d.reason and "will not fight" in d.reason and "\n" not in d.reason
    assert not hands.calls


def test_it_waits_for_added_replicas_to_be_ready_and_scales_in_to_min() -> None:
    engine, hands = engine_for({**RULE, "cooldown": "0s"}), Hands()
    engine.tick(snap(0.0, service(replicas=3, ready=2, p99=900.0)), hands)
    [d] = engine.tick(snap(120.0, service(replicas=3, ready=2, p99=900.0)), hands)
    assert d.verb == "wait" and "2/3 replicas are ready" in d.reason and not hands.calls
    engine = engine_for({**RULE, "cooldown": "0s"})
    for t in range(0, 660, 60):
        [d] = engine.tick(snap(float(t), service(replicas=3, rps=0.2, p99=50.0)), hands)
    assert hands.calls == [("chat/llm", 2)]
    [d] = engine.tick(snap(720.0, service(replicas=2, rps=0.2, p99=50.0)), hands)
    assert d.verb == "none" and "at min" in d.reason


def test_a_service_that_is_gone_is_left_alone() -> None:
    engine, hands = engine_for(RULE), Hands()
    [d] = engine.tick(snap(0.0), hands)
    assert d.verb == "none" and "no service chat/llm" in d.reason


@pytest.mark.parametrize(("change", "key", "words"), [
    ({"service": None}, "service", "NAMESPACE/NAME"),
    ({"service": "llm"}, "service", "NAMESPACE/NAME"),
    ({"scale_out": "gpu_util > 80"}, "scale_out", "unknown figure 'gpu_util'"),
    ({"min": 5}, "min", "above max"),
    ({"scope": "all"}, "scope", "names its service"),
])
def test_a_bad_serve_scale_table_is_one_line_naming_the_key(change: dict, key: str, words: str) -> None:
    table = {k: v for k, v in {**RULE, **change}.items() if v is not None}
    with pytest.raises(RuleError) as caught:
        rule_from_table(table)
    assert f"rule 'chat-scale' key {key}:" in str(caught.value) and words in str(caught.value)


def test_a_replica_waiting_for_gpus_counts_as_pending_gpus_for_a_scale_rule() -> None:
    waiting = ServiceReplica("llm-abc", None, phase="Pending", gpus=2.0, pending_reason="0/3 nodes: Insufficient nvidia.com/gpu")
    running = ServiceReplica("llm-def", "node-1", phase="Running", ready=True, gpus=2.0)
    svc = Service("chat", "llm", replicas_desired=2, replicas_ready=1, replicas=(waiting, running))
    index = GpuIndex(snap(0.0, svc))
    assert index.pending(Scope("namespace", "chat"))[:2] == (2.0, 1.0)
    assert index.pending(Scope("namespace", "other"))[:2] == (0.0, 0.0)


def test_the_demo_embedding_service_gets_a_replica_within_five_minutes_audited_as_the_rule() -> None:
    clock = FrozenClock()
    console = demo_console(clock=clock)
    try:
        console.hub.poll_once()
        before = next(s for s in console.compose().services if s.key == "search/text-embed").replicas_desired
        run_autopilot(console, clock, 300)
        decision = console.services.autopilot.engine.last["embed-scale"]
        records = [r for r in console.services.guard.audit.records() if r.actor == "autopilot:embed-scale"]
        console.hub.poll_once()
        after = next(s for s in console.compose().services if s.key == "search/text-embed").replicas_desired
    finally:
        console.close()
    acted = [r for r in records if r.result == "ok"]
    assert acted and acted[0].action == "scale-service" and acted[0].target == "search/text-embed"
    assert "p99_ms" in json.loads(acted[0].params)["figures"]
    assert after == before + 1, decision


def test_the_services_own_prometheus_wins_over_the_fleets_and_a_bad_key_is_one_line() -> None:
    from gpuconsole.backends.prometheus import PrometheusSettings
    from gpuconsole.core.config import ConfigError
    from gpuconsole.core.fleet.prometheus_config import serving_figures
    from gpuconsole.core.serving.config import decode

    fleet = PrometheusSettings("http://127.0.0.1:9090")
    assert serving_figures(decode({}), None) is None  # no Prometheus at all: no figures, no error
    assert serving_figures(decode({}), fleet).prometheus is fleet
    own = serving_figures(decode({"prometheus": {"url": "http://127.0.0.1:9091"}, "window": "5m"}, "c.toml"), fleet)
    assert own.prometheus.url == "http://127.0.0.1:9091" and own.window_s == 300.0
    with pytest.raises(ConfigError, match=r"^c.toml: \[services.prometheus\] key tokn: ") as caught:
        serving_figures(decode({"prometheus": {"url": "http://x", "tokn": "a"}}, "c.toml"), fleet)
    assert "\n" not in str(caught.value)
