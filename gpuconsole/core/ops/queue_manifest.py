"""A job's queue in what is submitted: Kueue's LocalQueue label, or Volcano's scheduler, queue and
PodGroup; and the queues a namespace may submit to, with their free quota.

Kueue takes a Job through its ``kueue.x-k8s.io/queue-name`` label (:mod:`.manifests` sets it on
the Job, never its pods). Volcano schedules pods whose ``schedulerName`` is ``volcano``, in the
queue their ``scheduling.volcano.sh/queue-name`` annotation names; the pods of a multi-pod run
(an Indexed Job under torchrun) join one PodGroup (``scheduling.k8s.io/group-name``) whose
``minMember`` is the number of pods, so Volcano starts them all at once or none. The PodGroup is
created after the Job, through the same dry run and create, and the Job owns it.

A form's Queue field says which with one value: ``kueue:NAME``, ``volcano:NAME``, or empty.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpuconsole.model import Queue, QueueKind

if TYPE_CHECKING:
    from gpuconsole.core.ops.job_request import JobRequest

KUEUE, VOLCANO = "kueue:", "volcano:"
VOLCANO_SCHEDULER = "volcano"
VOLCANO_QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"
GROUP_ANNOTATION = "scheduling.k8s.io/group-name"  # the PodGroup a pod belongs to
PODGROUP_API = "scheduling.volcano.sh/v1beta1"
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,61}[a-z0-9])?$")


def parse_choice(value: str) -> tuple[str, str]:
    """``(kueue LocalQueue, Volcano queue)`` a Queue field's value names (a bare name is Kueue's)."""
    value = value.strip()
    if value.startswith(VOLCANO):
        return "", value.removeprefix(VOLCANO)
    return value.removeprefix(KUEUE), ""


def queue_problem(req: JobRequest) -> str | None:
    """Why ``req``'s Volcano queue cannot be submitted (one line), or None."""
    if not req.volcano_queue:
        return None
    if req.queue:
        return "a job goes to a Kueue LocalQueue or to a Volcano queue, not both"
    if not _NAME.match(req.volcano_queue):
        return "not a Volcano queue name: lower-case letters, digits, '-' and '.', like default"
    if req.kind == "CronJob" and req.distributed:
        return "a CronJob's multi-pod runs cannot share one PodGroup: submit each run as a Job"
    return None


def _pod_templates(obj: dict[str, Any]) -> list[dict[str, Any]]:
    spec = obj.get("spec") or {}
    if obj.get("kind") == "CronJob":
        spec = (spec.get("jobTemplate") or {}).get("spec") or {}
    template = spec.get("template")
    return [template] if isinstance(template, dict) else []


def with_volcano(objects: list[dict[str, Any]], req: JobRequest) -> list[dict[str, Any]]:
    """``objects`` scheduled by Volcano in ``req.volcano_queue`` (unchanged without one): the pods'
    scheduler and queue, and for a multi-pod Job its PodGroup, right after the Job."""
    if not req.volcano_queue:
        return objects
    out: list[dict[str, Any]] = []
    for obj in objects:
        obj = copy.deepcopy(obj)
        out.append(obj)
        if obj.get("kind") not in ("Job", "CronJob"):
            continue
        for template in _pod_templates(obj):
            annotations = template.setdefault("metadata", {}).setdefault("annotations", {})
            annotations[VOLCANO_QUEUE_ANNOTATION] = req.volcano_queue
            if req.distributed and obj.get("kind") == "Job":
                annotations[GROUP_ANNOTATION] = req.name
            template.setdefault("spec", {})["schedulerName"] = VOLCANO_SCHEDULER
        if req.distributed and obj.get("kind") == "Job":
            out.append(pod_group(req, dict(obj["metadata"].get("labels") or {})))
    return out


def pod_group(req: JobRequest, labels: dict[str, str]) -> dict[str, Any]:
    """The PodGroup of a multi-pod Job: all its pods, and their GPUs, at once."""
    resource = f"nvidia.com/mig-{req.mig_profile}" if req.mig_profile else "nvidia.com/gpu"
    spec: dict[str, Any] = {"minMember": req.workers, "queue": req.volcano_queue}
    if req.total_gpus:
        spec["minResources"] = {resource: str(req.total_gpus)}
    return {"apiVersion": PODGROUP_API, "kind": "PodGroup",
            "metadata": {"name": req.name, "namespace": req.namespace, "labels": labels}, "spec": spec}


@dataclass(frozen=True, slots=True)
class QueueChoice:
    """One entry of a Queue field: its value and its words (names from the cluster, to be shown inert)."""

    value: str
    label: str


NO_QUEUE = QueueChoice("", "none: straight to the cluster's scheduler")


def _free(queue: Queue) -> str:
    if queue.gpu_quota is None:
        return "no GPU quota"
    free = queue.gpu_free
    return f"{'?' if free is None else free} of {queue.gpu_quota} GPUs free"


def queue_choices(queues: Iterable[Queue], namespace: str) -> list[QueueChoice]:
    """What a job of ``namespace`` may be submitted to: none, the namespace's LocalQueues (each
    with its ClusterQueue's free quota), then Volcano's queues (cluster-wide)."""
    kueue, volcano = [], []
    for queue in queues:
        if queue.kind is QueueKind.KUEUE:
            for local in queue.local_queues:
                ns, _, name = local.partition("/")
                if ns == namespace and name:
                    kueue.append(QueueChoice(f"{KUEUE}{name}", f"{name} (Kueue, {queue.name}): {_free(queue)}"))
        elif queue.active:
            volcano.append(QueueChoice(f"{VOLCANO}{queue.name}", f"{queue.name} (Volcano): {_free(queue)}"))
    return [NO_QUEUE, *sorted(kueue, key=lambda c: c.value), *sorted(volcano, key=lambda c: c.value)]
