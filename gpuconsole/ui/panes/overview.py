"""The Overview pane: the whole fleet on one screen, and what it costs right now."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical

from gpuconsole.core.money.costs import gpu_price_per_hour, idle_cost_per_hour
from gpuconsole.model.per_reading import PerReading
from gpuconsole.model import (
    FleetSnapshot,
    Gpu,
    Instance,
    JobState,
    Market,
    MigMode,
    Severity,
    SourceKind,
    SourceState,
)
from gpuconsole.ui.format import bar, money
from gpuconsole.ui.palette import Palette
from gpuconsole.ui.panes.job_rows import JobTally
from gpuconsole.ui.panes.base import Pane, status_text
from gpuconsole.ui.widgets.text_view import TextView

DEMO_KEY = "d"  # the app's binding for switching to the demo (lower case: shift+d does nothing)


def _lines(lines: list[Text]) -> Text:
    joined = Text("\n").join(lines)
    joined.no_wrap = True
    joined.overflow = "ellipsis"
    return joined


def _line(*parts: tuple[str, object] | str) -> Text:
    out = Text(no_wrap=True, overflow="ellipsis")
    for part in parts:
        if isinstance(part, tuple):
            out.append(part[0], part[1])  # type: ignore[arg-type]
        else:
            out.append(part)
    return out


class GpuTally:
    """A reading's GPUs counted for the card (busy, MIG slices in use, mean utilization, what
    the idle ones cost): counted once per reading of the GPUs and the instances pricing them,
    not on every frame (a big fleet has 7,600 GPUs)."""

    def __init__(self, gpus: tuple[Gpu, ...], instances: tuple[Instance, ...]) -> None:
        self.instances = instances
        self.busy = sum(1 for g in gpus if g.busy)
        slices = [s for g in gpus if g.mig_mode is MigMode.ENABLED for s in g.mig_slices]
        self.slices, self.slices_used = len(slices), sum(1 for s in slices if s.memory_used_mib > 0)
        self.mean = sum(g.utilization for g in gpus) / len(gpus) if gpus else 0.0
        self.idle = idle_cost_per_hour(gpus, gpu_price_per_hour(instances))

    @classmethod
    def of(cls, snap: FleetSnapshot) -> GpuTally:
        """The tally of ``snap``'s GPUs, counted again for a new reading of them or of its instances."""
        per_gpus = GPU_TALLIES(snap.gpus)
        tally = per_gpus.get(id(snap.instances))
        if tally is None or tally.instances is not snap.instances:
            tally = GpuTally(snap.gpus, snap.instances)
            per_gpus.clear()  # the instances of the readings before: not asked again
            per_gpus[id(snap.instances)] = tally
        return tally


# One reading only: the GPUs are new objects every reading, and keeping more would keep them.
GPU_TALLIES: PerReading[dict[int, GpuTally]] = PerReading(lambda _gpus: {}, keep=1)


def gpu_card(snap: FleetSnapshot, palette: Palette) -> Text:
    gpus = snap.gpus
    tally = GpuTally.of(snap)
    busy, mean, idle = tally.busy, tally.mean, tally.idle
    lines = [
        _line((f"{busy}", palette.ok), " busy · ", (f"{len(gpus) - busy}", palette.warn if len(gpus) - busy else palette.dim), f" idle / {len(gpus)}"),
        _line(f"MIG slices {tally.slices_used}/{tally.slices} in use"),
        _line((bar(mean, 6), palette.accent), f" {mean:.0f}% mean util"),
        idle_waste_line(snap, idle, palette),
    ]
    return _lines(lines)


def idle_waste_line(snap: FleetSnapshot, idle_now: float, palette: Palette) -> Text:
    """What idle billed GPUs cost: the waste of those idle for 30 min or more when there are any
    (per hour and lost so far), else what the GPUs idle at this moment cost per hour."""
    if snap.idle:
        per_hour = sum(g.per_hour for g in snap.idle)
        wasted = sum(g.wasted for g in snap.idle)
        return _line((f"{len(snap.idle)} idle≥30m ", palette.bad), (f"{money(per_hour)}/h", palette.bad),
                     " · ", (f"{money(wasted)} lost", palette.bad))
    return _line("idle & billed ", (f"{money(idle_now)}/h", palette.bad if idle_now else palette.dim))


def jobs_card(snap: FleetSnapshot, palette: Palette) -> Text:
    tally = JobTally.of(snap.jobs)
    counts, waiting_gpus = tally.counts, tally.waiting_gpus
    suspended = sum(1 for c in snap.cronjobs if c.suspended)
    lines = [
        _line((f"{counts[JobState.RUNNING]}", palette.ok), " running · ", (f"{counts[JobState.PENDING]}", palette.warn), " pending"),
        _line((f"{counts[JobState.FAILED]}", palette.bad if counts[JobState.FAILED] else palette.dim), f" failed · {counts[JobState.SUCCEEDED]} done"),
        _line(f"{waiting_gpus} GPUs waited for"),
        _line(f"{len(snap.cronjobs)} cronjobs, {suspended} susp."),
    ]
    return _lines(lines)


def instances_card(snap: FleetSnapshot, palette: Palette) -> Text:
    billed = [i for i in snap.instances if i.bills_now]  # a stopped one its cloud still bills counts
    up = [i for i in billed if i.state.billed]  # pending, running or stopping: as the Instances pane counts
    spot = sum(1 for i in up if i.market is Market.SPOT)
    gpus = sum(i.gpus for i in billed)
    stopped_billed = len(billed) - len(up)  # an Azure VM powered off but still allocated
    off = len(snap.instances) - len(billed)
    last = _line(f"{off} stopped or ended")
    if stopped_billed:
        last = _line((f"{stopped_billed} stopped, still billed", palette.bad), f" · {off} off" if off else "")
    lines = [
        _line((f"{len(up) - spot}", palette.ok), " on-demand · ", (f"{spot}", palette.accent), " spot"),
        _line(f"{gpus} GPUs billed"),
        _line("burning ", (f"{money(snap.burn_per_hour)}/h", palette.strong)),
        last,
    ]
    return _lines(lines)


def spend_card(snap: FleetSnapshot, palette: Palette) -> Text:
    lines = [_line("today ", (money(snap.spend_today), palette.strong), " · month ", (money(snap.spend_month), palette.strong))]
    monthly = [b for b in snap.budgets if b.budget.period.value == "monthly" and b.budget.scope == "all"]
    if monthly:
        b = monthly[0]
        style = palette.bad if b.percent >= 100 else palette.warn if b.percent >= 80 else palette.ok
        lines.append(_line(f"{b.budget.name} ", (bar(b.percent, 10), style), (f" {b.percent:.0f}%", style), f" of {money(b.budget.amount)}"))
        forecast = 100.0 * b.forecast / b.budget.amount if b.budget.amount else 0.0
        lines.append(_line("month-end forecast ", (money(b.forecast), palette.bad if forecast >= 100 else palette.strong), f" ({forecast:.0f}%)"))
    else:
        lines.append(_line(("no fleet budget defined", palette.dim)))
    if snap.billed_month is not None:
        lines.append(_line("billed ", (money(snap.billed_month), palette.strong), (f" ({snap.billed_note})", palette.dim)))
    if snap.day_difference:
        lines.append(_line(("vs bill ", palette.dim), snap.day_difference))
    if snap.spend_basis:
        lines.append(_line((f"spend: {snap.spend_basis}", palette.dim)))
    if snap.spend_left_out:  # another currency, never added to the dollars without [money] rates
        lines.append(_line((f"totals {snap.spend_left_out}", palette.warn)))
    return _lines(lines)


def sources_card(snap: FleetSnapshot, palette: Palette, sender: str | None = None) -> Text:
    """Each source's state, and who sends the alerts to the ``[[notify]]`` channels (when any)."""
    lines = [status_text(s, snap.taken_at, palette, short=True) for s in snap.sources]
    for alert in snap.alerts:  # a notification channel that keeps failing is a source gone bad too
        if alert.source.startswith("notify:"):
            lines.append(_line(("● ", palette.bad), f"notify {alert.source.split(':', 1)[1]} · ", ("failing", palette.bad)))
    if sender is not None:
        lines.append(_line(("● ", palette.ok), f"alerts sent by {sender}") if sender else
                     _line(("● ", palette.warn), "alerts: ", ("no sender runs", palette.warn),
                           " (gpuconsole notify run)"))
    return _lines(lines)


def alerts_card(snap: FleetSnapshot, palette: Palette) -> Text:
    if snap.sources and all(s.state is SourceState.UNCONFIGURED for s in snap.sources):
        return _lines([
            _line("No backend is set up yet: each pane says what is missing and how to set it up."),
            _line("Press ", (DEMO_KEY, palette.accent), " to try the console on a simulated GPU cloud."),
        ])
    if not snap.alerts:
        return _line(("no active alerts", palette.dim))
    marks = {Severity.CRITICAL: ("!!", palette.bad), Severity.WARNING: ("! ", palette.warn), Severity.INFO: ("i ", palette.accent)}
    lines = []
    for alert in snap.alerts:
        mark, style = marks[alert.severity]
        lines.append(_line((mark + " ", style), alert.message))
    return _lines(lines)


CARDS = {
    "gpus": ("GPUs", gpu_card),
    "jobs": ("Jobs", jobs_card),
    "instances": ("Instances", instances_card),
    "spend": ("Spend", spend_card),
    "sources": ("Sources", sources_card),
    "alerts": ("Alerts", alerts_card),
}


ROWS = (("gpus", "jobs", "instances"), ("spend", "sources"))
CARD_SOURCES = {"gpus": SourceKind.GPUS, "jobs": SourceKind.JOBS, "instances": SourceKind.CLOUD, "spend": SourceKind.CLOUD}


class AlertsCard(TextView, can_focus=True):
    """The alerts card: it holds the focus on the Overview, so the pane's own keys are the ones
    the footer and ``?`` show (the Overview has no table, so no ``/``)."""

    DEFAULT_CSS = """
    AlertsCard:focus {
        background-tint: 0%;
    }
    """


class OverviewPane(Pane):
    """Fleet totals, spend against budget, alerts and the health of every source."""

    kind = None
    filterable = False

    # The app binds / to "filter the current table"; the Overview has none, so here the key is
    # taken (hidden from the footer and the help) and says where the tables are.
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("slash", "no_filter", "", show=False),
    ]

    def compose_body(self) -> ComposeResult:
        with Vertical(id="overview-body"):
            for row in ROWS:
                with Horizontal(classes="card-row"):
                    yield from (self._card(key) for key in row)
            yield self._card("alerts")

    @staticmethod
    def _card(key: str) -> TextView:
        card = (AlertsCard if key == "alerts" else TextView)(id=f"card-{key}", classes="card")
        card.border_title = CARDS[key][0]
        return card

    def on_mount(self) -> None:
        # Pane.on_mount runs too. The first pane on screen takes the focus, so its keys are live.
        self.call_after_refresh(self._focus_if_nothing_is)

    def _focus_if_nothing_is(self) -> None:
        if self.app.focused is None and self.display:
            self.focus_body()

    def focus_body(self) -> None:
        if found := self.query("#card-alerts"):  # not yet composed: nothing to focus
            found.first().focus()

    def action_no_filter(self) -> None:
        self.app.notify("The Overview has no table to filter: 2-6 open the panes that have one.", timeout=3)

    def summary(self, snapshot: FleetSnapshot) -> str:
        return "demo: simulated GPU cloud" if snapshot.demo else ""

    def render_snapshot(self, snapshot: FleetSnapshot, palette: Palette) -> None:
        missing = {s.kind for s in snapshot.sources if s.state is SourceState.UNCONFIGURED}
        # nothing read yet: its counts are unknown, not zero
        waiting = {s.kind: s for s in snapshot.sources if s.state is SourceState.CONNECTING and s.updated_at is None}
        for key, (_, render) in CARDS.items():
            kind = CARD_SOURCES.get(key)
            if kind in missing:
                content = not_set_up(kind, palette)
            elif kind in waiting:
                content = waiting_card(waiting[kind].describe(snapshot.taken_at), palette)
            elif key == "sources":
                content = sources_card(snapshot, palette, getattr(self.core, "alert_sender", None))
            else:
                content = render(snapshot, palette)
            self.query_one(f"#card-{key}", TextView).show(content)


def waiting_card(words: str, palette: Palette) -> Text:
    """A card whose source has not answered yet: what it waits for, never a row of zeros."""
    return _lines([_line(("waiting for a first answer", palette.warn)), _line((words, palette.dim))])


def not_set_up(kind: SourceKind | None, palette: Palette) -> Text:
    return _lines([
        _line(("not set up", palette.warn)),
        _line(("see its pane for how", palette.dim)),
        _line("press ", (DEMO_KEY, palette.accent), " for the demo"),
    ])
