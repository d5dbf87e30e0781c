"""The keyed table drawn as Textual's ``DataTable`` draws: the small tables (instances, budgets,
rules, experiments, audit, the wizards' types and zones).

Only the drawing differs from :class:`VirtualTable`: each cell is rendered with its padding
and its own style, the header is tinted while the table has the focus, a row's colour runs
to the right edge, and a column without a width is as wide as its widest cell.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from rich.cells import cell_len
from rich.console import ConsoleOptions
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.geometry import Size
from textual.strip import Strip

from gpuconsole.ui.widgets.cell_lines import padded_cell
from gpuconsole.ui.widgets.cells import Row
from gpuconsole.ui.widgets.columns import tag_mark
from gpuconsole.ui.widgets.virtual_table import PADDING, CellsOf, VirtualTable




KEEP_STYLES = 4096  # (row, column) styles kept: a few screens of rows


class LiveTable(VirtualTable):
    """Keyed rows, synced in place from a list of ``(key, cells)``; every row is drawn as
    Textual's ``DataTable`` draws it."""

    DEFAULT_CSS: ClassVar[str] = """
    LiveTable {
        max-height: 100%;
        &:focus > .datatable--header { background-tint: $foreground 5%; }
    }
    """

    def __init__(self, columns: Sequence[tuple[str, str, int | None]], **kwargs: Any) -> None:
        super().__init__(columns, **kwargs)
        self._fitted: dict[int, int] = {}  # column index -> width of its widest cell (no width set)
        self._options: tuple[object, dict[int, ConsoleOptions]] = (None, {})
        self._pres: tuple[object, dict[tuple[int, int], Style]] = (None, {})

    def sync(self, rows: Sequence[Row]) -> None:
        """Show exactly ``rows`` (``(key, cells)`` in order); a column without a width fits its
        cells, and so does the identity column (its names are never cut while another can give)."""
        cells = dict(rows)
        self.show_rows([key for key, _cells in rows], cells.__getitem__)

    def show_rows(self, keys: Sequence[str], cells_of: CellsOf, fitted: dict[str, int] | None = None) -> None:
        """Show the rows ``keys``, whose cells ``cells_of`` makes when a row is drawn. The
        columns that fit their cells are as wide as ``fitted`` says (a column key → its widest
        cell, for a pane that knows it without making every row's cells, as the Instances pane
        over a thousand instances), else as their widest cell, every row's cells made here."""
        for index, (label, key, width) in enumerate(self._column_spec):
            if width is None or key == self.identity:
                widest = (fitted[key] if fitted is not None and key in fitted
                          else max((width_of(cells_of(k)[index]) for k in keys), default=0))
                self._fitted[index] = max(widest, cell_len(label))
        super().show_rows(keys, cells_of)

    def _cell_options(self) -> Callable[[int], ConsoleOptions]:
        """The console options a cell of each width is rendered with (made once per width)."""
        base = self.app.console_options  # a new object each time: the same options compare equal
        made = self._options
        if made[0] != base:
            made = self._options = (base, {})
        widths = made[1]

        def options(width: int) -> ConsoleOptions:
            if width not in widths:
                widths[width] = base.update_dimensions(width, 1).update(no_wrap=True)
            return widths[width]

        return options

    def _update_virtual_size(self) -> None:
        fitted = self._fitted or {i: len(label) for i, (label, _k, w) in enumerate(self._column_spec) if w is None}
        pads = 2 * PADDING * len(self._column_spec)
        self._widths = self._layout(self.size.width - pads, fitted)
        self._set_virtual_size(Size(sum(self._widths) + pads, len(self._keys) + 1))

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        base = self.rich_style
        if not self._widths:
            self._update_virtual_size()
        if y == 0:
            row, style = -1, self.get_component_rich_style("datatable--header")
            cells: Sequence[Any] = [Text(label) for label, _k, _w in self._column_spec]
        else:
            row, style = round(self.scroll_y) + y - 1, base
            if row >= len(self._keys):
                return Strip.blank(width, base)
            cells = self._cells_of(self._keys[row])
        over = self.get_component_rich_style("datatable--cursor") if row == self._cursor else Style()
        post = Style.from_color(color=over.color) + Style.from_color(bgcolor=over.bgcolor)
        console = self.app.console
        segments: list[Segment] = []
        options = self._cell_options()
        made = self._pres  # a cell's style under its own, per (row, column), while the table's styles stand
        if made[0] != (style, over) or len(made[1]) > KEEP_STYLES:
            made = self._pres = ((style, over), {})
        pres = made[1]
        for column, (cell, cell_width) in enumerate(zip(cells, self._widths, strict=False)):
            pre = pres.get((row, column))
            if pre is None:
                pre = pres[row, column] = style + Style.from_meta({"row": row, "column": column}) + over
            content = cell if isinstance(cell, Text) else Text("" if cell is None else str(cell), end="")
            segments += padded_cell(console, options(cell_width), content, pre, post)
        table_width = sum(self._widths) + 2 * PADDING * len(self._widths)
        extend = style + over + Style.from_meta({"row": row, "column": 0, "out_of_bounds": True})
        segments.append(Segment(" " * max(0, width - table_width), extend))
        scroll_x = round(self.scroll_x)
        strip = Strip(segments)
        if row >= 0 and self._keys[row] in self.tagged:
            strip = tag_mark(strip)
        return strip.crop(scroll_x, scroll_x + width).adjust_cell_length(width, base).simplify()


def width_of(cell: Any) -> int:
    """The widest line of a cell, in terminal cells."""
    words = cell.plain if isinstance(cell, Text) else str(cell)
    return max((cell_len(line) for line in words.splitlines()), default=0)
