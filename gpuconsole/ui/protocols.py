"""What the screens and wizards may use of the running app, as a type.

The app (:class:`gpuconsole.ui.app.GpuConsoleApp`) sits at the top of the UI and imports the
rest; what lies below names it through :class:`ConsoleApp`, so no import points back up.
The order of the UI, top to bottom: ``app`` → ``commands`` → ``panes`` → ``access`` →
``screens`` / ``wizards`` → ``widgets`` / ``protocols`` → ``format`` / ``messages`` /
``palette`` / ``themes``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from textual.notifications import SeverityLevel

    from gpuconsole.core.fleet.console import Console
    from gpuconsole.model import FleetSnapshot
    from gpuconsole.ui.palette import Palette


class ConsoleApp(Protocol):
    """The console app as its screens see it: the core, the snapshot on screen, the colours."""

    core: Console
    snapshot: FleetSnapshot
    palette: Palette

    def notify(self, message: str, *, title: str = "", severity: SeverityLevel = "information",
               timeout: float | None = None, markup: bool = False) -> None: ...

    def push_screen(self, screen: Any, callback: Any = None, wait_for_dismiss: bool = False, *,
                    mode: str | None = None) -> Any: ...
