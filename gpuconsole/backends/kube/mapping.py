"""Kubernetes answers into gpuconsole types: records joined into a :class:`~gpuconsole.model.JobsReading`.

Pure functions, no I/O: :mod:`records` reduces each object as it arrives, :mod:`pending` and
:mod:`cron` say what a Job or CronJob is doing, and :func:`compose` joins one moment's records.
The names of those modules are re-exported here for the rest of the adapter.
"""

from __future__ import annotations

from collections.abc import Iterable

from msgspec.structs import replace

from gpuconsole.backends.kube import training_compose
from gpuconsole.backends.kube.cron import cron_expression, cronjob_record, next_cron_change, next_run
from gpuconsole.backends.kube.errors import one_line, status_error, status_message
from gpuconsole.backends.kube.pending import WarningIndex, job_model, pending_reason
from gpuconsole.backends.kube.records import (
    COMPLETION_INDEX,
    GPU_RESOURCE,
    JOB_NAME_LABELS,
    JOB_REASONS,
    JOB_UID_LABELS,
    MIG_RESOURCE_PREFIX,
    MIG_STRATEGY_LABEL,
    OWNER_LABELS,
    PRODUCT_LABEL,
    SCHEDULING_REASONS,
    CronJobRecord,
    JobRecord,
    NodeRecord,
    PodRecord,
    WarningRecord,
    container_devices,
    describe,
    gpu_request,
    job_record,
    node_record,
    owner_of,
    parse_time,
    pod_devices,
    pod_record,
    warning_record,
)
from gpuconsole.backends.kube.training import TrainingRecord
from gpuconsole.model import JobsReading

__all__ = [
    "COMPLETION_INDEX",
    "GPU_RESOURCE",
    "JOB_NAME_LABELS",
    "JOB_REASONS",
    "JOB_UID_LABELS",
    "MIG_RESOURCE_PREFIX",
    "MIG_STRATEGY_LABEL",
    "OWNER_LABELS",
    "PRODUCT_LABEL",
    "SCHEDULING_REASONS",
    "CronJobRecord",
    "JobRecord",
    "NodeRecord",
    "PodRecord",
    "WarningIndex",
    "WarningRecord",
    "compose",
    "container_devices",
    "cron_expression",
    "cronjob_record",
    "describe",
    "gpu_request",
    "job_model",
    "job_record",
    "next_cron_change",
    "next_run",
    "node_record",
    "one_line",
    "owner_of",
    "parse_time",
    "pending_reason",
    "pod_devices",
    "pod_record",
    "status_error",
    "status_message",
    "warning_record",
]


def compose(
    jobs: Iterable[JobRecord],
    cronjobs: Iterable[CronJobRecord],
    pods: Iterable[PodRecord],
    nodes: Iterable[NodeRecord],
    warnings: Iterable[WarningRecord],
    now: float,
    training: Iterable[TrainingRecord] = (),
) -> JobsReading:
    """Join the records of one moment into a reading, sorted as the API lists them; distributed
    jobs (``training``) take the batch Jobs and pods they own (:mod:`training_compose`)."""
    pod_list = list(pods)
    jobs = list(jobs)
    index = WarningIndex(warnings)
    distributed, owned = training_compose.join(training, jobs, pod_list, index) if training else ([], set())
    by_job: dict[str, list[PodRecord]] = {}
    by_job_name: dict[tuple[str, str], list[PodRecord]] = {}
    allocated: dict[str, dict[str, int]] = {}
    for pod in pod_list:
        if pod.job_uid:
            by_job.setdefault(pod.job_uid, []).append(pod)
        elif pod.job_name:
            by_job_name.setdefault((pod.namespace, pod.job_name), []).append(pod)
        if pod.node and not pod.terminated:
            counts = allocated.setdefault(pod.node, {})
            if pod.gpus:
                counts[""] = counts.get("", 0) + pod.gpus
            for profile, count in pod.mig:
                counts[profile] = counts.get(profile, 0) + count
    job_models = tuple(sorted(
        [*(job_model(j, by_job.get(j.uid) or by_job_name.get((j.namespace, j.name), []), index)
           for j in jobs if j.uid not in owned), *distributed],
        key=lambda j: (j.namespace, j.name, j.uid)))
    cron_models = tuple(
        replace(c.cronjob, next_schedule=None if c.cronjob.suspended else next_run(c.expression, c.zone, now))
        for c in sorted(cronjobs, key=lambda c: (c.cronjob.namespace, c.cronjob.name, c.cronjob.uid))
    )
    node_models = []
    for record in sorted(nodes, key=lambda n: n.node.name):
        counts = allocated.get(record.node.name, {})
        node_models.append(replace(
            record.node,
            gpu_allocated=counts.get("", 0),
            mig_allocated=tuple(sorted((k, v) for k, v in counts.items() if k)),
        ))
    return JobsReading(job_models, cron_models, tuple(node_models), now)
