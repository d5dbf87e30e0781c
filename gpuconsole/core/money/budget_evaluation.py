"""Evaluating budgets against a snapshot: what each crossed threshold calls for.

Pure computation, no I/O: :func:`plan` turns the budgets' statuses into the
:class:`~gpuconsole.model.PendingAction` values that show exactly what a crossed threshold would
stop or suspend, and into what is :class:`Due` now (a notification, or an automatic action whose
source is live) and not yet fired this period; :func:`alerts` gives the banner's lines;
:class:`Crossing` is what a notification tells (its message, the ``notify_command``'s
environment, the webhook's JSON). :func:`match` finds the budget a launch counts against.

Acting on what is due is :mod:`gpuconsole.core.ops.budget_ops`'s part.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from msgspec.structs import replace

from gpuconsole.core.money import budgets as rules
from gpuconsole.core.money.budget_book import FiredKey
from gpuconsole.core.money.budget_config import PLAN_ONLY, PLAN_ONLY_NOTE
from gpuconsole.model import (
    Alert,
    Budget,
    BudgetAction,
    BudgetStatus,
    FleetSnapshot,
    PendingAction,
    Severity,
    SourceKind,
    SourceState,
    Threshold,
    ThresholdBasis,
)

RESULT_ALERT_S = 3600.0  # an automatic action's result stays in the alerts this long


@dataclass(frozen=True, slots=True)
class Crossing:
    """A budget's threshold crossed in one period: what a notification tells."""

    budget: Budget
    threshold: Threshold
    spent: float
    forecast: float
    period_start: float
    at: float

    @property
    def percent(self) -> float:
        return 100.0 * self.spent / self.budget.amount if self.budget.amount else 0.0

    def message(self) -> str:
        b, key = self.budget, rules.threshold_key(self.threshold)
        if self.threshold.basis is ThresholdBasis.FORECAST:
            return (f"budget {b.name} forecast passed {self.threshold.percent:g}%: heading for "
                    f"{rules.usd(self.forecast)} of {rules.usd(b.amount)} (now {self.percent:.0f}%)")
        return f"budget {b.name} passed {key}%: {rules.usd(self.spent)} of {rules.usd(b.amount)} ({self.percent:.0f}%)"

    def environment(self) -> dict[str, str]:
        """What ``notify_command`` finds in its environment."""
        b, t = self.budget, self.threshold
        return {
            "GPUCONSOLE_BUDGET": b.name,
            "GPUCONSOLE_BUDGET_AMOUNT": f"{b.amount:.2f}",
            "GPUCONSOLE_BUDGET_SPENT": f"{self.spent:.2f}",
            "GPUCONSOLE_BUDGET_FORECAST": f"{self.forecast:.2f}",
            "GPUCONSOLE_BUDGET_PERCENT": f"{self.percent:.1f}",
            "GPUCONSOLE_BUDGET_SCOPE": b.scope,
            "GPUCONSOLE_BUDGET_PERIOD_START": _iso(self.period_start),
            "GPUCONSOLE_THRESHOLD": f"{t.percent:g}",
            "GPUCONSOLE_THRESHOLD_BASIS": t.basis.value,
            "GPUCONSOLE_THRESHOLD_ACTIONS": "+".join(a.value for a in t.actions),
            "GPUCONSOLE_MESSAGE": self.message(),
        }

    def payload(self) -> dict[str, Any]:
        """The JSON body POSTed to the webhook."""
        b, t = self.budget, self.threshold
        return {
            "schema": "gpuconsole.budget-crossing/1",
            "budget": b.name,
            "amount": b.amount,
            "spent": round(self.spent, 2),
            "forecast": round(self.forecast, 2),
            "percent": round(self.percent, 1),
            "scope": b.scope,
            "period": b.period.value,
            "period_start": _iso(self.period_start),
            "threshold": {"percent": t.percent, "basis": t.basis.value, "actions": [a.value for a in t.actions]},
            "message": self.message(),
            "at": _iso(self.at),
            "text": self.message(),  # what chat webhooks (Slack, Mattermost) display
        }


@dataclass(frozen=True, slots=True)
class Due:
    """An automatic action or a notification that evaluation found due and not yet fired."""

    key: FiredKey
    pending: PendingAction | None = None
    crossing: Crossing | None = None


def plan(statuses: Sequence[BudgetStatus], snap: FleetSnapshot, now: float, fired: Collection[FiredKey],
         retry_at: Mapping[FiredKey, float],
         acted: Mapping[FiredKey, float]) -> tuple[tuple[PendingAction, ...], tuple[Due, ...]]:
    """The pending actions of the crossed thresholds, and what is due now.

    Args:
        fired: the keys fired so far; a fired notification is not due again this period, and a
            fired automatic action shows again (for a user to confirm) only on targets seen
            running after it finished.
        retry_at: when an automatic action that did nothing may be tried again.
        acted: when this session's automatic actions finished (``inf``: still running).
    """
    pending: list[PendingAction] = []
    due: list[Due] = []
    for status in statuses:
        b = status.budget
        if not status.crossed or not rules.period_open(b, now):
            continue
        start = rules.period_bounds(b, now)[0]
        for t in status.crossed:
            tkey = rules.threshold_key(t)
            if BudgetAction.NOTIFY in t.actions:
                key = (b.name, tkey, BudgetAction.NOTIFY.value, start)
                if key not in fired:
                    due.append(Due(key, crossing=Crossing(b, t, status.spent, status.forecast, start, now)))
            for action in t.actions:
                proposed = rules.plan_action(b, t, action, snap.instances, snap.cronjobs, snap.jobs)
                if proposed is None:
                    continue
                key = (b.name, tkey, action.value, start)
                if not b.automatic:
                    pending.append(proposed if b.origin != PLAN_ONLY else
                                   replace(proposed, detail=f"{proposed.detail} ({PLAN_ONLY_NOTE})"))
                elif key in fired:
                    if proposed.targets and seen_since_acted(snap, action, acted.get(key)):
                        pending.append(replace(proposed, automatic=False, detail=(
                            f"{proposed.detail} (ran automatically once this period; runs again only when confirmed)")))
                else:
                    pending.append(proposed)
                    if live(snap, action) and retry_at.get(key, 0.0) <= now:
                        due.append(Due(key, pending=proposed))
    return tuple(pending), tuple(due)


def seen_since_acted(snap: FleetSnapshot, action: BudgetAction, acted: float | None) -> bool:
    """Whether the snapshot's reading was taken after this session's automatic action finished
    (at ``acted``), so targets still running in it were started again since."""
    if acted is None:
        return True  # fired in an earlier session
    status = snap.source(_source_of(action))
    return status is not None and (status.updated_at or 0.0) > acted


def alerts(statuses: Sequence[BudgetStatus], pending: Sequence[PendingAction], now: float,
           events: Sequence[Alert] = (), config_error: str | None = None) -> tuple[Alert, ...]:
    """The banner's lines: the configuration file's problem, each crossing, each pending action
    that waits for a user, and ``events`` (results of automatic actions) from the last hour."""
    out: list[Alert] = []
    if config_error:
        out.append(Alert(Severity.WARNING, "config", config_error, now))
    for b in statuses:
        message = rules.describe_crossing(b)
        if message is not None:
            over = b.percent >= 100 or any(t.basis is ThresholdBasis.FORECAST for t in b.crossed)
            severity = Severity.CRITICAL if b.percent >= 100 else Severity.WARNING if over else Severity.INFO
            out.append(Alert(severity, "budget", message, now))
    for p in pending:
        if p.targets and not p.automatic:
            noun = "CronJob" if p.action is BudgetAction.SUSPEND_CRONJOBS else "instance"
            count = f"{len(p.targets)} {noun}{'s' if len(p.targets) != 1 else ''}"
            message = f"budget {p.budget} at {p.percent:g}%: {p.action.value} of {count} waits for confirmation"
            out.append(Alert(Severity.WARNING, "budget", message, now))
    out.extend(a for a in events if now - a.at <= RESULT_ALERT_S)
    return tuple(out)


def live(snap: FleetSnapshot, action: BudgetAction) -> bool:
    """Whether the source ``action`` acts on is live in ``snap`` (never act on cached or stale data)."""
    status = snap.source(_source_of(action))
    return status is not None and status.state is SourceState.LIVE


def match(statuses: Sequence[BudgetStatus], name: str) -> BudgetStatus | None:
    """The budget a launch tagged ``Budget=name`` counts against: the budget of that name, else
    the one scoped to a tag of that value (``tag:Budget`` first), else, for an empty name, the
    fleet budget (scope all, monthly first). None when none matches."""
    if name:
        exact = next((s for s in statuses if s.budget.name == name), None)
        if exact is not None:
            return exact
        tagged = [s for s in statuses if s.budget.scope.startswith("tag:") and s.budget.scope.split("=", 1)[-1] == name]
        tagged.sort(key=lambda s: (s.budget.scope.split("=", 1)[0] != "tag:Budget", s.budget.name))
        return tagged[0] if tagged else None
    fleet = [s for s in statuses if s.budget.scope == "all"]
    fleet.sort(key=lambda s: (s.budget.period.value != "monthly", s.budget.name))
    return fleet[0] if fleet else None


def _source_of(action: BudgetAction) -> SourceKind:
    return SourceKind.JOBS if action is BudgetAction.SUSPEND_CRONJOBS else SourceKind.CLOUD


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
