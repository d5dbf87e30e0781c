"""The wizard's second step: where and how to pay for the chosen type.

On-demand and spot side by side for each zone that offers the type, with seven days of spot
history; zone offerings and spot prices are fetched in a thread worker.
"""

from __future__ import annotations

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Input, Label, RadioSet, Static

from gpuconsole.core.ops.provision import PriceRow, price_rows
from gpuconsole.model import Market, SpotPrice
from gpuconsole.ui.format import money
from gpuconsole.ui.widgets.cells import right, text
from gpuconsole.ui.widgets.live_table import LiveTable
from gpuconsole.ui.wizards.fields import BadNumber, Field, Step, failure, parse_number
from gpuconsole.ui.wizards.workload import dollars
from gpuconsole.ui.widgets.marks import Choice

PRICE_COLUMNS = [
    ("ZONE", "zone", 11),
    ("OD $/H", "on_demand", 7),
    ("$/GPU-H", "od_gpu", 7),
    ("SPOT $/H", "spot", 8),
    ("$/GPU-H", "spot_gpu", 7),
    ("SAVING", "saving", 6),
    ("7-DAY SPOT", "range", 12),
]


ANY_ZONE = "*"  # the row key of "no zone": nothing could say which zones sell the type


def row_key(row: PriceRow) -> str:
    return row.availability_zone or ANY_ZONE


class PriceStep(Step):
    """Step 2: on-demand and spot per zone for the chosen type; a zone, a market, a spot cap."""

    title = "Price"
    hint = "↑ ↓ a zone · tab: market and spot cap · enter or ctrl+n: next · esc: back"

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:  # noqa: A002
        super().__init__(id=id, classes=classes)
        self.rows: dict[str, PriceRow] = {}
        self._loaded_for: tuple[str, str] | None = None

    def compose(self) -> ComposeResult:
        yield Static("", id="price-context", classes="context", markup=False)
        yield LiveTable(PRICE_COLUMNS, id="price-table")
        yield Static("", id="price-note", classes="detail", markup=False)
        with Horizontal(id="market-row", classes="row"):
            yield Label("Market", classes="row-label")
            with RadioSet(id="market", compact=True):
                yield Choice("on-demand", value=True)
                yield Choice("spot")
            yield Field("max spot $/h", Input(placeholder="none", compact=True, disabled=True, id="max-spot"),
                        "max_spot_price")

    def enter(self) -> None:
        choice = self.wizard.choice
        itype = choice.instance_type
        if itype is None:
            return
        od = f"on-demand {money(choice.on_demand)}/h" if choice.on_demand is not None else "no on-demand price"
        self.query_one("#price-context", Static).update(
            f"{itype.name} · {itype.gpu_count}× {itype.gpu_model} {itype.gpu_memory_gib} GiB · {choice.region} · {od}")
        key = (choice.region, itype.name)
        table = self.query_one("#price-table", LiveTable)
        if key != self._loaded_for:
            self._loaded_for = key
            self.rows = {}
            table.sync([])
            table.loading = True
            self.query_one("#price-note", Static).update(f"Fetching the zones and 7 days of spot prices for {itype.name}…")
            self.load_prices(choice.region, itype.name)
        table.focus()

    @work(thread=True, exclusive=True, exit_on_error=False, group="wizard-prices", description="spot prices")
    def load_prices(self, region: str, type_name: str) -> None:
        cloud, catalog = self.wizard.cloud, self.wizard.catalog
        errors: list[str] = []
        offerings: dict[str, tuple[str, ...]] = {}
        spot: tuple[SpotPrice, ...] = ()
        try:
            offerings = cloud.offerings(region, (type_name,))
        except Exception as exc:  # noqa: BLE001
            errors.append(f"zones: {failure(exc)}")
        try:
            spot = cloud.spot_prices(region, (type_name,))
        except Exception as exc:  # noqa: BLE001
            errors.append(f"spot prices: {failure(exc)}")
        rows: list[PriceRow] = []
        if catalog is not None:
            try:
                rows = price_rows(catalog, region, [type_name], spot, offerings)
            except Exception as exc:  # noqa: BLE001
                errors.append(failure(exc))
        self.app.call_from_thread(self._show_prices, (region, type_name), rows, errors)

    def _show_prices(self, key: tuple[str, str], rows: list[PriceRow], errors: list[str]) -> None:
        if not self.is_attached or key != self._loaded_for:
            return
        table = self.query_one("#price-table", LiveTable)
        table.loading = False
        self.rows = {row_key(row): row for row in rows}
        table.sync([(zone, self._cells(row)) for zone, row in self.rows.items()])
        chosen = self.wizard.choice.availability_zone or ANY_ZONE
        if chosen in self.rows:
            table.move_cursor(row=list(self.rows).index(chosen), animate=False)
        focused = self.app.focused
        if self.wizard.current_step is self and (focused is None or self not in focused.ancestors):
            table.focus()  # a table cannot take the focus while it shows its loading indicator
        note = self.query_one("#price-note", Static)
        if errors:
            self._loaded_for = None  # try again when the step is shown next
            anywhere = not rows or list(self.rows) == [ANY_ZONE]
            note.update("Could not fetch " + "; ".join(errors) + (" · EC2 will choose the zone" if anywhere else ""))
            note.add_class("-error")
        else:
            note.remove_class("-error")
            self._show_detail()
            if not rows:
                note.update(f"No zone of {key[0]} offers {key[1]}.")

    def _cells(self, row: PriceRow) -> tuple[object, ...]:
        palette = self.wizard.palette
        saving = row.saving_percent
        spread = "-" if row.spot_min is None or row.spot_max is None else f"{row.spot_min:.2f}–{row.spot_max:.2f}"
        return (
            text(row.availability_zone or "any zone"),
            right(dollars(row.on_demand)),
            right(dollars(row.on_demand_per_gpu)),
            right(dollars(row.spot), palette.accent if row.spot is not None else None),
            right(dollars(row.spot_per_gpu)),
            right("-" if saving is None else f"{saving:.0f}%", palette.ok if saving else None),
            right(spread),
        )

    def selected(self) -> PriceRow | None:
        key = self.query_one("#price-table", LiveTable).selected_key
        return self.rows.get(key) if key is not None else None

    def on_virtual_table_row_highlighted(self, _event: LiveTable.RowHighlighted) -> None:
        self._show_detail()

    def on_virtual_table_row_selected(self, event: LiveTable.RowSelected) -> None:
        event.stop()
        self.wizard.advance()

    @on(RadioSet.Changed, "#market")
    def _market_changed(self, event: RadioSet.Changed) -> None:
        spot = event.index == 1
        self.wizard.choice.market = Market.SPOT if spot else Market.ON_DEMAND
        self.query_one("#max-spot", Input).disabled = not spot
        if not spot:
            self.query_one("#field-max_spot_price", Field).set_message(None)
        self._show_detail()

    @on(Input.Changed, "#max-spot")
    def _cap_changed(self) -> None:
        self.read_cap()

    def read_cap(self) -> tuple[float | None, str | None]:
        """The max spot price (None: no cap) and the problem with it, if any."""
        field = self.query_one("#field-max_spot_price", Field)
        if self.wizard.choice.market is not Market.SPOT:
            field.set_message(None)
            return None, None
        try:
            cap = parse_number(self.query_one("#max-spot", Input).value, float, "a price")
        except BadNumber as exc:
            field.set_message(str(exc))
            return None, str(exc)
        problem = "must be more than $0" if cap is not None and cap <= 0 else None
        field.set_message(problem or self._cap_warning(cap))
        return cap, problem

    def _cap_warning(self, cap: float | None) -> str | None:
        """A warning (not a refusal: the market may fall) when the cap is under today's spot price."""
        row = self.selected()
        market = row.spot if row is not None else None
        if cap is None or market is None or cap >= market:
            return None
        return f"under today's spot price {money(market)}/h: EC2 refuses the launch unless it falls"

    def _show_detail(self) -> None:
        row = self.selected()
        if row is None:
            return
        self.read_cap()  # the cap's warning follows the zone's spot price
        note = self.query_one("#price-note", Static)
        if note.has_class("-error"):
            return
        line = Text(f"{row.availability_zone or 'any zone (EC2 picks)'}: ")
        if row.spot is None:
            line.append("no spot price known")
        else:
            line.append(f"spot {money(row.spot)}/h now")
            if row.spot_min is not None and row.spot_max is not None:
                line.append(f" (7 days {money(row.spot_min)}–{money(row.spot_max)})")
            if row.saving_percent is not None:
                line.append(f", {row.saving_percent:.0f}% under on-demand")
        note.update(line)

    def commit(self) -> str | None:
        cap, problem = self.read_cap()
        if problem:
            self.focus_field("max_spot_price")
            return f"max spot $/h: {problem}"
        choice = self.wizard.choice
        row = self.selected()
        if row is None and self.rows:
            return "choose a zone in the table (↑ ↓)"
        choice.availability_zone = row.availability_zone if row is not None else ""
        choice.spot_price = row.spot if row is not None else None
        choice.max_spot_price = cap if choice.market is Market.SPOT else None
        if row is not None and row.on_demand is not None:
            choice.on_demand = row.on_demand
        return None
