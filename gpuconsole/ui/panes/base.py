"""What every pane shares: the status of its source, the "not configured" panel, the filter.

A pane renders nothing but the latest :class:`FleetSnapshot`. Its first line says where the data
comes from and how fresh it is (``live`` / ``stale for 12 s`` / ``error: …``), because a number
on a monitoring screen is only as good as its age.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, cast

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.geometry import Size
from textual.reactive import Reactive
from textual.widgets import Input

from gpuconsole.core.ops.actions import ActionKind
from gpuconsole.model import FleetSnapshot, SourceKind, SourceState, SourceStatus
from gpuconsole.ui.palette import Palette
from gpuconsole.ui.widgets.focus import focus_now
from gpuconsole.ui.widgets.text_view import TextView
from gpuconsole.ui.widgets.virtual_table import VirtualTable
from gpuconsole.ui.worker_errors import ReportsWorkerErrors

TABLES = "VirtualTable"  # the selector of every table a pane may hold (a LiveTable is one too)

if TYPE_CHECKING:
    from gpuconsole.core.fleet.console import Console
    from gpuconsole.ui.protocols import ConsoleApp

SOURCE_LABELS = {SourceKind.GPUS: "GPU telemetry", SourceKind.JOBS: "Kubernetes", SourceKind.CLOUD: "cloud",
                 SourceKind.SERVICES: "inference services"}


def status_text(status: SourceStatus | None, now: float, palette: Palette, *, short: bool = False) -> Text:
    """``● GPU telemetry: sim · live`` (``● gpus sim · live`` when short) in its state's colour."""
    if status is None:
        return Text("")
    style = {
        SourceState.LIVE: palette.ok,
        SourceState.STALE: palette.warn,
        SourceState.ERROR: palette.bad,
        SourceState.UNCONFIGURED: palette.dim,
        SourceState.CONNECTING: palette.dim,
    }[status.state]
    line = Text()
    line.append("● ", style)
    label = status.kind.value if short else f"{SOURCE_LABELS[status.kind]}:"
    line.append(f"{label} {status.name} · ")
    words = "not set up" if short and status.state is SourceState.UNCONFIGURED else status.describe(now)
    line.append(words, style)
    return line


class FilterInput(Input):
    """The ``/`` filter of a pane: narrows the table as you type; Esc clears, Enter keeps (the
    field closes; the pane's first line names the kept filter, and ``/`` opens it again)."""

    BINDINGS = [("escape", "clear", "Clear filter")]
    # The typed words' width is the field's virtual width, which changes with every key; the
    # words scroll inside a field of fixed size, so that repaints the field, not (as Textual's
    # Input asks) a new layout of the whole screen.
    virtual_size: Reactive[Size] = Reactive(Size(0, 0), layout=False, repaint=True)

    def action_clear(self) -> None:
        self.value = ""
        self.display = False
        pane = next((a for a in self.ancestors if isinstance(a, Pane)), None)
        if pane is not None:
            pane.focus_body()


class Pane(ReportsWorkerErrors, Vertical):
    """Base of the panes.

    Subclasses set ``kind`` (the source that feeds them), compose their body in
    ``compose_body`` and render a snapshot in ``render_snapshot``.
    """

    kind: ClassVar[SourceKind | None] = None
    filterable: ClassVar[bool] = True
    main_view: ClassVar[str] = ""  # a pane with a sub-view (the Jobs pane's Nodes): its two views' names
    sub_view: ClassVar[str] = ""
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Back", show=False,
                tooltip="clear a kept filter, then the tags; then leave a sub-view (the Jobs pane's Nodes)"),
        # sort keys are no action key anywhere (s stops an instance in the Instances pane)
        Binding("greater_than_sign", "sort_step(1)", "Sort", show=False, key_display=">",
                tooltip="sort the table by the next column (marked in the header); < the one before"),
        Binding("less_than_sign", "sort_step(-1)", "Sort back", show=False, key_display="<"),
        Binding("f6", "sort_menu", "Sort by…", show=False, tooltip="choose the sort column, or reverse it (htop)"),
    ]

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.snapshot: FleetSnapshot | None = None
        self.palette: Palette | None = None
        self.filter_text = ""
        self.mode = self.main_view

    @property
    def core(self) -> Console:
        """The console this pane shows; act through ``core.services``."""
        return cast("ConsoleApp", self.app).core

    def compose(self) -> ComposeResult:
        yield TextView(classes="source-line")
        yield TextView(classes="missing")
        yield from self.compose_body()
        yield TextView(classes="row-detail")
        yield TextView(classes="access-line")
        if self.filterable:
            yield FilterInput(placeholder="filter: type to narrow, enter to keep, esc to clear", classes="filter")

    def compose_body(self) -> ComposeResult:
        yield from ()

    def on_mount(self) -> None:
        self.query_one(".missing", TextView).display = False
        self.query_one(".access-line", TextView).display = False
        if self.filterable:
            self.query_one(FilterInput).display = False

    # ------------------------------------------------------------------ filter
    def action_back(self) -> None:
        """Esc in the pane: clear a kept filter first, then the tags, then leave a sub-view
        (:meth:`leave_view`)."""
        tagged = [t for t in self.query(TABLES) if isinstance(t, VirtualTable) and t.tagged]
        if self.filter_text:
            self.set_filter("")
            self.focus_body()
        elif tagged:
            for table in tagged:
                table.untag()
        else:
            self.leave_view()

    # ------------------------------------------------------------------ sorting and tags
    def sort_table(self) -> VirtualTable | None:
        """The table the sort keys act on: the focused one of this pane, else its first shown."""
        focused = self.app.focused
        tables = [t for t in self.query(TABLES) if isinstance(t, VirtualTable)]
        if isinstance(focused, VirtualTable) and focused in tables:
            return focused
        return next((t for t in tables if t.display), None)

    def action_sort_step(self, step: int) -> None:
        """``>`` / ``<``: sort by the next / previous column (numbers highest first, words from A)."""
        table = self.sort_table()
        if table is not None:
            table.sort_step(step)  # the header marks the column, scrolled into view

    def action_sort_menu(self) -> None:
        """F6: pick the sort column from a menu (or reverse it), as in htop."""
        table = self.sort_table()
        if table is None:
            return
        from gpuconsole.ui.screens.sort_menu import REVERSE, SortMenu

        def chosen(key: str | None) -> None:
            if key == REVERSE:
                table.sort_reverse()
            elif key is not None:
                table.sort_by(key)

        columns = {key: label for key, label in table.columns.items() if key in table.sortable}
        self.app.push_screen(SortMenu(columns, table.sort_column or "", table.sort_descending), chosen)

    def on_virtual_table_tags_changed(self, event: VirtualTable.TagsChanged) -> None:
        self.redraw()

    def tagged_count(self) -> int:
        return sum(len(t.tagged) for t in self.query(TABLES) if isinstance(t, VirtualTable))

    def leave_view(self) -> None:
        """Go back from the pane's sub-view (:attr:`sub_view`) to its main view."""
        if self.sub_view and self.mode == self.sub_view:
            self.show_view(self.main_view)

    def show_view(self, view: str) -> None:
        """Show the main view or the sub-view: the pane's class ``-SUBVIEW`` says which tables
        show (in its CSS), the view's table takes the focus and the pane draws again."""
        self.mode = view
        self.set_class(view == self.sub_view, f"-{self.sub_view}")
        self.focus_body()
        self.redraw()

    def open_view(self, view: str) -> None:
        """Show one of the views the pane declares (:attr:`PaneSpec.views`); here: its body."""
        self.focus_body()

    def open_filter(self) -> None:
        if not self.filterable:
            return
        field = self.query_one(FilterInput)
        field.display = True
        # Now, in this handler: the letters typed right after / are already queued behind it.
        focus_now(field)

    def set_filter(self, words: str) -> None:
        """Filter the pane to ``words`` and show them in the filter field (from the palette)."""
        field = self.query_one(FilterInput)
        field.value = words
        field.display = bool(words)
        self._filter_by(words)

    def _filter_by(self, words: str) -> None:
        self.filter_text = words.strip().lower()
        self.redraw()

    def on_input_changed(self, event: Input.Changed) -> None:
        if isinstance(event.input, FilterInput):
            self._filter_by(event.value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if isinstance(event.input, FilterInput):
            # kept: the first line says "filter: …", so the field gives its three rows back
            event.input.display = False
            self.focus_body()

    def matches(self, *words: object) -> bool:
        """Whether a row whose words are ``words`` passes the filter (case-insensitive substring)."""
        if not self.filter_text:
            return True
        haystack = " ".join(str(w) for w in words if w is not None).lower()
        return all(term in haystack for term in self.filter_text.split())

    def focus_body(self) -> None:
        """Give focus to the pane's main widget: its first table, where it has one."""
        tables = self.query(TABLES)
        if tables:
            focus_now(tables.first())

    # ------------------------------------------------------------------ snapshots
    def show(self, snapshot: FleetSnapshot, palette: Palette) -> None:
        self.snapshot = snapshot
        self.palette = palette
        self.redraw()

    def redraw(self) -> None:
        snap, palette = self.snapshot, self.palette
        if snap is None or palette is None or not self.query(".source-line"):
            return  # not composed yet (a hidden pane mounts after the first frame): shown once it is
        status = snap.source(self.kind) if self.kind is not None else None
        missing = status is not None and status.state is SourceState.UNCONFIGURED
        line = status_text(status, snap.taken_at, palette)
        extra = self.summary(snap)
        if extra:
            line.append("   ")
            line.append_text(extra if isinstance(extra, Text) else Text(extra))
        if self.filter_text:
            line.append(f"   filter: {self.filter_text}", palette.accent)
        tagged = self.tagged_count()
        if tagged:
            line.append(f"   {tagged} tagged (esc untags)", palette.accent)
        self.query_one(".source-line", TextView).show(line)
        panel = self.query_one(".missing", TextView)
        panel.display = missing
        if missing and status is not None:
            panel.show(missing_text(status, palette))
        self.set_class(missing, "-unconfigured")
        self.render_snapshot(snap, palette)
        self.update_detail()

    def on_virtual_table_row_highlighted(self, event: object) -> None:
        self.update_detail()

    def update_detail(self) -> None:
        """Refresh the line under the table that spells out the selected row."""
        snap, palette = self.snapshot, self.palette
        line = self.query_one(".row-detail", TextView)
        focused = self.app.focused
        tables = [t for t in self.query(TABLES) if t.display]  # a sub-view's hidden table says nothing
        table = focused if isinstance(focused, VirtualTable) and focused in tables else None
        if table is None:
            table = tables[0] if tables else None
        key = table.selected_key if table is not None else None
        content = self.detail(table.id or "", key, snap, palette) if key and snap and palette and table else None
        if content is None and self.filter_text and tables and not any(t.shown_keys for t in tables):
            content = Text(f"no rows match {self.filter_text!r} (esc clears the filter)",
                           style=palette.warn if palette else "")
        line.display = content is not None
        if content is not None:
            line.show(content)
        self.update_access()

    def detail(self, table_id: str, key: str, snapshot: FleetSnapshot, palette: Palette) -> Text | None:
        """The words for the selected row of ``table_id``; None hides the line."""
        return None

    # ------------------------------------------------------------------ access
    def guarded_kind(self, action: str, parameters: tuple[object, ...]) -> tuple[ActionKind, str | None] | None:
        """The change a key of this pane makes (and the namespace it acts in, for the selected
        row), so a key the role may not use is disabled; None: the key changes nothing."""
        return None

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("sort_step", "sort_menu"):
            return self.sort_table() is not None
        asked = self.guarded_kind(action, parameters)
        if asked is None:
            return True
        from gpuconsole.ui.access import why_not

        return None if why_not(self.app, *asked) else True  # None: shown dimmed, does nothing

    def access_reasons(self) -> list[tuple[str, str]]:
        """(key, reason) for each key of this pane the user may not use now."""
        from textual.actions import parse

        from gpuconsole.ui.access import principal_of, why_not

        if principal_of(self.app) is None:
            return []  # who the user is has not been read yet: nothing is disabled
        reasons = []
        for binding in self.BINDINGS:
            if not isinstance(binding, Binding):
                continue
            _, name, params = parse(binding.action)
            asked = self.guarded_kind(name, params)
            why = why_not(self.app, *asked) if asked is not None else None
            if why:
                reasons.append((binding.key_display or binding.key, why))
        return reasons

    def update_access(self) -> None:
        """Say under the table why keys are disabled (the footer only dims them)."""
        line = self.query_one(".access-line", TextView)
        reasons = self.access_reasons()
        if reasons == getattr(self, "_shown_reasons", None):
            return  # the keys' states are as shown: refreshing the footer would rebuild it
        self._shown_reasons = reasons
        line.display = bool(reasons)
        if reasons:
            keys = " ".join(sorted({key for key, _ in reasons}))
            text = Text(f"disabled: {keys} — ", style=self.palette.warn if self.palette else "")
            text.append(reasons[0][1])
            line.show(text)
        self.refresh_bindings()

    def summary(self, snapshot: FleetSnapshot) -> Text | str:
        """Counts shown after the source status (e.g. ``64 GPUs · 12 shown``)."""
        return ""

    def render_snapshot(self, snapshot: FleetSnapshot, palette: Palette) -> None:
        raise NotImplementedError

    def prepare(self, snapshot: FleetSnapshot) -> None:
        """While the pane is not on screen: get ready to show ``snapshot`` (off the UI thread),
        so its first showing is quick. Nothing to do here."""


def missing_text(status: SourceStatus, palette: Palette) -> Text:
    out = Text()
    out.append(f"{SOURCE_LABELS[status.kind]} is not set up\n\n", palette.strong)
    out.append(f"{status.error or 'no backend configured'}.\n\n")
    if status.hint:
        out.append("How to set it up: ", palette.strong)
        out.append(f"{status.hint}.\n\n")
    out.append("Press ")
    out.append("d", palette.accent)
    out.append(" to switch this console to the demo (a simulated GPU cloud).")
    return out
