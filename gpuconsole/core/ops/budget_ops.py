"""Budgets that act: the one door for budgets, from listing them to doing what they call for.

:class:`BudgetOps` (``console.budget_ops``) puts together the budget book
(:mod:`gpuconsole.core.money.budget_book`: where budgets come from, what has fired), evaluation
(:mod:`gpuconsole.core.money.budget_evaluation`) and acting (:mod:`.budget_actions`,
:mod:`.budget_notify`). The Console calls :meth:`BudgetOps.evaluate` on every snapshot it
composes; that call only computes (no I/O): each budget's status, the
:class:`~gpuconsole.model.PendingAction` values that show exactly what a crossed threshold would
stop or suspend, and the alerts. Side effects leave the compose path:

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
import logging
import time
from collections import deque
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from gpuconsole.core.config import ConfigFile
from gpuconsole.core.money import budgets as rules
from gpuconsole.core.money.budget_book import BudgetBook, BudgetStore, FiredKey
from gpuconsole.core.money.budget_evaluation import Due, alerts, match, plan
from gpuconsole.core.ops.actions import (
    ActionError,
    ActionKind,
    ActionLog,
    ActionRequest,
    ActionResult,
    automatic_confirmation,
    run_action,
)
from gpuconsole.core.ops.budget_actions import ActionThread, execute
from gpuconsole.core.ops.budget_notify import NOTIFY_TIMEOUT_S, notify
from gpuconsole.model import (
    Alert,
    Budget,
    BudgetStatus,
    FleetSnapshot,
    PendingAction,
    Severity,
)

if TYPE_CHECKING:
    from gpuconsole.core.ops.cloud_ops import CloudOps

log = logging.getLogger(__name__)

RETRY_AFTER_S = 300.0  # an automatic action that failed everywhere is tried again after this


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
        store: BudgetStore | None = None,
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
        self.book = BudgetBook(config, demo_start=demo_start, warn=lambda message: self._event(Severity.WARNING, message))
        self.config_error = config_error
        self.log = log if log is not None else ActionLog()
        self.clock = clock
        self.act = act
        self.notify_timeout = notify_timeout
        self._cloud = cloud
        self._jobs = jobs
        self._on_change = on_change
        self._lock = self.book.lock  # one lock for the book and for what is below
        self._retry_at: dict[FiredKey, float] = {}
        self._acted: dict[FiredKey, float] = {}  # when an automatic action finished (inf: running)
        self._demo_quiet = False  # the demo's crossings at its first reading are taken as known
        self._statuses: tuple[BudgetStatus, ...] = ()
        self._pending: tuple[PendingAction, ...] = ()
        self._due: tuple[Due, ...] = ()
        self._snapshot: FleetSnapshot | None = None
        self._events: deque[Alert] = deque(maxlen=50)
        self._bell = 0
        self._bell_seen = 0
        self._thread = ActionThread("budget-actions")
        if store is not None or not store_pending:
            self.attach_store(store)

    # ------------------------------------------------------------------ where budgets come from
    def attach_store(self, store: BudgetStore | None) -> None:
        """Read budgets and fired state from ``store`` (None: there will be none) and start firing.

        Blocking (SQLite): the Console calls it from the thread that opened the Store. Budgets
        added while the Store was still opening are saved into it.
        """
        self.book.attach(store)

    @property
    def config(self) -> ConfigFile:
        """The configuration file's budgets (and where the file is)."""
        return self.book.config

    @property
    def demo(self) -> bool:
        return self.book.demo

    def set_demo(self, start: float) -> None:
        """Switch to the demo (the user asked for it): demo budgets, and fired state in memory."""
        with self._lock:
            self.book.set_demo(start)
            self._demo_quiet = False

    def budgets(self) -> tuple[Budget, ...]:
        """Demo budgets (in the demo), then the configuration file's, then the Store's; a name
        already taken by an earlier source hides a later budget of that name."""
        return self.book.budgets()

    def get(self, name: str) -> Budget | None:
        return self.book.get(name)

    # ------------------------------------------------------------------ changing budgets
    def add_request(self, budget: Budget, *, replace: bool = False) -> ActionRequest:
        """The request :meth:`add` runs, to ask for MFA before it: adding an automatic budget,
        or replacing one, needs a fresh code from an admin (its ``automatic`` and
        ``replaces-automatic`` params say so).

        Raises:
            ActionError: invalid, or the name is taken (see :meth:`add`).
        """
        return self._add_plan(budget, replace)[0]

    def add(self, budget: Budget, *, replace: bool = False) -> ActionResult:
        """Save a budget (origin ``"store"``) through the action path.

        Raises:
            ActionError: invalid, or the name is taken (by the configuration file or the demo,
                or by a saved budget without ``replace``), or the Store failed (one line); denied
                without a fresh MFA code when it adds or replaces an automatic budget.
        """
        request, saved, existing = self._add_plan(budget, replace)
        return run_action(request, lambda: self.book.save(saved, replace=replace, existing=existing),
                          self.log, self.clock)

    def _add_plan(self, budget: Budget, replace: bool) -> tuple[ActionRequest, Budget, Budget | None]:
        try:
            budget, existing = self.book.check_add(budget, replace=replace)
        except rules.BudgetError as exc:
            raise ActionError(str(exc)) from None
        params = (("amount", f"{budget.amount:.2f}"), ("period", rules.describe_period(budget)),
                  ("scope", budget.scope), ("thresholds", " ".join(rules.format_threshold(t) for t in budget.thresholds)),
                  ("automatic", "yes" if budget.automatic else "no"))
        if existing is not None and existing.automatic:
            params = (*params, ("replaces-automatic", "yes"))
        return ActionRequest(ActionKind.BUDGET_ADD, budget.name, params=params), budget, existing

    def remove(self, name: str) -> ActionResult:
        """Delete a saved budget. Raises :class:`ActionError` for a budget of the configuration
        file or the demo, or an unknown name (one line)."""
        # Checked after the guard (in the book's remove), so a denied attempt is audited whatever it named.
        return run_action(ActionRequest(ActionKind.BUDGET_REMOVE, name), lambda: self.book.remove(name),
                          self.log, self.clock)

    # ------------------------------------------------------------------ evaluating
    def evaluate(
        self, snapshot: FleetSnapshot
    ) -> tuple[tuple[BudgetStatus, ...], tuple[PendingAction, ...], tuple[Alert, ...]]:
        """Statuses, pending actions and alerts for ``snapshot`` (its budgets are ignored).

        Pure computation on the caller's thread; what is due (notifications, automatic
        actions) is handed to the background thread when the console acts on budgets.
        """
        now = snapshot.taken_at
        book = self.book
        with self._lock:
            book.size_sprint(snapshot.instances)
            statuses = rules.evaluate_all(book.budgets(), snapshot.instances, now, snapshot.jobs, book.config.rates)
            if snapshot.spend_basis:  # a real cloud's spend says whether CloudTrail's history is in it
                statuses = tuple(msgspec.structs.replace(st, spend_basis=snapshot.spend_basis) for st in statuses)
            pending, due = plan(statuses, snapshot, now, book.fired, self._retry_at, self._acted)
            self._statuses, self._pending, self._due, self._snapshot = statuses, pending, due, snapshot
            found = alerts(statuses, pending, now, self._events, self.config_error)
            if book.demo and not self._demo_quiet and book.ready and snapshot.instances:
                # A demo opens with budgets already past thresholds: ringing for those on every
                # start would teach users to ignore the bell. Only crossings from now on notify.
                self._demo_quiet = True
                book.fired |= {d.key for d in due if d.crossing is not None}
                due = tuple(d for d in due if d.crossing is None)
            if self.act and book.ready and due:
                self._claim(due)
                for item in due:
                    self._thread.submit(functools.partial(self._fire, item))
        return statuses, pending, found

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
            if not self.book.ready:
                return ()
            due = tuple(d for d in self._due if d.key not in self.book.fired and (names is None or d.key[0] in names))
            self._claim(due)
        return tuple(r for r in (self._fire(item) for item in due) if r is not None)

    def _claim(self, due: Sequence[Due]) -> None:
        """Mark ``due`` fired in memory (under the lock) so a later evaluation does not repeat it."""
        for item in due:
            self.book.fired.add(item.key)
            if item.crossing is not None:
                self._bell += 1
            else:
                self._acted[item.key] = float("inf")  # in flight

    def _fire(self, item: Due) -> ActionResult | None:
        if item.crossing is not None:
            self.book.remember(item.key, self.clock)
            result = notify(item.crossing, self.log, self.clock, self.notify_timeout)
            if not result.ok:
                self._event(Severity.WARNING, result.message)
            return result
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
                self.book.fired.discard(item.key)  # nothing happened: try again later
                self._retry_at[item.key] = self.clock() + RETRY_AFTER_S
                retry = True
            else:
                retry = False
        if not retry:
            self.book.remember(item.key, self.clock)
        if self._on_change is not None and stopped:
            try:
                self._on_change()
            except Exception:  # noqa: BLE001
                log.warning("refresh after a budget action failed", exc_info=True)
        return result

    def _execute(self, pending: PendingAction, confirmation: str) -> tuple[ActionResult, int]:
        """Act on each target through the action path; the summed-up result and how many succeeded."""
        return execute(pending, confirmation, cloud=self._cloud, jobs=self._jobs, record=self.log, clock=self.clock,
                       snapshot=self._snapshot)

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
        status = match(statuses, budget.strip())
        if status is None:
            return None
        now = snap.taken_at if snap is not None else self.clock()
        return rules.impact_line(status, hourly, now)

    # ------------------------------------------------------------------ the background thread
    def wait_idle(self, timeout: float = 30.0) -> bool:
        """Block until the background thread has nothing left to do (tests, shutdown)."""
        return self._thread.wait_idle(timeout)

    def close(self, timeout: float = 2.0) -> None:
        """Let queued work finish for up to ``timeout`` seconds, then stop the thread."""
        self._thread.close(timeout)
