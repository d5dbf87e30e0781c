"""The simulated cluster's side of ``JobControl``: Kubernetes manifests in, simulated jobs out.

An Indexed Job of N pods becomes one gang-placed :class:`~.state.SimJob`, a CronJob a
:class:`~.state.SimCronJob` that follows its schedule. Requests are checked and refused in the
API server's words, a submit is all or nothing, and identifiers come from generators of their
own, so these calls never change the rest of the world until a job starts.
"""

from __future__ import annotations

import copy
import itertools
import random
import re
from datetime import UTC, datetime
from typing import Any

from gpuconsole.backends.kube.describe import EventLine, describe_text
from gpuconsole.backends.kube.queue_records import QUEUE_LABEL
from gpuconsole.backends.sim import catalog, training_log
from gpuconsole.backends.sim.actions import Actions
from gpuconsole.backends.sim.gang_api import (PLURALS, REPLICA_SPECS, add_gang, delete_gang, describe_gang, find_gang,
                                              gang_problem, suspend_gang)
from gpuconsole.backends.sim.ids import IdFactory
from gpuconsole.backends.sim.lifecycle import cron_next
from gpuconsole.backends.sim.state import SimCronJob, SimJob
from gpuconsole.backends.sim.workload import TEAMS
from gpuconsole.model import FINISHED_STATES, JobState

_RFC1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_SUFFIX = "abcdefghijklmnopqrstuvwxyz0123456789"
NAMESPACES = frozenset(TEAMS) | {"default"}
MIG_PROFILES = frozenset(p.profile for p in catalog.A100_80GB_MIG_LAYOUT)
RUN_MINUTES = (20.0, 90.0)  # how long a submitted job trains in the simulation
PRODUCT_LABEL = "nvidia.com/gpu.product"
_WAITING = 'container "train" in pod "{pod}" is waiting to start: ContainerCreating'


def stamp(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class _Workload:
    """What the simulation reads from a Job's (or a CronJob's job template's) spec."""

    def __init__(self, kind: str, manifest: dict[str, Any]) -> None:
        meta = manifest.get("metadata") or {}
        spec = manifest.get("spec") or {}
        self.name = str(meta.get("name") or "")
        self.namespace = str(meta.get("namespace") or "default")
        self.owner = str((meta.get("labels") or {}).get("owner") or "")
        self.schedule = str(spec.get("schedule") or "") if kind == "CronJob" else ""
        self.policy = str(spec.get("concurrencyPolicy") or "Allow") if kind == "CronJob" else "Allow"
        job_spec = ((spec.get("jobTemplate") or {}).get("spec") or {}) if kind == "CronJob" else spec
        job_meta = ((spec.get("jobTemplate") or {}).get("metadata") or {}) if kind == "CronJob" else meta
        self.queue = (job_meta.get("labels") or {}).get(QUEUE_LABEL) or None  # the Jobs' Kueue LocalQueue
        self.suspend = bool(spec.get("suspend"))
        pod = (job_spec.get("template") or {}).get("spec") or {}
        containers = pod.get("containers") or []
        self.image = str(containers[0].get("image") or "") if containers else ""
        self.product = (pod.get("nodeSelector") or {}).get(PRODUCT_LABEL)
        indexed = job_spec.get("completionMode") == "Indexed"
        self.workers = int(job_spec.get("completions") or 1) if indexed else int(job_spec.get("parallelism") or 1)
        self.gpus = 0
        self.mig_profile: str | None = None
        self.mig_count = 0
        for container in containers:
            limits = (container.get("resources") or {}).get("limits") or {}
            for resource, count in limits.items():
                if resource == "nvidia.com/gpu":
                    self.gpus += int(count)
                elif str(resource).startswith("nvidia.com/mig-"):
                    self.mig_profile = str(resource)[len("nvidia.com/mig-"):]
                    self.mig_count += int(count)

    def problem(self, kind: str) -> str | None:
        """Why the simulated API server refuses it, in its words; None when it is fine."""
        limit = 52 if kind == "CronJob" else 63
        if not self.name or len(self.name) > limit or not _RFC1123.match(self.name):
            return (f'{kind}.batch "{self.name}" is invalid: metadata.name: Invalid value: "{self.name}": a '
                    f"lowercase RFC 1123 name of at most {limit} characters")
        if self.namespace not in NAMESPACES:
            return f'namespaces "{self.namespace}" not found'
        if not self.image:
            return f'{kind}.batch "{self.name}" is invalid: spec.template.spec.containers[0].image: Required value'
        if self.mig_profile is not None:
            if self.mig_profile not in MIG_PROFILES:
                return (f"0/0 nodes offer nvidia.com/mig-{self.mig_profile}: the simulated cluster has "
                        f"{', '.join(sorted(MIG_PROFILES))}")
            if self.mig_count != 1 or self.workers != 1:
                return "the simulated cluster runs a MIG job as one pod with one MIG device"
        elif self.gpus < 1:
            return "the simulated cluster runs GPU jobs only: ask for at least 1 nvidia.com/gpu"
        return None


class JobApi(Actions):
    """Submit, delete, suspend, trigger, logs and describe on the simulated cluster."""

    seed: int
    _job_api: tuple[IdFactory, random.Random, dict[tuple[str, str], dict[str, Any]]] | None = None

    def _job_tools(self) -> tuple[IdFactory, random.Random, dict[tuple[str, str], dict[str, Any]]]:
        """Own generators and the Services, made on first use (the demo never pays for them)."""
        if self._job_api is None:
            rng = random.Random(f"{self.seed}:jobs")
            self._job_api = (IdFactory(rng), random.Random(f"{self.seed}:job-runs"), {})
        return self._job_api

    # ----------------------------------------------------------------- finding

    def _find_job(self, namespace: str, name: str) -> SimJob:
        for job in self._jobs.values():
            if job.name == name and job.namespace == namespace:
                return job
        archived = self._archived(namespace, name)
        if archived is not None:
            return archived
        raise KeyError(f'jobs.batch "{name}" not found')

    def _find_cronjob(self, namespace: str, name: str) -> SimCronJob:
        for cj in self._cronjobs:
            if cj.name == name and cj.namespace == namespace:
                return cj
        raise KeyError(f'cronjobs.batch "{name}" not found')

    def _exists(self, kind: str, namespace: str, name: str) -> bool:
        try:
            if kind == "Job":
                self._find_job(namespace, name)
            elif kind == "CronJob":
                self._find_cronjob(namespace, name)
            elif kind in REPLICA_SPECS:
                return any(g.namespace == namespace and g.name == name for g in self._gangs)
            else:
                return (namespace, name) in self._job_tools()[2]
        except KeyError:
            return False
        return True

    # ----------------------------------------------------------------- submit

    def apply_manifests(self, manifests: list[dict[str, Any]], dry_run: bool = False) -> list[str]:
        """Create the objects (all or none); ``"Kind namespace/name"`` for each.

        Raises:
            ValueError: one is refused (the message is the API server's).
        """
        planned: list[tuple[str, str, str, _Workload | None, dict[str, Any]]] = []
        names: set[tuple[str, str, str]] = set()
        for manifest in manifests:
            kind = str(manifest.get("kind") or "")
            meta = manifest.get("metadata") or {}
            namespace, name = str(meta.get("namespace") or "default"), str(meta.get("name") or "")
            if kind == "Service":
                if not name or len(name) > 63 or not re.match(r"^[a-z]([-a-z0-9]*[a-z0-9])?$", name):
                    raise ValueError(f'Service "{name}" is invalid: metadata.name: a DNS-1035 label is required')
                if namespace not in NAMESPACES:
                    raise ValueError(f'namespaces "{namespace}" not found')
                workload = None
            elif kind in ("Job", "CronJob"):
                workload = _Workload(kind, manifest)
                problem = workload.problem(kind)
                if problem:
                    raise ValueError(problem)
                if kind == "CronJob":
                    try:
                        cron_next(workload.schedule, self._now)
                    except Exception:  # noqa: BLE001 - cronsim's own errors
                        raise ValueError(f'CronJob.batch "{name}" is invalid: spec.schedule: Invalid value: '
                                         f'"{workload.schedule}"') from None
            elif kind in REPLICA_SPECS:  # an MPIJob or a PyTorchJob (its operator is simulated)
                if (problem := gang_problem(kind, manifest, NAMESPACES)) is not None:
                    raise ValueError(problem)
                workload = None
            else:
                raise ValueError(f'no matches for kind "{kind}" in the simulated cluster')
            plural = {"Job": "jobs.batch", "CronJob": "cronjobs.batch", "Service": "services", **PLURALS}[kind]
            if (kind, namespace, name) in names or self._exists(kind, namespace, name):
                raise ValueError(f'{plural} "{name}" already exists')
            names.add((kind, namespace, name))
            planned.append((kind, namespace, name, workload, manifest))
        if dry_run:
            return [f"{kind} {namespace}/{name}" for kind, namespace, name, _w, _m in planned]
        done = []
        for kind, namespace, name, workload, manifest in planned:
            if kind in REPLICA_SPECS:
                add_gang(self, kind, manifest, self._job_tools()[0])
            elif workload is None:
                self._job_tools()[2][(namespace, name)] = {"manifest": copy.deepcopy(manifest), "created": self._now}
            elif kind == "Job":
                self._create_job(workload, copy.deepcopy(manifest))
            else:
                self._create_cronjob(workload, copy.deepcopy(manifest))
            done.append(f"{kind} {namespace}/{name}")
        return done

    def _new_sim_job(self, name: str, namespace: str, gpus: int, mig: str | None, product: str | None,
                     image: str, owner: str, workers: int, minutes: tuple[float, float],
                     cronjob: str | None = None) -> SimJob:
        ids, runs, _services = self._job_tools()
        owner = owner or (TEAMS[namespace][0] if namespace in TEAMS else "")
        job = SimJob(ids.uuid4(), name, namespace, self._now, 1 if mig else gpus, mig, product,
                     round(runs.uniform(*minutes) * 60.0), image, owner, ids.uuid4(), cronjob=cronjob)
        job.workers = workers
        return job

    def _create_job(self, w: _Workload, manifest: dict[str, Any]) -> None:
        job = self._new_sim_job(w.name, w.namespace, w.gpus * w.workers, w.mig_profile, w.product, w.image,
                                w.owner, w.workers, RUN_MINUTES)
        job.manifest = manifest
        job.queue = w.queue
        if w.suspend:
            job.state = JobState.SUSPENDED
        self._add_job(job)

    def _create_cronjob(self, w: _Workload, manifest: dict[str, Any]) -> None:
        ids = self._job_tools()[0]
        cj = SimCronJob(ids.uuid4(), w.name, w.namespace, w.schedule, self._now, w.gpus * w.workers,
                        w.mig_profile, w.product, RUN_MINUTES, w.image,
                        w.owner or (TEAMS[w.namespace][0] if w.namespace in TEAMS else ""), suspended=w.suspend)
        cj.policy = w.policy
        cj.workers = w.workers
        cj.queue = w.queue
        cj.manifest = manifest
        cj.next = None if w.suspend else cron_next(w.schedule, self._now)
        self._cronjobs.append(cj)

    # ----------------------------------------------------------------- delete, suspend, trigger

    def delete_object(self, kind: str, namespace: str, name: str) -> None:
        """Delete a Job, or a CronJob with its Jobs; the Services they own go with them.

        Raises:
            KeyError: no such object.
        """
        if kind == "Job":
            self.delete_job(self._find_job(namespace, name).uid)
        elif kind == "CronJob":
            cj = self._find_cronjob(namespace, name)
            self._cronjobs.remove(cj)
            for job in [j for j in self._jobs.values() if j.cronjob == name and j.namespace == namespace]:
                self.delete_job(job.uid)
        elif kind in REPLICA_SPECS:
            delete_gang(self, find_gang(self, kind, namespace, name))
        else:
            raise ValueError(f"cannot delete a {kind}: only Jobs, CronJobs, MPIJobs and PyTorchJobs")
        self._job_tools()[2].pop((namespace, name), None)

    def suspend_object(self, kind: str, namespace: str, name: str, suspended: bool) -> None:
        """Set ``spec.suspend``: a suspended Job's pod is deleted (its GPUs freed), a resumed one
        gets a new pod; a suspended CronJob starts no run.

        Raises:
            KeyError: no such object.
        """
        if kind == "CronJob":
            cj = self._find_cronjob(namespace, name)
            cj.suspended = suspended
            cj.next = None if suspended else cron_next(cj.schedule, self._now)
            return
        if kind in REPLICA_SPECS:
            return suspend_gang(self, find_gang(self, kind, namespace, name), suspended)
        if kind != "Job":
            raise ValueError(f"cannot suspend a {kind}: only Jobs, CronJobs, MPIJobs and PyTorchJobs")
        job = self._find_job(namespace, name)
        if job.state in FINISHED_STATES:
            return  # a finished Job ignores spec.suspend, as the controller does
        self._revive(job)
        if suspended and self._kueue is not None and self._kueue.release(job):
            job.run += 1
            job.view = None  # Kueue held it suspended; now its owner does, out of its queue
        elif suspended and job.state is not JobState.SUSPENDED:
            if job.state is JobState.RUNNING:
                self._scheduler.release(job)
            self._pending.pop(job.uid, None)
            job.state = JobState.SUSPENDED
            job.node = None
            job.started = None
            job.pending_reason = None
            job.run += 1  # what was scheduled for the old pod (its end, a resume) no longer applies
            job.view = None
        elif not suspended and job.state is JobState.SUSPENDED:
            job.pod_uid = self._job_tools()[0].uuid4()
            job.give_up_at = max(job.give_up_at, self._now + 3 * 3600.0)
            self._make_pending(job)

    def trigger_cronjob(self, namespace: str, name: str) -> str:
        """A Job from the CronJob's template now (``kubectl create job --from=cronjob/…``); its name.

        Raises:
            KeyError: no such CronJob.
        """
        cj = self._find_cronjob(namespace, name)
        ids, runs, _services = self._job_tools()
        suffix = "".join(runs.choice(_SUFFIX) for _ in range(5))
        job_name = f"{cj.name[:63 - 13].rstrip('-')}-manual-{suffix}"
        product = cj.product if cj.product in self._products else None
        job = self._new_sim_job(job_name, cj.namespace, cj.gpus, cj.mig_profile, product, cj.image, cj.owner,
                                cj.workers, cj.minutes, cronjob=cj.name)
        job.queue = cj.queue
        self._add_job(job)
        return job_name

    # ----------------------------------------------------------------- logs

    def pod_log(self, namespace: str, pod: str, start: int | None = None,
                tail: int | None = None) -> tuple[list[str], int, bool]:
        """Lines of a pod's log (from ``start``, or the last ``tail``), how many there are, and
        whether its container has exited.

        Raises:
            KeyError: no such pod. ValueError: its container has not started.
        """
        for job in itertools.chain(self._jobs.values(), self._archived_pods(namespace, pod)):
            if job.namespace != namespace or not pod.startswith(job.name):
                continue
            names = job.pod_names()
            if pod not in names:
                continue
            if job.state is JobState.PENDING or job.started is None:
                raise ValueError(_WAITING.format(pod=pod))
            ended = job.finished if job.state in FINISHED_STATES else None
            per_pod = job.gpus // max(job.workers, 1) if not job.mig_profile else 0
            subject = training_log.TrainingPod(job.name, job.pod_uid, job.image, per_pod, job.mig_profile,
                                               job.workers, names.index(pod), job.started, ended,
                                               job.state is JobState.FAILED)
            return training_log.lines(subject, self._now, start, tail)
        for gang in getattr(self, "_gangs", ()):  # an MPIJob's launcher prints what rank 0 prints
            if gang.namespace == namespace and pod == gang.launcher_pod() and gang.members():
                return self.pod_log(namespace, gang.members()[0].pod_names()[0], start, tail)
        raise KeyError(f'pods "{pod}" not found')

    # ----------------------------------------------------------------- describe

    def describe_object(self, kind: str, namespace: str, name: str) -> str:
        """The object as YAML with its status, then its events.

        Raises:
            KeyError: no such object.
        """
        if kind == "Job":
            job = self._find_job(namespace, name)
            return describe_text(self._job_object(job), self._job_events(job), self._now)
        if kind == "CronJob":
            cj = self._find_cronjob(namespace, name)
            return describe_text(self._cronjob_object(cj), self._cronjob_events(cj), self._now)
        if kind in REPLICA_SPECS:
            return describe_gang(self, find_gang(self, kind, namespace, name))
        raise ValueError(f"cannot describe a {kind}: only Jobs, CronJobs, MPIJobs and PyTorchJobs")

    def _job_object(self, job: SimJob) -> dict[str, Any]:
        if job.manifest is not None:
            obj = copy.deepcopy(job.manifest)
        else:
            resources = ({f"nvidia.com/mig-{job.mig_profile}": 1} if job.mig_profile
                         else {"nvidia.com/gpu": job.gpus // max(job.workers, 1)})
            pod: dict[str, Any] = {"restartPolicy": "Never", "containers": [
                {"name": "train", "image": job.image, "resources": {"limits": resources}}]}
            if job.product:
                pod["nodeSelector"] = {PRODUCT_LABEL: job.product}
            obj = {"apiVersion": "batch/v1", "kind": "Job",
                   "metadata": {"name": job.name, "namespace": job.namespace, "labels": {"owner": job.owner}},
                   "spec": {"backoffLimit": 6, "template": {"spec": pod}}}
        meta = obj.setdefault("metadata", {})
        meta.update(uid=job.uid, creationTimestamp=stamp(job.created))
        if job.cronjob:
            owner = next((c for c in self._cronjobs if c.name == job.cronjob and c.namespace == job.namespace), None)
            meta["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "CronJob", "name": job.cronjob,
                                        "uid": owner.uid if owner else "", "controller": True}]
        obj.setdefault("spec", {})["suspend"] = job.state is JobState.SUSPENDED
        status: dict[str, Any] = {}
        if job.started is not None:
            status["startTime"] = stamp(job.started)
        if job.state in (JobState.PENDING, JobState.RUNNING):
            status["active"] = max(job.workers, 1)
            status["ready"] = max(job.workers, 1) if job.state is JobState.RUNNING else 0
        elif job.state is JobState.SUCCEEDED and job.finished is not None:
            status.update(succeeded=max(job.workers, 1), completionTime=stamp(job.finished),
                          conditions=[{"type": "Complete", "status": "True"}])
        elif job.state is JobState.FAILED:
            status.update(failed=1, conditions=[{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
                                                 "message": "Job has reached the specified backoff limit"}])
        elif job.state is JobState.SUSPENDED:
            status["conditions"] = [{"type": "Suspended", "status": "True", "reason": "JobSuspended",
                                     "message": "Job suspended"}]
        obj["status"] = status
        return obj

    def _job_events(self, job: SimJob) -> list[EventLine]:
        events = []
        pods = job.pod_names()
        for pod in pods:
            events.append(EventLine("Normal", "SuccessfulCreate", job.created, "job-controller", f"Created pod: {pod}"))
        if job.state is JobState.PENDING:
            for pod in pods:
                events.append(EventLine("Warning", "FailedScheduling", self._now, "default-scheduler",
                                        job.pending_reason or "waiting for the scheduler", about=f"pod/{pod}"))
        if job.started is not None and job.node is not None:
            for pod in pods:
                events.append(EventLine("Normal", "Scheduled", job.started, "default-scheduler",
                                        f"Successfully assigned {job.namespace}/{pod} to {job.node.node_name}",
                                        about=f"pod/{pod}"))
                events.append(EventLine("Normal", "Started", job.started, "kubelet", "Started container train",
                                        about=f"pod/{pod}"))
        if job.state is JobState.SUCCEEDED:
            events.append(EventLine("Normal", "Completed", job.finished, "job-controller", "Job completed"))
        elif job.state is JobState.FAILED:
            events.append(EventLine("Warning", "BackoffLimitExceeded", job.finished, "job-controller",
                                    "Job has reached the specified backoff limit"))
        elif job.state is JobState.SUSPENDED:
            events.append(EventLine("Normal", "Suspended", self._now, "job-controller", "Job suspended"))
        return events

    def _cronjob_object(self, cj: SimCronJob) -> dict[str, Any]:
        if cj.manifest is not None:
            obj = copy.deepcopy(cj.manifest)
        else:
            resources = ({f"nvidia.com/mig-{cj.mig_profile}": 1} if cj.mig_profile else {"nvidia.com/gpu": cj.gpus})
            obj = {"apiVersion": "batch/v1", "kind": "CronJob",
                   "metadata": {"name": cj.name, "namespace": cj.namespace, "labels": {"owner": cj.owner}},
                   "spec": {"schedule": cj.schedule, "concurrencyPolicy": cj.policy, "jobTemplate": {"spec": {
                       "template": {"spec": {"restartPolicy": "Never", "containers": [
                           {"name": "train", "image": cj.image, "resources": {"limits": resources}}]}}}}}}
        obj.setdefault("metadata", {}).update(uid=cj.uid, creationTimestamp=stamp(cj.created))
        obj.setdefault("spec", {})["suspend"] = cj.suspended
        active = [j for j in self._jobs.values() if j.cronjob == cj.name and j.namespace == cj.namespace
                  and j.state in (JobState.PENDING, JobState.RUNNING)]
        status: dict[str, Any] = {}
        if active:
            status["active"] = [{"kind": "Job", "namespace": j.namespace, "name": j.name, "uid": j.uid,
                                 "apiVersion": "batch/v1"} for j in active]
        if cj.last is not None:
            status["lastScheduleTime"] = stamp(cj.last)
        obj["status"] = status
        return obj

    def _cronjob_events(self, cj: SimCronJob) -> list[EventLine]:
        runs = sorted((j for j in self._jobs.values() if j.cronjob == cj.name and j.namespace == cj.namespace),
                      key=lambda j: j.created)
        events = [EventLine("Normal", "SuccessfulCreate", j.created, "cronjob-controller", f"Created job {j.name}")
                  for j in runs]
        for j in runs:
            if j.state in FINISHED_STATES and j.finished is not None:
                events.append(EventLine("Normal", "SawCompletedJob", j.finished, "cronjob-controller",
                                        f"Saw completed job: {j.name}, status: "
                                        f"{'Complete' if j.state is JobState.SUCCEEDED else 'Failed'}"))
        return events

