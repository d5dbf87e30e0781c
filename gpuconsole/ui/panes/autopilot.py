"""The Autopilot pane: each rule, its live figures against its thresholds, what it last decided,
when it may act next, and who holds the lease."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType

from gpuconsole.core.ops.actions import ActionError, ActionKind, ActionResult
from gpuconsole.core.ops.autopilot.rules import RuleError
from gpuconsole.model import AutopilotRuleStatus, FleetSnapshot, SourceKind
from gpuconsole.ui.actions import Action, run_action
from gpuconsole.ui.palette import Palette
from gpuconsole.ui.panes.base import Pane
from gpuconsole.ui.screens.rule_form import RuleForm
from gpuconsole.ui.widgets.cells import Row, text
from gpuconsole.ui.widgets.live_table import LiveTable

if TYPE_CHECKING:
    from gpuconsole.core.fleet.services import Services

COLUMNS = [
    ("RULE", "name", 12),
    ("KIND", "kind", 12),
    ("NOW vs THRESHOLDS", "now", 21),
    ("LAST", "last", 15),
    ("NEXT", "next", 8),
]
ACTS = frozenset({"launch", "stop", "terminate", "relaunch"})
SHORT = {"gpu_util": "util", "gpu_mem": "mem", "pending_gpus": "pend.gpus", "pending_jobs": "pend.jobs",
         "idle_gpus": "idle"}


def duration_text(seconds: float) -> str:
    """``2m10s``, ``45s``, ``1h05m``: short enough for a table cell."""
    s = int(round(seconds))
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    if s >= 60:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s}s"


def now_cell(rule: AutopilotRuleStatus, palette: Palette) -> Text:
    """``util 58 >80·10m · pend.gpus 4 >0``: each figure the rule compares, beside its threshold."""
    cell = Text(no_wrap=True, overflow="ellipsis")
    figures = dict(rule.figures)
    if not rule.thresholds:
        cell.append(rule.condition, palette.dim)
        return cell
    seen: set[str] = set()
    for figure, held in rule.thresholds:
        if cell.plain:
            cell.append(" · ", palette.dim)
        if figure not in seen:
            value = figures.get(figure)
            cell.append(f"{SHORT.get(figure, figure)} ")
            cell.append("?" if value is None else f"{value:.0f}", palette.strong if value is not None else palette.warn)
            seen.add(figure)
        cell.append(f" {held.replace(' for ', '·')}", palette.dim)
    return cell


def last_cell(rule: AutopilotRuleStatus, now: float, palette: Palette) -> Text:
    if rule.acted_at is not None:
        verb = rule.acted.split(":", 1)[0] or "acted"
        return text(f"{verb} {duration_text(max(0.0, now - rule.acted_at))}", palette.accent)
    style = palette.warn if rule.decision in ("wait", "blocked", "paused") else palette.dim
    return text(rule.decision or "—", style)


def next_cell(rule: AutopilotRuleStatus, palette: Palette) -> Text:
    if rule.paused:
        return text("paused", palette.bad)
    if rule.cooldown_left_s > 0:
        return text(f"in {duration_text(rule.cooldown_left_s)}", palette.warn)
    return text("ready", palette.ok)


class AutopilotPane(Pane):
    """The autopilot's rules (config file, database, or the demo's) and their decisions.

    | key | does |
    |---|---|
    | a | add a rule (each field checked as you type) |
    | p | pause the selected rule, or resume it |
    """

    kind = None

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("a", "add_rule", "Add rule"),
        Binding("p", "toggle_pause", "Pause/resume"),
    ]

    def guarded_kind(self, action: str, parameters: tuple[object, ...]) -> tuple[ActionKind, str | None] | None:
        kinds = {"add_rule": ActionKind.RULE_ADD, "toggle_pause": ActionKind.RULE_PAUSE}
        return (kinds[action], None) if action in kinds else None

    def compose_body(self) -> ComposeResult:
        yield LiveTable(COLUMNS, id="rule-table")

    def summary(self, snapshot: FleetSnapshot) -> Text | str:
        line = Text()
        cloud = snapshot.source(SourceKind.CLOUD)
        if cloud is not None:
            line.append(f"cloud {cloud.state.value} · ")
        if not snapshot.autopilot:
            line.append("no rules: add [[rules]] to the config file, or press a")
            return line
        acting = sum(1 for r in snapshot.autopilot if r.decision in ACTS or r.acted_at is not None)
        line.append(f"{len(snapshot.autopilot)} rules · {acting} acted · lease: ")
        line.append(snapshot.autopilot_leader or "nobody (standing by)")
        return line

    def render_snapshot(self, snapshot: FleetSnapshot, palette: Palette) -> None:
        now = snapshot.taken_at
        rows: list[Row] = [
            (r.name, (text(r.name), text(r.kind), now_cell(r, palette), last_cell(r, now, palette), next_cell(r, palette)))
            for r in snapshot.autopilot if self.matches(r.name, r.kind, r.scope, r.decision)
        ]
        self.query_one("#rule-table", LiveTable).sync(rows)

    def detail(self, table_id: str, key: str, snapshot: FleetSnapshot, palette: Palette) -> Text | None:
        rule = next((r for r in snapshot.autopilot if r.name == key), None)
        if rule is None:
            return None
        line = Text(f"{rule.name} ({rule.scope}, {rule.origin}): ", style=palette.strong)
        line.append(rule.condition)
        if rule.decision:
            line.append(f"\n{rule.decision}: {rule.reason}")
        if rule.paused:
            line.append(f" — {rule.paused_reason}", palette.bad)
        return line

    # ------------------------------------------------------------------ actions
    def action_add_rule(self) -> None:
        def added(table: dict | None) -> None:
            if table is not None:
                self._rule_call(lambda services: services.autopilot.add(table))

        self.app.push_screen(RuleForm(), added)

    def action_toggle_pause(self) -> None:
        key = self.query_one("#rule-table", LiveTable).selected_key
        rule = next((r for r in self.snapshot.autopilot if r.name == key), None) if self.snapshot else None
        if rule is None:
            self.app.notify("select a rule first", severity="warning")
            return
        self._rule_call(lambda services: services.autopilot.set_paused(rule.name, not rule.paused))

    def _rule_call(self, call: Callable[[Services], ActionResult], what: str = "autopilot rule change") -> None:
        services = self.core.services
        run_action(self, Action(what, lambda _: call(services), refused=(ActionError, RuleError), prefix=False,
                                group="autopilot-rule"))
