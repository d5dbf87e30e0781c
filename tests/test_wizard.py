"""The launch wizard, driven with the keyboard at 80×24 on the seeded simulated cloud."""

from __future__ import annotations

import pytest
from textual.containers import ScrollableContainer
from textual.widgets import Button, DataTable, Input, Select, SelectionList, Static

from gpuconsole.model import KeyPair, Market, Workload
from gpuconsole.ui.widgets.live_table import LiveTable
from gpuconsole.ui.wizards import ProvisionWizard
from tests.helpers import demo_console, wait_until
from tests.driving import running, show_pane, shown

TRAINING_GPUS = ("A100", "H100", "H200", "B200")


async def open_wizard(app, pilot) -> ProvisionWizard:
    await pilot.press("4")
    await pilot.pause()
    await pilot.press("n")
    await wait_until(lambda: isinstance(app.screen, ProvisionWizard))
    wizard = app.screen
    await wait_until(lambda: bool(wizard.workload_step.types))
    await pilot.pause()
    return wizard


def text_of(wizard: ProvisionWizard, selector: str) -> str:
    return shown(wizard.query_one(selector, Static))


def column(table: LiveTable, key: str) -> list[str]:
    return [str(table.get_cell(row, key)) for row in table.shown_keys]


async def move_to(pilot, table: LiveTable, key: str) -> None:
    """Press ↓ / ↑ until ``key`` is the selected row."""
    assert key in table.shown_keys, f"{key} is not listed: {table.shown_keys}"
    for _ in range(len(table.shown_keys) * 2):
        if table.selected_key == key:
            return
        index = table.shown_keys.index(key)
        await pilot.press("down" if index > table.cursor_row else "up")
    assert table.selected_key == key


async def choose_type(pilot, wizard: ProvisionWizard, name: str) -> None:
    await move_to(pilot, wizard.query_one("#type-table", LiveTable), name)
    await pilot.press("enter")
    await wait_until(lambda: wizard.step == 1 and bool(wizard.price_step.rows))
    await pilot.pause()


async def choose_zone(pilot, wizard: ProvisionWizard, zone: str, market: Market) -> None:
    prices = wizard.query_one("#price-table", LiveTable)
    assert prices.has_focus
    await move_to(pilot, prices, zone)
    if market is Market.SPOT:
        await pilot.press("tab")  # the market buttons
        assert wizard.app.focused.id == "market"
        await pilot.press("right", "enter")
        await pilot.pause()
    assert wizard.choice.market is market
    await pilot.press("ctrl+n")
    await wait_until(lambda: wizard.step == 2)
    await pilot.pause()


async def fill(pilot, field: Input, words: str) -> None:
    field.focus()
    await pilot.pause()
    await pilot.press("end", "ctrl+u", *words)  # ctrl+u clears the field
    await pilot.pause()


async def to_review(pilot, wizard: ProvisionWizard) -> None:
    await pilot.press("ctrl+n")
    await wait_until(lambda: wizard.step == 3)
    await wait_until(lambda: wizard.review_step.dry_run_message.startswith("Dry run ") and
                     "asking" not in wizard.review_step.dry_run_message)
    await pilot.pause()


async def launch(pilot, wizard: ProvisionWizard) -> None:
    await pilot.press("ctrl+n")
    await wait_until(lambda: wizard.step == 4)
    await wait_until(lambda: not wizard.launch_step.running)
    await pilot.pause()


async def test_spot_launch_of_a_training_type_from_the_instances_pane():
    async with running() as (app, pilot):
        wizard = await open_wizard(app, pilot)
        steps = " ".join(text_of(wizard, "#wizard-steps").split())
        assert "1 Workload › 2 Price › 3 Details › 4 Review › 5 Launch" in steps
        assert "catalog" in text_of(wizard, "#catalog-note")
        types = wizard.query_one("#type-table", LiveTable)
        assert wizard.choice.workload is Workload.TRAINING
        assert all(any(m in gpus for m in TRAINING_GPUS) for gpus in column(types, "gpus"))

        # Inference and back, with the keyboard: tab from the table wraps to the workload buttons.
        await pilot.press("tab")
        assert app.focused.id == "workload"
        await pilot.press("right", "enter")
        await pilot.pause()
        assert wizard.choice.workload is Workload.INFERENCE
        assert not any("H100" in g for g in column(types, "gpus"))
        await pilot.press("left", "enter")
        await pilot.pause()
        assert wizard.choice.workload is Workload.TRAINING
        assert app.active_pane == "instances", "tab moves between fields, not panes, in the wizard"

        # A bad number explains itself under its field and leaves the list as it was.
        before = types.shown_keys
        memory = wizard.query_one("#field-filter-min_gpu_memory_gib Input", Input)
        await fill(pilot, memory, "x")
        assert "not a whole number" in text_of(wizard, "#field-filter-min_gpu_memory_gib .field-message")
        assert types.shown_keys == before
        await fill(pilot, memory, "80")
        model = wizard.query_one("#field-filter-gpu_model Input", Input)
        await fill(pilot, model, "a100")
        assert types.shown_keys and all("A100" in g for g in column(types, "gpus"))
        assert not wizard.query_one("#field-filter-min_gpu_memory_gib .field-message").display
        await fill(pilot, model, "")
        types.focus()

        # Step 2: on-demand and spot side by side per zone; spot in us-east-1c.
        await choose_type(pilot, wizard, "p4de.24xlarge")
        prices = wizard.query_one("#price-table", LiveTable)
        assert prices.shown_keys == ["us-east-1a", "us-east-1c"]
        assert all(s.endswith("%") for s in column(prices, "saving"))
        assert all("–" in r for r in column(prices, "range"))
        await choose_zone(pilot, wizard, "us-east-1c", Market.SPOT)

        # Step 3: every field checked as it is typed; Next refused with the first message.
        count = wizard.query_one("#count", Input)
        assert count.has_focus
        await fill(pilot, count, "0")
        assert "between 1 and" in text_of(wizard, "#field-count .field-message")
        await pilot.press("ctrl+n")
        await pilot.pause()
        assert wizard.step == 2
        assert "Count" in text_of(wizard, "#wizard-status")
        await fill(pilot, count, "2")
        root = wizard.query_one("#root", Input)
        await fill(pilot, root, "abc")
        assert "not a whole number" in text_of(wizard, "#field-root_volume_gib .field-message")
        await pilot.press("ctrl+n")
        await pilot.pause()
        assert wizard.step == 2
        await fill(pilot, root, "500")
        assert not wizard.query_one("#field-root_volume_gib .field-message").display
        await wait_until(lambda: wizard.query_one("#image", Input).value.startswith("ami-"))
        assert wizard.query_one("#tag-Owner", Input).value, "Owner defaults to the OS user"
        await fill(pilot, wizard.query_one("#tag-Project", Input), "llm")
        await fill(pilot, wizard.query_one("#tag-Budget", Input), "rnd")
        await fill(pilot, wizard.query_one("#tag-Name", Input), "a1")

        # Step 4: cost, the request as JSON and Terraform, the dry run, then Launch.
        await to_review(pilot, wizard)
        code = text_of(wizard, "#review-code")
        assert '"HttpTokens": "required"' in code
        assert '"Encrypted": true' in code
        assert '"MarketType": "spot"' in code and '"SpotInstanceType": "one-time"' in code
        assert '"AvailabilityZone": "us-east-1c"' in code and '"VolumeSize": 500' in code
        assert '"Value": "llm"' in code
        assert "/h" in text_of(wizard, "#review-cost") and "/30 days" in text_of(wizard, "#review-cost")
        assert text_of(wizard, "#dry-run").startswith("Dry run passed")
        assert not wizard.query_one("#launch", Button).disabled
        await pilot.press("v")
        await pilot.pause()
        terraform = text_of(wizard, "#review-code")
        assert 'resource "aws_instance"' in terraform and 'market_type = "spot"' in terraform
        assert 'http_tokens                 = "required"' in terraform

        # Step 5: the attempts as they happen, then the instance ids.
        await launch(pilot, wizard)
        result = wizard.launch_step.result
        assert result is not None and result.ok and len(result.instances) == 2
        attempts = text_of(wizard, "#attempts")
        assert attempts.startswith("✓ us-east-1c  p4de.24xlarge  spot")
        assert "Launched" in text_of(wizard, "#launch-result")
        assert result.instances[0].instance_id in text_of(wizard, "#launch-result")
        await pilot.press("enter")
        await pilot.pause()
        assert not isinstance(app.screen, ProvisionWizard)
        ids = {i.instance_id for i in result.instances}
        await wait_until(lambda: ids <= {i.instance_id for i in app.snapshot.instances})
        launched = [i for i in app.snapshot.instances if i.instance_id in ids]
        assert all(i.market is Market.SPOT and i.tag("Project") == "llm" for i in launched)


async def test_no_capacity_in_the_chosen_zone_falls_back_to_another():
    async with running() as (app, pilot):
        wizard = await open_wizard(app, pilot)
        await choose_type(pilot, wizard, "p5.48xlarge")
        await choose_zone(pilot, wizard, "us-east-1a", Market.ON_DEMAND)
        await to_review(pilot, wizard)
        assert wizard.review_step.can_launch
        await launch(pilot, wizard)
        lines = text_of(wizard, "#attempts").splitlines()
        assert lines[0].startswith("✗ us-east-1a  p5.48xlarge")
        assert "InsufficientInstanceCapacity" in lines[1]
        assert lines[2].startswith("✓ us-east-1b  p5.48xlarge")
        assert "us-east-1b" in text_of(wizard, "#launch-result")
        assert [a.ok for a in wizard.launch_step.attempts] == [False, True]


async def test_dry_run_failure_keeps_launch_disabled_until_the_request_changes(monkeypatch):
    console = demo_console()
    backend = console.services.cloud.backend
    listed = backend.key_pairs
    # A key pair deleted after it was listed: the dry run is the first to notice.
    monkeypatch.setattr(backend, "key_pairs", lambda region: (*listed(region), KeyPair("retired-laptop", "rsa")))
    async with running(console) as (app, pilot):
        wizard = await open_wizard(app, pilot)
        await choose_type(pilot, wizard, "p4de.24xlarge")
        await choose_zone(pilot, wizard, "us-east-1a", Market.ON_DEMAND)
        key = wizard.query_one("#key", Select)
        await wait_until(lambda: len(key._options) > 2)
        key.focus()
        await pilot.press("enter")  # opens the list
        await pilot.pause()
        for _ in range(len(key._options)):
            if key.query_one("SelectOverlay").highlighted == len(key._options) - 1:
                break
            await pilot.press("down")
        await pilot.press("enter")
        await pilot.pause()
        assert key.value == "retired-laptop"
        await wait_until(lambda: wizard.query_one("#image", Input).value.startswith("ami-"))
        await to_review(pilot, wizard)
        status = text_of(wizard, "#dry-run")
        assert status.startswith("Dry run failed: InvalidKeyPair.NotFound")
        assert wizard.query_one("#launch", Button).disabled
        await pilot.press("ctrl+n")
        await pilot.pause()
        assert wizard.step == 3, "no launch without a passing dry run"

        # Back to the details, no key pair: a new dry run, and this one passes.
        await pilot.press("escape")
        await wait_until(lambda: wizard.step == 2)
        key.focus()
        await pilot.press("enter", "home", "enter")
        await pilot.pause()
        assert key.value == ""
        await to_review(pilot, wizard)
        assert text_of(wizard, "#dry-run").startswith("Dry run passed")
        assert not wizard.query_one("#launch", Button).disabled


async def test_escape_goes_back_one_step_then_cancels():
    async with running() as (app, pilot):
        wizard = await open_wizard(app, pilot)
        await choose_type(pilot, wizard, "p4de.24xlarge")
        await pilot.press("escape")
        await pilot.pause()
        assert wizard.step == 0
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, ProvisionWizard)
        assert app.active_pane == "instances"


async def test_palette_opens_the_wizard():
    async with running() as (app, pilot):
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"Launch a GPU")
        await pilot.pause(0.3)
        await pilot.press("enter")
        await wait_until(lambda: isinstance(app.screen, ProvisionWizard))


async def test_without_a_cloud_n_says_why_instead_of_opening():
    async with running(demo_console(demo=False), live=False) as (app, pilot):
        await wait_until(lambda: app.access_principal is not None)
        await show_pane(app, pilot, "4", "instances")
        await pilot.press("n")

        def said() -> bool:
            return any("--demo" in n.message and "AWS credentials" in n.message for n in app._notifications)

        await wait_until(said)
        assert not isinstance(app.screen, ProvisionWizard)


def outside(app) -> list[str]:
    """Widgets on the wizard that are shown but not wholly on the 80×24 screen."""
    screen = app.screen
    area = screen.region
    bad = []
    for widget in screen.query("*"):
        if not widget.display or not widget.visible or widget.region.area == 0:
            continue
        if any(isinstance(a, (ScrollableContainer, DataTable, SelectionList)) for a in widget.ancestors):
            continue  # scrolled content may extend past its viewport
        if widget.has_class("-textual-compact") and type(widget).__name__ == "SelectOverlay":
            continue
        if not area.contains_region(widget.region):
            bad.append(f"{widget!r} at {widget.region}")
    return bad


async def test_every_step_fits_80_by_24():
    async with running() as (app, pilot):
        wizard = await open_wizard(app, pilot)
        assert app.size == (80, 24)
        assert outside(app) == []
        await choose_type(pilot, wizard, "p5.48xlarge")
        assert outside(app) == []
        await choose_zone(pilot, wizard, "us-east-1b", Market.SPOT)
        await wait_until(lambda: bool(wizard.query_one("#groups", SelectionList).option_count))
        # With messages under several fields the form still fits.
        await fill(pilot, wizard.query_one("#count", Input), "0")
        await fill(pilot, wizard.query_one("#root", Input), "abc")
        await fill(pilot, wizard.query_one("#kms", Input), "not-a-key")
        await pilot.press("ctrl+n")
        await pilot.pause()
        assert outside(app) == []
        for name in ("count", "root", "kms", "groups", "tag-Budget", "imdsv2"):
            widget = wizard.query_one(f"#{name}")
            assert wizard.region.contains_region(widget.region), name
        await fill(pilot, wizard.query_one("#count", Input), "1")
        await fill(pilot, wizard.query_one("#root", Input), "200")
        await fill(pilot, wizard.query_one("#kms", Input), "")
        await to_review(pilot, wizard)
        assert outside(app) == []
        assert wizard.region.contains_region(wizard.query_one("#launch").region)
        await launch(pilot, wizard)
        assert outside(app) == []


async def test_price_step_stays_usable_when_the_cloud_cannot_say_where(monkeypatch):
    from gpuconsole.backends.base import BackendError

    console = demo_console()
    backend = console.services.cloud.backend

    def refuse(*_args, **_kwargs):
        raise BackendError("RequestLimitExceeded: Request limit exceeded.")

    monkeypatch.setattr(backend, "offerings", refuse)
    monkeypatch.setattr(backend, "spot_prices", refuse)
    async with running(console) as (app, pilot):
        wizard = await open_wizard(app, pilot)
        await choose_type(pilot, wizard, "p4de.24xlarge")
        note = text_of(wizard, "#price-note")
        assert note.startswith("Could not fetch zones: RequestLimitExceeded") and "spot prices" in note
        assert len(note.splitlines()) == 1
        prices = wizard.query_one("#price-table", LiveTable)
        assert column(prices, "zone") == ["any zone"] and column(prices, "on_demand") != ["-"]
        await choose_zone(pilot, wizard, "*", Market.ON_DEMAND)
        assert wizard.choice.availability_zone == ""


async def test_a_max_spot_price_under_the_market_is_warned_and_a_failed_launch_goes_back_to_review():
    async with running() as (app, pilot):
        wizard = await open_wizard(app, pilot)
        await choose_type(pilot, wizard, "p4de.24xlarge")
        prices = wizard.query_one("#price-table", LiveTable)
        await move_to(pilot, prices, "us-east-1c")
        await pilot.press("tab", "right", "enter")  # the market buttons: spot
        await pilot.pause()
        assert wizard.choice.market is Market.SPOT
        market = wizard.price_step.selected().spot
        assert market is not None and market > 0.01
        await fill(pilot, wizard.query_one("#max-spot", Input), "0.01")
        warning = text_of(wizard, "#field-max_spot_price .field-message")
        assert "under today's spot price" in warning
        await pilot.press("ctrl+n")
        await wait_until(lambda: wizard.step == 2)
        await pilot.pause()
        await to_review(pilot, wizard)
        assert "is under today's spot price" in text_of(wizard, "#review-cost")
        assert wizard.review_step.can_launch  # a warning, not a refusal: the market may fall
        await launch(pilot, wizard)
        result = text_of(wizard, "#launch-result")
        assert result.startswith("✗ Launch failed") and ".." not in result
        await pilot.press("escape")
        await wait_until(lambda: wizard.step == 3)
        assert isinstance(app.screen, type(wizard)), "the wizard stays open"
        assert wizard.spec is not None and wizard.spec.max_spot_price == 0.01
        assert wizard.spec.availability_zone == "us-east-1c" and wizard.spec.instance_type == "p4de.24xlarge"


@pytest.mark.parametrize("typed", ["nan", "inf", "1e309", "-inf"])
def test_a_price_that_is_no_finite_number_is_refused_in_words(typed):
    from gpuconsole.ui.wizards.fields import BadNumber, parse_number

    with pytest.raises(BadNumber, match="not a price: .* is no finite number"):
        parse_number(typed, float, "a price")
    assert parse_number("$12.50", float, "a price") == 12.5 and parse_number(" ", float, "a price") is None
