"""The Jobs pane's rows: the columns and cells of its jobs, CronJobs and nodes tables."""

from __future__ import annotations

import operator
import time
from typing import ClassVar

from textual.binding import Binding, BindingType

from gpuconsole.model.per_reading import PerReading
from gpuconsole.model import CronJob, Job, JobState, Node, WaitingFor, unfinished
from gpuconsole.ui.format import age, bar, short_node
from gpuconsole.ui.palette import Palette
from gpuconsole.ui.widgets.cells import right, text
from gpuconsole.ui.widgets.virtual_table import VirtualTable

_STATE = operator.attrgetter("state")


class JobTally:
    """A reading's jobs counted by state, and the GPUs its pending jobs wait for: counted once
    per reading (100,000 jobs take milliseconds) for the Overview's card and the Jobs pane's line."""

    def __init__(self, jobs: tuple[Job, ...]) -> None:
        # The live jobs (a few thousand of 100,000) are counted one by one; the finished ones in
        # C, one pass, making no object a job (this runs beside the UI thread: 100,000 passing
        # objects would leave the allocator's pools spread over more memory).
        live = unfinished(jobs)
        self.counts = dict.fromkeys(JobState, 0)
        for job in live:
            self.counts[job.state] += 1
        succeeded = operator.countOf(map(_STATE, jobs), JobState.SUCCEEDED)
        self.counts[JobState.SUCCEEDED] = succeeded
        self.counts[JobState.FAILED] = len(jobs) - len(live) - succeeded
        self.waiting_gpus = sum(max(job.gpus, 1) for job in live if job.state is JobState.PENDING)

    @classmethod
    def of(cls, jobs: tuple[Job, ...]) -> JobTally:
        """The tally of ``jobs``, counted again only when a new reading brings a new tuple
        (:data:`TALLIES`; the thread that delivers a reading counts it first)."""
        return TALLIES(jobs)


TALLIES: PerReading[JobTally] = PerReading(JobTally, keep=3)  # the one on screen may be 2 behind


STATE_ORDER = {JobState.PENDING: 0, JobState.QUEUED: 1, JobState.RUNNING: 2, JobState.SUSPENDED: 3, JobState.FAILED: 4,
               JobState.SUCCEEDED: 5}

JOB_COLUMNS = [
    ("STATE", "state", 9),
    ("KIND", "kind", 7),
    ("NAME", "name", 22),
    ("GPUS", "gpus", 9),
    ("NODE", "node", 14),
    ("AGE", "age", 5),
    ("DURATION", "duration", 8),
    ("NAMESPACE", "namespace", 11),
    ("REASON", "reason", None),
]
CRON_COLUMNS = [
    ("CRONJOB", "name", 26),
    ("NAMESPACE", "namespace", 11),
    ("SCHEDULE", "schedule", 13),
    ("GPUS", "gpus", 9),
    ("LAST", "last", 6),
    ("NEXT", "next", 11),
    ("ACTIVE", "active", 6),
    ("$/30D", "monthly", 8),
]
NODE_COLUMNS = [
    ("NODE", "node", 15),
    ("GPU", "product", 14),
    ("USED", "used", 5),
    ("LOAD", "load", 8),
    ("FREE", "free", 4),
    ("MIG", "mig", 5),
    ("STATUS", "status", 9),
    ("INSTANCE", "instance", None),
]
TABLES = ("job-table", "cron-table", "node-table")
JOB_GIVES = {"node": 8, "namespace": 6, "duration": 6}  # these narrow before a name is cut


def _known(value: object) -> tuple[int, object]:
    return (1, "") if value is None else (0, value)


def _ran(job: Job) -> float | None:
    if job.started is None:
        return None
    return (job.finished if job.finished is not None else time.time()) - job.started


def queue_order(job: Job) -> tuple[object, ...]:
    """The queue as it waits: pending first, then running, newest first in each state."""
    return STATE_ORDER[job.state], -job.created, job.name


# What each column of the job queue sorts by (a 100,000-job queue is sorted by its objects, not
# its cells); the name breaks ties.
JOB_ORDER = {
    "state": lambda j: (0, STATE_ORDER[j.state], j.name),
    "name": lambda j: (0, j.name),
    "kind": lambda j: (0, j.kind, j.name),
    "gpus": lambda j: (0, j.gpus, j.mig_profile or "", j.name),
    "node": lambda j: (*_known(j.node), j.name),
    "age": lambda j: (0, -j.created, j.name),
    "duration": lambda j: (*_known(_ran(j)), j.name),
    "namespace": lambda j: (0, j.namespace, j.name),
    "reason": lambda j: (*_known(waiting_text(j) or None), j.name),
}


def state_style(state: JobState, palette: Palette):  # noqa: ANN201 - rich Style
    return {
        JobState.PENDING: palette.warn,
        JobState.QUEUED: palette.warn,
        JobState.RUNNING: palette.ok,
        JobState.FAILED: palette.bad,
        JobState.SUSPENDED: palette.dim,
        JobState.SUCCEEDED: palette.dim,
    }[state]


def duration(job: Job, now: float) -> str:
    """How long it has run (until it finished); ``-`` before it started."""
    if job.started is None:
        return "-"
    return age((job.finished if job.finished is not None else now) - job.started)


KIND_TEXT = {"PyTorchJob": "PyTorch", "TrainJob": "Train", "VolcanoJob": "Volcano"}  # the rest fit


def state_text(job: Job) -> str:
    """``running``, or the operator's own word where it says more (``restarting``, ``created``)."""
    return job.phase if job.phase and job.state is not JobState.SUSPENDED else job.state.value


def roles_text(job: Job) -> str:
    """``Launcher 1/1 · Worker 2/2 × 8 GPUs``: each role's active / desired replicas and GPUs."""
    return " · ".join(f"{r.name} {r.active}/{r.replicas}" + (f" × {r.gpus_per_replica} GPUs" if r.gpus_per_replica else "")
                      for r in job.roles)


def job_cells(job: Job, now: float, palette: Palette) -> tuple[object, ...]:
    return (
        text(state_text(job), state_style(job.state, palette)),
        text(KIND_TEXT.get(job.kind, job.kind), None if job.roles else palette.dim),
        text(job.name),
        right(job.gpu_request),
        text(short_node(job.node) if job.node else "-"),
        right(age(now - job.created)),
        right(duration(job, now)),
        text(job.namespace),
        text(waiting_text(job), palette.warn if job.pending_reason or job.waiting_for else None),
    )


def waiting_text(job: Job) -> str:
    """Why a job waits, led by what it waits for when a queueing layer holds it
    (``quota · waiting in queue team-a, position 3: …``); the scheduler's words alone otherwise."""
    reason = job.pending_reason or ""
    if job.waiting_for is None or job.waiting_for is WaitingFor.CAPACITY:
        return reason
    return f"{job.waiting_for.value} · {reason}" if reason else job.waiting_for.value


def cron_cells(cron: CronJob, now: float, palette: Palette) -> tuple[object, ...]:
    if cron.suspended:
        upcoming = text("suspended", palette.dim)
    elif cron.next_schedule is not None:
        upcoming = right(f"in {age(cron.next_schedule - now)}")
    else:
        upcoming = right("-")
    gpus = f"{max(cron.gpus, 1)}×{cron.mig_profile}" if cron.mig_profile else (str(cron.gpus) if cron.gpus else "-")
    return (
        text(cron.name),
        text(cron.namespace),
        text(cron.schedule),
        right(gpus),
        right(age(now - cron.last_schedule) if cron.last_schedule else "-"),
        upcoming,
        right(cron.active),
    )


def short_product(product: str) -> str:
    """``NVIDIA-A100-SXM4-80GB`` → ``A100-SXM4-80GB``: the vendor adds nothing in a GPU column."""
    for prefix in ("NVIDIA-", "Tesla-"):
        if product.startswith(prefix):
            return product[len(prefix):]
    return product or "-"


def mig_text(node: Node) -> str:
    """``1g.10gb 1/2 · 3g.40gb 0/1``: MIG devices held / offered, per profile."""
    held = dict(node.mig_allocated)
    return " · ".join(f"{profile} {held.get(profile, 0)}/{count}" for profile, count in node.mig_capacity)


def node_cells(node: Node, palette: Palette) -> tuple[object, ...]:
    allocatable = node.gpu_allocatable
    used = node.gpu_allocated
    free = max(0, allocatable - used)
    share = 100.0 * used / allocatable if allocatable else 0.0
    load_style = palette.bad if allocatable and free == 0 else palette.warn if share >= 75 else palette.ok
    mig_total = sum(count for _profile, count in node.mig_capacity)
    mig_used = sum(count for _profile, count in node.mig_allocated)
    return (
        text(short_node(node.name)),
        text(short_product(node.gpu_product)),
        right(f"{used}/{allocatable}"),
        text(bar(share, 8), load_style),
        right(free, palette.ok if free else palette.dim),
        right(f"{mig_used}/{mig_total}" if mig_total else "-", None if mig_total else palette.dim),
        text("ready" if node.ready else "not ready", None if node.ready else palette.bad),
        text(node.instance_id or "-", palette.dim),
    )


class CronTable(VirtualTable):
    """The CronJobs table: while it has the focus the footer names its own keys (``c`` back to
    the jobs, ``T`` run now) and not the job queue's (a CronJob has no log of its own)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("c", "pane('action_toggle_table')", "Jobs"),
        Binding("T", "pane('action_trigger')", "Run now"),
        Binding("l", "pane('action_logs')", "Logs", show=False),  # says why there is none
    ]
    GUARDED: ClassVar[dict[str, str]] = {"action_trigger": "trigger"}

    def _pane(self) -> object | None:
        return next((node for node in self.ancestors if hasattr(node, "action_toggle_table")), None)

    def action_pane(self, method: str) -> None:
        pane = self._pane()
        if pane is not None:
            getattr(pane, method)()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        pane = self._pane()
        if action == "pane" and parameters and parameters[0] in self.GUARDED and pane is not None:
            return pane.check_action(self.GUARDED[str(parameters[0])], ())  # type: ignore[attr-defined]
        return super().check_action(action, parameters)
