"""What is written to the terminal: only the runs of text that changed.

Textual repaints a widget that changed as whole lines: a card whose one number moved is written
again top to bottom, border included, every second. Over SSH each byte crosses the link, and
htop (curses) writes only the cells that changed. :class:`RepaintFilter` sits between Textual and
the terminal and drops a positioned run of text (a cursor move, then styled text) that repeats,
byte for byte, the run last written at the same place, when nothing has been written over it
since. Everything else goes through unchanged, and anything it does not understand (a clear, a
scroll, an unknown sequence) makes it forget what it knew, so the screen is never left wrong:
at worst a run is written again.
"""

from __future__ import annotations

import re

from rich.cells import cell_len

# One token of Textual's output: a cursor move, a colour/style change, a private mode change,
# any other escape sequence, a run of plain text, or one control character.
_TOKEN = re.compile(
    r"(?P<cup>\x1b\[(?P<row>\d*)(?:;(?P<col>\d*))?H)"
    r"|(?P<sgr>\x1b\[[0-9;:]*m)"
    r"|(?P<mode>\x1b\[\?[0-9;]*[hl])"
    r"|(?P<esc>\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|.))"
    r"|(?P<text>[^\x00-\x1f\x7f]+)"
    r"|(?P<ctl>[\x00-\x1f\x7f])",
    re.DOTALL,
)
_RESETS = ("\x1b[0m", "\x1b[m")
# Private modes that change no cell: cursor shown or hidden, synchronized output, mouse and
# focus reporting, bracketed paste. Any other (the alternate screen, say) forgets the screen.
_HARMLESS_MODES = frozenset({"25", "2026", "1000", "1002", "1003", "1004", "1006", "1015", "2004"})


class RepaintFilter:
    """Drops repeated positioned runs from a terminal's output stream (see the module).

    Args:
        rows: the terminal's height (a line feed on the last row scrolls the screen).
    """

    def __init__(self, rows: int = 0, columns: int = 0) -> None:
        self.rows, self.columns = rows, columns
        self._written: dict[int, list[tuple[int, int, str]]] = {}  # row → [(column, width, run)]
        self._plain = True  # no style in force: the next run starts from the terminal's default
        self._cursor: str | None = None  # where a dropped run would have left the cursor
        self._cursor_end = (0, 0)  # … that is, this row and column

    def forget(self) -> None:
        """Forget what the screen holds (a resize, a full repaint, anything not understood)."""
        self._written.clear()

    def resize(self, rows: int, columns: int) -> None:
        self.rows, self.columns = rows, columns
        self.forget()

    def __call__(self, data: str) -> str:
        out: list[str] = []
        run: list[str] | None = None  # the open run: its cursor move, then its styles and text
        where = (0, 0)
        for token in _TOKEN.finditer(data):
            kind, value = token.lastgroup, token.group()
            if kind == "cup":
                if run is not None:
                    self._close(run, where, out)
                run = [value]
                where = (int(token.group("row") or 1), int(token.group("col") or 1))
            elif kind in ("sgr", "text") and run is not None:
                run.append(value)
            else:
                if run is not None:
                    self._close(run, where, out)
                    run = None
                self._place(out, value)
                self._pass(kind, value, where)
                out.append(value)
                if kind == "ctl" and value == "\n":
                    where = (where[0] + 1, where[1])  # the next line feed is one row lower
        if run is not None:
            self._close(run, where, out)
        self._place(out)
        return "".join(out)

    def _place(self, out: list[str], after: str = "") -> None:
        """Put the cursor where a dropped run would have left it, before anything that depends on
        where the cursor is (a line feed, text, the end of a frame). Before a carriage return or a
        line feed a cursor waiting to wrap in the last column moves as one standing in that
        column does, so a cursor move stands in for the segment written again."""
        if self._cursor is None:
            return
        row, column = self._cursor_end
        if after in ("\r", "\n") and row:
            out.append(f"\x1b[{row};{min(column, self.columns)}H")
        else:
            out.append(self._cursor)
        self._cursor = None

    def _pass(self, kind: str | None, value: str, where: tuple[int, int]) -> None:
        """Something outside a run goes through: forget the screen unless it changes no cell."""
        if kind == "mode" and set(value[3:-1].split(";")) <= _HARMLESS_MODES:
            return
        if kind == "ctl" and value == "\n" and where[0] < self.rows:
            return  # a line feed above the last row only moves the cursor
        if kind in ("ctl",) and value in ("\r", "\x07"):
            return
        if kind == "sgr":
            self._plain = value in _RESETS
            return
        self.forget()

    def _close(self, run: list[str], where: tuple[int, int], out: list[str]) -> None:
        """Write the run's styled segments, each unless it repeats the segment last written at its
        place over cells nothing has written over since (a table row whose one cell changed
        writes that cell); either way, note what the terminal now shows there."""
        row, col = where
        segments = _segments(run[1:])
        width = sum(w for _, w in segments)
        if col + width - 1 > self.columns:
            self.forget()  # past the right edge (or no known width): the terminal may wrap it onto the next row
        kept = self._written.setdefault(row, [])
        at = col
        placed = False  # the cursor stands where the next segment starts
        dropped: tuple[int, str] | None = None  # the last segment dropped: where it starts, itself

        def cursor_here() -> str:
            """What puts the cursor where the next segment starts. After a segment that ends in the
            last column the cursor waits to wrap, which no cursor move can do: that segment is
            written again then."""
            if at == col:
                return run[0]
            if at > self.columns and dropped is not None:
                return f"\x1b[{row};{dropped[0]}H{dropped[1]}"
            return f"\x1b[{row};{at}H"

        merge: str | None = None  # the last segment written, when the next may join it
        if not segments:
            out.append(run[0])
            placed = True
        for body, seg_width in segments:
            starts_plain = self._plain
            last_style = _last_style(body)
            ends_plain = (last_style in _RESETS) if last_style is not None else starts_plain
            self._plain = ends_plain
            if seg_width and starts_plain and ends_plain and (at, seg_width, body) in kept:
                placed, dropped = False, (at, body)
            else:
                if not placed:
                    out.append(cursor_here())
                    merge = None
                joined = _joined(merge, body) if placed and starts_plain else None
                if joined is not None:
                    out[-1] = joined
                else:
                    out.append(body)
                merge = out[-1] if ends_plain else None
                placed = True
                if seg_width:
                    kept[:] = [w for w in kept if w[0] + w[1] <= at or w[0] >= at + seg_width]
                    kept.append((at, seg_width, body))
            at += seg_width
        # Where dropped last segments would have left the cursor, written only if something other
        # than a cursor move follows (:meth:`_place`).
        self._cursor = None if placed else cursor_here()
        self._cursor_end = (row, at)


_SGR = re.compile(r"\x1b\[[0-9;:]*m")


def _joined(first: str | None, second: str) -> str | None:
    """Two adjacent segments written as one when they have the same single style: ``S a R`` and
    ``S b R`` (S a style from the default, R a reset) become ``S a b R``; None otherwise."""
    if first is None:
        return None
    head = _SGR.match(first)
    if head is None or head.group() in _RESETS or not second.startswith(head.group()):
        return None
    reset = next((r for r in _RESETS if first.endswith(r)), None)
    if reset is None or not second.endswith(reset):
        return None
    inner_first, inner_second = first[head.end():-len(reset)], second[head.end():-len(reset)]
    if "\x1b" in inner_first or "\x1b" in inner_second:
        return None  # a style change inside: not one style
    return f"{head.group()}{inner_first}{inner_second}{reset}"


def _last_style(body: str) -> str | None:
    found = _SGR.findall(body)
    return found[-1] if found else None


def _segments(tokens: list[str]) -> list[tuple[str, int]]:
    """A run's styles and text as segments ``(text with its styles, cells)``: each segment is the
    styles before a text, the text, and the resets right after it."""
    segments: list[tuple[str, int]] = []
    body: list[str] = []
    width = 0
    text_seen = False
    for token in tokens:
        if token.startswith("\x1b"):
            if text_seen and token not in _RESETS:  # a new style after text: a new segment
                segments.append(("".join(body), width))
                body, width, text_seen = [], 0, False
            body.append(token)
        else:
            if text_seen and body and body[-1] in _RESETS:  # text after a reset: a new segment
                segments.append(("".join(body), width))
                body, width = [], 0
            body.append(token)
            width += cell_len(token)
            text_seen = True
    if body:
        segments.append(("".join(body), width))
    return segments


def with_repaint_filter(driver: type) -> type:
    """``driver`` (Textual's terminal driver class) writing through a :class:`RepaintFilter`."""

    class FilteredDriver(driver):  # type: ignore[misc,valid-type]
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, **kwargs)
            self.repaints = RepaintFilter()
            self._seen_size: tuple[int, int] | None = None

        def write(self, data: str) -> None:
            size = self._get_terminal_size()
            if size != self._seen_size:  # a resize repaints everything: start again
                self._seen_size = size
                self.repaints.resize(rows=size[1], columns=size[0])
            super().write(self.repaints(data))

    FilteredDriver.__name__ = FilteredDriver.__qualname__ = f"Filtered{driver.__name__}"
    return FilteredDriver
