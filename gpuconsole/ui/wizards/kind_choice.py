"""The submit wizard's first line: which kind of job it makes. A batch Job (or CronJob) is the
Job form (:mod:`~gpuconsole.ui.wizards.submit`); an MPIJob or a PyTorchJob is the distributed
training form (:mod:`~gpuconsole.ui.wizards.distributed`). Choosing another kind replaces the
wizard on screen with that kind's, keeping the name and namespace typed so far.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Label, Select

KINDS = (
    ("Job: one pod, or an Indexed Job of workers", "Job"),
    ("MPIJob: mpirun over workers (MPI Operator)", "MPIJob"),
    ("PyTorchJob: a master and workers (Training Operator)", "PyTorchJob"),
)
# Each kind's form: (jobs, namespace, owner, kind) → the wizard screen. Filled by the module of
# the distributed form (the package imports it), which knows both forms.
FORMS: dict[str, Callable[[Any, str, str, str], Any]] = {}


class KindChoice(Vertical):
    """``Kind  [Job ▾]`` at the top of a submit wizard; not a field of the request itself.

    Args:
        kind: the kind of the wizard it is on.
    """

    def __init__(self, kind: str = "Job") -> None:
        super().__init__(id="kind-choice", classes="field")
        self.kind = kind

    def compose(self) -> ComposeResult:
        with Horizontal(classes="field-line"):
            yield Label("Kind", classes="field-label")
            # no id: a form's draft never sets it (choosing a kind opens another form)
            yield Select(KINDS, value=self.kind, allow_blank=False, compact=True)

    def on_mount(self) -> None:
        carried: dict[str, str] = getattr(self.screen, "carried", {})
        if carried:  # fill them once the whole first step is up
            self.screen.call_after_refresh(_fill, self.screen, carried)

    @on(Select.Changed)
    def _chosen(self, event: Select.Changed) -> None:
        event.stop()  # a choice of form, not a field of the request
        if event.value != self.kind and isinstance(event.value, str):
            switch_kind(self.screen, event.value)


def _fill(screen: Any, carried: dict[str, str]) -> None:
    from textual.widgets import Input

    for widget_id, value in carried.items():
        for field in screen.query(f"#{widget_id}").results(Input):
            if value and not field.value:  # typed into already: that stays
                field.value = value


def switch_kind(wizard: Any, kind: str) -> None:
    """Close ``wizard`` (a submit wizard) and open the form of ``kind`` (from :data:`FORMS`) in its place."""
    from textual.widgets import Input

    make = FORMS.get(kind)
    if make is None:
        wizard.say(f"No form for a {kind} in this console.", error=True)
        return
    typed = {w.id: w.value.strip() for w in wizard.query("#job-name, #job-namespace").results(Input)}
    app = wizard.app
    form = make(wizard.jobs, typed.get("job-namespace") or wizard.namespace, wizard.owner, kind)
    form.carried = {"job-name": typed.get("job-name", "")}  # the namespace is the form's own
    wizard.dismiss(None)
    app.push_screen(form, lambda result: submitted(app, result))


def submitted(app: Any, result: Any) -> None:
    """What a submit wizard's result does: say it, and read the cluster again."""
    if result is not None:
        app.notify(result.message)
        app.core.refresh()
