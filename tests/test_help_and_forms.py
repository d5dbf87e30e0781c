"""The help lists the keys that work where the user is; forms and filters keep what was typed and
say what is wrong in one line; the words on screen name the keys that work."""

from __future__ import annotations

import io

from textual.binding import Binding
from textual.widgets import Input, Static

from gpuconsole.core.access.access import Role
from gpuconsole.model import SourceState
from gpuconsole.ui.panes.audit import AuditPane
from gpuconsole.ui.panes.gpus import GpusPane
from gpuconsole.ui.screens.budget_form import BudgetForm
from gpuconsole.ui.screens.gpu_detail import GpuDetailScreen
from gpuconsole.ui.screens.help import HelpScreen
from tests.helpers import demo_console, wait_until
from tests.test_access_ui import console_app
from tests.driving import running, shown

PANE_KEYS = {"1": "overview", "2": "gpus", "3": "jobs", "4": "instances", "5": "budgets", "6": "audit"}


def help_text(app) -> str:
    """What the help screen on top shows, as plain text (wide: one line per key)."""
    from rich.console import Console

    assert isinstance(app.screen, HelpScreen)
    console = Console(record=True, width=400, file=io.StringIO())
    console.print(app.screen.query_one(Static).content)
    return "\n".join(line.strip() for line in console.export_text().splitlines())


async def open_help(app, pilot) -> str:
    await pilot.press("question_mark")
    await wait_until(lambda: isinstance(app.screen, HelpScreen))
    await pilot.pause()
    return help_text(app)


def keys_of(text: str) -> set[str]:
    """Every key named at the start of a line of the help."""
    found: set[str] = set()
    for line in text.splitlines():
        head, sep, _ = line.partition("  ")
        if sep:
            found.update(head.split())
    return found


def bindings(cls: type) -> list[Binding]:
    return [b for b in cls.__dict__.get("BINDINGS", ()) if isinstance(b, Binding) and b.description]


# --------------------------------------------------------------------------- 7, 8: the help


async def test_help_lists_every_binding_of_the_pane_on_screen():
    async with running() as (app, pilot):
        for number, pane_id in PANE_KEYS.items():
            await pilot.press(number)
            await pilot.pause()
            pane = app.query_one(f"#{pane_id}-pane")
            text = await open_help(app, pilot)
            listed = keys_of(text)
            for binding in bindings(type(pane)):
                assert app.get_key_display(binding) in listed, (pane_id, binding.key, text)
            await pilot.press("escape")
            await pilot.pause()


async def test_help_on_the_gpus_pane_names_its_keys_sigterm_and_the_detail_views_w():
    async with running() as (app, pilot):
        await pilot.press("2")
        await pilot.pause()
        text = await open_help(app, pilot)
        assert {">", "<", "f6", "p", "T", "K", "w"} <= keys_of(text)
        assert "GPU detail view" in text
        t_line = next(line for line in text.splitlines() if line.startswith("T  "))
        assert "SIGTERM" in t_line
        assert any(b.key == "w" for b in GpuDetailScreen.BINDINGS if isinstance(b, Binding))


async def test_the_gpus_panes_terminate_key_says_sigterm_in_the_footer():
    async with running() as (app, pilot):
        await pilot.press("2")
        await pilot.pause()
        labels = {key: b.binding.description for key, b in app.screen.active_bindings.items() if b.binding.show}
        assert "SIGTERM" in labels["T"]
        t = next(b for b in GpusPane.BINDINGS if isinstance(b, Binding) and b.key == "T")
        k = next(b for b in GpusPane.BINDINGS if isinstance(b, Binding) and b.key == "K")
        assert "SIGTERM" in t.description and "SIGKILL" in k.description


async def test_help_on_the_audit_pane_names_f_e_E_u_v():
    async with running() as (app, pilot):
        await pilot.press("6")
        await pilot.pause()
        text = await open_help(app, pilot)
        assert {"f", "e", "E", "u", "v"} <= keys_of(text)
        assert {b.key for b in bindings(AuditPane)} <= keys_of(text)


async def test_help_in_the_budget_form_names_f2():
    async with running() as (app, pilot):
        await pilot.press("5", "a")
        await wait_until(lambda: isinstance(app.screen, BudgetForm))
        await pilot.press(*"still-here")
        await pilot.press("f1")  # ? would be typed into the field
        await wait_until(lambda: isinstance(app.screen, HelpScreen))
        text = help_text(app)
        assert "Budget form" in text
        assert {"f2", "^s", "esc"} <= keys_of(text)
        assert "Overview · GPUs" not in text, "over a form, the pane keys do not work: not listed"
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, BudgetForm)
        assert app.screen.query_one("#budget-name", Input).value == "still-here"


# --------------------------------------------------------------------------- 10: no / on the overview


async def test_the_overview_does_not_offer_a_filter():
    async with running() as (app, pilot):
        await pilot.press("1")
        await pilot.pause()
        shown_keys = {key for key, b in app.screen.active_bindings.items() if b.binding.show}
        assert "slash" not in shown_keys and "question_mark" in shown_keys
        text = await open_help(app, pilot)
        assert "/" not in keys_of(text)
        await pilot.press("escape")
        await pilot.press("slash")
        await pilot.pause()
        assert not any("no table to filter" in str(n.message) and "This pane" in str(n.message)
                       for n in app._notifications)
        await pilot.press("2")
        await pilot.pause()
        assert "slash" in {key for key, b in app.screen.active_bindings.items() if b.binding.show}


# --------------------------------------------------------------------------- 6: d, not D


async def test_the_overview_names_the_demo_key_that_works():
    async with running(demo_console(demo=False), live=False) as (app, pilot):
        await wait_until(lambda: all(s.state is SourceState.UNCONFIGURED for s in app.snapshot.sources))
        await pilot.pause()
        cards = [shown(app.query_one(f"#card-{key}", Static)) for key in ("alerts", "gpus", "jobs", "instances")]
        assert "Press d to try the console" in cards[0]
        assert all("press d for the demo" in card for card in cards[1:])
        assert not any("Press D" in card or "press D" in card for card in cards)
        await pilot.press("d")
        await wait_until(lambda: app.snapshot.demo)


# --------------------------------------------------------------------------- 4, 5: the budget form


async def save_with(app, pilot, **fields: str) -> None:
    for name, value in fields.items():
        app.screen.query_one(f"#budget-{name}", Input).value = value
    await pilot.press("ctrl+s")
    await pilot.pause()


def form_error(app) -> str:
    return str(app.screen.query_one("#budget-error", Static).content)


async def test_an_absurd_amount_stays_in_the_form_with_the_amounts_own_message():
    async with running() as (app, pilot):
        await pilot.press("5", "a")
        await wait_until(lambda: isinstance(app.screen, BudgetForm))
        await pilot.press(*"team-cv")
        for amount in ("1e309", "nan", "inf", "1e20", "100000000.5", "-3"):
            await save_with(app, pilot, amount=amount)
            assert isinstance(app.screen, BudgetForm), f"{amount}: the form stays open"
            assert form_error(app) == f"amount: must be more than $0 and at most $100,000,000, got {amount}"
            assert app.screen.query_one("#budget-amount", Input).value == amount
            assert app.screen.query_one("#budget-name", Input).value == "team-cv"
            assert app.focused is app.screen.query_one("#budget-amount", Input)
        assert app.core.services.budget_ops.get("team-cv") is None
        await save_with(app, pilot, amount="$100,000,000")
        await wait_until(lambda: app.core.services.budget_ops.get("team-cv") is not None)
        assert app.core.services.budget_ops.get("team-cv").amount == 100_000_000


async def test_a_bad_namespace_scope_stays_in_the_form():
    async with running() as (app, pilot):
        await pilot.press("5", "a")
        await wait_until(lambda: isinstance(app.screen, BudgetForm))
        await pilot.press(*"team-ns")
        await save_with(app, pilot, amount="500", scope="namespace:Bad NS")
        assert isinstance(app.screen, BudgetForm)
        assert form_error(app).startswith("scope: bad budget scope 'namespace:Bad NS': a namespace is a lowercase RFC 1123")
        assert app.screen.query_one("#budget-scope", Input).value == "namespace:Bad NS"
        assert app.focused is app.screen.query_one("#budget-scope", Input)
        await save_with(app, pilot, scope="namespace:team-nlp")
        await wait_until(lambda: app.core.services.budget_ops.get("team-ns") is not None)
        assert app.core.services.budget_ops.get("team-ns").scope == "namespace:team-nlp"


async def test_a_bad_name_stays_in_the_form_too():
    async with running() as (app, pilot):
        await pilot.press("5", "a")
        await wait_until(lambda: isinstance(app.screen, BudgetForm))
        await pilot.press(*"bad name")
        await save_with(app, pilot, amount="5")
        assert isinstance(app.screen, BudgetForm)
        assert form_error(app).startswith("name: bad budget name 'bad name'")
        assert app.focused is app.screen.query_one("#budget-name", Input)


# --------------------------------------------------------------------------- 9: the audit filter


async def test_a_bad_audit_period_keeps_the_focus_and_the_words(tmp_path):
    async with console_app(tmp_path, Role.AUDITOR) as (app, pilot, _secret):
        await pilot.press("6")
        await pilot.pause()
        await pilot.press("f")
        await pilot.pause()
        actor = app.query_one("#audit-actor", Input)
        assert actor.has_focus
        await pilot.press(*"ada", "tab", "tab", "tab", *"yesterday", "enter")
        await pilot.pause()
        period = app.query_one("#audit-period", Input)
        assert period.has_focus, "after an error the filter keeps the focus"
        assert period.value == "yesterday" and actor.value == "ada"
        assert any("period: bad date 'yesterday'" in str(n.message) for n in app._notifications)
        await pilot.press("2")  # typed into the field, not a switch to the GPUs pane
        await pilot.pause()
        assert app.active_pane == "audit" and period.value == "yesterday2"
        period.value = "7d"
        await pilot.press("enter")
        await pilot.pause()
        assert not period.has_focus and app.query_one("#audit-table").has_focus


async def test_help_opens_over_the_gpu_detail_view_and_names_w():
    from gpuconsole.ui.screens.help import HelpScreen

    async with running() as (app, pilot):
        await pilot.press("2")
        await pilot.pause()
        await pilot.press("enter")
        await wait_until(lambda: isinstance(app.screen, GpuDetailScreen))
        await pilot.press("question_mark")
        await wait_until(lambda: isinstance(app.screen, HelpScreen))
        await pilot.press("escape")
        await wait_until(lambda: isinstance(app.screen, GpuDetailScreen))


async def test_esc_keeps_a_half_filled_budget_form_as_a_draft_and_saving_forgets_it():
    from textual.widgets import Input

    from gpuconsole.ui.screens.budget_form import BudgetForm
    from tests.driving import burst, settle

    async with running() as (app, pilot):
        await pilot.press("5")
        await wait_until(lambda: app.active_pane == "budgets" and app.current_pane is not None)
        await pilot.press("a")
        await wait_until(lambda: isinstance(app.screen, BudgetForm) and app.screen.is_mounted)
        burst(app, "half-typed", "tab", "123")
        await settle(pilot, lambda: app.screen.query_one("#budget-amount", Input).value == "123")
        await pilot.press("escape")
        await wait_until(lambda: not isinstance(app.screen, BudgetForm))
        await pilot.press("a")
        await wait_until(lambda: isinstance(app.screen, BudgetForm) and app.screen.is_mounted)
        form = app.screen
        assert form.query_one("#budget-name", Input).value == "half-typed"
        assert form.query_one("#budget-amount", Input).value == "123"
        assert "draft is back" in str(form.query_one("#budget-error").render())
        # back in a field, the first key adds to its text instead of replacing it
        form.query_one("#budget-amount", Input).focus()
        await pilot.press("4")
        assert form.query_one("#budget-amount", Input).value == "1234"
        await pilot.press("ctrl+s")
        await wait_until(lambda: not isinstance(app.screen, BudgetForm))
        await wait_until(lambda: any(b.budget.name == "half-typed" for b in app.snapshot.budgets))
        await pilot.press("a")
        await wait_until(lambda: isinstance(app.screen, BudgetForm) and app.screen.is_mounted)
        assert app.screen.query_one("#budget-name", Input).value == "", "a saved budget leaves no draft"


async def test_esc_keeps_a_half_filled_job_wizard_as_a_draft_and_keys_typed_with_n_win():
    from textual.widgets import Input

    from gpuconsole.ui.wizards.submit import SubmitWizard
    from tests.driving import burst, settle

    async with running() as (app, pilot):
        await pilot.press("3")
        await wait_until(lambda: app.active_pane == "jobs" and app.current_pane is not None)
        burst(app, "N", "half-typed", "tab", "tab", "tab", "python x.py")
        await settle(pilot, lambda: isinstance(app.screen, SubmitWizard) and app.screen.built
                     and app.screen.query_one("#job-command", Input).value == "python x.py")
        await pilot.press("escape")
        await wait_until(lambda: not isinstance(app.screen, SubmitWizard))
        # typed with N: the name typed now wins over the draft's; the rest of the draft comes back
        burst(app, "N", "second")
        await settle(pilot, lambda: isinstance(app.screen, SubmitWizard) and app.screen.built)
        wizard = app.screen
        await settle(pilot, lambda: wizard.query_one("#job-name", Input).value == "second")
        assert wizard.query_one("#job-command", Input).value == "python x.py"
        assert "draft is back" in str(wizard.query_one(f"#{wizard.PREFIX}-status").render())
        # back in a field, the first key adds to its text instead of replacing it
        wizard.query_one("#job-command", Input).focus()
        await pilot.press("2")
        assert wizard.query_one("#job-command", Input).value == "python x.py2"


async def test_esc_keeps_the_experiment_form_text():
    from textual.widgets import TextArea

    from gpuconsole.ui.screens.experiment_form import ExperimentFormScreen

    async with running() as (app, pilot):
        app.push_screen(ExperimentFormScreen())
        await wait_until(lambda: isinstance(app.screen, ExperimentFormScreen) and app.screen.is_mounted)
        app.screen.query_one(TextArea).text = 'name = "draft-one"\n'
        await pilot.press("escape")
        await wait_until(lambda: not isinstance(app.screen, ExperimentFormScreen))
        app.push_screen(ExperimentFormScreen())
        await wait_until(lambda: isinstance(app.screen, ExperimentFormScreen) and app.screen.is_mounted)
        assert app.screen.query_one(TextArea).text == 'name = "draft-one"\n'
