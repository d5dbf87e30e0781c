"""The GPUs pane's process view (F5), driven like a user on the seeded demo; the host facts it
shows (parent, RSS, start time) read by the NVML adapter from psutil, and made by the simulator."""

from __future__ import annotations

import io
import os
import subprocess

import psutil
import pytest
from rich.console import Console

from gpuconsole.backends.nvml.source import NvmlSource
from gpuconsole.backends.sim.world import SimWorld
from gpuconsole.ui.screens.confirm import ConfirmScreen
from gpuconsole.ui.screens.gpu_detail import GpuDetailScreen
from gpuconsole.ui.widgets.virtual_table import VirtualTable
from tests.driving import burst, pane_text, running, settle, show_pane, table
from tests.fake_nvml import FakeGpu, FakeNvml, FakeProcess
from tests.helpers import START, wait_until

WIDE = (120, 36)


def procs(app) -> VirtualTable:
    found = table(app, "proc-table")
    assert isinstance(found, VirtualTable)
    return found


def by_key(app) -> dict:
    """Row key → (gpu, process) of every process in the snapshot on screen."""
    return {f"{g.uuid}/pid/{p.pid}": (g, p) for g in app.snapshot.gpus for p in g.processes}


def line(t: VirtualTable, y: int) -> str:
    return "".join(segment.text for segment in t.render_line(y))


async def process_view(app, pilot, *keys: str) -> VirtualTable:
    await show_pane(app, pilot, "2", "gpus")
    await pilot.press("f5", *keys)
    await wait_until(lambda: procs(app).display and bool(procs(app).shown_keys))
    await pilot.pause()
    return procs(app)


async def test_f5_shows_every_process_as_a_tree_under_its_parents_and_esc_goes_back():
    async with running(size=WIDE) as (app, pilot):
        t = await process_view(app, pilot)
        known = by_key(app)
        assert len(known) > 10 and app.focused is t and not table(app, "gpu-table").display
        keys = t.shown_keys
        assert {k for k in keys if "/pid/" in k} == set(known)  # every GPU process, once
        assert "tree" in pane_text(app, "gpus")
        for key, (gpu, proc) in known.items():
            assert proc.parents, "the demo's processes all have parents"
            above = [keys.index(f"{gpu.node}/parent/{pid}") for pid, _name in proc.parents]
            assert above == sorted(above, reverse=True) and above[0] < keys.index(key)  # sshd, bash, torchrun, it
            nearest, name = proc.parents[0]
            parent_key = f"{gpu.node}/parent/{nearest}"
            assert name in t.get_cell(parent_key, "command").plain
            assert t.get_cell(parent_key, "gpumem").plain == ""  # a parent holds no GPU
            assert t.get_cell(key, "command").plain.lstrip(" │").startswith(("├ ", "└ "))
        chains = {tuple(n for _pid, n in p.parents): p for _g, p in known.values()}
        interactive = chains[("torchrun", "bash", "sshd")]
        assert interactive.user and interactive.rss_mib and interactive.started
        await pilot.press("escape")
        await pilot.pause()
        assert table(app, "gpu-table").display and not t.display and app.current_pane.mode == "gpus"


async def test_flat_view_sorts_by_figures_as_numbers():
    async with running(size=WIDE) as (app, pilot):
        t = await process_view(app, pilot, "f5")  # f5 again: flat, by GPU memory
        known = by_key(app)
        assert all("/pid/" in k for k in t.shown_keys) and len(t.shown_keys) == len(known)

        def figures(get) -> list:
            return [get(known[k][1]) for k in t.shown_keys]

        assert t.sort_column == "gpumem" and t.sort_descending
        assert figures(lambda p: p.memory_used_mib) == sorted(figures(lambda p: p.memory_used_mib), reverse=True)
        # "7.0G" sorts below "54.9G" (numbers, not words)
        memory = [float(str(t.get_cell(k, "gpumem")).rstrip("G")) for k in t.shown_keys]
        assert memory == sorted(memory, reverse=True) and len(set(memory)) > 3
        for column, get in (("sm", lambda p: p.sm_utilization), ("cpu", lambda p: p.cpu_percent),
                            ("rss", lambda p: p.rss_mib), ("time", lambda p: -p.started)):
            await pilot.press("greater_than_sign")
            await pilot.pause()
            assert t.sort_column == column and t.sort_descending, column
            assert figures(get) == sorted(figures(get), reverse=True), column
        oldest = known[t.shown_keys[0]][1]
        assert oldest.started == min(p.started for _g, p in known.values())  # TIME: the longest-running first
        await pilot.press("f5")  # the tree again
        await pilot.pause()
        assert t.sort_column is None and any("/parent/" in k for k in t.shown_keys)
        await pilot.press("less_than_sign")  # a sort key in the tree shows it flat, in that order
        await pilot.pause()
        assert not any("/parent/" in k for k in t.shown_keys) and t.sort_column == "command"


async def test_a_signal_key_in_the_view_asks_y_n_for_the_selected_process():
    async with running(size=WIDE) as (app, pilot):
        t = await process_view(app, pilot)
        keys = t.shown_keys
        t.move_cursor(row=next(i for i, k in enumerate(keys) if "/parent/" in k))
        await pilot.pause()
        await pilot.press("T")  # a parent holds no GPU: nothing to signal here
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmScreen)
        key = next(k for k in keys if "/pid/" in k)
        _gpu, proc = by_key(app)[key]
        t.move_cursor(row=keys.index(key))
        await pilot.pause()
        assert f"pid {proc.pid} {proc.name}" in pane_text(app, "gpus")
        await pilot.press("K")
        await wait_until(lambda: isinstance(app.screen, ConfirmScreen))
        assert f"Send SIGKILL to pid {proc.pid}" in str(app.screen.query_one("#confirm-prompt").content)
        await pilot.press("n")
        await wait_until(lambda: not isinstance(app.screen, ConfirmScreen))
        assert not app.core.services.actions.recent()


async def test_the_command_line_opens_the_view_and_slash_filters_it():
    async with running(size=WIDE) as (app, pilot):
        burst(app, ":procs", "enter")
        await settle(pilot, lambda: app.active_pane == "gpus" and procs(app).display and bool(procs(app).shown_keys))
        await pilot.press("slash", *"sshd", "enter")
        await pilot.pause()
        known = by_key(app)
        shown = [k for k in procs(app).shown_keys if "/pid/" in k]
        assert shown and all(any(n == "sshd" for _pid, n in known[k][1].parents) for k in shown)
        assert len(shown) < len(known)
        await pilot.press("escape")  # the kept filter goes first, then the view
        await pilot.pause()
        assert procs(app).display and len([k for k in procs(app).shown_keys if "/pid/" in k]) == len(known)


async def test_at_80_columns_pid_user_memory_sm_cpu_and_the_command_are_readable():
    async with running() as (app, pilot):  # 80×24
        t = await process_view(app, pilot, "f5")
        header = line(t, 0)
        for label in ("PID", "USER", "GPU-MEM", "SM%", "CPU%", "COMMAND"):
            assert label in header, header
        assert header.index("PID") < header.index("USER") < header.index("SM%") < header.index("CPU%")
        _gpu, first = by_key(app)[t.shown_keys[0]]
        row = line(t, 1)
        assert str(first.pid) in row and first.user in row and first.command[:8] in row, row
        # the GPU detail's processes, in the same cells
        gpu = next(g for g in app.snapshot.gpus if g.mig_slices and g.processes)
        app.open_gpu(gpu.uuid)
        await wait_until(lambda: isinstance(app.screen, GpuDetailScreen) and app.screen.is_mounted)
        await pilot.pause()
        children = app.screen.query_one("#gpu-children")
        console = Console(width=children.size.width, record=True, color_system=None, file=io.StringIO())
        console.print(children.content)
        shown = console.export_text()
        assert children.size.width <= 70
        assert all(label in shown.splitlines()[0] for label in ("PID", "USER", "GPU-MEM", "SM%", "COMMAND"))
        proc = gpu.processes[0]
        assert any(str(proc.pid) in row and proc.user in row and proc.command[:12] in row for row in shown.splitlines())


# ---------------------------------------------------------------------- the host's facts
@pytest.fixture
def sleeper():
    child = subprocess.Popen(["sleep", "60"])
    yield child
    child.kill()
    child.wait()


def test_nvml_reads_parent_rss_and_start_time_of_a_real_process(monkeypatch, tmp_path, sleeper):
    FakeNvml([FakeGpu("GPU-x", processes=[FakeProcess(sleeper.pid, 1024, "sleep")])]).install(monkeypatch)
    source = NvmlSource(proc=tmp_path)
    try:
        proc = source.poll_gpus().gpus[0].processes[0]
        me = psutil.Process()
        assert proc.ppid == os.getpid() and proc.parents[0] == (os.getpid(), me.name())
        assert all(pid > 1 for pid, _name in proc.parents)  # up to, not including, init
        assert [pid for pid, _name in proc.parents[1:3]] == [p.pid for p in me.parents()[:2] if p.pid > 1]
        assert proc.started == psutil.Process(sleeper.pid).create_time()
        assert proc.rss_mib is not None and 0 < proc.rss_mib < 1024
        assert source.poll_gpus().gpus[0].processes[0].cpu_percent is not None  # the same psutil process
    finally:
        source.close()


def test_nvml_leaves_what_psutil_refuses_unknown(monkeypatch, tmp_path, sleeper):
    FakeNvml([FakeGpu("GPU-x", processes=[FakeProcess(sleeper.pid, 1024, "sleep")])]).install(monkeypatch)

    def refuse(self, *args, **kwargs):
        raise psutil.AccessDenied(self.pid)

    # the operating system refuses, under psutil (whose Process caches these in a oneshot)
    platform = psutil._psplatform.Process
    monkeypatch.setattr(platform, "memory_info", refuse)
    monkeypatch.setattr(platform, "ppid", refuse)
    source = NvmlSource(proc=tmp_path)
    try:
        proc = source.poll_gpus().gpus[0].processes[0]
        assert (proc.rss_mib, proc.ppid, proc.parents) == (None, None, ())
        assert proc.started is not None and proc.name == "sleep"  # what the OS did say is kept
        monkeypatch.setattr(platform, "create_time", refuse)
        source.close()
        source = NvmlSource(proc=tmp_path)
        proc = source.poll_gpus().gpus[0].processes[0]
        assert (proc.started, proc.rss_mib, proc.cpu_percent, proc.ppid) == (None, None, None, None)
        assert proc.pid == sleeper.pid and proc.memory_used_mib == 1024
    finally:
        source.close()


def test_the_simulator_runs_workers_under_torchrun_deterministically():
    readings = []
    for _ in range(2):
        world = SimWorld(seed=7, start=START)
        world.step(120)
        readings.append(world.gpu_reading().gpus)
    first, again = readings
    assert [p for g in first for p in g.processes] == [p for g in again for p in g.processes]
    procs = [p for g in first for p in g.processes]
    by_parent: dict[int, list] = {}
    for p in procs:
        assert p.ppid == p.parents[0][0] and 1024 <= p.rss_mib <= 8 * 1024 and p.started <= START + 120
        assert p.command and p.cpu_percent is not None
        by_parent.setdefault(p.ppid, []).append(p)
    assert any(len(workers) > 1 and workers[0].parents[0][1] == "torchrun" for workers in by_parent.values())
    assert any([n for _pid, n in p.parents][1:] == ["bash", "sshd"] for p in procs)
    assert any(p.parents[-1][1] == "containerd-shim" for p in procs)
