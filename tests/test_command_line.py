"""The ``:`` command line (k9s's habit) and the less / htop keys beside the arrows."""

from __future__ import annotations

import pytest

from gpuconsole.ui.command_line import CommandError, CommandLine, completions, parse
from gpuconsole.ui.registry import PANES
from tests.driving import running, table
from tests.helpers import wait_until
from tests.driving import burst, settle, show_pane


def test_every_declared_pane_is_a_command_and_so_are_its_views():
    words = completions()
    for spec in PANES:
        assert spec.id in words
        command = parse(f":{spec.id}")
        assert (command.verb, command.pane, command.view) == ("show", spec.id, "")
    assert {"auto", "exps", "cronjobs", "nodes", "ns ", "ctx ", "theme ", "q"} <= set(words)
    assert (parse("cronjobs").pane, parse("cronjobs").view) == ("jobs", "cron")
    assert parse(":ns team-a").arg == "team-a" and parse(":ctx prod").verb == "ctx"
    assert parse("   ") is None


@pytest.mark.parametrize("line, words", [(":gpuz", "no command :gpuz; there are :overview"), (":ctx", ":ctx needs a name"),
                                         (":jobs now", "no command :jobs now")])
def test_a_line_that_is_no_command_says_so_in_one_line(line, words):
    with pytest.raises(CommandError) as raised:
        parse(line)
    assert str(raised.value).startswith(words) and "\n" not in str(raised.value)


@pytest.mark.parametrize("line, pane", [(":gpus", "gpus"), (":exps", "experiments"), (":auto", "autopilot"),
                                        (":instances", "instances")])
async def test_colon_and_a_pane_word_in_one_burst_show_that_pane(line, pane):
    async with running() as (app, pilot):
        burst(app, line, "enter")
        await settle(pilot, lambda: app.active_pane == pane)
        assert app.active_pane == pane and app.is_running
        assert not app.query_one(CommandLine).display


async def test_cronjobs_nodes_and_ns_open_the_jobs_views():
    async with running() as (app, pilot):
        burst(app, ":cronjobs", "enter")
        await settle(pilot, lambda: app.active_pane == "jobs" and app.focused is not None
                     and app.focused.id == "cron-table")
        assert app.focused.id == "cron-table"
        burst(app, ":nodes", "enter")
        await settle(pilot, lambda: app.current_pane.mode == "nodes")
        namespace = app.snapshot.jobs[0].namespace
        burst(app, f":ns {namespace}", "enter")
        await settle(pilot, lambda: app.current_pane.filter_text == namespace)
        assert app.current_pane.mode == "jobs"


async def test_queues_opens_the_queues_screen_over_the_job_queue():
    from gpuconsole.ui.screens.queues import QueuesScreen

    assert (parse(":queues").pane, parse(":queues").view) == ("jobs", "queues")
    async with running() as (app, pilot):
        burst(app, ":queues", "enter")
        await settle(pilot, lambda: isinstance(app.screen, QueuesScreen))
        assert isinstance(app.screen, QueuesScreen) and app.active_pane == "jobs"


async def test_tab_completes_and_a_wrong_word_is_named_on_screen():
    async with running() as (app, pilot):
        await pilot.press("colon")
        line = app.query_one(CommandLine)
        await wait_until(lambda: app.focused is line)
        await pilot.press(*"cron")
        await pilot.pause(0.2)  # the completion is found in a worker
        await pilot.press("tab")
        assert line.value == "cronjobs"
        await pilot.press("escape")
        assert not line.display and app.active_pane == "overview"
        burst(app, ":bogus", "enter")
        await settle(pilot, lambda: any("no command :bogus" in str(n.message) for n in app._notifications))
        assert app.is_running


async def test_q_quits_and_theme_switches():
    async with running() as (app, pilot):
        burst(app, ":theme light", "enter")
        await settle(pilot, lambda: "light" in app.theme)
        burst(app, ":q", "enter")
        await settle(pilot, lambda: not app.is_running)
        assert not app.is_running


async def test_j_k_g_and_shift_g_move_the_cursor_like_the_arrows():
    async with running() as (app, pilot):
        await show_pane(app, pilot, "3", "jobs")
        jobs = table(app, "job-table")
        jobs.focus()
        await pilot.pause()
        keys = jobs.shown_keys
        await pilot.press("j", "j")
        assert jobs.selected_key == keys[2]
        await pilot.press("k")
        assert jobs.selected_key == keys[1]
        await pilot.press("G")
        assert jobs.selected_key == keys[-1]
        await pilot.press("g")
        assert jobs.selected_key == keys[0]


async def test_the_budget_action_is_not_on_g_so_g_in_the_budgets_pane_runs_nothing():
    async with running() as (app, pilot):
        await show_pane(app, pilot, "5", "budgets")
        await pilot.press("g")
        await pilot.pause()
        from gpuconsole.ui.screens.confirm import ConfirmScreen

        assert not isinstance(app.screen, ConfirmScreen)


async def test_a_filter_that_matches_nothing_says_so():
    async with running() as (app, pilot):
        await show_pane(app, pilot, "4", "instances")
        burst(app, "/zzznothing")
        await settle(pilot, lambda: app.current_pane.filter_text == "zzznothing")
        line = app.current_pane.query_one(".row-detail")
        await wait_until(lambda: line.display)
        assert "no rows match 'zzznothing'" in app.export_screenshot().replace("&#160;", " ").replace("&#x27;", "'")


async def test_a_kept_filter_gives_its_rows_back_and_stays_named():
    from gpuconsole.ui.panes.base import FilterInput

    async with running() as (app, pilot):
        await show_pane(app, pilot, "3", "jobs")
        jobs = table(app, "job-table")
        rows = jobs.size.height
        burst(app, "/llama", "enter")
        await settle(pilot, lambda: app.current_pane.filter_text == "llama" and app.focused is jobs)
        await pilot.pause()
        assert not app.current_pane.query_one(FilterInput).display
        assert jobs.size.height == rows and "filter: llama" in app.export_screenshot().replace("&#160;", " ")
        await pilot.press("escape")
        assert app.current_pane.filter_text == ""


async def test_what_was_typed_stays_inert_in_the_notification():
    """A notification shows words as written: typed text, names and errors are never markup."""
    async with running() as (app, pilot):
        burst(app, ":zz[bold]boo[/]", "enter")
        await settle(pilot, lambda: any("no command" in str(n.message) for n in app._notifications))
        [note] = [n for n in app._notifications if "no command" in str(n.message)]
        assert note.markup is False and "zz[bold]boo[/]" in note.message
        app.notify("[/] \x1b[2J\x1b[31mred")  # a closing tag alone and escape sequences, as data may carry
        await pilot.pause()
        assert app.is_running and all(n.markup is False for n in app._notifications)
        [planted] = [n for n in app._notifications if "red" in n.message]
        assert planted.message == "[/] \\x1b[2J\\x1b[31mred" and "\x1b" not in planted.message


def test_inert_spells_out_every_control_character_and_keeps_the_rest():
    from gpuconsole.ui.format import inert

    assert inert("a\x1b[2Jb\x07\x9b\x7f") == "a\\x1b[2Jb\\x07\\x9b\\x7f"
    assert inert("tab\tnew\nline · ünïcode ✓ [bold]") == "tab\tnew\nline · ünïcode ✓ [bold]"
