"""Jobs through the core: submit, delete, suspend and resume, trigger, logs and describe, and a
pending job's place in its Kueue queue (move it to another LocalQueue, deactivate its Workload).

The UI and the CLI change jobs only through :class:`JobOps` (``console.jobs``). Each change is an
:class:`~gpuconsole.core.ops.actions.ActionRequest` run by :func:`~gpuconsole.core.ops.actions.run_action`,
so the confirmation a delete or a suspend needs (``"yes"``) is checked here, before the cluster is
asked, and every result is recorded. Every method blocks (it calls the cluster): call it from a
worker thread. Every failure reaches the caller as :class:`~gpuconsole.core.ops.actions.ActionError`
with one line.

The backend is the Hub's job source. It can act when it is a
:class:`~gpuconsole.backends.base.JobControl` itself (the simulator) or offers one as its
``job_control`` attribute (the Kubernetes adapter, built on the adapter's own API client).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from gpuconsole.backends.base import BackendError, JobControl, OffersJobControl, QueueControl
from gpuconsole.core.ops import manifests as jobspec
from gpuconsole.core.ops import training_manifest as training
from gpuconsole.core.ops.actions import (
    ActionError,
    ActionKind,
    ActionLog,
    ActionRequest,
    ActionResult,
    log_lines,
    one_line,
    run_action,
)
from gpuconsole.core.ops.manifests import JobRequest
from gpuconsole.core.ops.training_manifest import TrainingRequest

T = TypeVar("T")

NOT_A_CLUSTER = "this job source cannot change jobs (no Kubernetes cluster or demo is connected)"
KINDS = ("Job", "CronJob", "MPIJob", "PyTorchJob", "TrainJob", "JobSet")
LOG_TAIL = 1000


def control_of(backend: Any) -> JobControl | None:
    """The :class:`JobControl` of a job source, if it has one."""
    if isinstance(backend, JobControl):
        return backend
    control = backend.job_control if isinstance(backend, OffersJobControl) else None
    return control if isinstance(control, JobControl) else None


class JobOps:
    """What the console can do with the jobs of the cluster it watches.

    Args:
        backend: the job source of the Hub (the simulator, the Kubernetes adapter, or a stand-in).
        clock: the console's clock (schedules' next runs are computed from it).
        log: where every action's result is recorded.
    """

    def __init__(self, backend: Any, clock: Callable[[], float] = time.time, log: ActionLog | None = None) -> None:
        self.backend = backend
        self.clock = clock
        self.log = log if log is not None else ActionLog()

    # ------------------------------------------------------------------ what there is
    @property
    def control(self) -> JobControl | None:
        return control_of(self.backend)

    @property
    def available(self) -> bool:
        """Whether the job source can submit and change jobs."""
        return self.control is not None

    # ------------------------------------------------------------------ requests (pure)
    @staticmethod
    def validate(req: JobRequest | TrainingRequest) -> dict[str, str]:
        return training.validate(req) if isinstance(req, TrainingRequest) else jobspec.validate(req)

    @staticmethod
    def manifests(req: JobRequest | TrainingRequest) -> list[dict[str, Any]]:
        return training.manifests(req) if isinstance(req, TrainingRequest) else jobspec.manifests(req)

    def preview(self, req: JobRequest | TrainingRequest) -> str:
        """The YAML the cluster will receive."""
        return jobspec.to_yaml(self.manifests(req))

    def next_runs(self, schedule: str, count: int = 3) -> list[float]:
        """The next run times of a schedule from now. Raises ValueError for a bad schedule."""
        return jobspec.next_runs(schedule, self.clock(), count)

    # ------------------------------------------------------------------ submitting
    def submit(self, req: JobRequest | TrainingRequest, *, dry_run: bool = False) -> ActionResult:
        """Create the Job or CronJob (and a distributed job's Service), or the MPIJob or
        PyTorchJob, that ``req`` describes.

        With ``dry_run`` the cluster checks every object and stores nothing. It still goes
        through the guard and the audit: it sends the login's manifests to the cluster, which
        ``--read-only`` and auditors never do.

        Raises:
            ActionError: ``req`` is invalid (``"field: message"``), or the cluster refused it.
        """
        problems = self.validate(req)
        if problems:
            field, message = next(iter(problems.items()))
            raise ActionError(f"{field}: {message}")
        objects = self.manifests(req)
        params = (("kind", req.kind), ("image", req.image), ("gpus", str(req.gpus)),
                  ("mig", req.mig_profile), ("workers", str(req.workers)), ("schedule", req.schedule))
        if dry_run:
            params = (*params, ("dry-run", "yes"))
        request = ActionRequest(ActionKind.SUBMIT_JOB, f"{req.namespace}/{req.name}", params=params)

        def do() -> str:
            if dry_run:
                return "dry run passed: " + ", ".join(self._control().submit(objects, dry_run=True))
            return "created " + ", ".join(self._control().submit(objects))

        return run_action(request, do, self.log, self.clock)

    # ------------------------------------------------------------------ changing
    def delete(self, kind: str, namespace: str, name: str, confirmation: str = "") -> ActionResult:
        """Delete a Job (its pods go too) or a CronJob (its Jobs go too). Needs ``"yes"``."""
        kind = _kind(kind)
        request = ActionRequest(ActionKind.DELETE_JOB, f"{namespace}/{name}", confirmation=confirmation,
                                params=(("kind", kind),))

        def do() -> str:
            self._control().delete(kind, namespace, name)
            return f"deleted {kind} {namespace}/{name}"

        return run_action(request, do, self.log, self.clock)

    def suspend(self, kind: str, namespace: str, name: str, confirmation: str = "") -> ActionResult:
        """Suspend a Job (its running pods are stopped) or a CronJob (no new runs). Needs ``"yes"``."""
        kind = _kind(kind)
        action = ActionKind.SUSPEND_CRONJOB if kind == "CronJob" else ActionKind.SUSPEND_JOB
        request = ActionRequest(action, f"{namespace}/{name}", confirmation=confirmation, params=(("kind", kind),))

        def do() -> str:
            self._control().suspend(kind, namespace, name, True)
            return f"suspended {kind} {namespace}/{name}"

        return run_action(request, do, self.log, self.clock)

    def resume(self, kind: str, namespace: str, name: str) -> ActionResult:
        """Resume a suspended Job (new pods) or CronJob (runs from its next time on)."""
        kind = _kind(kind)
        request = ActionRequest(ActionKind.RESUME_JOB, f"{namespace}/{name}", params=(("kind", kind),))

        def do() -> str:
            self._control().suspend(kind, namespace, name, False)
            return f"resumed {kind} {namespace}/{name}"

        return run_action(request, do, self.log, self.clock)

    def trigger(self, namespace: str, cronjob: str) -> ActionResult:
        """Run a CronJob now, as ``kubectl create job --from=cronjob/<name>`` does."""
        request = ActionRequest(ActionKind.TRIGGER_CRONJOB, f"{namespace}/{cronjob}", params=(("kind", "CronJob"),))

        def do() -> str:
            job = self._control().trigger(namespace, cronjob)
            return f"created Job {namespace}/{job} from CronJob {cronjob}"

        return run_action(request, do, self.log, self.clock)

    def move_queue(self, namespace: str, name: str, queue: str) -> ActionResult:
        """Move a pending Job to LocalQueue ``queue`` of its namespace (Kueue, before admission)."""
        request = ActionRequest(ActionKind.MOVE_QUEUE, f"{namespace}/{name}", params=(("kind", "Job"), ("queue", queue)))

        def do() -> str:
            self._queue_control().move_to_queue(namespace, name, queue)
            return f"moved Job {namespace}/{name} to LocalQueue {queue}"

        return run_action(request, do, self.log, self.clock)

    def set_workload_active(self, namespace: str, name: str, active: bool) -> ActionResult:
        """Deactivate a pending Job's Workload (Kueue keeps it out of its queue), or reactivate it."""
        action = ActionKind.REACTIVATE_WORKLOAD if active else ActionKind.DEACTIVATE_WORKLOAD
        request = ActionRequest(action, f"{namespace}/{name}", params=(("kind", "Job"),))

        def do() -> str:
            self._queue_control().set_workload_active(namespace, name, active)
            return f"{'reactivated' if active else 'deactivated'} the Workload of Job {namespace}/{name}"

        return run_action(request, do, self.log, self.clock)

    # ------------------------------------------------------------------ reading
    def logs(self, namespace: str, pod: str, *, tail_lines: int = LOG_TAIL, follow: bool = False,
             stop: threading.Event | None = None) -> Iterator[str]:
        """A pod's log lines as they come; a failure ends the iteration with :class:`ActionError`."""
        control = self._call(self._control)
        yield from log_lines(control.logs(namespace, pod, tail_lines=tail_lines, follow=follow, stop=stop))

    def describe(self, kind: str, namespace: str, name: str) -> str:
        """The object as YAML, then its recent events."""
        kind = _kind(kind)
        return self._call(lambda: self._control().describe(kind, namespace, name))

    # ------------------------------------------------------------------ helpers
    def _control(self) -> JobControl:
        control = self.control
        if control is None:
            raise BackendError(NOT_A_CLUSTER)
        return control

    def _queue_control(self) -> QueueControl:
        control = self._control()
        if not isinstance(control, QueueControl):
            raise BackendError("this job source has no queues to change (Kueue on a Kubernetes cluster)")
        return control

    def _call(self, fn: Callable[[], T]) -> T:
        try:
            return fn()
        except BackendError as exc:
            raise ActionError(one_line(exc)) from exc


def _kind(kind: str) -> str:
    if kind not in KINDS:
        raise ActionError(f"cannot act on a {kind}: only Jobs and CronJobs (and distributed training jobs)")
    return kind
