"""The one path every change to the fleet takes: request → confirmation check → backend → result.

The UI and the CLI build an :class:`ActionRequest` and hand it to the core, which checks that a
destructive action carries the confirmation it needs (for a terminate: the instance id typed by
the user) before any backend is called, and turns every backend failure into one line. Roles,
MFA and the audit trail attach here, so neither door can skip them.

Budgets act through the same path. A budget marked automatic confirms its own stop and suspend
actions with ``"automatic:<budget>"`` (the request names the budget in its ``budget`` param);
that confirmation is accepted for :data:`AUTOMATIC_KINDS`, and for a terminate only when the
request is a budget's ``terminate-spot`` (its ``action`` param): an admin opted into it by
putting that action in an automatic budget, which needs MFA like any destructive action.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol

# one_line lives beside the typed errors; the UI imports it from here too.
from gpuconsole.backends.base import BackendError, BackendPermissionDenied, one_line

log = logging.getLogger(__name__)


class ActionKind(str, enum.Enum):
    """What a request does; the value is the verb shown to users and written to logs."""

    LAUNCH = "launch"
    START = "start"
    STOP = "stop"
    POWER_OFF = "power-off"  # an Azure VM powered off but kept allocated: its compute still bills
    REBOOT = "reboot"
    TERMINATE = "terminate"
    SUSPEND_CRONJOB = "suspend-cronjob"
    SUBMIT_JOB = "submit-job"
    DELETE_JOB = "delete-job"
    SUSPEND_JOB = "suspend-job"
    RESUME_JOB = "resume-job"
    TRIGGER_CRONJOB = "trigger-cronjob"
    BUDGET_ADD = "budget-add"
    BUDGET_REMOVE = "budget-remove"
    NOTIFY = "notify"
    KILL_PROCESS = "kill-process"
    USER_ADD = "user-add"
    USER_SET_ROLE = "user-set-role"
    USER_REMOVE = "user-remove"
    RULE_ADD = "rule-add"
    RULE_REMOVE = "rule-remove"
    RULE_PAUSE = "rule-pause"
    RULE_RESUME = "rule-resume"
    KEY_CREATE = "key-create"
    KEY_DEACTIVATE = "key-deactivate"
    KEY_DELETE = "key-delete"
    SCALE_SERVICE = "scale-service"
    RESTART_SERVICE = "restart-service"
    MOVE_QUEUE = "move-queue"  # a pending job to another LocalQueue of its namespace (Kueue)
    DEACTIVATE_WORKLOAD = "deactivate-workload"
    REACTIVATE_WORKLOAD = "reactivate-workload"

    @property
    def destructive(self) -> bool:
        return self in (ActionKind.STOP, ActionKind.POWER_OFF, ActionKind.REBOOT, ActionKind.TERMINATE, ActionKind.SUSPEND_CRONJOB,
                        ActionKind.DELETE_JOB, ActionKind.SUSPEND_JOB, ActionKind.KILL_PROCESS)


# Actions whose confirmation is the target itself, typed by the user (an accidental Enter must
# never terminate a machine that holds a week of training).
TYPED_CONFIRMATION = frozenset({ActionKind.TERMINATE})

# What an automatic budget may do without a user: stop instances and suspend CronJobs. A terminate
# loses data and is never in this set; the one exception is a budget's terminate-spot below.
AUTOMATIC_KINDS = frozenset({ActionKind.STOP, ActionKind.SUSPEND_CRONJOB})
AUTOMATIC_PREFIX = "automatic:"
# The budget action whose terminates (of one-time spot instances, which cannot be stopped) an
# automatic budget may confirm itself: its threshold names it, so an admin asked for it.
AUTOMATIC_TERMINATE_ACTION = "terminate-spot"


# What the autopilot may do as ``autopilot:<rule>`` (the request names the rule in its ``rule``
# param): launch and stop; terminate only a spot instance (params say ``market`` spot), which
# a rule's ``spot = "terminate"`` asked for; set a service's replicas (a ``serve-scale`` rule).
AUTOPILOT_KINDS = frozenset({ActionKind.LAUNCH, ActionKind.STOP, ActionKind.TERMINATE, ActionKind.SCALE_SERVICE})
AUTOPILOT_PREFIX = "autopilot:"


def autopilot_confirmation(rule: str) -> str:
    """The confirmation (and the audit actor) of the autopilot rule ``rule``."""
    return f"{AUTOPILOT_PREFIX}{rule}"


def automatic_confirmation(budget: str) -> str:
    """The confirmation an automatic budget named ``budget`` gives its own actions."""
    return f"{AUTOMATIC_PREFIX}{budget}"


@dataclass(frozen=True, slots=True)
class ActionRequest:
    """One change asked for.

    Attributes:
        kind: what to do.
        target: the thing it is done to (an instance id; for a launch the instance type).
        region: where the target lives, for cloud actions.
        confirmation: what the user typed or agreed to: the target for a typed confirmation,
            ``"yes"`` for a plain one.
        params: extra parameters, as (name, value) pairs, for display and records.
    """

    kind: ActionKind
    target: str
    region: str = ""
    confirmation: str = ""
    params: tuple[tuple[str, str], ...] = ()

    def describe(self) -> str:
        where = f" in {self.region}" if self.region else ""
        return f"{self.kind.value} {self.target}{where}"


@dataclass(frozen=True, slots=True)
class ActionResult:
    request: ActionRequest
    ok: bool
    message: str
    ts: float


class ActionError(Exception):
    """An action was refused or failed; the message is one line for the user."""


class ActionDenied(ActionError):
    """The role, the MFA check or ``--read-only`` refused the action (message ``denied: …``), or
    the system that owns the resource did (``denied by the cluster: …``)."""


class ActionGuard(Protocol):
    """Who may act, and the audit trail (:class:`gpuconsole.core.access.guard.Guard`)."""

    def admit(self, request: ActionRequest) -> None:
        """Raise :class:`ActionError` saying why ``request`` may not run."""

    def intend(self, request: ActionRequest) -> None:
        """Append that ``request`` is about to run; raise when that cannot be recorded."""

    def record(self, result: ActionResult) -> None:
        """Append ``result`` to the audit log; raise when it cannot be recorded."""


def confirmation_prompt(kind: ActionKind, target: str) -> str:
    """What the user is asked before ``kind`` runs on ``target``."""
    if kind in TYPED_CONFIRMATION:
        return f"Type {target} to {kind.value} it. This cannot be undone."
    return f"{kind.value.capitalize()} {target}? (y/n)"


def check_confirmation(request: ActionRequest) -> None:
    """Raise :class:`ActionError` unless ``request`` carries the confirmation its kind needs."""
    if request.confirmation.startswith(AUTOPILOT_PREFIX):
        _check_autopilot(request)
        return
    if request.confirmation.startswith(AUTOMATIC_PREFIX):
        action = dict(request.params).get("action")
        opted_in = request.kind is ActionKind.TERMINATE and action == AUTOMATIC_TERMINATE_ACTION
        if request.kind not in AUTOMATIC_KINDS and not opted_in:
            raise ActionError(f"not confirmed: {request.kind.value} never runs automatically; a user must confirm it")
        budget = dict(request.params).get("budget", "")
        if not budget or request.confirmation != automatic_confirmation(budget):
            raise ActionError(f"not confirmed: {request.describe()} names no automatic budget")
        return
    if request.kind in TYPED_CONFIRMATION:
        if request.confirmation.strip() != request.target:
            raise ActionError(f"not confirmed: type {request.target} exactly to {request.kind.value} it")
    elif request.kind.destructive and request.confirmation != "yes":
        raise ActionError(f"not confirmed: {request.describe()} needs a yes")


def _check_autopilot(request: ActionRequest) -> None:
    params = dict(request.params)
    if request.kind not in AUTOPILOT_KINDS:
        raise ActionError(f"not confirmed: {request.kind.value} never runs from the autopilot")
    if not params.get("rule") or request.confirmation != autopilot_confirmation(params["rule"]):
        raise ActionError(f"not confirmed: {request.describe()} names no autopilot rule")
    if request.kind is ActionKind.TERMINATE and params.get("market") != "spot":
        raise ActionError(f"not confirmed: the autopilot terminates spot instances only, not {request.target}")


class ActionLog:
    """The recent results, newest last, for the UI's status line and the tests (bounded)."""

    def __init__(self, limit: int = 200, guard: ActionGuard | None = None) -> None:
        self._limit = limit
        self._items: list[ActionResult] = []
        self._lock = threading.Lock()
        self.guard = guard  # checks every request of run_action and audits every result added

    def add(self, result: ActionResult) -> None:
        """Keep ``result`` and audit it; raises when the guard cannot record it (kept all the same)."""
        with self._lock:
            self._items.append(result)
            del self._items[: -self._limit]
        if self.guard is not None:
            self.guard.record(result)

    def recent(self) -> tuple[ActionResult, ...]:
        with self._lock:
            return tuple(self._items)


def run_action(request: ActionRequest, do: Callable[[], str], record: ActionLog,
               clock: Callable[[], float] = time.time) -> ActionResult:
    """Check ``request``, record that it starts, run ``do`` (which returns a one-line success
    message), record the result.

    The log's guard, when it has one, admits the request first (role, namespace, MFA,
    ``--read-only``), whatever its kind, and audits it before and after it runs: when the intent
    cannot be written nothing runs, and whatever ``do`` raises is recorded as a failure. An
    outcome that cannot be recorded is an error too (the caller exits non-zero), even when the
    change was made.

    Raises:
        ActionError: denied, refused (not confirmed), unrecordable, or failed; recorded either way.
    """
    if record.guard is not None:
        try:
            record.guard.admit(request)
        except ActionError as exc:
            _settle(record, ActionResult(request, False, f"denied: {exc}", clock()))
            log.info("%s denied: %s", request.describe(), exc)
            raise ActionDenied(f"denied: {exc}") from exc
    try:
        check_confirmation(request)
    except ActionError as exc:
        _settle(record, ActionResult(request, False, f"refused: {exc}", clock()))
        raise
    if record.guard is not None:
        try:
            record.guard.intend(request)
        except Exception as exc:  # noqa: BLE001 - whatever stops the record stops the action
            raise ActionError(f"nothing runs unrecorded: {one_line(exc)}") from exc
    try:
        message = do()
    except BackendPermissionDenied as exc:
        # The owner of the resource refused (IAM, a trust policy, RBAC's 403, the OS): audited as
        # denied, in its own words ("denied by the cluster: …" keeps its wording).
        line = one_line(exc)
        _settle(record, ActionResult(request, False, f"denied: {line.removeprefix('denied ')}", clock()))
        log.info("%s denied: %s", request.describe(), line)
        raise ActionDenied(line if line.startswith("denied") else f"denied: {line}") from exc
    except BaseException as exc:
        line = one_line(exc)
        _settle(record, ActionResult(request, False, f"failed: {line}", clock()))
        log.info("%s failed: %s", request.describe(), line)
        if not isinstance(exc, Exception):
            raise  # an interrupt: recorded, and still an interrupt
        raise ActionError(line) from exc
    result = ActionResult(request, True, message, clock())
    _settle(record, result)
    log.info("%s: %s", request.describe(), message)
    return result


def _settle(record: ActionLog, result: ActionResult) -> None:
    """Add ``result`` to the log; when the audit cannot take it, say so as an :class:`ActionError`."""
    try:
        record.add(result)
    except Exception as exc:  # noqa: BLE001 - any audit failure: the caller must not report success
        outcome, why = "done" if result.ok else result.message, one_line(exc)
        if why in outcome:  # denied because the audit cannot be written: that says it all
            raise ActionError(f"{result.request.describe()}: {outcome} (not recorded either)") from exc
        raise ActionError(f"{result.request.describe()}: {outcome}, but the result could not be recorded "
                          f"in the audit log: {why}") from exc


def log_lines(lines: Iterator[str]) -> Iterator[str]:
    """A backend's log ``lines`` as they come; a failure ends them with :class:`ActionError`
    (one line), and the stream is closed however the reader stops."""
    try:
        yield from lines
    except BackendError as exc:
        raise ActionError(one_line(exc)) from exc
    finally:
        close = getattr(lines, "close", None)
        if close is not None:
            close()
