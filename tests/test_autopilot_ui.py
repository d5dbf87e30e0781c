"""The Autopilot pane on the seeded demo: its rules after four minutes of the demo's autopilot
(snapshots at 80×24 and 160×48), pausing and resuming a rule, the add form checking fields as
they are typed, and the Overview's alert for a rule that acted."""

from __future__ import annotations

import json

import pytest
from textual.widgets import Input, Static

from tests.showcase import run_autopilot
from gpuconsole.ui.app import GpuConsoleApp
from gpuconsole.ui.screens.rule_form import RuleForm
from gpuconsole.ui.widgets.live_table import LiveTable
from tests.helpers import FrozenClock, all_live, demo_console, settle, wait_until

SIZES = {"80x24": (80, 24), "160x48": (160, 48)}


@pytest.fixture
def autopilot_app():
    consoles = []

    def make() -> GpuConsoleApp:
        clock = FrozenClock()
        console = demo_console(clock=clock)
        consoles.append(console)
        run_autopilot(console, clock, 240)
        return GpuConsoleApp(console, theme_name="dark")

    yield make
    for console in consoles:
        console.close()


@pytest.mark.parametrize("size", SIZES)
def test_autopilot_pane(snap_compare, autopilot_app, size):
    assert snap_compare(autopilot_app(), terminal_size=SIZES[size], run_before=settle("7"))


async def test_every_kind_acted_in_the_demos_first_minutes_and_the_overview_says_so(autopilot_app) -> None:
    app = autopilot_app()
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_until(lambda: all_live(app))
        rules = {r.name: r for r in app.snapshot.autopilot}
        assert {r.kind for r in rules.values() if r.acted_at is not None} == {"scale", "idle-stop", "spot-recover", "serve-scale"}
        assert app.snapshot.autopilot_leader == "this console (demo)"
        acted = [a.message for a in app.snapshot.alerts if a.source == "autopilot"]
        assert any(m.startswith("rule vision-pool acted: launch") for m in acted)
        await pilot.press("1")
        await pilot.pause()
        shown = app.screen.query_one("#card-alerts")._shown
        assert shown is not None and "rule vision-pool acted: launch" in shown.plain
        records = [r for r in app.core.services.guard.audit.records() if r.actor.startswith("autopilot:")]
        assert {r.actor for r in records} == {"autopilot:vision-pool", "autopilot:autostop", "autopilot:spot-recover",
                                              "autopilot:embed-scale"}
        assert all("figures" in json.loads(r.params) for r in records)


async def test_p_pauses_and_resumes_the_selected_rule(autopilot_app) -> None:
    app = autopilot_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until(lambda: all_live(app))
        await pilot.press("7")
        await pilot.pause()
        table = app.screen.query_one("#rule-table", LiveTable)
        table.focus()
        await pilot.pause()
        assert table.selected_key == "vision-pool"
        await pilot.press("p")
        await wait_until(lambda: any(r.name == "vision-pool" and r.paused for r in app.snapshot.autopilot))
        await pilot.press("p")
        await wait_until(lambda: any(r.name == "vision-pool" and not r.paused for r in app.snapshot.autopilot))
        actions = [r.action for r in app.core.services.guard.audit.records() if r.target == "vision-pool" and r.result != "started"]
        assert actions[-2:] == ["rule-pause", "rule-resume"]


async def test_the_add_form_checks_each_field_as_it_is_typed(autopilot_app) -> None:
    app = autopilot_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until(lambda: all_live(app))
        await pilot.press("7", "a")
        await wait_until(lambda: isinstance(app.screen, RuleForm))
        form = app.screen
        await pilot.press(*"night")
        await pilot.pause()
        assert "ok" in str(form.query_one("#rule-error", Static).render())
        form.query_one("#rule-scope", Input).focus()
        await pilot.press(*"tag:Project")  # not yet KEY=VALUE
        await pilot.pause()
        error = str(form.query_one("#rule-error", Static).render())
        assert "rule 'night' key scope:" in error and "tag:KEY=VALUE" in error
        assert form.query_one("#rule-scope", Input).has_class("-invalid")
        await pilot.press(*"=vision")
        form.query_one("#rule-idle_for", Input).focus()
        await pilot.press(*"2 hours")
        await pilot.pause()
        assert "key idle_for:" in str(form.query_one("#rule-error", Static).render())
        assert not form.query_one("#rule-scope", Input).has_class("-invalid")
        await pilot.press("ctrl+s")  # refused: the form stays, on the field at fault
        await pilot.pause()
        assert app.screen is form and app.focused is form.query_one("#rule-idle_for", Input)
        for _ in "2 hours":
            await pilot.press("backspace")
        await pilot.press(*"2h")
        await pilot.press("ctrl+s")
        await wait_until(lambda: any(r.name == "night" for r in app.snapshot.autopilot))
        added = next(r for r in app.snapshot.autopilot if r.name == "night")
        assert added.kind == "idle-stop" and added.scope == "tag:Project=vision" and added.origin == "db"
        # the demo's own rules stay beside the one added
        assert {"vision-pool", "autostop", "spot-recover"} <= {r.name for r in app.snapshot.autopilot}
