"""The console's frame comes first: ``gpuconsole`` paints its top line, pane strip and footer
before the Console is built, builds it off the UI thread, and holds what the user types meanwhile.

Nothing here is timed: the tests hold the build on an event, so "before" and "after" are facts,
not durations. The speed itself is measured by ``benchmarks/first_frame_ratio.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading

import pytest
from textual.widgets import Footer

from gpuconsole.cli.main import ArgumentError
from gpuconsole.model import SourceKind, SourceState
from gpuconsole.ui.app import GpuConsoleApp
from gpuconsole.ui.panes.base import FilterInput
from gpuconsole.ui.widgets.pane_tabs import PaneTabs
from tests.helpers import all_live, demo_console, wait_until
from tests.driving import burst, settle

SIZE = (80, 24)


class HeldBuild:
    """A ``build`` for the app that waits until the test releases it, then makes a demo console."""

    def __init__(self, error: BaseException | None = None) -> None:
        self.release = threading.Event()
        self.called = threading.Event()
        self.error = error
        self.consoles: list = []
        self.closed: list = []  # the consoles closed, in order

    def __call__(self):  # noqa: ANN204 - a Console
        self.called.set()
        if not self.release.wait(30):
            raise TimeoutError("the test never released the build")
        if self.error is not None:
            raise self.error
        console = demo_console()
        self.consoles.append(console)
        close = console.close

        def note_close() -> None:
            self.closed.append(console)
            close()

        console.close = note_close
        return console


def live(app: GpuConsoleApp) -> bool:
    return app.snapshot is not None and all_live(app)


def top_line(app: GpuConsoleApp) -> str:
    return app.query_one("#top-bar").content.plain


async def test_the_frame_is_on_screen_before_the_console_is_built() -> None:
    build = HeldBuild()
    app = GpuConsoleApp(build=build)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await wait_until(build.called.is_set)
            await pilot.pause()
            # The console does not exist yet, and the frame is there: name, strip and footer.
            assert app.core is None
            assert "gpuconsole" in top_line(app) and "starting" in top_line(app)
            assert "Overview" in app.query_one(PaneTabs).content.plain
            assert app.query_one(Footer).is_mounted
            assert not app.query("#overview-pane")
            build.release.set()
            await wait_until(lambda: live(app))
            await pilot.pause()
            assert app.core is build.consoles[0]
            assert "starting" not in top_line(app) and "DEMO" in top_line(app)
            assert app.query_one("#overview-pane").is_mounted
    finally:
        app.close_core()
    assert build.closed == build.consoles


async def test_keys_typed_while_starting_wait_for_the_panes_in_order() -> None:
    """``2/qwen`` typed before the console exists: the GPUs pane opens, its filter reads qwen,
    and the q in it quits nothing."""
    build = HeldBuild()
    app = GpuConsoleApp(build=build)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await wait_until(build.called.is_set)
            burst(app, "2/qwen")
            await pilot.pause()
            assert app.is_running and app.active_pane == "overview"  # held, not run
            build.release.set()
            await settle(pilot, lambda: app.current_pane is not None and app.current_pane.id == "gpus-pane"
                         and app.current_pane.query_one(FilterInput).value == "qwen")
            assert app.is_running and app.return_code is None, "the q typed while starting quit the console"
            field = app.current_pane.query_one(FilterInput)
            assert field.value == "qwen" and app.focused is field
    finally:
        app.close_core()


async def test_ctrl_q_while_starting_quits_and_the_late_console_is_closed() -> None:
    build = HeldBuild()
    app = GpuConsoleApp(build=build)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(build.called.is_set)
        await pilot.press("ctrl+q")
        await wait_until(lambda: not app.is_running)
    build.release.set()
    app.close_core()  # waits for the build that was still running
    assert len(build.consoles) == 1 and build.closed == build.consoles
    assert app.boot_error is None


async def test_a_console_that_cannot_be_built_ends_the_app_with_its_error() -> None:
    build = HeldBuild(ArgumentError("Prometheus: no such file: /nonexistent/token"))
    app = GpuConsoleApp(build=build)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(build.called.is_set)
        build.release.set()
        await wait_until(lambda: not app.is_running)
    app.close_core()
    assert isinstance(app.boot_error, ArgumentError)
    assert app.return_code == 1


async def test_the_hidden_panes_get_ready_only_once_every_source_has_answered() -> None:
    """Work the first complete frame does not need waits for it: the Jobs pane orders its queue
    (a third of a second at 100,000 jobs) once every source has answered, not while the GPUs
    have not, however many readings of jobs come meanwhile."""
    console = demo_console(faults="gpus:hang", timeout=30)
    app = GpuConsoleApp(console, start_console=False)  # no one-second fallback: answers alone decide
    try:
        async with app.run_test(size=SIZE) as pilot:
            console.start(open_store=False)
            await wait_until(lambda: app.snapshot.jobs and app.query("#jobs-pane"))
            first = app.snapshot
            await wait_until(lambda: app.snapshot is not first)  # a later reading of jobs shown too
            await pilot.pause()
            jobs_pane = app.query_one("#jobs-pane")
            assert app.snapshot.source(SourceKind.GPUS).state is SourceState.CONNECTING
            assert jobs_pane.jobs.empty
            console.hub.runners[SourceKind.GPUS].source.sim.faults.release()
            await wait_until(lambda: not jobs_pane.jobs.empty)  # ordered while the pane is hidden
            assert app.active_pane == "overview"
    finally:
        console.close()


def test_the_app_needs_a_console_or_a_way_to_build_one() -> None:
    with pytest.raises(ValueError):
        GpuConsoleApp()
    console = demo_console()
    try:
        with pytest.raises(ValueError):
            GpuConsoleApp(console, build=lambda: console)
    finally:
        console.close()


# What the first frame must not wait for: the backends, the core, the model's codecs and the
# heavy libraries. They are imported behind it, by the thread that builds the console.
HEAVY = ("gpuconsole.backends", "gpuconsole.core.fleet.console", "gpuconsole.core.access", "gpuconsole.core.ops",
         "gpuconsole.core.money.costs", "gpuconsole.model", "gpuconsole.ui.panes.overview", "msgspec", "numpy", "mpmath",
         "scipy", "boto3", "kubernetes", "pynvml", "sqlite_utils", "http.server")


def test_parsing_the_command_line_and_loading_the_app_import_nothing_heavy() -> None:
    code = (
        "import json, sys\n"
        "from gpuconsole.cli.main import parse_args\n"
        "parse_args(['--demo', '--no-db'])\n"
        "import gpuconsole.ui.app\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    loaded = json.loads(out.stdout)
    heavy = sorted(m for m in loaded if any(m == h or m.startswith(h + ".") for h in HEAVY))
    assert heavy == [], f"imported before the first frame: {heavy}"


@pytest.mark.slow
def test_an_error_found_while_building_is_one_line_after_the_screen_is_given_back(tmp_path) -> None:
    """In a pseudo-terminal: the frame is painted, the Prometheus token file is missing, and the
    user gets the terminal back with the one usage line and exit status 2, no traceback."""
    import os
    import pty
    import select
    import time

    pid, fd = pty.fork()
    if pid == 0:  # pragma: no cover - the child
        env = {**os.environ, "TERM": "xterm-256color", "GPUCONSOLE_DB": str(tmp_path / "db.sqlite")}
        os.execvpe(sys.executable, [sys.executable, "-m", "gpuconsole", "--no-db", "--prometheus",
                                    "http://127.0.0.1:1", "--prometheus-token-file", "/nonexistent/token"], env)
    chunks: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            if select.select([fd], [], [], 0.1)[0]:
                try:
                    data = os.read(fd, 65536)
                except OSError:  # the child ended
                    break
                if not data:
                    break
                chunks.append(data)
    finally:
        _, status = os.waitpid(pid, 0)
        os.close(fd)
    text = b"".join(chunks).decode("utf-8", "replace")
    assert os.waitstatus_to_exitcode(status) == 2, text[-500:]
    assert "Traceback" not in text
    tail = text.rsplit("\x1b[?1049l", 1)[-1]  # what follows leaving the alternate screen
    assert "gpuconsole: error: Prometheus: token file: no such file: /nonexistent/token" in tail


# ------------------------------------------------------------------ the command line's short parser

LINES_WITHOUT_A_COMMAND = [
    [], ["--demo"], ["--demo", "--seed", "3", "--no-db"], ["--demo-nodes", "0"], ["--demo-nodes", "-5"],
    ["--bogus"], ["snapshto"], ["--demo", "extra", "words"], ["--theme", "light"], ["--interval", "inf"],
    ["--region", "nowhere"], ["--gpus", "cuda"], ["--gpu-util-thresh", "10", "90"], ["--gpu-util-thresh", "x"],
    ["--context", "prod", "--namespace", "ml", "--namespace", "ml2"], ["--all-namespaces"], ["--db"],
    ["--prometheus", "https://p", "--prometheus-gzip"], ["--version"], ["--demo", "--", "x"],
]


def outcome(parser_argv, argv):
    """The namespace a parser built for ``parser_argv`` reads from ``argv``, or its error line."""
    from gpuconsole.cli.main import build_parser

    try:
        return ("ok", vars(build_parser(parser_argv).parse_args(argv)))
    except ArgumentError as exc:
        return ("error", str(exc))
    except SystemExit as exc:  # --version
        return ("exit", exc.code)


@pytest.mark.parametrize("argv", LINES_WITHOUT_A_COMMAND, ids=lambda a: " ".join(a) or "(nothing)")
def test_a_line_without_a_command_reads_the_same_with_the_short_parser(argv, capsys) -> None:
    assert outcome(argv, argv) == outcome(None, argv)


@pytest.mark.parametrize("argv", [["snapshot", "--json"], ["--context", "budget"], ["-h"], ["--he"], ["budget", "list"]])
def test_a_line_that_names_a_command_or_help_gets_the_whole_parser(argv) -> None:
    from gpuconsole.cli.main import _names_no_command

    assert not _names_no_command(argv)


def test_the_short_parser_knows_every_command_by_name_in_order() -> None:
    import argparse

    from gpuconsole.cli.main import COMMANDS, build_parser

    def names(parser):
        action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        return tuple(action.choices)

    assert names(build_parser()) == COMMANDS == names(build_parser(["--demo"]))


async def test_the_experiments_are_read_while_their_pane_is_hidden(monkeypatch) -> None:
    """The Experiments pane reads its experiments (their statistics import NumPy) a few seconds
    after the start has settled, off the UI thread, so its first showing has them at once; it
    does not read them again as it is first shown."""
    from gpuconsole.ui.panes import experiments as pane_module
    from tests.driving import running, show_pane

    monkeypatch.setattr(pane_module, "PREPARE_AFTER_S", 0.2)
    async with running() as (app, pilot):
        pane = app.query_one("#experiments-pane")
        await wait_until(lambda: pane.loaded is not None)  # read ahead
        assert app.active_pane == "overview" and pane.loaded.progress
        read_at = pane._loaded_at
        await show_pane(app, pilot, "8", "experiments")
        assert pane.summary(app.snapshot).startswith("experiments · 2")  # shown as read, no "loading…"
        assert pane._loaded_at >= read_at  # the next reading is RELOAD_S after the first showing
