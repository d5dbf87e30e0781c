"""The autopilot inside the full-screen console: the same engine as ``autopilot run``.

The console hands every new snapshot to :meth:`AutopilotService.observe`; one daemon thread
(``autopilot``) decides on the newest one (older ones waiting are skipped: decisions are
level-triggered) and, while this console holds the leader lock and may act, carries decisions
out through the action path. What each rule sees and decided is read back by the snapshot
(:meth:`statuses`), and rules that acted or paused themselves become Overview alerts.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from gpuconsole.core.ops.actions import ActionLog, ActionResult
from gpuconsole.core.ops.autopilot import rule_ops
from gpuconsole.core.ops.autopilot.actuator import CloudActuator
from gpuconsole.core.ops.autopilot.engine import Engine
from gpuconsole.core.ops.autopilot.expr import comparisons
from gpuconsole.core.ops.autopilot.leader import Leadership
from gpuconsole.core.ops.autopilot.rules import Rule, RuleError
from gpuconsole.core.ops.autopilot.state import AutopilotState
from gpuconsole.core.ops.cloud_ops import CloudOps
from gpuconsole.core.ops.service_ops import ServiceOps
from gpuconsole.model import Alert, AutopilotRuleStatus, FleetSnapshot, Severity

log = logging.getLogger(__name__)

ACTED_ALERT_S = 15 * 60.0  # a rule that acted is listed in the Overview's alerts this long


def thresholds(rule: Rule) -> tuple[tuple[str, str], ...]:
    """(figure, "> 80 for 10m") for each comparison of a scale rule's conditions."""
    out = []
    for node in (rule.scale_out, rule.scale_in):
        if node is not None:
            for c in comparisons(node):
                held = c.text()[len(c.figure) + 1:]
                out.append((c.figure, held))
    return tuple(out)


def condition_text(rule: Rule) -> str:
    """A rule's thresholds in words, for the pane."""
    if rule.kind in ("scale", "serve-scale"):
        parts = [f"out: {rule.scale_out.text()}" if rule.scale_out else "",
                 f"in: {rule.scale_in.text()}" if rule.scale_in else "", f"{rule.min}–{rule.max}"]
        if rule.budget_guard:
            parts.append(f"guard {rule.budget_guard}")
        return " · ".join(p for p in parts if p)
    if rule.kind == "idle-stop":
        return f"idle < {rule.idle_threshold:g}% for {rule.idle_for_s / 60:g}m · spot {rule.spot}"
    return f"relaunch · on-demand after {rule.fallback_after} failures"


class AutopilotService:
    """Runs the engine on the console's snapshots.

    Args:
        rules: loads the rules (config file, database, or the demo's); a :class:`RuleError` is
            shown as an alert and nothing runs.
        state: cooldowns and pauses.
        cloud: the console's CloudOps (it changes when the console switches to the demo).
        service_ops: the console's ServiceOps (serve-scale rules act through it).
        log: the console's action log (its guard admits and audits every change).
        leadership: who may act; None: this console never acts (plan only).
        act: False for ``--read-only`` and the one-shot commands: decide, never act.
        on_change: called after a tick that acted, so a new snapshot shows it.
    """

    def __init__(self, rules: Callable[[AutopilotState], tuple[Rule, ...]], state: AutopilotState, *,
                 cloud: Callable[[], CloudOps], log: ActionLog, clock: Callable[[], float] = time.time,
                 service_ops: Callable[[], ServiceOps | None] = lambda: None,
                 leadership: Leadership | None = None, act: bool = True,
                 on_change: Callable[[], None] | None = None) -> None:
        self.state = state
        self.leadership = leadership
        self._load = rules
        self._cloud = cloud
        self._service_ops = service_ops
        self.log = log
        self.clock = clock
        self.act = act and leadership is not None
        self.on_change = on_change
        self.error = ""
        self._alerts: list[Alert] = []
        self.engine = Engine((), state, clock=clock, on_alert=self._pause_alert)
        self.reload()
        self._latest: FleetSnapshot | None = None
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self.leads = False

    def reload(self) -> None:
        """Read the rules again (after one was added or removed)."""
        try:
            rules, self.error = self._load(self.state), ""
        except RuleError as exc:
            rules, self.error = (), str(exc)
        old = self.engine
        self.engine = Engine(rules, self.state, clock=self.clock, on_alert=self._pause_alert,
                             on_acted=self.leadership.share if self.leadership is not None else None)
        self.engine.history, self.engine.last, self.engine.idle_since = old.history, old.last, old.idle_since

    @property
    def rules(self) -> tuple[Rule, ...]:
        return self.engine.rules

    @property
    def holder(self) -> str:
        if self.leadership is None or not self.engine.rules:
            return ""
        return self.leadership.holder()

    # ------------------------------------------------------------------ the loop
    def observe(self, snapshot: FleetSnapshot) -> None:
        """Take a new snapshot (from the console's publishing thread; returns at once)."""
        if not self.engine.rules:
            return
        self._latest = snapshot
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="autopilot", daemon=True)
            self._thread.start()
        self._wake.set()

    def _run(self) -> None:
        while not self._stopping.is_set():
            self._wake.wait()
            self._wake.clear()
            snapshot = self._latest
            if snapshot is None or self._stopping.is_set():
                continue
            try:
                self.tick(snapshot)
            except Exception:  # noqa: BLE001 - the autopilot must never take the console down
                log.exception("autopilot tick failed")

    def tick(self, snapshot: FleetSnapshot) -> None:
        """Decide on ``snapshot`` and, when leading and allowed, act."""
        try:
            self.leads = self.leadership is not None and self.leadership.acquire()
        except Exception as exc:  # noqa: BLE001 - a lease that cannot be read: act on nothing
            log.info("autopilot leadership: %s", exc)
            self.leads = False
        actuator = CloudActuator(self._cloud(), self._service_ops()) if self.act and self.leads else None
        self.state.forget()
        if self.leads and self.leadership is not None:
            self.state.adopt(self.leadership.shared())  # cooldowns another replica started
        decisions = self.engine.tick(snapshot, actuator)
        if any(d.ok is not None for d in decisions) and self.on_change is not None:
            self.on_change()

    def close(self) -> None:
        self._stopping.set()
        self._wake.set()
        if self.leadership is not None:
            try:
                self.leadership.release()
            except Exception:  # noqa: BLE001 - the lease then expires by itself
                log.info("autopilot: could not release leadership", exc_info=True)

    # ------------------------------------------------------------------ what the console shows
    def statuses(self, now: float) -> tuple[AutopilotRuleStatus, ...]:
        out = []
        for rule in self.engine.rules:
            st = self.state.get(rule.name)
            last = self.engine.last.get(rule.name)
            out.append(AutopilotRuleStatus(
                rule.name, rule.kind, f"service:{rule.service}" if rule.service else rule.scope.text(),
                condition_text(rule), rule.origin,
                figures=last.figures if last else (),
                thresholds=thresholds(rule),
                decision=last.verb if last else "",
                reason=last.reason if last else "",
                decided_at=last.at if last else None,
                acted=st.last_decision,
                acted_at=st.last_action_at,
                cooldown_left_s=self.engine.cooldown_left(rule, now),
                paused=st.paused, paused_reason=st.paused_reason))
        return tuple(out)

    def alerts(self, now: float) -> list[Alert]:
        out = list(self._alerts)
        if self.error:
            out.append(Alert(Severity.WARNING, "autopilot", self.error, now))
        for rule in self.engine.rules:
            st = self.state.get(rule.name)
            if st.last_action_at is not None and now - st.last_action_at <= ACTED_ALERT_S:
                out.append(Alert(Severity.INFO, "autopilot", f"rule {rule.name} acted: {st.last_decision}", st.last_action_at))
        return out

    def _pause_alert(self, line: str) -> None:
        self._alerts = [*self._alerts[-4:], Alert(Severity.WARNING, "autopilot", line, self.clock())]

    # ------------------------------------------------------------------ changes from the pane
    def rule(self, name: str) -> Rule:
        for rule in self.engine.rules:
            if rule.name == name:
                return rule
        raise RuleError(f"no rule {name!r}")

    def set_paused(self, name: str, paused: bool) -> ActionResult:
        """Pause or resume ``name`` (audited; raises ActionError when denied)."""
        result = rule_ops.set_paused(self.state, self.rule(name), paused, self.log, self.clock)
        if not paused:
            self._alerts = [a for a in self._alerts if f"rule {name} " not in a.message]
        return result

    def add(self, table: Mapping[str, Any]) -> ActionResult:
        """Add a rule to the database (audited); it runs from the next snapshot on."""
        result = rule_ops.add_rule(self.state, table, self.engine.rules, self.log, self.clock)
        self.reload()
        return result
