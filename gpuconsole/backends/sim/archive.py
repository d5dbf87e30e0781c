"""Job history for a world that lists many jobs (``--demo-jobs N``).

A busy cluster with a long finished-job TTL, or a batch queue in front of it, lists tens of
thousands of jobs beside the few hundred that are running. The world builds that history once,
from a generator of its own (the live world is the same with or without it): jobs that finished
over the past weeks on the world's nodes, and a share still queued behind their team's quota.
They never change, so a step of the world costs the same with 100,000 of them as with none,
and every reading shares the same frozen :class:`~gpuconsole.model.Job` objects.
"""

from __future__ import annotations

import math
import random

from gpuconsole.backends.sim.ids import IdFactory
from gpuconsole.backends.sim.lifecycle import Lifecycle
from gpuconsole.backends.sim.state import SimInstance, SimJob
from gpuconsole.backends.sim.workload import TEAMS, TEMPLATES
from gpuconsole.model import Job, JobState

HISTORY_DAYS = 30  # finished jobs reach this far back
QUEUED_SHARE = 0.05  # of the history, jobs still waiting for quota
FAILED_SHARE = 0.1  # of the finished ones, jobs that failed
QUEUED_REASON = "queued: the namespace's nvidia.com/gpu quota is in use"


class JobArchive(Lifecycle):
    """The static part of :class:`~gpuconsole.backends.sim.world.SimWorld`'s job list."""

    seed: int
    _archive: dict[str, SimJob]
    _archive_view: tuple[Job, ...]

    def _seed_archive(self, total: int) -> None:
        """Add historical jobs until the world lists ``total`` jobs (none if it already does)."""
        count = max(0, total - len(self._jobs))
        rng = random.Random(f"{self.seed}:archive")
        ids = IdFactory(rng)
        now = self._now
        nodes = self._scheduler.nodes
        by_product: dict[str | None, list[SimInstance]] = {None: list(nodes)}
        for node in nodes:
            by_product.setdefault(node.model.label, []).append(node)
        mig_nodes = [n for n in nodes if n.slices]
        taken = {(j.namespace, j.name) for j in self._jobs.values()}
        archive: dict[str, SimJob] = {}
        for _ in range(count):
            t = rng.choices(TEMPLATES, cum_weights=self._cum_weights)[0]
            name = f"{t.base}-{ids.suffix()}"
            while (t.namespace, name) in taken:
                name = f"{t.base}-{ids.suffix()}"
            taken.add((t.namespace, name))
            gpus = 1 if t.mig_profile else rng.choice(t.gpus)
            product = t.product if t.product in self._products else None
            minutes = math.exp(rng.uniform(math.log(t.minutes[0]), math.log(t.minutes[1])))
            job = SimJob(ids.uuid4(), name, t.namespace, 0.0, gpus, t.mig_profile, product,
                         round(minutes * 60.0), t.image, rng.choice(TEAMS[t.namespace]), ids.uuid4())
            if rng.random() < QUEUED_SHARE:
                job.created = float(math.floor(now - rng.uniform(600.0, 2 * 86400.0)))
                job.pending_reason = QUEUED_REASON
            else:
                fitting = mig_nodes if t.mig_profile else [n for n in by_product.get(product, ()) if len(n.whole) >= gpus]
                fails = rng.random() < FAILED_SHARE
                length = max(60.0, job.duration * (rng.uniform(0.05, 0.8) if fails else 1.0))
                job.finished = float(math.floor(now - rng.uniform(3600.0, HISTORY_DAYS * 86400.0)))
                job.started = float(math.floor(job.finished - length))
                job.created = job.started - rng.randint(5, 1800)
                job.state = JobState.FAILED if fails else JobState.SUCCEEDED
                job.node = rng.choice(fitting) if fitting else None
                job.run = 1
            archive[job.uid] = job
        self._archive = archive
        self._archive_view = tuple([j.to_model() for j in archive.values()])

    def _archived(self, namespace: str, name: str) -> SimJob | None:
        for job in self._archive.values():
            if job.name == name and job.namespace == namespace:
                return job
        return None

    def _revive(self, job: SimJob) -> None:
        """Move a historical job into the live world before a change (a suspend) steps it."""
        if self._drop_archived(job.uid) is not None:
            self._jobs[job.uid] = job

    def _drop_archived(self, uid: str) -> SimJob | None:
        """Remove a historical job (deleted by the user); the shared view is rebuilt once."""
        job = self._archive.pop(uid, None)
        if job is not None:
            self._archive_view = tuple([j.to_model() for j in self._archive.values()])
        return job
