"""What every wizard is made of: a list of steps, the strip that names them, one status line,
and the keys that move between them (Next, Back, Cancel and the one that confirms)."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Literal, TypeVar, cast

from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import ContentSwitcher, Input, Static

from gpuconsole.ui.deliberate import deliberate, shown_now
from gpuconsole.ui.worker_errors import ReportsWorkerErrors
from gpuconsole.ui.widgets.footer import KeyFooter

if TYPE_CHECKING:
    from gpuconsole.ui.palette import Palette
    from gpuconsole.ui.protocols import ConsoleApp

ResultT = TypeVar("ResultT")


class WizardScreen(ReportsWorkerErrors, ModalScreen[ResultT]):
    """A modal screen that is a list of steps, shown one at a time.

    A wizard names its steps (``STEPS``) and the step whose ``ctrl+n`` confirms
    (``CONFIRM_STEP``, with the action ``CONFIRM``: ``launch``, ``submit``); :meth:`forward`
    alone decides whether ``ctrl+n`` goes to the next step or confirms. Its widgets are
    ``#{PREFIX}-steps`` (the strip), ``#{PREFIX}-body`` (the steps, ``{STEP_ID}0`` …) and
    ``#{PREFIX}-status`` inside ``#{FRAME_ID}``.
    """

    HEADING: ClassVar[str] = ""
    STEPS: ClassVar[tuple[str, ...]] = ()
    CONFIRM_STEP: ClassVar[int] = 0
    CONFIRM: ClassVar[str] = "confirm"
    CONFIRM_WORDS: ClassVar[str] = "confirming"  # "the launch": what a key typed ahead may not do
    PREFIX: ClassVar[str] = "wizard"
    FRAME_ID: ClassVar[str] = "wizard"
    STEP_ID: ClassVar[str] = "step-"

    step = 0

    @property
    def console_app(self) -> ConsoleApp:
        return cast("ConsoleApp", self.app)

    @property
    def palette(self) -> Palette:
        return self.console_app.palette

    # ------------------------------------------------------------------ layout
    def compose(self) -> ComposeResult:
        with Vertical(id=self.FRAME_ID):
            yield Static(id=f"{self.PREFIX}-steps", markup=False)
            with ContentSwitcher(initial=f"{self.STEP_ID}0", id=f"{self.PREFIX}-body"):
                yield from self.compose_steps()
            yield Static("", id=f"{self.PREFIX}-status", markup=False)
        yield KeyFooter()

    def compose_steps(self) -> ComposeResult:
        """The steps' widgets, ids ``{STEP_ID}0`` …"""
        yield from ()

    def on_mount(self) -> None:
        self.draw_steps()
        self.opened()

    def opened(self) -> None:
        """The wizard is on screen, on its first step."""

    def draw_steps(self) -> None:
        """``New GPU job   1 Job  › 2 Environment › 3 Review``: the current step highlighted."""
        palette = self.palette
        line = Text(self.HEADING, style=palette.strong, no_wrap=True, overflow="ellipsis")
        for index, name in enumerate(self.STEPS):
            if index:
                line.append(" › ", palette.dim)
            label = f"{index + 1} {name}"
            if index == self.step:
                line.append(f" {label} ", palette.accent + palette.strong + Style(reverse=True))
            else:
                line.append(label, None if index < self.step else palette.dim)
        self.query_one(f"#{self.PREFIX}-steps", Static).update(line)

    def say(self, message: str, *, error: bool = False) -> None:
        """One line on the status line above the footer (empty clears it)."""
        status = self.query_one(f"#{self.PREFIX}-status", Static)
        status.update(message)
        status.set_class(error and bool(message), "-error")

    # ------------------------------------------------------------------ moving between steps
    def go(self, index: int) -> None:
        self.step = index
        self.query_one(ContentSwitcher).current = f"{self.STEP_ID}{index}"
        self.draw_steps()
        self.refresh_bindings()
        self.entered(index)
        if index == self.step == self.CONFIRM_STEP:  # keys typed ahead of it are dropped, said on the status line
            shown_now(self, self.CONFIRM_WORDS, lambda words: self.say(words, error=True))

    def entered(self, index: int) -> None:
        """Step ``index`` is now on screen."""

    def forward(self) -> Literal["next", "confirm"] | None:
        """What ``ctrl+n`` does on the current step: go to the next step, confirm (``CONFIRM``),
        or nothing (after the confirming step)."""
        if self.step < self.CONFIRM_STEP:
            return "next"
        return "confirm" if self.step == self.CONFIRM_STEP else None

    def deliberate(self) -> bool:
        """Whether the confirming key was pressed with the confirming step on screen (a key
        typed ahead of it is refused, with the reason on the status line)."""
        return deliberate(self.app, self, self.CONFIRM_WORDS, lambda words: self.say(words, error=True))

    def can_go_back(self) -> bool:
        return self.step > 0

    def can_confirm(self) -> bool:
        """Whether the confirming key may run now (else it is shown dimmed)."""
        return False

    def step_allows(self, action: str) -> bool | None:
        """:meth:`check_action` for the wizard's own keys."""
        return True

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "cancel":
            return self.step == 0
        if action == "back":
            return self.can_go_back()
        if action == "next":
            return self.forward() == "next"
        if action == self.CONFIRM:
            if self.forward() != "confirm":
                return False
            return True if self.can_confirm() else None
        return self.step_allows(action)

    async def ready(self) -> bool:
        """Wait for the form to be complete; False: it never will be (the wizard closed)."""
        return True

    async def action_next(self) -> None:
        if await self.ready():
            self.advance()

    def advance(self) -> None:
        """The next step, once the current one has no problem (else say what it is)."""
        if self.forward() != "next":
            return
        problem = self.problem()
        if problem:
            self.say(f"Can't go on: {problem}", error=True)
            return
        self.go(self.step + 1)

    def problem(self) -> str | None:
        """What keeps the current step from going on, as one line, or None."""
        return None

    def action_cancel(self) -> None:
        self.dismiss(None)

    async def on_input_submitted(self, event: Input.Submitted) -> None:
        # Enter in a text field moves on to the next field, as in a paper form.
        event.stop()
        await self.next_field()

    async def next_field(self) -> None:
        self.focus_next()
