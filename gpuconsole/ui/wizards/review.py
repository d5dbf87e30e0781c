"""The wizard's last two steps: review (cost, the request, a dry run) and the launch itself.

Launch is possible only while the dry run has passed for exactly the spec on screen: the check
compares specs, so any change made in an earlier step sends the review back to a new dry run.
"""

from __future__ import annotations

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import Button, Static

from gpuconsole.core.ops.launch_request import request_json, terraform_block
from gpuconsole.core.ops.provision import LaunchResult, estimate
from gpuconsole.model import LaunchAttempt, LaunchSpec, Market
from gpuconsole.ui.format import money
from gpuconsole.ui.wizards.fields import Step, failure

VIEWS = {"json": "RunInstances request (JSON)", "terraform": "Terraform"}


class ReviewStep(Step):
    """Step 4: what it costs, the request as JSON or Terraform, and the dry run's answer."""

    title = "Review"
    hint = "↑ ↓ scroll · v: JSON or Terraform · ctrl+n: launch after a passing dry run"

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:  # noqa: A002
        super().__init__(id=id, classes=classes)
        self.view = "json"
        self.checked: LaunchSpec | None = None  # the spec of the last dry run started
        self.passed: LaunchSpec | None = None  # the spec the dry run passed for
        self.dry_run_message = ""

    def compose(self) -> ComposeResult:
        yield Static("", id="review-context", classes="context", markup=False)
        yield Static("", id="review-cost", markup=False)
        with VerticalScroll(id="review-code-box", can_focus=True):
            yield Static("", id="review-code", markup=False)
        with Horizontal(id="review-actions"):
            yield Static("", id="dry-run", markup=False)
            yield Button("Launch", id="launch", variant="success", disabled=True, compact=True)

    @property
    def can_launch(self) -> bool:
        return self.passed is not None and self.passed == self.wizard.spec

    def enter(self) -> None:
        spec = self.wizard.spec
        if spec is None:
            return
        choice = self.wizard.choice
        self.query_one("#review-context", Static).update(f"{spec.count} × {choice.describe()}")
        self.query_one("#review-cost", Static).update(self._cost(spec))
        self._show_code()
        if spec != self.checked:
            self.start_dry_run()
        else:
            self._show_dry_run()
        self.query_one("#review-code-box").focus()

    def _cost(self, spec: LaunchSpec) -> Text:
        choice, palette = self.wizard.choice, self.wizard.palette
        hourly = choice.hourly
        line = Text("Cost: ", style=palette.strong)
        if hourly is None:
            line.append("no price is known for this type here", palette.warn)
            return line
        try:
            cost = estimate(hourly, spec.count)
        except Exception as exc:  # noqa: BLE001
            line.append(f"could not estimate ({failure(exc)})", palette.warn)
            return line
        line.append(f"{money(cost.per_hour)}/h · {money(cost.per_day)}/day · {money(cost.per_30_days)}/30 days",
                    palette.strong)
        if spec.market is Market.SPOT:
            line.append("  at today's spot price", palette.dim)
            cap, market = spec.max_spot_price, choice.spot_price
            if cap is not None and market is not None and cap < market:
                line.append(f"\nYour max price {money(cap)}/h is under today's spot price {money(market)}/h: "
                            "EC2 refuses the launch unless the price falls (back: change it).", palette.bad)
        impact = self._budget_impact(spec, cost.per_hour)
        if impact:
            line.append("\n")
            line.append(impact, palette.warn if "over" in impact or "(1" in impact else None)
        return line

    def _budget_impact(self, spec: LaunchSpec, per_hour: float) -> str | None:
        """What the launch does to the budget its Budget tag names (or the fleet budget)."""
        try:
            return self.wizard.console_app.core.services.budget_ops.launch_impact(spec.tag("Budget") or "", per_hour)
        except Exception as exc:  # noqa: BLE001 - an estimate must never stop a review
            return f"budget impact unknown ({failure(exc)})"

    # ------------------------------------------------------------------ request views
    def toggle_view(self) -> None:
        self.view = "terraform" if self.view == "json" else "json"
        self._show_code()

    def code(self) -> str:
        spec = self.wizard.spec
        if spec is None:
            return ""
        return request_json(spec) if self.view == "json" else terraform_block(spec)

    def _show_code(self) -> None:
        box = self.query_one("#review-code-box", VerticalScroll)
        other = "terraform" if self.view == "json" else "json"
        box.border_title = VIEWS[self.view]
        box.border_subtitle = f"v: {VIEWS[other]}"
        self.query_one("#review-code", Static).update(self.code())
        box.scroll_home(animate=False)

    # ------------------------------------------------------------------ dry run
    def start_dry_run(self) -> None:
        spec = self.wizard.spec
        if spec is None:
            return
        self.checked, self.passed = spec, None
        self.dry_run_message = "Dry run: asking the cloud whether this request would launch…"
        self._show_dry_run()
        self.dry_run(spec)

    @work(thread=True, exclusive=True, exit_on_error=False, group="wizard-dry-run", description="dry run")
    def dry_run(self, spec: LaunchSpec) -> None:
        try:
            self.wizard.cloud.dry_run(spec)
            error = ""
        except Exception as exc:  # noqa: BLE001
            error = failure(exc)
        self.app.call_from_thread(self._dry_run_done, spec, error)

    def _dry_run_done(self, spec: LaunchSpec, error: str) -> None:
        if not self.is_attached or spec != self.checked:
            return
        self.passed = None if error else spec
        self.dry_run_message = f"Dry run failed: {error}" if error else "Dry run passed: ctrl+n or the button launches"
        self._show_dry_run()

    def _show_dry_run(self) -> None:
        line = self.query_one("#dry-run", Static)
        line.update(self.dry_run_message)
        ok = self.can_launch
        failed = self.dry_run_message.startswith("Dry run failed")
        line.set_class(ok, "-ok")
        line.set_class(failed, "-error")
        self.query_one("#launch", Button).disabled = not ok
        self.wizard.refresh_bindings()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.wizard.action_launch()


class LaunchStep(Step):
    """Step 5: the launch, with each attempt (zone, type, market, ✓/✗) as it happens."""

    title = "Launch"

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:  # noqa: A002
        super().__init__(id=id, classes=classes)
        self.running = False
        self.started = False
        self.attempts: list[LaunchAttempt] = []
        self.result: LaunchResult | None = None
        self.error = ""

    def compose(self) -> ComposeResult:
        yield Static("", id="launch-context", classes="context", markup=False)
        with VerticalScroll(id="attempts-box", can_focus=True) as box:
            box.border_title = "Attempts"
            yield Static("", id="attempts", markup=False)
        yield Static("", id="launch-result", markup=False)

    def enter(self) -> None:
        spec = self.wizard.spec
        if spec is None or self.started:
            return
        self.started = self.running = True
        where = spec.availability_zone or spec.region
        self.query_one("#launch-context", Static).update(
            f"Launching {spec.count} × {spec.instance_type} {spec.market.value} in {where}…")
        self.query_one("#launch-result", Static).update("Waiting for the cloud's answer…")
        self.query_one("#attempts-box").focus()
        self.wizard.refresh_bindings()
        self.launch(spec)

    @work(thread=True, exclusive=True, exit_on_error=False, group="wizard-launch", description="launch")
    def launch(self, spec: LaunchSpec) -> None:
        app = self.app

        def on_attempt(attempt: LaunchAttempt) -> None:
            app.call_from_thread(self._attempted, attempt)

        try:
            result: LaunchResult | None = self.wizard.cloud.launch(spec, on_attempt)
            error = ""
        except Exception as exc:  # noqa: BLE001
            result, error = None, failure(exc)
        app.call_from_thread(self._finished, result, error)

    @property
    def failed(self) -> bool:
        """The launch has ended and launched nothing (the wizard can go back to the review)."""
        return self.started and not self.running and not (self.result is not None and self.result.ok)

    def reset(self) -> None:
        """Forget the last launch, for another try of the (changed or not) request."""
        self.started = self.running = False
        self.attempts, self.result, self.error = [], None, ""
        self.query_one("#attempts", Static).update("")
        self.query_one("#launch-result", Static).update("")

    def _attempted(self, attempt: LaunchAttempt) -> None:
        self.attempts.append(attempt)
        if self.is_attached:
            self._show_attempts()

    def _show_attempts(self) -> None:
        palette = self.wizard.palette
        out = Text()
        for index, attempt in enumerate(self.attempts):
            if index:
                out.append("\n")
            out.append("✓ " if attempt.ok else "✗ ", palette.ok if attempt.ok else palette.bad)
            out.append(f"{attempt.availability_zone or '-':<11} {attempt.instance_type:<14} {attempt.market.value:<9}  ")
            if attempt.ok:
                out.append(f"launched {_ids(attempt.instance_ids)}" if attempt.instance_ids else attempt.message)
            else:
                out.append("\n    ")
                out.append(attempt.message, palette.dim)
        self.query_one("#attempts", Static).update(out)
        self.query_one("#attempts-box", VerticalScroll).scroll_end(animate=False)

    def _finished(self, result: LaunchResult | None, error: str) -> None:
        self.running = False
        self.result, self.error = result, error
        if not self.is_attached:
            return
        palette = self.wizard.palette
        line = Text()
        if result is not None and result.ok:
            final = result.spec or self.wizard.spec
            line.append("✓ Launched ", palette.ok)
            line.append(_ids(tuple(i.instance_id for i in result.instances)), palette.strong)
            if final is not None:
                line.append(f" ({final.instance_type}, {final.market.value}) in {final.availability_zone or final.region}")
            line.append(". They show in the Instances pane on the next poll. enter or esc closes.")
            self.wizard.console_app.core.refresh()
        else:
            line.append("✗ Launch failed: ", palette.bad)
            line.append((error or "nothing was launched").rstrip(". "))
            line.append(". esc goes back to the review with everything kept; enter closes.")
        self.query_one("#launch-result", Static).update(line)
        self.wizard.refresh_bindings()


def _ids(ids: tuple[str, ...], shown: int = 3) -> str:
    """``i-1, i-2, i-3 and 37 more``: enough to recognise them, short enough for one line."""
    if len(ids) <= shown:
        return ", ".join(ids)
    return f"{', '.join(ids[:shown])} and {len(ids) - shown} more"
