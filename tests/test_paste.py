"""Pasting: a bracketed paste is one paste, whole, in the field that has the focus; a plain paste
(every character a key, as a terminal without bracketed paste sends it) lands whole too, as one
change of the field; and no paste ever runs a key binding or answers a confirmation.

A paste is posted to the app as the terminal driver posts it (``events.Paste`` for a bracketed
paste, one ``events.Key`` per character otherwise, all at once).
"""

from __future__ import annotations

from textual import events
from textual.app import ComposeResult
from textual.screen import ModalScreen
from textual.widgets import Input

from gpuconsole.model import InstanceState
from gpuconsole.ui.panes.base import FilterInput
from gpuconsole.ui.screens.confirm import ConfirmScreen
from tests.driving import burst, running, settle, show_pane
from tests.test_instances_pane import select, state_of
from tests.test_jobs_pane import job, plain_running, select_job

# Letters the console binds (q quits, n the Nodes view, c the CronJobs, N the submit wizard,
# s suspend, l logs, r refresh, t theme, d demo, ? keys, 4 a pane): pasted, they are only text.
BOUND = "qwen n c N s l r t d ? 4 sweep"


def paste(app, text: str) -> None:
    """A bracketed paste, posted as the terminal driver posts it."""
    app.post_message(events.Paste(text))


async def open_jobs_filter(app, pilot) -> FilterInput:
    await show_pane(app, pilot, "3", "jobs")
    await pilot.press("slash")
    field = app.query_one("#jobs-pane").query_one(FilterInput)
    await settle(pilot, lambda: app.focused is field)
    return field


def count_filter_changes(app) -> list[str]:
    """Every filter the Jobs pane is asked to apply, from now on."""
    pane = app.query_one("#jobs-pane")
    changes: list[str] = []
    apply = pane._filter_by

    def counted(words: str) -> None:
        changes.append(words)
        apply(words)

    pane._filter_by = counted
    return changes


def nothing_ran(app) -> None:
    assert app.is_running and app.return_code is None, "a pasted q quit the console"
    assert app.active_pane == "jobs", "a pasted digit switched the pane"
    assert app.query_one("#jobs-pane").mode == "jobs", "a pasted n opened the Nodes view"
    assert len(app.screen_stack) == 1, f"a pasted key opened {app.screen!r}"


async def test_a_bracketed_paste_lands_whole_in_the_jobs_filter_as_one_change():
    async with running() as (app, pilot):
        field = await open_jobs_filter(app, pilot)
        changes = count_filter_changes(app)
        paste(app, BOUND)
        await settle(pilot, lambda: field.value == BOUND)
        assert field.value == BOUND and field.cursor_position == len(BOUND)
        assert changes == [BOUND], "the paste was not one change of the filter"
        assert app.current_pane.filter_text == BOUND.lower()
        assert app.focused is field
        nothing_ran(app)


async def test_a_plain_paste_lands_whole_and_filters_once_not_once_a_key():
    """Without bracketed paste every character is a key: they still land in order, in the field,
    and the field changes once for the keys that were waiting, not once for each of them."""
    text = (BOUND + " ") * 20
    async with running() as (app, pilot):
        await show_pane(app, pilot, "3", "jobs")
        field = app.query_one("#jobs-pane").query_one(FilterInput)
        changes = count_filter_changes(app)
        burst(app, "/", text)
        await settle(pilot, lambda: field.value == text)
        assert field.value == text
        assert changes and changes[-1] == text
        assert len(changes) <= 2, f"{len(changes)} filter passes for one paste of {len(text)} keys"
        nothing_ran(app)


async def test_a_pasted_line_break_is_not_enter():
    """A bracketed paste of two lines puts the first in the one-line field and submits nothing:
    the field stays open, and the second line's q is not a key."""
    async with running() as (app, pilot):
        field = await open_jobs_filter(app, pilot)
        paste(app, "bert\nqwen\r\n")
        await settle(pilot, lambda: field.value == "bert")
        await pilot.pause()
        assert field.value == "bert"
        assert field.display and app.focused is field, "the pasted line break submitted the filter"
        nothing_ran(app)


async def test_a_pasted_y_never_answers_a_confirmation():
    async with running() as (app, pilot):
        uid = await select_job(app, pilot, plain_running)
        await pilot.press("ctrl+d")
        await settle(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        paste(app, "y")
        paste(app, "yes\ny\r")
        await pilot.pause()
        await pilot.pause(0.2)
        assert isinstance(app.screen, ConfirmScreen), "a paste answered the confirmation"
        assert job(app, uid) is not None and app.core.services.actions.recent() == ()
        await pilot.press("n")
        await settle(pilot, lambda: not isinstance(app.screen, ConfirmScreen))
        assert job(app, uid) is not None and app.core.services.actions.recent() == ()


async def test_a_pasted_id_and_line_break_fill_the_typed_confirmation_but_do_not_submit_it():
    async with running() as (app, pilot):
        target = await select(app, pilot, lambda i: i.state is InstanceState.RUNNING)
        await pilot.press("x")
        await settle(pilot, lambda: isinstance(app.screen, ConfirmScreen) and isinstance(app.focused, Input))
        field = app.screen.query_one(Input)
        paste(app, f"{target}\n")
        await settle(pilot, lambda: field.value == target)
        await pilot.pause(0.2)
        assert isinstance(app.screen, ConfirmScreen), "the pasted line break confirmed the terminate"
        assert state_of(app, target) is InstanceState.RUNNING
        assert app.core.services.actions.recent() == ()
        await pilot.press("enter")  # a key pressed with the question on screen confirms
        await settle(pilot, lambda: state_of(app, target) in (InstanceState.SHUTTING_DOWN, InstanceState.TERMINATED))


class LimitedField(ModalScreen[None]):
    """A field that takes four characters at most."""

    def compose(self) -> ComposeResult:
        yield Input(max_length=4, id="limited")

    def on_mount(self) -> None:
        self.query_one(Input).focus()


async def test_a_plain_paste_into_a_field_with_a_limit_keeps_what_fits():
    """Keys typed into a field with a length limit go in one by one, as typed: the first four
    stay, where one paste of all of them would have been refused whole."""
    async with running() as (app, pilot):
        await app.push_screen(LimitedField())
        field = app.screen.query_one("#limited", Input)
        await settle(pilot, lambda: app.focused is field)
        burst(app, "abcdefgh")
        await settle(pilot, lambda: field.value == "abcd")
        await pilot.pause(0.1)
        assert field.value == "abcd"
