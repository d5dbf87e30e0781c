"""The Jobs pane: the GPU job queue grouped by state, the CronJobs that feed it, the nodes' GPUs.

Every change (submit, delete, suspend, resume, trigger) goes through the action runner
(:mod:`gpuconsole.ui.actions`): a delete or a suspend asks y/n first, and the core checks that
answer again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType

from gpuconsole.core.ops.actions import ActionKind, ActionResult
from gpuconsole.model import FINISHED_STATES, CronJob, FleetSnapshot, Job, JobState, SourceKind
from gpuconsole.ui.actions import Action, Confirm, run_action
from gpuconsole.ui.format import age, money, short_node
from gpuconsole.ui.palette import Palette
from gpuconsole.ui.panes.base import Pane
from gpuconsole.ui.panes.job_roles import RoleRows, open_log, role_cells, role_detail
from gpuconsole.ui.panes.job_rows import (
    CRON_COLUMNS,
    CronTable,
    JOB_COLUMNS,
    JOB_GIVES,
    JOB_ORDER,
    JobTally,
    NODE_COLUMNS,
    TABLES,
    cron_cells,
    job_cells,
    mig_text,
    node_cells,
    queue_order,
    roles_text,
    short_product,
    waiting_text,
)
from gpuconsole.ui.widgets.cells import right
from gpuconsole.ui.widgets.row_index import RowIndex
from gpuconsole.ui.widgets.virtual_table import VirtualTable

class JobsPane(Pane):
    """Jobs, CronJobs and the nodes' GPUs, live; the place to run GPU training.

    | key | does |
    |---|---|
    | c | move between the jobs and the CronJobs |
    | n | switch between the job queue and the Nodes view (GPU capacity per node) |
    | N | submit a new job (the submit wizard) |
    | enter | describe the selected job or CronJob (YAML and events) |
    | l | the selected job's log (an MPIJob's: its launcher's; a role row: that role's pod's; follows while it runs) |
    | s | suspend the selected job or CronJob (asks y/n), or resume it |
    | T | run the selected CronJob now |
    | ctrl+d | delete the selected job or CronJob (asks y/n) |
    | space | tag the row: ctrl+d and s then act on every tagged row, in one confirmation |
    | Q | the cluster's queues (Kueue, Volcano) and the selected queue's workloads |

    A key the cluster's RBAC refuses in the selected row's namespace is dimmed, with the reason
    under the table (asked with a SelfSubjectAccessReview, kept a minute).
    """

    kind = SourceKind.JOBS
    main_view, sub_view = "jobs", "nodes"  # the queue and the CronJobs, or GPU capacity per node
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("c", "toggle_table", "CronJobs"),
        Binding("n", "toggle_nodes", "Nodes"),
        Binding("N", "submit", "New job"),
        Binding("l", "logs", "Logs"),
        Binding("s", "suspend", "Suspend/resume", show=False),
        Binding("T", "trigger", "Run now", show=False),
        Binding("ctrl+d", "delete", "Delete"),
        Binding("Q", "queues", "Queues", show=False),
    ]

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)
        self._merging = False  # a reading is being merged into the queue in a worker (see _follow)
        self._wanted: tuple[Job, ...] | None = None  # the newest reading of the queue
        self._asking: set[str] = set()  # namespaces whose RBAC answers a worker is asking for
        # The queue can hold 100,000 jobs: the tables draw only the rows on screen, from these.
        self.jobs = RowIndex(lambda j: j.uid, queue_order, lambda j: (j.name, j.namespace, j.state.value, j.node, j.pending_reason, j.cronjob, j.mig_profile))
        self.roles = RoleRows()  # a distributed job's roles: rows under it, as MIG slices under a GPU
        self.crons = RowIndex(lambda c: c.uid, lambda c: (c.namespace, c.name), lambda c: (c.name, c.namespace, c.schedule))
        self.nodes = RowIndex(lambda n: n.name, lambda n: n.name,
                              lambda n: (n.name, n.gpu_product, n.instance_id, *(p for p, _c in n.mig_capacity)))

    def prepare(self, snapshot: FleetSnapshot) -> None:
        """Order the job queue in a worker before the pane is first shown: over 100,000 jobs
        sorting them and making their filter words takes a third of a second."""
        if snapshot.jobs and self.jobs.empty:
            self._follow(snapshot.jobs, warm=True)

    def _follow(self, jobs: tuple[Job, ...], *, warm: bool = False) -> bool:
        """Whether the queue follows ``jobs`` in a worker: its first ordering (``warm``, before
        the pane is shown) and any reading that comes while that runs; the table shows the last
        merged reading meanwhile, and keys typed then filter that one. False: update the index
        here. (Merging every reading of 100,000 jobs in a worker was measured slower for the
        keys typed meanwhile than merging it here: the two threads contend for the GIL.)"""
        index = self.jobs
        if jobs is index.items:
            return True
        if not self._merging and not warm:
            return False
        self._wanted = jobs
        if not self._merging:
            self._merging = True
            self._merge()
        return True

    @work(thread=True, group="merge-jobs", exit_on_error=False, description="merging a reading into the job queue")
    def _merge(self) -> None:
        # What to merge is read here, not passed in: a finished worker lingers until the cyclic
        # collector frees it, and would hold two 100,000-job indexes until then.
        index, jobs, filter_text = self.jobs, self._wanted, self.filter_text
        fresh = index.successor(jobs, filter_text)
        self.app.call_from_thread(self._merged, index, fresh)

    def _merged(self, index: RowIndex, fresh: RowIndex) -> None:
        """A merged index is ready: it replaces the one it was made from (unless that was
        re-sorted meanwhile), and a reading that came in the meantime is merged next."""
        self._merging = False
        if self.jobs is index:
            self.jobs = fresh
        wanted = self._wanted
        if wanted is not None and wanted is not self.jobs.items and not self._follow(wanted):
            self.jobs.update(wanted)  # the reading that came meanwhile, merged here
            self.redraw()
        elif self.jobs is fresh:
            self.redraw()

    def compose_body(self) -> ComposeResult:
        yield VirtualTable(JOB_COLUMNS, id="job-table", gives=JOB_GIVES, taggable=True, orders_rows=False)
        yield CronTable(CRON_COLUMNS, id="cron-table", taggable=True)
        yield VirtualTable(NODE_COLUMNS, id="node-table", identity="node")

    def on_virtual_table_sort_changed(self, event: VirtualTable.SortChanged) -> None:
        """The job queue is sorted by its objects (the index keeps the order between readings)."""
        table = event.table
        if table.id == "job-table":
            column = table.sort_column
            self.jobs = self.jobs.successor()  # a merge in flight from the old order is not taken
            self.jobs.set_order(JOB_ORDER[column] if column else queue_order, table.sort_descending)
            self.redraw()

    def on_virtual_table_tags_changed(self, event: VirtualTable.TagsChanged) -> None:
        """A role row is never tagged (space on it moves on): tags are for jobs."""
        event.table.tagged.difference_update(self.roles.rows)
        super().on_virtual_table_tags_changed(event)

    # ------------------------------------------------------------------ views
    def action_toggle_table(self) -> None:
        if self.mode == "nodes":
            self.show_view("jobs")
        jobs = self.query_one("#job-table", VirtualTable)
        (self.query_one("#cron-table", VirtualTable) if jobs.has_focus else jobs).focus()

    def action_queues(self) -> None:
        from gpuconsole.ui.screens.queues import QueuesScreen

        self.app.push_screen(QueuesScreen())

    def action_toggle_nodes(self) -> None:
        self.show_view("jobs" if self.mode == "nodes" else "nodes")

    def open_view(self, view: str) -> None:
        """``cron`` (the CronJobs table), ``nodes`` (the Nodes view), ``queues`` (the Queues
        screen over the job queue), else the job queue."""
        self.show_view("nodes" if view == "nodes" else "jobs")
        if view == "queues":
            self.action_queues()
        elif view == "cron":
            self.query_one("#cron-table", VirtualTable).focus()

    def focus_body(self) -> None:
        if found := self.query("#node-table" if self.mode == "nodes" else "#job-table"):  # not yet composed: none
            found.first().focus()

    def current_table(self) -> VirtualTable:
        focused = self.app.focused
        if isinstance(focused, VirtualTable) and focused.id in TABLES and focused in self.query(VirtualTable):
            return focused
        return self.query_one("#node-table" if self.mode == "nodes" else "#job-table", VirtualTable)

    # ------------------------------------------------------------------ rendering
    def summary(self, snapshot: FleetSnapshot) -> str:
        if self.mode == "nodes":
            if not snapshot.nodes:
                return ""
            total = sum(n.gpu_allocatable for n in snapshot.nodes)
            used = sum(n.gpu_allocated for n in snapshot.nodes)
            mig_total = sum(c for n in snapshot.nodes for _p, c in n.mig_capacity)
            mig_used = sum(c for n in snapshot.nodes for _p, c in n.mig_allocated)
            mig = f" · MIG {mig_used}/{mig_total}" if mig_total else ""
            return f"{len(snapshot.nodes)} nodes · {used}/{total} GPUs allocated · {total - used} free{mig}"
        if not snapshot.jobs and not snapshot.cronjobs:
            return ""
        counts = JobTally.of(snapshot.jobs).counts  # counted once per reading, not per keystroke
        return f"{counts[JobState.RUNNING]} running · {counts[JobState.PENDING]} pending · {len(snapshot.cronjobs)} cronjobs"

    def render_snapshot(self, snapshot: FleetSnapshot, palette: Palette) -> None:
        now = snapshot.taken_at
        if not self._follow(snapshot.jobs):
            self.jobs.update(snapshot.jobs)
        jobs, crons, nodes = self.jobs, self.crons, self.nodes
        crons.update(snapshot.cronjobs)
        nodes.update(snapshot.nodes)
        queue = self.query_one("#job-table", VirtualTable)
        queue.fit_identity(jobs.widest(_name_width))
        roles = self.roles
        roles.update(jobs.items)

        def job_row(key: str) -> tuple[object, ...]:
            role = roles.rows.get(key)
            return role_cells(*role, palette) if role is not None else job_cells(jobs.by_key[key], now, palette)

        queue.show_rows(roles.under_their_jobs(jobs, self.filter_text), job_row)
        monthly = {line.key: line.amount for line in snapshot.cronjob_costs}

        def cron_row(uid: str) -> tuple[object, ...]:
            return (*cron_cells(crons.by_key[uid], now, palette), right(money(monthly[uid]) if uid in monthly else "-"))

        self.query_one("#cron-table", VirtualTable).show_rows(crons.keys(self.filter_text), cron_row)
        self.query_one("#node-table", VirtualTable).show_rows(
            nodes.keys(self.filter_text), lambda name: node_cells(nodes.by_key[name], palette))

    def detail(self, table_id: str, key: str, snapshot: FleetSnapshot, palette: Palette) -> Text | None:
        now = snapshot.taken_at
        if table_id == "node-table":
            node = self.nodes.by_key.get(key)
            if node is None:
                return None
            line = Text(f"{short_node(node.name)}  ", style=palette.strong)
            line.append(f"{short_product(node.gpu_product)} · {node.gpu_allocated}/{node.gpu_allocatable} GPUs allocated")
            if node.gpu_capacity != node.gpu_allocatable:
                line.append(f" ({node.gpu_capacity} on the node)")
            if node.mig_capacity:
                line.append(f" · MIG {mig_text(node)}")
            if not node.ready:
                line.append(" · not ready", palette.bad)
            return line
        if table_id == "cron-table":
            cron = self.crons.by_key.get(key)
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
        if (role := self.roles.rows.get(key)) is not None:
            return role_detail(*role, palette)
        job = self.jobs.by_key.get(key)
        if job is None:
            return None
        line = Text(f"{job.namespace}/{job.name}  ", style=palette.strong)
        if job.roles:  # a distributed job's roles first: the reason after them may be cut
            line.append(f"{job.kind} {roles_text(job)} · ")
        if job.state in (JobState.PENDING, JobState.QUEUED):
            line.append(f"{'queued' if job.state is JobState.QUEUED else 'waiting'} {age(now - job.created)}: ")
            line.append(waiting_text(job) or "not scheduled yet", palette.warn)
        elif job.state is JobState.RUNNING and job.node:
            line.append(f"running {age(now - (job.started or job.created))} on {job.node}")
        else:
            line.append(job.state.value)
            if job.finished:
                line.append(f" {age(now - job.finished)} ago")
        if job.owner:
            line.append(f" · owner {job.owner}")
        return line

    # ------------------------------------------------------------------ selection
    def selected(self) -> tuple[str, Job | CronJob] | None:
        """``("Job", job)`` or ``("CronJob", cron)`` under the cursor of the current table."""
        snap = self.snapshot
        table = self.current_table()
        key = table.selected_key
        if snap is None or key is None:
            return None
        if table.id == "cron-table":
            cron = self.crons.by_key.get(key)
            return ("CronJob", cron) if cron is not None else None
        if table.id == "job-table":
            job = self.jobs.by_key.get(key) or self.roles.job_of(key)  # a role row: its job
            return (job.kind, job) if job is not None else None  # an MPIJob is acted on as one
        return None

    def guarded_kind(self, action: str, parameters: tuple[object, ...]) -> tuple[ActionKind, str | None] | None:
        kind = {"delete": ActionKind.DELETE_JOB, "suspend": ActionKind.SUSPEND_JOB, "trigger": ActionKind.TRIGGER_CRONJOB,
                "submit": ActionKind.SUBMIT_JOB}.get(action)
        if kind is None:
            return None
        chosen = self.selected() if kind is not ActionKind.SUBMIT_JOB else None
        return kind, chosen[1].namespace if chosen is not None else None

    def update_access(self) -> None:
        """Also ask the cluster what it allows in the selected row's namespace, once a minute at
        most (in a worker); its answer dims the keys it would refuse."""
        chosen = self.selected()
        core = getattr(self.app, "core", None)
        rbac = core.services.rbac if core is not None else None
        if chosen is not None and rbac is not None:
            namespace = chosen[1].namespace
            if namespace not in self._asking and rbac.needs_asking(namespace):
                self._asking.add(namespace)
                self._ask_cluster(namespace)
        super().update_access()

    @work(thread=True, group="rbac", exit_on_error=False, description="asking the cluster what it allows")
    def _ask_cluster(self, namespace: str) -> None:
        try:
            self.core.services.rbac.refresh(namespace)
        finally:
            self.app.call_from_thread(self._asked, namespace)

    def _asked(self, namespace: str) -> None:
        self._asking.discard(namespace)
        self.update_access()

    def _target(self, verb: str) -> tuple[str, Job | CronJob] | None:
        """The selection an action applies to, or None after saying why there is none."""
        if not self.core.services.jobs.available:
            self.app.notify("This job source cannot change jobs: run with --demo, or point KUBECONFIG at a cluster.",
                            severity="warning", timeout=5)
            return None
        chosen = self.selected()
        if chosen is None:
            where = "a job or CronJob" if self.mode == "jobs" else "a job (n: back to the queue)"
            self.app.notify(f"Select {where} to {verb}.", severity="warning")
        return chosen

    # ------------------------------------------------------------------ actions
    def on_virtual_table_row_selected(self, event: VirtualTable.RowSelected) -> None:
        """``enter``: describe the job or CronJob (YAML and events)."""
        if event.data_table.id not in ("job-table", "cron-table"):
            return
        event.stop()
        chosen = self._target("describe")
        if chosen is None:
            return
        from gpuconsole.ui.screens.describe import DescribeScreen

        kind, item = chosen
        self.app.push_screen(DescribeScreen(self.core.services.jobs, kind, item.namespace, item.name))

    def action_submit(self) -> None:
        """``N``: the submit wizard, in the namespace of the selected row."""
        from gpuconsole.ui.wizards.submit import open_submit_wizard

        chosen = self.selected()
        open_submit_wizard(self.app, namespace=chosen[1].namespace if chosen else None)  # type: ignore[arg-type]

    def action_logs(self) -> None:
        chosen = self._target("read the log of")
        if chosen is not None:
            open_log(self, *chosen, self.roles.role_of(self.current_table().selected_key))

    def action_delete(self) -> None:
        if self._on_tagged("delete"):
            return
        chosen = self._target("delete")
        if chosen is None:
            return
        kind, item = chosen
        jobs = self.core.services.jobs
        what = f"{kind} {item.namespace}/{item.name}"
        goes = ("its pods stop and it leaves the queue" if kind != "CronJob"
                else "its schedule and the jobs it started go too")
        self._confirm(f"Delete {kind}", f"Delete {what}? (y/n)", f"{self._facts(kind, item)}\nDeleting it: {goes}.",
                      what, lambda answer: jobs.delete(kind, item.namespace, item.name, answer), ActionKind.DELETE_JOB)

    def action_suspend(self) -> None:
        if self._on_tagged("suspend"):
            return
        chosen = self._target("suspend or resume")
        if chosen is None:
            return
        kind, item = chosen
        jobs = self.core.services.jobs
        what = f"{kind} {item.namespace}/{item.name}"
        suspended = item.suspended if isinstance(item, CronJob) else item.state is JobState.SUSPENDED
        if suspended:
            self._perform(f"resume {what}", lambda: jobs.resume(kind, item.namespace, item.name))
            return
        if isinstance(item, Job) and item.state in FINISHED_STATES:
            self.app.notify(f"{what} has {item.state.value}: there is nothing to suspend.", severity="warning")
            return
        effect = ("its pods are stopped (progress since the last checkpoint is lost) until it is resumed"
                  if kind != "CronJob" else "no new run starts until it is resumed; a running one goes on")
        self._confirm(f"Suspend {kind}", f"Suspend {what}? (y/n)", f"{self._facts(kind, item)}\nSuspended: {effect}.",
                      what, lambda answer: jobs.suspend(kind, item.namespace, item.name, answer),
                      ActionKind.SUSPEND_CRONJOB if kind == "CronJob" else ActionKind.SUSPEND_JOB)

    def action_trigger(self) -> None:
        chosen = self._target("run now")
        if chosen is None:
            return
        kind, item = chosen
        name = item.name if kind == "CronJob" else getattr(item, "cronjob", None)
        if not name:
            self.app.notify("Select a CronJob to run it now (c: the CronJobs).", severity="warning")
            return
        jobs = self.core.services.jobs
        self._perform(f"run CronJob {item.namespace}/{name}", lambda: jobs.trigger(item.namespace, name))

    def _on_tagged(self, verb: str) -> bool:
        """``delete`` / ``suspend`` on every tagged row (:mod:`~gpuconsole.ui.panes.job_batch`)."""
        from gpuconsole.ui.panes.job_batch import on_tagged

        return on_tagged(self, verb)

    @staticmethod
    def _facts(kind: str, item: Job | CronJob) -> str:
        if isinstance(item, CronJob):
            gpus = f"{max(item.gpus, 1)}×{item.mig_profile}" if item.mig_profile else f"{item.gpus} GPU(s)"
            return f"{item.namespace}/{item.name}\nschedule {item.schedule} · {gpus} a run · {item.active} active"
        node = f" on {short_node(item.node)}" if item.node else ""
        return (f"{item.namespace}/{item.name}\n{item.state.value}{node} · {item.gpu_request} GPU(s)"
                f" · owner {item.owner or '-'}")

    def _confirm(self, title: str, prompt: str, details: str, what: str,
                 call: Callable[[str], ActionResult], kind: ActionKind | None = None) -> None:
        verb = title.split()[0].lower()
        run_action(self, Action(f"{verb} {what}", lambda answer: call(answer or ""), kind,
                                confirm=Confirm(title, prompt, details, cancelled=f"{verb} cancelled"),
                                group="job-action"))

    def _perform(self, what: str, call: Callable[[], ActionResult]) -> None:
        run_action(self, Action(what, lambda _: call(), group="job-action"))


def _name_width(job: Job) -> int:
    return len(job.name)
