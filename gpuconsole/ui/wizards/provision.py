"""The launch wizard: a GPU type for the workload, where and how to pay, the details, a review
with a dry run, then the launch with every attempt shown as it happens.

Everything that asks the cloud runs in thread workers of the steps; the screen itself only
moves between steps, keeps what each step decided (:class:`Choice`) and says what is wrong on
its status line. The request the Review step shows is built from the same :class:`LaunchSpec`
the launch sends, so what the user reads is what EC2 receives.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType

from gpuconsole.model import LaunchSpec
from gpuconsole.ui.wizards.base import WizardScreen
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


class ProvisionWizard(WizardScreen["LaunchResult | None"]):
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
    HEADING = " New GPU instance  "
    STEPS = STEPS
    CONFIRM_STEP, CONFIRM, CONFIRM_WORDS = REVIEW, "launch", "the launch"
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

    def compose_steps(self) -> ComposeResult:
        yield from self.steps

    def opened(self) -> None:
        self.say(self.current_step.hint)
        self.current_step.enter()

    @property
    def current_step(self) -> Step:
        return self.steps[self.step]

    def entered(self, index: int) -> None:
        self.say(self.current_step.hint)
        self.current_step.enter()

    # ------------------------------------------------------------------ keys
    def can_go_back(self) -> bool:
        step = self.step
        return WORKLOAD < step < LAUNCH or (step == LAUNCH and self.launch_step.failed)

    def can_confirm(self) -> bool:
        return self.review_step.can_launch

    def step_allows(self, action: str) -> bool | None:
        if action == "close":
            return self.step == LAUNCH and not self.launch_step.running
        if action == "refresh_catalog":
            return self.step == WORKLOAD
        if action in ("dry_run", "toggle_view"):
            return self.step == REVIEW
        return True

    def problem(self) -> str | None:
        return self.current_step.commit()

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

    def action_launch(self) -> None:
        if self.step != REVIEW or not self.review_step.can_launch or self.spec is None:
            self.say("Launch waits for a passing dry run of this exact request.", error=True)
            return
        if self.deliberate():
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


