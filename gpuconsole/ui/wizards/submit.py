"""The submit wizard (``N`` on the Jobs pane): a GPU training job, checked as it is typed.

Three steps: the job (name, image, command, GPUs or a MIG profile, workers, schedule, limits),
its environment (the NVIDIA and NCCL presets, anything else), and a review of the exact YAML
the cluster receives. Submit stays off until a server-side dry run (``dryRun=All``) has passed
for exactly the request on screen; any change sends the review back to a new dry run. Every
field is read and checked by :mod:`gpuconsole.core.ops.manifests`, the message going under the
field; the cluster is asked only through ``console.jobs``, in thread workers.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widget import Widget
from textual.widgets import Button, ContentSwitcher, Input, Select, Static

from gpuconsole.core.ops.actions import ActionError, ActionResult
from gpuconsole.core.ops.job_ops import JobOps
from gpuconsole.core.ops.manifests import (
    CONCURRENCY_POLICIES,
    DEFAULT_IMAGE,
    PRESETS,
    JobRequest,
    from_form,
    validate,
)
from gpuconsole.ui import drafts
from gpuconsole.ui.widgets.focus import focus_now
from gpuconsole.ui.wizards.base import WizardScreen
from gpuconsole.ui.wizards.details import os_user
from gpuconsole.ui.wizards.fields import Field
from gpuconsole.ui.wizards.kind_choice import KindChoice, submitted
from gpuconsole.ui.wizards.queue_field import queue_fields

if TYPE_CHECKING:
    from gpuconsole.ui.protocols import ConsoleApp

STEPS = ("Job", "Environment", "Review")
JOB, ENVIRONMENT, REVIEW = range(3)
PRESET_DEFAULTS = {"NVIDIA_DRIVER_CAPABILITIES": "compute,utility"}
PRESET_HINTS = {
    "NVIDIA_VISIBLE_DEVICES": "empty: the device plugin sets it",
    "NVIDIA_DRIVER_CAPABILITIES": "compute,utility[,video]",
    "CUDA_VISIBLE_DEVICES": "e.g. 0,1 (a subset of the pod's GPUs)",
    "NCCL_DEBUG": "VERSION, WARN, INFO or TRACE",
    "NCCL_SOCKET_IFNAME": "e.g. eth0 or ^lo,docker0",
    "NCCL_IB_DISABLE": "1: sockets only, no InfiniBand",
}
DRAFT = "submit-wizard"  # the draft kept on the app when the wizard is closed with esc
ENV_INTRO = ("Environment of every pod; empty fields are left out. Leave NVIDIA_VISIBLE_DEVICES empty on "
             "Kubernetes: the device plugin sets it to the GPUs the pod was given.")


def _input(value: str = "", placeholder: str = "", widget_id: str = "") -> Input:
    return Input(value, placeholder=placeholder, id=widget_id, compact=True)


def run_times(stamps: list[float]) -> str:
    """``Tue 17 Nov 02:00 · Wed 18 Nov 02:00 · …`` (UTC)."""
    return " · ".join(datetime.fromtimestamp(t, UTC).strftime("%a %d %b %H:%M") for t in stamps)


class SubmitWizard(WizardScreen["ActionResult | None"]):
    """Submit a Job or CronJob. Returns the submit's :class:`ActionResult`, or None if cancelled.

    ==============  ==============================================================
    ``ctrl+n``      next step; on Review: submit (once the dry run has passed)
    ``esc``         previous step; cancels on the first
    ``tab``         next field (``shift+tab`` previous); ``enter`` in a field too
    ``ctrl+r``      Review: dry run again
    ==============  ==============================================================
    """

    CSS_PATH = "submit.tcss"
    HEADING = " New GPU job  "
    STEPS = STEPS
    CONFIRM_STEP, CONFIRM, CONFIRM_WORDS = REVIEW, "submit", "creating the job"
    PREFIX, FRAME_ID, STEP_ID, DRAFT = "submit", "submit-wizard", "submit-step-", DRAFT
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel"),
        Binding("escape", "back", "Back"),
        Binding("ctrl+n", "next", "Next"),
        Binding("ctrl+n", "submit", "Submit"),
        Binding("ctrl+r", "dry_run", "Dry run again"),
        # Tab moves through the whole form even while it is still being built (see build_rest).
        Binding("tab", "next_field", "Focus Next", show=False),
        Binding("shift+tab", "previous_field", "Focus Previous", show=False),
    ]

    def __init__(self, jobs: JobOps, namespace: str = "default", owner: str = "") -> None:
        super().__init__()
        self.jobs = jobs
        self.namespace = namespace
        self.owner = owner
        self.step = JOB
        self.touched: set[str] = set()
        self.request: JobRequest | None = None
        self.checked: JobRequest | None = None  # the request of the last dry run started
        self.passed: JobRequest | None = None  # the request the dry run passed for
        self.dry_run_message = ""
        self.submitting = False
        self.result: ActionResult | None = None
        self.next_runs_text: str | None = None
        self.built = False  # the whole form is mounted (see build_rest)
        self._defaults: dict[str, object] = {}  # the fields as the form opened, before a draft
        self._building = asyncio.Lock()

    # ------------------------------------------------------------------ layout
    def compose_steps(self) -> ComposeResult:
        # Only the first fields at first: the screen is up and Name takes the keys typed after N
        # at once; the rest of the form is mounted after the first frame (build_rest).
        with VerticalScroll(id="submit-step-0", classes="step"):
            yield KindChoice(getattr(self, "training_kind", "Job"))  # another kind: its own form
            yield self._pair(
                Field("Name", _input(placeholder="e.g. bert-finetune", widget_id="job-name"), "name"),
                Field("Namespace", _input(self.namespace, widget_id="job-namespace"), "namespace"))

    @staticmethod
    def _pair(first: Widget, second: Widget) -> Horizontal:
        return Horizontal(first, second, classes="pair")

    def _job_fields(self) -> list[Widget]:
        """The Job step below Name and Namespace."""
        pair = self._pair
        return [
            Field("Image", _input(DEFAULT_IMAGE, widget_id="job-image"), "image"),
            Field("Command", _input(placeholder='python train.py  or  ["python", "train.py"]', widget_id="job-command"),
                  "command"),
            *queue_fields(getattr(self.app, "snapshot", None), self.namespace),
            pair(Field("Workers", _input("1", "pods (>1: distributed)", "job-workers"), "workers"),
                 Field("GPUs/pod", _input("1", widget_id="job-gpus"), "gpus")),
            pair(Field("MIG profile", _input(placeholder="whole GPUs, or 1g.10gb…", widget_id="job-mig"),
                       "mig_profile"),
                 Field("CPU", _input(placeholder="e.g. 8 or 500m", widget_id="job-cpu"), "cpu")),
            pair(Field("Memory", _input(placeholder="e.g. 64Gi", widget_id="job-memory"), "memory"),
                 Field("Owner", _input(self.owner, widget_id="job-owner"), "owner")),
            Field("Schedule", _input(placeholder="cron, e.g. 0 2 * * *; empty: run once now", widget_id="job-schedule"),
                  "schedule"),
            Static("", id="next-runs", markup=False),
            pair(Field("Concurrency", Select([(p, p) for p in CONCURRENCY_POLICIES], value="Forbid", allow_blank=False,
                                             compact=True, id="job-concurrency"), "concurrency_policy"),
                 Field("Retries", _input("2", widget_id="job-backoff"), "backoff_limit")),
            pair(Field("Deadline s", _input(placeholder="none", widget_id="job-deadline"), "active_deadline_seconds"),
                 Field("Keep s", _input(placeholder="keep finished jobs", widget_id="job-ttl"),
                       "ttl_seconds_after_finished")),
        ]

    @staticmethod
    def _later_steps() -> list[Widget]:
        """The Environment and Review steps (hidden until Next)."""
        environment = VerticalScroll(
            Static(ENV_INTRO, classes="context", markup=False),
            *(Field(preset, _input(PRESET_DEFAULTS.get(preset, ""), PRESET_HINTS[preset], f"env-{preset}"),
                    f"env:{preset}") for preset in PRESETS),
            Field("Other", _input(placeholder="KEY=VALUE KEY2='with spaces'", widget_id="job-env"), "env"),
            id="submit-step-1", classes="step")
        review = Vertical(
            Static("", id="review-context", markup=False),
            VerticalScroll(Static("", id="review-yaml", markup=False), id="review-yaml-box", can_focus=True),
            Horizontal(Static("", id="dry-run", markup=False),
                       Button("Submit", id="submit-button", variant="success", disabled=True, compact=True),
                       id="review-actions"),
            id="submit-step-2", classes="step")
        for step in (environment, review):
            step.display = False  # the switcher shows one step; these come after it has mounted
        return [environment, review]

    def opened(self) -> None:
        self.say("Each field is checked as you type · tab: next field · ctrl+n: next step · esc: cancel")
        focus_now(self.query_one("#job-name", Input))
        self.call_after_refresh(self.build_rest)

    async def build_rest(self) -> None:
        """Mount the rest of the form: after the first frame, or at once when a key needs it (tab,
        enter, ctrl+n typed with N wait for it, then move through the whole form in order)."""
        async with self._building:
            if self.built or not self._open():
                return  # built, or cancelled (esc typed with N) before the form was complete
            await self.query_one("#submit-step-0").mount_all(self._job_fields())
            if not self._open():
                return
            await self.query_one("#submit-body", ContentSwitcher).mount_all(self._later_steps())
            if self._open():
                self.built = True
                # what was typed before the rest of the form was up stays; the draft fills the rest
                self._defaults = {**drafts.values(self), "job-name": "", "job-namespace": self.namespace}
                if drafts.restore(self, self.DRAFT, unless_changed_from=self._defaults):
                    for widget in self.query(Input):
                        widget.select_on_focus = widget.value == self._defaults.get(widget.id or "")
                    self.say("Your draft is back · ctrl+n: next step · esc keeps it for later")
                self.check()

    def _open(self) -> bool:
        return self.is_attached and not self._closing and self in self.app.screen_stack

    # ------------------------------------------------------------------ the form
    def fields(self, step: int | None = None) -> list[Field]:
        root: Widget = self if step is None else self.query_one(f"#submit-step-{step}")
        return list(root.query(Field))

    def values(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for item in self.fields():
            widget = item.widget
            if isinstance(widget, Input):
                out[item.field_name] = widget.value
            elif isinstance(widget, Select):
                out[item.field_name] = str(widget.value)
        return out

    def build(self) -> tuple[JobRequest, dict[str, str]]:
        """The request the fields spell, and what is wrong with it (field → message)."""
        req, problems = self.parse_form()
        try:
            found = self.request_problems(req)
        except Exception as exc:  # noqa: BLE001 - a checker failure must not stop the form
            found = {"name": str(exc)}
        for name, message in found.items():
            problems.setdefault(name, message)
        return req, problems

    def parse_form(self) -> tuple[Any, dict[str, str]]:
        return from_form(self.values())

    def request_problems(self, req: Any) -> dict[str, str]:
        return validate(req)

    def show_problems(self, problems: dict[str, str], step: int, *, everything: bool = False) -> str | None:
        """Messages under the fields of ``step`` (edited ones only unless ``everything``); the
        first, as ``Label: message``, or None."""
        first: str | None = None
        for item in self.fields(step):
            message = problems.get(item.field_name)
            item.set_message(message if everything or item.field_name in self.touched else None)
            if message and first is None:
                first = f"{item.label}: {message}"
                if everything:
                    item.widget.focus()
        return first

    def check(self) -> None:
        if not self.built:
            return  # build_rest checks once every field is there
        req, problems = self.build()
        self.request = None if problems else req
        for step in (JOB, ENVIRONMENT):
            self.show_problems(problems, step)
        self._show_next_runs(req.schedule, "schedule" in problems)

    def _show_next_runs(self, schedule: str, invalid: bool) -> None:
        words = ""
        if not schedule:
            words = "No schedule: a Job that runs once, now."
        elif not invalid:
            try:
                words = f"Next runs (UTC): {run_times(self.jobs.next_runs(schedule, 3))}"
            except ValueError:
                words = ""
        if words != self.next_runs_text:  # an unchanged line asks for no new layout
            self.next_runs_text = words
            self.query_one("#next-runs", Static).update(words)

    @on(Input.Changed)
    @on(Select.Changed)
    def _edited(self, event: Input.Changed | Select.Changed) -> None:
        field = next((a for a in event.control.ancestors if isinstance(a, Field)), None)
        if field is None:
            return
        if isinstance(event.control, Input) and event.control.has_focus:
            # typed in: coming back to it keeps the text (the first key adds to it); a field
            # still holding its default is selected on arrival, so typing replaces the default
            event.control.select_on_focus = False
        self.touched.add(field.field_name)
        self.check()

    async def next_field(self) -> None:
        await self.action_next_field()

    async def action_next_field(self) -> None:
        await self.build_rest()
        self.focus_next()

    async def action_previous_field(self) -> None:
        await self.build_rest()
        self.focus_previous()

    # ------------------------------------------------------------------ steps
    def entered(self, index: int) -> None:
        if index == REVIEW:
            self._enter_review()
        else:
            fields = self.fields(index)
            if fields:
                fields[0].widget.focus()
            self.say("tab: next field · ctrl+n: next step · esc: back")

    def can_confirm(self) -> bool:
        return self.can_submit

    def step_allows(self, action: str) -> bool | None:
        return self.step == REVIEW if action == "dry_run" else True

    def action_back(self) -> None:
        if self.step > JOB and not self.submitting:
            self.go(self.step - 1)

    async def ready(self) -> bool:
        await self.build_rest()
        return self.built

    def problem(self) -> str | None:
        _req, problems = self.build()
        return self.show_problems(problems, self.step, everything=True)

    # ------------------------------------------------------------------ review and submit
    @property
    def can_submit(self) -> bool:
        return (not self.submitting and self.request is not None and self.passed is not None
                and self.passed == self.request)

    def _enter_review(self) -> None:
        req, problems = self.build()
        if problems:  # a field of an earlier step: show it there
            step = JOB if any(item.field_name in problems for item in self.fields(JOB)) else ENVIRONMENT
            self.go(step)
            self.say(f"Can't go on: {self.show_problems(problems, step, everything=True)}", error=True)
            return
        self.request = req
        gpus = f"{req.gpus}× MIG {req.mig_profile}" if req.mig_profile else f"{req.gpus} GPU(s)"
        size = f"{req.workers} pods × {gpus} = {req.total_gpus}" if req.distributed else gpus
        runs = f" · {req.schedule}" if req.schedule else ""
        self.query_one("#review-context", Static).update(f"{req.kind} {req.namespace}/{req.name} · {size}{runs}")
        box = self.query_one("#review-yaml-box", VerticalScroll)
        box.border_title = "What the cluster receives (YAML)"
        box.border_subtitle = "↑ ↓ scroll"
        self.query_one("#review-yaml", Static).update(self.jobs.preview(req))
        box.scroll_home(animate=False)
        box.focus()
        self.say("ctrl+n or Submit creates it once the dry run passes · ctrl+r: dry run again · esc: back")
        if req != self.checked:
            self.start_dry_run()
        else:
            self._show_dry_run()

    def start_dry_run(self) -> None:
        req = self.request
        if req is None:
            return
        self.checked, self.passed = req, None
        self.dry_run_message = "Dry run: asking the cluster whether it would accept this…"
        self._show_dry_run()
        self._dry_run(req)

    @work(thread=True, exclusive=True, exit_on_error=False, group="submit-dry-run", description="dry run")
    def _dry_run(self, req: JobRequest) -> None:
        try:
            result = self.jobs.submit(req, dry_run=True)
            message, error = result.message, ""
        except ActionError as exc:
            message, error = "", str(exc)
        except Exception as exc:  # noqa: BLE001 - shown as one line, never raised into the app
            message, error = "", str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        self.app.call_from_thread(self._dry_run_done, req, message, error)

    def _dry_run_done(self, req: JobRequest, message: str, error: str) -> None:
        if not self.is_attached or req != self.checked:
            return
        self.passed = None if error else req
        if error:
            self.dry_run_message = f"Dry run failed: {error}"
        else:
            self.dry_run_message = "Dry run passed: " + message.removeprefix("dry run passed: ") + " · ctrl+n submits"
        self._show_dry_run()

    def _show_dry_run(self) -> None:
        line = self.query_one("#dry-run", Static)
        line.update(self.dry_run_message)
        line.set_class(self.can_submit, "-ok")
        line.set_class(self.dry_run_message.startswith(("Dry run failed", "Submit failed")), "-error")
        self.query_one("#submit-button", Button).disabled = not self.can_submit
        self.refresh_bindings()

    def action_dry_run(self) -> None:
        if self.step == REVIEW and not self.submitting:
            self.start_dry_run()

    def action_submit(self) -> None:
        req = self.request
        if self.step != REVIEW or req is None or not self.can_submit:
            self.say("Submit waits for a passing dry run of this exact request.", error=True)
            return
        if not self.deliberate():
            return
        self.submitting = True
        self.dry_run_message = f"Submitting {req.kind} {req.namespace}/{req.name}…"
        self._show_dry_run()
        self._create(req)

    @work(thread=True, exclusive=True, exit_on_error=False, group="submit-create", description="submit job")
    def _create(self, req: JobRequest) -> None:
        try:
            result: ActionResult | None = self.jobs.submit(req)
            error = ""
        except ActionError as exc:
            result, error = None, str(exc)
        except Exception as exc:  # noqa: BLE001
            result, error = None, str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        self.app.call_from_thread(self._created, result, error)

    def action_cancel(self) -> None:
        """esc: close; what was typed is kept as a draft for the next time the wizard opens."""
        if self.built:
            drafts.keep(self, self.DRAFT, self._defaults)
        super().action_cancel()

    def _created(self, result: ActionResult | None, error: str) -> None:
        self.submitting = False
        self.result = result
        if result is not None:
            drafts.forget(self, self.DRAFT)
            self.dismiss(result)
            return
        if not self.is_attached:
            return
        self.passed = None  # the cluster changed its mind: check again before another try
        self.dry_run_message = f"Submit failed: {error}"
        self._show_dry_run()
        self.say("Fix the request (esc: back) or ctrl+r to dry run again.", error=True)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.action_submit()


def open_submit_wizard(app: ConsoleApp, namespace: str | None = None) -> None:
    """Open the wizard, or say in one line why no job can be submitted from this console."""
    jobs = app.core.services.jobs
    if not jobs.available:
        app.notify("No cluster that can run jobs is connected: run with --demo, or point KUBECONFIG at a cluster.",
                   severity="warning", timeout=5)
        return
    app.push_screen(SubmitWizard(jobs, namespace or "default", os_user()), lambda result: submitted(app, result))
