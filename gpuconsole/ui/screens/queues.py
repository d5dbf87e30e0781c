"""``Q`` in the Jobs pane: the cluster's queues (Kueue ClusterQueues, Volcano Queues) and, for the
selected one, its workloads in order.

Per queue: GPUs nominal (Kueue's quota; Volcano's capability), used, borrowed from the cohort,
lent to it, waiting (the GPUs of its jobs not started yet), workloads admitted and pending, the
$/h of its running jobs' GPUs ("unknown" without prices) and, beside it, the team's budget and
how much of it is spent. Below, the selected queue: its rate against its budget, then its jobs,
running first, then those admitted that wait for nodes, then those it holds in Kueue's order,
each with why it waits. It follows the console's snapshot every second.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from gpuconsole.core.money.budget_words import describe_period
from gpuconsole.model import BudgetStatus, FleetSnapshot, Job, JobState, Queue
from gpuconsole.ui.format import inert, money
from gpuconsole.ui.widgets.footer import KeyFooter

NONE_YET = "No queues: the cluster serves neither Kueue (kueue.x-k8s.io) nor Volcano, or none is readable."


def _figure(value: int | None) -> str:
    return "unknown" if value is None else str(value)


ORDER = {JobState.RUNNING: 0, JobState.PENDING: 1, JobState.QUEUED: 2}


def jobs_of(queue: Queue, jobs: tuple[Job, ...]) -> list[Job]:
    """The queue's jobs as it holds them: running first, then those admitted that wait for nodes,
    then those it still holds, in their order."""
    mine = [j for j in jobs if queue.holds(j.queue, j.cluster_queue) and j.state in ORDER]
    return sorted(mine, key=lambda j: (ORDER[j.state], j.queue_position or 1 << 30, j.created, j.name))


COLUMNS = (("QUEUE", False), ("KIND", False), ("COHORT", False), ("NOMINAL", True), ("USED", True),
           ("BORROWED", True), ("LENT", True), ("WAITING", True), ("ADMITTED", True), ("PENDING", True),
           ("$/H", True), ("BUDGET", False))


def budget_of(queue: Queue, snapshot: FleetSnapshot) -> BudgetStatus | None:
    """The first of the team's budgets the snapshot holds (core matched them to the queue)."""
    by_name = {status.budget.name: status for status in snapshot.budgets}
    return next((by_name[name] for name in queue.budgets if name in by_name), None)


def budget_cell(queue: Queue, snapshot: FleetSnapshot) -> str:
    """``research-daily 37%``: the team's budget and the share of it spent (``-``: none matches)."""
    status = budget_of(queue, snapshot)
    if status is None:
        return "-"
    more = f" +{len(queue.budgets) - 1}" if len(queue.budgets) > 1 else ""
    return f"{inert(status.budget.name)} {status.percent:.0f}%{more}"


def rate_line(queue: Queue, snapshot: FleetSnapshot) -> str:
    """``$52.10/h admitted · budget research-daily: $740.00 of $2,000.00 daily (37%), $61.20/h``."""
    rate = "unknown" if queue.usd_per_hour is None else f"{money(queue.usd_per_hour)}/h"
    status = budget_of(queue, snapshot)
    if status is None:
        return f"{rate} admitted · no team budget (namespace:NS, or a tag naming the queue)"
    budget = status.budget
    return (f"{rate} admitted · budget {inert(budget.name)}: {money(status.spent)} of {money(budget.amount)} "
            f"{describe_period(budget)} ({status.percent:.0f}%), the team burns {money(status.burn_per_hour)}/h")


# At 80 columns the headers are short and the BUDGET column gives way (the selected queue's
# budget is on the line under the table), so no row wraps.
SHORT = {"NOMINAL": "NOM", "BORROWED": "BORR", "WAITING": "WAIT", "ADMITTED": "ADM", "PENDING": "PEND"}
SHORT_LEGEND = "GPUs: NOM nominal · BORR borrowed · WAIT waiting\nworkloads: ADM admitted · PEND pending"


def queue_table(snapshot: FleetSnapshot, selected: int, width: int | None = None) -> Text:
    """The queues as aligned columns (names and cohorts inert), the selected row reversed;
    narrower than ``width`` with short headers, without BUDGET, when the full table is wider."""
    rows = [[name for name, _right in COLUMNS]]
    for queue in snapshot.queues:
        waiting = sum(j.gpus for j in jobs_of(queue, snapshot.jobs) if j.waiting)
        rows.append([inert(queue.name), queue.kind.value, inert(queue.cohort or "-"), _figure(queue.gpu_quota),
                     _figure(queue.gpu_used), _figure(queue.gpu_borrowed), _figure(queue.gpu_lent), str(waiting),
                     _figure(queue.admitted_workloads), _figure(queue.pending_workloads),
                     "unknown" if queue.usd_per_hour is None else money(queue.usd_per_hour),
                     budget_cell(queue, snapshot)])
    columns = list(COLUMNS)
    if width is not None and _width(rows) > width:
        rows = [[SHORT.get(c, c) for c in rows[0][:-1]]] + [row[:-1] for row in rows[1:]]
        columns = columns[:-1]
    widths = [max(len(row[k]) for row in rows) for k in range(len(columns))]
    out = Text(no_wrap=True, overflow="ellipsis")
    for n, row in enumerate(rows):
        cells = [cell.rjust(w) if right else cell.ljust(w) for cell, w, (_name, right) in zip(row, widths, columns)]
        style = "bold" if n == 0 else "reverse" if n - 1 == selected else ""
        out.append("  ".join(cells).rstrip() + "\n", style=style)
    if len(columns) < len(COLUMNS):
        out.append(SHORT_LEGEND + "\n", style="dim")
    return out


def _width(rows: list[list[str]]) -> int:
    return sum(max(len(row[k]) for row in rows) for k in range(len(rows[0]))) + 2 * (len(rows[0]) - 1)


def workloads_text(queue: Queue, snapshot: FleetSnapshot) -> Text:
    listed = jobs_of(queue, snapshot.jobs)
    out = Text(f"{inert(queue.name)}: {len(listed)} job(s) running or waiting\n", style="bold")
    out.append(rate_line(queue, snapshot) + "\n")
    for job in listed:
        place = f"#{job.queue_position} " if job.queue_position else ""
        out.append(f"{place}{inert(job.namespace)}/{inert(job.name)}  {job.state.value}  {job.gpu_request} GPU(s)")
        if job.waiting and job.pending_reason:
            out.append(f"  {job.waiting_for.value + ' · ' if job.waiting_for else ''}{inert(job.pending_reason)}",
                       style="italic")
        out.append("\n")
    return out


class QueuesScreen(ModalScreen[None]):
    """The cluster's queues and the selected queue's workloads.

    | key | does |
    |---|---|
    | ↑ ↓ | select a queue (its workloads show below) |
    | esc / q | close |
    """

    CSS_PATH = "queues.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "close", "Close"),
        Binding("up", "move(-1)", "Previous", show=False),
        Binding("down", "move(1)", "Next", show=False),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.selected = 0

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="queues-box", can_focus=True) as box:
            box.border_title = "Queues"
            box.border_subtitle = "↑↓ select · esc closes"
            yield Static(NONE_YET, id="queues-table", markup=False)
            yield Static("", id="queues-workloads", markup=False)
        yield KeyFooter()

    def on_mount(self) -> None:
        self.query_one("#queues-box").focus()
        self.refresh_queues()
        self.set_interval(1.0, self.refresh_queues)

    def refresh_queues(self) -> None:
        snapshot = getattr(self.app, "snapshot", None)
        if not isinstance(snapshot, FleetSnapshot) or not snapshot.queues:
            return
        self.selected = min(self.selected, len(snapshot.queues) - 1)
        table = self.query_one("#queues-table", Static)
        width = table.content_size.width or self.app.size.width - 4  # before its first layout: the screen's
        table.update(queue_table(snapshot, self.selected, width))
        self.query_one("#queues-workloads", Static).update(workloads_text(snapshot.queues[self.selected], snapshot))

    def action_move(self, step: int) -> None:
        self.selected = max(0, self.selected + step)
        self.refresh_queues()

    def action_close(self) -> None:
        self.dismiss(None)
