"""The Jobs pane: the GPU job queue grouped by state, and the CronJobs that feed it.

Keys: ``c`` moves between the jobs table and the CronJobs table.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding

from gpuconsole.model import CronJob, FleetSnapshot, Job, JobState, SourceKind
from gpuconsole.ui.format import age, money, short_node
from gpuconsole.ui.palette import Palette
from gpuconsole.ui.panes.base import Pane
from gpuconsole.ui.widgets.live_table import LiveTable, Row, right, text

STATE_ORDER = {JobState.PENDING: 0, JobState.RUNNING: 1, JobState.SUSPENDED: 2, JobState.FAILED: 3, JobState.SUCCEEDED: 4}

JOB_COLUMNS = [
    ("STATE", "state", 9),
    ("NAME", "name", 24),
    ("GPUS", "gpus", 9),
    ("NODE", "node", 14),
    ("AGE", "age", 5),
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


def state_style(state: JobState, palette: Palette):  # noqa: ANN201 - rich Style
    return {
        JobState.PENDING: palette.warn,
        JobState.RUNNING: palette.ok,
        JobState.FAILED: palette.bad,
        JobState.SUSPENDED: palette.dim,
        JobState.SUCCEEDED: palette.dim,
    }[state]


def job_cells(job: Job, now: float, palette: Palette) -> tuple[object, ...]:
    return (
        text(job.state.value, state_style(job.state, palette)),
        text(job.name),
        right(job.gpu_request),
        text(short_node(job.node) if job.node else "-"),
        right(age(now - job.created)),
        text(job.namespace),
        text(job.pending_reason or "", palette.warn if job.pending_reason else None),
    )


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


class JobsPane(Pane):
    """Jobs and CronJobs, live."""

    kind = SourceKind.JOBS
    BINDINGS = [Binding("c", "toggle_table", "Jobs/CronJobs")]

    def compose_body(self) -> ComposeResult:
        yield LiveTable(JOB_COLUMNS, id="job-table")
        yield LiveTable(CRON_COLUMNS, id="cron-table")

    def action_toggle_table(self) -> None:
        jobs = self.query_one("#job-table", LiveTable)
        (self.query_one("#cron-table", LiveTable) if jobs.has_focus else jobs).focus()

    def summary(self, snapshot: FleetSnapshot) -> str:
        if not snapshot.jobs and not snapshot.cronjobs:
            return ""
        counts = {state: 0 for state in JobState}
        for job in snapshot.jobs:
            counts[job.state] += 1
        return f"{counts[JobState.RUNNING]} running · {counts[JobState.PENDING]} pending · {len(snapshot.cronjobs)} cronjobs"

    def render_snapshot(self, snapshot: FleetSnapshot, palette: Palette) -> None:
        now = snapshot.taken_at
        jobs = sorted(snapshot.jobs, key=lambda j: (STATE_ORDER[j.state], -j.created, j.name))
        rows: list[Row] = [
            (job.uid, job_cells(job, now, palette))
            for job in jobs
            if self.matches(job.name, job.namespace, job.state.value, job.node, job.pending_reason, job.cronjob, job.mig_profile)
        ]
        self.query_one("#job-table", LiveTable).sync(rows)
        crons = sorted(snapshot.cronjobs, key=lambda c: (c.namespace, c.name))
        monthly = {line.key: line.amount for line in snapshot.cronjob_costs}
        cron_rows: list[Row] = [
            (cron.uid, (*cron_cells(cron, now, palette), right(money(monthly[cron.uid]) if cron.uid in monthly else "-")))
            for cron in crons
            if self.matches(cron.name, cron.namespace, cron.schedule)
        ]
        self.query_one("#cron-table", LiveTable).sync(cron_rows)


    def detail(self, table_id: str, key: str, snapshot: FleetSnapshot, palette: Palette) -> Text | None:
        now = snapshot.taken_at
        if table_id == "cron-table":
            cron = next((c for c in snapshot.cronjobs if c.uid == key), None)
            if cron is None:
                return None
            line = Text(f"{cron.namespace}/{cron.name}  ", style=palette.strong)
            line.append(f"schedule {cron.schedule}")
            if cron.next_schedule and not cron.suspended:
                line.append(f", next run in {age(cron.next_schedule - now)}")
            line.append(f", {cron.active} active" + (", suspended" if cron.suspended else ""))
            cost = next((c for c in snapshot.cronjob_costs if c.key == cron.uid), None)
            if cost is not None:
                line.append(f" · schedule costs {money(cost.amount)} over 30 days")
            elif not cron.suspended:
                line.append(" · no run seen yet to price the schedule", palette.dim)
            return line
        job = next((j for j in snapshot.jobs if j.uid == key), None)
        if job is None:
            return None
        line = Text(f"{job.namespace}/{job.name}  ", style=palette.strong)
        if job.state is JobState.PENDING:
            line.append(f"waiting {age(now - job.created)}: ")
            line.append(job.pending_reason or "not scheduled yet", palette.warn)
        elif job.state is JobState.RUNNING and job.node:
            line.append(f"running {age(now - (job.started or job.created))} on {job.node}")
        else:
            line.append(job.state.value)
            if job.finished:
                line.append(f" {age(now - job.finished)} ago")
        if job.owner:
            line.append(f" · owner {job.owner}")
        return line
