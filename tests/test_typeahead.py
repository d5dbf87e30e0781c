"""Type-ahead: keys typed in one burst (a paste-fast typist over SSH, one ``tmux send-keys``)
land where the key before them sent the focus, in order, and none of them runs a binding.

The keys are posted to the app the way the terminal driver posts them, all at once, with no
pause between them: the app sees the whole burst queued before it handles its first key.
"""

from __future__ import annotations

import pytest
from textual import events
from textual.widgets import Input

from gpuconsole.ui.panes.base import FilterInput
from gpuconsole.ui.screens.calculator import CostCalculatorScreen
from gpuconsole.ui.screens.confirm import ConfirmScreen
from gpuconsole.ui.wizards.submit import SubmitWizard
from tests.driving import burst, running, settle, show_pane, table  # noqa: F401 - shared

def value(app, screen_type, selector: str) -> str | None:
    """What the input ``selector`` of the screen on top holds; None while that screen is not
    on top or not composed yet."""
    screen = app.screen
    if not isinstance(screen, screen_type):
        return None
    found = screen.query(selector)
    return found.first(Input).value if found else None


@pytest.mark.parametrize("key, pane_id", [("2", "gpus"), ("3", "jobs"), ("4", "instances"), ("5", "budgets"),
                                          ("6", "audit")])
async def test_slash_then_text_in_one_burst_is_the_filter(key, pane_id):
    async with running() as (app, pilot):
        await show_pane(app, pilot, key, pane_id)
        field = app.query_one(f"#{pane_id}-pane", ).query_one(FilterInput)
        burst(app, "/qwen")
        await settle(pilot, lambda: field.value == "qwen")
        assert app.is_running and app.return_code is None, "q of the burst quit the console"
        assert field.value == "qwen"
        assert app.focused is field
        assert app.current_pane.filter_text == "qwen"


async def test_a_pane_key_then_slash_and_text_in_one_burst():
    """The pane's number key, / and the words in one burst: the words filter that pane."""
    async with running() as (app, pilot):
        await show_pane(app, pilot, "3", "jobs")
        burst(app, "4/spot")
        await settle(pilot, lambda: app.active_pane == "instances" and app.current_pane.filter_text == "spot")
        assert app.is_running
        assert app.active_pane == "instances"
        assert app.query_one("#instances-pane").query_one(FilterInput).value == "spot"


async def test_submit_wizard_takes_the_name_typed_with_n():
    async with running() as (app, pilot):
        await show_pane(app, pilot, "3", "jobs")
        burst(app, "Nprobe-1")
        await settle(pilot, lambda: value(app, SubmitWizard, "#job-name") == "probe-1")
        assert app.is_running
        assert isinstance(app.screen, SubmitWizard)
        wizard = app.screen
        assert wizard.query_one("#job-name", Input).value == "probe-1"
        assert app.focused is wizard.query_one("#job-name", Input)


async def test_a_name_starting_with_q_is_typed_not_quit():
    """The q right after N used to reach the app while the wizard was being built, and quit."""
    async with running() as (app, pilot):
        await show_pane(app, pilot, "3", "jobs")
        burst(app, "Nqa-job")
        await settle(pilot, lambda: value(app, SubmitWizard, "#job-name") == "qa-job")
        assert app.is_running and app.return_code is None
        assert value(app, SubmitWizard, "#job-name") == "qa-job"


async def test_tab_in_a_burst_moves_to_the_next_field_in_order():
    async with running() as (app, pilot):
        await show_pane(app, pilot, "3", "jobs")
        burst(app, "N", "probe-2", "tab", "research", "tab", "busybox")
        await settle(pilot, lambda: value(app, SubmitWizard, "#job-image") == "busybox")
        assert isinstance(app.screen, SubmitWizard)
        wizard = app.screen
        assert wizard.query_one("#job-name", Input).value == "probe-2"
        assert wizard.query_one("#job-namespace", Input).value == "research"
        assert wizard.query_one("#job-image", Input).value == "busybox"
        assert app.focused is wizard.query_one("#job-image", Input)


async def test_tab_typed_before_the_rest_of_the_form_is_built(monkeypatch):
    """The wizard shows Name first and mounts the rest after the first frame; a tab typed
    before that has happened still moves through the whole form in order."""
    real = SubmitWizard.build_rest
    calls: list[bool] = []

    async def not_after_the_first_frame(self) -> None:
        calls.append(self.built)
        if len(calls) > 1:  # the first call is the one after the first frame: left out
            await real(self)

    monkeypatch.setattr(SubmitWizard, "build_rest", not_after_the_first_frame)
    async with running() as (app, pilot):
        await show_pane(app, pilot, "3", "jobs")
        burst(app, "N", "probe-2", "tab", "research", "tab", "busybox", "tab", "sleep 10")
        await settle(pilot, lambda: value(app, SubmitWizard, "#job-command") == "sleep 10")
        wizard = app.screen
        assert isinstance(wizard, SubmitWizard) and wizard.built
        assert calls[:2] == [False, False], "the tab built the form"
        assert [value(app, SubmitWizard, f"#job-{name}") for name in ("name", "namespace", "image", "command")] == [
            "probe-2", "research", "busybox", "sleep 10"]


async def test_enter_in_a_burst_moves_to_the_next_field_too():
    async with running() as (app, pilot):
        await show_pane(app, pilot, "3", "jobs")
        burst(app, "N", "probe-3", "enter", "research")
        await settle(pilot, lambda: value(app, SubmitWizard, "#job-namespace") == "research")
        assert value(app, SubmitWizard, "#job-name") == "probe-3"
        assert value(app, SubmitWizard, "#job-namespace") == "research"


async def test_keys_after_the_wizard_is_cancelled_go_back_to_the_pane():
    async with running() as (app, pilot):
        await show_pane(app, pilot, "3", "jobs")
        burst(app, "Nx", "escape", "/train")
        await settle(pilot, lambda: app.current_pane.filter_text == "train")
        assert not isinstance(app.screen, SubmitWizard)
        assert app.query_one("#jobs-pane").query_one(FilterInput).value == "train"


async def test_filter_enter_then_a_key_acts_on_the_filtered_table():
    """Enter keeps the filter and gives the table the focus; the x after it is the table's."""
    async with running() as (app, pilot):
        await show_pane(app, pilot, "4", "instances")
        spot = sorted(i.instance_id for i in app.snapshot.instances if i.market.value == "spot")
        assert spot
        burst(app, "/spot", "enter", "x")
        await settle(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        assert isinstance(app.screen, ConfirmScreen)
        details = str(app.screen.query_one("#confirm-details").content)
        assert any(i in details for i in spot)
        assert app.query_one("#instances-pane").query_one(FilterInput).value == "spot"


async def test_calculator_takes_the_digits_typed_with_dollar():
    async with running() as (app, pilot):
        burst(app, "$1234")
        await settle(pilot, lambda: value(app, CostCalculatorScreen, "#in-gpu_hours") == "1234")
        assert app.is_running
        assert isinstance(app.screen, CostCalculatorScreen)
        first = app.screen.query_one("#in-gpu_hours", Input)
        assert first.value == "1234"
        assert app.focused is first


async def test_palette_takes_the_words_typed_with_ctrl_p():
    from textual.command import CommandInput, CommandPalette

    async with running() as (app, pilot):
        await show_pane(app, pilot, "2", "gpus")
        app.post_message(events.Key("ctrl+p", None))
        burst(app, "quit")
        # the palette's field may not be composed yet when it is first looked at
        await settle(pilot, lambda: isinstance(app.screen, CommandPalette)
                     and any(field.value == "quit" for field in app.screen.query(CommandInput)))
        assert app.is_running
        assert isinstance(app.screen, CommandPalette)
        assert app.screen.query_one(CommandInput).value == "quit"


async def test_add_budget_form_takes_the_text_typed_with_a():
    from gpuconsole.ui.screens.budget_form import BudgetForm

    async with running() as (app, pilot):
        await show_pane(app, pilot, "5", "budgets")
        burst(app, "aqa-team")
        await settle(pilot, lambda: isinstance(app.screen, BudgetForm)
                     and isinstance(app.focused, Input) and app.focused.value == "qa-team")
        assert app.is_running
        assert isinstance(app.screen, BudgetForm)
        assert isinstance(app.focused, Input) and app.focused.value == "qa-team"


async def test_end_then_x_targets_the_last_instance():
    async with running() as (app, pilot):
        await show_pane(app, pilot, "4", "instances")
        instances = table(app, "instance-table")
        assert instances.has_focus and instances.cursor_row == 0
        last = instances.shown_keys[-1]
        first = instances.shown_keys[0]
        burst(app, "end", "x")
        await settle(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        assert isinstance(app.screen, ConfirmScreen)
        details = str(app.screen.query_one("#confirm-details").content)
        assert last in details and first not in details
        await pilot.press("escape")
        await pilot.pause()
        assert instances.selected_key == last


@pytest.mark.parametrize("key, pane_id, table_id", [("2", "gpus", "gpu-table"), ("3", "jobs", "job-table"),
                                                    ("4", "instances", "instance-table"),
                                                    ("5", "budgets", "budget-table")])
async def test_home_end_and_pages_move_the_row_cursor_in_every_table(key, pane_id, table_id):
    async with running() as (app, pilot):
        await show_pane(app, pilot, key, pane_id)
        rows = table(app, table_id)
        assert rows.has_focus
        count = len(rows.shown_keys)
        assert count > 1
        await pilot.press("end")
        assert rows.cursor_row == count - 1
        assert rows.selected_key == rows.shown_keys[-1]
        await pilot.press("home")
        assert rows.cursor_row == 0
        await pilot.press("pagedown")
        assert rows.cursor_row > 0
        await pilot.press("end", "pageup")
        assert rows.cursor_row < count - 1
        await pilot.press("home")
        assert rows.cursor_row == 0


# ---------------------------------------------------------------------- Esc is Esc
def test_the_terminal_reads_esc_and_a_digit_as_alt_and_that_digit_not_a_glyph():
    """Over SSH a bare Esc and the next key arrive together: Textual reads them as one key. The
    macOS Option-digit glyphs it would make of them (``Esc 4`` → ``¢``) are gone."""
    from textual._xterm_parser import XTermParser

    from gpuconsole.ui import typeahead

    parser = XTermParser()
    assert list(parser.feed("\x1b4")) == []
    [key] = list(parser.feed(""))  # the escape delay ran out
    assert (key.key, key.character) == ("alt+4", "4")
    split = typeahead.esc_then_key(key, set())
    assert [(k.key, k.character) for k in split] == [("escape", "\x1b"), ("4", "4")]
    assert all(k.time == key.time for k in split)
    assert typeahead.esc_then_key(key, {"alt+4"}) == [key], "an Alt key the screen binds stays one"


async def test_esc_then_a_pane_key_in_one_burst_clears_the_filter_and_switches():
    async with running() as (app, pilot):
        await show_pane(app, pilot, "5", "budgets")
        field = app.query_one("#budgets-pane").query_one(FilterInput)
        burst(app, "/bert")
        app.post_message(events.Key("alt+4", "4"))  # Esc 4, as the terminal reads it
        await settle(pilot, lambda: app.active_pane == "instances")
        assert app.active_pane == "instances"
        assert "¢" not in field.value and "4" not in field.value


async def test_esc_then_a_key_closes_the_help_and_the_key_still_lands():
    from gpuconsole.ui.screens.help import HelpScreen

    async with running() as (app, pilot):
        burst(app, "?")
        await settle(pilot, lambda: isinstance(app.screen, HelpScreen) and app.screen.is_mounted)
        app.post_message(events.Key("alt+2", "2"))
        await settle(pilot, lambda: not isinstance(app.screen, HelpScreen) and app.active_pane == "gpus")
        assert app.active_pane == "gpus"
