"""Money needs a deliberate key: keys typed in one burst never launch, create, terminate or run a
budget action that the user did not see on screen first, and the screen says why."""

from __future__ import annotations

import pytest
from textual.widgets import Input

from gpuconsole.model import InstanceState, Market
from gpuconsole.ui.screens.confirm import ConfirmScreen
from gpuconsole.ui.wizards.provision import REVIEW, ProvisionWizard
from gpuconsole.ui.wizards.submit import SubmitWizard
from tests.driving import running, shown, table
from tests.helpers import wait_until
from tests.driving import burst, settle, show_pane
from tests.test_wizard import choose_type, choose_zone, move_to, open_wizard


def launched(app) -> list:
    return [a for a in app.core.services.actions.recent() if a.request.kind.value == "launch"]


def submitted(app) -> list:
    return [a for a in app.core.services.actions.recent() if a.request.kind.value == "submit-job"
            and ("dry-run", "yes") not in a.request.params]


def status(wizard) -> str:
    return shown(wizard.query_one(f"#{wizard.PREFIX}-status"))


async def to_details(app, pilot) -> ProvisionWizard:
    wizard = await open_wizard(app, pilot)
    await choose_type(pilot, wizard, "p4de.24xlarge")
    await choose_zone(pilot, wizard, "us-east-1a", Market.ON_DEMAND)
    assert wizard.step == 2
    return wizard


@pytest.mark.parametrize("keys", [("ctrl+n", "ctrl+n"), ("ctrl+n", "ctrl+n", "ctrl+n"), ("ctrl+n", "enter", "enter")])
async def test_a_burst_from_details_stops_on_the_review_and_launches_nothing(keys):
    async with running() as (app, pilot):
        wizard = await to_details(app, pilot)
        before = len(app.snapshot.instances)
        burst(app, *keys)
        try:
            await settle(pilot, lambda: wizard.step == REVIEW and "typed ahead" in status(wizard))
        except AssertionError:
            raise AssertionError(f"step {wizard.step}, status {status(wizard)!r}") from None
        assert wizard.step == REVIEW, "the burst went past the review"
        assert "typed ahead of the launch dropped" in status(wizard)
        # the review is on screen; the dry run passes, and still nothing launches by itself
        await wait_until(lambda: wizard.review_step.can_launch)
        await pilot.pause(0.2)
        assert wizard.step == REVIEW and not wizard.launch_step.started
        assert launched(app) == [] and len(app.snapshot.instances) == before
        # a key pressed with the review on screen launches
        await pilot.press("ctrl+n")
        await wait_until(lambda: wizard.launch_step.started)


async def test_a_burst_from_the_first_step_of_the_launch_wizard_stops_on_the_review():
    async with running() as (app, pilot):
        wizard = await open_wizard(app, pilot)
        await move_to(pilot, wizard.query_one("#type-table"), "p5.48xlarge")
        burst(app, "enter", "ctrl+n", "ctrl+n", "ctrl+n", "ctrl+n", "ctrl+n")
        await settle(pilot, lambda: wizard.step == REVIEW and "typed ahead" in status(wizard), timeout=10)
        await wait_until(lambda: wizard.review_step.can_launch)
        await pilot.pause(0.2)
        assert wizard.step == REVIEW and not wizard.launch_step.started and launched(app) == []


async def test_a_confirming_key_typed_before_the_review_was_painted_is_refused():
    """A key the terminal read before the review was on screen, arriving after it: refused."""
    from textual import events

    async with running() as (app, pilot):
        wizard = await to_details(app, pilot)
        early = events.Key("ctrl+n", None)  # stamped now, before the review exists
        await pilot.press("ctrl+n")
        await wait_until(lambda: wizard.step == REVIEW and wizard.review_step.can_launch)
        await pilot.pause()
        app.post_message(early)
        await settle(pilot, lambda: "Nothing was done" in status(wizard))
        assert not wizard.launch_step.started and launched(app) == []


async def submit_wizard(app, pilot) -> SubmitWizard:
    await show_pane(app, pilot, "3", "jobs")
    await pilot.press("N")
    await wait_until(lambda: isinstance(app.screen, SubmitWizard) and app.screen.built)
    await pilot.pause()
    return app.screen


@pytest.mark.parametrize("keys", [("ctrl+n", "ctrl+n", "ctrl+n"), ("ctrl+n", "ctrl+n", "enter", "enter")])
async def test_a_burst_through_the_job_wizard_creates_no_job(keys):
    async with running() as (app, pilot):
        wizard = await submit_wizard(app, pilot)
        wizard.query_one("#job-name", Input).value = "burst-probe"
        await pilot.pause()
        jobs = {j.name for j in app.snapshot.jobs}
        submits = submitted(app)
        burst(app, *keys)
        await settle(pilot, lambda: wizard.step == wizard.CONFIRM_STEP and "typed ahead" in status(wizard))
        await wait_until(lambda: wizard.can_submit)
        await pilot.pause(0.2)
        assert wizard.result is None and not wizard.submitting
        assert "typed ahead of creating the job dropped" in status(wizard)
        assert submitted(app) == submits
        assert {j.name for j in app.snapshot.jobs} == jobs
        await pilot.press("ctrl+n")  # pressed with the review on screen: created
        await wait_until(lambda: len(submitted(app)) == len(submits) + 1)


@pytest.mark.parametrize("keys", [("x", "y"), ("x", "y", "y")])
async def test_y_typed_with_a_budget_or_instance_key_answers_nothing(keys):
    async with running() as (app, pilot):
        await show_pane(app, pilot, "4", "instances")
        instances = table(app, "instance-table")
        instances.focus()
        running_ids = [i.instance_id for i in app.snapshot.instances if i.state is InstanceState.RUNNING]
        await move_to(pilot, instances, running_ids[0])
        burst(app, "s", *keys[1:])  # stop, then y before the question is on screen
        await settle(pilot, lambda: isinstance(app.screen, ConfirmScreen)
                     and any("typed ahead of this confirmation" in str(n.message) for n in app._notifications))
        assert isinstance(app.screen, ConfirmScreen), "the y answered the question before it was shown"
        assert not any(a.request.kind.value == "stop" for a in app.core.services.actions.recent())
        await pilot.press("y")  # pressed with the question on screen
        await wait_until(lambda: not isinstance(app.screen, ConfirmScreen))
        await wait_until(lambda: any(a.request.kind.value == "stop" for a in app.core.services.actions.recent()))
