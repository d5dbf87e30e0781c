"""Stop, start, reboot and terminate from the Instances pane, as a keyboard user does them."""

from __future__ import annotations

from textual.widgets import Input, Static

from gpuconsole.model import InstanceState, Market
from gpuconsole.ui.screens.confirm import ConfirmScreen
from gpuconsole.ui.screens.help import HelpScreen
from tests.helpers import wait_until
from tests.driving import running, table


def state_of(app, instance_id: str) -> InstanceState:
    return next(i.state for i in app.snapshot.instances if i.instance_id == instance_id)


async def select(app, pilot, predicate) -> str:
    """Move the cursor of the instance table to the first row whose instance passes ``predicate``."""
    await pilot.press("4")
    await pilot.pause()
    t = table(app, "instance-table")
    wanted = next(i for i in app.snapshot.instances if predicate(i))
    t.move_cursor(row=t.shown_keys.index(wanted.instance_id))
    await pilot.pause()
    return wanted.instance_id


def notes(app) -> list[str]:
    return [n.message for n in app._notifications]


async def test_stop_asks_yes_or_no_and_goes_through_the_core():
    async with running() as (app, pilot):
        target = await select(app, pilot, lambda i: i.market is Market.ON_DEMAND and i.state is InstanceState.RUNNING)
        await pilot.press("s")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        assert target in str(app.screen.query_one("#confirm-details", Static).content)
        await pilot.press("n")  # no: nothing happens
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmScreen)
        assert state_of(app, target) is InstanceState.RUNNING
        await pilot.press("s", "y")
        await wait_until(lambda: state_of(app, target) in (InstanceState.STOPPING, InstanceState.STOPPED))
        result = app.core.services.actions.recent()[-1]
        assert result.ok and result.request.target == target and result.request.confirmation == "yes"


async def test_terminate_wants_the_id_typed():
    async with running() as (app, pilot):
        target = await select(app, pilot, lambda i: i.state is InstanceState.RUNNING)
        await pilot.press("x")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        assert isinstance(app.focused, Input)
        await pilot.press(*"yes", "enter")  # letters are typed, not answers
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        assert "type it exactly" in str(app.screen.query_one("#confirm-error", Static).content)
        assert state_of(app, target) is InstanceState.RUNNING
        app.screen.query_one(Input).value = target
        await pilot.press("enter")
        await wait_until(lambda: state_of(app, target) in (InstanceState.SHUTTING_DOWN, InstanceState.TERMINATED))
        assert app.core.services.actions.recent()[-1].request.confirmation == target


async def test_refused_before_asking_when_the_state_does_not_allow_it():
    async with running() as (app, pilot):
        spot = await select(app, pilot, lambda i: i.market is Market.SPOT and i.state is InstanceState.RUNNING)
        await pilot.press("s")
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmScreen)
        assert any("one-time spot instance" in n and spot in n for n in notes(app))
        await pilot.press("S")  # start: it is running already
        await pilot.pause()
        assert any(f"cannot start {spot}: it is running" in n for n in notes(app))
        assert app.core.services.actions.recent() == ()


async def test_tab_over_a_dialog_leaves_the_panes_alone():
    async with running() as (app, pilot):
        await pilot.press("4", "question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("tab", "2")
        await pilot.pause()
        assert app.active_pane == "instances"
