"""The Audit pane (admins and auditors): the audit log with filters, exports and usage analysis.

| key | does |
|---|---|
| f | edit the filters (actor, action, target, period); enter applies, esc back to the table |
| e / E | export what is shown to CSV / JSON (0600, beside the audit log; a demo's in ``paths.demo_exports_dir()``) |
| u | usage analysis: GPU-hours and cost per user and per namespace over the period |
| v | verify the hash chain |

The period is ``24h``, ``7d``, ``90m``, a date (``2026-11-01``) or a range (``2026-11-01..2026-11-30``),
in UTC; empty means everything. Records are read in a worker, never on the UI thread.
"""

from __future__ import annotations

import re
import time
from typing import ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.widgets import Input

from gpuconsole.core.access.audit import AuditError, AuditFilter, AuditRecord, Verdict
from gpuconsole.model import FleetSnapshot
from gpuconsole.ui.format import money
from gpuconsole.ui.palette import Palette
from gpuconsole.ui.panes.base import Pane
from gpuconsole.ui.widgets.cells import Row, right, text
from gpuconsole.ui.widgets.live_table import LiveTable
from gpuconsole.ui.widgets.text_view import TextView

COLUMNS = [
    ("#", "seq", 6),
    ("TIME (UTC)", "ts", 19),
    ("ACTOR", "actor", 12),
    ("RESULT", "result", 9),  # before the role: at 80 columns "started" and "ok" stay apart
    ("ACTION", "action", 15),
    ("ROLE", "role", 10),
    ("TARGET", "target", None),
]
SHOWN = 2000  # newest records shown; exports take every match
RELOAD_S = 2.0
SPAN = re.compile(r"^(\d+(?:\.\d+)?)\s*([mhd])$")
UNITS = {"m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_period(words: str, now: float) -> tuple[float | None, float | None]:
    """``(since, until)`` of a period as typed. Raises ValueError with one line."""
    words = words.strip()
    if not words:
        return None, None
    span = SPAN.match(words)
    if span:
        return now - float(span.group(1)) * UNITS[span.group(2)], None
    from gpuconsole.core.money.budgets import BudgetError, parse_date

    start, dots, end = words.partition("..")
    try:
        since = float(parse_date(start)) if start else None
        last = end if dots else start  # one date: that whole day
        until = float(parse_date(last, end=True)) if last else None
    except BudgetError as exc:
        raise ValueError(f"period: {exc}") from None
    return since, until


class AuditPane(Pane):
    """The audit log, newest first."""

    kind = None

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("f", "edit_filters", "Filters",
                tooltip="edit the filters (actor, action, target, period); enter applies, esc back to the table"),
        Binding("e", "export('csv')", "Export CSV",
                tooltip="export what is shown to CSV (0600, beside the audit log; a demo's: gpuconsole-demo-exports)"),
        Binding("E", "export('json')", "Export JSON",
                tooltip="export what is shown to JSON (0600, beside the audit log; a demo's: gpuconsole-demo-exports)"),
        Binding("u", "toggle_usage", "Usage", tooltip="GPU-hours and cost per user and per namespace over the period"),
        Binding("v", "verify", "Verify chain", tooltip="verify the audit log's hash chain"),
    ]

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.records: list[AuditRecord] = []
        self.note = ""
        self._loaded_at = 0.0
        self._filter = AuditFilter()
        self.usage_shown = False

    def compose_body(self) -> ComposeResult:
        with Horizontal(id="audit-filters"):
            yield Input(placeholder="actor", id="audit-actor", classes="audit-filter")
            yield Input(placeholder="action", id="audit-action", classes="audit-filter")
            yield Input(placeholder="target", id="audit-target", classes="audit-filter")
            yield Input(placeholder="period: 24h, 7d, 2026-11-01..2026-11-30", id="audit-period", classes="audit-filter")
        yield TextView(id="audit-denied")
        yield LiveTable(COLUMNS, id="audit-table")
        yield TextView(id="usage-view")

    def on_mount(self) -> None:
        super().on_mount()
        self.query_one("#usage-view", TextView).display = False
        self.query_one("#audit-denied", TextView).display = False

    # ------------------------------------------------------------------ who may look
    def denied(self) -> str | None:
        principal = getattr(self.app, "access_principal", None)
        if principal is None or principal.role is None or principal.role.value not in ("admin", "auditor"):
            who = principal.name if principal is not None else "you"
            role = principal.role_text if principal is not None else "unknown"
            return f"only admins and auditors read the audit log ({who} is {role})"
        return None

    # ------------------------------------------------------------------ rendering
    def summary(self, snapshot: FleetSnapshot) -> Text | str:
        shown = f"{len(self.records)} record(s)" + (f" (newest {SHOWN})" if len(self.records) >= SHOWN else "")
        return f"audit log · {shown}" + (f" · {self.note}" if self.note else "")

    def render_snapshot(self, snapshot: FleetSnapshot, palette: Palette) -> None:
        why = self.denied()
        blocked = self.query_one("#audit-denied", TextView)
        blocked.display = why is not None
        self.query_one("#audit-table", LiveTable).display = why is None
        self.query_one("#audit-filters").display = why is None
        if why is not None:
            blocked.show(Text(why, style=palette.warn))
            return
        if time.monotonic() - self._loaded_at >= RELOAD_S:
            self._loaded_at = time.monotonic()
            self.load()
        rows: list[Row] = [
            (str(r.seq), (right(str(r.seq)), text(r.ts[:19].replace("T", " ")), text(r.actor),
                          text(r.result, palette.ok if r.result == "ok" else
                               palette.bad if r.result.startswith("denied") else palette.warn),
                          text(r.action), text(r.role), text(r.target)))
            for r in reversed(self.records)
            if self.matches(r.actor, r.action, r.target, r.result, r.params)
        ]
        self.query_one("#audit-table", LiveTable).sync(rows)
        usage = self.query_one("#usage-view", TextView)
        usage.display = self.usage_shown
        if self.usage_shown:
            usage.show(self.usage_text(snapshot, palette))

    def usage_text(self, snapshot: FleetSnapshot, palette: Palette) -> Text:
        from gpuconsole.core.money.usage import usage_report

        until = self._filter.until if self._filter.until is not None else snapshot.taken_at
        since = self._filter.since if self._filter.since is not None else until - 30 * 86400
        report = usage_report(snapshot.jobs, snapshot.instances, since, until)
        out = Text()
        days = (until - since) / 86400
        out.append(f"Usage over {days:.1f} day(s): {report.gpu_hours:,.1f} GPU-hours, {money(report.cost)}\n", palette.strong)
        for title, lines in (("per user", report.by_user), ("per namespace", report.by_namespace)):
            out.append(f"{title}: ", palette.accent)
            out.append("  ".join(f"{i.key} {i.gpu_hours:,.1f} GPU-h {money(i.cost)}" for i in lines[:8]) or "no jobs ran")
            out.append("\n")
        return out

    def detail(self, table_id: str, key: str, snapshot: FleetSnapshot, palette: Palette) -> Text | None:
        record = next((r for r in self.records if str(r.seq) == key), None)
        if record is None:
            return None
        line = Text(f"#{record.seq} {record.ts} {record.actor} ({record.role}) {record.action} {record.target}: ",
                    style=palette.strong)
        line.append(f"{record.result}  params {record.params}  hash {record.hash[:16]}…")
        return line

    # ------------------------------------------------------------------ loading
    @work(thread=True, exclusive=True, group="audit-load", exit_on_error=False, description="read the audit log")
    def load(self) -> None:
        guard = self.core.services.guard
        try:
            records = guard.audit.records(self._filter, limit=SHOWN)
        except Exception as exc:  # noqa: BLE001 - an unreadable log is said where the user looks
            self.app.call_from_thread(self._loaded, [], f"cannot read the audit log: {exc}")
            return
        self.app.call_from_thread(self._loaded, records, self.note)

    def _loaded(self, records: list[AuditRecord], note: str) -> None:
        self.records = records
        self.note = note
        self.redraw()

    def reload(self) -> None:
        self._loaded_at = 0.0
        self.redraw()

    # ------------------------------------------------------------------ filters
    def action_edit_filters(self) -> None:
        self.query_one("#audit-actor", Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if "audit-filter" not in event.input.classes:
            super().on_input_submitted(event)
            return
        event.stop()
        if self.apply_filters():
            self.focus_body()

    def on_input_changed(self, event: Input.Changed) -> None:
        if "audit-filter" in event.input.classes:
            event.stop()
            return
        super().on_input_changed(event)

    def apply_filters(self) -> bool:
        """Apply what the filter fields say; False (and one line, the period field focused with
        what was typed, so the next keys still go to the filters) when the period is bad."""
        value = {name: self.query_one(f"#audit-{name}", Input).value.strip() for name in ("actor", "action", "target", "period")}
        try:
            since, until = parse_period(value["period"], time.time())
        except ValueError as exc:
            self.app.notify(str(exc), severity="error")
            self.query_one("#audit-period", Input).focus()
            return False
        self._filter = AuditFilter(actor=value["actor"], action=value["action"], target=value["target"],
                                   since=since, until=until)
        self.reload()
        return True

    def set_filters(self, *, actor: str = "", action: str = "", target: str = "", period: str = "") -> None:
        """Fill the filter fields and apply them (for the palette and the tests)."""
        for name, words in (("actor", actor), ("action", action), ("target", target), ("period", period)):
            self.query_one(f"#audit-{name}", Input).value = words
        self.apply_filters()

    # ------------------------------------------------------------------ actions
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("export", "toggle_usage", "verify", "edit_filters") and self.denied() is not None:
            return None
        return super().check_action(action, parameters)

    def action_toggle_usage(self) -> None:
        self.usage_shown = not self.usage_shown
        self.redraw()

    def action_export(self, form: str) -> None:
        self._export(form, self._filter)

    @work(thread=True, group="audit-export", exit_on_error=False, description="export the audit log")
    def _export(self, form: str, flt: AuditFilter) -> None:
        from gpuconsole.core.access.audit import to_csv, to_json
        from gpuconsole.core.paths import demo_exports_dir, write_private

        audit = self.core.services.guard.audit
        try:
            records = audit.records(flt)
            stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
            # A demo's log lives in a temporary folder: its exports go where they outlive it.
            folder = demo_exports_dir() if self.core.services.demo else audit.path.parent / "exports"
            path = folder / f"audit-{stamp}.{form}"
            write_private(path, to_csv(records) if form == "csv" else to_json(records))
        except Exception as exc:  # noqa: BLE001 - one line for the user
            self.app.call_from_thread(self.app.notify, f"export failed: {exc}", severity="error")
            return
        self.app.call_from_thread(self.app.notify, f"{len(records)} record(s) exported to {path}")

    @work(thread=True, group="audit-verify", exit_on_error=False, description="verify the audit log")
    def action_verify(self) -> None:
        from gpuconsole.core.access.audit_remote import verify_anchored
        from gpuconsole.core.access.audit_sink import relay_socket

        audit = self.core.services.guard.audit
        relay = relay_socket(audit)
        if relay is not None:  # the site's chain is the relay's, as audit verify reads it
            from gpuconsole.core.access.audit_relay import relay_verdict

            try:
                verdict = relay_verdict(relay)
            except AuditError as exc:
                verdict = Verdict(False, 0, str(exc), unreadable=True)
        else:
            verdict = verify_anchored(audit)
        if verdict.ok:
            note = "chain verified"
        elif verdict.unreadable:  # proves nothing either way: never called tampering
            note = f"cannot be verified: {verdict.message}"
        else:
            note = f"TAMPERED: {verdict.message}"
        self.app.call_from_thread(self._loaded, self.records, note)
        self.app.call_from_thread(self.app.notify, verdict.message, severity="information" if verdict.ok else "error")
