"""A small Kubernetes scheduler for the simulated cluster: GPU counts, MIG devices, selectors.

Free capacity is kept in buckets (product → free-GPU count → nodes), so deciding whether a
pod fits, and explaining why not, costs a handful of dictionary lookups even on a thousand
nodes. A pod goes to the ready node with the fewest free GPUs that still fit it (bin packing,
as GPU clusters configure ``MostAllocated`` scoring), which keeps whole nodes free for
8-GPU jobs. A pod that fits nowhere gets the scheduler's own words as its pending reason.
"""

from __future__ import annotations

from gpuconsole.backends.sim.state import SimGpu, SimInstance, SimJob, SimSlice
from gpuconsole.model import JobState

MAX_GPUS_PER_NODE = 8

_NOT_READY = "node(s) had untolerated taint {node.kubernetes.io/not-ready: }"
_SELECTOR = "node(s) didn't match Pod's node affinity/selector"


class Scheduler:
    """Places pending jobs on nodes and tracks what is free.

    The world tells it when nodes join, become not ready or leave, and when jobs release
    their devices; :meth:`schedule` then places what it can. Without freed capacity only
    newly submitted jobs are tried, because nothing else could have started to fit.
    """

    def __init__(self) -> None:
        self.nodes: list[SimInstance] = []
        self._buckets: dict[str, list[dict[SimInstance, None]]] = {}
        self._mig_free: dict[str, dict[SimInstance, None]] = {}
        self._ready = 0
        self._mig_ready = 0
        self._retry_all = True
        self._fresh: list[SimJob] = []
        self.slots = 0  # GPUs and MIG devices on ready nodes
        self.free_slots = 0

    # ----------------------------------------------------------------- nodes

    def add_node(self, inst: SimInstance) -> None:
        if len(inst.whole) > MAX_GPUS_PER_NODE:
            raise ValueError(f"{inst.node_name}: more than {MAX_GPUS_PER_NODE} GPUs on one node")
        inst.listed = True
        inst.ready = True
        self.nodes.append(inst)
        self._enter(inst)

    def cordon(self, inst: SimInstance) -> None:
        """The node went NotReady (its instance is stopping or shutting down). A node this
        scheduler never placed work on (the inference pool's) only goes NotReady."""
        if inst.ready and inst in self._buckets.get(inst.model.label, ({},) * (MAX_GPUS_PER_NODE + 1))[inst.free]:
            self._leave(inst)
        inst.ready = False

    def remove_node(self, inst: SimInstance) -> None:
        self.cordon(inst)
        if inst.listed and inst in self.nodes:
            self.nodes.remove(inst)
            self._retry_all = True
        inst.listed = False

    def _enter(self, inst: SimInstance) -> None:
        self._ready += 1
        buckets = self._buckets.get(inst.model.label)
        if buckets is None:
            buckets = self._buckets[inst.model.label] = [{} for _ in range(MAX_GPUS_PER_NODE + 1)]
        buckets[inst.free][inst] = None
        self.slots += len(inst.whole) + len(inst.slices)
        self.free_slots += inst.free
        if inst.slices:
            self._mig_ready += 1
            for sl in inst.slices:
                if sl.job is None:
                    self.free_slots += 1
                    self._mig_free.setdefault(sl.profile, {})[inst] = None
        self._retry_all = True

    def _leave(self, inst: SimInstance) -> None:
        self._ready -= 1
        del self._buckets[inst.model.label][inst.free][inst]
        self.slots -= len(inst.whole) + len(inst.slices)
        self.free_slots -= inst.free + sum(1 for sl in inst.slices if sl.job is None)
        if inst.slices:
            self._mig_ready -= 1
            for nodes in self._mig_free.values():
                nodes.pop(inst, None)
        self._retry_all = True

    def _set_free(self, inst: SimInstance, free: int) -> None:
        if inst.ready:
            buckets = self._buckets[inst.model.label]
            del buckets[inst.free][inst]
            buckets[free][inst] = None
            self.free_slots += free - inst.free
        inst.free = free

    # ----------------------------------------------------------------- jobs

    def submitted(self, job: SimJob) -> None:
        """A job became pending (new, resumed or evicted) and should be tried next pass."""
        self._fresh.append(job)

    def release(self, job: SimJob) -> None:
        """Give back what a job holds; the next pass retries every pending job."""
        inst = job.node
        if job.devices:
            for gpu in job.devices:
                gpu.job = None
                gpu.proc_mem = 0
                gpu.procs = ()
                gpu.mem = gpu.idle_mem
                gpu.settled = False
                gpu.view = None
            if inst is not None:
                self._set_free(inst, inst.free + len(job.devices))
            job.devices = []
        sl = job.slice
        if sl is not None:
            sl.job = None
            sl.mem = 0
            sl.util = 0.0
            if inst is not None and inst.ready:
                self._mig_free.setdefault(sl.profile, {})[inst] = None
                self.free_slots += 1
            job.slice = None
        self._retry_all = True

    def schedule(self, pending: dict[str, SimJob]) -> list[SimJob]:
        """Try to place pending jobs (oldest first); returns those now bound to a node."""
        if self._retry_all:
            candidates = list(pending.values())
            self._retry_all = False
        else:
            candidates = [j for j in self._fresh if j.state is JobState.PENDING and j.uid in pending]
        self._fresh.clear()
        placed = []
        for job in candidates:
            if self.place(job):
                placed.append(job)
        return placed

    def fits(self, job: SimJob) -> bool:
        """Whether the job would be placed now (nothing is bound)."""
        if job.mig_profile is not None:
            return bool(self._mig_free.get(job.mig_profile))
        return self._find_node(job) is not None

    def fit_together(self, jobs: list[SimJob]) -> int:
        """How many of ``jobs`` (whole-GPU pods) would be placed at once on what is free now,
        each on the fullest node that still fits it (nothing is bound)."""
        taken: dict[SimInstance, int] = {}
        fit = 0
        for job in jobs:
            best: SimInstance | None = None
            for buckets in self._groups(job):
                for nodes in buckets:
                    for inst in nodes:
                        left = inst.free - taken.get(inst, 0)
                        if left >= job.gpus and (best is None or left < best.free - taken.get(best, 0)):
                            best = inst
            if best is not None and job.mig_profile is None:
                taken[best] = taken.get(best, 0) + job.gpus
                fit += 1
        return fit

    def place(self, job: SimJob) -> bool:
        """Bind the job to a node if one fits; otherwise set its pending reason."""
        profile = job.mig_profile
        if profile is not None:
            nodes = self._mig_free.get(profile)
            if nodes:
                mig_node = next(iter(nodes))
                for sl in mig_node.slices:
                    if sl.job is None and sl.profile == profile:
                        self._bind_slice(job, mig_node, sl)
                        return True
            self._explain(job, {
                f"Insufficient nvidia.com/mig-{profile}": self._mig_ready,
                _SELECTOR: self._ready - self._mig_ready,
            })
            return False
        inst = self._find_node(job)
        if inst is not None:
            self._bind_gpus(job, inst, job.gpus)
            return True
        groups = self._groups(job)
        matched = sum(len(nodes) for buckets in groups for nodes in buckets)
        self._explain(job, {"Insufficient nvidia.com/gpu": matched, _SELECTOR: self._ready - matched})
        return False

    def bind(self, job: SimJob, inst: SimInstance) -> None:
        """Bind ``job`` to ``inst`` (it must have the GPUs free): a replica placed by hand."""
        self._bind_gpus(job, inst, job.gpus)

    def _groups(self, job: SimJob) -> list[list[dict[SimInstance, None]]]:
        if job.product is None:
            return list(self._buckets.values())
        group = self._buckets.get(job.product)
        return [group] if group is not None else []

    def _find_node(self, job: SimJob) -> SimInstance | None:
        """The ready, selector-matching node with the fewest free GPUs that still fit."""
        groups = self._groups(job)
        for free in range(max(job.gpus, 1), MAX_GPUS_PER_NODE + 1):
            for buckets in groups:
                if buckets[free]:
                    return next(iter(buckets[free]))
        return None

    def _explain(self, job: SimJob, counts: dict[str, int]) -> None:
        total = len(self.nodes)
        counts[_NOT_READY] = total - self._ready
        if total == 0:
            reason = "no nodes available to schedule pods"
        else:
            parts = sorted(f"{n} {why}" for why, n in counts.items() if n)
            reason = f"0/{total} nodes are available: {', '.join(parts)}."
        if reason != job.pending_reason:
            job.pending_reason = reason
            job.view = None

    def _bind_gpus(self, job: SimJob, inst: SimInstance, want: int) -> None:
        taken: list[SimGpu] = []
        for gpu in inst.whole:
            if gpu.job is None:
                gpu.job = job
                gpu.rank = len(taken)
                gpu.settled = False
                gpu.view = None
                taken.append(gpu)
                if len(taken) == want:
                    break
        job.devices = taken
        job.node = inst
        self._set_free(inst, inst.free - want)

    def _bind_slice(self, job: SimJob, inst: SimInstance, sl: SimSlice) -> None:
        sl.job = job
        job.slice = sl
        job.node = inst
        self.free_slots -= 1
        if not any(s.job is None and s.profile == sl.profile for s in inst.slices):
            del self._mig_free[sl.profile][inst]
