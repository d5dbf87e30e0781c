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
from zlib import crc32
from bisect import bisect_right
from collections.abc import Iterator

from gpuconsole.backends.sim.ids import SUFFIX_ALPHABET, UUID4_KEEP, UUID4_SET
from gpuconsole.backends.sim.lifecycle import Lifecycle
from gpuconsole.backends.sim.state import POD_PAIRS, SimInstance, SimJob
from gpuconsole.backends.sim.workload import TEAMS, TEMPLATES, JobTemplate
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
        # The names taken, by namespace: the names are the jobs' own strings, where a set of
        # (namespace, name) pairs made a tuple a job (about 10 MB at 100,000, freed after).
        taken: dict[str, set[str]] = {}
        for j in self._jobs.values():
            taken.setdefault(j.namespace, set()).add(j.name)
        shapes = [_Shape(t, self._products, self._scheduler.nodes, taken) for t in TEMPLATES]
        self._archive, self._archive_queued = _draw_history(rng, count, self._now, shapes, self._cum_weights)
        self._archive_view = tuple(self._archive.values())

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


class _Shape:
    """What a historical job of one template draws from: its names taken, its GPU counts and
    owners, its run lengths, and the nodes that could have run it (by GPU count; at 1,024
    nodes, scanning them per job was more than half of the 3 s of building 100,000)."""

    __slots__ = ("fitting", "gpus", "image", "log_span", "log_min", "mig_profile", "names", "namespace",
                 "owners", "prefix")

    def __init__(self, t: JobTemplate, products: tuple[str, ...], nodes: list[SimInstance],
                 taken: dict[str, set[str]]) -> None:
        self.namespace, self.prefix, self.image, self.mig_profile = t.namespace, f"{t.base}-", t.image, t.mig_profile
        self.names = taken.setdefault(t.namespace, set())
        self.owners = TEAMS[t.namespace]
        self.gpus = () if t.mig_profile else t.gpus
        low, high = math.log(t.minutes[0]), math.log(t.minutes[1])
        self.log_min, self.log_span = low, high - low  # as random.uniform(low, high) computes it
        if t.mig_profile:
            self.fitting = {1: [n.node_name for n in nodes if n.slices]}
        else:
            product = t.product if t.product in products else None
            self.fitting = {gpus: [n.node_name for n in nodes
                                   if (product is None or n.model.label == product) and len(n.whole) >= gpus]
                            for gpus in t.gpus}


def _draw_history(rng: random.Random, count: int, now: float, templates: list[_Shape],
                  cum_weights: list[float]) -> tuple[dict[str, Job], dict[str, float]]:
    """``count`` historical jobs (uid -> frozen job) and the run length of each one still queued.

    Each job's draws come in a fixed order, made as :class:`random.Random`'s ``choices``,
    ``choice``, ``uniform`` and ``randint`` make them (the same numbers from the same seed), and
    its identifiers as :class:`IdFactory` and :func:`pod_suffix` make them, written out here
    without the per-call overhead those add a hundred thousand times over (half the time of
    building the history). ``tests/test_demo_jobs.py`` checks them against the plain calls.
    """
    draw, bits, pairs = rng.random, rng.getrandbits, len(POD_PAIRS)
    exp, floor = math.exp, math.floor
    weight, last = cum_weights[-1] + 0.0, len(cum_weights) - 1
    queued_span, finished_span, fail_span = 2 * 86400.0 - 600.0, HISTORY_DAYS * 86400.0 - 3600.0, 0.8 - 0.05
    pending, failed, succeeded = JobState.PENDING, JobState.FAILED, JobState.SUCCEEDED
    archive: dict[str, Job] = {}
    queued: dict[str, float] = {}
    shapes = [(t.namespace, t.prefix, t.names, t.gpus, t.owners, t.log_min, t.log_span, t.mig_profile, t.image,
               t.fitting) for t in templates]

    # random.Random._randbelow(n) is ``r = getrandbits(n.bit_length())`` drawn again while r >= n:
    # written out below for each draw, a call less each (four hundred thousand calls).
    for _ in range(count):
        (namespace, prefix, names, gpu_counts, owners, log_min, log_span, mig_profile, image,
         fitting_by) = shapes[bisect_right(cum_weights, draw() * weight, 0, last)]  # choices(TEMPLATES, cum_weights)
        while True:  # IdFactory.suffix: five letters of the 27, drawn again while the name is taken
            name = prefix
            for _ in range(5):
                r = bits(5)
                while r >= 27:
                    r = bits(5)
                name += SUFFIX_ALPHABET[r]
            if name not in names:
                break
        names.add(name)
        if gpu_counts:  # choice(t.gpus)
            n = len(gpu_counts)
            k = n.bit_length()
            r = bits(k)
            while r >= n:
                r = bits(k)
            gpus = gpu_counts[r]
        else:
            gpus = 1
        minutes = exp(log_min + log_span * draw())
        h = "%032x" % ((bits(128) & UUID4_KEEP) | UUID4_SET)  # IdFactory.uuid4
        uid = f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
        n = len(owners)  # choice(TEAMS[namespace])
        k = n.bit_length()
        r = bits(k)
        while r >= n:
            r = bits(k)
        owner = owners[r]
        h = "%032x" % ((bits(128) & UUID4_KEEP) | UUID4_SET)
        pod_uid = f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
        value, low = divmod(crc32(f"{pod_uid}:0".encode()), pairs)  # pod_suffix(pod_uid, 0)
        high, middle = divmod(value, pairs)
        pod = f"{name}-{POD_PAIRS[low]}{POD_PAIRS[middle]}{SUFFIX_ALPHABET[high % 27]}"
        if draw() < QUEUED_SHARE:
            created = float(floor(now - (600.0 + queued_span * draw())))
            queued[uid] = round(minutes * 60.0)
            archive[uid] = Job(uid, name, namespace, pending, created, gpus, mig_profile, None, None, None,
                               QUEUED_REASON, None, image, owner, pod_uid, pod)
            continue
        fitting = fitting_by[gpus]
        fails = draw() < FAILED_SHARE
        length = max(60.0, round(minutes * 60.0) * ((0.05 + fail_span * draw()) if fails else 1.0))
        finished = float(floor(now - (3600.0 + finished_span * draw())))
        started = float(floor(finished - length))
        r = bits(11)  # randint(5, 1800)
        while r >= 1796:
            r = bits(11)
        created = started - (5 + r)
        node = None
        if fitting:  # choice(fitting)
            n = len(fitting)
            k = n.bit_length()
            r = bits(k)
            while r >= n:
                r = bits(k)
            node = fitting[r]
        archive[uid] = Job(uid, name, namespace, failed if fails else succeeded, created, gpus, mig_profile, node,
                           started, finished, None, None, image, owner, pod_uid, pod)
    return archive, queued
