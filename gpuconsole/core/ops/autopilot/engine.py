"""The autopilot engine: each refresh, every rule looks at live figures and decides.

Level-triggered, like a controller's reconcile: each :meth:`Engine.tick` reads one fresh
snapshot, keeps the figures' recent history, and returns one :class:`Decision` per rule
(``launch``, ``stop``, ``terminate``, ``relaunch``, ``scale`` (a service's replicas), or
``none``/``wait``/``blocked``/``paused``
with why). With an :class:`Actuator` the actions run, through the one action path; without one
(``plan``, ``--read-only``) nothing changes.

Never on stale data: a rule whose sources are not live decides ``wait`` and its history starts
over. Cooldowns and failures are kept in :class:`AutopilotState`, so they hold across restarts;
``max`` is counted from the cloud on every refresh.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from gpuconsole.core.ops.autopilot.expr import evaluate, figures_of, longest_duration
from gpuconsole.core.ops.autopilot.figures import GpuIndex, needed_sources, not_live, pool_figures, service_figures
from gpuconsole.core.ops.autopilot.rules import PLAN_ONLY_NOTE, Rule
from gpuconsole.core.ops.autopilot.state import AutopilotState
from gpuconsole.model import FleetSnapshot, Instance, InstanceState, JobState, Market, Service, SourceKind, SourceState

MAX_GAP_S = 300.0  # a longer gap between samples starts a condition's duration over
ACTING = frozenset({"launch", "stop", "terminate", "relaunch", "scale"})
# Tags of instances a group relaunches by itself (an EKS node group, an Auto Scaling group):
# spot-recover leaves them to it, so an interruption is never replaced twice.
GROUP_TAGS = ("eks:nodegroup-name", "aws:autoscaling:groupName")
SPOT_INTERRUPTED = ("Server.SpotInstanceTermination", "instance-terminated", "marked-for-termination",
                    "marked-for-stop", "rebalance")


class ActionFailed(Exception):
    """An actuator's call failed or was refused; the message is one line."""


class Actuator(Protocol):
    """What carries a decision out (through the one action path, as ``autopilot:<rule>``)."""

    def launch(self, rule: Rule, count: int, figures: str) -> str:
        """Launch ``count`` instances of the rule's spec; the one-line outcome."""

    def stop(self, rule: Rule, inst: Instance, terminate: bool, figures: str) -> str:
        """Stop (or terminate) ``inst``; the one-line outcome."""

    def relaunch(self, rule: Rule, inst: Instance, on_demand: bool, figures: str) -> str:
        """Launch a replacement of the interrupted spot instance ``inst`` in another zone."""

    def scale_service(self, rule: Rule, service: Service, replicas: int, figures: str) -> str:
        """Set ``service``'s replicas to ``replicas``; the one-line outcome."""


@dataclass(frozen=True, slots=True)
class Decision:
    """What one rule decided at one refresh, and why (a JSON line of ``autopilot run``)."""

    rule: str
    kind: str
    verb: str
    reason: str
    at: float
    figures: tuple[tuple[str, float], ...] = ()
    targets: tuple[str, ...] = ()
    outcome: str = ""
    ok: bool | None = None  # None: nothing ran

    @property
    def acts(self) -> bool:
        return self.verb in ACTING

    def figures_text(self) -> str:
        return ", ".join(f"{k}={v:g}" for k, v in self.figures)

    def as_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "kind": self.kind, "decision": self.verb, "reason": self.reason, "at": self.at,
                "figures": dict(self.figures), "targets": list(self.targets), "ok": self.ok, "outcome": self.outcome}


@dataclass(slots=True)
class _Plan:
    verb: str
    reason: str
    targets: list[Any] = field(default_factory=list)
    count: int = 0
    on_demand: bool = False


class Engine:
    """Decides, and with an actuator acts, for a set of rules.

    Args:
        rules: the rules (config file and database).
        state: cooldowns, failures and pauses.
        clock: the snapshot's clock (a fixed one in tests).
        on_alert: called with a line when a rule pauses itself.
        on_acted: called with a rule's name and the time when it acted.
    """

    def __init__(self, rules: Sequence[Rule], state: AutopilotState, *, clock: Callable[[], float] = time.time,
                 on_alert: Callable[[str], None] | None = None,
                 on_acted: Callable[[str, float], None] | None = None) -> None:
        self.rules = tuple(rules)
        self.state = state
        self.clock = clock
        self.on_alert = on_alert
        self.on_acted = on_acted  # shares each action's time with the other replicas (the Lease)
        self.history: dict[str, dict[str, deque[tuple[float, float]]]] = {}  # rule -> figure -> samples
        self.last: dict[str, Decision] = {}
        self.idle_since: dict[str, dict[str, float]] = {}  # rule -> instance id -> idle since
        self._plans: dict[str, _Plan] = {}
        self._conditions = {r.name: tuple(c for c in (r.scale_out, r.scale_in) if c is not None) for r in self.rules}

    # ------------------------------------------------------------------ the loop
    def tick(self, snapshot: FleetSnapshot, actuator: Actuator | None = None) -> list[Decision]:
        """One refresh: every rule's decision on ``snapshot``, carried out when ``actuator`` is given."""
        index = GpuIndex(snapshot)
        out = []
        for rule in self.rules:
            decision = self._decide(rule, snapshot, index)
            if decision.acts and rule.plan_only:
                decision = replace(decision, reason=f"{decision.reason}; {PLAN_ONLY_NOTE}")
            elif actuator is not None and decision.acts:
                decision = self._carry_out(rule, decision, snapshot, actuator)
            self.last[rule.name] = decision
            out.append(decision)
        return out

    def cooldown_left(self, rule: Rule, now: float) -> float:
        last = self.state.get(rule.name).last_action_at
        return 0.0 if last is None else max(0.0, last + rule.cooldown_s - now)

    # ------------------------------------------------------------------ deciding
    def _decide(self, rule: Rule, snap: FleetSnapshot, index: GpuIndex) -> Decision:
        now = snap.taken_at
        figures: dict[str, float] = {}
        names = {f for c in self._conditions[rule.name] for f in figures_of(c)}
        if rule.kind == "serve-scale":
            stale = not_live(snap, (SourceKind.SERVICES,))
        else:
            stale = not_live(snap, needed_sources(names, snap) if rule.kind != "idle-stop" else idle_sources(snap))
        if rule.kind == "serve-scale":
            service = next((s for s in snap.services if s.key == rule.service), None)
            figures = service_figures(service) if service is not None else {}
            self._observe(rule, figures, now, fresh=stale is None)
            plan = self._serve_scale(rule, service, now) if stale is None else _Plan("wait", f"no action on stale data: {stale}")
        elif rule.kind == "scale":
            pool = index.pool(rule.scope)
            figures = pool_figures(rule.scope, rule.jobs, pool, index)
            figures["instances"] = float(len(pool))
            self._observe(rule, figures, now, fresh=stale is None)
            plan = self._scale(rule, snap, pool, index, now) if stale is None else _Plan("wait", f"no action on stale data: {stale}")
        elif stale is not None:
            self.idle_since.pop(rule.name, None)  # idle durations start over on live data
            plan = _Plan("wait", f"no action on stale data: {stale}")
        elif rule.kind == "idle-stop":
            plan = self._idle_stop(rule, snap, index, now)
        else:
            plan = self._spot_recover(rule, snap, index)
        state = self.state.get(rule.name)
        if state.paused and plan.verb in ACTING:
            plan = _Plan("paused", f"would {plan.verb}, but the rule is paused: {state.paused_reason or 'by a user'}")
        if plan.verb in ACTING:
            left = self.cooldown_left(rule, now)
            if left > 0:
                plan = _Plan("wait", f"would {plan.verb} ({plan.reason}); cooldown {left:.0f} s left")
        targets = tuple(t.instance_id if isinstance(t, Instance) else t.key if isinstance(t, Service) else str(t)
                        for t in plan.targets)
        decision = Decision(rule.name, rule.kind, plan.verb, plan.reason, now, tuple(sorted(figures.items())), targets)
        self._plans[rule.name] = plan
        return decision

    def _observe(self, rule: Rule, figures: dict[str, float], now: float, *, fresh: bool) -> None:
        keep = max((longest_duration(c) for c in self._conditions[rule.name]), default=0.0) + 60.0
        history = self.history.setdefault(rule.name, {})
        for name in {f for c in self._conditions[rule.name] for f in figures_of(c)}:
            series = history.setdefault(name, deque())
            value = figures.get(name)
            if not fresh or value is None or (series and now - series[-1][0] > MAX_GAP_S):
                series.clear()  # unknown or stale: every duration starts over
                if not fresh or value is None:
                    continue
            series.append((now, value))
            while len(series) > 1 and series[1][0] <= now - keep:
                series.popleft()

    def _series(self, rule: Rule) -> dict[str, deque[tuple[float, float]]]:
        return self.history.get(rule.name, {})

    def _scale(self, rule: Rule, snap: FleetSnapshot, pool: list[Instance], index: GpuIndex, now: float) -> _Plan:
        count = len(pool)
        series = self._series(rule)
        if count < rule.min or (rule.scale_out is not None and evaluate(rule.scale_out, series, now)):
            starting = [i.instance_id for i in pool if i.state is InstanceState.PENDING]
            if starting:  # what was launched has not joined yet: its capacity is not in the figures
                return _Plan("wait", f"scale-out holds, but {', '.join(starting)} is still starting")
            if count >= rule.max:
                return _Plan("none", f"scale-out holds but the pool is at max ({count}/{rule.max})")
            blocked = _budget_block(rule, snap)
            if blocked:
                return _Plan("blocked", blocked)
            n = min(rule.step, rule.max - count) if count >= rule.min else rule.min - count
            why = f"pool below min {rule.min}" if count < rule.min else f"{rule.scale_out.text() if rule.scale_out else ''} holds"
            return _Plan("launch", f"{why}: launch {n} ({count} → {count + n} of max {rule.max})", count=n)
        if rule.scale_in is not None and evaluate(rule.scale_in, series, now):
            if count <= rule.min:
                return _Plan("none", f"scale-in holds but the pool is at min ({count}/{rule.min})")
            candidates = [i for i in pool if not index.busy(i, 101.0) and (i.market is Market.ON_DEMAND or rule.spot == "terminate")]
            if not candidates:
                return _Plan("none", "scale-in holds but every instance runs a job's process or pod, or is unknown")
            candidates.sort(key=index.mean_util)
            picked = candidates[: min(rule.step, count - rule.min)]
            verb = "terminate" if all(i.market is Market.SPOT for i in picked) else "stop"
            return _Plan(verb, f"{rule.scale_in.text()} holds: {verb} the idlest {len(picked)}", targets=picked)
        held = pool_figures(rule.scope, rule.jobs, pool, index).get("quota_pending_gpus") or 0
        on_quota = f"; {held:g} GPU(s) wait on their queue's quota, which more instances would not start" if held else ""
        return _Plan("none", f"no condition holds ({count} instance(s), min {rule.min}, max {rule.max}){on_quota}")

    def _serve_scale(self, rule: Rule, service: Service | None, now: float) -> _Plan:
        if service is None:
            return _Plan("none", f"no service {rule.service} in the cluster")
        if service.hpa is not None:
            hpa = service.hpa
            return _Plan("blocked", f"the HPA {hpa.name} scales {rule.service} ({hpa.min_replicas}-{hpa.max_replicas} "
                                    "replicas): serve-scale will not fight it; remove the HPA or the rule")
        count, series = service.replicas_desired, self._series(rule)
        if count < rule.min or (rule.scale_out is not None and evaluate(rule.scale_out, series, now)):
            if service.replicas_ready < count:  # what was added is not serving yet: not in the figures
                return _Plan("wait", f"scale-out holds, but {service.replicas_ready}/{count} replicas are ready")
            if count >= rule.max:
                return _Plan("none", f"scale-out holds but the service is at max ({count}/{rule.max} replicas)")
            n = min(count + rule.step, rule.max) if count >= rule.min else rule.min
            why = f"below min {rule.min}" if count < rule.min else f"{rule.scale_out.text() if rule.scale_out else ''} holds"
            return _Plan("scale", f"{why}: {count} → {n} replicas (max {rule.max})", targets=[service], count=n)
        if rule.scale_in is not None and evaluate(rule.scale_in, series, now):
            if count <= rule.min:
                return _Plan("none", f"scale-in holds but the service is at min ({count}/{rule.min} replicas)")
            n = max(count - rule.step, rule.min)
            return _Plan("scale", f"{rule.scale_in.text()} holds: {count} → {n} replicas (min {rule.min})",
                         targets=[service], count=n)
        return _Plan("none", f"no condition holds ({count} replica(s), min {rule.min}, max {rule.max})")

    def _idle_stop(self, rule: Rule, snap: FleetSnapshot, index: GpuIndex, now: float) -> _Plan:
        candidates = index.idle_candidates(rule.scope, rule.idle_threshold, rule.spot == "terminate")
        before = self.idle_since.get(rule.name, {})
        # Busy, unknown, gone or out of scope: forgotten, so it starts over when it idles again.
        since = {i.instance_id: before.get(i.instance_id, now) for i in candidates}
        self.idle_since[rule.name] = since
        picked = [i for i in candidates if now - since[i.instance_id] >= rule.idle_for_s]
        if not picked:
            return _Plan("none", f"no instance idle for {rule.idle_for_s / 60:g} min")
        verb = "terminate" if all(i.market is Market.SPOT for i in picked) else "stop"
        return _Plan(verb, f"idle below {rule.idle_threshold:g}% with no process or pod for {rule.idle_for_s / 60:g} min",
                     targets=picked)

    def _spot_recover(self, rule: Rule, snap: FleetSnapshot, index: GpuIndex) -> _Plan:
        replaced, candidates = index.interrupted_spot(interrupted)
        for inst in candidates:
            if not rule.scope.has_instance(inst) or any(inst.tag(t) for t in GROUP_TAGS):
                continue
            failures, done = self.state.recovery(inst.instance_id)
            if done or inst.instance_id in replaced:
                continue
            on_demand = failures >= rule.fallback_after
            jobs = [f"{j.namespace}/{j.name}" for j in snap.jobs
                    if inst.node and j.node == inst.node and j.state in (JobState.RUNNING, JobState.PENDING)]
            where = "on-demand" if on_demand else "spot in another zone"
            on_it = f"; jobs on it: {', '.join(jobs)}" if jobs else ""
            return _Plan("relaunch", f"{inst.instance_id} interrupted ({inst.state_reason or inst.spot_status}): "
                                     f"relaunch {where} (failures {failures}/{rule.fallback_after}){on_it}",
                         targets=[inst], on_demand=on_demand)
        return _Plan("none", "no interrupted spot instance in scope")

    # ------------------------------------------------------------------ acting
    def _carry_out(self, rule: Rule, decision: Decision, snap: FleetSnapshot, actuator: Actuator) -> Decision:
        plan = self._plans[rule.name]
        figures = decision.figures_text()
        outcomes: list[str] = []
        ok = True
        try:
            if plan.verb == "launch":
                outcomes.append(actuator.launch(rule, plan.count, figures))
            elif plan.verb == "scale":
                outcomes.append(actuator.scale_service(rule, plan.targets[0], plan.count, figures))
            elif plan.verb == "relaunch":
                inst = plan.targets[0]
                try:
                    outcomes.append(actuator.relaunch(rule, inst, plan.on_demand, figures))
                except ActionFailed:
                    self.state.recovery_result(inst.instance_id, rule.name, False)
                    raise
                self.state.recovery_result(inst.instance_id, rule.name, True)
            else:
                for inst in plan.targets:
                    outcomes.append(actuator.stop(rule, inst, inst.market is Market.SPOT and rule.spot == "terminate", figures))
        except ActionFailed as exc:
            ok = False
            outcomes.append(f"failed: {exc}")
        text = "; ".join(outcomes)
        if ok:
            self.state.acted(rule.name, snap.taken_at, f"{decision.verb}: {text}")
            if self.on_acted is not None:
                self.on_acted(rule.name, snap.taken_at)
        elif self.state.failed(rule.name, f"{decision.verb}: {text}") and self.on_alert is not None:
            self.on_alert(f"autopilot rule {rule.name} paused after 3 failures in a row: {text}")
        return Decision(decision.rule, decision.kind, decision.verb, decision.reason, decision.at, decision.figures,
                        decision.targets, text, ok)


def idle_sources(snap: FleetSnapshot) -> tuple[SourceKind, ...]:
    """What idle-stop reads: the cloud, the GPUs, and the jobs where a cluster is configured (a
    pod may hold a GPU that computes nothing right now)."""
    jobs = snap.source(SourceKind.JOBS)
    configured = jobs is not None and jobs.state is not SourceState.UNCONFIGURED
    return (SourceKind.CLOUD, SourceKind.GPUS, *((SourceKind.JOBS,) if configured else ()))


def interrupted(inst: Instance) -> bool:
    """Whether EC2 interrupted (or is about to interrupt) the spot instance ``inst``."""
    text = f"{inst.state_reason} {inst.spot_status}"
    return any(mark in text for mark in SPOT_INTERRUPTED)


def _budget_block(rule: Rule, snap: FleetSnapshot) -> str:
    """Why the rule's budget guard blocks a launch now, or ''."""
    if not rule.budget_guard:
        return ""
    for status in snap.budgets:
        if status.budget.name == rule.budget_guard:
            amount = status.budget.amount
            spent = 100.0 * status.spent / amount if amount else 0.0
            forecast = 100.0 * status.forecast / amount if amount else 0.0
            if spent >= 100.0 or forecast >= 100.0:
                return f"budget guard {rule.budget_guard}: {spent:.0f}% spent, {forecast:.0f}% forecast: no launch"
            return ""
    return f"budget guard {rule.budget_guard}: no such budget: no launch"
