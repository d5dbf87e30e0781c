"""What is written to the terminal: only the cells that changed, as curses does.

Textual repaints a widget that changed as whole lines: a table whose one number moved is written
again row by row, every cell with its colours, every second. Over SSH each byte crosses the link,
and htop (curses) writes only the cells that changed. :class:`RepaintFilter` sits between Textual
and the terminal and keeps a shadow of what each cell shows (its character and the exact style in
force). It reads what Textual writes as cells, and when a frame ends, or before anything it does
not hold back, writes only the cells that differ: grouped by style, so each style is set once, each
span after the shortest cursor move (or the unchanged cells in between, when they cost less).

Rows holding wide characters (CJK, emoji) are written as Textual wrote them, because terminals
differ in what half a wide character becomes. Anything else it does not understand (a clear, a
scroll, a line feed whose column is unsure, text that would wrap, an unknown sequence) makes it
write what it held back, pass the thing through, and forget the screen, so the screen is never
left wrong: at worst cells are written again.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterable

from rich.cells import get_character_cell_size

from gpuconsole.ui.sgr import PLAIN, Style, apply, transition

# One token of Textual's output: a cursor move, a colour/style change, a private mode change,
# an operating system command (a title, a pointer shape), any other escape sequence, a run of
# plain text, or one control character.
_TOKEN = re.compile(
    r"(?P<cup>\x1b\[(?P<row>\d*)(?:;(?P<col>\d*))?H)"
    r"|(?P<sgr>\x1b\[[0-9;:]*m)"
    r"|(?P<mode>\x1b\[\?[0-9;]*[hl])"
    r"|(?P<osc>\x1b\][^\x07\x1b]*(?:\x07|\x1b\\))"
    r"|(?P<esc>\x1b(?:\[[0-?]*[ -/]*[@-~]|.))"
    r"|(?P<text>[^\x00-\x1f\x7f]+)"
    r"|(?P<ctl>[\x00-\x1f\x7f])",
    re.DOTALL,
)
# Private modes that change no cell: cursor shown or hidden, synchronized output, mouse and
# focus reporting, bracketed paste. Any other (the alternate screen, say) forgets the screen.
_HARMLESS_MODES = frozenset({"25", "2026", "1000", "1002", "1003", "1004", "1006", "1015", "2004"})

Run = tuple[int, int, Style, str, "list[int] | None"]  # row, column, style, text, cell widths if not all 1


class RepaintFilter:
    """Writes only the cells that changed (see the module). Rows and columns count from 0 inside.

    Args:
        rows: the terminal's height, and columns its width; 0 (unknown) passes everything through.
    """

    def __init__(self, rows: int = 0, columns: int = 0) -> None:
        self._style = PLAIN  # the style Textual has set
        self._real_style = PLAIN  # the style in force on the terminal
        self._cursor_shown = True
        self._margins = False  # scroll margins were set: moves up or down may stop at them
        self.resize(rows, columns)

    def resize(self, rows: int, columns: int) -> None:
        """Start again at a new size: nothing on the screen is known, nor where the cursor is."""
        self.rows, self.columns = rows, columns
        self._chars: list[list[str | None]] = []  # "" is the right half of a wide character, None unknown
        self._styles: list[list[Style | None]] = []
        self._wide: set[int] = set()  # rows with a wide character
        self._runs: list[Run] = []  # text read since the last write, in order
        self._at: tuple[int, int] | None = None  # where Textual's cursor is; None: not known
        self._line_feed: tuple[int, int] | None = None  # where a line feed held back was written
        self._real_at: tuple[int, int] | None = None  # where the terminal's cursor is
        self.forget()

    def forget(self) -> None:
        """Forget what the screen holds (a resize, a full repaint, anything not understood)."""
        self._chars = [[None] * self.columns for _ in range(self.rows)]
        self._styles = [[None] * self.columns for _ in range(self.rows)]
        self._wide.clear()

    def __call__(self, data: str) -> str:
        if not self.rows or not self.columns:
            return data
        out: list[str] = []
        for token in _TOKEN.finditer(data):
            kind, value = token.lastgroup, token.group()
            if kind == "cup":
                row, col = int(token.group("row") or 1), int(token.group("col") or 1)
                self._at = (min(max(row, 1), self.rows) - 1, min(max(col, 1), self.columns) - 1)
                self._line_feed = None  # the line feed before only moved the cursor: moved again
                continue
            if self._line_feed is not None and kind != "sgr":
                self._feed_line(out)
            if kind == "sgr":
                self._style = apply(self._style, value)
            elif kind == "text":
                self._text(value, out)
            elif kind == "osc" or value == "\x07" or (
                    kind == "mode" and set(value[3:-1].split(";")) <= _HARMLESS_MODES):
                self._through(value, out, style=False)  # changes no cell
                if kind == "mode" and "25" in value[3:-1].split(";"):
                    self._cursor_shown = value.endswith("h")
            elif value == "\r" and self._at is not None:
                self._at = (self._at[0], 0)
            elif value == "\n" and self._at is not None and self._at[0] < self.rows - 1 and not self._margins:
                # Above the last row (and with no scroll margins) a line feed only moves the cursor,
                # to a column the tty's settings decide (ONLCR). Textual moves the cursor after each
                # line's: held back, and dropped if a cursor move comes next.
                self._line_feed, self._at = self._at, (self._at[0] + 1, 0)
            else:
                # A line feed (a column the terminal's own settings decide, maybe a scroll), a
                # clear, an unknown sequence: it goes as it came, and what it changed is not known.
                self._margins = self._margins or (kind == "esc" and value.endswith("r"))
                scrolls = value == "\n" and (self._at is None or self._at[0] == self.rows - 1 or self._margins)
                self._through(value, out)
                self._at = None
                if value != "\r" and not (value == "\n" and not scrolls):
                    self.forget()
        if self._cursor_shown:
            if self._line_feed is not None:
                self._feed_line(out)
            self._write(out)
            self._place(out)
        else:
            self._write(out)
        return "".join(out)

    def _feed_line(self, out: list[str]) -> None:
        """Write the line feed held back, from where it was written: the cursor's column is then
        not known."""
        self._at, self._line_feed = self._line_feed, None
        self._through("\n", out)
        self._at = None

    def _text(self, text: str, out: list[str]) -> None:
        """Hold back a run of text at Textual's cursor, or pass it through where it would wrap
        (a cursor waiting to wrap is one column past the last), it holds a character of no
        width, or the cursor is not known."""
        widths = None if text.isascii() else [get_character_cell_size(char) for char in text]
        width = len(text) if widths is None else sum(widths)
        if widths is not None and all(w == 1 for w in widths):
            widths = None
        if self._at is None or (widths is not None and 0 in widths) or self._at[1] + width > self.columns:
            self._through(text, out)
            self._at = None
            self.forget()
            return
        row, col = self._at
        runs = self._runs
        if widths is None and runs and runs[-1][0] == row and runs[-1][2] == self._style and runs[-1][4] is None \
                and runs[-1][1] + len(runs[-1][3]) == col:
            # Textual sets the style again for every segment: segments of one style are one run.
            runs[-1] = (row, runs[-1][1], self._style, runs[-1][3] + text, None)
        else:
            runs.append((row, col, self._style, text, widths))
        self._at = (row, col + width)

    def _through(self, value: str, out: list[str], style: bool = True) -> None:
        """Write what is held back, put the terminal's cursor where Textual's is, and its style
        unless ``value`` changes no cell (a clear paints with the style in force), then ``value``
        as it came."""
        self._write(out)
        self._place(out)
        if style:
            out.append(transition(self._real_style, self._style))
            self._real_style = self._style
        out.append(value)
        self._real_at = None  # moved by what went through, or not known

    def _place(self, out: list[str]) -> None:
        """Put the terminal's cursor where Textual's is. A cursor waiting to wrap after the last
        column is put there by writing that column's cell again."""
        if self._at is None:
            return
        row, col = self._at
        if col < self.columns:
            self._move(row, col, out)
            return
        if self._real_at == (row, col):
            return
        head = col - 2 if self._chars[row][col - 1] == "" else col - 1
        char, style = self._chars[row][head], self._styles[row][head]
        self._move(row, head, out)
        if char is not None and style is not None:  # always known: it was the last text written
            out.append(transition(self._real_style, style))
            out.append(char)
            self._real_style = style
            self._real_at = (row, col)

    def _move(self, row: int, col: int, out: list[str]) -> None:
        """The fewest bytes that move the terminal's cursor to ``row``, ``col``."""
        if self._real_at == (row, col):
            return
        out.append(_move(self._real_at, row, col, self.columns, self._margins))
        self._real_at = (row, col)

    def _write(self, out: list[str]) -> None:
        """Write the cells the held-back runs change, and note what the screen now shows."""
        if not self._runs:
            return
        runs, self._runs = self._runs, []
        touched = {run[0] for run in runs}
        chars = {row: self._chars[row][:] for row in touched}
        styles = {row: self._styles[row][:] for row in touched}
        for row, col, style, text, widths in runs:
            _lay(chars[row], styles[row], col, style, text, widths)
        replayed = {run[0] for run in runs if run[4] is not None} | (self._wide & touched)
        for row, col, style, text, widths in runs:
            if row in replayed and (chars[row] != self._chars[row] or styles[row] != self._styles[row]
                                    or None in chars[row]):
                self._move(row, col, out)
                out.append(transition(self._real_style, style))
                out.append(text)
                self._real_style = style
                end = col + (len(text) if widths is None else sum(widths))
                self._real_at = (row, end) if end < self.columns else (row, self.columns)
        changed: dict[Style, list[tuple[int, int]]] = {}
        for row in chars.keys() - replayed:
            for col in _differing(chars[row], styles[row], self._chars[row], self._styles[row]):
                changed.setdefault(styles[row][col], []).append((row, col))  # type: ignore[arg-type]
        while changed:  # next, the style the fewest bytes away
            style = min(changed, key=lambda s: (len(transition(self._real_style, s)), min(changed[s])))
            self._write_cells(style, sorted(changed.pop(style)), chars, styles, out)
        for row in chars:
            self._chars[row], self._styles[row] = chars[row], styles[row]
            self._wide.discard(row)
            if "" in chars[row]:
                self._wide.add(row)

    def _write_cells(self, style: Style, cells: list[tuple[int, int]], chars: dict[int, list[str | None]],
                     styles: dict[int, list[Style | None]], out: list[str]) -> None:
        """Write ``cells`` (row, column, in order), all of ``style``: the style once, then each cell
        after a cursor move, or after the cells between when they share the style and cost less."""
        out.append(transition(self._real_style, style))
        self._real_style = style
        for row, col in cells:
            at = self._real_at
            if at != (row, col):
                step = _move(at, row, col, self.columns, self._margins)
                if at is not None and at[0] == row and at[1] < col:
                    between = chars[row][at[1]:col]
                    if (all(char is not None for char in between)
                            and all(s == style for s in styles[row][at[1]:col])
                            and _bytes(between) <= len(step)):  # type: ignore[arg-type]
                        step = "".join(between)  # type: ignore[arg-type]
                out.append(step)
            out.append(chars[row][col])  # type: ignore[arg-type]
            self._real_at = (row, col + 1)


def _lay(chars: list[str | None], styles: list[Style | None], col: int, style: Style, text: str,
         widths: list[int] | None) -> None:
    """Put ``text`` on a row from ``col``; a wide character cut in half leaves its other half
    unknown (terminals differ)."""
    end = col + (len(text) if widths is None else sum(widths))
    if chars[col] == "" and col:
        chars[col - 1] = styles[col - 1] = None
    if end < len(chars) and chars[end] == "":
        chars[end] = styles[end] = None
    if widths is None:
        chars[col:end] = text
        styles[col:end] = [style] * len(text)
        return
    at = col
    for char, width in zip(text, widths):
        chars[at], styles[at] = char, style
        if width == 2:
            chars[at + 1], styles[at + 1] = "", style
        at += width


def _differing(chars: list[str | None], styles: list[Style | None], old_chars: list[str | None],
               old_styles: list[Style | None]) -> Iterable[int]:
    """Columns whose known cell differs from what the screen shows."""
    if chars == old_chars and styles == old_styles:
        return ()
    return [col for col, (char, style, old_char, old_style) in enumerate(zip(chars, styles, old_chars, old_styles))
            if char is not None and (char != old_char or style != old_style)]


def _move(at: tuple[int, int] | None, row: int, col: int, columns: int, margins: bool = False) -> str:
    """The shortest cursor move from ``at`` (None: not known; column ``columns``: waiting to
    wrap, which only an absolute move leaves) to ``row``, ``col``: absolute, or up or down then
    across (never up or down once scroll margins were set: they stop such moves)."""
    absolute = f"\x1b[{row + 1}H" if col == 0 else f"\x1b[{row + 1};{col + 1}H"
    if at is None or at[1] >= columns or (margins and at[0] != row):
        return absolute
    down, across = row - at[0], col - at[1]
    vertical = "" if not down else _step(down, "B") if down > 0 else _step(-down, "A")
    horizontal = _step(across, "C") if across > 0 else "\b" * -across if across >= -3 else _step(-across, "D")
    relative = vertical + horizontal
    return relative if len(relative) < len(absolute) else absolute


def _step(count: int, final: str) -> str:
    return f"\x1b[{final}" if count == 1 else f"\x1b[{count}{final}"


def _bytes(chars: list[str]) -> int:
    return sum(len(char.encode()) for char in chars)


def filtered_driver(driver: type) -> type:
    """``driver`` (the one Textual chose) writing through a :class:`RepaintFilter`, when it is a
    POSIX terminal's; ``GPUCONSOLE_FULL_REPAINT=1`` keeps every repaint whole."""
    try:
        from textual.drivers.linux_driver import LinuxDriver
    except ImportError:  # not a POSIX terminal
        return driver
    if os.environ.get("GPUCONSOLE_FULL_REPAINT") or not issubclass(driver, LinuxDriver):
        return driver  # the headless and web drivers have no terminal to spare
    return with_repaint_filter(driver)


def with_repaint_filter(driver: type) -> type:
    """``driver`` (Textual's terminal driver class) writing through a :class:`RepaintFilter`."""

    class FilteredDriver(driver):  # type: ignore[misc,valid-type]
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, **kwargs)
            self.repaints = RepaintFilter()
            self._seen_size: tuple[int, int] | None = None

        def write(self, data: str) -> None:
            size = tuple(shutil.get_terminal_size((80, 25)))  # what the driver itself reads
            if size != self._seen_size:  # a resize repaints everything: start again
                self._seen_size = size
                self.repaints.resize(rows=size[1], columns=size[0])
            super().write(self.repaints(data))

    FilteredDriver.__name__ = FilteredDriver.__qualname__ = f"Filtered{driver.__name__}"
    return FilteredDriver
