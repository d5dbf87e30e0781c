"""``a`` on the Autopilot pane: a new rule, each field checked as it is typed.

The form collects words only; :func:`gpuconsole.core.ops.autopilot.rules.rule_from_table` checks
them, exactly as ``gpuconsole rule add`` does, and names the key at fault, which the form marks.
Only the fields of the chosen kind are shown.
"""

from __future__ import annotations

import re
import tomllib
from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label, Select, Static

from gpuconsole.core.ops.autopilot.rules import KIND_KEYS, KINDS, RuleError, rule_from_table

# (key, label, placeholder); the kinds each key belongs to come from KIND_KEYS.
FIELDS = (
    ("name", "Name", "e.g. train-pool"),
    ("scope", "Scope", "all, tag:KEY=VALUE or namespace:NS"),
    ("pool", "Pool", "tag:Pool=train"),
    ("launch", "Launch", '{ type = "g5.xlarge", region = "us-east-1", ami = "ami-…" }'),
    ("scale_out", "Scale out", "gpu_util > 80 for 10m or pending_gpus > 0 for 5m"),
    ("scale_in", "Scale in", "gpu_util < 20 for 30m"),
    ("min", "Min", "0"),
    ("max", "Max", "4"),
    ("step", "Step", "1"),
    ("cooldown", "Cooldown", "15m"),
    ("budget_guard", "Budget guard", "a budget's name (no launch at 100 %)"),
    ("idle_for", "Idle for", "30m"),
    ("threshold", "Idle below %", "5"),
    ("spot", "Spot", "keep or terminate"),
    ("fallback_after", "Fallback", "failed relaunches before on-demand, e.g. 2"),
)
WHOLE = frozenset({"min", "max", "step", "fallback_after"})
_KEY = re.compile(r" key ([a-z_]+)(?:\.[a-z_]+)?:")


def field_of(message: str) -> str:
    """The form field a rule error names (``rule 'x' key launch.ami: …`` → ``launch``)."""
    match = _KEY.search(message)
    return match.group(1) if match else "name"


class RuleForm(ModalScreen[dict[str, Any] | None]):
    """Dismisses with the new rule's table (as ``rule add`` takes it), or None when cancelled.

    | key | does |
    |---|---|
    | ctrl+s / enter | save the rule (kept open, the field at fault focused, while it is invalid) |
    | esc | cancel |
    """

    CSS_PATH = "rule_form.tcss"

    BINDINGS = [
        Binding("ctrl+s", "save", "Save", tooltip="save the rule (an invalid one keeps the form and says which field)"),
        Binding("escape", "cancel", "Cancel", tooltip="close the form without saving"),
    ]

    def compose(self) -> ComposeResult:
        with Vertical(id="rule-form") as box:
            box.border_title = "New autopilot rule"
            box.border_subtitle = "ctrl+s save · esc cancel"
            with Horizontal(classes="form-row"):
                yield Label("Kind", classes="form-label")
                yield Select([(k, k) for k in KINDS], value="idle-stop", allow_blank=False, id="rule-kind", compact=True)
            for key, label, hint in FIELDS:
                with Horizontal(classes="form-row", id=f"row-{key}"):
                    yield Label(label, classes="form-label")
                    yield Input(placeholder=hint, id=f"rule-{key}", compact=True)
            yield Static("", id="rule-error")

    def on_mount(self) -> None:
        self._show_kind()
        self.query_one("#rule-name", Input).focus()

    @property
    def kind(self) -> str:
        return str(self.query_one("#rule-kind", Select).value)

    def _show_kind(self) -> None:
        keys = {"name", "scope", *KIND_KEYS[self.kind]}
        for key, _, _ in FIELDS:
            self.query_one(f"#row-{key}").display = key in keys

    def on_select_changed(self, event: Select.Changed) -> None:
        self._show_kind()
        self.check()

    def on_input_changed(self, event: Input.Changed) -> None:
        self.check()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.action_save()

    def action_cancel(self) -> None:
        self.dismiss(None)

    def action_save(self) -> None:
        problem = self.check()
        if problem is not None:
            self.query_one(f"#rule-{problem}").focus()
            return
        self.dismiss(self.table())

    def table(self) -> dict[str, Any]:
        """The fields typed so far, as a ``[[rules]]`` table (blank fields left out).

        Raises:
            RuleError: a field that is not even the right type (a launch that is not TOML).
        """
        out: dict[str, Any] = {"kind": self.kind}
        shown = {"name", "scope", *KIND_KEYS[self.kind]}
        for key, _, _ in FIELDS:
            text = self.query_one(f"#rule-{key}", Input).value.strip()
            if not text or key not in shown:
                continue
            if key in WHOLE:
                out[key] = int(text) if text.lstrip("-").isdigit() else text
            elif key == "threshold":
                try:
                    out[key] = float(text)
                except ValueError:
                    out[key] = text
            elif key == "launch":
                try:
                    out[key] = tomllib.loads(f"v = {text}")["v"]
                except tomllib.TOMLDecodeError as exc:
                    raise RuleError(f"rule key launch: not a TOML inline table: {str(exc).splitlines()[0]}") from None
            else:
                out[key] = text
        return out

    def check(self) -> str | None:
        """Check the rule as typed; mark the field at fault and say why. The field's key, or None."""
        error = self.query_one("#rule-error", Static)
        try:
            rule_from_table(self.table(), origin="db")
        except RuleError as exc:
            key = field_of(str(exc))
            key = key if key in {k for k, _, _ in FIELDS} else "name"
            for name, _, _ in FIELDS:
                self.query_one(f"#rule-{name}", Input).set_class(name == key, "-invalid")
            error.update(str(exc))
            return key
        for name, _, _ in FIELDS:
            self.query_one(f"#rule-{name}", Input).set_class(False, "-invalid")
        error.update("ok: ctrl+s saves it")
        return None
