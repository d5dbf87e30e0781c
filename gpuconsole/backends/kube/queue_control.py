"""Changing a job's place in Kueue: move it to another LocalQueue, deactivate or reactivate its Workload.

Both act only before admission (a job Kueue admitted keeps its quota and its queue). A move
sets the Job's ``kueue.x-k8s.io/queue-name`` label, which Kueue carries to the Workload; a
deactivation sets the Workload's ``spec.active`` (Kueue keeps an inactive Workload out of its
queue until it is active again). Requests go through the job control's requests, so a 403 is
one line in the cluster's words.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpuconsole.backends.base import BackendError
from gpuconsole.backends.kube.queue_records import JOB_UID_LABEL, KUEUE_GROUP, QUEUE_LABEL, workload_record

JOBS = "/apis/batch/v1/namespaces/{namespace}/jobs"
NO_KUEUE = "this cluster serves no Kueue (kueue.x-k8s.io)"


def _path(version: str | None, plural: str) -> str:
    if not version:
        raise BackendError(NO_KUEUE)
    return f"/apis/{KUEUE_GROUP}/{version}/namespaces/{{namespace}}/{plural}"


def workload_of(control: Any, version: str | None, namespace: str, name: str, where: str) -> dict[str, Any] | None:
    """The Workload Kueue keeps for Job ``namespace/name`` (None: none yet)."""
    path = _path(version, "workloads")
    job = control._json("GET", JOBS, where, namespace=namespace, name=name)
    uid = (job.get("metadata") or {}).get("uid") if isinstance(job, Mapping) else None
    listed = control._json("GET", path, where, namespace=namespace, query=[("labelSelector", f"{JOB_UID_LABEL}={uid}")])
    items = [i for i in (listed.get("items") or []) if isinstance(i, dict)]
    if not items:  # an older Kueue labels no Workload: its owner reference says
        listed = control._json("GET", path, where, namespace=namespace)
        items = [i for i in (listed.get("items") or []) if isinstance(i, dict)
                 and any(r.get("uid") == uid for r in (i.get("metadata") or {}).get("ownerReferences") or ())]
    return items[0] if items else None


def _pending(workload: dict[str, Any], where: str) -> None:
    record = workload_record(workload)
    if record.admitted or record.quota_reserved:
        where_to = record.cluster_queue or "its ClusterQueue"
        raise BackendError(f"{where}: already admitted to {where_to}; only a pending job can be changed")


def move(control: Any, version: str | None, namespace: str, name: str, queue: str) -> None:
    """Move pending Job ``namespace/name`` to LocalQueue ``queue`` of its namespace."""
    where = f"moving Job {namespace}/{name} to LocalQueue {queue}"
    control._json("GET", _path(version, "localqueues"), where, namespace=namespace, name=queue)
    workload = workload_of(control, version, namespace, name, where)
    if workload is not None:
        _pending(workload, where)
    control._json("PATCH", JOBS, where, namespace=namespace, name=name,
                  body={"metadata": {"labels": {QUEUE_LABEL: queue}}}, content_type="application/merge-patch+json")


def set_active(control: Any, version: str | None, namespace: str, name: str, active: bool) -> None:
    """Set ``spec.active`` of the Workload of pending Job ``namespace/name``."""
    where = f"{'reactivating' if active else 'deactivating'} the Workload of Job {namespace}/{name}"
    workload = workload_of(control, version, namespace, name, where)
    if workload is None:
        raise BackendError(f"{where}: Kueue keeps no Workload for it")
    _pending(workload, where)
    control._json("PATCH", _path(version, "workloads"), where, namespace=namespace,
                  name=str(workload["metadata"]["name"]), body={"spec": {"active": bool(active)}},
                  content_type="application/merge-patch+json")
