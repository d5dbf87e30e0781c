"""Job history for a world that lists many jobs (``--demo-jobs N``).

A busy cluster with a long finished-job TTL, or a batch queue in front of it, lists tens of
thousands of jobs beside the few hundred that are running. The world builds that history once,
from a generator of its own (the live world is the same with or without it): jobs that finished
over the past weeks on the world's nodes, and a share still queued behind their team's quota.
They never change, so a step of the world costs the same with 100,000 of them as with none,
and every reading shares the same frozen :class:`~gpuconsole.model.Job` objects.

Only those frozen jobs are kept (and the run length of each job still queued): the world's own
mutable record of a historical job is made again from its frozen one when it is needed (a
describe, a log, a suspend that brings it back to life, a delete). Keeping both for 100,000
jobs cost about 36 MB.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator

from gpuconsole.backends.sim.ids import IdFactory
from gpuconsole.backends.sim.lifecycle import Lifecycle
from gpuconsole.backends.sim.state import SimInstance, SimJob, pod_suffix
from gpuconsole.backends.sim.workload import TEAMS, TEMPLATES
from gpuconsole.model import Job, JobState

HISTORY_DAYS = 30  # finished jobs reach this far back
QUEUED_SHARE = 0.05  # of the history, jobs still waiting for quota
FAILED_SHARE = 0.1  # of the finished ones, jobs that failed
QUEUED_REASON = "queued: the namespace's nvidia.com/gpu quota is in use"
# A historical job's name is its template's base and a suffix without dashes.
TEMPLATE_OF = {(t.namespace, t.base): t for t in TEMPLATES}


class JobArchive(Lifecycle):
    """The static part of :class:`~gpuconsole.backends.sim.world.SimWorld`'s job list."""

    seed: int
    _archive: dict[str, Job]  # uid -> the frozen job every reading lists
    _archive_queued: dict[str, float]  # uid -> run length (s) of a job still queued, for when it runs
    _archive_view: tuple[Job, ...]

    def _seed_archive(self, total: int) -> None:
        """Add historical jobs until the world lists ``total`` jobs (none if it already does)."""
        listed = sum(1 for j in self._jobs.values() if j.gang is None) + len(self._gangs)
        count = max(0, total - listed)
        rng = random.Random(f"{self.seed}:archive")
        ids = IdFactory(rng)
        now = self._now
        nodes = self._scheduler.nodes
        by_product: dict[str | None, list[SimInstance]] = {None: list(nodes)}
        for node in nodes:
            by_product.setdefault(node.model.label, []).append(node)
        mig_nodes = [n for n in nodes if n.slices]
        # The names taken, by namespace: the names are the jobs' own strings, where a set of
        # (namespace, name) pairs made a tuple a job (about 10 MB at 100,000, freed after).
        taken: dict[str, set[str]] = {}
        for j in self._jobs.values():
            taken.setdefault(j.namespace, set()).add(j.name)
        # Nodes that could have run a job of (product, GPUs): the same few lists for every job
        # (at 1,024 nodes, scanning them per job was more than half of the 3 s of building 100,000).
        fitting_by: dict[tuple[str | None, int], list[SimInstance]] = {}
        archive: dict[str, Job] = {}
        queued: dict[str, float] = {}
        choices, choice, uniform, draw = rng.choices, rng.choice, rng.uniform, rng.random
        products, cum_weights = self._products, self._cum_weights
        for _ in range(count):  # each job's draws in a fixed order: a seed fixes the history
            t = choices(TEMPLATES, cum_weights=cum_weights)[0]
            names = taken.get(t.namespace)
            if names is None:
                names = taken[t.namespace] = set()
            name = f"{t.base}-{ids.suffix()}"
            while name in names:
                name = f"{t.base}-{ids.suffix()}"
            names.add(name)
            gpus = 1 if t.mig_profile else choice(t.gpus)
            product = t.product if t.product in products else None
            minutes = math.exp(uniform(math.log(t.minutes[0]), math.log(t.minutes[1])))
            uid = ids.uuid4()
            owner = choice(TEAMS[t.namespace])
            pod_uid = ids.uuid4()
            common = {"uid": uid, "name": name, "namespace": t.namespace, "gpus": gpus, "mig_profile": t.mig_profile,
                      "image": t.image, "owner": owner, "pod_uid": pod_uid, "pod": f"{name}-{pod_suffix(pod_uid, 0)}"}
            if draw() < QUEUED_SHARE:
                created = float(math.floor(now - uniform(600.0, 2 * 86400.0)))
                queued[uid] = round(minutes * 60.0)
                archive[uid] = Job(state=JobState.PENDING, created=created, pending_reason=QUEUED_REASON, **common)
                continue
            if t.mig_profile:
                fitting = mig_nodes
            else:
                fitting = fitting_by.get((product, gpus))
                if fitting is None:
                    fitting = [n for n in by_product.get(product, ()) if len(n.whole) >= gpus]
                    fitting_by[product, gpus] = fitting
            fails = draw() < FAILED_SHARE
            length = max(60.0, round(minutes * 60.0) * (uniform(0.05, 0.8) if fails else 1.0))
            finished = float(math.floor(now - uniform(3600.0, HISTORY_DAYS * 86400.0)))
            started = float(math.floor(finished - length))
            created = started - rng.randint(5, 1800)
            node = choice(fitting) if fitting else None
            archive[uid] = Job(state=JobState.FAILED if fails else JobState.SUCCEEDED, created=created,
                               node=node.node_name if node is not None else None, started=started,
                               finished=finished, **common)
        self._archive, self._archive_queued = archive, queued
        self._archive_view = tuple(archive.values())

    def _archived(self, namespace: str, name: str) -> SimJob | None:
        for view in self._archive.values():
            if view.name == name and view.namespace == namespace:
                return self._unarchived(view)
        return None

    def _archived_pods(self, namespace: str, pod: str) -> Iterator[SimJob]:
        """The historical jobs of ``namespace`` whose pods' names could be ``pod``."""
        for view in list(self._archive.values()):
            if view.namespace == namespace and pod.startswith(view.name):
                yield self._unarchived(view)

    def _unarchived(self, view: Job) -> SimJob:
        """The world's record of a historical job, made again from its frozen ``view`` as
        :meth:`_seed_archive` made it (a finished job's run length is what it ran: it never
        runs again)."""
        t = TEMPLATE_OF[(view.namespace, view.name.rsplit("-", 1)[0])]
        product = t.product if t.product in self._products else None
        duration = self._archive_queued.get(view.uid)
        if duration is None:
            duration = (view.finished or 0.0) - (view.started or 0.0)
        job = SimJob(view.uid, view.name, view.namespace, 0.0, view.gpus, view.mig_profile, product,
                     duration, view.image, view.owner or "", view.pod_uid or "")
        job.created = view.created  # after: its give-up time is the one its first making gave it
        job.state = view.state
        job.pending_reason = view.pending_reason
        if view.finished is not None:
            job.started, job.finished, job.run = view.started, view.finished, 1
            job.node = next((n for n in self._scheduler.nodes if n.node_name == view.node), None)
        job.view = view
        return job

    def _revive(self, job: SimJob) -> None:
        """Move a historical job into the live world before a change (a suspend) steps it."""
        if self._forget_archived(job.uid) is not None:
            self._jobs[job.uid] = job

    def _drop_archived(self, uid: str) -> SimJob | None:
        """Remove a historical job (deleted by the user); its record as it was, or None."""
        view = self._archive.get(uid)
        if view is None:
            return None
        job = self._unarchived(view)
        self._forget_archived(uid)
        return job

    def _forget_archived(self, uid: str) -> Job | None:
        """Take a job out of the history; the shared view is rebuilt once."""
        view = self._archive.pop(uid, None)
        if view is not None:
            self._archive_queued.pop(uid, None)
            self._archive_view = tuple(self._archive.values())
        return view
