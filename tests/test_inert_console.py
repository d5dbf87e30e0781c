"""The real console on the Kubernetes API test server: escapes and markup planted in a job's
labels and annotations, its pod's log and an event about it reach the terminal as text. What
is checked is the very string the console would write to the terminal for a full repaint of
the screen (``render_segments``, what Textual's driver is given), typed through as a user does:
``3`` for the Jobs pane, ``l`` for the pod's log, ``enter`` for the describe screen."""

from __future__ import annotations

import pytest

from gpuconsole.backends.kube import source as kube_backend
from gpuconsole.core.fleet.console import Console, ConsoleOptions
from gpuconsole.core.fleet.sources import SourceOptions
from gpuconsole.ui.screens.describe import DescribeScreen
from gpuconsole.ui.screens.logs import LogScreen
from gpuconsole.ui.widgets.log_view import LogView
from tests import kube_server as ks
from tests.driving import running, table
from tests.helpers import wait_until
from tests.kube_server import KubeCluster

pytestmark = pytest.mark.slow

OSC52 = "\x1b]52;c;cHduZWQ=\x07"  # sets the operator's clipboard to "pwned"
PLANTED = f"{OSC52}\x1b[31mred\x9b2J [bold red]markup[/]"


def terminal_bytes(app) -> str:
    """What a full repaint of the screen writes to the terminal."""
    return app.screen._compositor.render_update(full=True).render_segments(app.console)


def raw_data_escapes(written: str) -> list[str]:
    """The planted sequences that reached the terminal as sequences (Textual's own are fine)."""
    return [s for s in ("\x1b]52", "\x07", "\x1b[31mred", "\x9b") if s in written]


class QuickKubeJobs(kube_backend.KubeJobs):
    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("request_timeout", 2.0)
        kwargs.setdefault("watch_timeout", 1)
        super().__init__(*args, **kwargs)


async def test_a_pod_log_an_event_a_label_and_an_annotation_reach_the_terminal_as_text(
        kube: KubeCluster, monkeypatch, tmp_path) -> None:
    monkeypatch.setattr(kube_backend, "KubeJobs", QuickKubeJobs)
    monkeypatch.setenv("GPUCONSOLE_AUDIT_DB", str(tmp_path / "audit.db"))
    kube.server.add(ks.node("gpu-node-1"))
    job = ks.job("train-a", "ml", labels={"team": "[bold]nlp[/]"})
    job["metadata"]["annotations"] = {"note": PLANTED}
    job = kube.server.add(job)
    pod = kube.server.add(ks.pod_for(job))
    kube.server.add(ks.event(job, f"planted {PLANTED}", reason="Planted", type_="Normal"))
    kube.server.append_log("ml", pod["metadata"]["name"], "step 1 loss 0.5", f"step 2 {PLANTED}")
    options = ConsoleOptions(sources=SourceOptions(jobs="kube", gpus="off", cloud="off", namespaces=("ml",)),
                             interval=0.2, timeout=3)
    async with running(Console(options), live=lambda app: len(app.snapshot.jobs) == 1, size=(120, 40)) as (app, pilot):
        await pilot.press("3")
        await pilot.pause()
        table(app, "job-table").focus()
        await pilot.press("l")
        await wait_until(lambda: isinstance(app.screen, LogScreen))
        view = app.screen.query_one(LogView)
        await wait_until(lambda: len(view.lines) >= 2)
        await pilot.pause()
        written = terminal_bytes(app)
        assert "\\x1b]52;c;cHduZWQ=\\x07" in written and "[bold red]markup[/]" in written
        assert raw_data_escapes(written) == []
        await pilot.press("escape")
        await wait_until(lambda: not isinstance(app.screen, LogScreen))

        await pilot.press("enter")
        await wait_until(lambda: isinstance(app.screen, DescribeScreen) and "Events:" in app.screen.text)
        await pilot.pause()
        written = terminal_bytes(app)
        assert raw_data_escapes(written) == []
        assert "[bold]nlp[/]" in written  # the label, as written
        app.screen.query_one("#describe-box").scroll_end(animate=False)
        await pilot.pause()
        written = terminal_bytes(app)
        assert "planted \\x1b]52;c;cHduZWQ=\\x07" in written and "[bold red]markup[/]" in written
        assert raw_data_escapes(written) == []


async def test_a_job_name_reaches_the_jobs_pane_as_text(kube: KubeCluster, monkeypatch, tmp_path) -> None:
    """A name that no API server would take, served all the same (another backend, a proxy):
    the Jobs pane draws it spelled out, its markup as written."""
    monkeypatch.setattr(kube_backend, "KubeJobs", QuickKubeJobs)
    monkeypatch.setenv("GPUCONSOLE_AUDIT_DB", str(tmp_path / "audit.db"))
    kube.server.add(ks.node("gpu-node-1"))
    job = kube.server.add(ks.job(f"t{OSC52}[b]x[/b]", "ml"))
    kube.server.add(ks.pod_for(job))
    options = ConsoleOptions(sources=SourceOptions(jobs="kube", gpus="off", cloud="off", namespaces=("ml",)),
                             interval=0.2, timeout=3)
    async with running(Console(options), live=lambda app: len(app.snapshot.jobs) == 1, size=(160, 40)) as (app, pilot):
        await pilot.press("3")
        await pilot.pause()
        written = terminal_bytes(app)
        assert "t\\x1b]52;c;cHduZWQ=\\x07[" in written  # its cell, cut to the column
        assert "]52;c;cHduZWQ=[b]x[/b]" in written  # the detail line (Rich's Text drops a BEL itself)
        assert raw_data_escapes(written) == []
