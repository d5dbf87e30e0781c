"""The Experiments pane: every experiment's progress, the arms of the selected one, $ per unit of work.

| key | does |
|---|---|
| enter | from the experiments to the selected one's arms (esc back) |
| n | start a new experiment from a file (TOML): type its path, enter |
| f | build a new experiment in a form (the file's keys, an example to change); ctrl+s starts it |
| s | start: follow the selected experiment's runs (a stopped one goes on) |
| x | stop the selected experiment and delete its live Jobs (asks first) |
| R | re-run the selected arm (its runs so far are set aside, still paid for) |
| e | export the selected experiment to CSV and JSON |
| c | use the selected arm in the cost calculator (speed and prices, with their source) |

The bar chart draws each arm's $ per unit of work (``█``) with its 95 % interval (``├─┤``) on one
scale. Everything that reads the cluster or the store runs in a worker; the pane only draws.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Input

from gpuconsole.core.ops.actions import ActionError
from gpuconsole.model import FleetSnapshot
from gpuconsole.ui.actions import Action, Confirm, run_action
from gpuconsole.ui.palette import Palette
from gpuconsole.ui.panes.base import Pane
from gpuconsole.ui.panes.experiment_chart import chart_text, dollars, number, progress_bar
from gpuconsole.ui.widgets.focus import focus_now
from gpuconsole.ui.widgets.cells import Row, right, text
from gpuconsole.ui.widgets.live_table import LiveTable
from gpuconsole.ui.widgets.text_view import TextView

if TYPE_CHECKING:  # SciPy loads with the first analysis, not with the app
    from gpuconsole.core.ops.experiments.analysis import Analysis
    from gpuconsole.core.ops.experiments.book import ExperimentBook, Progress

EXPERIMENT_COLUMNS = [
    ("EXPERIMENT", "name", 18),
    ("STATE", "state", 8),
    ("PROGRESS", "progress", 16),
    ("RUN", "running", 3),
    ("WAIT", "pending", 4),
    ("LOST", "lost", 4),
    ("SPENT", "spent", 9),
]
ARM_COLUMNS = [
    ("ARM", "arm", 22),
    ("RUNS", "runs", 4),
    ("MEDIAN", "median", 9),
    ("95% CI", "ci", 17),
    ("$/UNIT", "cost", 8),
    ("×CHEAP", "cheap", 6),
    ("×FAST", "fast", 6),
]
RELOAD_S = 2.0
PREPARE_AFTER_S = 3.0  # after the start has settled: read the experiments ahead of a first showing
FOLLOW_S = 0.5  # between two passes over a followed experiment in the demo
DEMO_STEP_S = 120.0  # simulated seconds per pass: an hour of benchmarks in 15 s


@dataclass(frozen=True, slots=True)
class Loaded:
    """What a load read: every experiment's progress and the selected one's analysis."""

    progress: tuple[Progress, ...]
    selected: str
    analysis: Analysis | None
    demo: bool


class ExperimentsPane(Pane):
    """Experiments: the list with progress, the arms table, the cost chart."""

    kind = None
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("n", "new", "New", tooltip="start a new experiment from a file (TOML): type its path, enter"),
        Binding("f", "form", "Form", show=False, tooltip="build a new experiment in a form (the file's keys), ctrl+s starts it"),
        Binding("s", "start", "Start", tooltip="follow the selected experiment's runs (a stopped one goes on)"),
        Binding("x", "stop", "Stop", tooltip="stop the selected experiment and delete its live Jobs"),
        Binding("R", "rerun", "Re-run", tooltip="run the selected arm's repeats again"),
        Binding("e", "export", "Export", tooltip="export the selected experiment to CSV and JSON"),
        Binding("c", "calculator", "Use in calculator",
                tooltip="fill the cost calculator's speed and price from the selected arm"),
    ]

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.loaded: Loaded | None = None
        self.note = ""
        self._loaded_at = 0.0
        self._prepared = False
        self._read_early = False
        self._followed: set[str] = set()
        self._follow_stop = threading.Event()

    def compose_body(self) -> ComposeResult:
        yield Input(placeholder="experiment file (TOML): path, enter to start; esc cancels", id="exp-file")
        yield LiveTable(EXPERIMENT_COLUMNS, id="exp-table")
        yield LiveTable(ARM_COLUMNS, id="exp-arms")
        yield TextView(id="exp-chart")
        yield TextView(id="exp-verdicts")

    def on_mount(self) -> None:
        super().on_mount()
        self.query_one("#exp-file", Input).display = False

    def on_unmount(self) -> None:
        self._follow_stop.set()

    @property
    def book(self) -> ExperimentBook:
        from gpuconsole.core.fleet.experiment_door import experiment_book

        return experiment_book(self.core)

    # ------------------------------------------------------------------ rendering
    def summary(self, snapshot: FleetSnapshot) -> Text | str:
        if self.loaded is None:
            return "experiments · loading…"
        words = f"experiments · {len(self.loaded.progress)}"
        analysis = self.loaded.analysis
        cost = next((v for v in analysis.verdicts if v.criterion == "cost"), None) if analysis else None
        if cost is not None and cost.winner:
            arm = analysis.arm(cost.winner) if analysis else None
            sure = "significant" if cost.significant else "not significant yet"
            words += f" · cheapest: {arm.arm.title if arm else cost.winner} ({sure})"
        if self._followed:
            words += f" · following {', '.join(sorted(self._followed))}"
        return words + (f" · {self.note}" if self.note else "")

    def prepare(self, snapshot: FleetSnapshot) -> None:
        """Not on screen yet: read the experiments once, off the UI thread (their statistics
        import NumPy, a tenth of a second), a few seconds after the start has settled (not beside
        the other panes' own preparing), so the pane's first showing has them already."""
        if not self._prepared:
            self._prepared = True
            self.set_timer(PREPARE_AFTER_S, self._read_ahead)

    def _read_ahead(self) -> None:
        if self.loaded is None and not self._loaded_at:  # not shown meanwhile (that reads them)
            self._loaded_at = time.monotonic()
            self._read_early = True
            self.load("")

    def render_snapshot(self, snapshot: FleetSnapshot, palette: Palette) -> None:
        if self._read_early and self.loaded is not None:  # shown as read ahead; read again in RELOAD_S
            self._read_early = False
            self._loaded_at = time.monotonic()
        if time.monotonic() - self._loaded_at >= RELOAD_S:
            self._loaded_at = time.monotonic()
            self.load(self.selected_name())
        loaded = self.loaded
        if loaded is None:
            return
        state_style = {"running": palette.accent, "done": palette.ok, "budget": palette.warn,
                       "stopped": palette.dim, "stopping": palette.warn}
        rows: list[Row] = [
            (p.name, (text(p.name), text(p.state, state_style.get(p.state)), text(progress_bar(p)),
                      right(str(p.running)), right(str(p.pending)),
                      right(str(p.lost), palette.warn if p.lost else None), right(dollars(p.spent))))
            for p in loaded.progress if self.matches(p.name, p.state)
        ]
        self.query_one("#exp-table", LiveTable).sync(rows)
        self._render_analysis(loaded.analysis, palette)

    def _render_analysis(self, analysis: Analysis | None, palette: Palette) -> None:
        arms = self.query_one("#exp-arms", LiveTable)
        chart = self.query_one("#exp-chart", TextView)
        verdicts = self.query_one("#exp-verdicts", TextView)
        if analysis is None:
            arms.sync([])
            chart.show(Text("no experiment yet: n starts one from a file", palette.dim))
            verdicts.show(Text(""))
            return
        arms.set_labels({"cost": f"$/{analysis.spec.work.per[:6] or 'run'}".upper(),
                         "median": analysis.spec.metric.unit[:9].upper()})
        arms.sync([
            (a.arm.key, (text(a.arm.title), right(f"{a.runs}" + (f"+{a.failed}✗" if a.failed else "")),
                         right(number(a.median)), right(f"{number(a.median_ci[0])}–{number(a.median_ci[1])}"
                                                      if a.has_results else "-"),
                         right(dollars(a.cost_per_work)), right(number(a.to_cheapest, 2)), right(number(a.to_fastest, 2))))
            for a in analysis.arms
        ])
        chart.show(chart_text(analysis, max(self.size.width - 2, 40), palette))
        lines = Text()
        for verdict in analysis.verdicts:
            lines.append("winner on ", palette.dim)
            lines.append(verdict.line() + "\n", palette.ok if verdict.significant else None)
        verdicts.show(lines)

    def detail(self, table_id: str, key: str, snapshot: FleetSnapshot, palette: Palette) -> Text | None:
        analysis = self.loaded.analysis if self.loaded else None
        if table_id != "exp-arms" or analysis is None:
            return None
        a = analysis.arm(key)
        if a is None:
            return None
        return Text(f"{a.arm.title}: {dollars(a.price_per_hour)}/h · on-demand {dollars(a.on_demand_per_work)} · "
                    f"spot {dollars(a.spot_per_work)} per {analysis.spec.work.label} · spent {dollars(a.spent)}",
                    style=palette.strong)

    # ------------------------------------------------------------------ loading
    def selected_name(self) -> str:
        key = self.query_one("#exp-table", LiveTable).selected_key
        if key:
            return key
        return self.loaded.selected if self.loaded else ""

    def selected_arm(self) -> str | None:
        return self.query_one("#exp-arms", LiveTable).selected_key

    def on_virtual_table_row_highlighted(self, event: Any) -> None:
        if getattr(event.data_table, "id", "") == "exp-table" and self.loaded is not None:
            name = self.selected_name()
            if name and name != self.loaded.selected:
                self.load(name)
        super().on_virtual_table_row_highlighted(event)

    @work(thread=True, exclusive=True, group="experiments-load", exit_on_error=False, description="read experiments")
    def load(self, selected: str) -> None:
        try:
            book = self.book
            rows = book.rows()
            progress = tuple(book.progress(r.name) for r in rows)
            names = [p.name for p in progress]
            name = selected if selected in names else (names[0] if names else "")
            analysis = book.analysis(name) if name else None
        except (ActionError, OSError) as exc:
            self.app.call_from_thread(self._say, f"cannot read experiments: {exc}")
            return
        demo = self.core.services.demo
        self.app.call_from_thread(self._loaded, Loaded(progress, name, analysis, demo))

    def _loaded(self, loaded: Loaded) -> None:
        self.loaded = loaded
        if not loaded.demo:
            for p in loaded.progress:  # a console follows what it runs
                if p.state == "running" and p.name not in self._followed:
                    self.follow(p.name)
        self.redraw()

    def _say(self, words: str) -> None:
        self.note = words
        self.app.notify(words)
        self.redraw()

    def reload(self) -> None:
        self._loaded_at = 0.0
        self.redraw()

    # ------------------------------------------------------------------ following
    def follow(self, name: str) -> None:
        self._followed.add(name)
        self._follow(name)

    @work(thread=True, group="experiments-follow", exit_on_error=False, description="follow an experiment")
    def _follow(self, name: str) -> None:
        book = self.book
        demo = self.core.services.demo
        try:
            runner = book.runner(name)
            while not self._follow_stop.is_set():
                if not runner.tick():
                    break
                if demo:
                    book.sleep(DEMO_STEP_S)  # the simulated bench's clock moves on, sped up
                    self._follow_stop.wait(FOLLOW_S)
                else:
                    self._follow_stop.wait(book.interval)
                self.app.call_from_thread(self.reload)
        except ActionError as exc:
            self.app.call_from_thread(self._say, f"{name}: {exc}")
        finally:
            self._followed.discard(name)
            self.app.call_from_thread(self.reload)

    # ------------------------------------------------------------------ keys
    def focus_body(self) -> None:
        if found := self.query("#exp-table"):  # not yet composed: nothing to focus
            focus_now(found.first())

    def on_virtual_table_row_selected(self, event: Any) -> None:
        if getattr(event.data_table, "id", "") == "exp-table":
            focus_now(self.query_one("#exp-arms", LiveTable))

    def leave_view(self) -> None:
        """Esc: close the file field, or go back from the arms to the experiments."""
        self.query_one("#exp-file", Input).display = False
        self.focus_body()

    def action_new(self) -> None:
        field = self.query_one("#exp-file", Input)
        field.display = True
        focus_now(field)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id != "exp-file":
            super().on_input_submitted(event)
            return
        event.stop()
        self._start_file(event.value.strip())

    @work(thread=True, group="experiments-start", exit_on_error=False, description="start an experiment")
    def _start_file(self, path: str) -> None:
        from gpuconsole.core.ops.experiments.spec import SpecError, parse_file

        try:
            spec = parse_file(path)
            with open(path, encoding="utf-8") as handle:
                source = handle.read()
            self.book.start(spec, source)
        except (SpecError, ActionError, OSError) as exc:
            self.app.call_from_thread(self._say, str(exc))
            return
        self.app.call_from_thread(self._started, spec.name)

    def action_form(self) -> None:
        from gpuconsole.ui.screens.experiment_form import ExperimentFormScreen

        def built(text: str | None) -> None:
            if text is not None:
                self._start_text(text)

        self.app.push_screen(ExperimentFormScreen(), built)

    @work(thread=True, group="experiments-start", exit_on_error=False, description="start an experiment")
    def _start_text(self, text: str) -> None:
        from gpuconsole.core.ops.experiments.spec import SpecError, parse_text

        try:
            spec = parse_text(text)
            self.book.start(spec, text)
        except (SpecError, ActionError) as exc:
            self.app.call_from_thread(self._say, str(exc))
            return
        self.app.call_from_thread(self._started, spec.name)

    def _started(self, name: str) -> None:
        self.query_one("#exp-file", Input).display = False
        self.focus_body()
        self._say(f"started {name}")
        self.follow(name)

    def action_start(self) -> None:
        name = self.selected_name()
        if not name:
            return
        if name in self._followed:
            self._say(f"{name} is being followed already")
            return
        self._resume(name)

    @work(thread=True, group="experiments-start", exit_on_error=False, description="resume an experiment")
    def _resume(self, name: str) -> None:
        book = self.book
        row = book.store.experiment(name)
        if row is not None and row.state in ("stopped", "budget"):
            book.store.set_state(name, "running")
        self.app.call_from_thread(self.follow, name)
        self.app.call_from_thread(self._say, f"following {name}")

    def action_stop(self) -> None:
        name = self.selected_name()
        if not name:
            return
        book = self.book

        def stop(_answer: str | None) -> str:
            problems = book.stop(name)
            return f"stopped {name}" + (f": {problems[0]}" if problems else "")

        confirm = Confirm("Stop experiment", f"Stop {name} and delete its live Jobs? (y/n)",
                          "Finished runs are kept; the live ones end now.")
        run_action(self, Action(f"stop {name}", stop, confirm=confirm, prefix=False, group="experiments-stop",
                                say=self._say, refresh=False))

    def action_rerun(self) -> None:
        name, arm = self.selected_name(), self.selected_arm()
        if name and arm:
            self._rerun(name, arm)

    @work(thread=True, group="experiments-start", exit_on_error=False, description="re-run an arm")
    def _rerun(self, name: str, arm: str) -> None:
        try:
            self.book.rerun_arm(name, arm)
        except ActionError as exc:
            self.app.call_from_thread(self._say, str(exc))
            return
        self.app.call_from_thread(self._say, f"re-running {arm} of {name}")
        if name not in self._followed:
            self.app.call_from_thread(self.follow, name)

    @work(thread=True, group="experiments-export", exit_on_error=False, description="export an experiment")
    def action_export(self) -> None:
        import io
        import json

        from gpuconsole.core.ops.experiments.export import analysis_json, write_csv
        from gpuconsole.core.paths import demo_exports_dir, state_dir, write_private

        name = self.selected_name()
        if not name:
            return
        try:
            book = self.book
            analysis, progress = book.analysis(name), book.progress(name)
            folder = demo_exports_dir() if self.core.services.demo else state_dir() / "exports"
            buffer = io.StringIO()
            write_csv(analysis, buffer)
            write_private(folder / f"experiment-{name}.csv", buffer.getvalue())
            write_private(folder / f"experiment-{name}.json", json.dumps(analysis_json(analysis, progress), indent=2))
        except (ActionError, OSError) as exc:
            self.app.call_from_thread(self._say, f"export failed: {exc}")
            return
        self.app.call_from_thread(self._say, f"exported to {folder}/experiment-{name}.csv and .json")

    def action_calculator(self) -> None:
        from gpuconsole.core.money.calculator import PRESETS
        from gpuconsole.core.ops.experiments.measured import NotMeasured, measured_inputs
        from gpuconsole.ui.screens.calculator import DEFAULT_PRESET, CostCalculatorScreen

        analysis = self.loaded.analysis if self.loaded else None
        arm = self.selected_arm() or (analysis.arms[0].arm.key if analysis and analysis.arms else None)
        if analysis is None or arm is None:
            return
        try:
            inputs = measured_inputs(analysis, arm, PRESETS[DEFAULT_PRESET].inputs, self.book.prices)
        except NotMeasured as exc:
            self._say(str(exc))
            return
        self.app.push_screen(CostCalculatorScreen(DEFAULT_PRESET, measured=inputs))

