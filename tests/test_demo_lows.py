"""What a user met in the demo at 80x24: exports that vanished or landed in the real state folder,
GPUs without clocks or PCIe figures, an experiment template cut off at the bottom, and ticked
boxes that looked unticked without colour."""

from __future__ import annotations

import io
import json
import stat

import pytest
from rich.console import Console
from textual.widgets import Checkbox, Static, TextArea

from gpuconsole.backends.sim import SimWorld
from gpuconsole.backends.sim.catalog import GPU_MODEL_BY_NAME
from gpuconsole.core import paths
from gpuconsole.ui.screens.budget_form import BudgetForm
from gpuconsole.ui.screens.experiment_form import TEMPLATE, ExperimentFormScreen
from gpuconsole.ui.screens.gpu_detail import GpuDetailScreen
from tests.driving import running, show_pane
from tests.helpers import demo_console, wait_until
from tests.test_experiments_pane import loaded

START = 1717200000.0


def private(path) -> bool:
    return stat.S_IMODE(path.stat().st_mode) == paths.PRIVATE_FILE


def said(app, words: str) -> bool:
    return any(words in str(n.message) for n in app._notifications)


# --------------------------------------------------------------------------- exports of a demo

async def export_experiment(app, pilot) -> None:
    """The Exps pane's ``e`` on its first experiment (resnet50-epoch)."""
    await pilot.press("8")
    await wait_until(lambda: loaded(app), timeout=30)
    await pilot.pause()
    await pilot.press("e")


async def test_a_demos_audit_and_experiment_exports_land_together_outside_the_real_state() -> None:
    folder = paths.demo_exports_dir()
    assert folder.parent == paths.state_dir().parent and folder != paths.state_dir()
    async with running() as (app, pilot):
        demo_log = app.core.services.guard.audit.path.parent  # removed when the demo ends
        await show_pane(app, pilot, "6", "audit")
        await pilot.press("E")
        await wait_until(lambda: any(folder.glob("audit-*.json")))
        [audit] = folder.glob("audit-*.json")
        assert "records" in json.loads(audit.read_text()) and private(audit)
        await wait_until(lambda: said(app, f"exported to {audit}"))
        await export_experiment(app, pilot)
        await wait_until(lambda: (folder / "experiment-resnet50-epoch.json").exists())
        await wait_until(lambda: said(app, f"exported to {folder}/experiment-resnet50-epoch.csv"))
        assert private(folder / "experiment-resnet50-epoch.csv")
        assert not (demo_log / "exports").exists()
    assert not paths.state_dir().exists(), "nothing of the demo in the real state folder"


async def test_gpuconsole_demo_dir_keeps_the_demos_exports_too(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv(paths.DEMO_DIR_ENV, str(tmp_path / "demo"))
    folder = tmp_path / "demo" / "exports"
    assert paths.demo_exports_dir() == folder
    async with running() as (app, pilot):
        await show_pane(app, pilot, "6", "audit")
        await pilot.press("e")
        await wait_until(lambda: any(folder.glob("audit-*.csv")))
        await export_experiment(app, pilot)
        await wait_until(lambda: (folder / "experiment-resnet50-epoch.csv").exists())
    assert not paths.state_dir().exists()


async def test_outside_the_demo_the_audit_export_stays_beside_the_audit_log() -> None:
    async with running(demo_console(demo=False), live=False) as (app, pilot):
        await wait_until(lambda: app.access_principal is not None)
        await show_pane(app, pilot, "6", "audit")
        await pilot.press("e")
        beside = app.core.services.guard.audit.path.parent / "exports"
        await wait_until(lambda: any(beside.glob("audit-*.csv")))
    assert not paths.demo_exports_dir().exists()


# --------------------------------------------------------------------------- the demo's GPU figures

def test_simulated_gpus_report_clocks_pcie_and_ecc_as_their_boards_do() -> None:
    world = SimWorld(seed=7, start=START)
    world.step(30)
    gpus = world.gpu_reading().gpus
    twin = SimWorld(seed=7, start=START)
    twin.step(30)
    assert twin.gpu_reading().gpus == gpus, "the same seed, the same figures"
    for gpu in gpus:
        board = GPU_MODEL_BY_NAME[gpu.name]
        idle_sm, boost_sm = board.sm_clock_mhz
        assert idle_sm <= gpu.sm_clock_mhz <= boost_sm and gpu.sm_clock_mhz % 15 == 0
        assert gpu.memory_clock_mhz in board.memory_clock_mhz
        assert gpu.ecc_volatile_errors == 0
        assert gpu.fan_percent is None, "SXM modules and passive cards have no fan NVML can read"
        if gpu.utilization > 0:
            assert gpu.pcie_rx_kbps > 0 and 0 < gpu.pcie_tx_kbps < gpu.pcie_rx_kbps
        else:
            assert gpu.pcie_rx_kbps == 0 and gpu.sm_clock_mhz == idle_sm
    for name in {g.name for g in gpus}:  # the busier the GPU, the faster its SMs
        by_load = sorted((g for g in gpus if g.name == name), key=lambda g: g.utilization)
        clocks = [g.sm_clock_mhz for g in by_load]
        assert clocks == sorted(clocks)
    assert len({g.sm_clock_mhz for g in gpus}) > 5, "clocks move with the load"
    idle = [g for g in gpus if not g.processes and g.utilization == 0 and g.name == "Tesla T4"]
    for gpu in idle:  # GDDR clocks down when nothing holds the GPU; HBM keeps its clock
        assert gpu.memory_clock_mhz == 405


async def test_the_gpu_detail_shows_the_demo_gpus_clocks_and_ecc() -> None:
    async with running() as (app, pilot):
        await show_pane(app, pilot, "2", "gpus")
        await pilot.press("enter")
        await wait_until(lambda: isinstance(app.screen, GpuDetailScreen))
        await pilot.pause()
        console = Console(record=True, width=200, file=io.StringIO())
        console.print(app.screen.query_one("#gpu-facts", Static).content)
        words = console.export_text()
        assert "SM N/A" not in words and " MHz" in words and "PCIe rx/tx N/A" not in words
        assert "ECC errors 0" in words and "fan N/A" in words


# --------------------------------------------------------------------------- the experiment form at 80x24

async def test_the_whole_experiment_template_is_on_an_80x24_screen() -> None:
    async with running() as (app, pilot):
        await pilot.press("8")
        await wait_until(lambda: loaded(app), timeout=30)
        await pilot.press("f")
        await wait_until(lambda: isinstance(app.screen, ExperimentFormScreen))
        await pilot.pause()
        text = app.screen.query_one(TextArea)
        assert text.text == TEMPLATE
        assert text.max_scroll_y == 0, "every line of the template shows, the last one too"
        assert text.max_scroll_x == 0 and not text.show_horizontal_scrollbar, "long lines wrap: no bar, no ▋"
        text.text = TEMPLATE.replace("repeats = 3", "repeats = 0")
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert app.screen.query_one("#exp-form-error").display
        assert text.max_scroll_y == 0, "the error line leaves the template whole"


# --------------------------------------------------------------------------- checkboxes without colour

async def ticked_and_unticked(monkeypatch, theme: str):
    """The mark of the budget form's check box, unticked and ticked: (glyph, style) each."""
    monkeypatch.setenv("NO_COLOR", "1")
    async with running(theme=theme) as (app, pilot):
        await show_pane(app, pilot, "5", "budgets")
        await pilot.press("a")
        await wait_until(lambda: isinstance(app.screen, BudgetForm))
        await pilot.pause()
        box = app.screen.query_one("#budget-automatic", Checkbox)
        marks = []
        for value in (False, True):
            box.value = value
            await pilot.pause()
            segments = list(box.render_line(0))
            left = next(i for i, s in enumerate(segments) if s.text == box.BUTTON_LEFT)
            marks.append((segments[left + 1].text, segments[left + 1].style))
        return marks


async def test_without_colour_an_unticked_box_shows_no_mark(monkeypatch) -> None:
    (off, _off_style), (on, _on_style) = await ticked_and_unticked(monkeypatch, "dark")
    assert (off, on) == (" ", "X"), "the mark is a glyph: an empty box reads as empty without colour"


@pytest.mark.parametrize("theme", ["contrast", "light"])
async def test_without_colour_a_ticked_mark_is_bold_and_underlined(monkeypatch, theme) -> None:
    (_off, off), (_on, on) = await ticked_and_unticked(monkeypatch, theme)
    assert on.bold and on.underline
    assert not off.bold and not off.underline
