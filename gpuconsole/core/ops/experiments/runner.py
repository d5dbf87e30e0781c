"""The scheduler of an experiment: submits runs in interleaved rounds, follows them, retries once.

Round *k* holds repeat *k* of every arm, submitted together (the arms' order turns by one each
round, so neither drift in the cluster nor a noisy neighbour lands on one arm); round *k + 1*
starts when every run of round *k* has ended. Each run is a Job submitted through
:meth:`~gpuconsole.core.ops.job_ops.JobOps.submit`, so the role, the namespace rules and the
audit of a submission hold for every run.

:meth:`ExperimentRunner.tick` is level-triggered: it reads the jobs as the job source has them
now (the Kubernetes adapter's watch cache), brings each run's record up to date, reads the
metric from the log of a finished run, bills node time at the arm's price, queues the one
retry of a failed or evicted run (a run whose log has no metric is a failed run), and submits
what the round and ``max_cost`` allow. Every call blocks on the cluster: run it in a worker.
"""

from __future__ import annotations

import math

import time
from collections.abc import Callable, Sequence
from dataclasses import replace

from gpuconsole.core.ops.actions import ActionDenied, ActionError
from gpuconsole.core.ops.experiments.analysis import Analysis, analyse
from gpuconsole.core.ops.experiments.pricing import ArmPrices
from gpuconsole.core.ops.experiments.runs import (
    EVICTED,
    FAILED,
    LIVE_STATES,
    PENDING,
    RUNNING,
    STOPPED,
    SUCCEEDED,
    RunRecord,
    billed,
)
from gpuconsole.core.ops.experiments.spec import Arm, ExperimentSpec, run_name
from gpuconsole.core.ops.experiments.store import ExperimentRow, ExperimentStore
from gpuconsole.core.ops.job_ops import JobOps
from gpuconsole.model import Job, JobState

ATTEMPTS = 2  # a run and its one retry
LOG_LINES = 500
NOT_LISTED_GRACE_S = 120.0  # a submitted Job the source has not listed yet is still pending
POD_GRACE_S = 60.0  # a finished Job whose pod is not listed yet: wait this long for it


class ExperimentRunner:
    """Runs one experiment on a job source.

    Args:
        spec: the experiment.
        source: the file's text, kept with the experiment so ``show`` can read it again.
        jobs: the console's job operations (the one action path).
        store: where runs are recorded.
        read_jobs: the jobs the source lists now.
        prices: $/h per arm.
        owner: the login, written on every Job as its ``owner`` label.
    """

    def __init__(self, spec: ExperimentSpec, jobs: JobOps, store: ExperimentStore,
                 read_jobs: Callable[[], Sequence[Job]], *, source: str = "", prices: ArmPrices | None = None,
                 owner: str = "", clock: Callable[[], float] = time.time) -> None:
        self.spec = spec
        self.jobs = jobs
        self.store = store
        self.read_jobs = read_jobs
        self.prices = prices or ArmPrices()
        self.owner = owner
        self.clock = clock
        if store.experiment(spec.name) is None:
            store.put_experiment(ExperimentRow(spec.name, source, "running", clock()))

    # ------------------------------------------------------------------ the loop
    def tick(self) -> bool:
        """One pass; True while runs are live or can still be submitted."""
        row = self.store.experiment(self.spec.name)
        if row is not None and row.state in ("stopping", "stopped"):
            self.stop()
            return False
        runs = self._follow(self.store.runs(self.spec.name))
        if row is not None and row.state == "budget":
            return any(r.state in LIVE_STATES for r in runs)
        self._submit_due(runs)
        runs = self.store.runs(self.spec.name)
        live = any(r.state in LIVE_STATES for r in runs)
        row = self.store.experiment(self.spec.name)
        if row is not None and row.state == "budget":
            return live
        if not live and not self._due(runs):
            state = self.store.experiment(self.spec.name)
            if state is not None and state.state == "running":
                self.store.set_state(self.spec.name, "done")
        return live or bool(self._due(runs))

    def run(self, sleep: Callable[[float], None] = time.sleep, interval: float = 10.0,
            until: Callable[[], bool] | None = None) -> Analysis:
        """Tick until the experiment ends (or ``until`` says so); the analysis of what ran."""
        while self.tick():
            if until is not None and until():
                break
            sleep(interval)
        return self.analysis()

    def analysis(self) -> Analysis:
        return analyse(self.spec, self.store.runs(self.spec.name), self.prices)

    def stop(self) -> list[str]:
        """Delete the live runs' Jobs and mark the experiment stopped; one line per problem."""
        problems: list[str] = []
        now = self.clock()
        for run in self.store.runs(self.spec.name):
            if run.state not in LIVE_STATES:
                continue
            try:
                self.jobs.delete("Job", self.spec.namespace, run.job, "yes")
            except ActionError as exc:
                problems.append(f"{run.job}: {exc}")
            self.store.put_run(replace(run, state=STOPPED, end=now, message="stopped",
                                       cost=billed(run.price_per_hour, run.start, now)))
        self.store.set_state(self.spec.name, "stopped", "; ".join(problems))
        return problems

    # ------------------------------------------------------------------ following
    def _follow(self, runs: list[RunRecord]) -> list[RunRecord]:
        if not any(r.state in LIVE_STATES for r in runs):
            return runs
        listed = {j.name: j for j in self.read_jobs() if j.namespace == self.spec.namespace}
        now = self.clock()
        out = []
        for run in runs:
            if run.state in LIVE_STATES:
                run = self._update(run, listed.get(run.job), now)
                self.store.put_run(run)
            out.append(run)
        return out

    def _update(self, run: RunRecord, job: Job | None, now: float) -> RunRecord:
        if job is None:
            if now - run.submitted > NOT_LISTED_GRACE_S and run.state == RUNNING:
                return replace(run, state=FAILED, end=now, message="the Job is gone")
            return run
        start = job.started if job.started is not None else run.start
        node = job.node or run.node
        if job.state in (JobState.PENDING, JobState.SUSPENDED):
            return replace(run, state=PENDING, node=node)
        if job.state is JobState.RUNNING:
            return replace(run, state=RUNNING, node=node, start=start,
                           cost=billed(run.price_per_hour, start, now))
        end = job.finished if job.finished is not None else now
        cost = billed(run.price_per_hour, start, end)
        if job.state is JobState.FAILED:
            reason = job.pending_reason or "the Job failed"
            state = EVICTED if "evict" in reason.lower() or "interrupt" in reason.lower() else FAILED
            return replace(run, state=state, node=node, start=start, end=end, cost=cost, message=reason)
        if not job.pod and not self.spec.metric.wall_time and now - end < POD_GRACE_S:
            # The Job's and the pods' watches are separate streams: the pod may come a moment later.
            return replace(run, state=RUNNING, node=node, start=start, cost=cost)
        metric, problem = self._metric(job, start, end)
        if metric is None:
            return replace(run, state=FAILED, node=node, start=start, end=end, cost=cost, message=problem)
        return replace(run, state=SUCCEEDED, node=node, start=start, end=end, cost=cost, metric=metric, message="")

    def _metric(self, job: Job, start: float | None, end: float) -> tuple[float | None, str]:
        if self.spec.metric.wall_time:
            return (end - start, "") if start is not None else (None, "no start time")
        if not job.pod:
            return None, "no pod to read the metric from"
        try:
            lines = list(self.jobs.logs(self.spec.namespace, job.pod, tail_lines=LOG_LINES))
        except ActionError as exc:
            return None, f"log not read: {exc}"
        value = self.spec.metric.read(lines)
        return (value, "") if value is not None else (None, f"no {self.spec.metric.unit} in the log")

    # ------------------------------------------------------------------ scheduling
    def _due(self, runs: list[RunRecord]) -> list[tuple[Arm, int, int]]:
        """The (arm, repeat, attempt) to submit now: the open slots of the first unfinished round."""
        by_slot: dict[tuple[str, int], list[RunRecord]] = {}
        named: dict[tuple[str, int], int] = {}  # runs set aside by a re-run keep their Job names
        for run in runs:
            named[(run.arm, abs(run.repeat))] = named.get((run.arm, abs(run.repeat)), 0) + 1
            if run.repeat > 0:
                by_slot.setdefault((run.arm, run.repeat), []).append(run)
        for repeat in range(1, self.spec.repeats + 1):
            due: list[tuple[Arm, int, int]] = []
            unfinished = False
            for arm in _turned(self.spec.arms, repeat):
                slot = by_slot.get((arm.key, repeat), [])
                if any(r.counts for r in slot):
                    continue
                if any(r.state in LIVE_STATES for r in slot):
                    unfinished = True
                    continue
                if sum(1 for r in slot if r.state != STOPPED) < ATTEMPTS:  # a stop costs no try
                    due.append((arm, repeat, named.get((arm.key, repeat), 0) + 1))
            if due or unfinished:
                return due
        return []

    def _submit_due(self, runs: list[RunRecord]) -> None:
        spent = sum(r.cost for r in runs)
        for arm, repeat, attempt in self._due(runs):
            price = self.prices.hourly(arm.instance_type, arm.market)
            estimate = self._estimate(arm, price, runs)
            if self.spec.max_cost is not None and math.isnan(price):  # an unknown price never passes a cap
                self.store.set_state(self.spec.name, "budget",
                                     f"max_cost ${self.spec.max_cost:,.2f}: the price of {arm.title} is unknown")
                return
            if self.spec.max_cost is not None and spent + estimate > self.spec.max_cost:
                self.store.set_state(self.spec.name, "budget",
                                     f"max_cost ${self.spec.max_cost:,.2f} reached: ${spent:,.2f} spent, "
                                     f"the next run would cost about ${estimate:,.2f}")
                return
            spent += estimate
            self._submit(arm, repeat, attempt, price)

    def _estimate(self, arm: Arm, price: float, runs: list[RunRecord]) -> float:
        """What the next run of ``arm`` will likely cost: its last result's node time, else nothing known."""
        done = [r for r in runs if r.arm == arm.key and r.end is not None and r.start is not None]
        if not done:
            return 0.0
        seconds = [s for r in done if (s := r.seconds) is not None]
        return billed(price, 0.0, max(seconds)) if seconds else 0.0

    def _submit(self, arm: Arm, repeat: int, attempt: int, price: float) -> None:
        name = run_name(self.spec.name, arm, repeat, attempt)
        record = RunRecord(self.spec.name, arm.key, repeat, attempt, name, submitted=self.clock(),
                           market=arm.market, price_per_hour=price)
        try:
            self.jobs.submit(self.spec.job_request(arm, repeat, attempt, self.owner))
        except ActionDenied:
            raise
        except ActionError as exc:
            if "already exists" not in str(exc):
                record = replace(record, state=FAILED, end=record.submitted, message=f"not submitted: {exc}")
            # else another console (the pane, a second `experiment run`) submitted it: follow it
        self.store.put_run(record)


def _turned(arms: tuple[Arm, ...], repeat: int) -> tuple[Arm, ...]:
    """The arms in round ``repeat``'s order: turned by one each round."""
    k = (repeat - 1) % len(arms)
    return arms[k:] + arms[:k]


def complete(analysis: Analysis) -> bool:
    """Every arm has a result for every repeat."""
    return all(a.runs >= analysis.spec.repeats for a in analysis.arms)

