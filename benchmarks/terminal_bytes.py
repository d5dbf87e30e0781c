"""Bytes per second the console writes to its terminal while nothing happens, next to htop's.

    .venv/bin/python benchmarks/terminal_bytes.py                  # 80×24 and 200×50, 20 s each
    .venv/bin/python benchmarks/terminal_bytes.py --seconds 10 --json

Over SSH every byte a screen writes crosses the link, so an idle console should write only what
changed. Each program runs in a pseudo-terminal of the given size (``TERM=xterm-256color``), the
first ``--settle`` seconds are skipped, and then every byte it writes is counted over
``--seconds``. Rows: ``gpuconsole --demo --no-db`` on the overview and on the GPUs pane (``2``
typed once it runs), and ``htop -d 10`` (htop refreshing once a second, as the console does) as
the peer measured in the same run. Target: the console at 80×24 writes no more than htop.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import pty
import select
import shutil
import signal
import struct
import sys
import tempfile
import termios
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SIZES = ((80, 24), (200, 50))


def run_in_pty(argv: list[str], size: tuple[int, int], settle: float, seconds: float, keys: bytes = b"",
               env: dict[str, str] | None = None) -> float:
    """Bytes per second ``argv`` writes to a pseudo-terminal of ``size`` after ``settle`` seconds."""
    cols, rows = size
    pid, fd = pty.fork()
    if pid == 0:  # the child: a terminal of this size, then the program
        fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        os.execvpe(argv[0], argv, env or os.environ)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    counted = 0
    start = time.monotonic()
    typed = not keys
    try:
        while True:
            now = time.monotonic()
            if not typed and now - start >= settle / 2:
                os.write(fd, keys)
                typed = True
            if now - start >= settle + seconds:
                break
            ready, _, _ = select.select([fd], [], [], 0.05)
            if not ready:
                continue
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # the program ended
                raise RuntimeError(f"{argv[0]} ended early") from None
            if now - start >= settle:
                counted += len(chunk)
    finally:
        os.kill(pid, signal.SIGTERM)
        for _ in range(50):
            if os.waitpid(pid, os.WNOHANG)[0]:
                break
            try:  # keep draining so a blocked writer can exit
                while select.select([fd], [], [], 0.02)[0] and os.read(fd, 65536):
                    pass
            except OSError:
                pass
        else:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        os.close(fd)
    return counted / seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="seconds counted per row (default 20)")
    parser.add_argument("--settle", type=float, default=5.0, help="seconds skipped after start (default 5)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON after the table")
    args = parser.parse_args()
    gpuconsole = str(Path(sys.executable).parent / "gpuconsole")
    htop = shutil.which("htop")
    work = Path(tempfile.mkdtemp(prefix="gpuconsole-bytes-"))
    env = {**os.environ, "TERM": "xterm-256color", "COLORTERM": "truecolor", "GPUCONSOLE_DB": str(work / "db.sqlite"),
           "HTOPRC": str(work / "htoprc")}
    env.pop("NO_COLOR", None)
    rows: list[dict[str, object]] = []
    for size in SIZES:
        cases = [("gpuconsole --demo, overview", [gpuconsole, "--demo", "--no-db"], b""),
                 ("gpuconsole --demo, GPUs pane", [gpuconsole, "--demo", "--no-db"], b"2")]
        if htop:
            cases.append(("htop -d 10 (1 Hz)", [htop, "-d", "10"], b""))
        for name, argv, keys in cases:
            rate = run_in_pty(argv, size, args.settle, args.seconds, keys, env)
            rows.append({"program": name, "size": f"{size[0]}x{size[1]}", "bytes_per_s": round(rate)})
            print(f"[bytes] {name} at {size[0]}×{size[1]}: {rate:,.0f} B/s", file=sys.stderr, flush=True)
    shutil.rmtree(work, ignore_errors=True)
    print(f"{'program':<30} {'terminal':>9} {'bytes/s':>9}")
    for row in rows:
        print(f"{row['program']:<30} {row['size']:>9} {row['bytes_per_s']:>9,}")
    if not htop:
        print("htop is not installed: no peer row (apt-get install htop)")
    if args.json:
        print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
