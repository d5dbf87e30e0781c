"""What a user reads and how Esc backs out: the calculator's figures keep their units and fit
their columns, Esc clears a kept filter and leaves the Nodes view, a finished job's log opens at
its last line."""

from __future__ import annotations

from rich.cells import cell_len
from textual.widgets import DataTable

from gpuconsole.ui.panes.base import FilterInput
from gpuconsole.ui.panes.jobs import JobsPane
from tests.helpers import wait_until
from tests.driving import running
from tests.test_calculator_screen import calculator, field, replace_text, rows


async def test_calculator_figures_of_100_hours_and_more_keep_their_unit_and_fit_their_column():
    async with calculator() as (app, pilot, screen):
        await replace_text(pilot, field(screen, "gpu_hours"), "250000")
        table = screen.query_one("#calc-table", DataTable)
        got = rows(screen)
        assert all(cells[2].endswith(" h") and cells[2] != "-" for cells in got.values()), got
        for column in ("cost", "time"):
            width = next(c for key, c in table.columns.items() if key.value == column).get_render_width(table)
            widest = max(cell_len(cells[1 if column == "cost" else 2]) for cells in got.values())
            assert width >= widest + 2 * table.cell_padding, (column, width, got)


async def test_esc_clears_a_kept_filter_then_leaves_the_nodes_view():
    async with running() as (app, pilot):
        await pilot.press("3")
        await pilot.pause()
        pane = app.query_one(JobsPane)
        await pilot.press("slash", *"train", "enter")
        await wait_until(lambda: pane.filter_text == "train")
        await pilot.press("escape")
        await wait_until(lambda: pane.filter_text == "")
        assert not pane.query_one(FilterInput).display
        await pilot.press("n")
        await wait_until(lambda: pane.mode == "nodes")
        await pilot.press("escape")
        await wait_until(lambda: pane.mode == "jobs")
        await pilot.press("escape")  # nothing left to back out of: the pane stays, the app runs
        await pilot.pause()
        assert pane.mode == "jobs" and app.is_running


async def test_a_finished_jobs_log_opens_at_its_last_line():
    """The error of a failed job is on its last line: the log must open there, not at the top."""
    from gpuconsole.model import JobState
    from gpuconsole.ui.screens.logs import LogScreen
    from gpuconsole.ui.widgets.log_view import LogView
    from tests.test_jobs_pane import select_job

    async with running() as (app, pilot):
        await select_job(app, pilot, lambda j: j.state is JobState.FAILED and j.pod)
        await pilot.press("l")
        await wait_until(lambda: isinstance(app.screen, LogScreen))
        view = app.screen.query_one(LogView)
        await wait_until(lambda: len(view.lines) > view.size.height > 0 and app.screen.state == "ended")
        await pilot.pause()
        await wait_until(lambda: view.scroll_y == view.max_scroll_y > 0)
