"""A pool's live figures from one snapshot, and whether the snapshot is fit to act on.

Unknown telemetry is never idle: an instance whose GPUs the GPU source does not report (no
source, a stale one, or a GPU it cannot map to the instance's node) counts as busy, and a figure
that cannot be computed is left out, so no comparison on it holds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from gpuconsole.core.ops.autopilot.rules import SERVICE_FIGURES, Scope
from gpuconsole.model import (
    FleetSnapshot,
    Gpu,
    Instance,
    InstanceState,
    JobState,
    Market,
    Service,
    SourceKind,
    SourceState,
    unfinished,
    WaitingFor,
)

GPU_FIGURES = frozenset({"gpu_util", "gpu_mem", "idle_gpus"})
JOB_FIGURES = frozenset({"pending_gpus", "pending_jobs", "quota_pending_gpus"})
# What a job held by its queue waits for: more instances would not start it.
HELD = frozenset({WaitingFor.QUOTA, WaitingFor.ADMISSION_CHECK, WaitingFor.PREEMPTED})
ON_QUOTA = frozenset({WaitingFor.QUOTA, WaitingFor.PREEMPTED})
ACTIVE = (InstanceState.PENDING, InstanceState.RUNNING)
REPLICA_FIGURES = ("replicas", "ready", "pending")
SERVING_FIGURES = tuple(f for f in SERVICE_FIGURES if f not in REPLICA_FIGURES)


def not_live(snapshot: FleetSnapshot, kinds: Iterable[SourceKind]) -> str | None:
    """Why ``snapshot`` is not fit to act on for sources ``kinds`` (stale, failing, partial,
    read from the cache), or None when every one of them is live."""
    for kind in kinds:
        status = snapshot.source(kind)
        if status is None:
            return f"no {kind.value} source"
        if status.state is not SourceState.LIVE:
            return f"{kind.value} source is {status.describe(snapshot.taken_at)}"
    return None


def needed_sources(figures: Iterable[str], snapshot: FleetSnapshot) -> tuple[SourceKind, ...]:
    """The sources a set of figures is read from (the cloud always: the pool is counted there).

    A source nobody set up in ``snapshot`` is left out (the cloud never is): it is not stale,
    its figures are unknown, so only the comparisons on them are false. A bastion with no GPU
    telemetry still scales on ``pending_gpus``."""
    names = set(figures)
    out = [SourceKind.CLOUD]
    if names & GPU_FIGURES:
        out.append(SourceKind.GPUS)
    if names & JOB_FIGURES:
        out.append(SourceKind.JOBS)
    return tuple(kind for kind in out if kind is SourceKind.CLOUD or not _unconfigured(snapshot, kind))


def _unconfigured(snapshot: FleetSnapshot, kind: SourceKind) -> bool:
    status = snapshot.source(kind)
    return status is None or status.state is SourceState.UNCONFIGURED


class GpuIndex:
    """What every rule reads from one snapshot, built once per refresh: GPUs and their sums by
    node, the nodes running a job, and (per scope, on first use) pools and pending jobs. Fifty
    rules over a thousand GPUs then cost a few dict lookups each."""

    def __init__(self, snapshot: FleetSnapshot) -> None:
        self.snapshot = snapshot
        self.by_node: dict[str, list[Gpu]] = {}
        # node -> [GPUs, utilization sum, memory percent sum, idle GPUs]
        self.sums: dict[str, list[float]] = {}
        for gpu in snapshot.gpus:
            self.by_node.setdefault(gpu.node, []).append(gpu)
            acc = self.sums.get(gpu.node)
            if acc is None:
                self.sums[gpu.node] = acc = [0.0, 0.0, 0.0, 0.0]
            acc[0] += 1
            acc[1] += gpu.utilization
            total = gpu.memory_total_mib
            acc[2] += 100.0 * gpu.memory_used_mib / total if total else 0.0
            if gpu.utilization < 5.0 and not gpu.processes:
                acc[3] += 1
        self._pools: dict[Scope, list[Instance]] = {}
        self._pending: dict[Scope, tuple[float, float]] = {}
        self._figures: dict[tuple[Scope, Scope], dict[str, float]] = {}
        self._busy: dict[tuple[str, float], bool] = {}
        self._spot: tuple[set[str], list[Instance]] | None = None
        self._idle: dict[tuple[Scope, float, bool], list[Instance]] = {}
        self.live_jobs = unfinished(snapshot.jobs)  # the pending and running ones: not the finished 100,000
        self.job_nodes = {j.node for j in self.live_jobs if j.state is JobState.RUNNING and j.node}
        self.gpus_live = not_live(snapshot, (SourceKind.GPUS,)) is None

    def gpus_of(self, inst: Instance) -> list[Gpu] | None:
        """The instance's GPUs, or None when they are unknown (no mapping or no live source)."""
        if not self.gpus_live or not inst.node:
            return None
        gpus = self.by_node.get(inst.node)
        if not gpus or (inst.gpus and len(gpus) < inst.gpus):
            return None
        return gpus

    def busy(self, inst: Instance, threshold: float = 5.0) -> bool:
        """Whether the instance runs anything on its GPUs, or cannot be known not to."""
        key = (inst.instance_id, threshold)
        found = self._busy.get(key)
        if found is None:
            found = self._busy[key] = self._busy_now(inst, threshold)
        return found

    def _busy_now(self, inst: Instance, threshold: float) -> bool:
        if inst.node and inst.node in self.job_nodes:
            return True
        gpus = self.gpus_of(inst)
        if gpus is None:
            return True
        return any(g.processes or g.pod or g.utilization >= threshold or
                   any(s.pod_uid or s.memory_used_mib for s in g.mig_slices) for g in gpus)

    def interrupted_spot(self, is_interrupted: Callable[[Instance], bool]) -> tuple[set[str], list[Instance]]:
        """The ids that replacements name (their ``gpuconsole:replaces`` tag), and the spot
        instances EC2 interrupted."""
        if self._spot is None:
            replaced = {i.tag("gpuconsole:replaces") or "" for i in self.snapshot.instances if i.state in ACTIVE}
            self._spot = (replaced, [i for i in self.snapshot.instances if i.market is Market.SPOT and is_interrupted(i)])
        return self._spot

    def idle_candidates(self, scope: Scope, threshold: float, spot: bool) -> list[Instance]:
        """Running instances in ``scope`` whose GPUs are all known, below ``threshold`` and hold
        no process or pod, and stopped ones their cloud still bills (an Azure VM stopped but not
        deallocated: nothing runs on it, and stopping it deallocates it); spot ones only with
        ``spot``."""
        key = (scope, threshold, spot)
        found = self._idle.get(key)
        if found is None:
            found = self._idle[key] = [
                i for i in self.snapshot.instances
                if (spot or i.market is not Market.SPOT) and scope.has_instance(i)
                and ((i.state is InstanceState.RUNNING and not self.busy(i, threshold))
                     or (i.state is InstanceState.STOPPED and i.bills_now))]
        return found

    def pool(self, scope: Scope) -> list[Instance]:
        """The pool's pending and running instances."""
        pool = self._pools.get(scope)
        if pool is None:
            pool = self._pools[scope] = [i for i in self.snapshot.instances if i.state in ACTIVE and scope.has_instance(i)]
        return pool

    def pending(self, scope: Scope) -> tuple[float, float, float]:
        """GPUs and jobs pending for capacity in ``scope`` (a service's replica that waits for GPUs
        counts as a job of its own), and GPUs that wait on their queue's quota."""
        found = self._pending.get(scope)
        if found is None:
            mine = [j for j in self.live_jobs if j.gpus > 0 and j.waiting and scope.has_job(j)]
            jobs = [j for j in mine if j.state is JobState.PENDING and j.waiting_for not in HELD]
            quota = sum(j.gpus for j in mine if j.waiting_for in ON_QUOTA)
            waiting = [r.gpus for s in self.snapshot.services if scope.has_service(s.namespace)
                       for r in s.replicas if r.node is None and r.gpus > 0 and r.phase == "Pending"]
            found = self._pending[scope] = (float(sum(j.gpus for j in jobs) + sum(waiting)),
                                            float(len(jobs) + len(waiting)), float(quota))
        return found

    def mean_util(self, inst: Instance) -> float:
        gpus = self.gpus_of(inst) or ()
        return sum(g.utilization for g in gpus) / len(gpus) if gpus else 100.0


def pool_figures(scope: Scope, jobs: Scope, pool: Sequence[Instance], index: GpuIndex) -> dict[str, float]:
    """``gpu_util``, ``gpu_mem`` (percent, means over the pool's GPUs), ``idle_gpus``, and
    ``pending_gpus`` and ``pending_jobs`` (jobs in the ``jobs`` scope pending for capacity with
    a GPU request), and ``quota_pending_gpus`` (GPUs of jobs there waiting on their queue's quota). GPU figures are left out when any GPU of the pool is unknown."""
    cached = index._figures.get((scope, jobs))
    if cached is not None:
        return dict(cached)
    out = index._figures[(scope, jobs)] = _figures(jobs, pool, index)
    return dict(out)


def _figures(jobs: Scope, pool: Sequence[Instance], index: GpuIndex) -> dict[str, float]:
    pending_gpus, pending_jobs, quota_pending = index.pending(jobs)
    out = {"pending_gpus": pending_gpus, "pending_jobs": pending_jobs, "quota_pending_gpus": quota_pending}
    total = [0.0, 0.0, 0.0, 0.0]
    for inst in pool:
        if index.gpus_of(inst) is None:
            return out
        acc = index.sums[inst.node or ""]
        for k in range(4):
            total[k] += acc[k]
    if total[0]:
        out["gpu_util"] = total[1] / total[0]
        out["gpu_mem"] = total[2] / total[0]
        out["idle_gpus"] = total[3]
    return out


def service_figures(service: Service) -> dict[str, float]:
    """What a serve-scale rule reads of ``service``: its serving figures that are known, and its
    replicas (``replicas`` desired, ``ready``, ``pending``)."""
    out = {name: value for name in SERVING_FIGURES if (value := service.figure(name)) is not None}
    out["replicas"] = float(service.replicas_desired)
    out["ready"] = float(service.replicas_ready)
    out["pending"] = float(sum(1 for r in service.replicas if r.phase == "Pending"))
    return out

