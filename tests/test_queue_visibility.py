"""A queued job's place in its queue from Kueue's visibility API, against the Kubernetes API test server.

The test server serves ``visibility.kueue.x-k8s.io`` beside Kueue when asked to, answering a
``PendingWorkloadsSummary`` in Kueue's own order (priority, then the time each Workload was queued:
a preempted one's eviction, not its creation). The console's estimate orders by creation, so a
Workload preempted after another was created is placed differently: where the API answers, its
order is the one shown; where it is not served or not readable, the estimate stays.
"""

from __future__ import annotations

import json
import logging
import time
import urllib.request
from pathlib import Path

import pytest

from gpuconsole.model import Job, JobState, WaitingFor
from tests import kube_queues as kq
from tests import kube_server as ks
from tests.kube_rbac import DEV_TOKEN, READ, RbacApiServer
from tests.kube_server import TEST_TOKEN, KubeCluster

pytestmark = pytest.mark.slow
VISIBILITY = "/apis/visibility.kueue.x-k8s.io/v1beta2"


def line_up(server: ks.KubeApiServer) -> None:
    """Queue team-a: ``evicted`` created first but preempted just now, ``patient`` created after it
    and waiting since; Kueue tries ``patient`` first, the creation order says ``evicted``."""
    server.kueue = "v1beta2"
    server.add(kq.resource_flavor())
    server.add(kq.cluster_queue("team-a", gpus=16, used=16, pending=2))
    server.add(kq.local_queue("team-a", "team-a", "team-a"))
    old = time.time() - 3600
    for name, state, created in (("evicted", "preempted", old), ("patient", "pending", old + 60)):
        job = server.add(kq.queued(ks.job(name, "team-a", gpus=4), "team-a"))
        server.add(kq.workload(job, "team-a", state=state, created=created))


def by_name(reading) -> dict[str, Job]:
    return {j.name: j for j in reading.jobs}


def visibility_requests(server: ks.KubeApiServer) -> list[str]:
    return [r.path for r in server.requests if "visibility.kueue" in r.path and r.path.rstrip("/") != "/apis"]


def test_the_server_answers_pending_workloads_in_kueues_order(kube: KubeCluster) -> None:
    line_up(kube.server)
    kube.server.visibility = True
    request = urllib.request.Request(kube.server.url + VISIBILITY + "/clusterqueues/team-a/pendingworkloads",
                                     headers={"Authorization": f"Bearer {TEST_TOKEN}"})
    with urllib.request.urlopen(request, timeout=5) as answer:  # noqa: S310 - the test server
        summary = json.loads(answer.read())
    assert summary["kind"] == "PendingWorkloadsSummary"
    named = [(next(n for n in ("patient", "evicted") if n in i["metadata"]["name"]), i["positionInClusterQueue"])
             for i in summary["items"]]
    assert named == [("patient", 0), ("evicted", 1)]


def test_a_quota_wait_gives_kueues_position_where_the_visibility_api_answers(kube: KubeCluster) -> None:
    line_up(kube.server)
    backend = kube.backend(watch=False)
    estimated = by_name(backend.poll_jobs())
    estimated = by_name(backend.poll_jobs())  # a second poll: without the API nothing more is asked
    assert estimated["patient"].queue_position == 2  # behind the older Workload, by creation
    assert estimated["patient"].pending_reason.startswith("waiting in queue team-a, position 2: 16 of 16 GPUs used")
    assert not visibility_requests(kube.server)

    kube.server.visibility = True
    fresh = kube.backend(watch=False)
    fresh.poll_jobs()  # discovery shows the API; the queues jobs wait in are known after this poll
    shown = by_name(fresh.poll_jobs())
    patient = shown["patient"]
    assert patient.state is JobState.QUEUED and patient.waiting_for is WaitingFor.QUOTA
    assert patient.queue_position == 1
    assert patient.pending_reason.startswith("waiting in queue team-a, position 1: 16 of 16 GPUs used")
    assert shown["evicted"].waiting_for is WaitingFor.PREEMPTED
    assert visibility_requests(kube.server) == [VISIBILITY + "/clusterqueues/team-a/pendingworkloads"]
    fresh.poll_jobs()  # not asked again within its interval
    assert len(visibility_requests(kube.server)) == 1


def test_a_namespace_user_reads_positions_through_its_local_queue_or_keeps_the_estimate(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    server = RbacApiServer().start()
    try:
        path = ks.write_kubeconfig(tmp_path / "rbac", server.url, {"rbac": {"token": DEV_TOKEN}})
        ks.use_kubeconfig(monkeypatch, path)
        server.grant(DEV_TOKEN, "alice", "team-a", READ, resources=("jobs", "pods", "workloads", "localqueues"))
        line_up(server)
        server.visibility = True

        from gpuconsole.backends.kube.source import KubeJobs

        refused = KubeJobs(str(path), namespaces=("team-a",), request_timeout=2.0, watch=False)
        try:
            refused.poll_jobs()
            kept = by_name(refused.poll_jobs())["patient"]
            assert kept.queue_position == 2 and "position 2" in kept.pending_reason  # the estimate stays
            refused.poll_jobs()
        finally:
            refused.close()
        asked = visibility_requests(server)
        assert asked == [VISIBILITY + "/namespaces/team-a/localqueues/team-a/pendingworkloads"]  # once: refused
        (warning,) = [r for r in caplog.records if "visibility" in r.getMessage()]
        assert "forbidden" in warning.getMessage() and "\n" not in warning.getMessage()

        server.grant(DEV_TOKEN, "alice", "team-a", ("get",), resources=("localqueues/pendingworkloads",))
        allowed = KubeJobs(str(path), namespaces=("team-a",), request_timeout=2.0, watch=False)
        try:
            allowed.poll_jobs()
            patient = by_name(allowed.poll_jobs())["patient"]
        finally:
            allowed.close()
        assert patient.queue_position == 1 and "position 1" in patient.pending_reason
    finally:
        server.stop()


def test_a_failing_visibility_api_leaves_the_estimate_and_the_jobs(kube: KubeCluster) -> None:
    line_up(kube.server)
    kube.server.visibility = True
    kube.server.fail(500, path_contains="pendingworkloads", message="the visibility server is unavailable")
    backend = kube.backend(watch=False)
    backend.poll_jobs()
    patient = by_name(backend.poll_jobs())["patient"]  # asked, refused, estimated
    assert visibility_requests(kube.server)
    assert patient.queue_position == 2 and "position 2" in patient.pending_reason
