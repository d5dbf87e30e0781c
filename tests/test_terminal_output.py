"""Only the cells that changed are written to the terminal, and the screen a terminal shows is the same.

Two terminal emulators (pyte) read the same output, one as Textual wrote it and one through
:class:`RepaintFilter`; their screens (characters, colours, styles, and the cursor when it is
shown) must be equal after every frame: for random frames, for Textual's own rendering of a table,
and for the real console's output in a pseudo-terminal.
"""

from __future__ import annotations

import asyncio
import os
import pty
import re
import select
import signal
import struct
import sys
import time

import pyte
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.cells import cell_len
from rich.console import Console
from textual.app import App, ComposeResult
from textual.widgets import DataTable

from gpuconsole.ui.sgr import PLAIN, apply, transition
from gpuconsole.ui.terminal import RepaintFilter

ROWS, COLS = 8, 24


def screens(rows: int = ROWS, cols: int = COLS) -> tuple[pyte.Screen, pyte.Stream, pyte.Screen, pyte.Stream]:
    raw, filtered = pyte.Screen(cols, rows), pyte.Screen(cols, rows)
    return raw, pyte.Stream(raw), filtered, pyte.Stream(filtered)


def tty(text: str) -> str:
    """What the terminal receives: the tty turns a line feed into CR LF (ONLCR, which Textual
    leaves on)."""
    return text.replace("\r\n", "\n").replace("\n", "\r\n")


def shown(screen: pyte.Screen) -> list:
    """What a person sees: every cell, and the cursor where it is shown (a hidden cursor's place
    is not seen)."""
    cells = [[(c.data, c.fg, c.bg, c.bold, c.italics, c.underscore, c.strikethrough, c.reverse, c.blink)
              for c in (screen.buffer[y][x] for x in range(screen.columns))] for y in range(screen.lines)]
    return cells + ([] if screen.cursor.hidden else [(screen.cursor.x, screen.cursor.y)])


MOVES = r"\x1b\[[0-9;]*[HABCD]|\x08"  # cursor moves: absolute, up, down, forward, back, backspace


def written(text: str) -> str:
    """The characters ``text`` writes, checking that all else in it is cursor moves and styles."""
    pieces = re.split(r"(\x1b\[[0-9;:?]*[A-Za-z]|\x08)", text)
    assert all(p[-1] in "HABCDm\x08" for p in pieces[1::2]), text
    return "".join(pieces[::2])


STYLES = ["\x1b[38;2;79;163;224;48;2;15;20;25m", "\x1b[1;38;2;240;93;94m", "\x1b[31m", "\x1b[7m", "",
          "\x1b[1m", "\x1b[22m", "\x1b[39;49m", "\x1b[3;4;9m", "\x1b[38;5;208;48;5;17m", "\x1b[0m", "\x1b[21m",
          "\x1b[53m"]
segment = st.tuples(st.sampled_from(STYLES), st.booleans(),
                    st.text(alphabet="ab│─ 12%$é中😀", min_size=1, max_size=6))
write = st.tuples(st.integers(1, ROWS), st.integers(1, COLS), st.lists(segment, min_size=0, max_size=3),
                  st.sampled_from(["", "", "", "\n", "\r\n", "\r", "\x1b[?25l", "\x1b[?25h", "\x1b[2J", "\x1b[K",
                                   "tail", "\x1b]0;title\x07", "\x1b[2;6r"]),
                  st.booleans())


def render(writes: list) -> str:
    """A frame as Textual writes one: a cursor move, styled text, a reset after most segments.
    Text is cut to the row's width unless ``spill`` (then it wraps, and the filter lets it go)."""
    out = []
    for row, col, segments, after, spill in writes:
        text, width = [], 0
        for sgr, reset, words in segments:
            while not spill and words and width + cell_len(words) > COLS - col + 1:
                words = words[:-1]
            width += cell_len(words)
            text.append(f"{sgr}{words}\x1b[0m" if reset else f"{sgr}{words}")
        out.append(f"\x1b[{row};{col}H{''.join(text)}{after}")
    return "".join(out)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(write, min_size=1, max_size=6), min_size=1, max_size=6), st.data())
def test_the_filtered_stream_shows_the_same_screen_after_every_frame(frames, data) -> None:
    raw, raw_in, filtered, filtered_in = screens()
    repaints = RepaintFilter(rows=ROWS, columns=COLS)
    for frame in frames:
        for _ in range(data.draw(st.integers(1, 2))):  # a frame, and maybe the same frame again
            text = render(frame)
            raw_in.feed(tty(text))
            filtered_in.feed(tty(repaints(text)))
            assert shown(filtered) == shown(raw)


def test_a_repeated_card_is_dropped_and_a_changed_number_costs_its_cell() -> None:
    repaints = RepaintFilter(rows=24, columns=80)
    card = "\x1b[4;1H\x1b[38;2;79;163;224m╭─ GPUs ─╮\x1b[0m\x1b[5;1H\x1b[38;2;216;222;233m 65% util \x1b[0m"
    assert written(repaints(card)) == "╭─ GPUs ─╮ 65% util "
    assert repaints(card) == ""
    assert written(repaints(card.replace("65%", "64%"))) == "4"
    assert repaints("\x1b[2J").endswith("\x1b[2J")  # a clear (in Textual's style): everything is written again after it
    assert "GPUs" in repaints(card)
    # Line feeds from row 23 reach the last row: the second one scrolls, so the screen is forgotten.
    assert "GPUs" in repaints("\x1b[23;1Hx\n\n" + card)


def test_cells_between_changes_are_written_when_cheaper_than_a_move() -> None:
    repaints = RepaintFilter(rows=24, columns=80)
    row = "\x1b[3;1H\x1b[31m 61 540/700W 61°C 540\x1b[0m"
    repaints("\x1b[?25l" + row)
    out = repaints(row.replace("61 540", "62 541").replace("61°C 540", "62°C 541"))
    # " 54" costs 3 bytes, a move 4 or more: written again. "°C 54" costs 6 bytes (° is two): a move.
    assert written(out) == "2 54121"
    assert len(re.findall(MOVES, out)) == 3


def test_a_colour_change_rewrites_only_the_recoloured_cells_with_the_shortest_style() -> None:
    repaints = RepaintFilter(rows=24, columns=80)
    line = "\x1b[7;1H\x1b[38;2;216;222;233;48;2;32;38;45m gpu-3 \x1b[0m\x1b[1;38;2;240;93;94;48;2;32;38;45m 82% \x1b[0m"
    repaints(line)
    out = repaints(line.replace("1;38;2;240;93;94", "38;2;242;177;52"))
    assert written(out) == " 82% "
    assert "\x1b[0m" not in out and "48;2;32;38;45" not in out  # bold and the foreground change, not the background


def test_styles_change_by_the_shortest_sequence_and_unknown_ones_are_rebuilt_after_a_reset() -> None:
    bold_dim_red = apply(PLAIN, "\x1b[1;2;38;2;240;93;94m")
    assert apply(apply(PLAIN, "\x1b[0m"), "\x1b[1;2;38;2;240;93;94m") == bold_dim_red == apply(bold_dim_red, "\x1b[1m")
    assert transition(bold_dim_red, apply(PLAIN, "\x1b[2;38;2;240;93;94m")) == "\x1b[22;2m"  # 22 clears both
    assert transition(bold_dim_red, apply(bold_dim_red, "\x1b[39m")) == "\x1b[39m"
    assert transition(bold_dim_red, PLAIN) == "\x1b[0m"
    curly = apply(apply(PLAIN, "\x1b[31m"), "\x1b[4:3m")  # a sub-parameter: kept as it came
    assert transition(PLAIN, curly) == "\x1b[31;4:3m"
    assert transition(bold_dim_red, curly) == "\x1b[0;31;4:3m"
    assert apply(curly, "\x1b[0;1m") == apply(PLAIN, "\x1b[1m")


@pytest.mark.parametrize("wide", ["名前", "🚀"])
def test_a_row_with_wide_characters_is_written_as_textual_wrote_it(wide) -> None:
    raw, raw_in, filtered, filtered_in = screens(4, 20)
    repaints = RepaintFilter(rows=4, columns=20)
    for value in ("65%", "64%", "64%", "7%"):
        frame = f"\x1b[2;1H\x1b[32m{wide}\x1b[0m\x1b[1m job {value}\x1b[0m\x1b[3;1Hplain {value}"
        raw_in.feed(frame)
        filtered_in.feed(repaints(frame))
        assert shown(filtered) == shown(raw)


class _GpuTable(App[None]):
    """A table as the GPUs pane draws one: keyed rows, one cell updated in place."""

    def compose(self) -> ComposeResult:
        yield DataTable()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns("GPU", "MODEL", "UTIL", "TEMP")
        table.add_row("gpu-0", "H100-80GB", "65%", "61°", key="gpu-0")
        table.add_row("gpu-1", "名前-A100", "12%", "40°", key="gpu-1")


def _textual_frames(changes: list[tuple[str, str, str]]) -> list[str]:
    """What Textual writes for a full repaint of :class:`_GpuTable` (true colour, 60×6), first as
    built, then after each ``(row, column, value)`` change."""

    async def frames() -> list[str]:
        app = _GpuTable()
        console = Console(color_system="truecolor", force_terminal=True, width=60, height=6)
        out = []
        async with app.run_test(size=(60, 6)) as pilot:
            table = app.query_one(DataTable)
            for change in [None, *changes]:
                if change is not None:
                    row, column, value = change
                    table.update_cell(row, list(table.columns)[int(column)], value)
                await pilot.pause()
                out.append(app.screen._compositor.render_update(full=True).render_segments(console))
        return out

    return asyncio.run(frames())


def test_textuals_table_frames_write_only_the_changed_cells_and_show_the_same_screen() -> None:
    first, same, one_number, both = _textual_frames([("gpu-0", "0", "gpu-0"), ("gpu-0", "2", "64%"),
                                                     ("gpu-1", "3", "41°")])
    raw, raw_in, filtered, filtered_in = screens(6, 60)
    repaints = RepaintFilter(rows=6, columns=60)
    outs = []
    for frame in ("\x1b[?25l" + first, same, one_number, both):  # Textual hides the cursor first
        outs.append(repaints(frame))
        raw_in.feed(tty(frame))
        filtered_in.feed(tty(outs[-1]))
        assert shown(filtered) == shown(raw)
    assert "65%" in written(outs[0].removeprefix("\x1b[?25l"))
    assert outs[1] == ""  # the same frame again writes nothing
    assert written(outs[2]) == "4" and len(re.findall(MOVES, outs[2])) == 1  # 65% → 64%: one move, one cell
    assert len(one_number) > 20 * len(outs[2])
    assert "41°" in written(outs[3])  # the row with a wide character is written as Textual wrote it


def _console_output(tmp_path, rows: int, cols: int, env: dict[str, str], keys: bytes, seconds: float) -> str:
    """What ``gpuconsole --demo`` writes to a pseudo-terminal of ``rows``×``cols`` in ``seconds``,
    ``keys`` typed once it has drawn its first screen."""
    pid, fd = pty.fork()
    if pid == 0:  # pragma: no cover - the child
        import fcntl
        import termios

        fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        child_env = {**os.environ, "TERM": "xterm-256color", "COLORTERM": "truecolor",
                     "GPUCONSOLE_DB": str(tmp_path / "db.sqlite")}
        child_env.pop("GPUCONSOLE_FULL_REPAINT", None)
        child_env.update(env)
        os.execvpe(sys.executable, [sys.executable, "-m", "gpuconsole", "--demo", "--no-db"], child_env)
    import fcntl
    import termios

    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    chunks: list[bytes] = []
    start = time.monotonic()
    try:
        while time.monotonic() - start < seconds:
            if keys and b"Overview" in b"".join(chunks):
                os.write(fd, keys)
                keys = b""
            if select.select([fd], [], [], 0.05)[0]:
                try:
                    chunks.append(os.read(fd, 65536))
                except OSError:
                    break
    finally:
        os.kill(pid, signal.SIGTERM)
        os.waitpid(pid, 0)
        os.close(fd)
    return b"".join(chunks).decode("utf-8", "replace")


@pytest.mark.slow
def test_the_consoles_own_output_shows_the_same_screen_through_the_filter(tmp_path) -> None:
    """The idle demo's GPUs pane at 80×24 in a pseudo-terminal, written in full
    (GPUCONSOLE_FULL_REPAINT): the same bytes through the filter draw the same screen, in far
    fewer bytes."""
    rows, cols = 24, 80
    text = _console_output(tmp_path, rows, cols, {"GPUCONSOLE_FULL_REPAINT": "1"}, b"2", 8)
    raw, raw_in, filtered, filtered_in = screens(rows, cols)
    repaints = RepaintFilter(rows=rows, columns=cols)
    raw_in.feed(text)
    out = repaints(text)
    filtered_in.feed(out)
    assert "NODE" in "".join(raw.display)
    assert shown(filtered) == shown(raw)
    assert len(out) < len(text) / 10


@pytest.mark.slow
def test_the_console_through_its_filter_draws_the_gpus_pane_whole(tmp_path) -> None:
    """The console as it runs (the filter on) for a few refreshes of the GPUs pane: every GPU row
    reads as a whole row, no cell left from an earlier value."""
    text = _console_output(tmp_path, 24, 80, {}, b"2", 8)
    screen = pyte.Screen(80, 24)
    pyte.Stream(screen).feed(text)
    lines = screen.display
    assert "NODE" in lines[3] and "UTIL" in lines[3]
    gpu = re.compile(r"^ \S+\s+\d+\s+\S+\s+[█░▏▎▍▌▋▊▉ ]{5}\s+\d+%\s+[\d.]+/\d+G\s+\d+°\s+\d+/\d+W\s+\S+\s*[▁▂▃▄▅▆▇█]?$")  # the scroll bar may end a row
    rows = [line for line in lines[4:] if line.startswith(" ip-") or line[1:2].isdigit()]  # EC2 and ACK nodes
    assert rows and all(gpu.match(line) for line in rows), rows
