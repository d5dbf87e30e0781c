"""The GPUs pane: one row per GPU keyed by UUID, its MIG slices and processes as child rows; and
its process view (F5), every GPU process of the fleet in one table, as nvitop lists them.

| key | does |
|---|---|
| enter | the GPU's detail view (history charts, processes, slices) |
| > / < / f6 | sort by the next / previous column, or pick one or the reverse from a menu (shown in the header; every table) |
| p | show or hide the process rows |
| f5 | the process view, as a tree under the processes that started them; in it, f5 switches tree ↔ flat |
| esc | (process view) back to the GPUs, after clearing a kept filter |
| T / K / f9 | send SIGTERM / SIGKILL / SIGTERM to the selected process, after a y/n (both views) |
| / | filter (GPUs, slices, process names, users, pods; in the process view also parents' names) |

In the process view a sort key (> < f6) shows the list flat, sorted by that column (numbers
highest first: GPU memory, SM %, CPU %, RSS, the longest TIME); f5 brings the tree back, and the
flat order is kept for the next time. ``:procs`` opens the view from the command line.

Signals go through ``console.gpus`` in a thread worker; the core checks the answer again and
the source refuses a process it did not see on that GPU.
"""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.message import Message

from gpuconsole.core.money.attribution import attribute, job_index
from gpuconsole.core.ops.actions import ActionKind
from gpuconsole.model import FleetSnapshot, Gpu, GpuProcess, SourceKind, unfinished
from gpuconsole.ui.actions import Action, Confirm, run_action
from gpuconsole.ui.format import age, money, short_node
from gpuconsole.ui.palette import MEMORY_THRESHOLDS, UTIL_THRESHOLDS, Palette
from gpuconsole.ui.panes.base import Pane
from gpuconsole.ui.panes.gpu_procs import (
    FLAT_ORDER,
    PID,
    PROC_COLUMNS,
    PROC_GIVES,
    ParentRow,
    ProcRow,
    Row,
    flat_rows,
    gpu_processes,
    parent_detail,
    place,
    row_cells,
    sort_value,
    tree_rows,
    view_summary,
)
from gpuconsole.ui.panes.gpu_rows import (
    COLUMNS,
    SORTABLE,
    gib_pair,
    gpu_cells,
    process_cells,
    process_words,
    slice_cells,
    sort_gpus,
)
from gpuconsole.ui.widgets.virtual_table import VirtualTable

__all__ = ["COLUMNS", "GpusPane", "gib_pair"]


class GpusPane(Pane):
    """All GPUs of the fleet, live, with their MIG slices and processes."""

    kind = SourceKind.GPUS
    main_view, sub_view = "gpus", "procs"  # the GPUs, or the process view

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("greater_than_sign", "sort_step(1)", "Sort", key_display=">",
                tooltip="sort by the next column (shown in the header); < the one before"),
        Binding("p", "toggle_processes", "Processes", show=False, tooltip="show or hide the process rows"),
        Binding("f5", "process_view", "Procs",
                tooltip="every GPU process as a tree under its parents (nvitop's process view); "
                        "f5 again: flat and sortable; esc: back to the GPUs"),
        Binding("f9", "signal('SIGTERM')", "SIGTERM", show=False, tooltip="htop's kill key: SIGTERM the process, asks y/n"),
        Binding("T", "signal('SIGTERM')", "SIGTERM",
                tooltip="send SIGTERM to the selected process, after a y/n: it may save its work and exit"),
        Binding("K", "signal('SIGKILL')", "SIGKILL", show=False,
                tooltip="send SIGKILL to the selected process, after a y/n: it stops at once, unsaved work is lost"),
    ]

    class OpenDetail(Message):
        """The user asked for one GPU's detail view."""

        def __init__(self, uuid: str) -> None:
            super().__init__()
            self.uuid = uuid

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.show_processes = True
        self.as_tree = True  # the process view draws the tree (else a flat list the table sorts)
        self.flat_order = FLAT_ORDER
        self.proc_rows: dict[str, Row] = {}

    def compose_body(self) -> ComposeResult:
        # the pane orders the rows: a GPU's slices and processes stay under it, whatever the sort
        table = VirtualTable(COLUMNS, id="gpu-table", identity="node", orders_rows=False)
        table.sortable = SORTABLE
        yield table
        procs = VirtualTable(PROC_COLUMNS, id="proc-table", identity="pid", gives=PROC_GIVES, orders_rows=False)
        procs.sort_value = lambda key, column: sort_value(self.proc_rows.get(key), column)
        yield procs

    def on_mount(self) -> None:
        # Pane.on_mount runs too (Textual calls each class's handler).
        self.table.sort_by("node", descending=False)

    @property
    def table(self) -> VirtualTable:
        """The GPU table."""
        return self.query_one("#gpu-table", VirtualTable)

    @property
    def proc_table(self) -> VirtualTable:
        return self.query_one("#proc-table", VirtualTable)

    def current_table(self) -> VirtualTable:
        return self.proc_table if self.mode == "procs" else self.table

    @property
    def thresholds(self) -> tuple[tuple[float, float], tuple[float, float]]:
        return getattr(self.app, "gpu_thresholds", (UTIL_THRESHOLDS, MEMORY_THRESHOLDS))

    def summary(self, snapshot: FleetSnapshot) -> str:
        if not snapshot.gpus:
            return ""
        if self.mode == "procs":
            column = self.proc_table.sort_column
            label = None if column is None else self.proc_table.column_label(column)
            return view_summary(snapshot, self.as_tree, label)
        busy = sum(1 for g in snapshot.gpus if g.busy)
        procs = sum(len(g.processes) for g in snapshot.gpus)
        return f"{len(snapshot.gpus)} GPUs · {busy} busy · {procs} processes"

    def render_snapshot(self, snapshot: FleetSnapshot, palette: Palette) -> None:
        if self.mode == "procs":
            self.render_processes(snapshot, palette)
            return
        util_t, mem_t = self.thresholds
        # A fleet can hold 8,192 GPUs: the table builds the cells of the rows on screen only, and
        # a GPU's row is the GPU itself (no object per row and tick); other rows say how to draw.
        rows: dict[str, Gpu | tuple[Any, ...]] = {}
        filtering = bool(self.filter_text)
        table = self.table
        for gpu in sort_gpus(snapshot.gpus, table.sort_column or "node", table.sort_descending):
            if filtering:
                words: list[object] = [gpu.node, gpu.name, gpu.uuid, f"#{gpu.index}", *(s.profile for s in gpu.mig_slices)]
                for p in gpu.processes:
                    words.extend(process_words(p))
                if not self.matches(*words):
                    continue
            rows[gpu.uuid] = gpu
            for mig in gpu.mig_slices:
                rows[f"{gpu.uuid}/{mig.uuid}"] = (slice_cells, mig, palette, util_t, mem_t)
                if self.show_processes:
                    for p in gpu.processes:
                        if p.mig_uuid == mig.uuid:
                            rows[f"{gpu.uuid}{PID}{p.pid}"] = (_nested_process, p, palette, util_t)
            if self.show_processes and gpu.processes:
                slices = {s.uuid for s in gpu.mig_slices}
                for p in gpu.processes:
                    if p.mig_uuid not in slices:
                        rows[f"{gpu.uuid}{PID}{p.pid}"] = (_process, p, palette, util_t)

        def cells_of(key: str) -> tuple[Any, ...]:
            row = rows[key]
            if isinstance(row, Gpu):
                return gpu_cells(row, palette, util_t, mem_t)
            return row[0](*row[1:])

        self.table.show_rows(list(rows), cells_of)

    def render_processes(self, snapshot: FleetSnapshot, palette: Palette) -> None:
        """The process view: the tree, or the flat list the table puts in its sort order."""
        util_t, now = self.thresholds[0], snapshot.taken_at
        procs = gpu_processes(snapshot, self.matches)
        self.proc_rows = rows = tree_rows(procs) if self.as_tree else flat_rows(procs)
        self.proc_table.show_rows(list(rows), lambda key: row_cells(rows[key], now, palette, util_t))

    # ------------------------------------------------------------------ views
    def action_process_view(self) -> None:
        """``f5``: the process view as a tree; in it, tree ↔ flat (htop's F5)."""
        if self.mode != "procs":
            self.open_view("procs")
        else:
            self.set_tree(not self.as_tree)

    def open_view(self, view: str) -> None:
        """``procs`` (the process view, as a tree), else the GPUs."""
        if view == "procs":
            self.set_tree(True)
        self.show_view("procs" if view == "procs" else "gpus")

    def focus_body(self) -> None:
        found = self.query("#proc-table" if self.mode == "procs" else "#gpu-table")
        if found:  # a pane shown the moment it was mounted may not have composed its tables yet
            found.first().focus()

    def set_tree(self, tree: bool) -> None:
        """Draw the process view as the tree (no sort column), or flat in the last flat order."""
        table = self.proc_table
        self.as_tree = tree
        table.orders_rows = not tree
        if tree:
            table.sort_by(None)
        else:
            self.redraw()  # the flat rows first, then their order
            table.sort_by(*self.flat_order)

    # ------------------------------------------------------------------ sorting
    def on_virtual_table_sort_changed(self, event: VirtualTable.SortChanged) -> None:
        table = event.table
        if table.id == "proc-table" and table.sort_column:
            self.flat_order = (table.sort_column, table.sort_descending)
            if self.as_tree:  # a sort key in the tree: the list flat, in that order
                self.as_tree, table.orders_rows = False, True
        self.redraw()

    def action_toggle_processes(self) -> None:
        self.show_processes = not self.show_processes
        self.redraw()

    # ------------------------------------------------------------------ selection
    def selected_process(self) -> tuple[Gpu, GpuProcess] | None:
        """The GPU process under the cursor of the view on screen (a parent row is none)."""
        key = self.current_table().selected_key or ""
        snap = self.snapshot
        if PID not in key or snap is None:
            return None
        gpu_uuid, _, pid = key.partition(PID)
        gpu = next((g for g in snap.gpus if g.uuid == gpu_uuid), None)
        proc = next((p for p in gpu.processes if str(p.pid) == pid), None) if gpu else None
        return (gpu, proc) if gpu is not None and proc is not None else None

    def on_virtual_table_row_selected(self, event: VirtualTable.RowSelected) -> None:
        key = event.row_key or ""
        if event.data_table.id == "proc-table" and PID not in key:
            return  # a parent: it holds no GPU
        self.post_message(self.OpenDetail(key.split("/", 1)[0]))

    # ------------------------------------------------------------------ signals
    def guarded_kind(self, action: str, parameters: tuple[object, ...]) -> tuple[ActionKind, str | None] | None:
        if action != "signal":
            return None
        chosen, snap = self.selected_process(), self.snapshot
        pod = chosen[1].pod_uid if chosen is not None else None
        job = job_index(snap.jobs).owner(pod) if pod and snap is not None else None
        return ActionKind.KILL_PROCESS, job.namespace if job is not None else None

    def action_signal(self, signal_name: str) -> None:
        """Ask y/n, then send ``signal_name`` to the selected process through the core."""
        chosen = self.selected_process()
        if chosen is None:
            which = ("a GPU process (a parent holds no GPU)" if self.mode == "procs"
                     else "a process (a row under its GPU)")
            self.app.notify(f"Select {which} to signal it.", severity="warning")
            return
        gpus = self.core.services.gpus
        if not gpus.available:
            self.app.notify("This GPU source cannot signal processes.", severity="warning")
            return
        gpu, proc = chosen

        where = f" on MIG {proc.mig_uuid}" if proc.mig_uuid else ""
        effect = ("it may save its work and exit" if signal_name == "SIGTERM"
                  else "it stops at once and cannot save anything (checkpoints in progress are lost)")
        details = (f"pid {proc.pid} {proc.name} · user {proc.user or '?'} · {proc.memory_used_mib} MiB\n"
                   f"GPU {gpu.index} {gpu.name} on {gpu.node}{where}\n{proc.command or proc.name}\n"
                   f"{signal_name}: {effect}.")

        gpus = self.core.services.gpus
        confirm = Confirm(f"Send {signal_name}", f"Send {signal_name} to pid {proc.pid} ({proc.name})? (y/n)", details,
                          cancelled=f"{signal_name} cancelled")
        run_action(self, Action(f"{signal_name} pid {proc.pid}",
                                lambda answer: gpus.kill(gpu.uuid, proc.pid, signal_name, answer or ""),
                                ActionKind.KILL_PROCESS, confirm=confirm, group="gpu-action"))

    # ------------------------------------------------------------------ the line under the table
    def detail(self, table_id: str, key: str, snapshot: FleetSnapshot, palette: Palette) -> Text | None:
        if self.mode == "procs" and table_id != "proc-table":  # asked while the filter field has focus
            table_id, key = "proc-table", self.proc_table.selected_key or ""
        if table_id == "proc-table":
            row = self.proc_rows.get(key)
            if isinstance(row, ParentRow):
                return parent_detail(row, self.proc_rows, palette)
            if not isinstance(row, ProcRow):
                return None
            gpu, proc = row.gpu, row.proc
            where = f"{short_node(gpu.node)} GPU {gpu.index}" + (f" {place(gpu, proc)}" if proc.mig_uuid else "")
            return process_detail(proc, snapshot, palette, where)
        if PID in key:
            chosen = self.selected_process()
            return process_detail(chosen[1], snapshot, palette) if chosen else None
        gpu_uuid, _, mig_uuid = key.partition("/")
        gpu = next((g for g in snapshot.gpus if g.uuid == gpu_uuid), None)
        if gpu is None:
            return None
        who = attribute(snapshot, gpu, mig_uuid)
        line = Text(who.sentence(short_node), palette.bad if who.idle_while_billed else palette.strong if who.held else None)
        waste = next((w for w in snapshot.idle if w.uuid == gpu.uuid), None)
        if waste is not None and not mig_uuid:
            minutes = (snapshot.taken_at - waste.idle_since) / 60.0
            line.append(f" · idle {minutes:.0f} min, {money(waste.wasted)} wasted", palette.bad)
        line.append(f" · {mig_uuid or gpu.uuid}", palette.dim)
        return line


def _process(proc: GpuProcess, palette: Palette, util_t: tuple[float, float]) -> tuple[Any, ...]:
    return process_cells(proc, palette, util_t, nested=False)


def _nested_process(proc: GpuProcess, palette: Palette, util_t: tuple[float, float]) -> tuple[Any, ...]:
    return process_cells(proc, palette, util_t, nested=True)


def process_detail(proc: GpuProcess, snapshot: FleetSnapshot, palette: Palette, where: str = "") -> Text:
    """``pid 123 python · alice · compute · 30.1 GiB · SM 81% · CPU 97% · held by ml/train · cmd``
    (``where``: the GPU it runs on, said after its name)."""
    line = Text()
    line.append(f"pid {proc.pid} {proc.name}", palette.strong)
    if where:
        line.append(f" on {where}")
    parts = [proc.user or "user unknown", proc.kind, f"{proc.memory_used_mib / 1024:.1f} GiB"]
    parts.append("SM N/A" if proc.sm_utilization is None else f"SM {proc.sm_utilization:.0f}%")
    if proc.cpu_percent is not None:
        parts.append(f"CPU {proc.cpu_percent:.0f}%")
    if proc.rss_mib is not None:
        parts.append(f"RSS {proc.rss_mib / 1024:.1f} GiB")
    if proc.started is not None:
        parts.append(f"up {age(snapshot.taken_at - proc.started)}")
    line.append(" · " + " · ".join(parts))
    job = job_index(unfinished(snapshot.jobs)).owner(proc.pod_uid)  # a process's pod is a live job's
    if job is not None:
        line.append(f" · held by {job.namespace}/{job.name}", palette.strong)
    elif proc.pod_uid:
        line.append(f" · pod {proc.pod_uid}")
    if proc.container_id:
        line.append(f" · container {proc.container_id[:12]}", palette.dim)
    if proc.parents:
        lineage = " → ".join(name for _pid, name in reversed(proc.parents))
        line.append(f" · {lineage} → {proc.name}", palette.dim)
    if proc.command:
        line.append(f" · {proc.command}", palette.dim)
    return line
