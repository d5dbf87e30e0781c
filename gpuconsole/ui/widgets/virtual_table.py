"""The console's one keyed table: it holds the ordered row keys and a function that makes a
row's cells, and draws only the rows on screen, so 100,000 rows cost one key each.

Rows come and go by key, the cursor stays on its key, and ``RowHighlighted`` / ``RowSelected``
say which key. :class:`~gpuconsole.ui.widgets.live_table.LiveTable` is the same table drawn as
Textual's ``DataTable`` draws (the small tables); :class:`~gpuconsole.ui.widgets.row_index.RowIndex`
sorts and filters a snapshot's items for a big one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from gpuconsole.ui.widgets.cell_lines import PADDING, cell_pieces
from gpuconsole.ui.widgets.cells import Cells, Row
from gpuconsole.ui.widgets.columns import column_widths, tag_mark
from gpuconsole.ui.widgets.sorting import cell_order, numeric, ordered

CellsOf = Callable[[str], Cells]



class VirtualTable(ScrollView, can_focus=True):
    """Ordered row keys plus a cell function; only the visible rows are ever built."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"datatable--header", "datatable--cursor"}
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "cursor_up", "Up", show=False),
        Binding("down", "cursor_down", "Down", show=False),
        Binding("pageup", "page_up", "Page up", show=False),
        Binding("pagedown", "page_down", "Page down", show=False),
        Binding("home", "first", "First", show=False),
        Binding("end", "last", "Last", show=False),
        Binding("enter", "select_cursor", "Select", show=False),
        # less, vim, k9s and htop habits beside the arrows
        Binding("j", "cursor_down", "Down", show=False),
        Binding("k", "cursor_up", "Up", show=False),
        Binding("g", "first", "First", show=False),
        Binding("G", "last", "Last", show=False),
        Binding("space", "tag", "Tag", show=False, tooltip="tag the row (htop): actions then act on every tagged row"),
    ]
    DEFAULT_CSS = """
    VirtualTable {
        height: 1fr;
        background: $surface;
        color: $foreground;
        & > .datatable--header { text-style: bold; background: $panel; color: $foreground; }
        &:ansi > .datatable--header { background: ansi_bright_blue; color: ansi_default; }
        & > .datatable--cursor {
            background: $block-cursor-blurred-background;
            color: $block-cursor-blurred-foreground;
            text-style: $block-cursor-blurred-text-style;
        }
        &:focus {
            background-tint: $foreground 5%;
            & > .datatable--cursor {
                background: $block-cursor-background;
                color: $block-cursor-foreground;
                text-style: $block-cursor-text-style;
            }
        }
    }
    """

    class RowHighlighted(Message):
        """The cursor moved to another row (named like DataTable's, for the panes)."""

        def __init__(self, table: VirtualTable, cursor_row: int, row_key: str | None) -> None:
            super().__init__()
            self.data_table = table
            self.cursor_row = cursor_row
            self.row_key = row_key

        @property
        def control(self) -> VirtualTable:
            return self.data_table

    class RowSelected(RowHighlighted):
        """Enter, or a second click, on a row."""

    class TableChanged(Message):
        """Something about the table changed (its subclasses say what)."""

        def __init__(self, table: VirtualTable) -> None:
            super().__init__()
            self.table = table

        @property
        def control(self) -> VirtualTable:
            return self.table

    class SortChanged(TableChanged):
        """The sort column or its direction changed (a pane that orders its own rows redraws)."""

    class TagsChanged(TableChanged):
        """A row was tagged or untagged."""

    def __init__(self, columns: Sequence[tuple[str, str, int | None]], *, identity: str | None = "name",
                 gives: dict[str, int] | None = None, taggable: bool = False, orders_rows: bool = True,
                 **kwargs: Any) -> None:
        """``columns``: (label, key, width; None for the one flexible column). ``identity``: the
        key of the column that names a row, which is never cut while another column can give
        (k9s's rule); ``gives``: columns that may narrow to make room, and how far; ``taggable``:
        space tags rows; ``orders_rows``: False when the pane puts its rows in the sort order
        itself (it is told by :class:`SortChanged`)."""
        super().__init__(**kwargs)
        self._labels = {key: label for label, key, _w in columns}
        self.identity = identity if identity in self._labels else None
        self.gives = dict(gives or {})
        self.taggable = taggable
        self.orders_rows = orders_rows
        self.sortable: list[str] = list(self._labels)  # the columns F6 and > / < offer
        self.sort_column: str | None = None
        self.sort_descending = False
        self.sort_value: Callable[[str, str], Any] | None = None  # (row key, column) -> order key; None: the cells
        self.tagged: set[str] = set()
        self._given: Sequence[str] = ()
        self._fit = 0  # the widest identity cell, where the pane says
        self._column_spec = list(columns)
        self._column_index = {key: i for i, (_label, key, _w) in enumerate(self._column_spec)}
        self._keys: tuple[str, ...] = ()  # a tuple: the collector stops walking it (100,000 keys)
        self._position: dict[str, int] | None = None  # key -> row, built when first asked
        self._cells_of: CellsOf = lambda key: ()
        self._cursor = 0
        self._widths: list[int] = []

    # ------------------------------------------------------------------ rows
    def show_rows(self, keys: Sequence[str], cells_of: CellsOf) -> None:
        """Show the rows ``keys`` in this order; ``cells_of(key)`` makes a row when it is drawn."""
        selected = self.selected_key
        arrived = not self._keys and bool(keys)
        self._given = keys
        self._cells_of = cells_of
        if self.sort_column is not None and self.orders_rows:
            keys = ordered(keys, self._value_of(self.sort_column), self.sort_descending)
        self._keys = tuple(keys)
        self._position = None
        if self.tagged:
            self.tagged.intersection_update(self._keys)
        cursor = self._cursor
        if selected is not None and not (0 <= cursor < len(self._keys) and self._keys[cursor] == selected):
            try:  # one pass in C (3 ms over 100,000 rows), not a {key: row} dict per tick (16 ms)
                cursor = self._keys.index(selected)
            except ValueError:
                pass
        self._set_cursor(min(cursor, max(0, len(self._keys) - 1)), scroll=False, announce=cursor != self._cursor)
        if arrived and cursor == self._cursor:  # the first rows: a row is highlighted now
            self.post_message(self.RowHighlighted(self, self._cursor, self.selected_key))
        self._update_virtual_size()
        self.refresh()

    def sync(self, rows: Sequence[Row]) -> None:
        """Show exactly ``rows`` (``(key, cells)`` in order)."""
        cells = dict(rows)
        self.show_rows([key for key, _cells in rows], cells.__getitem__)

    @property
    def shown_keys(self) -> list[str]:
        """Row keys in display order."""
        return list(self._keys)

    @property
    def row_count(self) -> int:
        return len(self._keys)

    def row_index(self, key: str) -> int | None:
        if self._position is None:
            self._position = {k: i for i, k in enumerate(self._keys)}
        return self._position.get(key)

    def set_labels(self, labels: dict[str, str]) -> None:
        """Rename columns by key (e.g. to mark the sort column); the widths stay as set."""
        spec = [(labels.get(key, label), key, width) for label, key, width in self._column_spec]
        if spec != self._column_spec:
            self._column_spec = spec
            self.refresh_line(0)

    def column_label(self, key: str) -> str:
        return self._column_spec[self._column_index[key]][0]

    # ------------------------------------------------------------------ sorting
    @property
    def columns(self) -> dict[str, str]:
        """Column key → label (without the sort arrow), in the table's order."""
        return dict(self._labels)

    def _value_of(self, column: str) -> Callable[[str], Any]:
        if self.sort_value is not None:
            value, name = self.sort_value, column
            return lambda key: value(key, name)
        index, cells_of = self._column_index[column], self._cells_of
        return lambda key: cell_order(cells_of(key)[index])

    def sort_by(self, column: str | None, descending: bool | None = None) -> None:
        """Sort by ``column`` (None: the pane's own order); numbers highest first and words
        from A unless ``descending`` says; the header marks the column and its direction."""
        if column is not None and column not in self._labels:
            raise KeyError(column)
        if descending is None and column is not None:
            value = self._value_of(column)
            descending = numeric(value(key) for key in self._keys[:50])
        self.sort_column, self.sort_descending = column, bool(descending)
        arrow = "▼" if self.sort_descending else "▲"
        self.set_labels({key: f"{label}{arrow}" if key == column else label for key, label in self._labels.items()})
        if self.orders_rows:
            self.show_rows(self._given, self._cells_of)
        if column is not None:
            self.call_after_refresh(self.show_column, column)
        self.post_message(self.SortChanged(self))

    def show_column(self, column: str) -> None:
        """Scroll sideways, where needed, so column ``column`` (e.g. the one just sorted by) is on screen."""
        if not self._widths:
            return
        index = self._column_index[column]
        left = sum(self._widths[:index]) + 2 * PADDING * index
        right = left + self._widths[index] + 2 * PADDING
        view = self.scrollable_content_region.width
        x = round(self.scroll_x)
        if left < x:
            self.scroll_to(x=left, animate=False, immediate=True)
        elif right > x + view:
            self.scroll_to(x=right - view, animate=False, immediate=True)

    def sort_step(self, step: int) -> None:
        """``>`` / ``<``: the next / previous column."""
        keys = self.sortable
        at = keys.index(self.sort_column) if self.sort_column in keys else (-1 if step > 0 else 0)
        self.sort_by(keys[(at + step) % len(keys)])

    def sort_reverse(self) -> None:
        self.sort_by(self.sort_column or next(iter(self._labels)), not self.sort_descending)

    # ------------------------------------------------------------------ tags
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "tag":
            return self.taggable
        return True

    def action_tag(self) -> None:
        """space: tag or untag the row under the cursor and move down (htop)."""
        key = self.selected_key
        if key is None:
            return
        self.tagged.symmetric_difference_update({key})
        self.refresh_row(self._cursor)
        self._set_cursor(self._cursor + 1)
        self.post_message(self.TagsChanged(self))

    def untag(self) -> None:
        if self.tagged:
            self.tagged.clear()
            self.refresh()
            self.post_message(self.TagsChanged(self))

    def tagged_keys(self) -> list[str]:
        """The tagged rows in display order."""
        return [key for key in self._keys if key in self.tagged] if self.tagged else []

    def fit_identity(self, width: int) -> None:
        """The widest name the identity column holds (a pane that knows every row says)."""
        if width != self._fit:
            self._fit = width
            self._update_virtual_size()
            self.refresh()

    def get_cell(self, key: str, column: str) -> Any:
        """The cell of row ``key`` in column ``column`` (as it would be drawn now)."""
        if self.row_index(key) is None:
            raise KeyError(key)
        return self._cells_of(key)[self._column_index[column]]

    # ------------------------------------------------------------------ cursor
    @property
    def cursor_row(self) -> int:
        return self._cursor

    @property
    def selected_key(self) -> str | None:
        if not self._keys or not 0 <= self._cursor < len(self._keys):
            return None
        return self._keys[self._cursor]

    def move_cursor(self, *, row: int | None = None, column: int | None = None, animate: bool = False,
                    scroll: bool = True) -> None:
        if row is not None:
            self._set_cursor(row, scroll=scroll)

    def _set_cursor(self, row: int, *, scroll: bool = True, announce: bool = True) -> None:
        row = max(0, min(row, len(self._keys) - 1)) if self._keys else 0
        moved = row != self._cursor
        if moved:
            self.refresh_row(self._cursor)
            self._cursor = row
            self.refresh_row(row)
        if scroll:
            self._scroll_to_cursor()
        if (moved and announce) and self._keys:
            self.post_message(self.RowHighlighted(self, row, self.selected_key))

    def refresh_row(self, row: int) -> None:
        y = row - round(self.scroll_y) + 1
        if 1 <= y < self.size.height:
            self.refresh_line(y)

    def _page(self) -> int:
        return max(1, self.scrollable_content_region.height - 1)

    def _scroll_to_cursor(self) -> None:
        top = round(self.scroll_y)
        page = self._page()
        if self._cursor < top:
            self.scroll_to(y=self._cursor, animate=False, immediate=True)
        elif self._cursor >= top + page:
            self.scroll_to(y=self._cursor - page + 1, animate=False, immediate=True)

    def action_cursor_up(self) -> None:
        self._set_cursor(self._cursor - 1)

    def action_cursor_down(self) -> None:
        self._set_cursor(self._cursor + 1)

    def action_page_up(self) -> None:
        self._set_cursor(self._cursor - self._page())

    def action_page_down(self) -> None:
        self._set_cursor(self._cursor + self._page())

    def action_first(self) -> None:
        self._set_cursor(0)

    def action_last(self) -> None:
        self._set_cursor(len(self._keys) - 1)

    def action_select_cursor(self) -> None:
        if self._keys:
            self.post_message(self.RowSelected(self, self._cursor, self.selected_key))

    async def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None or offset.y < 1:
            return
        row = round(self.scroll_y) + offset.y - 1
        if row >= len(self._keys):
            return
        self._set_cursor(row)
        if event.chain >= 2:
            self.action_select_cursor()

    def on_focus(self, event: events.Focus) -> None:
        self.refresh()

    def on_blur(self, event: events.Blur) -> None:
        self.refresh()

    # ------------------------------------------------------------------ drawing
    def on_resize(self, event: events.Resize) -> None:
        self._update_virtual_size()

    def _update_virtual_size(self) -> None:
        pads = 2 * PADDING * len(self._column_spec)
        self._widths = self._layout(self.scrollable_content_region.width - pads, {})
        self._set_virtual_size(Size(sum(self._widths) + pads, len(self._keys) + 1))

    def _layout(self, room: int, fitted: dict[int, int]) -> list[int]:
        return column_widths(self._column_spec, room, fitted, self.identity, self._fit, self.gives)

    def _set_virtual_size(self, size: Size) -> None:
        """Set the scrollable size. ``virtual_size`` asks for a layout of the whole screen on any
        change; when only the number of rows changed and the vertical scrollbar stays as it was
        (shown, or not needed, before and after), the scrollbar is updated in place instead, which
        on a filter keystroke saves a layout pass of every widget on screen."""
        old = self.virtual_size
        if size == old:
            return
        rows = self.container_size.height
        if (self.is_mounted and rows > 0 and size.width == old.width
                and (size.height > rows) == (old.height > rows)):
            self.set_reactive(VirtualTable.virtual_size, size)
            self._update_scrollbar(size)
            self.refresh()
            return
        self.virtual_size = size

    def _update_scrollbar(self, size: Size) -> None:
        """The vertical scrollbar for ``size`` (whether it shows does not change)."""
        if self.show_vertical_scrollbar and self.styles.scrollbar_size_vertical:
            bar = self.vertical_scrollbar
            bar.window_virtual_size = size.height
            bar.window_size = self.container_size.height - self.scrollbar_size_horizontal
            bar.refresh()
        self.scroll_y = self.validate_scroll_y(self.scroll_y)

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        base = self.rich_style
        if not self._widths:
            self._update_virtual_size()
        scroll_x = round(self.scroll_x)
        if y == 0:
            header = self.get_component_rich_style("datatable--header")
            cells: Sequence[Any] = [Text(label, no_wrap=True) for label, _k, _w in self._column_spec]
            return self._strip(cells, base + header, None).crop_extend(scroll_x, scroll_x + width, base + header)
        row = round(self.scroll_y) + y - 1
        if row >= len(self._keys):
            return Strip.blank(width, base)
        cursor = self.get_component_rich_style("datatable--cursor") if row == self._cursor else None
        key = self._keys[row]
        cells = self._cells_of(key)
        line_style = base + cursor if cursor is not None else base
        strip = self._strip(cells, base, cursor)
        if key in self.tagged:
            strip = tag_mark(strip)
        return strip.crop_extend(scroll_x, scroll_x + width, line_style)

    def _strip(self, cells: Sequence[Any], base: Style, over: Style | None) -> Strip:
        """One row: each cell cut or padded to its column, DataTable's padding either side."""
        console = self.app.console
        segments: list[Segment] = []
        pad = Segment(" " * PADDING, base + over if over is not None else base)
        for cell, width in zip(cells, self._widths, strict=False):
            segments.append(pad)
            for text, own in cell_pieces(console, cell, width):
                style = base + own if own else base
                segments.append(Segment(text, style + over if over is not None else style))
            segments.append(pad)
        return Strip(segments)

