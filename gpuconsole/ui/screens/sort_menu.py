"""F6: the sort menu, as in htop: every column a table can be sorted by, and the reverse."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import OptionList
from textual.widgets.option_list import Option

REVERSE = "-reverse"


class SortMenu(ModalScreen[str | None]):
    """Dismisses with the chosen column key, :data:`REVERSE`, or None (esc)."""

    CSS_PATH = "sort_menu.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "dismiss_menu", "Cancel")]

    def __init__(self, columns: dict[str, str], current: str, descending: bool) -> None:
        """``columns``: key → label, in the table's order; ``current``: the sort column now."""
        super().__init__()
        self.columns = columns
        self.current = current
        self.descending = descending

    def compose(self) -> ComposeResult:
        arrow = "▼" if self.descending else "▲"
        options = [Option(f"{label}{' ' + arrow if key == self.current else ''}", id=key)
                   for key, label in self.columns.items()]
        options.append(Option(f"reverse ({'▲' if self.descending else '▼'})", id=REVERSE))
        with Vertical(id="sort-box") as box:
            box.border_title = "Sort by"
            box.border_subtitle = "enter picks · esc closes"
            yield OptionList(*options, id="sort-options")

    def on_mount(self) -> None:
        menu = self.query_one(OptionList)
        keys = list(self.columns)
        menu.highlighted = keys.index(self.current) if self.current in keys else 0
        menu.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.dismiss(event.option.id)

    def action_dismiss_menu(self) -> None:
        self.dismiss(None)
