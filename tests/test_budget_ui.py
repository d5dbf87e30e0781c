"""Budgets as a keyboard user meets them: the form, the guide's rule in a few keys, pending
actions run with a yes, the bell for new crossings only, idle waste, and the launch's impact."""

from __future__ import annotations

from textual.widgets import Input, Static

from gpuconsole.model import Budget, BudgetAction, BudgetPeriod, InstanceState, Market, Threshold, ThresholdBasis
from gpuconsole.ui.app import GpuConsoleApp
from gpuconsole.ui.format import money
from gpuconsole.ui.screens.budget_form import BudgetForm
from gpuconsole.ui.screens.confirm import ConfirmScreen
from tests.helpers import FrozenClock, demo_console, wait_until
from tests.driving import running, table


async def test_a_budget_from_the_form_lands_in_the_pane():
    async with running() as (app, pilot):
        await pilot.press("5", "a")
        await wait_until(lambda: isinstance(app.screen, BudgetForm))
        await pilot.press(*"team-cv", "tab", *"12k")
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert isinstance(app.screen, BudgetForm), "bad input keeps the form and what was typed"
        assert "amount: not a number" in str(app.screen.query_one("#budget-error", Static).content)
        app.screen.query_one("#budget-amount", Input).value = "12000"
        scope = app.screen.query_one("#budget-scope", Input)
        scope.value = "tag:Project"  # no value: refused with the scope's own message
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert isinstance(app.screen, BudgetForm)
        assert "bad budget scope" in str(app.screen.query_one("#budget-error", Static).content)
        assert app.screen.query_one("#budget-name", Input).value == "team-cv"
        scope.value = "tag:Project=vision"
        await pilot.press("ctrl+s")
        await wait_until(lambda: app.core.services.budget_ops.get("team-cv") is not None)
        budget = app.core.services.budget_ops.get("team-cv")
        assert (budget.amount, budget.scope, budget.period) == (12000.0, "tag:Project=vision", BudgetPeriod.MONTHLY)
        await wait_until(lambda: "team-cv" in table(app, "budget-table").shown_keys)
        assert app.core.services.actions.recent()[-1].ok


async def test_the_guides_rule_in_a_few_keys():
    """'Alert, and pause instances when cumulative cost reaches $1,000': a, f2, ctrl+s."""
    async with running() as (app, pilot):
        await pilot.press("5", "a")
        await wait_until(lambda: isinstance(app.screen, BudgetForm))
        await pilot.press("f2", "ctrl+s")
        await wait_until(lambda: app.core.services.budget_ops.get("pause-at-1000") is not None)
        budget = app.core.services.budget_ops.get("pause-at-1000")
        assert budget.amount == 1000 and budget.automatic and budget.period is BudgetPeriod.CUSTOM
        assert budget.starts == app.core.clock()
        top = max(budget.thresholds, key=lambda t: t.percent)
        assert top.percent == 100 and BudgetAction.STOP_ALL in top.actions and top.basis is ThresholdBasis.ACTUAL


async def test_sprint_rings_for_new_crossings_only_and_its_stop_waits_for_a_yes(monkeypatch):
    clock = FrozenClock()
    console = demo_console(clock=clock)
    rings: list[int] = []
    monkeypatch.setattr(GpuConsoleApp, "bell", lambda self: rings.append(1))
    async with running(console) as (app, pilot):
        await pilot.pause(0.3)
        assert rings == [], "thresholds already crossed when the demo opens do not ring"
        clock.advance(200)  # the sprint passes 50% about 2.5 minutes in
        console.refresh()
        await wait_until(lambda: rings, timeout=10)
        assert any("Budget" == n.title for n in app._notifications)
        clock.advance(600)  # well past 100%: a stop-all waits for a yes
        console.refresh()
        await wait_until(lambda: any(p.budget == "sprint" and p.action is BudgetAction.STOP_ALL
                                     for p in app.snapshot.pending_actions), timeout=10)
        stop = next(p for p in app.snapshot.pending_actions if p.budget == "sprint" and p.action is BudgetAction.STOP_ALL)
        assert stop.targets and not stop.automatic
        # All that bills and can be stopped: running on-demand instances, the Azure Spot VM, and the
        # Azure VM stopped but not deallocated (still billed: the stop deallocates it).
        running_before = {i.instance_id for i in app.snapshot.instances
                          if (i.state is InstanceState.RUNNING and (i.market is Market.ON_DEMAND or i.stoppable_spot))
                          or (i.state is InstanceState.STOPPED and i.bills_now)}
        assert set(stop.targets) == running_before
        await pilot.press("5")
        await pilot.pause()
        pending = table(app, "pending-table")
        assert pending.display
        pending.focus()
        key = next(k for k in pending.shown_keys if k.startswith("sprint|") and k.endswith("|stop-all"))
        pending.move_cursor(row=pending.shown_keys.index(key))
        await pilot.press("exclamation_mark")
        await wait_until(lambda: isinstance(app.screen, ConfirmScreen))
        assert stop.targets[0] in str(app.screen.query_one("#confirm-details", Static).content)
        await pilot.press("y")
        await wait_until(lambda: all(i.state is InstanceState.STOPPING or (i.state is InstanceState.STOPPED
                                                                           and not i.bills_now)
                                     for i in app.snapshot.instances if i.instance_id in running_before), timeout=10)
        assert app.core.services.actions.recent()[-1].ok


async def test_idle_waste_after_thirty_minutes_is_on_the_overview_and_the_gpu_line():
    clock = FrozenClock()
    console = demo_console(clock=clock)
    console.services.autopilot.act = False  # the demo's autostop would end the idle GPU it looks at
    async with running(console) as (app, pilot):
        assert app.snapshot.idle == ()
        clock.advance(31 * 60)
        console.refresh()
        await wait_until(lambda: bool(app.snapshot.idle), timeout=15)
        waste = app.snapshot.idle[0]
        assert waste.wasted > 0 and waste.per_hour > 0
        await pilot.press("1")
        await pilot.pause()
        card = str(app.query_one("#card-gpus", Static).content)
        assert "idle≥30m" in card and "lost" in card
        assert any("idle for 30+ min while billed" in a.message for a in app.snapshot.alerts)
        await pilot.press("2")
        await pilot.pause()
        gpus = table(app, "gpu-table")

        def detail_says_wasted() -> bool:  # on the idle GPU's row, once the pane has drawn its line
            gpus.move_cursor(row=gpus.shown_keys.index(waste.uuid))
            return "wasted" in str(app.query_one("#gpus-pane .row-detail", Static).content)

        await wait_until(detail_says_wasted)


async def test_the_launch_review_says_what_the_launch_does_to_its_budget():
    from tests.test_wizard import choose_type, choose_zone, fill, open_wizard, text_of, to_review

    async with running() as (app, pilot):
        wizard = await open_wizard(app, pilot)
        await choose_type(pilot, wizard, "p4de.24xlarge")
        await choose_zone(pilot, wizard, "us-east-1a", Market.ON_DEMAND)
        await fill(pilot, wizard.query_one("#tag-Budget", Input), "nlp")
        await to_review(pilot, wizard)
        cost = text_of(wizard, "#review-cost")
        assert "budget team-nlp" in cost and "this launch adds" in cost


async def test_a_budget_action_confirmation_lists_every_target_with_its_price_and_the_total():
    """The dialog once said "stop 5 instances: … and 1 more", and the hidden one was the $98/h p5."""
    async with running(demo_console(nodes=24)) as (app, pilot):
        app.core.services.budget_ops.add(Budget("everything", 1.0, thresholds=(Threshold(100.0, actions=(BudgetAction.STOP_ALL,)),)))
        app.core.refresh()
        await wait_until(lambda: any(p.budget == "everything" for p in app.snapshot.pending_actions), timeout=10)
        stop = next(p for p in app.snapshot.pending_actions if p.budget == "everything")
        assert len(stop.targets) > 4 and "more" in stop.detail  # more than the one-line summary names
        await pilot.press("5")
        await pilot.pause()
        pending = table(app, "pending-table")
        pending.focus()
        pending.move_cursor(row=next(i for i, k in enumerate(pending.shown_keys) if k.startswith("everything|")))
        await pilot.press("exclamation_mark")
        await wait_until(lambda: isinstance(app.screen, ConfirmScreen))
        lines = str(app.screen.query_one("#confirm-target-lines", Static).content).splitlines()
        assert [line.split()[0] for line in lines] == list(stop.targets)
        prices = {i.instance_id: i.price_per_hour for i in app.snapshot.instances}
        assert all(line.endswith(f"{money(prices[line.split()[0]])}/h") for line in lines)
        total = str(app.screen.query_one("#confirm-total", Static).content)
        assert total == f"{len(stop.targets)} instances, {money(sum(prices[t] for t in stop.targets))}/h in all"
        await pilot.press("n")
