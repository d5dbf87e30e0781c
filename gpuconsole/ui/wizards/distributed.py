"""The submit wizard for distributed training: an MPIJob or a PyTorchJob (the Kind at the top of
the submit wizard opens it).

The Job step has the image, the script, the workers and GPUs per worker (an MPIJob's
``slotsPerWorker``, a PyTorchJob's ``nprocPerNode``), and under them the line each pod runs (an
MPIJob's launcher: the guide's ``mpirun``); the Network step the NCCL presets (the socket
interface, InfiniBand off, the debug level) and any other variable; the Review the exact YAML,
created only after the cluster's dry run (``dryRun=All``) passed for that request. Everything
else (steps, keys typed ahead, the dry run, the draft) is the Job wizard's
(:class:`~gpuconsole.ui.wizards.submit.SubmitWizard`); the request is a
:class:`~gpuconsole.core.ops.training_manifest.TrainingRequest`.
"""

from __future__ import annotations

import shlex
from typing import Any

from textual.containers import VerticalScroll
from textual.widget import Widget
from textual.widgets import Select, Static

from gpuconsole.core.ops.job_ops import JobOps
from gpuconsole.core.ops.manifests import DEFAULT_IMAGE, NCCL_DEBUG_LEVELS
from gpuconsole.core.ops.training_manifest import (
    DEFAULT_SCRIPTS,
    TRAINING_KINDS,
    TrainingRequest,
    from_form,
    mpirun,
    script_words,
    validate,
)
from gpuconsole.ui.wizards.fields import Field
from gpuconsole.ui.wizards.kind_choice import FORMS
from gpuconsole.ui.wizards.submit import ENVIRONMENT, REVIEW, SubmitWizard, _input

NETWORK_INTRO = ("How the workers talk (the NCCL presets); empty fields are left out. An MPIJob's launcher "
                 "exports each variable with mpirun -x, and the interface also goes to OpenMPI's own "
                 "traffic (-mca btl_tcp_if_include).")
IB_CHOICES = [("on: NCCL chooses (InfiniBand where there is one)", ""), ("off: sockets only (NCCL_IB_DISABLE=1)", "1")]
DEBUG_CHOICES = [("unset (NCCL's default: WARN)", ""), *((level, level) for level in NCCL_DEBUG_LEVELS)]


def _select(choices: list[tuple[str, str]], widget_id: str) -> Select[str]:
    return Select(choices, value=choices[0][1], allow_blank=False, compact=True, id=widget_id)


def pod_line(req: TrainingRequest) -> str:
    """What each pod runs, in one line: an MPIJob's launcher's mpirun, a PyTorchJob's script."""
    try:
        if req.kind == "MPIJob":
            return "Launcher runs: " + shlex.join(mpirun(req))
        return f"Master and workers run: {shlex.join(script_words(req.script))} · nprocPerNode {req.gpus}"
    except ValueError:
        return ""


class DistributedWizard(SubmitWizard):
    """Submit an MPIJob or a PyTorchJob. Returns the submit's result, or None if cancelled.

    Its keys are the Job wizard's (``ctrl+n`` next / submit once the dry run passed, ``esc``
    back, ``tab`` next field, ``ctrl+r`` dry run again).
    """

    HEADING = " New distributed training job  "
    STEPS = ("Job", "Network", "Review")
    DRAFT = "distributed-wizard"

    def __init__(self, jobs: JobOps, namespace: str = "default", owner: str = "", *, kind: str = "MPIJob") -> None:
        super().__init__(jobs, namespace, owner)
        self.training_kind = kind

    # ------------------------------------------------------------------ the form
    def _job_fields(self) -> list[Widget]:
        mpi = self.training_kind == "MPIJob"
        return [
            Field("Image", _input(DEFAULT_IMAGE, widget_id="job-image"), "image"),
            Field("Script", _input(DEFAULT_SCRIPTS[self.training_kind], "what each process runs", "dist-script"),
                  "script"),
            self._pair(Field("Workers", _input("2", "worker pods" if mpi else "beside the master", "dist-workers"),
                             "workers"),
                       Field("GPUs/worker" if mpi else "nprocPerNode",
                             _input("1", "slotsPerWorker" if mpi else "GPUs per pod", "dist-gpus"), "gpus")),
            Static("", id="next-runs", markup=False),  # what each pod runs (see _show_next_runs)
            Field("Owner", _input(self.owner, widget_id="job-owner"), "owner"),
        ]

    def _later_steps(self) -> list[Widget]:  # type: ignore[override]
        network = VerticalScroll(
            Static(NETWORK_INTRO, classes="context", markup=False),
            Field("NCCL_SOCKET_IFNAME", _input(placeholder="e.g. eth0 (empty: NCCL chooses)",
                                               widget_id="env-NCCL_SOCKET_IFNAME"), "env:NCCL_SOCKET_IFNAME"),
            Field("InfiniBand", _select(IB_CHOICES, "env-NCCL_IB_DISABLE"), "env:NCCL_IB_DISABLE"),
            Field("NCCL_DEBUG", _select(DEBUG_CHOICES, "env-NCCL_DEBUG"), "env:NCCL_DEBUG"),
            Field("Other", _input(placeholder="KEY=VALUE KEY2='with spaces'", widget_id="job-env"), "env"),
            id=f"{self.STEP_ID}{ENVIRONMENT}", classes="step")
        network.display = False
        return [network, SubmitWizard._later_steps()[-1]]  # the Job wizard's review

    def parse_form(self) -> tuple[TrainingRequest, dict[str, str]]:
        return from_form({**self.values(), "kind": self.training_kind})

    def request_problems(self, req: Any) -> dict[str, str]:
        return validate(req)

    def _show_next_runs(self, schedule: str, invalid: bool) -> None:
        """Under the workers: the line each pod runs (no schedule here)."""
        req = self.request
        words = pod_line(req) if isinstance(req, TrainingRequest) else ""
        if words != self.next_runs_text:
            self.next_runs_text = words
            self.query_one("#next-runs", Static).update(words)

    def _enter_review(self) -> None:
        super()._enter_review()
        req = self.request
        if self.step == REVIEW and isinstance(req, TrainingRequest):
            pods = f"{req.workers} workers" if req.kind == "MPIJob" else f"master + {req.workers} workers"
            self.query_one("#review-context", Static).update(
                f"{req.kind} {req.namespace}/{req.name} · {pods} × {req.gpus} GPUs = {req.total_gpus} GPUs")


FORMS.update({"Job": lambda jobs, namespace, owner, _kind: SubmitWizard(jobs, namespace, owner),
              **dict.fromkeys(TRAINING_KINDS, lambda jobs, namespace, owner, kind: DistributedWizard(
                  jobs, namespace, owner, kind=kind))})
