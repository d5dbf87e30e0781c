"""The launch wizard: a GPU type for the workload, where and how to pay, the details, a review
with a dry run, then the launch with every attempt shown as it happens.

Everything that asks the cloud runs in thread workers of the steps; the screen itself only
moves between steps, keeps what each step decided (:class:`Choice`) and says what is wrong on
its status line. The request the Review step shows is built from the same :class:`LaunchSpec`
the launch sends, so what the user reads is what EC2 receives.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, cast

from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import ContentSwitcher, Footer, Input, Static

from gpuconsole.model import LaunchSpec
from gpuconsole.ui.palette import Palette
from gpuconsole.ui.wizards.choice import Choice
from gpuconsole.ui.wizards.details import DetailsStep
from gpuconsole.ui.wizards.fields import Step
from gpuconsole.ui.wizards.price import PriceStep
from gpuconsole.ui.wizards.review import LaunchStep, ReviewStep
from gpuconsole.ui.wizards.workload import WorkloadStep

if TYPE_CHECKING:
    from gpuconsole.core.money.catalog import Catalog
    from gpuconsole.core.ops.cloud_ops import CloudOps
    from gpuconsole.core.ops.provision import LaunchResult  # noqa: F401 - named in a string annotation
    from gpuconsole.ui.protocols import ConsoleApp

STEPS = ("Workload", "Price", "Details", "Review", "Launch")
WORKLOAD, PRICE, DETAILS, REVIEW, LAUNCH = range(5)


class ProvisionWizard(ModalScreen["LaunchResult | None"]):
    """Launch GPU instances in five steps. Returns the :class:`LaunchResult`, or None if cancelled.

    ==============  ==============================================================
    ``ctrl+n``      next step; on Review: launch (once the dry run has passed)
    ``esc``         previous step; cancels on the first; closes once launched
    ``tab``         next field (``shift+tab`` previous)
    ``enter``       in a table: choose the row and go on; in a text field: next field
    ``ctrl+r``      Workload: refresh the catalog from the cloud; Review: dry run again
    ``v``           Review: switch between the JSON request and the Terraform block
    ``enter``       Launch: close the wizard once the launch is over
    ==============  ==============================================================
    """

    CSS_PATH = "provision.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel"),
        Binding("escape", "back", "Back"),
        Binding("escape", "close", "Close"),
        Binding("ctrl+n", "next", "Next"),
        Binding("ctrl+n", "launch", "Launch"),
        Binding("ctrl+r", "refresh_catalog", "Refresh catalog"),
        Binding("ctrl+r", "dry_run", "Dry run again"),
        Binding("v", "toggle_view", "JSON/Terraform"),
        Binding("enter", "close", "Close"),
    ]

    def __init__(self, cloud: CloudOps) -> None:
        super().__init__()
        self.cloud = cloud
        self.choice = Choice(region=cloud.regions[0] if cloud.regions else "")
        self.catalog: Catalog | None = None
        self.spec: LaunchSpec | None = None
        self.step = WORKLOAD
        self.workload_step = WorkloadStep(id="step-0", classes="step")
        self.price_step = PriceStep(id="step-1", classes="step")
        self.details_step = DetailsStep(id="step-2", classes="step")
        self.review_step = ReviewStep(id="step-3", classes="step")
        self.launch_step = LaunchStep(id="step-4", classes="step")
        self.steps: tuple[Step, ...] = (self.workload_step, self.price_step, self.details_step,
                                        self.review_step, self.launch_step)

    @property
    def console_app(self) -> ConsoleApp:
        return cast("ConsoleApp", self.app)

    @property
    def palette(self) -> Palette:
        return self.console_app.palette

    def compose(self) -> ComposeResult:
        with Vertical(id="wizard"):
            yield Static(id="wizard-steps", markup=False)
            with ContentSwitcher(initial="step-0", id="wizard-body"):
                yield from self.steps
            yield Static("", id="wizard-status", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        self._draw_steps()
        self.say(self.current_step.hint)
        self.current_step.enter()

    # ------------------------------------------------------------------ steps
    @property
    def current_step(self) -> Step:
        return self.steps[self.step]

    def go(self, index: int) -> None:
        self.step = index
        self.query_one(ContentSwitcher).current = f"step-{index}"
        self.say(self.current_step.hint)
        self._draw_steps()
        self.refresh_bindings()
        self.current_step.enter()

    def _draw_steps(self) -> None:
        palette = self.palette
        line = Text(" New GPU instance  ", style=palette.strong, no_wrap=True, overflow="ellipsis")
        for index, name in enumerate(STEPS):
            if index:
                line.append(" › ", palette.dim)
            label = f"{index + 1} {name}"
            if index == self.step:
                line.append(f" {label} ", palette.accent + palette.strong + Style(reverse=True))
            elif index < self.step:
                line.append(label)
            else:
                line.append(label, palette.dim)
        self.query_one("#wizard-steps", Static).update(line)

    def say(self, message: str, *, error: bool = False) -> None:
        """One line on the status line above the footer (empty clears it)."""
        status = self.query_one("#wizard-status", Static)
        status.update(message)
        status.set_class(error and bool(message), "-error")

    # ------------------------------------------------------------------ actions
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        step = self.step
        if action == "cancel":
            return step == WORKLOAD
        if action == "back":
            return WORKLOAD < step < LAUNCH or (step == LAUNCH and self.launch_step.failed)
        if action == "close":
            return step == LAUNCH and not self.launch_step.running
        if action == "next":
            return step < REVIEW
        if action == "launch":
            if step != REVIEW:
                return False
            return True if self.review_step.can_launch else None
        if action == "refresh_catalog":
            return step == WORKLOAD
        if action in ("dry_run", "toggle_view"):
            return step == REVIEW
        return True

    def on_input_submitted(self, event: Input.Submitted) -> None:
        # Enter in a text field moves on to the next field, as in a paper form.
        event.stop()
        self.focus_next()

    def action_cancel(self) -> None:
        self.dismiss(None)

    def action_back(self) -> None:
        if WORKLOAD < self.step < LAUNCH:
            self.go(self.step - 1)
        elif self.step == LAUNCH and self.launch_step.failed:  # a failed launch: back to the review, input kept
            self.launch_step.reset()
            self.go(REVIEW)

    def action_close(self) -> None:
        if self.launch_step.running:
            self.say("The launch is still running; its result shows here when it is done.", error=True)
            return
        self.dismiss(self.launch_step.result)

    def action_next(self) -> None:
        if self.step >= REVIEW:
            return
        problem = self.current_step.commit()
        if problem:
            self.say(f"Can't go on: {problem}", error=True)
            return
        self.go(self.step + 1)

    def action_launch(self) -> None:
        if self.step != REVIEW or not self.review_step.can_launch or self.spec is None:
            self.say("Launch waits for a passing dry run of this exact request.", error=True)
            return
        self.go(LAUNCH)

    def action_refresh_catalog(self) -> None:
        self.workload_step.load_catalog(refresh=True)

    def action_dry_run(self) -> None:
        self.review_step.start_dry_run()

    def action_toggle_view(self) -> None:
        self.review_step.toggle_view()


def open_provision_wizard(app: ConsoleApp) -> None:
    """Open the wizard, or say in one line why no launch is possible from this console."""
    cloud = app.core.services.cloud
    if not cloud.available:
        app.notify("No cloud account that can launch instances is configured: run with --demo, "
                   "or configure AWS credentials.", severity="warning", timeout=5)
        return
    app.push_screen(ProvisionWizard(cloud))


