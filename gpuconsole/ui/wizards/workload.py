"""The wizard's first step: which GPU type suits the workload, in which region, within which
limits.

The catalog is fetched in a thread worker (it may call the cloud or read the cache); ranking and
filtering are pure and run as the user types.
"""

from __future__ import annotations

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import (
    Input,
    Label,
    RadioSet,
    Select,
    Static,
)

from gpuconsole.core.money.catalog import Catalog
from gpuconsole.core.ops.provision import TypeFilter, recommend
from gpuconsole.model import InstanceType, Workload
from gpuconsole.ui.format import money
from gpuconsole.ui.widgets.cells import Row, right, text
from gpuconsole.ui.widgets.live_table import LiveTable
from gpuconsole.ui.widgets.marks import Choice
from gpuconsole.ui.wizards.fields import (
    BadNumber,
    Field,
    Step,
    failure,
    field_id,
    parse_number,
)

TYPE_COLUMNS = [
    ("TYPE", "type", 14),
    ("GPUS", "gpus", 10),
    ("GiB/GPU", "gpu_mem", 7),
    ("vCPU", "vcpus", 4),
    ("RAM", "ram", 5),
    ("NVMe", "nvme", 6),
    ("NVLINK", "nvlink", 6),
    ("$/H", "price", 7),
]

FILTERS = (  # (field name, label, placeholder)
    ("filter:gpu_model", "GPU model", "any, e.g. H100"),
    ("filter:min_gpu_memory_gib", "min GiB/GPU", "any"),
    ("filter:gpu_count", "GPUs", "any"),
    ("filter:max_price", "max $/h", "any"),
)


def gpu_words(itype: InstanceType) -> str:
    """``8×H100``: the count and the model's short name."""
    model = itype.gpu_model.replace("NVIDIA ", "").replace("Tesla ", "")
    return f"{itype.gpu_count}×{model}"


def nvme(gb: int) -> str:
    """Local NVMe as ``30.4T`` or ``250G``; ``-`` for none."""
    if not gb:
        return "-"
    return f"{gb / 1000:.1f}T" if gb >= 1000 else f"{gb}G"


def dollars(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


class WorkloadStep(Step):
    """Step 1: training or inference, the region, filters, and the recommended types."""

    title = "Workload"
    hint = "↑ ↓ a type · tab: filters, workload, region · enter or ctrl+n: next"

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:  # noqa: A002
        super().__init__(id=id, classes=classes)
        self.types: list[InstanceType] = []

    def compose(self) -> ComposeResult:
        yield Static("Loading the GPU catalog…", id="catalog-note", classes="context", markup=False)
        with Horizontal(id="workload-row", classes="row"):
            yield Label("Workload", classes="row-label")
            with RadioSet(id="workload", compact=True):
                yield Choice("training", value=True)
                yield Choice("inference")
            yield Label("Region", classes="row-label")
            regions = self.wizard.cloud.regions
            yield Select([(r, r) for r in regions], value=self.wizard.choice.region or Select.NULL,
                         allow_blank=not regions, compact=True, id="region")
        with Horizontal(id="filters"):
            for name, label, placeholder in FILTERS:
                yield Field(label, Input(placeholder=placeholder, compact=True), name, stacked=True)
        yield LiveTable(TYPE_COLUMNS, id="type-table")
        yield Static("", id="type-detail", classes="detail", markup=False)

    def on_mount(self) -> None:
        self.load_catalog()

    def enter(self) -> None:
        self.query_one("#type-table", LiveTable).focus()

    # ------------------------------------------------------------------ catalog
    @work(thread=True, exclusive=True, exit_on_error=False, group="wizard-catalog", description="GPU catalog")
    def load_catalog(self, refresh: bool = False) -> None:
        cloud = self.wizard.cloud
        try:
            catalog = cloud.catalog(refresh=refresh)
            note = cloud.catalog_note
        except Exception as exc:  # noqa: BLE001 - any failure becomes one line on the step
            self.app.call_from_thread(self._catalog_failed, failure(exc))
            return
        self.app.call_from_thread(self._catalog_loaded, catalog, note)

    def _catalog_loaded(self, catalog: Catalog, note: str) -> None:
        if not self.is_attached:
            return
        self.wizard.catalog = catalog
        self.query_one("#catalog-note", Static).update(f"Catalog: {note}" if note else "Catalog loaded")
        self.update_types()

    def _catalog_failed(self, message: str) -> None:
        if self.is_attached:
            self.query_one("#catalog-note", Static).update(f"The GPU catalog could not be loaded: {message}")

    # ------------------------------------------------------------------ choosing
    @on(RadioSet.Changed, "#workload")
    def _workload_changed(self, event: RadioSet.Changed) -> None:
        self.wizard.choice.workload = Workload.INFERENCE if event.index == 1 else Workload.TRAINING
        self.update_types()

    @on(Select.Changed, "#region")
    def _region_changed(self, event: Select.Changed) -> None:
        if isinstance(event.value, str):
            self.wizard.choice.region = event.value
            self.update_types()

    @on(Input.Changed, "#filters Input")
    def _filter_changed(self) -> None:
        self.update_types()

    def read_filter(self) -> TypeFilter | None:
        """The filter the fields spell, or None when one is not a number (its message shown)."""
        values: dict[str, str] = {name: self.query_one(f"#{field_id(name)} Input", Input).value
                                  for name, _, _ in FILTERS}
        problems: dict[str, str] = {}

        def number(name: str, kind: type, what: str) -> float | int | None:
            try:
                value = parse_number(values[name], kind, what)
            except BadNumber as exc:
                problems[name] = str(exc)
                return None
            if value is not None and value < 0:
                problems[name] = "must not be negative"
            return value

        memory = number("filter:min_gpu_memory_gib", int, "a whole number")
        count = number("filter:gpu_count", int, "a whole number")
        price = number("filter:max_price", float, "a price")
        self.show_problems(problems)
        if problems:
            return None
        return TypeFilter(gpu_model=values["filter:gpu_model"].strip(), min_gpu_memory_gib=int(memory or 0),
                          gpu_count=int(count or 0), max_price=float(price) if price is not None else None)

    def update_types(self) -> None:
        """Re-rank the types for the workload, region and filters (the old list stays on a typo)."""
        flt = self.read_filter()
        catalog, choice = self.wizard.catalog, self.wizard.choice
        if flt is None or catalog is None:
            return
        try:
            self.types = recommend(catalog, choice.workload, choice.region, flt)
        except Exception as exc:  # noqa: BLE001
            self.wizard.say(f"Could not rank the types: {failure(exc)}", error=True)
            return
        rows: list[Row] = [(t.name, self._cells(t, catalog)) for t in self.types]
        self.query_one("#type-table", LiveTable).sync(rows)
        self._show_detail()
        if not rows:
            self.query_one("#type-detail", Static).update("No type matches these filters.")

    def _cells(self, itype: InstanceType, catalog: Catalog) -> tuple[object, ...]:
        price = catalog.price(itype.name, self.wizard.choice.region)
        return (
            text(itype.name),
            text(gpu_words(itype)),
            right(itype.gpu_memory_gib),
            right(itype.vcpus),
            right(itype.memory_gib),
            right(nvme(itype.nvme_gb)),
            text("yes" if itype.nvlink else "-"),
            right(dollars(price)),
        )

    def on_virtual_table_row_highlighted(self, _event: LiveTable.RowHighlighted) -> None:
        self._show_detail()

    def on_virtual_table_row_selected(self, event: LiveTable.RowSelected) -> None:
        event.stop()
        self.wizard.advance()

    def selected(self) -> InstanceType | None:
        key = self.query_one("#type-table", LiveTable).selected_key
        return next((t for t in self.types if t.name == key), None)

    def _show_detail(self) -> None:
        itype, catalog = self.selected(), self.wizard.catalog
        if itype is None or catalog is None:
            return
        price = catalog.price(itype.name, self.wizard.choice.region)
        line = Text(f"{itype.name}: {itype.gpu_count}× {itype.gpu_model} {itype.gpu_memory_gib} GiB")
        if itype.network:
            line.append(f" · {itype.network}")
        if price is not None and itype.gpu_count:
            line.append(f" · {money(price / itype.gpu_count)} per GPU-h")
        self.query_one("#type-detail", Static).update(line)

    def commit(self) -> str | None:
        if self.read_filter() is None:
            return "fix the filter first"
        itype = self.selected()
        if itype is None:
            return "choose an instance type in the table (↑ ↓)"
        choice = self.wizard.choice
        if choice.instance_type is None or choice.instance_type.name != itype.name:
            choice.availability_zone = ""
        choice.instance_type = itype
        catalog = self.wizard.catalog
        choice.on_demand = catalog.price(itype.name, choice.region) if catalog is not None else None
        return None
