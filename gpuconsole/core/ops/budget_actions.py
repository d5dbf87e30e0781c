"""Budget actions carried out: instances stopped or terminated, CronJobs suspended, on a background thread.

:func:`execute` runs one :class:`~gpuconsole.model.PendingAction` on exactly its targets, each
target one request through the action path: instance stops (and ``terminate-spot``'s
terminates of one-time spot instances) through ``CloudOps.perform``,
CronJob suspensions through the job backend. The confirmation is the user's ``"yes"``, or
``"automatic:<budget>"`` for an automatic budget's own action; it is checked before any target
is touched, and a refusal is recorded.

:class:`ActionThread` is the one daemon thread (``budget-actions``) on which the console runs
notifications and automatic actions, in the order they were found due.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gpuconsole.backends.base import BackendError, CronJobSuspension
from gpuconsole.core.ops.actions import (
    AUTOMATIC_PREFIX,
    ActionError,
    ActionKind,
    ActionLog,
    ActionRequest,
    ActionResult,
    check_confirmation,
    run_action,
)
from gpuconsole.model import BudgetAction, FleetSnapshot, PendingAction, ThresholdBasis

if TYPE_CHECKING:
    from gpuconsole.core.ops.cloud_ops import CloudOps

log = logging.getLogger(__name__)


def execute(pending: PendingAction, confirmation: str, *, cloud: Callable[[], CloudOps | None],
            jobs: Callable[[], Any], record: ActionLog, clock: Callable[[], float],
            snapshot: FleetSnapshot | None) -> tuple[ActionResult, int]:
    """Act on each target of ``pending`` through the action path; the summed-up result (``ok``
    False when any target failed) and how many targets succeeded.

    Args:
        confirmation: ``"yes"``, ``"automatic:<budget>"``, or for ``terminate-spot`` run by a
            user the budget's name typed (a terminate is never one keypress away).
        cloud: returns the CloudOps instances are stopped through (None: no cloud account).
        jobs: returns the job backend CronJobs are suspended through.
        snapshot: the latest snapshot (each instance's region); None when there is none yet.

    Raises:
        ActionError: not confirmed (the refusal is recorded in ``record``).
    """
    kind = action_kind(pending.action)
    tkey = f"{pending.percent:g}{'f' if pending.basis is ThresholdBasis.FORECAST else ''}"
    params = (("budget", pending.budget), ("threshold", tkey), ("action", pending.action.value))
    summary = ActionRequest(kind, f"budget {pending.budget}", confirmation=confirmation,
                            params=(*params, ("targets", ",".join(pending.targets))))
    try:
        per_target = _target_confirmation(pending, kind, confirmation, params)
    except ActionError as exc:
        record.add(ActionResult(summary, False, f"refused: {exc}", clock()))
        raise
    head = f"budget {pending.budget} at {tkey}%"
    if not pending.targets:
        return ActionResult(summary, True, f"{head}: nothing to {pending.action.value}: {pending.detail}", clock()), 0
    ok: list[str] = []
    failed: list[str] = []
    regions = {i.instance_id: i.region for i in snapshot.instances} if snapshot is not None else {}
    for target in pending.targets:
        confirm = per_target if per_target is not None else target
        try:
            if kind is ActionKind.SUSPEND_CRONJOB:
                suspend_cronjob(target, confirm, params, jobs=jobs, record=record, clock=clock)
            else:
                ops = cloud()
                if ops is None:
                    raise ActionError(f"no cloud account that can {kind.value} instances is configured")
                ops.perform(ActionRequest(kind, target, regions.get(target, ""), confirm, params))
            ok.append(target)
        except ActionError as exc:
            failed.append(f"{target}: {exc}")
    verb = {ActionKind.SUSPEND_CRONJOB: "suspended", ActionKind.TERMINATE: "terminated"}.get(kind, "stopped")
    parts = [f"{verb} {', '.join(ok)}"] if ok else []
    if failed:
        parts.append(f"failed {'; '.join(failed)}")
    parts.extend(p for p in pending.detail.split("; ") if p.startswith(("cannot stop", "left running")))
    return ActionResult(summary, not failed, f"{head}: {'; '.join(parts)}", clock()), len(ok)


def action_kind(action: BudgetAction) -> ActionKind:
    """The action path's kind for a budget action: a suspend, a terminate (``terminate-spot``) or a stop."""
    if action is BudgetAction.SUSPEND_CRONJOBS:
        return ActionKind.SUSPEND_CRONJOB
    return ActionKind.TERMINATE if action is BudgetAction.TERMINATE_SPOT else ActionKind.STOP


def _target_confirmation(pending: PendingAction, kind: ActionKind, confirmation: str,
                         params: tuple[tuple[str, str], ...]) -> str | None:
    """The confirmation each target's request carries, checked before any target is touched;
    None: each target confirms itself (a user typed the budget's name for a ``terminate-spot``,
    whose confirmation screen listed every target).

    Raises:
        ActionError: not confirmed.
    """
    if kind is ActionKind.TERMINATE and not confirmation.startswith(AUTOMATIC_PREFIX):
        if confirmation.strip() != pending.budget:
            raise ActionError(f"not confirmed: type {pending.budget} exactly to terminate the budget's "
                              "one-time spot instances")
        return None
    target = pending.targets[0] if pending.targets else pending.budget
    check_confirmation(ActionRequest(kind, target, confirmation=confirmation, params=params))
    return confirmation


def suspend_cronjob(uid: str, confirmation: str, params: tuple[tuple[str, str], ...], *,
                    jobs: Callable[[], Any], record: ActionLog, clock: Callable[[], float]) -> None:
    """Suspend the CronJob ``uid`` through the job backend, as one request of the action path.

    Raises:
        ActionError: refused, or the backend failed or cannot suspend CronJobs (one line).
    """
    backend = jobs()
    def do() -> str:
        if not isinstance(backend, CronJobSuspension):
            raise BackendError("the job backend cannot suspend CronJobs")
        backend.suspend_cronjob(uid, True)
        return f"suspended CronJob {uid}"

    run_action(ActionRequest(ActionKind.SUSPEND_CRONJOB, uid, confirmation=confirmation, params=params),
               do, record, clock)


class ActionThread:
    """One daemon thread, started when work arrives, that runs the submitted tasks in order.

    A task that raises is logged and the next one runs.
    """

    def __init__(self, name: str = "budget-actions") -> None:
        self.name = name
        self._queue: queue.Queue[Callable[[], object] | None] = queue.Queue()
        self._worker: threading.Thread | None = None
        self._busy = 0
        self._idle = threading.Condition()

    def submit(self, task: Callable[[], object]) -> None:
        with self._idle:
            self._busy += 1
            if self._worker is None or not self._worker.is_alive():
                self._worker = threading.Thread(target=self._work, name=self.name, daemon=True)
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
        """Block until the thread has nothing left to do (tests, shutdown)."""
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
