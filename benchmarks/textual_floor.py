"""The floor under gpuconsole's first frame: a bare Textual app with the same frame.

A top line, a one-line strip of pane names, a content switcher holding five panes (six cards
in the first), and a footer with five keys: no data and no gpuconsole code.
Prints the seconds from its first line to its first painted frame (interpreter start excluded).
"""

import time

T0 = time.perf_counter()

from textual.app import App, ComposeResult  # noqa: E402 - after the clock on purpose
from textual.containers import Container  # noqa: E402
from textual.widgets import ContentSwitcher, Footer, Static  # noqa: E402


class Bare(App[None]):
    BINDINGS = [("q", "quit", "Quit"), ("r", "r", "Refresh"), ("t", "t", "Theme"), ("slash", "f", "Filter"), ("question_mark", "h", "Keys")]

    def compose(self) -> ComposeResult:
        yield Static("top")
        yield Static("1 Overview  2 GPUs  3 Jobs  4 Instances  5 Budgets")
        with ContentSwitcher(initial="p0"):
            for n in range(5):
                with Container(id=f"p{n}"):
                    for i in range(6 if n == 0 else 1):
                        yield Static(f"card {i}")
        yield Footer()

    def on_mount(self) -> None:
        self.call_after_refresh(self.painted)

    def painted(self) -> None:
        print(f"{time.perf_counter() - T0:.4f}")
        self.exit()


if __name__ == "__main__":
    Bare().run(headless=True, size=(120, 36))
