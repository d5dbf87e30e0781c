"""The detail view of one GPU: history charts, what the driver reports, MIG slices, vGPUs, processes.

| key | does |
|---|---|
| w | history window: 5 min → 1 h → 24 h |
| ? | the keys of this view |
| esc / q | back |

The last 5 minutes come from the console's in-memory ring (``console.gpus.recent``), or from the
Store when the ring is younger than the window (just after a start); 1 h and 24 h come from the
Store's history (``console.gpu_history``). Both are read in a thread worker, so the UI thread
never waits on SQLite.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, ClassVar, cast

from rich.table import Table
from rich.text import Text
from textual import work
from textual.app import ComposeResult, RenderResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Sparkline, Static

from gpuconsole.core.money.costs import gpu_price_per_hour
from gpuconsole.model import Gpu, GpuProcess, GpuSample, Job, MigMode, unfinished
from gpuconsole.ui.format import money, short_node
from gpuconsole.ui.palette import MEMORY_THRESHOLDS, UTIL_THRESHOLDS, Palette
from gpuconsole.ui.widgets.cells import right, text
from gpuconsole.ui.widgets.process_cells import PROCESS_COLUMNS, gib, percent, process_fields
from gpuconsole.ui.worker_errors import ReportsWorkerErrors

if TYPE_CHECKING:
    from gpuconsole.ui.protocols import ConsoleApp

WINDOWS = [("5 min", 300.0, 1.0), ("1 h", 3600.0, 10.0), ("24 h", 86400.0, 60.0)]  # label, seconds, reload every
MAX_POINTS = 300
SERIES = [
    ("util", "utilization %", lambda s: s.utilization),
    ("memory", "memory MiB", lambda s: s.memory_used_mib),
    ("temp", "temperature °C", lambda s: s.temperature_c),
    ("power", "power W", lambda s: s.power_w),
]
BARS = "▁▂▃▄▅▆▇█"
def chart_range(key: str, gpu: Gpu | None) -> tuple[float, float]:
    """The floor and ceiling a series is drawn against: 0–100 % for utilization, 0 to the
    board's total for memory and to its power limit for power, 20–100 °C for temperature. A
    chart scaled to its own minimum and maximum would draw a 1 °C blip at full height."""
    if key == "util":
        return 0.0, 100.0
    if key == "temp":
        return 20.0, 100.0
    if key == "memory":
        return 0.0, float(gpu.memory_total_mib) if gpu is not None and gpu.memory_total_mib else 0.0
    return 0.0, float(gpu.power_limit_w) if gpu is not None and gpu.power_limit_w else 0.0


def bars(values: list[float], width: int, floor: float, ceiling: float) -> str:
    """``values`` as one line of block bars against ``floor``–``ceiling`` (newest on the right;
    fewer values than columns are drawn one a column). A ceiling at or below the floor falls back
    to the values' own maximum, so an unknown limit still draws."""
    if width <= 0 or not values:
        return ""
    if len(values) > width:  # the highest value of each column's share
        step = len(values) / width
        values = [max(values[int(i * step):max(int((i + 1) * step), int(i * step) + 1)]) for i in range(width)]
    top = ceiling if ceiling > floor else max(max(values), floor + 1.0)
    last = len(BARS) - 1
    return "".join(BARS[round(min(1.0, max(0.0, (v - floor) / (top - floor))) * last)] for v in values)


def job_names(jobs: tuple[Job, ...]) -> dict[str, str]:
    """Pod UID → ``namespace/name`` of the live job that runs it (every pod of a distributed job;
    a finished job's pods hold no GPU, and a cluster may list 100,000 finished jobs)."""
    return {uid: f"{j.namespace}/{j.name}" for j in unfinished(jobs) for uid in {j.pod_uid, *j.pod_uids} if uid}


class ScaledSparkline(Sparkline):
    """Textual's sparkline drawn against a fixed floor and ceiling (:func:`chart_range`) instead of
    the data's own minimum and maximum."""

    floor: float = 0.0
    ceiling: float = 0.0

    def plot(self, values: list[float], floor: float, ceiling: float) -> None:
        self.floor, self.ceiling = floor, ceiling
        self.data = values  # reactive: redraws

    def render(self) -> RenderResult:
        return Text(bars(list(self.data or []), self.size.width, self.floor, self.ceiling))


def downsample(values: list[float], points: int = MAX_POINTS) -> list[float]:
    """At most ``points`` values: the mean of equal runs (a chart of 86,400 points draws no better)."""
    if len(values) <= points:
        return values
    step = len(values) / points
    return [sum(chunk) / len(chunk) for i in range(points)
            if (chunk := values[int(i * step):max(int((i + 1) * step), int(i * step) + 1)])]


class GpuDetailScreen(ReportsWorkerErrors, ModalScreen[None]):
    """One GPU in depth. ``w`` changes the history window; ``esc`` or ``q`` goes back."""

    CSS_PATH = "gpu_detail.tcss"

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss", "Back"),
        Binding("q", "dismiss", "Back", show=False),
        Binding("w", "next_window", "Window"),
        Binding("question_mark", "app.help", "Keys"),
    ]

    def __init__(self, uuid: str) -> None:
        super().__init__()
        self.uuid = uuid
        self.window = 0
        self._loaded_at = -1e18

    @property
    def console_app(self) -> ConsoleApp:
        return cast("ConsoleApp", self.app)

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="gpu-detail") as box:
            box.border_title = "GPU"
            box.border_subtitle = "w window · esc back"
            yield Static(id="gpu-facts")
            # slices and processes before the charts: at 80x24 they are what is on screen, as in nvitop
            yield Static(id="gpu-children")
            yield Static(id="gpu-window", classes="window-line")
            for key, label, _ in SERIES:
                with Horizontal(classes="spark-row"):
                    yield Static(label, classes="spark-label")
                    yield ScaledSparkline([], id=f"spark-{key}", classes="spark")
                    yield Static("", id=f"spark-{key}-now", classes="spark-now")

    def on_mount(self) -> None:
        self.refresh_view()
        self.set_interval(1.0, self.refresh_view)

    def current_gpu(self) -> Gpu | None:
        return next((g for g in self.console_app.snapshot.gpus if g.uuid == self.uuid), None)

    def action_next_window(self) -> None:
        self.window = (self.window + 1) % len(WINDOWS)
        self._loaded_at = -1e18
        self.refresh_view()

    def refresh_view(self) -> None:
        gpu = self.current_gpu()
        box = self.query_one("#gpu-detail")
        label, _, every = WINDOWS[self.window]
        others = ", ".join(w[0] for i, w in enumerate(WINDOWS) if i != self.window)
        self.query_one("#gpu-window", Static).update(Text.assemble(("history ", "bold"), label, (f"   (w: {others})", "dim")))
        if gpu is None:
            self.query_one("#gpu-facts", Static).update(Text(f"{self.uuid} is no longer reported by its source."))
        else:
            box.border_title = f"GPU {short_node(gpu.node)} #{gpu.index} · {gpu.name}"
            self.query_one("#gpu-facts", Static).update(self._facts(gpu))
            self.query_one("#gpu-children", Static).update(self._children(gpu))
        if time.monotonic() - self._loaded_at >= every:
            self._loaded_at = time.monotonic()
            self.load_history(self.window)

    def _facts(self, gpu: Gpu) -> Table:
        price = gpu_price_per_hour(self.console_app.snapshot.instances).get(gpu.node)
        missing = gpu.not_reported

        def val(name: str, text: str) -> str:
            return "N/A" if name in missing else text

        def opt(value: object, unit: str = "") -> str:
            return "N/A" if value is None else f"{value}{unit}"

        facts = Table.grid(padding=(0, 2))
        facts.add_column(style="bold")
        facts.add_column()
        facts.add_row("UUID", gpu.uuid + (f" · PCI {gpu.pci_bus_id}" if gpu.pci_bus_id else ""))
        facts.add_row("node", gpu.node)
        facts.add_row("now", f"{val('utilization', f'{gpu.utilization:.0f}%')} · "
                              f"{val('memory', f'{gpu.memory_used_mib}/{gpu.memory_total_mib} MiB')} · "
                              f"{val('temperature_c', f'{gpu.temperature_c} °C')} · "
                              f"{val('power_w', f'{gpu.power_w:.0f}')}/{val('power_limit_w', f'{gpu.power_limit_w:.0f}')} W")
        pcie = "N/A" if gpu.pcie_rx_kbps is None else f"{gpu.pcie_rx_kbps / 1024:.1f}/{(gpu.pcie_tx_kbps or 0) / 1024:.1f} MB/s"
        facts.add_row("clocks", f"SM {opt(gpu.sm_clock_mhz, ' MHz')} · memory {opt(gpu.memory_clock_mhz, ' MHz')} · "
                                f"fan {opt(gpu.fan_percent, '%')} · PCIe rx/tx {pcie} · "
                                f"memory busy {opt(None if gpu.memory_utilization is None else round(gpu.memory_utilization), '%')}")
        persistence = "N/A" if gpu.persistence_mode is None else ("on" if gpu.persistence_mode else "off")
        facts.add_row("modes", f"ECC errors {opt(gpu.ecc_volatile_errors)} · persistence {persistence} · "
                               f"compute {gpu.compute_mode or 'N/A'} · virtualization {gpu.virtualization or 'N/A'}")
        mig = gpu.mig_mode.value if gpu.mig_mode is not MigMode.NOT_SUPPORTED else "not supported"
        if gpu.mig_pending is not None:
            mig += f" ({gpu.mig_pending.value} after the next reset)"
        facts.add_row("MIG", mig)
        if gpu.throttle_reasons:
            facts.add_row("clocks held by", ", ".join(r.replace("_", " ") for r in gpu.throttle_reasons))
        versions = self.console_app.core.services.gpus.versions
        if versions:
            facts.add_row("driver", " · ".join(f"{k} {v}" for k, v in versions))
        jobs = job_names(self.console_app.snapshot.jobs)
        held = dict.fromkeys(jobs.get(p.pod_uid, f"pod {p.pod_uid}")
                             for p in gpu.processes if p.pod_uid and not p.mig_uuid)  # a slice's job is in its row
        if held:
            facts.add_row("held by", ", ".join(held))
        if price is not None:
            state = "busy" if gpu.busy else "IDLE"
            facts.add_row("cost", f"{money(price)}/h for this GPU ({state})")
        return facts

    def _children(self, gpu: Gpu) -> Table:
        """Slices, vGPUs and processes in the process view's cells, one space apart, so PID,
        user, GPU memory, SM % and the command still fit at 80 columns (as nvitop fits them)."""
        app = self.console_app
        snap, palette = app.snapshot, app.palette
        util_t = getattr(app, "gpu_thresholds", (UTIL_THRESHOLDS, MEMORY_THRESHOLDS))[0]
        table = Table(box=None, padding=(0, 1), collapse_padding=True, pad_edge=False, expand=True, show_edge=False)
        for label, key, _width in PROCESS_COLUMNS:
            table.add_column(label, justify="left" if key in ("user", "command") else "right", no_wrap=True,
                             overflow="ellipsis", ratio=1 if key == "command" else None)
        jobs = job_names(snap.jobs)

        def add(proc: GpuProcess, prefix: str = "") -> None:
            cells = process_fields(proc, snap.taken_at, palette, util_t)
            command = Text(prefix, no_wrap=True) + cells["command"] if prefix else cells["command"]
            table.add_row(*(cells[key] for _label, key, _width in PROCESS_COLUMNS[:-1]), command)

        def device(kind: str, used: float | None, util: float | None, words: str) -> None:
            table.add_row(kind, "", gib(used), percent(util), "", "", "", Text(words, palette.accent))

        for s in gpu.mig_slices:
            device("MIG", s.memory_used_mib, s.utilization, f"{s.profile} · gi {s.gi_id} ci {s.ci_id}"
                   + (f" · {jobs.get(s.pod_uid, 'pod ' + s.pod_uid)}" if s.pod_uid else ""))
            inside = [p for p in gpu.processes if p.mig_uuid == s.uuid]
            for i, p in enumerate(inside):
                add(p, "└ " if i == len(inside) - 1 else "├ ")
        for v in gpu.vgpu_instances:
            device("vGPU", v.memory_used_mib, v.utilization, f"{v.vgpu_id} {v.type_name} · VM {v.vm_id or '?'}")
        slices = {s.uuid for s in gpu.mig_slices}
        for p in gpu.processes:
            if p.mig_uuid not in slices:
                add(p)
        if not gpu.mig_slices and not gpu.processes and not gpu.vgpu_instances:
            table.add_row("", "", "", "", "", "", "", "no processes")
        return table

    @work(thread=True, exclusive=True, group="gpu-history", exit_on_error=False, description="GPU history")
    def load_history(self, window: int) -> None:
        core = self.console_app.core
        _, seconds, _ = WINDOWS[window]
        if window == 0:
            samples = core.services.gpus.recent(self.uuid, seconds)
            if len(samples) < seconds * 0.9 / max(core.options.interval, 1.0):
                stored = core.gpu_history(self.uuid, seconds)
                samples = stored if len(stored) > len(samples) else samples
        else:
            samples = core.gpu_history(self.uuid, seconds)
        self.app.call_from_thread(self._show_history, window, samples)

    def _show_history(self, window: int, samples: list[GpuSample]) -> None:
        if not self.is_mounted or window != self.window:
            return
        for key, _, get in SERIES:
            values = [float(get(s)) for s in samples]
            self.query_one(f"#spark-{key}", ScaledSparkline).plot(downsample(values), *chart_range(key, self.current_gpu()))
            summary = f"{values[-1]:.0f} (max {max(values):.0f})" if values else "collecting…"
            self.query_one(f"#spark-{key}-now", Static).update(summary)
