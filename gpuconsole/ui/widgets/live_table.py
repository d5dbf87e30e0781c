"""A DataTable that follows a live, keyed row set without clear-and-refill.

Each refresh hands the table the rows it should show, in order, keyed by a stable id (GPU
UUID, job UID, instance id). The table removes rows that left, appends rows that arrived,
updates only the cells whose text changed, reorders only when the order changed, and keeps the
cursor on the same key. ``update_cell`` invalidates the table's render caches, so touching only
changed cells is what keeps a 1 Hz refresh cheap.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from rich.style import Style
from rich.text import Text
from textual.widgets import DataTable
from textual.widgets.data_table import ColumnKey, RowKey

Cells = tuple[Any, ...]
Row = tuple[str, Cells]


class LiveTable(DataTable[Any]):
    """Keyed rows, synced in place from a list of ``(key, cells)``."""

    DEFAULT_CSS = """
    LiveTable { height: 1fr; }
    """

    def __init__(self, columns: Sequence[tuple[str, str, int | None]], **kwargs: Any) -> None:
        super().__init__(cursor_type="row", zebra_stripes=False, **kwargs)
        self._column_spec = list(columns)
        self._shown: dict[str, Cells] = {}
        self._order: list[str] = []

    # DataTable binds home/end to scroll sideways in a row-cursor table (ctrl+home/ctrl+end move
    # the cursor): in a short table nothing visibly moves and the next action hits the row that
    # was selected before. Here, as in VirtualTable, they select the first and the last row.
    def action_scroll_home(self) -> None:
        self.action_scroll_top()

    def action_scroll_end(self) -> None:
        self.action_scroll_bottom()

    def on_mount(self) -> None:
        for label, key, width in self._column_spec:
            self.add_column(label, key=key, width=width)

    @property
    def shown_keys(self) -> list[str]:
        """Row keys in display order."""
        return list(self._order)

    @property
    def selected_key(self) -> str | None:
        if not self._order or self.cursor_row < 0 or self.cursor_row >= len(self._order):
            return None
        return self._order[self.cursor_row]

    def sync(self, rows: Sequence[Row]) -> None:
        """Show exactly ``rows`` (in this order), touching as little as possible."""
        if not self.is_mounted or not self.columns:
            return
        selected = self.selected_key
        wanted = {key: cells for key, cells in rows}
        gone = [k for k in self._shown if k not in wanted]
        for key in gone:
            self.remove_row(key)
            del self._shown[key]
        arrived = changed = False
        column_keys = [ColumnKey(spec[1]) for spec in self._column_spec]
        data = self._data
        for key, cells in rows:
            old = self._shown.get(key)
            if old is None:
                self.add_row(*cells, key=key)
                arrived = True
            elif old != cells:
                # What update_cell does, without a repaint request per cell: one for the batch.
                row = data[RowKey(key)]
                for column, before, after in zip(column_keys, old, cells, strict=True):
                    if before != after:
                        row[column] = after
                        changed = True
            self._shown[key] = cells
        if changed:
            self._update_count += 1
            self.refresh()
        order = [key for key, _ in rows]
        # The table's own order is what we last set unless rows were added or removed.
        current = self._current_order() if gone or arrived else self._order
        if order != current:
            self._reorder(order)
        self._order = order
        if selected is not None and selected in wanted:
            index = order.index(selected)
            if index != self.cursor_row:
                self.move_cursor(row=index, animate=False, scroll=False)

    def set_labels(self, labels: dict[str, str]) -> None:
        """Rename columns by key (e.g. to mark the sort column); the widths stay as set."""
        from textual.widgets._data_table import ColumnKey

        changed = False
        for key, label in labels.items():
            column = self.columns.get(ColumnKey(key))
            if column is not None and column.label.plain != label:
                column.label = Text(label)
                changed = True
        if changed:
            self._update_count += 1
            self.refresh()

    def _current_order(self) -> list[str]:
        locations = self._row_locations
        return [str(locations.get_key(i).value) for i in range(len(locations))]  # type: ignore[union-attr]

    def _reorder(self, order: list[str]) -> None:
        # The same bookkeeping DataTable.sort does, driven by our order instead of cell values.
        from textual._two_way_dict import TwoWayDict
        from textual.widgets._data_table import RowKey

        self._row_locations = TwoWayDict({RowKey(key): index for index, key in enumerate(order)})
        self._update_count += 1
        self.refresh()


def text(value: Any, style: Style | str | None = None, justify: str = "left") -> Text:
    """A cell that is never parsed as markup (job names, reasons and tags are user data).

    The style is applied as a span, so two cells with the same words but another colour compare
    unequal and the table repaints them. Equal cells are one shared object (treat it as
    read-only): a table of thousands of rows repeats the same node, model and value cells, and
    comparing a row with its last cells then mostly compares identities.
    """
    try:
        return _cell(str(value), style, justify)
    except TypeError:  # an unhashable style
        return _cell.__wrapped__(str(value), style, justify)


@functools.lru_cache(maxsize=32768)
def _cell(words: str, style: Style | str | None, justify: str) -> Text:
    cell = Text(words, justify=justify, no_wrap=True, overflow="ellipsis")  # type: ignore[arg-type]
    if style:
        cell.stylize(style)
    return cell


def right(value: Any, style: Style | str | None = None) -> Text:
    return text(value, style, "right")
