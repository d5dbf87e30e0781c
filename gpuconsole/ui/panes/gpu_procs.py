"""The GPUs pane's process view (F5), as nvitop draws its process panel: every GPU process of the
fleet in one table, as a tree under the processes that started them or flat and sorted.

A process names its ancestors (``GpuProcess.parents``), so the tree is drawn from the GPU
processes alone: ``sshd → bash → torchrun`` are rows of their own (dim: they hold no GPU), and a
GPU process that started another is that one's parent. PIDs are per host, so a parent row is
keyed by its node and PID.

Display-only: a process's cells are the GPU detail view's (:func:`process_fields`), plus where it
runs and its place in the tree.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

from rich.text import Text

from gpuconsole.model import FleetSnapshot, Gpu, GpuProcess
from gpuconsole.ui.format import short_node
from gpuconsole.ui.palette import Palette
from gpuconsole.ui.panes.gpu_rows import process_words
from gpuconsole.ui.widgets.process_cells import PROCESS_COLUMNS, THRESHOLDS, process_fields
from gpuconsole.ui.widgets.cells import right, text

PID = "/pid/"  # a GPU process's row key: <gpu uuid>/pid/<pid> (as in the GPU table)
PARENT = "/parent/"  # a parent's row key: <node>/parent/<pid>
PLACE_WIDTH = 10

PROC_COLUMNS = [*PROCESS_COLUMNS[:2], ("GPU", "gpu", PLACE_WIDTH), *PROCESS_COLUMNS[2:]]
# Narrower than 80 columns, once the command is down to its label: TIME, RSS, the place, the user.
PROC_GIVES = {"command": 16, "gpu": 6, "user": 5, "rss": 4}
FLAT_ORDER = ("gpumem", True)  # the first sort of the flat list: GPU memory, highest first


class ProcRow(NamedTuple):
    """A GPU process (one row per GPU it uses), ``prefix`` the tree drawing before its command."""

    gpu: Gpu
    proc: GpuProcess
    prefix: str = ""


class ParentRow(NamedTuple):
    """An ancestor of GPU processes that holds no GPU itself (tree only)."""

    node: str
    pid: int
    name: str
    prefix: str = ""


Row = ProcRow | ParentRow


def proc_key(gpu: Gpu, proc: GpuProcess) -> str:
    return f"{gpu.uuid}{PID}{proc.pid}"


def place(gpu: Gpu, proc: GpuProcess) -> str:
    """Where a process runs in a few letters: its MIG profile, else ``<node>#<index>`` (the
    node's tail kept where it is long: the end of ``ip-10-0-5-197`` tells nodes apart)."""
    if proc.mig_uuid:
        return next((s.profile for s in gpu.mig_slices if s.uuid == proc.mig_uuid), "MIG")
    return tail(f"{short_node(gpu.node)}#{gpu.index}")


def tail(words: str, width: int = PLACE_WIDTH) -> str:
    return words if len(words) <= width else "…" + words[-(width - 1):]


def row_cells(row: Row, now: float, palette: Palette, util_t: THRESHOLDS) -> tuple[Text, ...]:
    """One row of the process table, in :data:`PROC_COLUMNS` order."""
    if isinstance(row, ParentRow):
        blank = text("")
        command = Text(row.prefix, no_wrap=True, overflow="ellipsis")
        command.append(row.name, palette.dim)
        host = blank if row.prefix else text(tail(short_node(row.node)), palette.dim)  # said once, at the top
        return right(row.pid, palette.dim), blank, host, blank, blank, blank, blank, blank, command
    fields = process_fields(row.proc, now, palette, util_t)
    command = fields["command"]
    if row.prefix:
        command = Text(row.prefix, no_wrap=True, overflow="ellipsis") + command
    where = text(place(row.gpu, row.proc), palette.accent if row.proc.mig_uuid else None)
    return (fields["pid"], fields["user"], where,
            fields["gpumem"], fields["sm"], fields["cpu"], fields["rss"], fields["time"], command)


def view_words(gpu: Gpu, proc: GpuProcess) -> tuple[object, ...]:
    """What the filter matches a process on: itself, where it runs and its ancestors' names."""
    ancestors = (name for _pid, name in proc.parents)
    return (*process_words(proc), gpu.node, f"#{gpu.index}", place(gpu, proc), *ancestors)


def gpu_processes(snapshot: FleetSnapshot, matches: Callable[..., bool]) -> list[ProcRow]:
    """Every process on every GPU that passes the filter, by node, PID and GPU."""
    rows = [ProcRow(g, p) for g in snapshot.gpus for p in g.processes if matches(*view_words(g, p))]
    rows.sort(key=lambda r: (r.gpu.node, r.proc.pid, r.gpu.index))
    return rows


def flat_rows(procs: list[ProcRow]) -> dict[str, Row]:
    return {proc_key(r.gpu, r.proc): r for r in procs}


def tree_rows(procs: list[ProcRow]) -> dict[str, Row]:
    """The processes under their ancestors, in drawing order, each with its ``├ └ │`` prefix."""
    rows: dict[str, Row] = {}
    on_gpu: dict[tuple[str, int], str] = {}
    for r in procs:
        key = proc_key(r.gpu, r.proc)
        rows[key] = r
        on_gpu.setdefault((r.gpu.node, r.proc.pid), key)
    parent_of: dict[str, str | None] = {}
    for r in procs:
        node, child = r.gpu.node, proc_key(r.gpu, r.proc)
        for pid, name in r.proc.parents:
            up = on_gpu.get((node, pid))
            if up is not None and up != child:  # a GPU process started this one
                parent_of[child] = up
                break
            up = f"{node}{PARENT}{pid}"
            parent_of[child] = up
            if up in rows:
                break  # the rest of the chain is linked already
            rows[up] = ParentRow(node, pid, name)
            child = up
        parent_of.setdefault(child, None)
    children: dict[str | None, list[str]] = {}
    for key in rows:
        children.setdefault(parent_of.get(key), []).append(key)

    def order(key: str) -> tuple[Any, ...]:
        row = rows[key]
        if isinstance(row, ParentRow):
            return row.node, row.pid, -1
        return row.gpu.node, row.proc.pid, row.gpu.index

    out: dict[str, Row] = {}

    def walk(keys: Iterable[str], lead: str, depth: int) -> None:
        ordered = sorted(keys, key=order)
        for i, key in enumerate(ordered):
            if key in out:
                continue
            last = i == len(ordered) - 1
            prefix = "" if depth == 0 else lead + ("└ " if last else "├ ")
            out[key] = rows[key]._replace(prefix=prefix)
            walk(children.get(key, ()), "" if depth == 0 else lead + ("  " if last else "│ "), depth + 1)

    walk(children.get(None, ()), "", 0)
    walk([key for key in rows if key not in out], "", 0)  # a loop in what the hosts said: shown at the top
    return out


# Flat sort orders by column: figures as numbers (None: unknown, sorted last), TIME as the age.
ORDERS: dict[str, Callable[[Gpu, GpuProcess], Any]] = {
    "pid": lambda g, p: p.pid,
    "user": lambda g, p: p.user,
    "gpu": lambda g, p: (g.node, g.index, place(g, p)),
    "gpumem": lambda g, p: p.memory_used_mib,
    "sm": lambda g, p: p.sm_utilization,
    "cpu": lambda g, p: p.cpu_percent,
    "rss": lambda g, p: p.rss_mib,
    "time": lambda g, p: None if p.started is None else -p.started,
    "command": lambda g, p: (p.command or p.name).lower(),
}


def sort_value(row: Row | None, column: str) -> Any:
    """The order of a flat row by ``column`` (a parent row has none)."""
    return ORDERS[column](row.gpu, row.proc) if isinstance(row, ProcRow) else None


def parent_detail(row: ParentRow, rows: dict[str, Row], palette: Palette) -> Text:
    """``pid 41 torchrun on ip-10-0-5-197 · above 4 GPU processes · holds no GPU itself``."""
    below = sum(1 for r in rows.values() if isinstance(r, ProcRow) and r.gpu.node == row.node
                and any(pid == row.pid for pid, _name in r.proc.parents))
    line = Text(f"pid {row.pid} {row.name}", palette.strong)
    line.append(f" on {row.node} · above {below} GPU process{'es' if below != 1 else ''}")
    line.append(" · holds no GPU itself", palette.dim)
    return line


def view_summary(snapshot: FleetSnapshot, tree: bool, sort_label: str | None) -> str:
    """``24 processes · 7 hosts · tree (f5: flat)``, or ``… · by GPU-MEM▼ (f5: tree)``."""
    count = sum(len(g.processes) for g in snapshot.gpus)
    hosts = len({g.node for g in snapshot.gpus if g.processes})
    how = "tree (f5: flat)" if tree else f"{'by ' + sort_label if sort_label else 'flat'} (f5: tree)"
    return f"{count} processes · {hosts} hosts · {how}"
