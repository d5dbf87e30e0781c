"""An experiment built in the console: the file's keys in an editor, checked before it starts.

| key | does |
|---|---|
| ctrl+s | check the experiment and start it (a bad key is one line naming it; nothing starts) |
| esc | cancel |

The form is the file itself, filled with an example to change, so what is built here can be
saved and run again with ``gpuconsole experiment run FILE``.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static, TextArea

from gpuconsole.ui import drafts

TEMPLATE = """\
name = "my-experiment"
namespace = "default"
image = "nvcr.io/nvidia/pytorch:24.05-py3"
command = ["python", "bench.py", "--epochs", "1"]
gpus = 1
metric = { regex = "samples/s: ([0-9.]+)", unit = "samples/s", better = "higher" }
work = { amount = 1281167, unit = "samples", per = "epoch" }
repeats = 3
max_cost = 50

[[arms]]
instance_type = "g5.xlarge"

[[arms]]
instance_type = "g6.xlarge"
market = "spot"
"""


class ExperimentFormScreen(ModalScreen[str | None]):
    """Dismisses with the experiment's text once it reads without a problem, or None."""

    CSS_PATH = "experiment_form.tcss"

    BINDINGS = [
        Binding("ctrl+s", "submit", "Start"),
        Binding("escape", "cancel", "Cancel"),
    ]

    def __init__(self, text: str = TEMPLATE) -> None:
        super().__init__()
        self.text = text

    def compose(self) -> ComposeResult:
        with Vertical(id="exp-form-box") as box:
            box.border_title = "New experiment"
            box.border_subtitle = "ctrl+s to check and start · esc to cancel"
            yield TextArea(self.text, id="exp-form-text", soft_wrap=True, show_line_numbers=True)
            yield Static("", id="exp-form-error", markup=False)

    def on_mount(self) -> None:
        self._defaults = drafts.values(self)
        if drafts.restore(self, "experiment-form"):
            self._say("Your draft is back: ctrl+s starts it, esc keeps it for later.")
        self.query_one(TextArea).focus()

    def action_submit(self) -> None:
        from gpuconsole.core.ops.experiments.spec import SpecError, parse_text

        text = self.query_one(TextArea).text
        try:
            parse_text(text)
        except SpecError as exc:
            self._say(str(exc))
            return
        drafts.forget(self, "experiment-form")
        self.dismiss(text)

    def _say(self, words: str) -> None:
        """One line under the text; the line takes a row only while it says something."""
        line = self.query_one("#exp-form-error", Static)
        line.update(words)
        line.set_class(bool(words), "-shown")

    def action_cancel(self) -> None:
        """esc: close; the text is kept as a draft for the next time the form opens."""
        drafts.keep(self, "experiment-form", self._defaults)
        self.dismiss(None)
