"""Distributed training jobs through the Kubernetes job backend, against the Kubernetes API test
server (tests/kube_server.py) serving the training CRDs (tests/kube_training.py).

MPIJobs, PyTorchJobs, TrainJobs and JobSets are read where discovery shows their CRD: each
kind's states, its roles with replicas and GPUs per replica, its nodes, restarts and why its
workers wait; the batch Jobs and JobSets they own are not listed again, and their pods are the
job's. Without the CRDs the reading and the requests are what they were.
"""

from __future__ import annotations

import logging

import pytest

from gpuconsole.model import Job, JobRole, JobState, JobsReading
from tests import kube_server as ks
from tests import kube_training as kt
from tests.kube_server import INSUFFICIENT_GPU, KubeCluster

pytestmark = pytest.mark.slow


def install(kube: KubeCluster) -> None:
    kube.server.crds = set(ks.TRAINING_CRDS)


def job_named(reading: JobsReading, name: str) -> Job:
    return next(j for j in reading.jobs if j.name == name)


def roles(job: Job) -> dict[str, JobRole]:
    return {r.name: r for r in job.roles}


def mpi_cluster(kube: KubeCluster) -> dict:
    """A running MPIJob: its launcher Job and pod, two 8-GPU workers on two nodes."""
    kube.add(ks.node("gpu-node-1"), ks.node("gpu-node-2"))
    mpi = kube.server.add(kt.mpijob("allreduce", workers=2, gpus=8))
    launcher = kube.server.add(kt.launcher_job(mpi))
    launcher_pod = kube.server.add(ks.pod_for(launcher, node="gpu-node-1"))
    workers = [kube.server.add(kt.kubeflow_pod(mpi, "Worker", i, node=f"gpu-node-{i + 1}")) for i in range(2)]
    return {"mpi": mpi, "launcher": launcher, "launcher_pod": launcher_pod, "workers": workers}


def test_discovery_shows_each_training_group_with_every_version_while_installed(kube: KubeCluster) -> None:
    import urllib.request

    def groups() -> dict[str, list[str]]:
        request = urllib.request.Request(f"{kube.server.url}/apis", headers={"Authorization": f"Bearer {ks.TEST_TOKEN}"})
        with urllib.request.urlopen(request, timeout=5) as answer:  # noqa: S310 - the local test server
            import json

            return {g["name"]: [v["version"] for v in g["versions"]] for g in json.load(answer)["groups"]}

    assert "kubeflow.org" not in groups()
    install(kube)
    served = groups()
    assert sorted(served["kubeflow.org"]) == ["v1", "v2beta1"]
    assert served["trainer.kubeflow.org"] == ["v1alpha1"] and served["jobset.x-k8s.io"] == ["v1alpha2"]


def test_a_running_mpijob_is_one_job_with_its_launcher_and_workers(kube: KubeCluster) -> None:
    install(kube)
    objects = mpi_cluster(kube)
    reading = kube.backend().poll_jobs()
    assert [j.name for j in reading.jobs] == ["allreduce"]  # the launcher Job is the MPIJob's, not its own
    job = reading.jobs[0]
    assert (job.kind, job.state, job.gpus, job.namespace) == ("MPIJob", JobState.RUNNING, 16, "train")
    assert roles(job)["Launcher"] == JobRole("Launcher", 1, active=1, gpus_per_replica=0,
                                             pod=objects["launcher_pod"]["metadata"]["name"])
    worker = roles(job)["Worker"]
    assert (worker.replicas, worker.active, worker.gpus_per_replica, worker.pod) == (2, 2, 8, "allreduce-worker-0")
    assert [r.name for r in job.roles] == ["Launcher", "Worker"]
    assert job.pod == objects["launcher_pod"]["metadata"]["name"]  # logs: the launcher's mpirun
    assert job.nodes == ("gpu-node-1", "gpu-node-2")
    uids = {o["metadata"]["uid"] for o in (objects["launcher_pod"], *objects["workers"])}
    assert set(job.pod_uids) == uids and all(job.owns_pod(u) for u in uids)
    assert job.restarts == 0 and job.started is not None
    nodes = {n.name: n.gpu_allocated for n in reading.nodes}
    assert nodes == {"gpu-node-1": 8, "gpu-node-2": 8}


def test_a_pytorchjob_whose_workers_cannot_be_scheduled_says_which_role_waits_and_why(kube: KubeCluster) -> None:
    install(kube)
    kube.add(ks.node("gpu-node-1"))
    torch = kube.server.add(kt.pytorchjob("bert-ddp", workers=3, gpus=8, state="created"))
    kube.server.add(kt.kubeflow_pod(torch, "Master", 0, node="gpu-node-1"))
    for i in range(3):
        kube.server.add(kt.kubeflow_pod(torch, "Worker", i, node=None, phase="Pending", unschedulable=INSUFFICIENT_GPU))
    job = kube.backend(watch=False).poll_jobs().jobs[0]
    assert (job.kind, job.state, job.phase, job.gpus) == ("PyTorchJob", JobState.PENDING, "created", 32)
    assert job.pending_reason == f"Worker: {INSUFFICIENT_GPU}"
    assert roles(job)["Worker"].pending_reason == INSUFFICIENT_GPU and roles(job)["Worker"].active == 0
    assert roles(job)["Master"].pending_reason is None and roles(job)["Master"].active == 1
    assert job.pod == "bert-ddp-master-0"


@pytest.mark.parametrize(("state", "expected", "phase"), [
    ("created", JobState.PENDING, "created"), ("running", JobState.RUNNING, None),
    ("restarting", JobState.RUNNING, "restarting"), ("succeeded", JobState.SUCCEEDED, None),
    ("failed", JobState.FAILED, None), ("suspended", JobState.SUSPENDED, None)])
def test_the_kubeflow_kinds_states_come_from_their_conditions(kube: KubeCluster, state, expected, phase) -> None:
    install(kube)
    kube.add(kt.mpijob("mpi", state=state), kt.pytorchjob("torch", state=state))
    reading = kube.backend(watch=False).poll_jobs()
    for name in ("mpi", "torch"):
        job = job_named(reading, name)
        assert (job.state, job.phase) == (expected, phase)
        assert (job.finished is not None) == (state in ("succeeded", "failed"))


@pytest.mark.parametrize(("state", "expected"), [
    ("created", JobState.PENDING), ("running", JobState.RUNNING), ("succeeded", JobState.SUCCEEDED),
    ("failed", JobState.FAILED), ("suspended", JobState.SUSPENDED)])
def test_jobset_and_trainjob_states(kube: KubeCluster, state, expected) -> None:
    install(kube)
    kube.add(kt.jobset("js", state=state), kt.trainjob("tj", state=state))
    reading = kube.backend(watch=False).poll_jobs()
    assert job_named(reading, "js").state is expected
    assert job_named(reading, "tj").state is expected


def test_a_jobset_counts_pods_per_role_and_owns_its_child_jobs_and_their_pods(kube: KubeCluster) -> None:
    install(kube)
    kube.add(ks.node("gpu-node-1"), ks.node("gpu-node-2"))
    js = kube.server.add(kt.jobset("llm-pretrain", roles=(("driver", 1, 1, 0), ("workers", 2, 2, 4)), restarts=1))
    driver = kube.server.add(kt.jobset_child(js, "driver", 0))
    kube.server.add(kt.jobset_pod(driver, 0, node="gpu-node-1"))
    for i in range(2):
        child = kube.server.add(kt.jobset_child(js, "workers", i))
        for index in range(2):
            kube.server.add(kt.jobset_pod(child, index, node=f"gpu-node-{i + 1}"))
    reading = kube.backend(watch=False).poll_jobs()
    assert [j.name for j in reading.jobs] == ["llm-pretrain"]
    job = reading.jobs[0]
    assert (job.kind, job.state, job.gpus, job.restarts) == ("JobSet", JobState.RUNNING, 16, 1)
    workers = roles(job)["workers"]
    assert (workers.replicas, workers.active, workers.gpus_per_replica) == (4, 4, 4)
    assert len(job.pod_uids) == 5 and job.nodes == ("gpu-node-1", "gpu-node-2")


def test_a_trainjob_takes_its_roles_from_its_jobset_which_is_not_listed_again(kube: KubeCluster) -> None:
    install(kube)
    kube.add(ks.node("gpu-node-1"))
    tj = kube.server.add(kt.trainjob("llama-ft", nodes=None, gpus=4))
    js = kube.server.add(kt.trainjob_jobset(tj, nodes=2))
    child = kube.server.add(kt.jobset_child(js, "node", 0))
    pod = kube.server.add(kt.jobset_pod(child, 0, node="gpu-node-1"))
    kube.server.add(kt.jobset_pod(child, 1, node=None, phase="Pending", unschedulable=INSUFFICIENT_GPU))
    reading = kube.backend(watch=False).poll_jobs()
    assert [j.name for j in reading.jobs] == ["llama-ft"]
    job = reading.jobs[0]
    assert (job.kind, job.gpus, roles(job)["node"].replicas, roles(job)["node"].gpus_per_replica) == ("TrainJob", 8, 2, 4)
    assert roles(job)["node"].pending_reason == INSUFFICIENT_GPU
    assert job.owns_pod(pod["metadata"]["uid"])


def test_a_trainjob_alone_uses_its_trainer_numnodes(kube: KubeCluster) -> None:
    install(kube)
    kube.add(kt.trainjob("solo", nodes=3, gpus=8, state="created"))
    job = kube.backend(watch=False).poll_jobs().jobs[0]
    assert (job.gpus, roles(job)["node"].replicas, job.state) == (24, 3, JobState.PENDING)


def test_watched_mpijob_changes_reach_the_next_poll(kube: KubeCluster) -> None:
    install(kube)
    mpi_cluster(kube)
    backend = kube.backend()
    assert backend.poll_jobs().jobs[0].state is JobState.RUNNING

    def finish(obj: dict) -> None:
        obj["status"] = kt.mpijob("x", state="succeeded")["status"]

    kube.server.modify("MPIJob", "allreduce", "train", finish)
    reading = ks.poll_until(backend.poll_jobs, lambda r: r.jobs and r.jobs[0].state is JobState.SUCCEEDED)
    assert reading.jobs[0].finished is not None
    kube.server.delete("MPIJob", "allreduce", "train")
    reading = ks.poll_until(backend.poll_jobs, lambda r: all(j.kind == "Job" for j in r.jobs))
    assert [j.name for j in reading.jobs] == ["allreduce-launcher"]  # the CRD's object gone: a Job again


def test_without_the_crds_nothing_changes_and_nothing_more_is_asked(kube: KubeCluster, caplog) -> None:
    kube.add(ks.node("gpu-node-1"))
    plain = kube.server.add(ks.job("train-a", "ml", gpus=2))
    kube.server.add(ks.pod_for(plain))
    caplog.set_level(logging.DEBUG, logger="gpuconsole")
    backend = kube.backend()
    reading = backend.poll_jobs()
    assert [(j.name, j.kind, j.roles) for j in reading.jobs] == [("train-a", "Job", ())]
    backend.poll_jobs()
    discovery = [r for r in kube.server.requests if r.path.rstrip("/") == "/apis"]
    assert len(discovery) == 1  # asked once, not on every poll
    for group in ("kubeflow.org", "trainer.kubeflow.org", "jobset.x-k8s.io"):
        assert not kube.server.requested(group)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_crds_installed_later_are_found_at_the_next_discovery(kube: KubeCluster) -> None:
    backend = kube.backend(discovery_every=0.0)
    assert backend.poll_jobs().jobs == ()
    install(kube)
    kube.add(kt.mpijob("late"))
    reading = ks.poll_until(backend.poll_jobs, lambda r: r.jobs)
    assert reading.jobs[0].kind == "MPIJob"


def test_a_namespace_scoped_reader_lists_training_jobs_in_its_namespaces(kube: KubeCluster) -> None:
    install(kube)
    kube.add(kt.mpijob("mine", "team-a"), kt.mpijob("theirs", "team-b"))
    reading = kube.backend(namespaces=("team-a",), watch=False).poll_jobs()
    assert [j.name for j in reading.jobs] == ["mine"]
    assert kube.server.requested("/apis/kubeflow.org/v2beta1/namespaces/team-a/mpijobs")
    assert not kube.server.requested("/apis/kubeflow.org/v2beta1/mpijobs")


# --------------------------------------------------------------------------- GPUs, holders and costs


def test_the_mpijob_holds_its_workers_gpus_and_pays_for_them(kube: KubeCluster) -> None:
    from rich.style import Style

    from gpuconsole.core.fleet.wiring import pod_namespace
    from gpuconsole.core.money import costs
    from gpuconsole.core.money.attribution import attribute, job_rate
    from gpuconsole.model import FleetSnapshot, Gpu, GpuProcess, Instance, InstanceState, Market
    from gpuconsole.ui.palette import Palette
    from gpuconsole.ui.panes.gpus import process_detail
    from gpuconsole.ui.screens.gpu_detail import job_names

    install(kube)
    objects = mpi_cluster(kube)
    reading = kube.backend(watch=False).poll_jobs()
    worker = objects["workers"][1]["metadata"]["uid"]
    proc = GpuProcess(pid=4242, gpu_uuid="GPU-7", name="python", memory_used_mib=70000, pod_uid=worker)
    held = Gpu(uuid="GPU-7", node="gpu-node-2", index=7, name="NVIDIA A100-SXM4-80GB", utilization=97.0,
               memory_used_mib=70000, memory_total_mib=81920, temperature_c=60, power_w=390.0, power_limit_w=400.0,
               processes=(proc,))
    instances = tuple(Instance(instance_id=f"i-{n}", instance_type="p4d.24xlarge", region="us-east-1",
                               availability_zone="us-east-1a", market=Market.ON_DEMAND, state=InstanceState.RUNNING,
                               launch_time=0.0, price_per_hour=32.8, gpus=8, node=f"gpu-node-{n}") for n in (1, 2))
    snap = FleetSnapshot(taken_at=reading.taken_at, gpus=(held,), jobs=reading.jobs, nodes=reading.nodes,
                         instances=instances)
    who = attribute(snap, held)
    assert who.sentence() == "GPU 7 on gpu-node-2: 97% busy, held by job allreduce of ns train, costing $4.10/h"
    plain = Style()
    assert "held by train/allreduce" in process_detail(proc, snap, Palette(*[plain] * 6)).plain
    assert job_names(snap.jobs)[worker] == "train/allreduce"
    assert pod_namespace(reading, worker) == "train"
    # Per job and per namespace: the MPIJob's 16 GPUs at $4.10 a GPU-hour.
    assert job_rate(snap, reading.jobs[0]) == pytest.approx(16 * 4.1)
    by_job = costs.per_job(snap.jobs, instances, 0.0, reading.taken_at)
    assert [(line.key, round(line.per_hour, 2)) for line in by_job] == [("train/allreduce", 65.6)]
    assert [line.key for line in costs.per_namespace(snap.jobs, instances, 0.0, reading.taken_at)] == ["train"]


def test_snapshot_json_has_kind_and_roles_for_every_job(kube: KubeCluster, tmp_path) -> None:
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    install(kube)
    mpi_cluster(kube)
    torch = kube.server.add(kt.pytorchjob("bert-ddp", workers=2, gpus=8, state="created"))
    for i in range(2):
        kube.server.add(kt.kubeflow_pod(torch, "Worker", i, node=None, phase="Pending", unschedulable=INSUFFICIENT_GPU))
    plain = kube.server.add(ks.job("plain", "ml", gpus=1))
    kube.server.add(ks.pod_for(plain))
    env = {**os.environ, "KUBECONFIG": str(tmp_path / "none"), "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    result = subprocess.run(
        [sys.executable, "-m", "gpuconsole", "snapshot", "--json", "--no-db", "--gpus", "off", "--cloud", "off",
         "--kubeconfig", str(kube.kubeconfig)],
        capture_output=True, text=True, timeout=60, env=env, check=False)
    assert result.returncode == 0, result.stderr
    jobs = {j["name"]: j for j in json.loads(result.stdout)["jobs"]}
    assert {name: j["kind"] for name, j in jobs.items()} == {"allreduce": "MPIJob", "bert-ddp": "PyTorchJob", "plain": "Job"}
    assert jobs["plain"]["roles"] == []
    workers = next(r for r in jobs["allreduce"]["roles"] if r["name"] == "Worker")
    assert {k: workers[k] for k in ("name", "replicas", "active", "gpus_per_replica")} == {
        "name": "Worker", "replicas": 2, "active": 2, "gpus_per_replica": 8}
    assert jobs["allreduce"]["gpus"] == 16 and jobs["bert-ddp"]["gpus"] == 24
    assert jobs["bert-ddp"]["pending_reason"] == f"Worker: {INSUFFICIENT_GPU}"


# --------------------------------------------------------------------------- actions


def test_suspend_resume_and_delete_go_through_the_action_path_to_each_kinds_own_field(kube: KubeCluster) -> None:
    from gpuconsole.core.ops.actions import ActionError, ActionLog
    from gpuconsole.core.ops.job_ops import JobOps
    from tests.helpers import FrozenClock

    install(kube)
    kube.add(kt.mpijob("allreduce"), kt.jobset("sweep"), kt.pytorchjob("bert-ddp"))
    log = ActionLog()
    ops = JobOps(kube.backend(watch=False), FrozenClock(1_700_000_000.0), log)
    assert ops.suspend("MPIJob", "train", "allreduce", "yes").ok
    assert kube.server.get("MPIJob", "allreduce", "train")["spec"]["runPolicy"]["suspend"] is True
    assert ops.resume("MPIJob", "train", "allreduce").ok
    assert kube.server.get("MPIJob", "allreduce", "train")["spec"]["runPolicy"]["suspend"] is False
    assert ops.suspend("JobSet", "train", "sweep", "yes").ok
    assert kube.server.get("JobSet", "sweep", "train")["spec"]["suspend"] is True
    assert ops.delete("PyTorchJob", "train", "bert-ddp", "yes").ok
    assert kube.server.get("PyTorchJob", "bert-ddp", "train") is None
    assert [r.request.params for r in log.recent()][-1] == (("kind", "PyTorchJob"),)
    with pytest.raises(ActionError, match="needs a yes"):  # a delete still needs its "yes"
        ops.delete("MPIJob", "train", "allreduce")
    assert kube.server.get("MPIJob", "allreduce", "train") is not None
