"""The cost comparison calculator screen, driven from the keyboard at 80×24."""

from __future__ import annotations

from contextlib import asynccontextmanager

from rich.text import Text
from textual.widgets import DataTable, Input, Select, Static

from gpuconsole.ui.app import GpuConsoleApp
from gpuconsole.ui.screens.calculator import CostCalculatorScreen
from tests.driving import running
from tests.helpers import demo_console, wait_until

SIZE = (80, 24)


def shown(widget: Static) -> str:
    content = widget.content
    return content.plain if isinstance(content, Text) else str(content)


def rows(screen: CostCalculatorScreen) -> dict[str, list[str]]:
    table = screen.query_one("#calc-table", DataTable)
    return {key: [str(c) for c in table.get_row(key)] for key in ("own", "on-demand", "spot")}


def field(screen: CostCalculatorScreen, name: str) -> Input:
    return screen.query_one(f"#in-{name}", Input)


@asynccontextmanager
async def calculator():
    """The console on the seeded demo with the calculator opened by its key, ``$``."""
    async with running(live=False, key="dollar_sign",
                       ready=lambda app: isinstance(app.screen, CostCalculatorScreen) and app.screen.is_mounted) as (
            app, pilot):
        yield app, pilot, app.screen


async def replace_text(pilot, widget: Input, text: str) -> None:
    """Focus ``widget``, erase what it holds and type ``text``, as a user would."""
    widget.focus()
    await pilot.pause()
    await pilot.press("end", *["backspace"] * len(widget.value), *text)
    await pilot.pause()


async def test_opens_on_the_guide_preset_with_its_table_and_formula_on_screen():
    async with calculator() as (app, pilot, screen):
        assert rows(screen) == {
            "own": ["Own server", "$1,200", "72.0 h", "1.00"],
            "on-demand": ["On-demand", "$350.00", "48.0 h", "5.14"],
            "spot": ["Spot", "$120.00", "60.0 h", "12.00"],
        }
        formula = shown(screen.query_one("#calc-formula", Static))
        assert "index = (own cost × own time) / (cost × time)" in formula
        assert "work per dollar × speed" in formula
        notes = shown(screen.query_one("#calc-notes", Static))
        assert "Guide's table: $1,200/72 h, $350/48 h, $120/60 h: reproduced." in notes
        assert "4.0 interruptions, 56.0 h billed" in notes
        assert field(screen, "gpu_hours").has_focus
        # Everything that matters lies inside the 80×24 terminal, nothing cut off on the right.
        for selector in ("#calc-preset", "#calc-table", "#calc-formula", "#calc-notes", "#calc-status", "#calc-fields"):
            region = screen.query_one(selector).region
            assert region.right <= SIZE[0] and region.bottom <= SIZE[1] - 1, selector
            assert region.width > 0 and region.height > 0, selector
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, CostCalculatorScreen)


async def test_palette_opens_it():
    console = demo_console()
    app = GpuConsoleApp(console)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await pilot.press("ctrl+p")
            await pilot.pause()
            await pilot.press(*"Cost comparison calculator")
            await pilot.pause(0.3)
            await pilot.press("enter")
            await pilot.pause()
            assert isinstance(app.screen, CostCalculatorScreen)
    finally:
        console.close()


async def test_results_follow_typing_and_bad_values_are_named():
    async with calculator() as (app, pilot, screen):
        await replace_text(pilot, field(screen, "spot_discount_pct"), "60")
        # 56 h billed × 8 GPUs × $0.78125 × 40% = $140, + $50 extras.
        assert rows(screen)["spot"] == ["Spot", "$190.00", "60.0 h", f"{1200 * 72 / (190 * 60):.2f}"]
        assert "not reproduced" in shown(screen.query_one("#calc-notes", Static))

        # Typing goes into the field: digits and letters do not switch panes or quit.
        await replace_text(pilot, field(screen, "own_utilisation_pct"), "0")
        assert isinstance(app.screen, CostCalculatorScreen)
        status = screen.query_one("#calc-status", Static)
        assert shown(status) == "utilisation %: must be more than 0 and at most 100, got 0"
        assert status.has_class("-error")
        assert screen.query_one("#row-own_utilisation_pct").has_class("-invalid")
        assert all(cells[1:] == ["-", "-", "-"] for cells in rows(screen).values())

        await replace_text(pilot, field(screen, "own_utilisation_pct"), "2q")
        assert "expected a number, got '2q'" in shown(status)

        # The period accepts years; ctrl+r puts the preset back.
        await replace_text(pilot, field(screen, "own_utilisation_pct"), "25")
        await replace_text(pilot, field(screen, "own_amortize_months"), "5y")
        assert rows(screen)["own"][1:3] == ["$1,200", "72.0 h"]
        await pilot.press("ctrl+r")
        await pilot.pause()
        assert field(screen, "spot_discount_pct").value == "80"
        assert rows(screen)["spot"][1:] == ["$120.00", "60.0 h", "12.00"]
        assert not screen.query_one("#row-own_utilisation_pct").has_class("-invalid")


async def test_enter_and_tab_move_between_fields():
    async with calculator() as (app, pilot, screen):
        await pilot.press("enter")
        await pilot.pause()
        assert app.focused is screen.query_one("#calc-type", Select)
        await pilot.press("tab", "tab")
        await pilot.pause()
        assert app.focused is field(screen, "gpu_hour_price")
        await pilot.press("shift+tab", "shift+tab", "shift+tab", "shift+tab")
        await pilot.pause()
        assert app.focused is screen.query_one("#calc-preset", Select)
        # Round to the last field: the form scrolls so the focused field is on screen.
        await pilot.press("shift+tab")
        await pilot.pause()
        last = field(screen, "own_speed")
        assert app.focused is last
        assert 0 < last.region.y and last.region.bottom <= SIZE[1] - 1


async def test_catalog_type_and_region_fill_the_cloud_price():
    async with calculator() as (app, pilot, screen):
        await wait_until(lambda: screen.catalog is not None)
        await pilot.pause()
        screen.query_one("#calc-type", Select).focus()
        await pilot.press("enter")
        await pilot.pause()
        await pilot.press(*"p4d.24")
        await pilot.pause(0.3)
        await pilot.press("enter")
        await pilot.pause()
        assert screen.query_one("#calc-type", Select).value == "p4d.24xlarge"
        assert screen.query_one("#calc-region", Select).value == "us-east-1"
        # $32.77248/h for the instance ÷ 8 GPUs.
        assert field(screen, "gpu_hour_price").value == "4.09656"
        assert field(screen, "cloud_gpus").value == "8"
        # 576 GPU-h / (8 × 1.5) = 48 h × $32.77248/h = $1,573.08, + $50 extras.
        assert rows(screen)["on-demand"][1:3] == ["$1,623", "48.0 h"]
        assert "(p4d.24xlarge in us-east-1)" in shown(screen.query_one("#calc-notes", Static))

        await pilot.press("tab", "enter")
        await pilot.pause()
        await pilot.press(*"eu-west-1")
        await pilot.pause(0.3)
        await pilot.press("enter")
        await pilot.pause()
        assert screen.query_one("#calc-region", Select).value == "eu-west-1"
        assert field(screen, "gpu_hour_price").value == repr(35.9186 / 8)
        assert rows(screen)["on-demand"][1] == f"${35.9186 * 48 + 50:,.0f}"


async def test_preset_selector_loads_every_field():
    async with calculator() as (app, pilot, screen):
        screen.query_one("#calc-preset", Select).focus()
        await pilot.press("enter")
        await pilot.pause()
        await pilot.press("down", "enter")
        await pilot.pause()
        assert screen.query_one("#calc-preset", Select).value == "p4d-a100"
        assert field(screen, "gpu_hours").value == "800"
        assert field(screen, "gpu_hour_price").value == "4.09656"
        assert rows(screen)["on-demand"][1:3] == ["$3,377", "100.0 h"]
        assert "Guide's table" not in shown(screen.query_one("#calc-notes", Static))
