"""Snapshot tests: every pane of the seeded, frozen demo at 80×24 and 160×48.

Update after looking at the report: ``pytest tests/test_snapshots.py --snapshot-update``.
"""

from __future__ import annotations

import pytest

from gpuconsole.ui.app import GpuConsoleApp
from tests.helpers import FrozenClock, all_live, demo_console, record_history, settle, wait_until

SIZES = {"80x24": (80, 24), "160x48": (160, 48)}
PANES = {"overview": "1", "gpus": "2", "jobs": "3", "instances": "4", "budgets": "5", "services": "9"}


@pytest.fixture
def frozen_app():
    consoles = []

    def make(**kwargs) -> GpuConsoleApp:
        console = demo_console(**kwargs)
        consoles.append(console)
        return GpuConsoleApp(console, theme_name="dark")

    yield make
    for console in consoles:
        console.close()


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("pane", PANES)
def test_pane(snap_compare, frozen_app, pane, size):
    assert snap_compare(frozen_app(), terminal_size=SIZES[size], run_before=settle(PANES[pane]))


@pytest.mark.parametrize("size", SIZES)
def test_process_view(snap_compare, frozen_app, size):
    """The GPUs pane's process tree: PID, user, GPU memory, SM % and CPU % readable at 80 columns."""
    assert snap_compare(frozen_app(), terminal_size=SIZES[size], run_before=settle("2", "f5"))


@pytest.mark.parametrize("size", SIZES)
def test_jobs_tagged_and_sorted(snap_compare, frozen_app, size):
    """Two jobs tagged (•) and the queue sorted by age (AGE▼): names whole, the reason gives room."""
    keys = ("3", "space", "space", *["greater_than_sign"] * 6)
    assert snap_compare(frozen_app(), terminal_size=SIZES[size], run_before=settle(*keys))


def test_gpu_detail(snap_compare, frozen_app, tmp_path):
    clock = FrozenClock()
    app = frozen_app(db=tmp_path / "c.db", clock=clock)
    record_history(app.core, clock, 120)
    assert snap_compare(app, terminal_size=(120, 36), run_before=settle("2", "down", "enter"))


def test_unconfigured_gpus_pane(snap_compare, frozen_app):
    assert snap_compare(frozen_app(demo=False), terminal_size=(80, 24), run_before=settle_unconfigured("2"))


def settle_unconfigured(*keys: str):
    async def run_before(pilot) -> None:
        await wait_until(lambda: all(s.state.value == "unconfigured" for s in pilot.app.snapshot.sources))
        await pilot.pause()
        for key in keys:
            await pilot.press(key)
            await pilot.pause()

    return run_before


def settle_wizard(*keys: str):
    """Open the launch wizard from the Instances pane, wait for its catalog, then press ``keys``."""

    async def run_before(pilot) -> None:
        from gpuconsole.ui.wizards import ProvisionWizard

        await wait_until(lambda: all_live(pilot.app))
        await pilot.press("4", "n")
        await wait_until(lambda: isinstance(pilot.app.screen, ProvisionWizard))
        wizard = pilot.app.screen
        await wait_until(lambda: bool(wizard.workload_step.types))
        for key in keys:
            await pilot.press(key)
            await pilot.pause()
        if wizard.step == 1:
            await wait_until(lambda: bool(wizard.price_step.rows))
        await pilot.pause(0.1)

    return run_before


@pytest.mark.parametrize("size", SIZES)
def test_launch_wizard_types(snap_compare, frozen_app, size):
    assert snap_compare(frozen_app(), terminal_size=SIZES[size], run_before=settle_wizard())


@pytest.mark.parametrize("size", SIZES)
def test_launch_wizard_prices(snap_compare, frozen_app, size):
    assert snap_compare(frozen_app(), terminal_size=SIZES[size], run_before=settle_wizard("enter"))
