"""A paste into the Jobs filter, in a real terminal: how long the key typed after it waits.

    .venv/bin/python benchmarks/paste.py                    # 5 runs of each case, the default demo
    .venv/bin/python benchmarks/paste.py --jobs 100000      # the same over 100,000 jobs
    .venv/bin/python benchmarks/paste.py --runs 3 --json

``gpuconsole --demo --no-db`` runs in a pseudo-terminal of 120×36 (``TERM=xterm-256color``);
what it writes is read as a terminal would show it (``pyte``, a VT emulator). ``3`` opens the
Jobs pane, and for each case ``/`` opens the filter, then:

- plain paste: 2,000 characters written to the terminal at once, as a terminal without
  bracketed paste (or a paste through ``tmux send-keys``, or a slow SSH link) delivers them: one
  key each; then one more character;
- bracketed paste: the same 2,000 characters between ``ESC [200~`` and ``ESC [201~``, as a
  terminal with bracketed paste mode (which Textual turns on) sends them; then the character;
- one key (the peer): the filter already holding the 2,000 characters (pasted, drawn, then
  0.3 s of rest), the character alone.

Measured, for each: from writing that last character to the moment the screen shows it in the
field (the end of the text with it, in the filter's line), wall time read as the bytes arrive.
Median over ``--runs`` runs with the range; the cases alternate in order from run to run. Esc
between cases clears the filter. Target: the key after a plain paste answered within 200 ms.

``--tree DIR`` runs the console from another copy of the source, a whole tree (for example
``mkdir /tmp/before && git archive HEAD~3 | tar -x -C /tmp/before``), for before/after figures in
one sitting.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import pty
import select
import signal
import statistics
import struct
import sys
import tempfile
import termios
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SIZE = (120, 36)
AT = "2026-11-16T14:00Z"
LENGTH = 2000
MARK = "Z"  # the key typed after the paste: never in the pasted text, so on screen it is that key
WORDS = ("llama-7b-finetune", "resnet50", "team-vision", "bert-base", "sweep", "a100", "eval-42")
TARGET_MS = 200.0
# Run gpuconsole from another copy of the source: its path comes first on argv.
FROM_TREE = ("import sys; tree = sys.argv.pop(1); sys.path.insert(0, {bench!r}); from big_fleet import use_tree; "
             "use_tree(tree); from gpuconsole.cli.main import main; sys.exit(main())")


def log(message: str) -> None:
    print(f"[paste] {message}", file=sys.stderr, flush=True)


def pasted_text(length: int = LENGTH) -> str:
    """Job-name-like words and spaces, ``length`` characters, without :data:`MARK`."""
    words = []
    while sum(len(w) + 1 for w in words) < length:
        words.append(WORDS[len(words) % len(WORDS)] + f"-{len(words) % 97}")
    return " ".join(words)[:length]


class Terminal:
    """A program in a pseudo-terminal, its screen kept as a terminal shows it (``pyte``)."""

    def __init__(self, argv: list[str], size: tuple[int, int], env: dict[str, str]) -> None:
        import pyte

        cols, rows = size
        self.screen = pyte.Screen(cols, rows)
        self.stream = pyte.ByteStream(self.screen)
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: a terminal of this size, then the program
            fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
            os.execvpe(argv[0], argv, env)
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        self._text: str | None = None

    def text(self) -> str:
        if self._text is None:
            self._text = "\n".join(self.screen.display)
        return self._text

    def write(self, data: bytes) -> float:
        """Write ``data`` as typed (all of it); the clock reading once it is written."""
        view = memoryview(data)
        while view:
            written = os.write(self.fd, view)
            view = view[written:]
            if view:  # the terminal's input buffer is full: let the program read it
                self._read(0.002)
        return time.perf_counter()

    def _read(self, wait: float) -> bool:
        ready, _, _ = select.select([self.fd], [], [], wait)
        if not ready:
            return False
        try:
            chunk = os.read(self.fd, 1 << 16)
        except OSError:
            chunk = b""
        if not chunk:
            raise RuntimeError(f"the console ended; its screen:\n{self.text()}")
        self.stream.feed(chunk)
        self._text = None
        return True

    def wait(self, done: Callable[[str], bool], timeout: float = 60.0) -> float:
        """Read the program's output until ``done(screen text)`` holds; the clock reading then."""
        deadline = time.perf_counter() + timeout
        while not done(self.text()):
            if time.perf_counter() > deadline:
                raise TimeoutError(f"not on screen within {timeout:g} s; the screen:\n{self.text()}")
            self._read(0.005)
        return time.perf_counter()

    def settle(self, seconds: float) -> None:
        """Keep reading (so the program never blocks writing) for ``seconds``."""
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            self._read(0.01)

    def close(self) -> None:
        try:
            os.kill(self.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        for _ in range(100):
            if os.waitpid(self.pid, os.WNOHANG)[0]:
                break
            try:
                self._read(0.02)
            except RuntimeError:
                pass
        else:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        os.close(self.fd)


def shows(words: str) -> Callable[[str], bool]:
    return lambda text: words in text


def one_case(term: Terminal, case: str, text: str) -> float:
    """Open the filter, run ``case``, and return the seconds the last key took to show."""
    term.write(b"/")
    term.wait(shows("filter: type to narrow"))
    term.settle(0.2)
    data = text.encode()
    tail = (text + MARK)[-16:]
    if case == "plain":
        term.write(data)
        sent = term.write(MARK.encode())
    elif case == "bracketed":
        term.write(b"\x1b[200~" + data + b"\x1b[201~")
        sent = term.write(MARK.encode())
    else:  # one key, the text already in the field
        term.write(b"\x1b[200~" + data + b"\x1b[201~")
        term.wait(shows(text[-16:]))
        term.settle(0.3)
        sent = term.write(MARK.encode())
    shown = term.wait(shows(tail))
    term.settle(0.2)
    term.write(b"\x1b")  # Esc: the filter cleared, the field closed
    term.wait(lambda screen: "filter:" not in screen and tail not in screen)
    term.settle(0.3)
    return shown - sent


def run(opts: argparse.Namespace) -> dict[str, list[float]]:
    command = [str(Path(sys.executable).parent / "gpuconsole")]
    if opts.tree:
        command = [sys.executable, "-c", FROM_TREE.format(bench=str(ROOT / "benchmarks")), opts.tree]
    argv = [*command, "--demo", "--no-db", "--demo-at", AT]
    if opts.jobs:
        argv += ["--demo-jobs", str(opts.jobs)]
    work = Path(tempfile.mkdtemp(prefix="gpuconsole-paste-"))
    env = {**os.environ, "TERM": "xterm-256color", "COLORTERM": "truecolor", "GPUCONSOLE_DB": str(work / "db.sqlite")}
    env.pop("NO_COLOR", None)
    text = pasted_text(opts.length)
    cases = ("plain", "bracketed", "key")
    times: dict[str, list[float]] = {case: [] for case in cases}
    term = Terminal(argv, SIZE, env)
    try:
        term.wait(lambda screen: "busy" in screen and "running" in screen, timeout=120)  # the overview, live
        term.write(b"3")
        term.wait(lambda screen: "Kubernetes:" in screen and "live" in screen, timeout=60)
        term.settle(1.0)
        for run_ in range(opts.runs):
            for case in cases if run_ % 2 == 0 else cases[::-1]:
                took = one_case(term, case, text)
                times[case].append(took)
                log(f"run {run_ + 1}: {case}: {took * 1000:.0f} ms")
    finally:
        term.close()
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="runs of each case (default 5)")
    parser.add_argument("--length", type=int, default=LENGTH, help=f"characters pasted (default {LENGTH:,})")
    parser.add_argument("--jobs", type=int, default=None, help="--demo-jobs N (default: the demo's own jobs)")
    parser.add_argument("--tree", help="run gpuconsole from this copy of its source instead of the checkout")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON after the table")
    opts = parser.parse_args()
    load_before = os.getloadavg()
    times = run(opts)
    load_after = os.getloadavg()
    names = {"plain": f"key after a plain paste of {opts.length:,} characters",
             "bracketed": f"key after a bracketed paste of {opts.length:,} characters",
             "key": "one key (no paste before it: the peer)"}
    print(f"{'case':<52} {'median':>9} {'range':>17}")
    rows = {}
    for case, values in times.items():
        ms = [1000 * v for v in values]
        med = statistics.median(ms)
        rows[case] = {"median_ms": med, "min_ms": min(ms), "max_ms": max(ms), "all_ms": ms}
        target = f"   target ≤ {TARGET_MS:.0f} ms: {'met' if med <= TARGET_MS else 'NOT met'}" if case == "plain" else ""
        print(f"{names[case]:<52} {med:>7.0f}ms {min(ms):>7.0f}–{max(ms):.0f} ms{target}")
    jobs = f"{opts.jobs:,} jobs" if opts.jobs else "the demo's jobs"
    print(f"{os.cpu_count()} CPUs; load average {load_before[0]:.2f} before, {load_after[0]:.2f} after; {jobs};"
          f" pty {SIZE[0]}×{SIZE[1]}; {opts.runs} runs")
    if opts.json:
        print(json.dumps({"jobs": opts.jobs, "length": opts.length, "cases": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
