"""A distributed job's roles as child rows of the Jobs pane's queue, as a GPU's MIG slices are
rows under it in the GPUs pane: ``└ Launcher`` and ``└ Worker`` under an MPIJob, each with its
replicas (desired, active, succeeded, failed), GPUs per replica and why it waits; the line under
the table for such a row; and the log a row leads to (an MPIJob's launcher's, a role's pod's).
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Sequence
from typing import Any

from rich.text import Text

from gpuconsole.model.per_reading import PerReading
from gpuconsole.model import CronJob, Job, JobRole, JobState
from gpuconsole.ui.palette import Palette
from gpuconsole.ui.widgets.cells import right, text
from gpuconsole.ui.widgets.row_index import RowIndex

ROLES = operator.attrgetter("roles")
ROLE_SEP = "/"  # a role row's key: "<job uid>/<role name>" (a job's uid has no "/")
BLANK = Text("")


def _with_roles(jobs: tuple[Job, ...]) -> tuple[Job, ...]:
    return tuple(itertools.compress(jobs, map(ROLES, jobs)))  # the few with roles, found in C


# A reading's distributed jobs: found once per reading, by the thread that delivers it.
with_roles: PerReading[tuple[Job, ...]] = PerReading(_with_roles, keep=3)


class RoleRows:
    """The role rows of one reading: found once per reading, put under their jobs on every frame."""

    def __init__(self) -> None:
        self._reading: object = None
        self.children: dict[str, tuple[str, ...]] = {}  # a job's uid → its role rows' keys
        self.rows: dict[str, tuple[Job, JobRole]] = {}  # a role row's key → its job and role
        self._made: tuple[RowIndex, object, str, Sequence[str]] | None = None  # the last keys made, and from what

    def update(self, jobs: tuple[Job, ...] | None) -> None:
        """Find the roles of ``jobs`` (nothing to do for the reading they were found in)."""
        if jobs is self._reading:
            return
        self._reading = jobs
        children: dict[str, tuple[str, ...]] = {}
        rows: dict[str, tuple[Job, JobRole]] = {}
        for job in with_roles(jobs or ()):
            keys = tuple(f"{job.uid}{ROLE_SEP}{role.name}" for role in job.roles)
            rows.update(zip(keys, ((job, role) for role in job.roles), strict=True))
            children[job.uid] = keys
        if children != self.children:  # the same role rows: the keys made stand
            self._made = None
        self.children, self.rows = children, rows

    def under_their_jobs(self, index: RowIndex, filter_text: str) -> Sequence[str]:
        """The keys ``index`` shows for ``filter_text``, each distributed job's role rows right
        after it. Made again only for a new reading, order or filter: over 100,000 jobs finding
        the few with roles is a pass in C (``compress``), not a Python loop per frame."""
        made = self._made
        if made is not None and made[0] is index and made[1] is index.rows_token and made[2] == filter_text:
            return made[3]
        keys = index.keys(filter_text)
        children = self.children
        if children:
            spliced: list[str] = []
            start = 0
            for at in itertools.compress(range(len(keys)), map(children.__contains__, keys)):
                spliced += keys[start:at + 1]
                spliced += children[keys[at]]
                start = at + 1
            keys = spliced + keys[start:]
        self._made = (index, index.rows_token, filter_text, keys)
        return keys

    def job_of(self, key: str | None) -> Job | None:
        row = self.rows.get(key or "")
        return row[0] if row is not None else None

    def role_of(self, key: str | None) -> JobRole | None:
        row = self.rows.get(key or "")
        return row[1] if row is not None else None


def role_state(job: Job, role: JobRole, palette: Palette) -> Text:
    """What the role's replicas do, in one word."""
    if role.failed:
        return text("failed", palette.bad)
    if role.replicas and role.succeeded >= role.replicas:
        return text("succeeded", palette.dim)
    if role.pending_reason or (job.waiting and role.active < role.replicas):
        return text("waiting", palette.warn)
    if role.active:
        return text("running", palette.ok)
    return text("-", palette.dim)


def replicas_text(role: JobRole) -> str:
    """``2/2 active · 1 failed``: the counts that are not zero after the active ones."""
    words = [f"{role.active}/{role.replicas} active"]
    words += [f"{n} {what}" for n, what in ((role.succeeded, "succeeded"), (role.failed, "failed")) if n]
    return " · ".join(words)


def per_replica(role: JobRole) -> str:
    """``2×8``: replicas × GPUs (or MIG devices) each; ``-`` for a role without GPUs."""
    return f"{role.replicas}×{role.gpus_per_replica}" if role.gpus_per_replica else "-"


def role_cells(job: Job, role: JobRole, palette: Palette) -> tuple[object, ...]:
    """A role's row, in the job queue's columns (state, kind, name, GPUs, node, age, duration,
    namespace, reason): its replicas' counts where a job has its node (a role runs on several)."""
    return (
        role_state(job, role, palette),
        BLANK,
        text(f"└ {role.name}", palette.accent),
        right(per_replica(role)),
        text(replicas_text(role), None if role.active else palette.dim),
        BLANK, BLANK, BLANK,
        text(role.pending_reason or "", palette.warn),
    )


def role_detail(job: Job, role: JobRole, palette: Palette) -> Text:
    """The line under the table for a role row: every count, its GPUs, its pod, why it waits."""
    line = Text(f"{job.namespace}/{job.name} · {role.name}  ", style=palette.strong)
    line.append(f"{role.replicas} desired · {role.active} active · {role.succeeded} succeeded · {role.failed} failed")
    device = f"×{role.mig_profile}" if role.mig_profile else " GPUs"
    if role.gpus_per_replica:
        line.append(f" · {role.gpus_per_replica}{device} each, {role.gpus} in all")
    else:
        line.append(" · no GPU")
    if role.pod:
        line.append(f" · pod {role.pod} (l: its log)")
    if role.pending_reason:
        line.append(" · waiting: ")
        line.append(role.pending_reason, palette.warn)
    return line


def open_log(pane: Any, kind: str, item: Job | CronJob, role: JobRole | None = None) -> None:
    """``l`` on a row of the Jobs pane: the job's log (an MPIJob's: its launcher's; a
    PyTorchJob's: its master's), or on a role row that role's pod's; else one line saying why none."""
    app = pane.app
    if kind == "CronJob" or not isinstance(item, Job):
        app.notify("A CronJob has no log of its own: select one of its jobs (c: the job queue).", severity="warning")
        return
    where = f"{item.namespace}/{item.name}"
    if item.state is JobState.SUSPENDED:
        app.notify(f"{where} is suspended: it has no pod, so no log.", severity="warning")
        return
    pod = role.pod if role is not None else item.pod
    if role is not None and not pod:
        why = f" ({role.pending_reason})" if role.pending_reason else ""
        app.notify(f"{where}: its {role.name} has no pod yet{why}.", severity="warning")
        return
    if item.state is JobState.PENDING and (role is None or not role.active):
        app.notify(f"{where} is pending: its log starts when its pod does.", severity="warning")
        return
    if not pod:
        app.notify(f"{where}: the cluster did not say which pod it runs in.", severity="warning")
        return
    from gpuconsole.ui.screens.logs import LogScreen

    running = item.state is JobState.RUNNING and (role is None or role.active > 0)
    title = f"{where} · {role.name} · pod {pod}" if role is not None else f"{where} · pod {pod}"
    app.push_screen(LogScreen(pane.core.services.jobs, item.namespace, pod, follow=running, title=title))
