"""The experiments of one console: start, follow, stop and re-run, the same for the CLI and the pane.

An :class:`ExperimentBook` holds the store, the job path and the way jobs are read, and makes an
:class:`~.runner.ExperimentRunner` for any experiment it has recorded (from the file's text it
kept), so a command started in one process can be shown or stopped from another.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from gpuconsole.core.ops.actions import ActionError
from gpuconsole.core.ops.experiments.analysis import Analysis
from gpuconsole.core.ops.experiments.pricing import ArmPrices
from gpuconsole.core.ops.experiments.runs import LIVE_STATES, PENDING, RUNNING, SUCCEEDED, RunRecord
from gpuconsole.core.ops.experiments.runner import ExperimentRunner
from gpuconsole.core.ops.experiments.spec import ExperimentSpec, SpecError, parse_text
from gpuconsole.core.ops.experiments.store import ExperimentRow, ExperimentStore
from gpuconsole.core.ops.job_ops import NOT_A_CLUSTER, JobOps
from gpuconsole.model import Job


@dataclass(frozen=True, slots=True)
class Progress:
    """An experiment at a glance: runs done, running and pending, and the money spent."""

    name: str
    state: str
    planned: int
    done: int
    running: int
    pending: int
    lost: int
    spent: float
    max_cost: float | None
    message: str = ""

    @property
    def fraction(self) -> float:
        return min(self.done / self.planned, 1.0) if self.planned else 0.0


class ExperimentBook:
    """Every experiment of a console.

    Args:
        store: where experiments and runs are kept.
        jobs: the console's job path (its action log carries the guard and the audit).
        read_jobs: the jobs the job source lists now.
        owner: the login, the ``owner`` of every Job.
        clock, sleep, interval: time as the runners see it (a simulated bench brings its own).
    """

    def __init__(self, store: ExperimentStore, jobs: JobOps, read_jobs: Callable[[], Sequence[Job]], *,
                 owner: str = "", prices: ArmPrices | None = None, clock: Callable[[], float] = time.time,
                 sleep: Callable[[float], None] = time.sleep, interval: float = 10.0) -> None:
        self.store = store
        self.jobs = jobs
        self.read_jobs = read_jobs
        self.owner = owner
        self.prices = prices or ArmPrices()
        self.clock = clock
        self.sleep = sleep
        self.interval = interval

    def start(self, spec: ExperimentSpec, source: str) -> ExperimentRunner:
        """A runner for a new experiment (or one stopped, to go on); refused while it runs."""
        if not self.jobs.available:
            raise ActionError(f"cannot run {spec.name}: {NOT_A_CLUSTER}")
        row = self.store.experiment(spec.name)
        if row is not None:
            if row.source.strip() != source.strip():
                raise ActionError(f"experiment {spec.name} exists with another file: give this one another name")
            if row.state in ("running", "stopping") and self.store.runs(spec.name):
                raise ActionError(f"experiment {spec.name} is running already: stop it first")
            if row.state in ("stopped", "budget"):
                self.store.set_state(spec.name, "running")
        return self._runner(spec, source)

    def _runner(self, spec: ExperimentSpec, source: str) -> ExperimentRunner:
        return ExperimentRunner(spec, self.jobs, self.store, self.read_jobs, source=source, prices=self.prices,
                                owner=self.owner, clock=self.clock)

    def runner(self, name: str) -> ExperimentRunner:
        """The runner of a recorded experiment. Raises ActionError when there is none."""
        row = self.store.experiment(name)
        if row is None:
            raise ActionError(f"no experiment named {name}")
        try:
            spec = parse_text(row.source)
        except SpecError as exc:
            raise ActionError(f"experiment {name} cannot be read again: {exc}") from None
        return self._runner(spec, row.source)

    def rows(self) -> list[ExperimentRow]:
        return self.store.experiments()

    def analysis(self, name: str) -> Analysis:
        return self.runner(name).analysis()

    def runs(self, name: str) -> list[RunRecord]:
        return self.store.runs(name)

    def progress(self, name: str) -> Progress:
        runner = self.runner(name)
        row = self.store.experiment(name)
        runs = [r for r in self.store.runs(name) if r.repeat > 0]
        spec = runner.spec
        return Progress(
            name=name, state=row.state if row else "", planned=spec.repeats * len(spec.arms),
            done=sum(1 for r in runs if r.counts), running=sum(1 for r in runs if r.state == RUNNING),
            pending=sum(1 for r in runs if r.state == PENDING),
            lost=sum(1 for r in runs if r.state not in LIVE_STATES and not r.counts),
            spent=sum(r.cost for r in self.store.runs(name)), max_cost=spec.max_cost,
            message=row.message if row else "")

    def stop(self, name: str) -> list[str]:
        """Stop scheduling and delete the live runs' Jobs; one line per Job that would not go."""
        return self.runner(name).stop()

    def rerun_arm(self, name: str, arm_key: str) -> ExperimentRunner:
        """Run one arm's repeats again: its runs so far are kept (and paid for) but set aside."""
        runner = self.runner(name)
        if not any(a.key == arm_key for a in runner.spec.arms):
            raise ActionError(f"experiment {name} has no arm {arm_key}")
        for run in self.store.runs(name):
            if run.arm == arm_key and run.repeat > 0:
                if run.state in LIVE_STATES:
                    raise ActionError(f"arm {arm_key} is running: wait for it or stop the experiment")
                self.store.put_run(replace(run, repeat=-run.repeat))
        self.store.set_state(name, "running")
        return runner

    def results(self, name: str) -> int:
        return sum(1 for r in self.store.runs(name) if r.state == SUCCEEDED)
