"""The console's screen as a person sees it, captured through a pseudo-terminal and ``pyte``.

    python -m benchmarks.device_screen --rows 24 --cols 80 --out screen.txt [--key 2] -- CMD...

Starts CMD in a pseudo-terminal of ROWS×COLS (as tests/test_terminal_output.py does), waits for
its first screen (the word ``Overview``), types KEY (``2``: the GPUs pane), lets it refresh for
``--settle`` seconds, ends it (SIGTERM, then SIGKILL), and writes the emulated screen to OUT as
exactly ROWS lines of text. Exit status 0 with a screen, 1 when the first screen never came.
"""

from __future__ import annotations

import argparse
import os
import pty
import select
import signal
import struct
import sys
import time
from pathlib import Path


def run_in_pty(cmd: list[str], rows: int, cols: int, key: bytes, first: bytes, wait_s: float,
               settle_s: float) -> tuple[bytes, bool]:
    """What ``cmd`` writes to the terminal; and whether its first screen came within ``wait_s``."""
    import fcntl
    import termios

    size = struct.pack("HHHH", rows, cols, 0, 0)
    pid, fd = pty.fork()
    if pid == 0:  # pragma: no cover - the child
        fcntl.ioctl(0, termios.TIOCSWINSZ, size)
        env = {**os.environ, "TERM": "xterm-256color", "COLORTERM": "truecolor"}
        env.pop("GPUCONSOLE_FULL_REPAINT", None)
        try:
            os.execvpe(cmd[0], cmd, env)
        finally:
            os._exit(127)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, size)
    chunks: list[bytes] = []
    seen, start, typed_at = b"", time.monotonic(), None
    try:
        while True:
            now = time.monotonic()
            if typed_at is None and first in seen:
                if key:
                    os.write(fd, key)
                typed_at = now
            if typed_at is None and now - start > wait_s:
                break
            if typed_at is not None and now - typed_at > settle_s:
                break
            if select.select([fd], [], [], 0.05)[0]:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:
                    break
                if not chunk:
                    break
                chunks.append(chunk)
                seen = (seen + chunk)[-65536:] if typed_at is None else seen
    finally:
        _end(pid)
        os.close(fd)
    return b"".join(chunks), typed_at is not None


def _end(pid: int) -> None:
    """SIGTERM, then SIGKILL after 5 s; the child is reaped either way."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done:
            return
        time.sleep(0.05)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    os.waitpid(pid, 0)


def screen_text(output: bytes, rows: int, cols: int) -> list[str]:
    """The screen a terminal of ``rows``×``cols`` shows after ``output``: one string a row."""
    import pyte

    screen = pyte.Screen(cols, rows)
    pyte.Stream(screen).feed(output.decode("utf-8", "replace"))
    return [line.rstrip() for line in screen.display]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    cut = argv.index("--") if "--" in argv else len(argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, required=True)
    parser.add_argument("--cols", type=int, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--key", default="2", help="typed after the first screen ('' for none; default 2)")
    parser.add_argument("--first", default="Overview", help="text of the first screen (default Overview)")
    parser.add_argument("--wait", type=float, default=30.0, help="seconds to wait for the first screen")
    parser.add_argument("--settle", type=float, default=4.0, help="seconds to run after the key")
    args = parser.parse_args(argv[:cut])
    cmd = argv[cut + 1:]
    if not cmd:
        parser.error("the command to run follows --")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a time limit's TERM still ends the console
    t0 = time.monotonic()
    output, drawn = run_in_pty(cmd, args.rows, args.cols, args.key.encode(), args.first.encode(), args.wait,
                               args.settle)
    lines = screen_text(output, args.rows, args.cols)
    args.out.write_text("\n".join(lines) + "\n")
    print(f"{args.cols}×{args.rows}: {len(output)} bytes in {time.monotonic() - t0:.1f} s"
          + ("" if drawn else f"; no first screen ({args.first!r}) within {args.wait:g} s") + f" → {args.out}")
    border = "+" + "-" * args.cols + "+"
    print("\n".join([border, *(f"|{line:<{args.cols}}|" for line in lines), border]))
    return 0 if drawn else 1


if __name__ == "__main__":
    raise SystemExit(main())
