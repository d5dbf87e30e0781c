"""The GPUs pane driven with Pilot: child rows, sorting, thresholds, signalling processes, NVML faults."""

from __future__ import annotations

import subprocess
import sys

import pytest
from rich.text import Text

from gpuconsole.backends.nvml import source as nvml
from gpuconsole.model import SourceKind, SourceState
from gpuconsole.ui.app import GpuConsoleApp
from gpuconsole.ui.panes.gpus import GpusPane
from gpuconsole.ui.screens.confirm import ConfirmScreen
from gpuconsole.ui.screens.gpu_detail import GpuDetailScreen, downsample
from gpuconsole.ui.widgets.virtual_table import VirtualTable
from tests.fake_nvml import FakeGpu, FakeNvml, FakeProcess, standard_host
from tests import driving
from tests.helpers import all_live, demo_console, wait_until

SIZE = (120, 36)


def pane(app: GpuConsoleApp) -> GpusPane:
    return app.query_one(GpusPane)


def gpu_table(app: GpuConsoleApp) -> VirtualTable:
    return app.query_one("#gpu-table", VirtualTable)


def cell(app: GpuConsoleApp, key: str, column: str) -> Text:
    return gpu_table(app).get_cell(key, column)


def pane_line(app: GpuConsoleApp) -> str:
    from gpuconsole.ui.widgets.text_view import TextView

    return "\n".join(str(v.content) for v in pane(app).query(TextView) if v.display)


def running(console, *, thresholds=None, live=all_live):
    """The GPUs pane on screen at 120×36, its table filled."""
    return driving.running(console, theme="dark", thresholds=thresholds, live=live, size=SIZE, key="2",
                           ready=lambda app: bool(gpu_table(app).shown_keys))


def gpus_live(app: GpuConsoleApp) -> bool:
    status = app.snapshot.source(SourceKind.GPUS)
    return status is not None and status.state is SourceState.LIVE


async def select(pilot, app: GpuConsoleApp, key: str) -> None:
    table = gpu_table(app)
    table.focus()
    table.move_cursor(row=table.shown_keys.index(key), animate=False)
    await pilot.pause()


async def test_gpus_slices_and_processes_are_rows_in_order_and_p_hides_processes():
    async with running(demo_console()) as (app, pilot):
        snap = app.snapshot
        keys = gpu_table(app).shown_keys
        mig = next(g for g in snap.gpus if g.mig_slices)
        at = keys.index(mig.uuid)
        below = keys[at + 1:at + 1 + len(mig.mig_slices) + len(mig.processes)]
        assert all(k.startswith(mig.uuid + "/") for k in below)
        assert {k for k in below if "/pid/" in k} == {f"{mig.uuid}/pid/{p.pid}" for p in mig.processes}
        proc = next(p for g in snap.gpus for p in g.processes)
        key = f"{proc.gpu_uuid}/pid/{proc.pid}"
        assert cell(app, key, "model").plain == proc.name
        await select(pilot, app, key)
        assert f"pid {proc.pid} {proc.name}" in pane_line(app)
        await pilot.press("p")
        await pilot.pause()
        assert not any("/pid/" in k for k in gpu_table(app).shown_keys)
        await pilot.press("p")
        await pilot.pause()
        assert key in gpu_table(app).shown_keys


async def test_sort_cycles_columns_reverses_and_shows_in_the_header():
    async with running(demo_console()) as (app, pilot):
        gpu_table(app).focus()
        assert gpu_table(app).column_label("node") == "NODE▲"
        for _ in range(3):
            await pilot.press("greater_than_sign")
        await pilot.pause()
        assert gpu_table(app).sort_column == "util" and gpu_table(app).sort_descending
        assert gpu_table(app).column_label("util") == "UTIL▼"
        assert gpu_table(app).column_label("node") == "NODE"
        by_uuid = {g.uuid: g for g in app.snapshot.gpus}
        order = [by_uuid[k].utilization for k in gpu_table(app).shown_keys if k in by_uuid]
        assert order == sorted(order, reverse=True)
        await pilot.press("f6")  # the sort menu: its last entry reverses
        await wait_until(lambda: type(app.screen).__name__ == "SortMenu" and app.screen.is_mounted)
        await pilot.press("end", "enter")
        await wait_until(lambda: type(app.screen).__name__ != "SortMenu")
        await pilot.pause()
        order = [by_uuid[k].utilization for k in gpu_table(app).shown_keys if k in by_uuid]
        assert order == sorted(order) and gpu_table(app).column_label("util") == "UTIL▲"
        # Children stay with their GPU whatever the order.
        keys = gpu_table(app).shown_keys
        for i, key in enumerate(keys):
            if "/" in key:
                assert keys[i - 1].split("/")[0] == key.split("/")[0]


async def test_colour_thresholds_follow_the_flags():
    console = demo_console()
    async with running(console, thresholds=((95.0, 99.0), (95.0, 99.0))) as (app, _pilot):
        gpu = next(g for g in app.snapshot.gpus if 20 < g.utilization < 90 and g.memory_percent < 90)
        palette = app.palette
        assert cell(app, gpu.uuid, "util").spans[0].style == palette.ok
        assert cell(app, gpu.uuid, "memory").spans[0].style == palette.ok
    console = demo_console()
    async with running(console, thresholds=((1.0, 2.0), (1.0, 2.0))) as (app, _pilot):
        assert cell(app, gpu.uuid, "util").spans[0].style == app.palette.bad
        assert cell(app, gpu.uuid, "memory").spans[0].style == app.palette.bad


async def test_sigterm_a_simulated_process_after_confirmation():
    async with running(demo_console()) as (app, pilot):
        proc = next(p for g in app.snapshot.gpus if not g.mig_slices for p in g.processes)
        key = f"{proc.gpu_uuid}/pid/{proc.pid}"
        await select(pilot, app, key)
        await pilot.press("K")
        await wait_until(lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("n")  # cancelled: nothing happens
        await wait_until(lambda: not isinstance(app.screen, ConfirmScreen))
        await pilot.pause()
        assert key in gpu_table(app).shown_keys
        await select(pilot, app, key)
        await pilot.press("T")
        await wait_until(lambda: isinstance(app.screen, ConfirmScreen))
        assert "SIGTERM" in str(app.screen.query_one("#confirm-prompt").content)
        await pilot.press("y")
        await wait_until(lambda: key not in gpu_table(app).shown_keys)
        result = app.core.services.actions.recent()[-1]
        assert result.ok and result.request.kind.value == "kill-process" and "SIGTERM" in result.message


async def test_signal_keys_on_a_gpu_row_ask_for_a_process():
    async with running(demo_console()) as (app, pilot):
        await select(pilot, app, app.snapshot.gpus[0].uuid)
        await pilot.press("T")
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmScreen)
        assert not app.core.services.actions.recent()


@pytest.fixture
def child():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield proc
    proc.kill()
    proc.wait()


async def test_the_os_refusing_a_signal_is_one_line_and_the_app_goes_on(monkeypatch, child):
    FakeNvml([FakeGpu("GPU-x", processes=[FakeProcess(child.pid, 4096, "sleeper")])]).install(monkeypatch)

    def refuse(pid: int, sig: int) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(nvml, "send_signal", refuse)
    console = demo_console(demo=False)
    async with running(console, live=gpus_live) as (app, pilot):
        assert app.snapshot.source(SourceKind.GPUS).name == "nvml"
        await select(pilot, app, f"GPU-x/pid/{child.pid}")
        await pilot.press("K")
        await wait_until(lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await wait_until(lambda: bool(app.core.services.actions.recent()))
        result = app.core.services.actions.recent()[-1]
        assert not result.ok and "the operating system refused to send SIGKILL" in result.message
        assert child.poll() is None
        await pilot.press("3")
        assert app.active_pane == "jobs"


async def test_nvml_fields_the_board_cannot_report_show_na(monkeypatch):
    standard_host().install(monkeypatch)
    async with running(demo_console(demo=False), live=gpus_live) as (app, pilot):
        assert cell(app, "GPU-t4-0002", "power").plain.startswith("N/A/")
        assert cell(app, "GPU-t4-0002", "fan").plain == "N/A"
        assert cell(app, "GPU-a100-0001", "util").plain == "N/A"
        assert cell(app, "GPU-a100-0001/MIG-a100-0001-3", "model").plain == "└ 1c.2g.20gb"
        assert "sw power cap" in cell(app, "GPU-h100-0000", "info").plain
        await select(pilot, app, "GPU-h100-0000")
        await pilot.press("enter")
        await wait_until(lambda: isinstance(app.screen, GpuDetailScreen))
        await pilot.pause()
        facts = str(app.screen.query_one("#gpu-facts").content.columns[1]._cells)
        assert "00000000:1B:00.0" in facts and "driver 550.54.15" in facts
        await pilot.press("w")
        await pilot.pause()
        assert "1 h" in str(app.screen.query_one("#gpu-window").content)
        await pilot.press("escape")


async def test_a_hung_driver_shows_stale_while_keys_still_answer(monkeypatch):
    fake = standard_host().install(monkeypatch)
    console = demo_console(demo=False)
    try:
        async with running(console, live=gpus_live) as (app, pilot):
            fake.hang_on = "nvmlDeviceGetTemperature"
            await wait_until(lambda: app.snapshot.source(SourceKind.GPUS).state is SourceState.STALE)
            await pilot.pause()
            assert "stale for" in pane_line(app)
            assert gpu_table(app).shown_keys, "the last good data stays on screen"
            await pilot.press("3")
            assert app.active_pane == "jobs"
            await pilot.press("2")
            assert app.active_pane == "gpus"
    finally:
        fake.release.set()


async def test_a_lost_gpu_is_an_error_line_in_the_pane(monkeypatch):
    fake = standard_host().install(monkeypatch)
    async with running(demo_console(demo=False), live=gpus_live) as (app, pilot):
        fake.gpus[0].lost = True
        await wait_until(lambda: app.snapshot.source(SourceKind.GPUS).state is SourceState.ERROR)
        await pilot.pause()
        assert "error: GPU 0 (GPU-h100-0000, 00000000:1B:00.0) is lost" in pane_line(app)


def test_downsample_keeps_short_series_and_averages_long_ones():
    assert downsample([1.0, 2.0]) == [1.0, 2.0]
    long = [float(i % 2) for i in range(86_400)]
    out = downsample(long, 300)
    assert len(out) == 300 and all(abs(v - 0.5) < 0.01 for v in out)


async def test_sort_keys_are_no_action_keys_anywhere():
    """k9s and htop habits: a sort key never stops, starts or suspends anything elsewhere."""
    from gpuconsole.ui.registry import PANES, pane_class

    from gpuconsole.ui.panes.base import Pane

    sort_keys = {b.key for b in Pane.BINDINGS if "sort" in b.action}
    assert sort_keys == {"greater_than_sign", "less_than_sign", "f6"}
    for spec in PANES:
        actions = {b.key: b.action for b in pane_class(spec.id).BINDINGS if "sort" not in b.action}
        assert not sort_keys & set(actions), (spec.id, sort_keys & set(actions))
