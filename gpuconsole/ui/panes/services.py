"""The Services pane: inference services grouped by namespace, by what they cost an hour.

Each namespace is a header row (its services, GPUs and $/h), then its services, most costly
first (the core's order; ``>`` / ``<`` / F6 sort inside each namespace). The line under the
table spells out the selected service: ``vllm-llama3 in ns chat: 4/4 ready on 8 H100, p99
212 ms (SLO 300 ms ✓), 1,840 tok/s, $0.94 per 1M tokens, $58.98/h``. A figure nobody knows is
"–", never 0. Every change goes through :mod:`gpuconsole.ui.panes.service_actions`.
"""

from __future__ import annotations

from collections import defaultdict
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType

from gpuconsole.core.ops.actions import ActionKind
from gpuconsole.model import FleetSnapshot, Service, SourceKind
from gpuconsole.ui import service_words as words
from gpuconsole.ui.format import money
from gpuconsole.ui.palette import Palette
from gpuconsole.ui.panes.base import Pane
from gpuconsole.ui.widgets.cells import Row, right, text
from gpuconsole.ui.widgets.live_table import LiveTable
from gpuconsole.ui.widgets.sorting import cell_order, ordered
from gpuconsole.ui.widgets.text_view import TextView
from gpuconsole.ui.widgets.virtual_table import VirtualTable

HEADER = "ns:"  # the key prefix of a namespace's header row
# The ten columns that fit 80 columns, then what a wide terminal shows too.
COLUMNS = [
    ("NAME", "name", 12),
    ("KIND", "kind", 6),
    ("READY", "ready", 5),
    ("GPUS", "gpus", 6),
    ("RPS", "rps", 5),
    ("P99", "p99", 5),
    ("TOK/S", "tokens", 5),
    ("$/1M", "per_million", 6),
    ("$/H", "per_hour", 6),
    ("SLO", "slo", 3),
    ("P50", "p50", 6),
    ("TTFT", "ttft", 6),
    ("QUEUE", "queue", 5),
    ("ERR", "errors", 5),
    ("KV", "kv", 4),
    ("$/1K REQ", "per_1k", 8),
    ("METRICS", "metrics", 7),
    ("ROLLOUT", "rollout", 11),
    ("IMAGE", "image", None),
]
# Only the image gives: the ten columns of 80 columns keep their widths, the rest scroll.
GIVES = {"image": 8}


def service_cells(s: Service, palette: Palette) -> tuple[object, ...]:
    slo = words.slo_mark(s.slo)
    slo_style = palette.ok if slo == "✓" else palette.bad if slo == "✗" else palette.dim
    ready_style = palette.warn if s.replicas_ready < s.replicas_desired else None
    return (
        text(s.name),
        text(words.kind_words(s, short=True)),
        right(words.ready_words(s), ready_style),
        text(words.gpu_words(s, short=True)),
        right(words.rate(s.rps)),
        right(words.short_latency(s.p99_ms)),
        right(words.rate(s.tokens_per_s)),
        right(words.unit_price(s.usd_per_million_tokens)),
        right(words.per_hour(s.usd_per_hour)),
        text(slo, slo_style),
        right(words.short_latency(s.p50_ms)),
        right(words.short_latency(s.ttft_ms)),
        right(words.count(s.queue_depth)),
        right(words.percent(s.error_ratio)),
        right(words.percent(s.kv_cache, 0)),
        right(words.unit_price(s.usd_per_1k_requests)),
        text(s.metrics_source or "none", None if s.metrics_source else palette.dim),
        text(s.rollout.value),
        text(s.image or words.UNKNOWN),
    )


def header_cells(namespace: str, services: list[Service], palette: Palette) -> tuple[object, ...]:
    """A namespace's row: its name and what it costs an hour (``+`` where a service's cost is
    unknown, ``–`` when none is known)."""
    costs = [s.usd_per_hour for s in services]
    cost = money(sum(c for c in costs if c is not None)) + ("+" if None in costs else "") if any(
        c is not None for c in costs) else words.UNKNOWN
    cells: list[object] = [text("") for _ in COLUMNS]
    cells[0] = text(namespace, palette.strong)
    cells[8] = right(cost, palette.strong)
    return tuple(cells)


class ServicesPane(Pane):
    """Inference services: GPU Deployments, StatefulSets and InferenceServices with their
    latency, throughput and cost.

    | key | does |
    |---|---|
    | enter | open the service: charts of the last hour, replicas, HPA, events |
    | s | scale the selected service to N replicas (asks for N, then y/n) |
    | R | rollout restart (asks y/n) |
    | l | the log of its first replica |
    | D | describe it (YAML and events) |
    """

    kind = SourceKind.SERVICES
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("s", "scale", "Scale", tooltip="scale the service to N replicas: asks N, then y/n with what it costs"),
        Binding("R", "restart", "Restart", tooltip="rollout restart: every replica replaced (asks y/n)"),
        Binding("l", "logs", "Logs", show=False, tooltip="the log of its first ready replica"),
        Binding("D", "describe", "Describe", show=False, tooltip="the service as YAML, with its events"),
    ]

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)
        self._placed = False

    def compose_body(self) -> ComposeResult:
        yield LiveTable(COLUMNS, id="service-table", gives=GIVES, orders_rows=False)

    def summary(self, snapshot: FleetSnapshot) -> str:
        services = snapshot.services
        if not services:
            return ""
        known = [s.usd_per_hour for s in services if s.usd_per_hour is not None]
        namespaces = len({s.namespace for s in services})
        cost = f" · {money(sum(known))}/h" if known else ""
        return f"{len(services)} services in {namespaces} namespaces{cost}"

    def render_snapshot(self, snapshot: FleetSnapshot, palette: Palette) -> None:
        table = self.query_one(LiveTable)
        groups: dict[str, list[Service]] = defaultdict(list)
        for s in snapshot.services:  # the core's order: namespaces by $/h, then each one's services
            if self.matches(s.namespace, s.name, s.kind.value, s.image, s.metrics_source, s.gpu_model, s.mig_profile):
                groups[s.namespace].append(s)
        rows: list[Row] = []
        for namespace, services in groups.items():
            cells = {s.key: service_cells(s, palette) for s in services}
            keys = list(cells)
            if table.sort_column is not None:
                index = [key for _label, key, _w in COLUMNS].index(table.sort_column)
                keys = ordered(keys, lambda k: cell_order(cells[k][index]), table.sort_descending)
            rows.append((HEADER + namespace, header_cells(namespace, services, palette)))
            rows += [(key, cells[key]) for key in keys]
        table.sync(rows)
        if not self._placed and len(rows) > 1:  # the first rows: the cursor on the first service
            self._placed = True
            table.move_cursor(row=1)

    def on_virtual_table_sort_changed(self, event: VirtualTable.SortChanged) -> None:
        self.redraw()

    def detail(self, table_id: str, key: str, snapshot: FleetSnapshot, palette: Palette) -> Text | None:
        if key.startswith(HEADER):
            namespace = key.removeprefix(HEADER)
            services = [s for s in snapshot.services if s.namespace == namespace]
            return Text(f"namespace {namespace}: {len(services)} service{'s' if len(services) != 1 else ''} "
                        "(enter on a service opens it)", style=palette.dim)
        service = self.service(key)
        if service is None:
            return None
        line = Text(words.summary(service))
        if not service.metrics_source:
            line.stylize(palette.warn, line.plain.find(words.NO_METRICS), line.plain.find(words.NO_METRICS)
                         + len(words.NO_METRICS))
        return line

    def update_detail(self) -> None:
        snap, palette = self.snapshot, self.palette
        if snap is not None and palette is not None and not snap.services:
            line = self.query_one(".row-detail", TextView)
            status = snap.source(SourceKind.SERVICES)
            why = status.describe(snap.taken_at) if status is not None else "no services source"
            line.display = True
            line.show(Text(f"No inference services (GPU Deployments, StatefulSets or InferenceServices) to show: "
                           f"the services source is {why}.", style=palette.dim))
            self.update_access()
            return
        super().update_detail()

    # ------------------------------------------------------------------ the selection
    def service(self, key: str | None) -> Service | None:
        snap = self.snapshot
        if key is None or snap is None or key.startswith(HEADER):
            return None
        return next((s for s in snap.services if s.key == key), None)

    def selected(self) -> Service | None:
        return self.service(self.query_one(LiveTable).selected_key)

    def guarded_kind(self, action: str, parameters: tuple[object, ...]) -> tuple[ActionKind, str | None] | None:
        kind = {"scale": ActionKind.SCALE_SERVICE, "restart": ActionKind.RESTART_SERVICE}.get(action)
        if kind is None:
            return None
        chosen = self.selected()
        return kind, chosen.namespace if chosen is not None else None

    def _chosen(self, verb: str) -> Service | None:
        chosen = self.selected()
        if chosen is None:
            self.app.notify(f"Select a service to {verb} (a namespace's row holds none).", severity="warning")
        return chosen

    # ------------------------------------------------------------------ keys
    def on_virtual_table_row_selected(self, event: VirtualTable.RowSelected) -> None:
        """``enter``: the service's own view."""
        event.stop()
        chosen = self._chosen("open")
        if chosen is not None:
            from gpuconsole.ui.panes.service_view import ServiceScreen

            self.app.push_screen(ServiceScreen(chosen.key))

    def action_scale(self) -> None:
        from gpuconsole.ui.panes.service_actions import ask_scale

        chosen = self._chosen("scale")
        if chosen is not None:
            ask_scale(self, chosen)

    def action_restart(self) -> None:
        from gpuconsole.ui.panes.service_actions import ask_restart

        chosen = self._chosen("restart")
        if chosen is not None:
            ask_restart(self, chosen)

    def action_logs(self) -> None:
        from gpuconsole.ui.panes.service_actions import open_logs

        chosen = self._chosen("read the log of")
        if chosen is not None:
            open_logs(self, chosen, None)

    def action_describe(self) -> None:
        from gpuconsole.ui.panes.service_actions import open_describe

        chosen = self._chosen("describe")
        if chosen is not None:
            open_describe(self, chosen)
