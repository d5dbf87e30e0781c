"""Start-up time and idle CPU of the gpuconsole demo, as one table of medians.

Figures, each for the default demo fleet and for a simulated fleet of about 1,024 GPUs:

* first complete frame: from process start to the first painted frame whose snapshot has every
  source ``live`` (real data, not the empty first paint). Measured in a child process that reads
  the clock before importing gpuconsole or Textual, runs the app headless and exits; the cost of
  starting the interpreter (``python -c pass``, timed from here) is added in. With ``--no-db``
  and with a Store in a temporary directory (primed by one uncounted run, like a returning user's
  cache).
* idle CPU at 1 Hz: percent of one core used by the whole ``gpuconsole --demo`` process (UI, Hub
  threads, simulated world, Store writes) left untouched at the default 1 s interval, in a real
  terminal (tmux) of 80x24 and of 160x48, sampled with psutil after start-up settles. The same
  figure for the app run headless in-process is given for comparison (no terminal output).

Run it with the project's interpreter::

    .venv/bin/python benchmarks/startup_idle.py            # full run, a few minutes
    .venv/bin/python benchmarks/startup_idle.py --quick    # one run each, 5 s of idle
    .venv/bin/python benchmarks/startup_idle.py --json     # the table, then every raw number
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
CHILD = HERE / "first_frame_child.py"
LARGE_FLEET_GPUS = 1024
FIRST_FRAME_TARGET_S = 0.5
IDLE_TARGET_PERCENT = 3.0
TERMINAL_SIZES = ((80, 24), (160, 48))
HEADLESS_IDLE_SIZE = (80, 24)
CHILD_TIMEOUT_S = 120.0


def log(message: str) -> None:
    """Progress goes to stderr, so stdout holds only the table (and the JSON)."""
    print(f"[bench] {message}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class ChildEnv:
    """The environment every measured gpuconsole process gets: this one, less and plus a few names."""

    unset: tuple[str, ...]
    extra: dict[str, str]

    @classmethod
    def make(cls, work: Path, pyc_cache: bool) -> ChildEnv:
        unset = ["NO_COLOR", "GPUCONSOLE_LOG"]
        extra: dict[str, str] = {}
        if pyc_cache:
            # As after `pip install`, which compiles every module once: imports read bytecode.
            unset.append("PYTHONDONTWRITEBYTECODE")
            extra["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
        return cls(tuple(unset), extra)

    def environ(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in self.unset}
        env.update(self.extra)
        return env

    def command_prefix(self) -> list[str]:
        """``env -u NAME … NAME=VALUE …`` for a shell command line."""
        words = ["env"]
        for name in self.unset:
            words += ["-u", name]
        words += [f"{k}={shlex.quote(v)}" for k, v in self.extra.items()]
        return words


# ---------------------------------------------------------------------- the two fleets
@dataclass(frozen=True)
class Fleet:
    key: str
    nodes: int | None  # None: the default demo fleet
    gpus: int

    @property
    def cli(self) -> list[str]:
        return ["--demo-nodes", str(self.nodes)] if self.nodes else []

    @property
    def title(self) -> str:
        if self.nodes is None:
            return f"default demo ({self.gpus:,} GPUs)"
        return f"{LARGE_FLEET_GPUS:,}-GPU demo ({self.gpus:,} GPUs, {self.nodes} nodes)"


def fleet_gpus(seed: int, nodes: int | None) -> int:
    from gpuconsole.backends.sim.world import SimWorld

    return len(SimWorld(seed=seed, nodes=nodes).gpu_reading().gpus)


def pick_fleets(seed: int, nodes_override: int | None) -> tuple[Fleet, Fleet]:
    """The default demo, and the smallest ``--demo-nodes N`` with at least 1,024 GPUs."""
    default = Fleet("default", None, fleet_gpus(seed, None))
    if nodes_override is not None:
        return default, Fleet("large", nodes_override, fleet_gpus(seed, nodes_override))
    nodes = math.ceil(LARGE_FLEET_GPUS / 8)  # no node has more than 8 GPUs
    while (gpus := fleet_gpus(seed, nodes)) < LARGE_FLEET_GPUS:
        nodes += 1
    return default, Fleet("large", nodes, gpus)


# ---------------------------------------------------------------------- results
@dataclass
class Figure:
    """Several runs of one measurement; ``note`` says why there are none."""

    unit: str
    values: list[float] = field(default_factory=list)
    runs: list[dict] = field(default_factory=list)
    note: str | None = None

    @property
    def median(self) -> float | None:
        return statistics.median(self.values) if self.values else None

    def cell(self) -> str:
        if self.median is None:
            return "n/a"
        if self.unit == "s":
            return f"{self.median:.2f} s"
        return f"{self.median:.1f} % of one core"

    def as_json(self) -> dict:
        data: dict[str, object] = {"unit": self.unit, "median": self.median, "values": self.values, "runs": self.runs}
        if self.values:
            data["min"] = min(self.values)
            data["max"] = max(self.values)
        if self.note:
            data["note"] = self.note
        return data


# ---------------------------------------------------------------------- first complete frame
def interpreter_start(python: str, runs: int, env: ChildEnv) -> list[float]:
    """Wall time of ``python -c pass`` from this process: the start-up the child cannot see."""
    subprocess.run([python, "-c", "pass"], check=True, env=env.environ())  # fills the bytecode cache
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([python, "-c", "pass"], check=True, env=env.environ())
        times.append(time.perf_counter() - t0)
    return times


def textual_floor(python: str, env: ChildEnv, runs: int, interp_s: float) -> list[float]:
    """First-frame time of a bare Textual app of the same shape: what no gpuconsole change can beat."""
    script = Path(__file__).resolve().parent / "textual_floor.py"
    times = []
    for _ in range(runs + 1):
        out = subprocess.run([python, str(script)], capture_output=True, text=True, env=env.environ(), check=True,
                             timeout=CHILD_TIMEOUT_S)
        times.append(float(out.stdout.strip().splitlines()[-1]) + interp_s)
    return times[1:]  # the first run fills the bytecode cache


def run_child(python: str, args: list[str], env: ChildEnv, timeout: float = CHILD_TIMEOUT_S) -> tuple[dict, float]:
    """Run the timed child once; returns its JSON result and the clock reading taken before it started."""
    spawned = time.perf_counter()
    proc = subprocess.run(
        [python, str(CHILD), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env.environ(),
        check=False,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
        raise RuntimeError(f"the child printed no result (exit {proc.returncode}): {' | '.join(tail)}")
    result = json.loads(lines[-1])
    if not result.get("ok"):
        raise RuntimeError(f"the child failed: {result.get('error')}")
    return result, spawned


def first_frame_once(python: str, env: ChildEnv, fleet: Fleet, seed: int, db: Path | None, interp_s: float) -> dict:
    args = ["--headless", "--seed", str(seed), "--width", "120", "--height", "36"]
    if fleet.nodes:
        args += ["--nodes", str(fleet.nodes)]
    if db is not None:
        args += ["--db", str(db)]
    result, spawned = run_child(python, args, env)
    marks = result["marks"]
    start = marks["start"]
    phases = {name: round(value - start, 4) for name, value in marks.items()}
    in_child = marks["live_painted"] - start
    return {
        "seconds": interp_s + in_child,
        "in_process_s": in_child,
        "interpreter_start_s": interp_s,
        # perf_counter is the system-wide monotonic clock on Linux: a direct cross-check.
        "spawn_to_frame_s": marks["live_painted"] - spawned if sys.platform.startswith("linux") else None,
        "gpus_on_screen": result.get("gpus"),
        "phases_s": phases,
    }


def measure_first_frame(python: str, env: ChildEnv, fleets: tuple[Fleet, ...], seed: int, runs: int, work: Path) -> tuple[dict, list[float]]:
    interp = interpreter_start(python, max(5, runs), env)
    interp_s = statistics.median(interp)
    log(f"interpreter start (python -c pass): {interp_s * 1000:.0f} ms")
    figures: dict[tuple[str, str], Figure] = {}
    dbs: dict[str, Path] = {}
    for fleet in fleets:
        figures[(fleet.key, "no_db")] = Figure("s")
        figures[(fleet.key, "db")] = Figure("s")
        dbs[fleet.key] = work / f"startup-{fleet.key}" / "gpuconsole.db"
        # One uncounted run fills the cache, as on every start after a user's first.
        try:
            cold = first_frame_once(python, env, fleet, seed, dbs[fleet.key], interp_s)
            figures[(fleet.key, "db")].runs.append({"priming_run_fills_db_and_bytecode_caches": cold})
        except (RuntimeError, subprocess.TimeoutExpired) as exc:
            figures[(fleet.key, "db")].note = f"priming run failed: {exc}"
    for i in range(runs):
        for fleet in fleets:
            for mode in ("no_db", "db"):
                figure = figures[(fleet.key, mode)]
                db = dbs[fleet.key] if mode == "db" else None
                try:
                    run = first_frame_once(python, env, fleet, seed, db, interp_s)
                except (RuntimeError, subprocess.TimeoutExpired) as exc:
                    figure.note = str(exc)
                    log(f"first frame, {fleet.key}, {mode}: {exc}")
                    continue
                figure.values.append(run["seconds"])
                figure.runs.append(run)
                log(f"first frame {i + 1}/{runs}, {fleet.key} fleet, {mode.replace('_', ' ')}: {run['seconds']:.3f} s")
    return {f"{key}:{mode}": fig for (key, mode), fig in figures.items()}, interp


# ---------------------------------------------------------------------- idle CPU, headless
def measure_idle_headless(python: str, env: ChildEnv, fleets: tuple[Fleet, ...], seed: int, runs: int, seconds: float, settle: float, work: Path) -> dict[str, Figure]:
    figures = {}
    width, height = HEADLESS_IDLE_SIZE
    for fleet in fleets:
        figure = figures[fleet.key] = Figure("%")
        for i in range(runs):
            db = work / f"idle-headless-{fleet.key}-{i}" / "gpuconsole.db"
            args = ["--headless", "--seed", str(seed), "--width", str(width), "--height", str(height), "--db", str(db), "--idle", str(seconds), "--settle", str(settle)]
            if fleet.nodes:
                args += ["--nodes", str(fleet.nodes)]
            try:
                result, _ = run_child(python, args, env, timeout=CHILD_TIMEOUT_S + settle + seconds)
            except (RuntimeError, subprocess.TimeoutExpired) as exc:
                figure.note = str(exc)
                log(f"idle headless, {fleet.key}: {exc}")
                continue
            figure.values.append(result["idle_percent"])
            figure.runs.append({k: result[k] for k in ("idle_percent", "idle_cpu_s", "idle_wall_s")})
            log(f"idle headless {i + 1}/{runs}, {fleet.key} fleet: {result['idle_percent']:.1f} %")
    return figures


# ---------------------------------------------------------------------- idle CPU in tmux
class Tmux:
    """A private tmux server (its own socket, no user config) holding one session."""

    def __init__(self, tmux: str, width: int, height: int) -> None:
        self.tmux = tmux
        self.socket = f"gpuconsole-bench-{os.getpid()}"
        self.width = width
        self.height = height
        self.socket_path = ""

    def __call__(self, *args: str, check: bool = True) -> str:
        proc = subprocess.run([self.tmux, "-L", self.socket, "-f", "/dev/null", *args], capture_output=True, text=True, timeout=20, check=False)
        if check and proc.returncode != 0:
            raise RuntimeError(f"tmux {' '.join(args[:1])} failed: {proc.stderr.strip()}")
        return proc.stdout

    def start(self, command: str) -> int:
        """Open an ``width``×``height`` pane running ``command``; returns the pane's PID."""
        self("new-session", "-d", "-s", "bench", "-x", str(self.width), "-y", str(self.height), "sleep 600")
        self.socket_path = self("display-message", "-p", "#{socket_path}").strip()
        self("set-option", "-g", "default-terminal", "tmux-256color")
        self("set-option", "-t", "bench", "remain-on-exit", "on")
        self("respawn-pane", "-k", "-t", "bench", command)
        return int(self("display-message", "-p", "-t", "bench", "#{pane_pid}").strip())

    def size(self) -> str:
        return self("display-message", "-p", "-t", "bench", "#{pane_width}x#{pane_height}").strip()

    def server_pid(self) -> int:
        return int(self("display-message", "-p", "#{pid}").strip())

    def screen(self) -> str:
        return self("capture-pane", "-p", "-t", "bench", check=False)

    def dead(self) -> bool:
        return self("display-message", "-p", "-t", "bench", "#{pane_dead}", check=False).strip() == "1"

    def kill(self) -> None:
        self("kill-server", check=False)
        if self.socket_path:
            Path(self.socket_path).unlink(missing_ok=True)


@contextmanager
def console_in_tmux(tmux_bin: str, gpuconsole: str, env: ChildEnv, fleet: Fleet, seed: int, size: tuple[int, int], db: Path) -> Iterator[tuple[Tmux, int]]:
    """``gpuconsole --demo`` in a fresh tmux terminal; always torn down, even on error."""
    import psutil

    tmux = Tmux(tmux_bin, *size)
    command = " ".join(
        [
            "exec",
            *env.command_prefix(),
            "COLORTERM=truecolor",
            f"GPUCONSOLE_DB={shlex.quote(str(db))}",
            shlex.quote(gpuconsole),
            "--demo",
            "--seed",
            str(seed),
            *fleet.cli,
        ]
    )
    pid = None
    try:
        pid = tmux.start(command)
        yield tmux, pid
    finally:
        tmux.kill()
        if pid is not None:
            try:
                proc = psutil.Process(pid)
                proc.terminate()
                proc.wait(3)
            except psutil.TimeoutExpired:
                proc.kill()
            except psutil.Error:
                pass


def idle_in_tmux_once(tmux_bin: str, gpuconsole: str, env: ChildEnv, fleet: Fleet, seed: int, size: tuple[int, int], seconds: float, settle: float, db: Path) -> dict:
    import psutil

    with console_in_tmux(tmux_bin, gpuconsole, env, fleet, seed, size, db) as (tmux, pid):
        try:
            proc = psutil.Process(pid)
        except psutil.NoSuchProcess:
            time.sleep(0.5)
            raise RuntimeError("gpuconsole exited at once: " + _last_lines(tmux.screen())) from None
        deadline = time.monotonic() + 5.0
        try:
            while proc.name() == "env" and time.monotonic() < deadline:  # until env has exec'd gpuconsole
                time.sleep(0.01)
            cmdline = proc.cmdline()
        except psutil.Error:
            time.sleep(0.5)
            raise RuntimeError("gpuconsole exited at once: " + _last_lines(tmux.screen())) from None
        if "gpuconsole" not in " ".join(cmdline) or proc.name() == "env":
            raise RuntimeError(f"the pane runs {cmdline!r}, not gpuconsole")
        actual = tmux.size()
        if actual != f"{size[0]}x{size[1]}":
            raise RuntimeError(f"tmux made a {actual} pane, not {size[0]}x{size[1]}")
        server = psutil.Process(tmux.server_pid())
        time.sleep(max(0.0, settle - (time.time() - proc.create_time())))
        if tmux.dead() or not proc.is_running():
            raise RuntimeError("gpuconsole exited during start-up: " + _last_lines(tmux.screen()))
        cpu0, server0, wall0 = _cpu(proc), _cpu(server), time.perf_counter()
        time.sleep(seconds)
        cpu1, server1, wall1 = _cpu(proc), _cpu(server), time.perf_counter()
        screen = tmux.screen()
        if tmux.dead() or not proc.is_running():
            raise RuntimeError("gpuconsole exited while idle: " + _last_lines(screen))
        if "live" not in screen:
            raise RuntimeError("no source shows live on screen: " + _last_lines(screen))
        wall = wall1 - wall0
        return {
            "percent": 100.0 * (cpu1 - cpu0) / wall,
            "cpu_s": cpu1 - cpu0,
            "wall_s": wall,
            "threads": proc.num_threads(),
            "rss_mib": proc.memory_info().rss / 2**20,
            "tmux_server_percent": 100.0 * (server1 - server0) / wall,
        }


def _cpu(proc) -> float:  # noqa: ANN001 - psutil.Process
    times = proc.cpu_times()
    return times.user + times.system


def _last_lines(screen: str, count: int = 3) -> str:
    lines = [line.strip() for line in screen.splitlines() if line.strip()]
    return " | ".join(lines[-count:]) or "(empty screen)"


def measure_idle_tmux(gpuconsole: str | None, env: ChildEnv, fleets: tuple[Fleet, ...], seed: int, runs: int, seconds: float, settle: float, work: Path) -> dict[str, Figure]:
    figures = {f"{fleet.key}:{w}x{h}": Figure("%") for fleet in fleets for (w, h) in TERMINAL_SIZES}
    tmux_bin = shutil.which("tmux")
    why = None
    if tmux_bin is None:
        why = "tmux not found: idle CPU in a terminal skipped (install tmux)"
    elif gpuconsole is None:
        why = "the gpuconsole command was not found next to this interpreter nor on PATH"
    else:
        try:
            import psutil  # noqa: F401
        except ImportError:
            why = "psutil is not installed: idle CPU in a terminal skipped"
    if why:
        for figure in figures.values():
            figure.note = why
        log(why)
        return figures
    for i in range(runs):
        for fleet in fleets:
            for size in TERMINAL_SIZES:
                figure = figures[f"{fleet.key}:{size[0]}x{size[1]}"]
                db = work / f"idle-tmux-{fleet.key}-{size[0]}x{size[1]}-{i}" / "gpuconsole.db"
                try:
                    run = idle_in_tmux_once(tmux_bin, gpuconsole, env, fleet, seed, size, seconds, settle, db)
                except Exception as exc:  # noqa: BLE001 - one failed run is a note, not a crash
                    figure.note = f"{type(exc).__name__}: {exc}"
                    log(f"idle in tmux, {fleet.key}, {size[0]}x{size[1]}: {figure.note}")
                    continue
                figure.values.append(run["percent"])
                figure.runs.append(run)
                log(f"idle in tmux {i + 1}/{runs}, {fleet.key} fleet, {size[0]}x{size[1]}: {run['percent']:.1f} % (tmux itself {run['tmux_server_percent']:.1f} %)")
    return figures


# ---------------------------------------------------------------------- output
def render_table(fleets: tuple[Fleet, Fleet], rows: list[tuple[str, dict[str, Figure], str]]) -> str:
    header = ["figure", *(fleet.title for fleet in fleets), "target"]
    body = [[label, *(figs[f.key].cell() if f.key in figs else "n/a" for f in fleets), target] for label, figs, target in rows]
    widths = [max(len(row[i]) for row in [header, *body]) for i in range(len(header))]
    lines = ["   ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in [header, *body]]
    return "\n".join(lines)


def find_gpuconsole(python: str) -> str | None:
    beside = Path(python).parent / "gpuconsole"
    if beside.exists():
        return str(beside)
    return shutil.which("gpuconsole")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="startup_idle.py",
        description="Time to the first complete frame and idle CPU of the gpuconsole demo, "
        "for the default fleet and a ~1,024-GPU fleet; prints a table of medians.",
        epilog=f"targets: first complete frame <= {FIRST_FRAME_TARGET_S} s and idle <= {IDLE_TARGET_PERCENT:g} % "
        "of one core, for the default demo.",
    )
    parser.add_argument("--runs", type=int, default=5, metavar="N", help="start-ups per first-frame figure (default 5)")
    parser.add_argument("--idle-runs", type=int, default=3, metavar="N", help="runs per idle CPU figure (default 3)")
    parser.add_argument("--idle-seconds", type=float, default=20.0, metavar="S", help="seconds of idle CPU sampled per run (default 20)")
    parser.add_argument("--settle", type=float, default=3.0, metavar="S", help="seconds after process start that idle sampling skips (default 3)")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 1 run of everything, 5 s of idle")
    parser.add_argument("--json", action="store_true", help="print every raw number as JSON after the table")
    parser.add_argument("--seed", type=int, default=7, help="seed of the simulated world (default 7)")
    parser.add_argument("--nodes", type=int, default=None, metavar="N", help="--demo-nodes of the large fleet (default: the smallest N with >= 1,024 GPUs)")
    parser.add_argument("--python", default=sys.executable, help="interpreter with gpuconsole installed (default: this one)")
    parser.add_argument("--skip-startup", action="store_true", help="leave out the first-frame figures")
    parser.add_argument("--skip-idle", action="store_true", help="leave out every idle CPU figure")
    parser.add_argument("--skip-headless-idle", action="store_true", help="leave out the headless idle CPU figure")
    parser.add_argument(
        "--no-pyc-cache",
        action="store_true",
        help="run with the bytecode settings of this environment; by default a private bytecode cache is "
        "used and PYTHONDONTWRITEBYTECODE is unset, so modules are compiled once, as a pip install does",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    opts = build_parser().parse_args(argv)
    if opts.quick:
        opts.runs, opts.idle_runs, opts.idle_seconds = 1, 1, 5.0
    if opts.runs < 1 or opts.idle_runs < 1 or opts.idle_seconds <= 0 or opts.settle < 0 or (opts.nodes is not None and opts.nodes < 1):
        print("startup_idle.py: --runs, --idle-runs, --idle-seconds and --nodes must be positive, --settle not negative", file=sys.stderr)
        return 2
    try:
        fleets = pick_fleets(opts.seed, opts.nodes)
    except ImportError as exc:
        print(f"startup_idle.py: gpuconsole is not importable here ({exc}); run with the project's .venv/bin/python", file=sys.stderr)
        return 2
    log(f"fleets: default demo {fleets[0].gpus} GPUs; large demo --demo-nodes {fleets[1].nodes} = {fleets[1].gpus} GPUs")

    results: dict[str, object] = {
        "machine": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
        },
        "seed": opts.seed,
        "fleets": {f.key: {"nodes": f.nodes, "gpus": f.gpus} for f in fleets},
        "settings": {k: getattr(opts, k) for k in ("runs", "idle_runs", "idle_seconds", "settle")},
    }
    rows: list[tuple[str, dict[str, Figure], str]] = []
    notes: list[str] = []
    frame_target = f"<= {FIRST_FRAME_TARGET_S} s (default)"
    idle_target = f"<= {IDLE_TARGET_PERCENT:g} % (default)"

    with tempfile.TemporaryDirectory(prefix="gpuconsole-bench-") as tmp:
        work = Path(tmp)
        env = ChildEnv.make(work, pyc_cache=not opts.no_pyc_cache)
        results["child_env"] = {"unset": list(env.unset), "set": env.extra}
        if not opts.skip_startup:
            frames, interp = measure_first_frame(opts.python, env, fleets, opts.seed, opts.runs, work)
            rows.append(("first complete frame (no db)", _by_fleet(frames, "no_db"), frame_target))
            rows.append(("first complete frame (with db)", _by_fleet(frames, "db"), frame_target))
            results["interpreter_start_s"] = interp
            results["first_complete_frame"] = {k: v.as_json() for k, v in frames.items()}
            floor = textual_floor(opts.python, env, opts.runs, statistics.median(interp))
            results["textual_floor_s"] = floor
            notes.append(f"floor: a bare Textual app with the same frame (strip, switcher, cards, footer) paints its first frame at "
                         f"{statistics.median(floor):.2f} s (benchmarks/textual_floor.py, interpreter start included)")
            bytecode = "as this environment sets it" if opts.no_pyc_cache else "cached, as after pip install"
            notes.append(f"first-frame figures include {statistics.median(interp):.3f} s of interpreter start (python -c pass); headless, 120x36; bytecode {bytecode}")
        if not opts.skip_idle:
            tmux_figs = measure_idle_tmux(find_gpuconsole(opts.python), env, fleets, opts.seed, opts.idle_runs, opts.idle_seconds, opts.settle, work)
            for w, h in TERMINAL_SIZES:
                rows.append((f"idle CPU at 1 Hz, {w}x{h}", _by_fleet(tmux_figs, f"{w}x{h}"), idle_target))
            results["idle_cpu_tmux"] = {k: v.as_json() for k, v in tmux_figs.items()}
            if not opts.skip_headless_idle:
                headless = measure_idle_headless(opts.python, env, fleets, opts.seed, opts.idle_runs, opts.idle_seconds, opts.settle, work)
                w, h = HEADLESS_IDLE_SIZE
                rows.append((f"idle CPU at 1 Hz, headless {w}x{h}", headless, "(comparison)"))
                results["idle_cpu_headless"] = {k: v.as_json() for k, v in headless.items()}
            notes.append(f"idle CPU: {opts.idle_seconds:g} s sampled after {opts.settle:g} s, with a Store; tmux rows run the gpuconsole command in a real terminal")

    for _, figs, _ in rows:
        for fig in figs.values():
            if fig.note and fig.note not in notes:
                notes.append(fig.note)
    print(render_table(fleets, rows))
    print()
    counts = [] if opts.skip_startup else [f"{opts.runs} start-ups"]
    counts += [] if opts.skip_idle else [f"{opts.idle_runs} idle runs"]
    print(f"medians of {' and '.join(counts) or 'nothing'}; {os.cpu_count()} CPUs, Python {platform.python_version()}")
    for note in notes:
        print(f"- {note}")
    if opts.json:
        print()
        print(json.dumps(results, indent=2))
    return 0


def _by_fleet(figures: dict[str, Figure], suffix: str) -> dict[str, Figure]:
    return {key.split(":")[0]: fig for key, fig in figures.items() if key.endswith(f":{suffix}")}


if __name__ == "__main__":
    raise SystemExit(main())
