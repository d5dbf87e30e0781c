"""One start-up of the console, timed from inside the process; run by ``startup_idle.py``.

The clock is read on the first line, before gpuconsole or Textual is imported. Two frames are
marked: the first paint (the console's frame, "starting", painted before the Console is built,
as ``gpuconsole`` does), and the first complete frame: every import, building the Console
(simulated world, Store) behind the first frame, mounting the panes and the first poll of every
source, up to the frame that shows a snapshot in which every source is ``live``. The app then
exits (``--idle 0``), or stays up untouched and reports the CPU time the whole process used
over ``--idle`` seconds after ``--settle`` seconds.

The result is one JSON object, printed on stdout or written to ``--out``. Every time in it is a
``time.perf_counter()`` reading, which on Linux is the system-wide monotonic clock, so the parent
can subtract its own reading taken just before it started this process.
"""

import time

T0 = time.perf_counter()

import argparse  # noqa: E402 - after the clock on purpose
import inspect  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
import traceback  # noqa: E402
from pathlib import Path  # noqa: E402


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=None, help="--demo-nodes N (default: the default demo fleet)")
    parser.add_argument("--seed", type=int, default=7, help="seed of the simulated world")
    parser.add_argument("--db", default=None, help="database path; without it the console runs with --no-db")
    parser.add_argument("--headless", action="store_true", help="run without a terminal (Textual's headless driver)")
    parser.add_argument("--width", type=int, default=120, help="terminal width when headless")
    parser.add_argument("--height", type=int, default=36, help="terminal height when headless")
    parser.add_argument("--idle", type=float, default=0.0, help="after the first complete frame, stay up this many seconds and measure CPU")
    parser.add_argument("--settle", type=float, default=3.0, help="seconds after start to skip before measuring idle CPU")
    parser.add_argument("--timeout", type=float, default=60.0, help="give up after this many seconds")
    parser.add_argument("--out", default=None, help="write the JSON result here instead of stdout")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    opts = _parse(argv)
    marks: dict[str, float] = {"start": T0}
    result: dict[str, object] = {"ok": False, "marks": marks, "pid": os.getpid()}
    try:
        from gpuconsole.cli.main import full_console, parse_args

        marks["cli_imported"] = time.perf_counter()
        cli = ["--demo", "--seed", str(opts.seed)]
        if opts.nodes:
            cli += ["--demo-nodes", str(opts.nodes)]
        cli += ["--db", opts.db] if opts.db else ["--no-db"]
        args = parse_args(cli)
        marks["args_parsed"] = time.perf_counter()
        from gpuconsole.ui.app import GpuConsoleApp

        marks["app_imported"] = time.perf_counter()

        def build():  # noqa: ANN202 - as gpuconsole.cli.main.run_console builds it, behind the first frame
            console = full_console(args)
            marks["console_built"] = time.perf_counter()
            return console

        class TimedApp(GpuConsoleApp):
            """The console, noting when the first frame and the first all-live frame are painted."""

            # Textual reads relative CSS paths next to the module that defines the class.
            CSS_PATH = [str(Path(inspect.getfile(GpuConsoleApp)).parent / path) for path in GpuConsoleApp.CSS_PATH]
            _live_seen = False

            def on_mount(self) -> None:
                # No super(): Textual calls GpuConsoleApp.on_mount itself, right after this one.
                marks["mount"] = time.perf_counter()
                self.call_after_refresh(self._first_paint)
                self.set_timer(opts.timeout, self._give_up)

            def _first_paint(self) -> None:
                marks.setdefault("first_paint", time.perf_counter())

            def show_snapshot(self, snapshot) -> None:  # noqa: ANN001 - FleetSnapshot
                super().show_snapshot(snapshot)
                if self._live_seen or self.core is None or not snapshot.sources:
                    return
                from gpuconsole.model import SourceState

                if all(status.state is SourceState.LIVE for status in snapshot.sources):
                    self._live_seen = True
                    marks["all_live_snapshot"] = time.perf_counter()
                    result["gpus"] = len(snapshot.gpus)
                    self.call_after_refresh(self._live_painted)

            def _live_painted(self) -> None:
                marks["live_painted"] = time.perf_counter()
                if opts.idle > 0:
                    wait = max(0.0, opts.settle - (time.perf_counter() - T0))
                    if wait:
                        self.set_timer(wait, self._idle_begin)
                    else:
                        self._idle_begin()
                else:
                    self.exit(0)

            def _idle_begin(self) -> None:
                self._cpu0 = _cpu_seconds()
                self._wall0 = time.perf_counter()
                marks["idle_begin"] = self._wall0
                self.set_timer(opts.idle, self._idle_end)

            def _idle_end(self) -> None:
                cpu = _cpu_seconds() - self._cpu0
                wall = time.perf_counter() - self._wall0
                marks["idle_end"] = time.perf_counter()
                result["idle_cpu_s"] = cpu
                result["idle_wall_s"] = wall
                result["idle_percent"] = 100.0 * cpu / wall
                self.exit(0)

            def _give_up(self) -> None:
                result["error"] = f"no complete frame within {opts.timeout:g} s"
                self.exit(1)

        app = TimedApp(build=build)
        marks["app_built"] = time.perf_counter()
        try:
            if opts.headless:
                app.run(headless=True, size=(opts.width, opts.height))
            else:
                app.run()
        finally:
            app.close_core()
        if app.boot_error is not None:
            raise app.boot_error
        marks["closed"] = time.perf_counter()
        result["ok"] = "live_painted" in marks and "error" not in result
        if not result["ok"] and "error" not in result:
            result["error"] = f"the app ended without a complete frame (return code {app.return_code})"
    except Exception as exc:  # noqa: BLE001 - reported to the parent as data
        result["error"] = f"{type(exc).__name__}: {exc}"
        result["traceback"] = traceback.format_exc()
    text = json.dumps(result)
    if opts.out:
        with open(opts.out, "w", encoding="utf-8") as handle:
            handle.write(text)
    else:
        sys.stdout.write(text + "\n")
    return 0 if result["ok"] else 1


def _cpu_seconds() -> float:
    """User + system CPU time of the whole process (every thread)."""
    times = os.times()
    return times.user + times.system


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
