"""Only what changed is written to the terminal, and the screen a terminal shows is the same.

Two terminal emulators (pyte) read the same output, one as Textual wrote it and one through
:class:`RepaintFilter`; their screens (characters, colours, styles, cursor) must be equal after
every frame, for random frames and for the real console's output.
"""

from __future__ import annotations

import os
import pty
import select
import signal
import struct
import sys
import time

import pyte
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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
    return [[(c.data, c.fg, c.bg, c.bold, c.reverse) for c in (screen.buffer[y][x] for x in range(screen.columns))]
            for y in range(screen.lines)] + [(screen.cursor.x, screen.cursor.y, screen.cursor.hidden)]


STYLES = ["\x1b[38;2;79;163;224;48;2;15;20;25m", "\x1b[1;38;2;240;93;94m", "\x1b[31m", "\x1b[7m", ""]
segment = st.tuples(st.sampled_from(STYLES), st.text(alphabet="ab│─ 12%$é", min_size=1, max_size=6))
write = st.tuples(st.integers(1, ROWS), st.integers(1, COLS), st.lists(segment, min_size=0, max_size=3),
                  st.sampled_from(["", "", "", "\r\n", "\n", "\r", "\x1b[?25l", "\x1b[2J", "tail"]))


def render(writes: list) -> str:
    """A frame as Textual writes one: a cursor move, styled text reset after each segment."""
    out = []
    for row, col, segments, after in writes:
        text, width = [], 0
        for sgr, words in segments:
            words = words[: max(0, COLS - col + 1 - width)]
            width += len(words)
            text.append(f"{sgr}{words}\x1b[0m" if sgr else words)
        out.append(f"\x1b[{row};{col}H{''.join(text)}{after}")
    return "".join(out)


@settings(max_examples=200, deadline=None)
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


def test_a_repeated_line_is_dropped_and_a_changed_one_is_written() -> None:
    repaints = RepaintFilter(rows=24, columns=80)
    card = "\x1b[4;1H\x1b[38;2;79;163;224m╭─ GPUs ─╮\x1b[0m\x1b[5;1H\x1b[38;2;216;222;233m 65% util \x1b[0m"
    assert repaints(card) == card
    again = repaints(card.replace("65%", "64%"))
    assert "GPUs" not in again and "64%" in again
    assert repaints("\x1b[2J") == "\x1b[2J"  # a clear: everything is written again after it
    assert "GPUs" in repaints(card)
    # Line feeds from row 23 reach the last row: the second one scrolls, so the screen is forgotten.
    assert "GPUs" in repaints("\x1b[23;1Hx\n\n" + card)


@pytest.mark.slow
def test_the_consoles_own_output_shows_the_same_screen_through_the_filter(tmp_path) -> None:
    """The idle demo at 80×24 in a pseudo-terminal, written in full (GPUCONSOLE_FULL_REPAINT):
    the same bytes through the filter draw the same screen, in fewer bytes."""
    rows, cols = 24, 80
    pid, fd = pty.fork()
    if pid == 0:  # pragma: no cover - the child
        import fcntl
        import termios

        fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        env = {**os.environ, "TERM": "xterm-256color", "COLORTERM": "truecolor", "GPUCONSOLE_FULL_REPAINT": "1",
               "GPUCONSOLE_DB": str(tmp_path / "db.sqlite")}
        os.execvpe(sys.executable, [sys.executable, "-m", "gpuconsole", "--demo", "--no-db"], env)
    import fcntl
    import termios

    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    chunks: list[bytes] = []
    start = time.monotonic()
    try:
        while time.monotonic() - start < 8:
            if select.select([fd], [], [], 0.05)[0]:
                try:
                    chunks.append(os.read(fd, 65536))
                except OSError:
                    break
    finally:
        os.kill(pid, signal.SIGTERM)
        os.waitpid(pid, 0)
        os.close(fd)
    text = b"".join(chunks).decode("utf-8", "replace")
    raw, raw_in, filtered, filtered_in = screens(rows, cols)
    repaints = RepaintFilter(rows=rows, columns=cols)
    raw_in.feed(text)
    out = repaints(text)
    filtered_in.feed(out)
    assert "GPUs" in "".join(raw.display)
    assert shown(filtered) == shown(raw)
    assert len(out) < len(text)
