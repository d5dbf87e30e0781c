"""The detail view of one GPU: sparklines of the last minutes, MIG slices, processes, cost.

History comes from the Store (raw per-second samples), read in a thread worker every second so
the UI thread never waits on SQLite.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from rich.table import Table
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Sparkline, Static

from gpuconsole.core.costs import gpu_price_per_hour
from gpuconsole.model import Gpu, GpuSample
from gpuconsole.ui.format import money, short_node

if TYPE_CHECKING:
    from gpuconsole.ui.app import GpuConsoleApp

WINDOW_S = 600  # ten minutes of per-second samples
SERIES = [
    ("util", "utilization %", lambda s: s.utilization),
    ("memory", "memory MiB", lambda s: s.memory_used_mib),
    ("temp", "temperature °C", lambda s: s.temperature_c),
    ("power", "power W", lambda s: s.power_w),
]


class GpuDetailScreen(ModalScreen[None]):
    """One GPU in depth. ``esc`` or ``q`` goes back."""

    BINDINGS = [Binding("escape", "dismiss", "Back"), Binding("q", "dismiss", "Back", show=False)]

    def __init__(self, uuid: str) -> None:
        super().__init__()
        self.uuid = uuid

    @property
    def console_app(self) -> GpuConsoleApp:
        return cast("GpuConsoleApp", self.app)

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="gpu-detail") as box:
            box.border_title = "GPU"
            box.border_subtitle = "esc to go back"
            yield Static(id="gpu-facts")
            for key, label, _ in SERIES:
                with Horizontal(classes="spark-row"):
                    yield Static(label, classes="spark-label")
                    yield Sparkline([], id=f"spark-{key}", classes="spark")
                    yield Static("", id=f"spark-{key}-now", classes="spark-now")
            yield Static(id="gpu-children")

    def on_mount(self) -> None:
        self.refresh_view()
        self.set_interval(1.0, self.refresh_view)

    def current_gpu(self) -> Gpu | None:
        return next((g for g in self.console_app.snapshot.gpus if g.uuid == self.uuid), None)

    def refresh_view(self) -> None:
        gpu = self.current_gpu()
        box = self.query_one("#gpu-detail")
        if gpu is None:
            self.query_one("#gpu-facts", Static).update(Text(f"{self.uuid} is no longer reported by its source."))
            return
        box.border_title = f"GPU {short_node(gpu.node)} #{gpu.index} · {gpu.name}"
        self.query_one("#gpu-facts", Static).update(self._facts(gpu))
        self.query_one("#gpu-children", Static).update(self._children(gpu))
        self.load_history()

    def _facts(self, gpu: Gpu) -> Table:
        price = gpu_price_per_hour(self.console_app.snapshot.instances).get(gpu.node)
        facts = Table.grid(padding=(0, 2))
        facts.add_column(style="bold")
        facts.add_column()
        facts.add_row("UUID", gpu.uuid)
        facts.add_row("node", gpu.node)
        facts.add_row("now", f"{gpu.utilization:.0f}% · {gpu.memory_used_mib}/{gpu.memory_total_mib} MiB · "
                              f"{gpu.temperature_c} °C · {gpu.power_w:.0f}/{gpu.power_limit_w:.0f} W · MIG {gpu.mig_mode.value}")
        if price is not None:
            state = "busy" if gpu.busy else "IDLE"
            facts.add_row("cost", f"{money(price)}/h for this GPU ({state})")
        return facts

    def _children(self, gpu: Gpu) -> Table:
        table = Table(box=None, padding=(0, 1), expand=False, show_edge=False)
        table.add_column("SLICE / PROCESS")
        table.add_column("MEMORY", justify="right")
        table.add_column("UTIL", justify="right")
        table.add_column("JOB (POD)")
        jobs = {j.pod_uid: f"{j.namespace}/{j.name}" for j in self.console_app.snapshot.jobs if j.pod_uid}

        def owner(pod_uid: str | None) -> str:
            if not pod_uid:
                return ""
            return jobs.get(pod_uid, f"pod {pod_uid}")

        for s in gpu.mig_slices:
            util = "N/A" if s.utilization is None else f"{s.utilization:.0f}%"
            table.add_row(f"{s.profile} {s.uuid}", f"{s.memory_used_mib}/{s.memory_total_mib} MiB", util, owner(s.pod_uid))
        for p in gpu.processes:
            where = f" on {p.mig_uuid[:12]}…" if p.mig_uuid else ""
            table.add_row(f"pid {p.pid} {p.name} ({p.user or '?'}){where}", f"{p.memory_used_mib} MiB", "", owner(p.pod_uid))
        if not gpu.mig_slices and not gpu.processes:
            table.add_row("no processes", "", "", "")
        return table

    @work(thread=True, exclusive=True, group="gpu-history", exit_on_error=False, description="GPU history")
    def load_history(self) -> None:
        samples = self.console_app.core.gpu_history(self.uuid, WINDOW_S)
        self.app.call_from_thread(self._show_history, samples)

    def _show_history(self, samples: list[GpuSample]) -> None:
        if not self.is_mounted:
            return
        for key, _, get in SERIES:
            values = [float(get(s)) for s in samples]
            self.query_one(f"#spark-{key}", Sparkline).data = values
            summary = f"{values[-1]:.0f} (max {max(values):.0f})" if values else "collecting…"
            self.query_one(f"#spark-{key}-now", Static).update(summary)
