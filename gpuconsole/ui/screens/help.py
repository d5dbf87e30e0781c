"""``?``: every key binding on one screen, readable at 80×24."""

from __future__ import annotations

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

KEYS: list[tuple[str, str]] = [
    ("1 … 6", "Overview · GPUs · Jobs · Instances · Budgets · Audit"),
    ("tab / shift+tab", "next / previous pane"),
    ("↑ ↓ pgup pgdn", "move in a table"),
    ("enter", "details of the selected GPU (sparklines, slices, processes)"),
    ("/", "filter the current table; enter keeps it, esc clears"),
    ("c", "Jobs pane: move between jobs and CronJobs"),
    ("n / N", "Jobs pane: Nodes view (GPU capacity) / submit a new job (wizard)"),
    ("enter / l", "Jobs pane: describe the job (YAML, events) / its log (/ searches, n N)"),
    ("s T ctrl+d", "Jobs pane: suspend or resume / run a CronJob now / delete (asks y/n)"),
    ("n", "Instances pane: launch a GPU instance (wizard)"),
    ("s S b x", "Instances pane: stop, start, reboot, terminate the selected one"),
    ("a x g", "Budgets pane: add a budget, remove one, run a waiting budget action"),
    ("$", "cost comparison: own server vs on-demand vs spot"),
    ("r", "poll every source now"),
    ("t", "next theme (dark, light, contrast)"),
    ("d", "switch to the demo when a backend is not set up"),
    ("ctrl+p", "command palette: every action, find a GPU, job or instance"),
    ("?", "this help"),
    ("q / ctrl+q", "quit"),
]


class HelpScreen(ModalScreen[None]):
    """Key bindings. Any of ``esc``, ``q`` or ``?`` closes it."""

    BINDINGS = [
        Binding("escape", "dismiss", "Close"),
        Binding("q", "dismiss", "Close", show=False),
        Binding("question_mark", "dismiss", "Close", show=False),
    ]

    def compose(self) -> ComposeResult:
        table = Table(box=None, show_header=False, padding=(0, 2, 0, 0), expand=False)
        table.add_column(style="bold", no_wrap=True)
        table.add_column()
        for key, what in KEYS:
            table.add_row(key, what)
        with VerticalScroll(id="help-box") as box:
            box.border_title = "gpuconsole keys"
            box.border_subtitle = "esc to close"
            yield Static(table)
