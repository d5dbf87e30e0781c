"""Kueue and Volcano through the job backend, against the Kubernetes API test server.

The server serves Kueue's ``kueue.x-k8s.io`` (v1beta2, or v1beta1 for an older Kueue) and
Volcano's groups only while their CRDs are installed; the backend reads them where discovery
shows them, and says why each job waits: quota (its queue's words and place), gang, capacity
(the scheduler's words), admission check, preemption. Without the CRDs nothing changes and
nothing more is asked after discovery.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from gpuconsole.backends.kube.source import KubeJobs
from gpuconsole.core.ops.actions import ActionDenied, ActionError, ActionLog
from gpuconsole.core.ops.job_ops import JobOps
from gpuconsole.model import Job, JobsReading, JobState, QueueKind, WaitingFor
from tests import kube_queues as kq
from tests import kube_server as ks
from tests.kube_rbac import DEV_TOKEN, READ, RbacApiServer
from tests.kube_server import TEST_TOKEN, KubeCluster

pytestmark = pytest.mark.slow


def poll_until(backend: KubeJobs, check: Callable[[JobsReading], object]) -> JobsReading:
    return ks.poll_until(backend.poll_jobs, check)


def jobs(reading: JobsReading) -> dict[str, Job]:
    return {j.name: j for j in reading.jobs}


def get(server: ks.KubeApiServer, path: str) -> dict:
    request = urllib.request.Request(server.url + path, headers={"Authorization": f"Bearer {TEST_TOKEN}"})
    with urllib.request.urlopen(request, timeout=5) as answer:  # noqa: S310 - the test server
        return json.loads(answer.read())


def status(server: ks.KubeApiServer, path: str) -> int:
    try:
        get(server, path)
    except urllib.error.HTTPError as exc:
        return exc.code
    return 200


def queued_job(kube: KubeCluster, name: str, queue: str, namespace: str = "team-a", *, gpus: int = 4,
               priority: int = 0, created: float | None = None, state: str = "pending", **kwargs) -> dict:
    job = kube.server.add(kq.queued(ks.job(name, namespace, gpus=gpus), queue))
    kube.server.add(kq.workload(job, queue, state=state, priority=priority, created=created, **kwargs))
    return job


def research_cohort(kube: KubeCluster, version: str = "v1beta2") -> None:
    """Two ClusterQueues in cohort research, both using all of their 16 GPUs; team-a may borrow 8."""
    kube.server.kueue = version
    kube.add(kq.resource_flavor(version=version),
             kq.cluster_queue("team-a", gpus=16, cohort="research", borrowing=8, used=16, pending=3, admitted=4,
                              version=version),
             kq.cluster_queue("team-b", gpus=16, cohort="research", used=16, admitted=2, version=version),
             kq.local_queue("team-a", "team-a", "team-a", version=version),
             kq.local_queue("team-b", "team-b", "team-b", version=version))


# --------------------------------------------------------------------------- the test server


def test_the_server_serves_kueue_and_volcano_only_while_installed(kube: KubeCluster) -> None:
    server = kube.server
    groups = {g["name"] for g in get(server, "/apis")["groups"]}
    assert not groups & {"kueue.x-k8s.io", "scheduling.volcano.sh", "batch.volcano.sh"}
    assert status(server, "/apis/kueue.x-k8s.io/v1beta2/clusterqueues") == 404

    server.kueue, server.volcano = "v1beta2", True
    served = {g["name"]: g["preferredVersion"]["version"] for g in get(server, "/apis")["groups"]}
    assert served["kueue.x-k8s.io"] == "v1beta2"
    assert served["scheduling.volcano.sh"] == "v1beta1" and served["batch.volcano.sh"] == "v1alpha1"
    kube.add(kq.cluster_queue("team-a", cohort="research"), kq.local_queue("team-a", "team-a", "team-a"),
             kq.volcano_queue("research"), kq.volcano_job("ddp", "team-a"), ks.job("plain", "team-a"))
    listed = get(server, "/apis/kueue.x-k8s.io/v1beta2/clusterqueues")
    assert listed["kind"] == "ClusterQueueList" and listed["items"][0]["spec"]["cohortName"] == "research"
    assert [i["metadata"]["name"] for i in get(server, "/apis/batch.volcano.sh/v1alpha1/namespaces/team-a/jobs")["items"]] == ["ddp"]
    assert [i["metadata"]["name"] for i in get(server, "/apis/batch/v1/namespaces/team-a/jobs")["items"]] == ["plain"]
    assert status(server, "/apis/kueue.x-k8s.io/v1beta1/clusterqueues") == 404  # not the version served
    cq = get(server, "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/team-a/status")
    assert cq["status"]["pendingWorkloads"] == 0
    assert server.get("vcjobs", "ddp", "team-a") is not None and server.get("Job", "ddp", "team-a") is None


# --------------------------------------------------------------------------- why a job waits


@pytest.mark.parametrize("watch", [False, True])
def test_three_kinds_of_waiting_job_are_explained(kube: KubeCluster, watch: bool) -> None:
    research_cohort(kube)
    kube.server.volcano = True
    kube.add(ks.node("gpu-node-1"), ks.node("gpu-node-2"))
    # Quota: third in line behind a higher priority and an older Workload.
    queued_job(kube, "urgent", "team-a", priority=100, created=1_700_000_000)
    queued_job(kube, "older", "team-a", created=1_700_000_000)
    queued_job(kube, "sweep", "team-a", created=1_700_000_100)
    # Gang: a Volcano Job of 4 workers, 3 of which would fit.
    kube.add(kq.volcano_queue("research", gpus=32, allocated=12))
    ddp = kube.server.add(kq.volcano_job("ddp", "team-a", replicas=4, queue="research"))
    group = kube.server.add(kq.pod_group(ddp, min_member=4, queue="research", schedulable=3))
    kube.add(*(kq.gang_pod(ddp, group, i) for i in range(4)))
    # Capacity: admitted by Kueue, but no node takes its pod.
    fits = kube.server.add(kq.queued(ks.job("fits", "team-a", gpus=8), "team-a"))
    kube.server.modify("Job", "fits", "team-a", {"spec": {"suspend": False}, "status": {"active": 1}})
    kube.add(kq.workload(fits, "team-a", state="admitted", cluster="team-a"),
             ks.pod_for(fits, node=None, phase="Pending", unschedulable=ks.INSUFFICIENT_GPU))

    reading = poll_until(kube.backend(watch=watch), lambda r: len(r.jobs) == 5 and len(r.queues) == 3)
    by = jobs(reading)
    sweep = by["sweep"]
    assert sweep.state is JobState.QUEUED and sweep.waiting_for is WaitingFor.QUOTA
    assert sweep.pending_reason == ("waiting in queue team-a, position 3: 16 of 16 GPUs used, "
                                    "may borrow 0 of 8 from cohort research")
    assert (sweep.queue, sweep.cluster_queue) == ("team-a", "team-a")
    assert by["urgent"].pending_reason.startswith("waiting in queue team-a, position 1:")
    assert by["older"].pending_reason.startswith("waiting in queue team-a, position 2:")

    gang = by["ddp"]
    assert gang.kind == "VolcanoJob" and gang.state is JobState.PENDING and gang.gpus == 4
    assert gang.waiting_for is WaitingFor.GANG and gang.queue == "research"
    assert gang.pending_reason == "3 of 4 pods fit; minMember 4"

    capacity = by["fits"]
    assert capacity.state is JobState.PENDING and capacity.waiting_for is WaitingFor.CAPACITY
    assert capacity.pending_reason == ks.INSUFFICIENT_GPU and capacity.cluster_queue == "team-a"

    queues = {q.name: q for q in reading.queues}
    team_a = queues["team-a"]
    assert team_a.kind is QueueKind.KUEUE and team_a.cohort == "research"
    assert (team_a.gpu_quota, team_a.gpu_used, team_a.gpu_borrowed, team_a.gpu_borrowing_limit) == (16, 16, 0, 8)
    assert (team_a.pending_workloads, team_a.admitted_workloads) == (3, 4)
    assert team_a.local_queues == ("team-a/team-a",) and team_a.flavors == ("a100",)
    research = queues["research"]
    assert research.kind is QueueKind.VOLCANO and (research.gpu_quota, research.gpu_used) == (32, 12)


def test_admission_checks_preemption_deactivation_and_borrowing_in_words(kube: KubeCluster) -> None:
    kube.server.kueue = "v1beta2"
    kube.add(kq.cluster_queue("team-a", gpus=16, cohort="research", borrowing=8, used=12, pending=2),
             kq.cluster_queue("team-b", gpus=16, cohort="research", lending=4, used=6),
             kq.local_queue("team-a", "team-a", "team-a"))
    queued_job(kube, "checked", "team-a", state="checks", cluster="team-a")
    queued_job(kube, "bumped", "team-a", state="preempted")
    queued_job(kube, "parked", "team-a", active=False)
    queued_job(kube, "waits", "team-a", gpus=8)
    by = jobs(kube.backend(watch=False).poll_jobs())
    assert by["checked"].waiting_for is WaitingFor.ADMISSION_CHECK and by["checked"].state is JobState.QUEUED
    assert by["checked"].pending_reason == ("quota reserved in team-a, admission check dws-prov: "
                                            "Waiting for the ProvisioningRequest to be Provisioned")
    assert by["bumped"].waiting_for is WaitingFor.PREEMPTED
    assert by["bumped"].pending_reason.startswith("preempted, waiting in queue team-a again: Preempted to accommodate")
    assert by["parked"].state is JobState.QUEUED and by["parked"].waiting_for is None
    assert "deactivated" in by["parked"].pending_reason
    # Behind the preempted one; team-b lends at most 4 of its 10 unused GPUs: team-a may borrow 4 of 8.
    assert by["waits"].pending_reason == ("waiting in queue team-a, position 2: 12 of 16 GPUs used, "
                                          "may borrow 4 of 8 from cohort research")


def test_an_older_kueue_at_v1beta1_and_a_volcano_queue_out_of_capability(kube: KubeCluster) -> None:
    research_cohort(kube, version="v1beta1")
    kube.server.volcano = True
    queued_job(kube, "sweep", "team-a")
    kube.add(kq.volcano_queue("small", gpus=8, allocated=8, pending=1))
    plain = kube.server.add(ks.job("gang", "team-b", gpus=2, parallelism=2, state="pending"))
    kube.add(kq.pod_group(plain, min_member=2, queue="small", phase="Pending", gpus_each=2))
    backend = kube.backend(watch=False)
    reading = backend.poll_jobs()
    assert kube.server.requested("/apis/kueue.x-k8s.io/v1beta1/workloads")
    by = jobs(reading)
    assert by["sweep"].pending_reason.endswith("16 of 16 GPUs used, may borrow 0 of 8 from cohort research")
    assert by["gang"].waiting_for is WaitingFor.QUOTA and by["gang"].kind == "Job"
    assert by["gang"].pending_reason == "waiting in queue small: 8 of 8 GPUs used"
    assert {q.name for q in reading.queues} == {"team-a", "team-b", "small"}


def test_a_workload_admitted_later_reaches_the_watching_backend(kube: KubeCluster) -> None:
    research_cohort(kube)
    job = queued_job(kube, "sweep", "team-a")
    backend = kube.backend()
    poll_until(backend, lambda r: r.jobs and r.jobs[0].state is JobState.QUEUED)
    (wl,) = kube.server.objects("Workload")
    kube.server.delete("Workload", wl["metadata"]["name"], "team-a")
    kube.server.add(kq.workload(job, "team-a", state="admitted", cluster="team-a"))
    kube.server.modify("Job", "sweep", "team-a", {"spec": {"suspend": False}, "status": {"active": 1, "ready": 1}})
    reading = poll_until(backend, lambda r: r.jobs[0].state is JobState.RUNNING)
    assert reading.jobs[0].waiting_for is None and reading.jobs[0].cluster_queue == "team-a"


def test_queues_a_role_may_not_read_leave_the_jobs(kube: KubeCluster) -> None:
    research_cohort(kube)
    queued_job(kube, "sweep", "team-a")
    kube.server.fail(403, path_contains="clusterqueues", message='clusterqueues.kueue.x-k8s.io is forbidden')
    reading = kube.backend(watch=False).poll_jobs()
    (job,) = reading.jobs
    assert job.state is JobState.QUEUED and job.waiting_for is WaitingFor.QUOTA and reading.queues == ()
    assert job.pending_reason.startswith("waiting in queue team-a, position 1: couldn't assign flavors")


# --------------------------------------------------------------------------- without the CRDs


@pytest.mark.parametrize("watch", [False, True])
def test_without_the_crds_nothing_changes_and_nothing_more_is_asked(kube: KubeCluster, watch: bool,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    kube.add(ks.node("gpu-node-1"), ks.job("held", "team-a", state="suspended"))
    waiting = kube.server.add(ks.job("waits", "team-a", state="pending"))
    kube.add(ks.pod_for(waiting, node=None, phase="Pending", unschedulable=ks.INSUFFICIENT_GPU))
    backend = kube.backend(watch=watch)
    first = poll_until(backend, lambda r: len(r.jobs) == 2)
    second = backend.poll_jobs()
    assert first.queues == () == second.queues
    by = jobs(second)
    assert by["held"].state is JobState.SUSPENDED and by["held"].queue is None and by["held"].waiting_for is None
    assert by["waits"].state is JobState.PENDING and by["waits"].pending_reason == ks.INSUFFICIENT_GPU
    assert len([r for r in kube.server.requests if r.path.rstrip("/") == "/apis"]) == 1
    assert not [r for r in kube.server.requests if "kueue" in r.path or "volcano" in r.path]
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


# --------------------------------------------------------------------------- snapshot --json


def test_snapshot_json_lists_the_queues_and_why_each_job_waits(kube: KubeCluster, tmp_path: Path) -> None:
    research_cohort(kube)
    queued_job(kube, "sweep", "team-a")
    kube.add(ks.node("gpu-node-1"), ks.job("plain", "ml", state="suspended"))
    env = {**os.environ, "KUBECONFIG": str(tmp_path / "none"), "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    result = subprocess.run(
        [sys.executable, "-m", "gpuconsole", "snapshot", "--json", "--no-db", "--gpus", "off", "--cloud", "off",
         "--kubeconfig", str(kube.kubeconfig), "--namespace", "ml"],
        capture_output=True, text=True, timeout=60, env=env, check=False)
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    queues = {q["name"]: q for q in doc["queues"]}  # cluster-wide, whatever --namespace says
    assert set(queues) == {"team-a", "team-b"}
    assert {k: queues["team-a"][k] for k in ("kind", "cohort", "gpu_quota", "gpu_used", "gpu_borrowed",
                                             "pending_workloads", "admitted_workloads", "usd_per_hour")} == {
        "kind": "kueue", "cohort": "research", "gpu_quota": 16, "gpu_used": 16, "gpu_borrowed": 0,
        "pending_workloads": 3, "admitted_workloads": 4, "usd_per_hour": None}  # no cloud: cost unknown
    (plain,) = doc["jobs"]
    assert (plain["state"], plain["queue"], plain["cluster_queue"], plain["waiting_for"]) == ("suspended", None, None, None)


# --------------------------------------------------------------------------- actions


def test_a_pending_job_moves_queue_and_its_workload_is_deactivated_then_reactivated(kube: KubeCluster) -> None:
    research_cohort(kube)
    kube.add(kq.local_queue("spare", "team-a", "team-b"))
    queued_job(kube, "sweep", "team-a")
    backend = kube.backend(watch=False)
    backend.poll_jobs()  # discovery: the cluster serves Kueue
    log = ActionLog()
    ops = JobOps(backend, log=log)
    assert ops.move_queue("team-a", "sweep", "spare").ok
    assert kube.server.get("Job", "sweep", "team-a")["metadata"]["labels"][kq.QUEUE_LABEL] == "spare"
    assert ops.set_workload_active("team-a", "sweep", False).ok
    (wl,) = kube.server.objects("Workload")
    assert wl["spec"]["active"] is False
    assert ops.set_workload_active("team-a", "sweep", True).ok
    assert kube.server.objects("Workload")[0]["spec"]["active"] is True
    with pytest.raises(ActionError, match='localqueues "nowhere" not found'):
        ops.move_queue("team-a", "sweep", "nowhere")
    assert [r.request.kind.value for r in log.recent() if r.ok] == [
        "move-queue", "deactivate-workload", "reactivate-workload"]
    # Admitted: it keeps its queue.
    admitted = kube.server.add(kq.queued(ks.job("running", "team-a"), "team-a"))
    kube.add(kq.workload(admitted, "team-a", state="admitted", cluster="team-a"))
    with pytest.raises(ActionError, match="already admitted to team-a; only a pending job can be changed"):
        ops.move_queue("team-a", "running", "spare")


def test_a_move_rbac_refuses_is_one_line_and_recorded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    server = RbacApiServer().start()
    try:
        path = ks.write_kubeconfig(tmp_path / "rbac", server.url, {"rbac": {"token": DEV_TOKEN}})
        ks.use_kubeconfig(monkeypatch, path)
        server.grant(DEV_TOKEN, "alice", "team-a", READ, resources=("jobs", "pods", "workloads", "localqueues"))
        server.kueue = "v1beta2"
        server.add(kq.local_queue("team-a", "team-a", "team-a"))
        server.add(kq.local_queue("spare", "team-a", "team-b"))
        job = server.add(kq.queued(ks.job("sweep", "team-a"), "team-a"))
        server.add(kq.workload(job, "team-a"))
        backend = KubeJobs(str(path), namespaces=("team-a",), request_timeout=2.0, watch=False)
        try:
            backend.poll_jobs()
            log = ActionLog()
            with pytest.raises(ActionDenied) as denied:
                JobOps(backend, log=log).move_queue("team-a", "sweep", "spare")
            message = str(denied.value)
            assert "\n" not in message and 'User "alice" cannot patch resource "jobs"' in message
            (result,) = log.recent()
            assert not result.ok and result.request.kind.value == "move-queue"
            assert server.get("Job", "sweep", "team-a")["metadata"]["labels"][kq.QUEUE_LABEL] == "team-a"
        finally:
            backend.close()
    finally:
        server.stop()


def test_the_job_command_moves_and_deactivates_a_queued_job(kube: KubeCluster, monkeypatch: pytest.MonkeyPatch,
                                                             tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from gpuconsole.cli.main import main

    monkeypatch.setenv("GPUCONSOLE_AUDIT_DB", str(tmp_path / "audit.db"))
    research_cohort(kube)
    kube.add(kq.local_queue("spare", "team-a", "team-b"))
    queued_job(kube, "sweep", "team-a")
    common = ["--no-db", "--gpus", "off", "--cloud", "off", "--kubeconfig", str(kube.kubeconfig)]
    assert main([*common, "job", "move", "team-a/sweep", "spare"]) == 0
    assert main([*common, "job", "deactivate", "team-a/sweep"]) == 0
    out = capsys.readouterr().out
    assert "moved Job team-a/sweep to LocalQueue spare" in out and "deactivated the Workload of Job team-a/sweep" in out
    assert kube.server.get("Job", "sweep", "team-a")["metadata"]["labels"][kq.QUEUE_LABEL] == "spare"
    assert kube.server.objects("Workload")[0]["spec"]["active"] is False
    # Submitted to a queue: the Job carries the LocalQueue's label, its pods do not.
    assert main([*common, "job", "submit", "team-a/probe", "--image", "busybox", "--queue", "team-a"]) == 0
    probe = kube.server.get("Job", "probe", "team-a")
    assert probe["metadata"]["labels"][kq.QUEUE_LABEL] == "team-a"
    assert kq.QUEUE_LABEL not in probe["spec"]["template"]["metadata"]["labels"]
    # To a Volcano queue: its pods are Volcano's to schedule, in that queue; no Kueue label.
    kube.server.volcano = True
    assert main([*common, "job", "submit", "team-a/vprobe", "--image", "busybox", "--queue", "volcano:research"]) == 0
    vprobe = kube.server.get("Job", "vprobe", "team-a")
    pod = vprobe["spec"]["template"]
    assert pod["spec"]["schedulerName"] == "volcano"
    assert pod["metadata"]["annotations"]["scheduling.volcano.sh/queue-name"] == "research"
    assert kq.QUEUE_LABEL not in vprobe["metadata"]["labels"]
    assert main([*common, "job", "submit", "team-a/both", "--image", "busybox", "--queue", "volcano:Bad_Name"]) != 0
    assert "not a Volcano queue name" in capsys.readouterr().err


# --------------------------------------------------------------------------- the Queues screen


async def test_the_queues_screen_shows_each_queues_figures_and_its_workloads_in_order(
        kube: KubeCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    from textual.widgets import Static

    from gpuconsole.backends.kube import source as kube_backend
    from gpuconsole.core.fleet.console import Console, ConsoleOptions
    from gpuconsole.core.fleet.sources import SourceOptions
    from gpuconsole.ui.screens.queues import QueuesScreen
    from tests.driving import column, running, shown
    from tests.helpers import wait_until as wait_in_app
    from tests.test_kube import QuickKubeJobs

    monkeypatch.setattr(kube_backend, "KubeJobs", QuickKubeJobs)
    research_cohort(kube)
    queued_job(kube, "urgent", "team-a", priority=100)
    queued_job(kube, "sweep", "team-a")
    console = Console(ConsoleOptions(sources=SourceOptions(jobs="auto", gpus="off", cloud="off"), interval=0.2,
                                     timeout=3))
    async with running(console, live=False, size=(160, 48)) as (app, pilot):
        await wait_in_app(lambda: len(app.snapshot.queues) == 2 and len(app.snapshot.jobs) == 2)
        await pilot.press("3")
        await pilot.pause()
        assert "quota · waiting in queue team-a, position 2: 16 of 16 GPUs used" in " ".join(
            column(app, "job-table", "reason"))
        await pilot.press("Q")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, QueuesScreen)
        table = shown(screen.query_one("#queues-table", Static))
        assert "team-a" in table and "team-b" in table and "research" in table
        row = next(line for line in table.splitlines() if line.startswith("team-a"))
        # nominal, used, borrowed, lent, waiting, admitted, pending, $/h (no cloud: unknown), no budget
        assert row.split()[3:12] == ["16", "16", "0", "0", "8", "4", "3", "unknown", "-"]
        workloads = shown(screen.query_one("#queues-workloads", Static)).splitlines()
        assert workloads[1].startswith("unknown admitted · no team budget")
        assert workloads[2].startswith("#1 team-a/urgent  queued  4 GPU(s)  quota · waiting in queue team-a, position 1")
        assert workloads[3].startswith("#2 team-a/sweep  queued")
        await pilot.press("down")
        await pilot.pause()
        assert shown(screen.query_one("#queues-workloads", Static)).startswith("team-b: 0 job(s)")
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, QueuesScreen)
