"""The Kueue and Volcano kinds the job backend lists and watches, where discovery serves them.

Every one is optional: a user whose role may not read ClusterQueues (a namespace-scoped role)
still gets the jobs, said once in the log. Kueue is read at v1beta2 where the cluster serves it,
else at v1beta1 (an older Kueue).
"""

from __future__ import annotations

from functools import cache
from typing import Protocol

from gpuconsole.backends.kube.listing import Kind
from gpuconsole.backends.kube.queue_records import (
    KUEUE_GROUP,
    KUEUE_VERSIONS,
    VOLCANO_BATCH,
    VOLCANO_SCHEDULING,
    cluster_queue_record,
    local_queue_record,
    pod_group_record,
    volcano_job_record,
    volcano_queue_record,
    workload_record,
)


class Discovered(Protocol):
    def serves(self, group: str, *versions: str) -> str | None | bool: ...


def _custom(name: str, group: str, version: str, plural: str, read: object, *, namespaced: bool) -> Kind:
    return Kind(name, "custom", "list_cluster_custom_object", "list_namespaced_custom_object" if namespaced else None,
                read, required=False, custom=(group, version, plural))  # type: ignore[arg-type]


@cache
def kueue_kinds(version: str) -> tuple[Kind, Kind, Kind]:
    return (_custom("ClusterQueues", KUEUE_GROUP, version, "clusterqueues", cluster_queue_record, namespaced=False),
            _custom("LocalQueues", KUEUE_GROUP, version, "localqueues", local_queue_record, namespaced=True),
            _custom("Workloads", KUEUE_GROUP, version, "workloads", workload_record, namespaced=True))


CLUSTER_QUEUES, LOCAL_QUEUES, WORKLOADS = kueue_kinds(KUEUE_VERSIONS[0])  # their names, whatever the version
VOLCANO_QUEUES = _custom("VolcanoQueues", *VOLCANO_SCHEDULING, "queues", volcano_queue_record, namespaced=False)
POD_GROUPS = _custom("PodGroups", *VOLCANO_SCHEDULING, "podgroups", pod_group_record, namespaced=True)
VOLCANO_JOBS = _custom("VolcanoJobs", *VOLCANO_BATCH, "jobs", volcano_job_record, namespaced=True)


def queue_kinds(source: Discovered) -> tuple[Kind, ...]:
    """The queueing kinds ``source``'s cluster serves (none before discovery has answered)."""
    kinds: list[Kind] = []
    version = source.serves(KUEUE_GROUP, *KUEUE_VERSIONS)
    if isinstance(version, str):
        kinds.extend(kueue_kinds(version))
    if source.serves(*VOLCANO_SCHEDULING):
        kinds.extend((VOLCANO_QUEUES, POD_GROUPS))
    if source.serves(*VOLCANO_BATCH):
        kinds.append(VOLCANO_JOBS)
    return tuple(kinds)
