"""A pool's live figures from one snapshot, and whether the snapshot is fit to act on.

Unknown telemetry is never idle: an instance whose GPUs the GPU source does not report (no
source, a stale one, or a GPU it cannot map to the instance's node) counts as busy, and a figure
that cannot be computed is left out, so no comparison on it holds.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from gpuconsole.core.ops.autopilot.rules import Scope
from gpuconsole.model import FleetSnapshot, Gpu, Instance, InstanceState, JobState, SourceKind, SourceState

GPU_FIGURES = frozenset({"gpu_util", "gpu_mem", "idle_gpus"})
JOB_FIGURES = frozenset({"pending_gpus", "pending_jobs"})
ACTIVE = (InstanceState.PENDING, InstanceState.RUNNING)


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


def needed_sources(figures: Iterable[str]) -> tuple[SourceKind, ...]:
    """The sources a set of figures is read from (the cloud always: the pool is counted there)."""
    names = set(figures)
    out = [SourceKind.CLOUD]
    if names & GPU_FIGURES:
        out.append(SourceKind.GPUS)
    if names & JOB_FIGURES:
        out.append(SourceKind.JOBS)
    return tuple(out)


def pool_instances(snapshot: FleetSnapshot, scope: Scope) -> list[Instance]:
    """The pool's pending and running instances."""
    return [i for i in snapshot.instances if i.state in ACTIVE and scope.has_instance(i)]


class GpuIndex:
    """The snapshot's GPUs by node and the nodes running a job, built once per snapshot."""

    def __init__(self, snapshot: FleetSnapshot) -> None:
        self.by_node: dict[str, list[Gpu]] = {}
        for gpu in snapshot.gpus:
            self.by_node.setdefault(gpu.node, []).append(gpu)
        self.job_nodes = {j.node for j in snapshot.jobs if j.state is JobState.RUNNING and j.node}
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
        if inst.node and inst.node in self.job_nodes:
            return True
        gpus = self.gpus_of(inst)
        if gpus is None:
            return True
        return any(g.processes or g.pod or g.utilization >= threshold or
                   any(s.pod_uid or s.memory_used_mib for s in g.mig_slices) for g in gpus)

    def mean_util(self, inst: Instance) -> float:
        gpus = self.gpus_of(inst) or ()
        return sum(g.utilization for g in gpus) / len(gpus) if gpus else 100.0


def pool_figures(snapshot: FleetSnapshot, scope: Scope, pool: Sequence[Instance], index: GpuIndex) -> dict[str, float]:
    """``gpu_util``, ``gpu_mem`` (percent, means over the pool's GPUs), ``idle_gpus``,
    ``pending_gpus`` and ``pending_jobs`` (jobs in scope pending with a GPU request). GPU
    figures are left out when any GPU of the pool is unknown."""
    out: dict[str, float] = {}
    pending = [j for j in snapshot.jobs if j.state is JobState.PENDING and j.gpus > 0 and scope.has_job(j)]
    out["pending_gpus"] = float(sum(j.gpus for j in pending))
    out["pending_jobs"] = float(len(pending))
    gpus: list[Gpu] = []
    for inst in pool:
        known = index.gpus_of(inst)
        if known is None:
            return out
        gpus.extend(known)
    if gpus:
        out["gpu_util"] = sum(g.utilization for g in gpus) / len(gpus)
        out["gpu_mem"] = sum(g.memory_percent for g in gpus) / len(gpus)
        out["idle_gpus"] = float(sum(1 for g in gpus if g.utilization < 5.0 and not g.processes))
    return out
