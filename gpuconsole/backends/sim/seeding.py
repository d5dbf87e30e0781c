"""The workload a world starts with, built directly rather than by replaying hours of history.

A new world already looks like a cluster that has been busy for weeks: most GPUs held by jobs
part-way through their runs, a handful of jobs waiting (one of them asking for more GPUs than
any node has), a couple suspended, the last hour's finished jobs, and CronJobs whose last run
shows in the list. Building it directly keeps even a thousand-node world quick to create.
"""

from __future__ import annotations

import random

from gpuconsole.backends.sim.catalog import H100_80GB
from gpuconsole.backends.sim.distributed import SimGang, new_gang
from gpuconsole.backends.sim.ids import IdFactory
from gpuconsole.backends.sim.kueue import SimKueue
from gpuconsole.backends.sim.lifecycle import (
    FINISHED_TTL_S,
    Lifecycle,
    cron_next,
    cron_prev,
)
from gpuconsole.backends.sim.state import SimCronJob, SimInstance, SimJob
from gpuconsole.backends.sim.workload import CRONJOBS, NEMO
from gpuconsole.model import JobState

FILL = 0.85  # share of GPU slots held by running jobs at the start


class Seeding(Lifecycle):
    """Populates a freshly built fleet with jobs and CronJobs."""

    def _seed_workload(self, demo: bool) -> None:
        rng = self._rng
        now = self._now
        sched = self._scheduler
        self._seed_cronjobs(now)
        slots = sum(len(n.whole) + len(n.slices) for n in sched.nodes)
        used = 0
        waiting = self._pending_target - 1
        for _ in range(4 * slots + 20):
            if used >= FILL * slots:
                break
            job = self._new_job(now)
            if sched.place(job):
                self._jobs[job.uid] = job
                self._start(job, now, progress=rng.uniform(0.05, 0.9))
                job.created = (job.started or now) - rng.randint(5, 900)
                used += job.gpus
            elif waiting > 0:
                self._seed_pending(job, now)
                waiting -= 1
        for _ in range(20 * max(waiting, 0)):
            if waiting <= 0:
                break
            job = self._new_job(now)
            if not sched.fits(job):
                self._seed_pending(job, now)
                waiting -= 1
        huge = SimJob(self._ids.uuid4(), f"llama-70b-pretrain-{self._ids.suffix()}", "research",
                      now - rng.randint(2 * 3600, 3 * 3600), 16, None, None, 36 * 3600.0, NEMO,
                      "dmitri", self._ids.uuid4())
        huge.give_up_at = huge.created + 48 * 3600.0
        self._seed_pending(huge, huge.created)
        fitting: dict[tuple[str | None, str | None, int], list[SimInstance]] = {}
        for _ in range(round(self._arrival_rate * FINISHED_TTL_S)):
            self._seed_finished(self._new_job(now), now - rng.uniform(30.0, FINISHED_TTL_S - 60.0), fitting)
        for _ in range(2 if demo else max(2, slots // 200)):
            job = self._new_job(now)
            job.state = JobState.SUSPENDED
            job.created = now - rng.randint(3600, 8 * 3600)
            self._add_job(job)
            self._at(now + rng.randint(3600, 6 * 3600), "resume", job, job.run)
        if demo:
            self._gang_rng = random.Random(f"{self.seed}:gangs")
            self._seed_pytorchjob(now)
        # Settle pending reasons against the final allocation.
        for job in sched.schedule(self._pending):
            self._start(job, now)
        if demo:
            self._seed_mpijob(now)
            self._seed_kueue(now)

    def _gang(self, kind: str, name: str, created: float, image: str, owner: str,
              roles: list[tuple[str, int, int, str | None]]) -> SimGang:
        """A distributed job of ``roles`` (name, replicas, GPUs each, GPU product) in research,
        its uids drawn from the gangs' own generator."""
        return new_gang(self, IdFactory(self._gang_rng), kind, name, "research", created, owner,
                        [(*role, image) for role in roles])

    def _seed_mpijob(self, now: float) -> None:
        """A running MPIJob: the guide's mpirun over two 4-GPU workers on the two training nodes,
        in the place of jobs that ran there (its draws come from a generator of its own, so the
        rest of the world is as it was drawn)."""
        gang = self._gang("MPIJob", "nccl-allreduce", now - 5400, NEMO, "priya",
                          [("Launcher", 1, 0, None), ("Worker", 2, 4, None)])
        sched = self._scheduler
        training = [n for n in sched.nodes if len(n.whole) >= 7][:2]  # the A100 and H100 training nodes
        main, self._rng = self._rng, self._gang_rng
        try:
            for job, node in zip(gang.members(), training, strict=False):
                held = sorted((j for j in self._jobs.values() if j.node is node and j.devices and j.gang is None),
                              key=lambda j: j.uid)
                while node.free < job.gpus and held:
                    victim = held.pop()
                    sched.release(victim)
                    del self._jobs[victim.uid]
                sched.bind(job, node)
                self._start(job, now)
                job.started, job.fails, job.stalled = float(now - 5340), False, False
        finally:
            self._rng = main

    def _seed_pytorchjob(self, now: float) -> None:
        """A PyTorchJob whose master and workers wait for 8 H100s each (one node has eight)."""
        self._gang("PyTorchJob", "llama-8b-ddp", now - 1800, NEMO, "dmitri",
                   [("Master", 1, 8, H100_80GB.label), ("Worker", 2, 8, H100_80GB.label)])

    def _seed_kueue(self, now: float) -> None:
        """Kueue in front of the research and nlp teams (:mod:`.kueue`): what runs, and the
        distributed runs, were admitted when they came; the Jobs still waiting are held, and
        Kueue admits them oldest first while the quota lasts (the rest wait on quota)."""
        kueue = self._kueue = SimKueue()
        for cj in self._cronjobs:
            cj.queue = kueue.local_queue(cj.namespace)
        for gang in self._gangs:
            queue = kueue.local_queue(gang.namespace)
            if queue is not None:
                kueue.admit_now(gang, queue, sum(m.gpus for m in gang.members()))
        held = []
        for job in sorted(self._jobs.values(), key=lambda j: (j.created, j.name)):
            job.queue = kueue.local_queue(job.namespace) if job.gang is None else None
            if job.queue is None:
                continue
            if job.state is JobState.RUNNING:
                kueue.admit_now(job, job.queue, max(job.gpus, 1) if job.mig_profile else job.gpus)
            elif job.state is JobState.PENDING and kueue.hold(job):
                held.append(job)
            job.view = None
        admitted, _gave_up = kueue.admit(now)
        for job in admitted:  # still in line for the scheduler, where it was
            job.state = JobState.PENDING
        for job in held:
            if job.state is JobState.SUSPENDED:
                del self._pending[job.uid]

    def _seed_pending(self, job: SimJob, created: float) -> None:
        job.created = min(created, self._now - self._rng.randint(60, 2400))
        self._add_job(job)

    def _seed_finished(self, job: SimJob, finished: float,
                       known: dict[tuple[str | None, str | None, int], list[SimInstance]] | None = None) -> None:
        """A job that ended ``finished``; it ran on some node that could have taken it (the
        nodes that could, by the job's shape, kept in ``known``: a thousand-node world seeds
        a few thousand finished jobs)."""
        rng = self._rng
        shape = (job.mig_profile, job.product, job.gpus)
        fitting = known.get(shape) if known is not None else None
        if fitting is None:
            nodes = self._scheduler.nodes
            if job.mig_profile is not None:
                fitting = [n for n in nodes if n.slices]
            else:
                fitting = [n for n in nodes if (job.product is None or n.model.label == job.product)
                           and len(n.whole) >= job.gpus]
            if known is not None:
                known[shape] = fitting
        fails = rng.random() < 0.1
        length = job.duration * (rng.uniform(0.05, 0.8) if fails else 1.0)
        job.node = rng.choice(fitting) if fitting else None
        job.state = JobState.FAILED if fails else JobState.SUCCEEDED
        job.finished = float(int(finished))
        job.started = float(int(finished - length))
        job.created = job.started - rng.randint(5, 600)
        job.run = 1
        self._jobs[job.uid] = job

    def _seed_cronjobs(self, now: float) -> None:
        rng = self._rng
        for spec in CRONJOBS:
            created = float(int(now - rng.uniform(20.0, 120.0) * 86400.0))
            cj = SimCronJob(self._ids.uuid4(), spec.name, spec.namespace, spec.schedule, created,
                            spec.gpus, spec.mig_profile, spec.product, spec.minutes, spec.image,
                            spec.owner, suspended=spec.suspended)
            self._cronjobs.append(cj)
            if spec.suspended:
                cj.last = cron_prev(spec.schedule, now - rng.uniform(2.0, 10.0) * 86400.0)
                continue
            cj.last = cron_prev(spec.schedule, now)
            cj.next = cron_next(spec.schedule, now - 1.0)
            job = self._cron_job(cj, cj.last)
            if cj.last + job.duration <= now:
                if now - (cj.last + job.duration) < FINISHED_TTL_S:
                    self._seed_finished(job, cj.last + job.duration)
                    job.started = cj.last + rng.randint(1, 20)
                    job.created = cj.last
            elif self._scheduler.place(job):
                self._jobs[job.uid] = job
                self._start(job, now, progress=min(0.95, (now - cj.last) / job.duration))
            else:
                self._add_job(job)

