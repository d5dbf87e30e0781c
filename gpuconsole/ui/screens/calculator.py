"""The cost comparison calculator: own server vs cloud on-demand vs spot, recomputed as you type.

Fields on the left, the three options on the right, the index formula under them; the arithmetic
is :func:`gpuconsole.core.money.calculator.compare`, the same as ``gpuconsole cost compare``. A preset
fills every field; a catalog instance type and region fill the cloud price (on-demand price ÷
its GPUs) and GPU count. Laid out for 80×24.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Input, Label, Select, Static

from gpuconsole.core.money.calculator import (
    INDEX_FORMULA,
    INDEX_MEANING,
    PRESETS,
    CalculatorError,
    CostInputs,
    Option,
    compare,
    from_catalog,
    parse_period,
    problems,
    reproduces,
)
from gpuconsole.ui.format import money
from gpuconsole.ui.widgets.focus import focus_now
from gpuconsole.ui.worker_errors import ReportsWorkerErrors
from gpuconsole.ui.widgets.footer import KeyFooter

if TYPE_CHECKING:
    from textual.app import App

    from gpuconsole.core.money.catalog import Catalog

DEFAULT_PRESET = "resnet50"

# (section, CostInputs field, label); a section of None continues the one above.
FIELDS: tuple[tuple[str | None, str, str], ...] = (
    ("Work (reference GPU)", "gpu_hours", "GPU-hours"),
    ("Cloud", "gpu_hour_price", "$/GPU-hour"),
    (None, "cloud_gpus", "GPUs"),
    (None, "cloud_speed", "speed ×"),
    (None, "cloud_extras", "extras $/run"),
    ("Spot", "spot_discount_pct", "discount %"),
    (None, "spot_gpu_hour_price", "or $/GPU-hour"),
    (None, "interruptions_per_day", "interrupts/day"),
    (None, "lost_hours", "lost work h"),
    (None, "restart_minutes", "restart min"),
    ("Own server", "own_hardware_usd", "hardware $"),
    (None, "own_amortize_months", "amortise (m/y)"),
    (None, "own_utilisation_pct", "utilisation %"),
    (None, "own_power_kw", "power kW"),
    (None, "kwh_usd", "$/kWh"),
    (None, "own_gpus", "GPUs"),
    (None, "own_speed", "speed ×"),
)
LABEL_OF = {name: label for _, name, label in FIELDS}
WHOLE = ("cloud_gpus", "own_gpus")
OPTIONAL = ("spot_gpu_hour_price",)  # blank: from the discount
COLUMNS = (("Option", "option"), ("Cost", "cost"), ("Time", "time"), ("Index", "index"))

SHORT_NAMES = {"own": "Own server", "on-demand": "On-demand", "spot": "Spot"}


def shown(value: float | None) -> str:
    """A number as a field shows it: ``576``, ``0.78125``; blank for None."""
    if value is None:
        return ""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def unit_price(amount: float) -> str:
    """``$0.78125``: a unit price with the digits it was given (up to five decimals)."""
    whole, _, cents = f"{amount:,.5f}".partition(".")
    return f"${whole}.{cents.rstrip('0'):0<2}"


def parse_field(name: str, text: str) -> float | int | None:
    """One field's text as the calculator's number (``$``, ``,`` and ``%`` allowed).

    Raises:
        ValueError: not a number of the right kind; the message is one line.
    """
    words = text.strip().replace(",", "").replace("_", "").lstrip("$").rstrip("%").strip()
    if not words:
        if name in OPTIONAL:
            return None
        raise ValueError("needs a number")
    if name == "own_amortize_months":
        return parse_period(words)
    try:
        return int(words) if name in WHOLE else float(words)
    except ValueError:
        raise ValueError(f"expected {'a whole number' if name in WHOLE else 'a number'}, got {text.strip()!r}") from None


class CostCalculatorScreen(ReportsWorkerErrors, Screen[None]):
    """Own server vs cloud on-demand vs cloud spot for one training run.

    ==============  ==========================================================
    ``tab``         next field (``shift+tab`` previous); ``enter`` too
    ``enter``       on a selector: open it (preset, catalog type, region)
    ``ctrl+r``      reset every field to the chosen preset
    ``esc``         close
    ==============  ==========================================================
    """

    CSS_PATH = "calculator.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Close"),
        Binding("ctrl+r", "reset", "Reset to preset"),
    ]

    def __init__(self, preset: str = DEFAULT_PRESET, measured: CostInputs | None = None) -> None:
        super().__init__()
        self.preset_name = preset if preset in PRESETS else DEFAULT_PRESET
        self.measured = measured  # inputs filled from an experiment, shown with their source
        self.catalog: Catalog | None = None
        self.cloud_label = ""
        self.inputs: CostInputs | None = None
        self.options: tuple[Option, ...] = ()
        self.problems: dict[str, str] = {}

    # ------------------------------------------------------------------ layout
    def compose(self) -> ComposeResult:
        with Horizontal(id="calc-head"):
            yield Label("Cost comparison", id="calc-title")
            yield Select([(p.title, name) for name, p in PRESETS.items()], value=self.preset_name,
                         allow_blank=False, compact=True, id="calc-preset")
        with Horizontal(id="calc-body"):
            with VerticalScroll(id="calc-fields", can_focus=False):
                for section, name, label in FIELDS:
                    if section is not None:
                        yield Static(section, classes="calc-section", markup=False)
                    if name == "gpu_hour_price":
                        with Horizontal(classes="calc-field"):
                            yield Label("catalog type", classes="calc-label")
                            yield Select([], prompt="none (own price)", compact=True, id="calc-type")
                        with Horizontal(classes="calc-field"):
                            yield Label("region", classes="calc-label")
                            yield Select([], prompt="-", compact=True, id="calc-region")
                    with Horizontal(classes="calc-field", id=f"row-{name}"):
                        yield Label(label, classes="calc-label")
                        placeholder = "from discount" if name in OPTIONAL else ""
                        yield Input(placeholder=placeholder, compact=True, id=f"in-{name}")
            with Vertical(id="calc-results"):
                table: DataTable[str] = DataTable(id="calc-table", cursor_type="none", show_cursor=False)
                table.can_focus = False
                yield table
                yield Static(f"{INDEX_FORMULA}: {INDEX_MEANING}.", id="calc-formula", markup=False)
                yield Static("", id="calc-notes", markup=False)
                yield Static("", id="calc-status", markup=False)
        yield KeyFooter()

    def on_mount(self) -> None:
        table = self.query_one("#calc-table", DataTable)
        for label, key in COLUMNS:
            table.add_column(label, key=key)
        for key, name in SHORT_NAMES.items():
            table.add_row(name, "-", "-", "-", key=key)
        self.load_preset(self.preset_name)
        if self.measured is not None:
            self.load_inputs(self.measured)
            self.say(f"Cloud speed and prices {self.measured.cloud_label}; ctrl+r resets to the preset.")
        # Now, with the preset in it (the focus selects it all): digits typed with $ replace it.
        focus_now(self.query_one("#in-gpu_hours", Input))
        self.load_catalog()

    # ------------------------------------------------------------------ catalog
    @work(thread=True, exclusive=True, exit_on_error=False, group="calculator-catalog", description="GPU catalog")
    def load_catalog(self) -> None:
        from gpuconsole.core.money.catalog import bundled_catalog

        catalog = bundled_catalog()
        self.app.call_from_thread(self._catalog_loaded, catalog)

    def _catalog_loaded(self, catalog: Catalog) -> None:
        if not self.is_attached:
            return
        self.catalog = catalog
        priced = {p.instance_type for p in catalog.prices}
        choices = [(f"{t.name} {t.gpu_count}×{t.gpu_model.replace('NVIDIA ', '')}", t.name)
                   for t in catalog.types if t.name in priced]
        with self.prevent(Select.Changed):
            self.query_one("#calc-type", Select).set_options(choices)

    @on(Select.Changed, "#calc-type")
    def _type_chosen(self, event: Select.Changed) -> None:
        region_select = self.query_one("#calc-region", Select)
        if self.catalog is None or event.value is Select.BLANK:
            with self.prevent(Select.Changed):
                region_select.set_options([])
            return
        name = str(event.value)
        regions = [r for r in self.catalog.regions() if self.catalog.price(name, r) is not None]
        current = region_select.value
        with self.prevent(Select.Changed):
            region_select.set_options([(r, r) for r in regions])
            if regions:
                region_select.value = current if current in regions else regions[0]
        self.apply_catalog()

    @on(Select.Changed, "#calc-region")
    def _region_chosen(self, _event: Select.Changed) -> None:
        self.apply_catalog()

    def apply_catalog(self) -> None:
        """Fill the cloud price and GPU count from the chosen catalog type and region."""
        type_value = self.query_one("#calc-type", Select).value
        region_value = self.query_one("#calc-region", Select).value
        if self.catalog is None or type_value is Select.BLANK or region_value is Select.BLANK:
            return
        base = self.inputs or PRESETS[self.preset_name].inputs
        try:
            chosen = from_catalog(self.catalog, str(type_value), str(region_value), base)
        except CalculatorError as exc:
            self.say(str(exc), error=True)
            return
        with self.prevent(Input.Changed):
            self.query_one("#in-gpu_hour_price", Input).value = shown(chosen.gpu_hour_price)
            self.query_one("#in-cloud_gpus", Input).value = shown(chosen.cloud_gpus)
        self.cloud_label = chosen.cloud_label
        self.recompute()

    # ------------------------------------------------------------------ fields
    def load_preset(self, name: str) -> None:
        """Fill every field from preset ``name`` and clear the catalog choice."""
        self.preset_name = name
        self.load_inputs(PRESETS[name].inputs)

    def load_inputs(self, inputs: CostInputs) -> None:
        """Fill every field from ``inputs`` and clear the catalog choice."""
        with self.prevent(Input.Changed, Select.Changed):
            for _, field, _ in FIELDS:
                self.query_one(f"#in-{field}", Input).value = shown(getattr(inputs, field))
            self.query_one("#calc-type", Select).clear()
            self.query_one("#calc-region", Select).set_options([])
        self.cloud_label = inputs.cloud_label
        self.recompute()

    @on(Select.Changed, "#calc-preset")
    def _preset_chosen(self, event: Select.Changed) -> None:
        if event.value is Select.BLANK:
            return
        if self.measured is not None and str(event.value) == self.preset_name:
            return  # the selector announcing its first value: keep the measured inputs
        self.load_preset(str(event.value))

    @on(Input.Changed)
    def _typed(self, event: Input.Changed) -> None:
        if event.input.id in ("in-gpu_hour_price", "in-cloud_gpus"):
            self.cloud_label = ""  # the user's own price now, not the catalog's
        self.recompute()

    @on(Input.Submitted)
    def _next_field(self, event: Input.Submitted) -> None:
        event.stop()
        self.focus_next()

    def read_inputs(self) -> tuple[CostInputs | None, dict[str, str]]:
        """The fields as calculator inputs, or None and each bad field's one-line reason."""
        values: dict[str, object] = {}
        bad: dict[str, str] = {}
        for _, name, _ in FIELDS:
            try:
                values[name] = parse_field(name, self.query_one(f"#in-{name}", Input).value)
            except ValueError as exc:
                bad[name] = str(exc)
        if bad:
            return None, bad
        inputs = replace(PRESETS[self.preset_name].inputs, cloud_label=self.cloud_label, **values)  # type: ignore[arg-type]
        return inputs, problems(inputs)

    def recompute(self) -> None:
        """Read every field, compare the options, and show the result (or what is wrong)."""
        inputs, found = self.read_inputs()
        options: tuple[Option, ...] = ()
        if inputs is not None and not found:
            try:
                options = compare(inputs)
            except CalculatorError as exc:
                found = {exc.field: exc.reason}
        self.inputs, self.options, self.problems = inputs, options, found
        for _, name, _ in FIELDS:
            self.query_one(f"#row-{name}").set_class(name in found, "-invalid")
        self._show_table(options)
        if found:
            name, reason = next(iter(found.items()))
            self.say(f"{LABEL_OF.get(name, name)}: {reason}", error=True)
        else:
            self.say("")
        self._show_notes(inputs if not found else None, options)

    # ------------------------------------------------------------------ results
    def _show_table(self, options: tuple[Option, ...]) -> None:
        table = self.query_one("#calc-table", DataTable)
        found = {o.key: o for o in options}
        for key in SHORT_NAMES:
            o = found.get(key)
            cells = ("-", "-", "-") if o is None else (money(o.cost), f"{o.hours:,.1f} h", f"{o.index:.2f}")
            for column, value in zip(("cost", "time", "index"), cells, strict=True):
                if table.get_cell(key, column) != value:
                    table.update_cell(key, column, value, update_width=True)  # a wider figure widens its column

    def _show_notes(self, inputs: CostInputs | None, options: tuple[Option, ...]) -> None:
        notes = self.query_one("#calc-notes", Static)
        if inputs is None or not options:
            notes.update("")
            return
        found = {o.key: o for o in options}
        own, spot = found["own"], found["spot"]
        power = inputs.own_power_kw * inputs.kwh_usd
        source = inputs.cloud_label or "your price"
        lines = [
            f"Cloud: {inputs.cloud_gpus} GPUs at {unit_price(inputs.gpu_hour_price)}/GPU-h ({source}).",
            f"Spot: {unit_price(inputs.spot_price)}/GPU-h, {spot.interruptions:,.1f} interruptions, "
            f"{spot.billed_hours:,.1f} h billed.",
            f"Own: {money(own.hourly - power)}/h hardware + {money(power)}/h power.",
        ]
        preset = PRESETS[self.preset_name]
        if preset.published:
            table = ", ".join(f"${cost:,.0f}/{hours:g} h" for _, cost, hours in preset.published)
            verdict = "reproduced" if reproduces(preset, options) else "not reproduced (ctrl+r resets)"
            lines.append(f"Guide's table: {table}: {verdict}.")
        notes.update("\n".join(lines))

    def say(self, text: str, *, error: bool = False) -> None:
        status = self.query_one("#calc-status", Static)
        status.update(text)
        status.set_class(error, "-error")

    # ------------------------------------------------------------------ actions
    def action_reset(self) -> None:
        self.load_preset(self.preset_name)
        self.say(f"Reset to {PRESETS[self.preset_name].title}.")

    def action_close(self) -> None:
        self.dismiss(None)


def open_cost_calculator(app: App[object]) -> None:
    """Show the calculator (once: a second request while it is open does nothing)."""
    if isinstance(app.screen, CostCalculatorScreen):
        return
    app.push_screen(CostCalculatorScreen())
