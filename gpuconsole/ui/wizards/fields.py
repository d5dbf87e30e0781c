"""Form pieces the wizard's steps share: a labelled field with its message line, number parsing,
the step itself and what it sees of its wizard (:class:`LaunchWizard`).

Every field has one line under it for what is wrong with it, so a bad value is explained where
the user is looking, and Next can point at the first field that needs fixing.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, TypeVar, cast

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widget import Widget
from textual.widgets import Label, Static

from gpuconsole.core.ops.actions import ActionError, one_line
from gpuconsole.ui.worker_errors import ReportsWorkerErrors

if TYPE_CHECKING:
    from gpuconsole.core.money.catalog import Catalog
    from gpuconsole.core.ops.cloud_ops import CloudOps
    from gpuconsole.model import LaunchSpec
    from gpuconsole.ui.palette import Palette
    from gpuconsole.ui.protocols import ConsoleApp
    from gpuconsole.ui.wizards.choice import Choice

N = TypeVar("N", int, float)


def failure(exc: BaseException) -> str:
    """One line for the user from any failure of a cloud call."""
    return str(exc) if isinstance(exc, ActionError) else one_line(exc)


class BadNumber(ValueError):
    """A field's text is not the number it should be; the message is for the user."""


def parse_number(text: str, kind: Callable[[str], N], what: str, *, blank: N | None = None) -> N | None:
    """``text`` as an ``int`` or ``float``; ``blank`` (None by default) when the field is empty.

    Raises:
        BadNumber: not a number of that kind.
    """
    words = text.strip().replace(",", "").lstrip("$")
    if not words:
        return blank
    try:
        value = kind(words)
    except ValueError:
        raise BadNumber(f"not {what}") from None
    if isinstance(value, float) and not math.isfinite(value):  # "nan", "inf", "1e309"
        raise BadNumber(f"not {what}: {words[:20]} is no finite number")
    return value


def field_id(name: str) -> str:
    """The widget id of a field: ``count`` → ``field-count``, ``tag:Owner`` → ``field-tag-Owner``."""
    return "field-" + name.replace(":", "-").replace(".", "-")


class Field(Vertical):
    """A label and its widget on one line (or two with ``stacked``), the message line under them.

    Args:
        label: the words before (or above) the widget.
        widget: the input, select or list the user edits.
        name: the :class:`~gpuconsole.model.LaunchSpec` field it edits (``tag:Owner`` for tags),
            which is what :func:`~gpuconsole.core.ops.provision.validate` reports problems against.
        stacked: the label above the widget instead of before it.
    """

    def __init__(self, label: str, widget: Widget, name: str, *, stacked: bool = False) -> None:
        super().__init__(id=field_id(name), classes="field -stacked" if stacked else "field")
        self.label = label
        self.widget = widget
        self.field_name = name
        self.message = ""

    def compose(self) -> ComposeResult:
        with Horizontal(classes="field-line"):
            yield Label(self.label, classes="field-label")
            yield self.widget
        yield Static("", classes="field-message", markup=False)

    def on_mount(self) -> None:
        self.query_one(".field-message", Static).display = False

    def set_message(self, text: str | None) -> None:
        """Show ``text`` under the field (None or empty hides the line)."""
        text = text or ""
        if text == self.message:
            return
        self.message = text
        line = self.query_one(".field-message", Static)
        line.update(text)
        line.display = bool(text)
        self.set_class(bool(text), "-invalid")


class LaunchWizard(Protocol):
    """What a step may use of the wizard it is on (:class:`~gpuconsole.ui.wizards.provision.ProvisionWizard`)."""

    cloud: CloudOps
    choice: Choice
    catalog: Catalog | None
    spec: LaunchSpec | None

    @property
    def console_app(self) -> ConsoleApp: ...

    @property
    def palette(self) -> Palette: ...

    @property
    def current_step(self) -> Step: ...

    def say(self, message: str, *, error: bool = False) -> None: ...

    def advance(self) -> None: ...

    def action_launch(self) -> None: ...

    def refresh_bindings(self) -> None: ...


class Step(ReportsWorkerErrors, Vertical):
    """One page of the wizard. ``enter`` runs when it is shown; ``commit`` when Next is asked.

    ``commit`` stores what the step decided in the wizard's :class:`Choice` and returns the first
    problem as one line (then the wizard stays on the step), or None.
    """

    title = ""
    hint = ""  # what the keys do here, shown on the status line when the step opens

    @property
    def wizard(self) -> LaunchWizard:
        return cast("LaunchWizard", self.screen)

    def enter(self) -> None:
        """The step is now on screen: load what it needs, put the focus on its first field."""

    def commit(self) -> str | None:
        return None

    def fields(self) -> list[Field]:
        return list(self.query(Field))

    def show_problems(self, problems: dict[str, str], touched: set[str] | None = None) -> str | None:
        """Put each message under its field (only ``touched`` ones when given); the first one
        in the form's order, or None. A problem whose field is not on this step is returned
        only when no field of the step has one."""
        first: str | None = None
        first_field: Field | None = None
        names = set()
        for item in self.fields():
            names.add(item.field_name)
            message = problems.get(item.field_name)
            item.set_message(message if touched is None or item.field_name in touched else None)
            if message and first is None:
                first, first_field = message, item
        if first is not None and first_field is not None:
            return f"{first_field.label.strip()}: {first}"
        others = [f"{name}: {message}" for name, message in problems.items() if name not in names]
        return others[0] if others else None

    def focus_field(self, name: str) -> None:
        found = self.query(f"#{field_id(name)}")
        if found:
            cast(Field, found.first()).widget.focus()
