"""Budgets that act: where budgets come from, what their crossed thresholds call for, and doing it.

:class:`BudgetOps` (``console.budget_ops``) is the one door for budgets. The Console calls
:meth:`BudgetOps.evaluate` on every snapshot it composes; that call only computes (no I/O):
each budget's status, the :class:`~gpuconsole.model.PendingAction` values that show exactly what
a crossed threshold would stop or suspend, and the alerts. Side effects leave the compose path:

* **notify** fires once per threshold per period (the period's start is part of the key): it
  raises the terminal-bell flag (:attr:`BudgetOps.bell_count`, :meth:`BudgetOps.take_bell`) and
  runs the budget's ``notify_command`` and ``webhook`` on a background thread, each with a
  timeout. The crossing itself is always in the alerts (the banner).
* **stop-spot, stop-all, suspend-cronjobs** wait for a user's ``yes``
  (:meth:`BudgetOps.run`), unless the budget is automatic: then they run on the background
  thread, confirmed ``"automatic:<budget>"``, once per threshold per period, and only while the
  source they act on is live (never on cached or stale data). Should someone start an
  instance again in the same period, the budget does not fight them: the action shows again
  as pending, no longer automatic, and waits for a user.

Fired state lives in the Store (``budget_fired``), in memory without one, and for the demo in
memory only, so a demo never silences a real notification. ``gpuconsole budget check
--enforce`` runs the same due actions synchronously (:meth:`BudgetOps.enforce`).

Every change goes through :func:`gpuconsole.core.ops.actions.run_action`: instance stops through
``CloudOps.perform``, CronJob suspensions, notify hooks, and adding or removing a budget.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from msgspec.structs import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from gpuconsole.backends.base import BackendError
from gpuconsole.core.money import budgets as rules
from gpuconsole.core.ops.actions import (
    ActionError,
    ActionKind,
    ActionLog,
    ActionRequest,
    ActionResult,
    automatic_confirmation,
    check_confirmation,
    one_line,
    run_action,
)
from gpuconsole.core.config import ConfigFile
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

if TYPE_CHECKING:
    from gpuconsole.core.ops.cloud_ops import CloudOps
    from gpuconsole.core.fleet.store import Store

log = logging.getLogger(__name__)

NOTIFY_TIMEOUT_S = 10.0
RESULT_ALERT_S = 3600.0  # an automatic action's result stays in the alerts this long
RETRY_AFTER_S = 300.0  # an automatic action that failed everywhere is tried again after this

FiredKey = tuple[str, str, str, float]  # (budget, threshold key, action, period start)


# --------------------------------------------------------------------------- notify


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


def run_notify_command(command: str, crossing: Crossing, timeout: float = NOTIFY_TIMEOUT_S) -> str:
    """Run ``command`` in a shell with the crossing in its environment.

    The command runs in its own process group, so on a timeout everything it started is killed.

    Raises:
        BackendError: it failed, or did not finish within ``timeout`` seconds (one line).
    """
    import signal
    import subprocess

    env = {**os.environ, **crossing.environment()}
    try:
        # The user's own command, from their budget: a shell is what they wrote it for.
        proc = subprocess.Popen(command, shell=True, env=env, stdin=subprocess.DEVNULL,  # noqa: S602
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    except OSError as exc:
        raise BackendError(f"notify command could not start: {exc.strerror or exc}") from exc
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            proc.kill()
        proc.communicate()
        raise BackendError(f"notify command did not finish in {timeout:g} s and was killed") from None
    if proc.returncode != 0:
        last = next((line.strip() for line in reversed(err.splitlines()) if line.strip()), "")
        raise BackendError(f"notify command exited with status {proc.returncode}" + (f": {last[:200]}" if last else ""))
    return "notify command ran"


def post_webhook(url: str, crossing: Crossing, timeout: float = NOTIFY_TIMEOUT_S) -> str:
    """POST the crossing as JSON to ``url`` (TLS certificates verified).

    Messages name only the host: a webhook's path often holds its secret.

    Raises:
        BackendError: no answer within ``timeout``, or an answer other than 2xx (one line).
    """
    import ssl  # imported here: most sessions never post a webhook
    import urllib.error
    import urllib.parse
    import urllib.request

    host = urllib.parse.urlsplit(url).hostname or "the webhook"
    body = json.dumps(crossing.payload()).encode()
    request = urllib.request.Request(url, data=body, method="POST",
                                     headers={"Content-Type": "application/json", "User-Agent": "gpuconsole"})
    try:
        # https, or http to localhost only (checked when the budget was saved).
        context = ssl.create_default_context()
        with urllib.request.urlopen(request, timeout=timeout, context=context) as answer:  # noqa: S310
            answer.read(65536)
            status = answer.status
    except urllib.error.HTTPError as exc:
        raise BackendError(f"webhook {host} answered HTTP {exc.code}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        text = one_line(reason) if isinstance(reason, BaseException) else str(reason)
        raise BackendError(f"webhook {host} failed: {text}") from None
    return f"webhook {host} answered HTTP {status}"


# --------------------------------------------------------------------------- the door


@dataclass(frozen=True, slots=True)
class _Due:
    """An automatic action or a notification that evaluate found due and not yet fired."""

    key: FiredKey
    pending: PendingAction | None = None
    crossing: Crossing | None = None


class BudgetOps:
    """Budgets of the console: listing, adding, removing, evaluating and acting.

    Args:
        store: the open Store, or None (budgets added are then kept for the session).
        store_pending: a Store is being opened in the background; until :meth:`attach_store`
            nothing fires (fired state is unknown, and a restart must not notify again).
        config: the configuration file's budgets; ``config_error`` its one-line problem.
        cloud: returns the console's CloudOps (instances are stopped through it).
        jobs: returns the job backend (CronJobs are suspended through it).
        log: where every action is recorded.
        clock: the console's clock.
        demo_start: the demo's start; None outside the demo (no demo budgets).
        act: run notifications and automatic actions in the background as evaluate finds them
            due (the console); False leaves that to :meth:`enforce` (``budget check``).
        on_change: called after an automatic action changed something (the console refreshes).
    """

    def __init__(
        self,
        *,
        store: Store | None = None,
        store_pending: bool = False,
        config: ConfigFile | None = None,
        config_error: str | None = None,
        cloud: Callable[[], CloudOps | None] = lambda: None,
        jobs: Callable[[], Any] = lambda: None,
        log: ActionLog | None = None,
        clock: Callable[[], float] = time.time,
        demo_start: float | None = None,
        act: bool = True,
        on_change: Callable[[], None] | None = None,
        notify_timeout: float = NOTIFY_TIMEOUT_S,
    ) -> None:
        self.config = config or ConfigFile(None)
        self.config_error = config_error
        self.log = log if log is not None else ActionLog()
        self.clock = clock
        self.act = act
        self.notify_timeout = notify_timeout
        self._cloud = cloud
        self._jobs = jobs
        self._on_change = on_change
        self._lock = threading.RLock()
        self._store: Store | None = None
        self._ready = False
        self._stored: dict[str, Budget] = {}
        self._fired: set[FiredKey] = set()
        self._retry_at: dict[FiredKey, float] = {}
        self._acted: dict[FiredKey, float] = {}  # when an automatic action finished (inf: running)
        self._demo_start = demo_start
        self._demo_quiet = False  # the demo's crossings at its first reading are taken as known
        self._sprint: Budget | None = None
        self._statuses: tuple[BudgetStatus, ...] = ()
        self._pending: tuple[PendingAction, ...] = ()
        self._due: tuple[_Due, ...] = ()
        self._snapshot: FleetSnapshot | None = None
        self._events: deque[Alert] = deque(maxlen=50)
        self._bell = 0
        self._bell_seen = 0
        self._queue: queue.Queue[Callable[[], object] | None] = queue.Queue()
        self._worker: threading.Thread | None = None
        self._busy = 0
        self._idle = threading.Condition()
        if store is not None or not store_pending:
            self.attach_store(store)

    # ------------------------------------------------------------------ where budgets come from
    def attach_store(self, store: Store | None) -> None:
        """Read budgets and fired state from ``store`` (None: there will be none) and start firing.

        Blocking (SQLite): the Console calls it from the thread that opened the Store. Budgets
        added while the Store was still opening are saved into it.
        """
        loaded: list[Budget] = []
        fired: set[FiredKey] = set()
        if store is not None:
            try:
                loaded = store.budgets()
                fired = store.budget_fired()
            except Exception as exc:  # noqa: BLE001 - the console works on without saved budgets
                self._event(Severity.WARNING, f"cannot read saved budgets: {one_line(exc)}")
        with self._lock:
            session_only = [b for name, b in self._stored.items() if name not in {x.name for x in loaded}]
            self._store = store
            self._stored = {b.name: replace(b, origin="store") for b in loaded}
            self._stored.update({b.name: b for b in session_only})
            if not self.demo:
                self._fired |= fired
            self._ready = True
        if store is not None:
            for budget in session_only:
                try:
                    store.save_budget(budget, replace=True)
                except Exception:  # noqa: BLE001 - it stays for the session
                    log.warning("could not save budget %s", budget.name, exc_info=True)

    @property
    def demo(self) -> bool:
        return self._demo_start is not None

    def set_demo(self, start: float) -> None:
        """Switch to the demo (the user asked for it): demo budgets, and fired state in memory."""
        with self._lock:
            self._demo_start = start
            self._sprint = None
            self._fired = set()
            self._demo_quiet = False

    def budgets(self) -> tuple[Budget, ...]:
        """Demo budgets (in the demo), then the configuration file's, then the Store's; a name
        already taken by an earlier source hides a later budget of that name."""
        with self._lock:
            demo: tuple[Budget, ...] = ()
            if self._demo_start is not None:
                demo = tuple(self._sprint if b is rules.DEMO_SPRINT and self._sprint else b for b in rules.DEMO_BUDGETS)
            out: dict[str, Budget] = {}
            for budget in (*demo, *self.config.budgets, *self._stored.values()):
                out.setdefault(budget.name, budget)
            return tuple(out.values())

    def get(self, name: str) -> Budget | None:
        return next((b for b in self.budgets() if b.name == name), None)

    # ------------------------------------------------------------------ changing budgets
    def add(self, budget: Budget, *, replace: bool = False) -> ActionResult:
        """Save a budget (origin ``"store"``) through the action path.

        Raises:
            ActionError: invalid, or the name is taken (by the configuration file or the demo,
                or by a saved budget without ``replace``), or the Store failed (one line).
        """
        try:
            rules.validate(budget)
        except rules.BudgetError as exc:
            raise ActionError(str(exc)) from None
        existing = self.get(budget.name)
        if existing is not None and existing.origin != "store":
            raise ActionError(self._not_here(existing, "changed"))
        if existing is not None and not replace:
            raise ActionError(f"budget {budget.name} exists: remove it first, or replace it")
        budget = _as_store(budget)
        params = (("amount", f"{budget.amount:.2f}"), ("period", rules.describe_period(budget)),
                  ("scope", budget.scope), ("thresholds", " ".join(rules.format_threshold(t) for t in budget.thresholds)),
                  ("automatic", "yes" if budget.automatic else "no"))
        request = ActionRequest(ActionKind.BUDGET_ADD, budget.name, params=params)

        def do() -> str:
            store = self._store
            if store is not None:
                try:
                    saved = store.save_budget(budget, replace=replace)
                except Exception as exc:  # noqa: BLE001 - StoreError, sqlite errors: one line
                    raise BackendError(f"cannot save budget {budget.name}: {one_line(exc)}") from exc
                if not saved:
                    raise BackendError(f"budget {budget.name} exists: remove it first, or replace it")
            with self._lock:
                self._stored[budget.name] = budget
            where = "" if store is not None else " (kept for this session only: no database)"
            return f"{'replaced' if existing else 'added'} budget {describe(budget)}{where}"

        return run_action(request, do, self.log, self.clock)

    def remove(self, name: str) -> ActionResult:
        """Delete a saved budget. Raises :class:`ActionError` for a budget of the configuration
        file or the demo, or an unknown name (one line)."""
        def do() -> str:
            # Checked after the guard, so a denied attempt is audited whatever it named.
            existing = self.get(name)
            if existing is None:
                raise BackendError(f"no budget named {name}")
            if existing.origin != "store":
                raise BackendError(self._not_here(existing, "removed"))
            store = self._store
            if store is not None:
                try:
                    store.delete_budget(name)
                except Exception as exc:  # noqa: BLE001
                    raise BackendError(f"cannot remove budget {name}: {one_line(exc)}") from exc
            with self._lock:
                self._stored.pop(name, None)
                self._fired = {k for k in self._fired if k[0] != name}
            return f"removed budget {name}"

        return run_action(ActionRequest(ActionKind.BUDGET_REMOVE, name), do, self.log, self.clock)

    def _not_here(self, budget: Budget, verb: str) -> str:
        if budget.origin == "config":
            where = self.config.path or "the configuration file"
            return (f"budget {budget.name} is declared in the config file {where}: "
                    f"it cannot be {verb} from the console; edit the file")
        return f"budget {budget.name} is a demo budget: it cannot be {verb}"

    # ------------------------------------------------------------------ evaluating
    def evaluate(
        self, snapshot: FleetSnapshot
    ) -> tuple[tuple[BudgetStatus, ...], tuple[PendingAction, ...], tuple[Alert, ...]]:
        """Statuses, pending actions and alerts for ``snapshot`` (its budgets are ignored).

        Pure computation on the caller's thread; what is due (notifications, automatic
        actions) is handed to the background thread when the console acts on budgets.
        """
        now = snapshot.taken_at
        with self._lock:
            if self._demo_start is not None and self._sprint is None and snapshot.instances:
                self._sprint = rules.size_sprint(rules.DEMO_SPRINT, snapshot.instances, self._demo_start)
            statuses = rules.evaluate_all(self.budgets(), snapshot.instances, now, snapshot.jobs)
            pending, due = self._plan(statuses, snapshot, now)
            self._statuses, self._pending, self._due, self._snapshot = statuses, pending, due, snapshot
            alerts = self._alerts(statuses, pending, now)
            if self._demo_start is not None and not self._demo_quiet and self._ready and snapshot.instances:
                # A demo opens with budgets already past thresholds: ringing for those on every
                # start would teach users to ignore the bell. Only crossings from now on notify.
                self._demo_quiet = True
                self._fired |= {d.key for d in due if d.crossing is not None}
                due = tuple(d for d in due if d.crossing is None)
            if self.act and self._ready and due:
                self._claim(due)
                for item in due:
                    self._submit(functools.partial(self._fire, item))
        return statuses, pending, alerts

    def _plan(self, statuses: Sequence[BudgetStatus], snap: FleetSnapshot,
              now: float) -> tuple[tuple[PendingAction, ...], tuple[_Due, ...]]:
        pending: list[PendingAction] = []
        due: list[_Due] = []
        for status in statuses:
            b = status.budget
            if not status.crossed or not rules.period_open(b, now):
                continue
            start = rules.period_bounds(b, now)[0]
            for t in status.crossed:
                tkey = rules.threshold_key(t)
                if BudgetAction.NOTIFY in t.actions:
                    key = (b.name, tkey, BudgetAction.NOTIFY.value, start)
                    if key not in self._fired:
                        due.append(_Due(key, crossing=Crossing(b, t, status.spent, status.forecast, start, now)))
                for action in t.actions:
                    plan = rules.plan_action(b, t, action, snap.instances, snap.cronjobs, snap.jobs)
                    if plan is None:
                        continue
                    key = (b.name, tkey, action.value, start)
                    if not b.automatic:
                        pending.append(plan)
                    elif key in self._fired:
                        if plan.targets and self._seen_since_acted(snap, action, key):
                            pending.append(replace(plan, automatic=False, detail=(
                                f"{plan.detail} (ran automatically once this period; runs again only when confirmed)")))
                    else:
                        pending.append(plan)
                        if _live(snap, action) and self._retry_at.get(key, 0.0) <= now:
                            due.append(_Due(key, pending=plan))
        return tuple(pending), tuple(due)

    def _seen_since_acted(self, snap: FleetSnapshot, action: BudgetAction, key: FiredKey) -> bool:
        """Whether the snapshot's reading was taken after this session's automatic action on
        ``key`` finished, so targets still running in it were started again since."""
        acted = self._acted.get(key)
        if acted is None:
            return True  # fired in an earlier session
        status = snap.source(SourceKind.JOBS if action is BudgetAction.SUSPEND_CRONJOBS else SourceKind.CLOUD)
        return status is not None and (status.updated_at or 0.0) > acted

    def _alerts(self, statuses: Sequence[BudgetStatus], pending: Sequence[PendingAction], now: float) -> tuple[Alert, ...]:
        alerts: list[Alert] = []
        if self.config_error:
            alerts.append(Alert(Severity.WARNING, "config", self.config_error, now))
        for b in statuses:
            message = rules.describe_crossing(b)
            if message is not None:
                over = b.percent >= 100 or any(t.basis is ThresholdBasis.FORECAST for t in b.crossed)
                severity = Severity.CRITICAL if b.percent >= 100 else Severity.WARNING if over else Severity.INFO
                alerts.append(Alert(severity, "budget", message, now))
        for p in pending:
            if p.targets and not p.automatic:
                noun = "CronJob" if p.action is BudgetAction.SUSPEND_CRONJOBS else "instance"
                count = f"{len(p.targets)} {noun}{'s' if len(p.targets) != 1 else ''}"
                message = f"budget {p.budget} at {p.percent:g}%: {p.action.value} of {count} waits for confirmation"
                alerts.append(Alert(Severity.WARNING, "budget", message, now))
        alerts.extend(a for a in self._events if now - a.at <= RESULT_ALERT_S)
        return tuple(alerts)

    def pending(self) -> tuple[PendingAction, ...]:
        """The pending actions of the latest evaluation."""
        with self._lock:
            return self._pending

    def statuses(self) -> tuple[BudgetStatus, ...]:
        with self._lock:
            return self._statuses

    # ------------------------------------------------------------------ acting
    def run(self, pending: PendingAction, confirmation: str) -> ActionResult:
        """Run a pending action on exactly its targets: ``confirmation`` is the user's ``"yes"``,
        or ``"automatic:<budget>"`` for an automatic budget's own action.

        Each target is one request through the action path; the result sums them up (``ok``
        False when any target failed).

        Raises:
            ActionError: refused (not confirmed, or an automatic confirmation for a budget
                that is not automatic), or the budget is gone.
        """
        budget = self.get(pending.budget)
        if budget is None:
            raise ActionError(f"no budget named {pending.budget}")
        if confirmation.startswith("automatic:") and not budget.automatic:
            raise ActionError(f"not confirmed: budget {budget.name} is not automatic; a user must confirm it")
        return self._execute(pending, confirmation)[0]

    def enforce(self, names: Collection[str] | None = None) -> tuple[ActionResult, ...]:
        """Run what the latest evaluation found due, now, on this thread: notifications and
        automatic actions not yet fired this period (``budget check --enforce``); with
        ``names``, only those budgets'."""
        with self._lock:
            if not self._ready:
                return ()
            due = tuple(d for d in self._due if d.key not in self._fired and (names is None or d.key[0] in names))
            self._claim(due)
        return tuple(r for r in (self._fire(item) for item in due) if r is not None)

    def _claim(self, due: Sequence[_Due]) -> None:
        """Mark ``due`` fired in memory (under the lock) so a later evaluation does not repeat it."""
        for item in due:
            self._fired.add(item.key)
            if item.crossing is not None:
                self._bell += 1
            else:
                self._acted[item.key] = float("inf")  # in flight

    def _fire(self, item: _Due) -> ActionResult | None:
        if item.crossing is not None:
            self._remember(item.key)
            return self._notify(item.crossing)
        assert item.pending is not None
        result: ActionResult | None = None
        stopped = 0
        try:
            result, stopped = self._execute(item.pending, automatic_confirmation(item.pending.budget))
        except ActionError as exc:
            self._event(Severity.CRITICAL, f"budget {item.pending.budget}: automatic {item.pending.action.value} refused: {exc}")
        if result is not None:
            self._event(Severity.WARNING if result.ok else Severity.CRITICAL, result.message)
        with self._lock:
            self._acted[item.key] = self.clock()
            if result is None or (item.pending.targets and not stopped):
                self._fired.discard(item.key)  # nothing happened: try again later
                self._retry_at[item.key] = self.clock() + RETRY_AFTER_S
                retry = True
            else:
                retry = False
        if not retry:
            self._remember(item.key)
        if self._on_change is not None and stopped:
            try:
                self._on_change()
            except Exception:  # noqa: BLE001
                log.warning("refresh after a budget action failed", exc_info=True)
        return result

    def _notify(self, crossing: Crossing) -> ActionResult:
        b = crossing.budget
        request = ActionRequest(ActionKind.NOTIFY, b.name, params=(("threshold", rules.threshold_key(crossing.threshold)),
                                                                   ("message", crossing.message())))

        def do() -> str:
            done: list[str] = []
            problems: list[str] = []
            for hook, run in ((b.notify_command, run_notify_command), (b.webhook, post_webhook)):
                if not hook:
                    continue
                try:
                    done.append(run(hook, crossing, self.notify_timeout))
                except BackendError as exc:
                    problems.append(one_line(exc))
            if problems:
                raise BackendError(f"budget {b.name}: " + "; ".join(problems))
            return crossing.message() + (f" ({', '.join(done)})" if done else "")

        if not (b.notify_command or b.webhook):
            # The banner and the bell only: nothing leaves the console, nothing to record.
            return ActionResult(request, True, crossing.message(), self.clock())
        try:
            return run_action(request, do, self.log, self.clock)
        except ActionError as exc:
            self._event(Severity.WARNING, f"notify failed: {exc}")
            return ActionResult(request, False, f"notify failed: {exc}", self.clock())

    def _execute(self, pending: PendingAction, confirmation: str) -> tuple[ActionResult, int]:
        """Act on each target through the action path; the summed-up result and how many succeeded."""
        kind = ActionKind.SUSPEND_CRONJOB if pending.action is BudgetAction.SUSPEND_CRONJOBS else ActionKind.STOP
        tkey = f"{pending.percent:g}{'f' if pending.basis is ThresholdBasis.FORECAST else ''}"
        params = (("budget", pending.budget), ("threshold", tkey), ("action", pending.action.value))
        summary = ActionRequest(kind, f"budget {pending.budget}", confirmation=confirmation,
                                params=(*params, ("targets", ",".join(pending.targets))))
        probe = ActionRequest(kind, pending.targets[0] if pending.targets else pending.budget,
                              confirmation=confirmation, params=params)
        try:
            check_confirmation(probe)
        except ActionError as exc:
            self.log.add(ActionResult(summary, False, f"refused: {exc}", self.clock()))
            raise
        head = f"budget {pending.budget} at {tkey}%"
        if not pending.targets:
            return ActionResult(summary, True, f"{head}: nothing to {pending.action.value}: {pending.detail}", self.clock()), 0
        ok: list[str] = []
        failed: list[str] = []
        regions = self._regions()
        for target in pending.targets:
            try:
                if kind is ActionKind.STOP:
                    cloud = self._cloud()
                    if cloud is None:
                        raise ActionError("no cloud account that can stop instances is configured")
                    cloud.perform(ActionRequest(kind, target, regions.get(target, ""), confirmation, params))
                else:
                    self._suspend(target, confirmation, params)
                ok.append(target)
            except ActionError as exc:
                failed.append(f"{target}: {exc}")
        verb = "suspended" if kind is ActionKind.SUSPEND_CRONJOB else "stopped"
        parts = [f"{verb} {', '.join(ok)}"] if ok else []
        if failed:
            parts.append(f"failed {'; '.join(failed)}")
        parts.extend(p for p in pending.detail.split("; ") if p.startswith("cannot stop"))
        return ActionResult(summary, not failed, f"{head}: {'; '.join(parts)}", self.clock()), len(ok)

    def _suspend(self, uid: str, confirmation: str, params: tuple[tuple[str, str], ...]) -> None:
        backend = self._jobs()
        suspend = getattr(backend, "suspend_cronjob", None)

        def do() -> str:
            if suspend is None:
                raise BackendError("the job backend cannot suspend CronJobs")
            suspend(uid, True)
            return f"suspended CronJob {uid}"

        run_action(ActionRequest(ActionKind.SUSPEND_CRONJOB, uid, confirmation=confirmation, params=params),
                   do, self.log, self.clock)

    def _regions(self) -> dict[str, str]:
        snap = self._snapshot
        return {i.instance_id: i.region for i in snap.instances} if snap is not None else {}

    def _remember(self, key: FiredKey) -> None:
        """Persist a fired key (not for the demo, whose fired state stays in memory)."""
        store = self._store
        if store is None or self.demo:
            return
        try:
            store.mark_budget_fired(*key, self.clock())
        except Exception:  # noqa: BLE001 - in memory it still holds for this session
            log.warning("could not record a fired budget action", exc_info=True)

    def _event(self, severity: Severity, message: str) -> None:
        with self._lock:
            self._events.append(Alert(severity, "budget", message, self.clock()))

    # ------------------------------------------------------------------ the bell
    @property
    def bell_count(self) -> int:
        """How many notifications have fired; the UI rings the terminal bell when it grows."""
        return self._bell

    def take_bell(self) -> bool:
        """True once for each batch of new notifications since the last call."""
        with self._lock:
            ring = self._bell > self._bell_seen
            self._bell_seen = self._bell
            return ring

    # ------------------------------------------------------------------ the launch wizard
    def launch_impact(self, budget: str, hourly: float) -> str | None:
        """One line on what a launch costing ``hourly`` $/h does to a budget: the budget of that
        name, else the one scoped to a tag of that value (the launch's ``Budget`` tag), else —
        for an empty name — the fleet budget (monthly, scope all). None when none matches."""
        with self._lock:
            statuses, snap = self._statuses, self._snapshot
        status = _match(statuses, budget.strip())
        if status is None:
            return None
        now = snap.taken_at if snap is not None else self.clock()
        return rules.impact_line(status, hourly, now)

    # ------------------------------------------------------------------ the background thread
    def _submit(self, task: Callable[[], object]) -> None:
        with self._idle:
            self._busy += 1
            if self._worker is None or not self._worker.is_alive():
                self._worker = threading.Thread(target=self._work, name="budget-actions", daemon=True)
                self._worker.start()
        self._queue.put(task)

    def _work(self) -> None:
        while True:
            task = self._queue.get()
            if task is None:
                return
            try:
                task()
            except Exception:  # noqa: BLE001 - one failed task must not stop the others
                log.exception("budget action failed")
            finally:
                with self._idle:
                    self._busy -= 1
                    self._idle.notify_all()

    def wait_idle(self, timeout: float = 30.0) -> bool:
        """Block until the background thread has nothing left to do (tests, shutdown)."""
        deadline = time.monotonic() + timeout
        with self._idle:
            while self._busy:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._idle.wait(left)
        return True

    def close(self, timeout: float = 2.0) -> None:
        """Let queued work finish for up to ``timeout`` seconds, then stop the thread."""
        self.wait_idle(timeout)
        worker = self._worker
        if worker is not None and worker.is_alive():
            self._queue.put(None)
            worker.join(timeout)
        self._worker = None


def describe(budget: Budget) -> str:
    """``research: $1,000 monthly, scope tag:Budget=research, thresholds 80:notify 100:notify+stop-all, automatic``."""
    text = (f"{budget.name}: {rules.usd(budget.amount)} {rules.describe_period(budget)}, scope {budget.scope}, "
            f"thresholds {' '.join(rules.format_threshold(t) for t in budget.thresholds)}")
    return text + (", automatic" if budget.automatic else "")


def _as_store(budget: Budget) -> Budget:
    return budget if budget.origin == "store" else replace(budget, origin="store")


def _live(snap: FleetSnapshot, action: BudgetAction) -> bool:
    kind = SourceKind.JOBS if action is BudgetAction.SUSPEND_CRONJOBS else SourceKind.CLOUD
    status = snap.source(kind)
    return status is not None and status.state is SourceState.LIVE


def _match(statuses: Sequence[BudgetStatus], name: str) -> BudgetStatus | None:
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


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
