"""The Kubernetes adapter against the Kubernetes API test server (tests/kube_server.py).

The official client talks HTTP to the server from a kubeconfig, as it would to a cluster; faults
(410 Gone, expired continue tokens, 500s, 401/403, a hung server) are the server's answers, never
patches of the client. Covers list-then-watch, re-lists, paging, failures and recovery, the GPU
and MIG mapping of jobs and nodes, pending reasons, bad objects, namespaces, kubeconfig contexts,
``snapshot --json`` and the console on top.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from gpuconsole.backends.base import (
    BackendError,
    BackendPermissionDenied,
    BackendTimeout,
    BackendUnavailable,
)
from gpuconsole.backends.kube import mapping as kube_mapping
from gpuconsole.backends.kube import source as kube_backend
from gpuconsole.backends.kube.source import KubeJobs
from gpuconsole.backends.unconfigured import Unconfigured
from gpuconsole.core.fleet.console import Console, ConsoleOptions
from gpuconsole.core.fleet.sources import SourceOptions, build_sources
from gpuconsole.model import JobsReading, JobState, SourceKind, SourceState
from tests import kube_server as ks
from tests.kube_server import OTHER_TOKEN, TEST_TOKEN, KubeCluster, use_kubeconfig, wait_until

pytestmark = pytest.mark.slow


def poll_until(backend: KubeJobs, check: Callable[[JobsReading], object], timeout: float = 8.0) -> JobsReading:
    """Poll until ``check(reading)`` holds; failures on the way are retried."""
    return ks.poll_until(backend.poll_jobs, check, timeout)


def by_name(reading: JobsReading) -> dict[str, object]:
    return {j.name: j for j in reading.jobs}


def running_job(cluster: KubeCluster, name: str, namespace: str = "ml", **kwargs) -> dict:
    job = cluster.server.add(ks.job(name, namespace, **kwargs))
    cluster.server.add(ks.pod_for(job))
    return job


def jobs_lists(cluster: KubeCluster) -> list[ks.Request]:
    return [r for r in cluster.server.requested("/jobs", watch=False) if "limit" in r.query]


# --------------------------------------------------------------------------- list and watch


def test_listed_jobs_then_watched_changes_show_in_polls(kube: KubeCluster) -> None:
    kube.server.add(ks.node("gpu-node-1"))
    running_job(kube, "train-a", gpus=2)
    done_later = running_job(kube, "train-b")
    backend = kube.backend()
    first = backend.poll_jobs()
    assert {j.name: j.state for j in first.jobs} == {"train-a": JobState.RUNNING, "train-b": JobState.RUNNING}
    assert backend.name == "kube"

    started = time.monotonic()
    assert backend.poll_jobs().jobs == first.jobs  # a poll from the cache asks the server nothing new
    assert time.monotonic() - started < 0.5

    running_job(kube, "train-c")
    poll_until(backend, lambda r: "train-c" in by_name(r))

    done = ks.job("train-b", "ml", state="complete")
    kube.server.modify("Job", "train-b", "ml", {"status": done["status"]})
    reading = poll_until(backend, lambda r: by_name(r)["train-b"].state is JobState.SUCCEEDED)
    assert by_name(reading)["train-b"].finished is not None
    assert by_name(reading)["train-b"].uid == done_later["metadata"]["uid"]

    kube.server.delete("Job", "train-a", "ml")
    reading = poll_until(backend, lambda r: "train-a" not in by_name(r))
    assert sorted(by_name(reading)) == ["train-b", "train-c"]
    watches = kube.server.requested("/jobs", watch=True)
    assert watches and all(r.query.get("allowWatchBookmarks") in ("True", "true") for r in watches)
    assert int(watches[0].query["resourceVersion"]) > 0, "the watch resumes from the list's version"


def test_a_watch_410_lists_again_without_losing_or_repeating_jobs(kube: KubeCluster) -> None:
    for name in ("a", "b", "c"):
        running_job(kube, f"train-{name}")
    backend = kube.backend()
    assert len(backend.poll_jobs().jobs) == 3
    lists_before = len(jobs_lists(kube))
    with kube.server.compacting():  # these changes reach the open watches only through a new list
        kube.server.delete("Job", "train-a", "ml")
        running_job(kube, "train-d")
        kube.server.modify("Job", "train-b", "ml", {"spec": {"suspend": True}})
    reading = poll_until(backend, lambda r: "train-d" in by_name(r) and "train-a" not in by_name(r))
    uids = [j.uid for j in reading.jobs]
    assert len(uids) == len(set(uids)) == 3
    assert by_name(reading)["train-b"].state is JobState.SUSPENDED
    assert len(jobs_lists(kube)) > lists_before, "the 410 made it list again"

    # 410 as an HTTP status on the watch request itself, then the watch resumes.
    lists_before = len(jobs_lists(kube))
    kube.server.fail(410, times=1, path_contains="/jobs?allowWatchBookmarks")
    kube.server.end_watches()
    wait_until(lambda: len(jobs_lists(kube)) > lists_before, timeout=5)
    running_job(kube, "train-e")
    reading = poll_until(backend, lambda r: "train-e" in by_name(r))
    assert len(reading.jobs) == len({j.uid for j in reading.jobs}) == 4


def test_1200_jobs_are_listed_in_pages_and_an_expired_token_restarts_the_list(kube: KubeCluster) -> None:
    for i in range(1200):
        kube.server.add(ks.job(f"sweep-{i:04d}", "ml", state="pending"))
    backend = kube.backend()
    reading = backend.poll_jobs()
    assert len(reading.jobs) == len({j.uid for j in reading.jobs}) == 1200
    pages = jobs_lists(kube)
    assert [r.query["limit"] for r in pages] == ["500", "500", "500"]
    assert [bool(r.query.get("continue")) for r in pages] == [False, True, True]

    kube.server.requests.clear()
    kube.server.expire_next_continue()  # the second page finds its token expired
    once = kube.backend(watch=False)
    reading = once.poll_jobs()
    assert len(reading.jobs) == len({j.uid for j in reading.jobs}) == 1200
    pages = jobs_lists(kube)
    assert [bool(r.query.get("continue")) for r in pages] == [False, True, False, True, True], "restarted from page one"


# --------------------------------------------------------------------------- failures


def test_an_outage_fails_polls_quickly_and_recovers(kube: KubeCluster) -> None:
    running_job(kube, "train-a")
    backend = kube.backend()
    assert len(backend.poll_jobs().jobs) == 1
    kube.server.fail(500, path_contains="/jobs", message="etcdserver: request timed out")
    kube.server.end_watches()

    def failing() -> BackendError | None:
        started = time.monotonic()
        try:
            backend.poll_jobs()
        except BackendError as exc:
            assert time.monotonic() - started < 0.5, "a poll never waits on a failing server"
            return exc
        return None

    error = wait_until(failing, timeout=6)
    assert "500" in str(error) and "etcdserver" in str(error)
    kube.server.clear_faults()
    running_job(kube, "train-b")
    reading = poll_until(backend, lambda r: len(r.jobs) == 2, timeout=10)
    assert {j.name for j in reading.jobs} == {"train-a", "train-b"}


def test_a_hung_server_times_out_within_bounds_and_recovers(kube: KubeCluster) -> None:
    running_job(kube, "train-a")
    backend = kube.backend(request_timeout=1.0, watch_timeout=1)
    assert len(backend.poll_jobs().jobs) == 1
    kube.server.hang(30)
    try:
        def timed_out() -> BackendError | None:
            started = time.monotonic()
            try:
                backend.poll_jobs()
            except BackendError as exc:
                assert time.monotonic() - started < 0.5
                return exc
            return None

        error = wait_until(timed_out, timeout=8)
        assert isinstance(error, BackendTimeout), error

        once = kube.backend(watch=False, request_timeout=1.0)
        started = time.monotonic()
        with pytest.raises(BackendTimeout, match="no answer"):
            once.poll_jobs()
        assert time.monotonic() - started < 2.5, "one request's timeout, not one per kind"
    finally:
        kube.server.release()
    poll_until(backend, lambda r: len(r.jobs) == 1, timeout=10)


def test_refused_credentials_and_forbidden_kinds(kube: KubeCluster, tmp_path: Path, caplog) -> None:
    running_job(kube, "train-a")
    bad = ks.write_kubeconfig(tmp_path / "bad", kube.server.url, {"test": {"token": "expired-token"}})
    with pytest.raises(BackendPermissionDenied, match="401"):
        kube.backend(kubeconfig=str(bad), watch=False).poll_jobs()
    backend = kube.backend(kubeconfig=str(bad))
    error = wait_until(lambda: _error_of(backend), timeout=5)
    assert isinstance(error, BackendPermissionDenied)

    # A role that may read Jobs but not Nodes or Events still gets its queue.
    kube.server.fail(403, path_contains="/nodes", message='nodes is forbidden: User "ana" cannot list resource "nodes"')
    kube.server.fail(403, path_contains="/events", message="events is forbidden")
    with caplog.at_level(logging.WARNING, logger="gpuconsole.backends.kube.source"):
        reading = kube.backend().poll_jobs()
        assert [j.name for j in reading.jobs] == ["train-a"] and reading.nodes == ()
        assert [j.name for j in kube.backend(watch=False).poll_jobs().jobs] == ["train-a"]
    assert "Nodes are not readable" in caplog.text
    kube.server.fail(403, path_contains="/jobs", message="jobs.batch is forbidden")
    with pytest.raises(BackendPermissionDenied, match="forbidden"):
        kube.backend(watch=False).poll_jobs()


def _error_of(backend: KubeJobs) -> BackendError | None:
    try:
        backend.poll_jobs()
    except BackendError as exc:
        return exc
    return None


# --------------------------------------------------------------------------- mapping


def test_gpu_and_mig_requests_of_jobs_and_cronjobs(kube: KubeCluster) -> None:
    kube.server.add(ks.node("gpu-node-1"))
    running_job(kube, "whole", gpus=2, owner="ana")
    running_job(kube, "mig", gpus=0, mig={"1g.10gb": 2})
    running_job(kube, "wide", gpus=4, parallelism=2)
    running_job(kube, "cpu", gpus=0)
    cron = kube.server.add(ks.cronjob("nightly-eval", "ml", "@daily", gpus=0, mig={"3g.40gb": 1},
                                      time_zone="Europe/Paris", last_schedule=time.time() - 3600))
    child = kube.server.add(ks.job("nightly-eval-2891", "ml", gpus=0, mig={"3g.40gb": 1}, cronjob=cron))
    kube.server.modify("CronJob", "nightly-eval", "ml", {"status": {"active": [
        {"kind": "Job", "name": child["metadata"]["name"], "namespace": "ml", "uid": child["metadata"]["uid"]}]}})
    kube.server.add(ks.cronjob("paused", "ml", "*/5 * * * *", gpus=8, suspend=True))
    reading = kube.backend(watch=False).poll_jobs()
    jobs = by_name(reading)
    assert (jobs["whole"].gpus, jobs["whole"].mig_profile, jobs["whole"].gpu_request) == (2, None, "2")
    assert jobs["whole"].owner == "ana" and jobs["whole"].image == ks.PYTORCH
    assert (jobs["mig"].gpus, jobs["mig"].mig_profile, jobs["mig"].gpu_request) == (2, "1g.10gb", "2×1g.10gb")
    assert jobs["wide"].gpus == 8, "four GPUs for each of two pods"
    assert (jobs["cpu"].gpus, jobs["cpu"].gpu_request) == (0, "-")
    assert jobs["nightly-eval-2891"].cronjob == "nightly-eval"
    crons = {c.name: c for c in reading.cronjobs}
    nightly = crons["nightly-eval"]
    assert (nightly.schedule, nightly.gpus, nightly.mig_profile, nightly.active) == ("@daily", 1, "3g.40gb", 1)
    assert nightly.last_schedule is not None and nightly.next_schedule is not None
    assert 0 < nightly.next_schedule - time.time() <= 86400
    from datetime import datetime
    from zoneinfo import ZoneInfo

    assert datetime.fromtimestamp(nightly.next_schedule, ZoneInfo("Europe/Paris")).strftime("%H:%M") == "00:00"
    assert crons["paused"].suspended and crons["paused"].next_schedule is None and crons["paused"].gpus == 8


def test_nodes_capacity_allocatable_allocated_and_product(kube: KubeCluster) -> None:
    kube.server.add(ks.node("gpu-node-1", gpus=8, allocatable=7))  # one GPU marked unhealthy
    kube.server.add(ks.node("mig-node", gpus=0, product="NVIDIA-A100-SXM4-40GB", strategy="mixed",
                            mig={"1g.5gb": 14, "3g.20gb": 2}, instance_id="i-0fedcba9876543210", ready=False))
    kube.server.add(ks.node("cpu-node", gpus=0, product=None))
    for gpus in (2, 1):
        job = kube.server.add(ks.job(f"run-{gpus}", "ml", gpus=gpus))
        kube.server.add(ks.pod_for(job, node="gpu-node-1"))
    done = kube.server.add(ks.job("done", "ml", gpus=4, state="complete"))
    kube.server.add(ks.pod_for(done, node="gpu-node-1", phase="Succeeded"))  # terminated: holds nothing
    waiting = kube.server.add(ks.job("waiting", "ml", gpus=8, state="pending"))
    kube.server.add(ks.pod_for(waiting, node=None, phase="Pending", unschedulable=ks.INSUFFICIENT_GPU))
    mig = kube.server.add(ks.job("mig", "ml", gpus=0, mig={"1g.5gb": 3}))
    kube.server.add(ks.pod_for(mig, node="mig-node"))
    backend = kube.backend()
    reading = backend.poll_jobs()
    nodes = {n.name: n for n in reading.nodes}
    assert set(nodes) == {"gpu-node-1", "mig-node"}, "nodes without GPUs are not listed"
    gpu = nodes["gpu-node-1"]
    assert (gpu.gpu_product, gpu.gpu_capacity, gpu.gpu_allocatable, gpu.gpu_allocated) == (ks.A100, 8, 7, 3)
    assert (gpu.instance_id, gpu.ready, gpu.mig_strategy) == ("i-0a1b2c3d4e5f60718", True, None)
    mig_node = nodes["mig-node"]
    assert mig_node.mig_strategy == "mixed" and not mig_node.ready
    assert dict(mig_node.mig_capacity) == {"1g.5gb": 14, "3g.20gb": 2}
    assert dict(mig_node.mig_allocated) == {"1g.5gb": 3} and mig_node.gpu_allocated == 0
    assert by_name(reading)["run-2"].node == "gpu-node-1"
    assert by_name(reading)["run-2"].pod.startswith("run-2-"), "the pod whose logs the job has"

    indexed = kube.server.add(ks.job("indexed", "ml", gpus=1, parallelism=2))
    for index in (1, 0):
        pod = ks.pod_for(indexed, node="gpu-node-1", suffix=f"{index}-x7k2p")
        pod["metadata"]["labels"][kube_mapping.COMPLETION_INDEX] = str(index)
        kube.server.add(pod)
    # The job and its two pods come by separate watches: wait until both pods have arrived.
    # (Pod 1 alone would name pod 1: a mapping that ignored the index never gets here.)
    reading = poll_until(backend, lambda r: "indexed" in by_name(r) and by_name(r)["indexed"].pod == "indexed-0-x7k2p")
    assert by_name(reading)["indexed"].pod == "indexed-0-x7k2p", "index 0 of an Indexed Job"

    job = kube.server.add(ks.job("late", "ml", gpus=2))
    kube.server.add(ks.pod_for(job, node="gpu-node-1"))
    poll_until(backend, lambda r: {n.name: n for n in r.nodes}["gpu-node-1"].gpu_allocated == 7)


def test_pending_reasons_from_the_pod_condition_and_from_events(kube: KubeCluster) -> None:
    by_condition = kube.server.add(ks.job("by-condition", "ml", gpus=8, state="pending"))
    kube.server.add(ks.pod_for(by_condition, node=None, phase="Pending", unschedulable=ks.INSUFFICIENT_GPU))
    by_event = kube.server.add(ks.job("by-event", "ml", gpus=0, mig={"7g.80gb": 1}, state="pending"))
    pod = kube.server.add(ks.pod_for(by_event, node=None, phase="Pending"))
    kube.server.add(ks.event(pod, "0/4 nodes are available: 4 Insufficient nvidia.com/gpu.", at=time.time() - 120))
    latest = "0/4 nodes are available: 1 node(s) had untolerated taint {nvidia.com/gpu: }, 3 Insufficient nvidia.com/mig-7g.80gb."
    kube.server.add(ks.event(pod, latest, at=time.time() - 5))
    kube.server.add(ks.event(pod, "Successfully assigned", reason="Scheduled", type_="Normal"))
    pulling = kube.server.add(ks.job("pulling", "ml", state="pending"))
    kube.server.add(ks.pod_for(pulling, phase="Pending",
                               waiting=("ImagePullBackOff", 'Back-off pulling image "nvcr.io/nvidia/pytorch:99"')))
    quota = kube.server.add(ks.job("over-quota", "ml", state="pending"))
    kube.server.add(ks.event(quota, 'Error creating: pods "over-quota-x" is forbidden: exceeded quota: gpu-quota',
                             reason="FailedCreate"))
    backend = kube.backend()
    jobs = by_name(backend.poll_jobs())
    assert jobs["by-condition"].state is JobState.PENDING and jobs["by-condition"].node is None
    assert jobs["by-condition"].pending_reason == ks.INSUFFICIENT_GPU
    assert jobs["by-event"].pending_reason == latest
    assert jobs["by-event"].started is None
    assert jobs["pulling"].pending_reason.startswith("ImagePullBackOff: Back-off pulling")
    assert "exceeded quota" in jobs["over-quota"].pending_reason
    assert all(r.query.get("fieldSelector") == "type=Warning" for r in kube.server.requested("/events"))

    newer = "0/5 nodes are available: 5 Insufficient nvidia.com/mig-7g.80gb."
    kube.server.add(ks.event(pod, newer))
    poll_until(backend, lambda r: by_name(r)["by-event"].pending_reason == newer)


def test_an_object_that_cannot_be_read_is_skipped_and_logged(kube: KubeCluster, caplog) -> None:
    running_job(kube, "good")
    bad = ks.job("bad-gpus", "ml")
    bad["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "lots"
    kube.server.add(bad)
    kube.server.add_raw("jobs", {"metadata": {"name": "no-uid", "namespace": "ml"}, "spec": {}, "status": {}})
    kube.server.add_raw("jobs", {"metadata": {"name": "odd-status", "namespace": "ml", "uid": "u-1"}, "status": "weird"})
    kube.server.add_raw("pods", {"metadata": "not an object"})
    with caplog.at_level(logging.WARNING, logger="gpuconsole.backends.kube.source"):
        for backend in (kube.backend(watch=False), kube.backend()):
            assert [j.name for j in backend.poll_jobs().jobs] == ["good"]
    assert "skipping Job ml/bad-gpus" in caplog.text and "skipping Job ml/odd-status" in caplog.text

    backend = kube.backend()
    backend.poll_jobs()
    kube.server.modify("Job", "good", "ml", {"status": "broken"})  # a change that cannot be read
    running_job(kube, "after")
    poll_until(backend, lambda r: [j.name for j in r.jobs] == ["after"])


def test_namespaces_two_of_them_or_all(kube: KubeCluster) -> None:
    for namespace in ("ml", "research", "default"):
        running_job(kube, f"train-{namespace}", namespace)
    kube.server.add(ks.node("gpu-node-1"))
    two = kube.backend(namespaces=("ml", "research"))
    reading = two.poll_jobs()
    assert sorted(j.namespace for j in reading.jobs) == ["ml", "research"]
    assert len(reading.nodes) == 1, "nodes are cluster-wide"
    paths = {r.path for r in kube.server.requested("/jobs")}
    assert paths == {"/apis/batch/v1/namespaces/ml/jobs", "/apis/batch/v1/namespaces/research/jobs"}
    running_job(kube, "train-late", "research")
    running_job(kube, "elsewhere", "default")
    reading = poll_until(two, lambda r: "train-late" in by_name(r))
    assert "elsewhere" not in by_name(reading)
    everything = kube.backend(watch=False).poll_jobs()
    assert sorted(j.namespace for j in everything.jobs) == ["default", "default", "ml", "research", "research"]


# --------------------------------------------------------------------------- configuration


def test_without_a_kubeconfig_the_backend_is_unavailable_with_a_hint(tmp_path: Path, monkeypatch) -> None:
    use_kubeconfig(monkeypatch, tmp_path / "missing")
    backend = KubeJobs()
    with pytest.raises(BackendUnavailable, match="no Kubernetes cluster configured") as caught:
        backend.poll_jobs()
    assert "KUBECONFIG" in (caught.value.hint or "")
    with pytest.raises(BackendUnavailable, match="nowhere.yaml not found"):
        KubeJobs(str(tmp_path / "nowhere.yaml"), watch=False).poll_jobs()
    broken = tmp_path / "broken"
    broken.write_text("clusters: [")
    with pytest.raises(BackendUnavailable, match="kubeconfig cannot be"):
        KubeJobs(str(broken)).poll_jobs()

    sources = build_sources(SourceOptions())
    assert isinstance(sources[SourceKind.JOBS], Unconfigured)
    assert "KUBECONFIG" in sources[SourceKind.JOBS].hint
    assert isinstance(build_sources(SourceOptions(jobs="kube"))[SourceKind.JOBS], KubeJobs)
    assert isinstance(build_sources(SourceOptions(jobs="off", kubeconfig=str(broken)))[SourceKind.JOBS], Unconfigured)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    in_pod = build_sources(SourceOptions())[SourceKind.JOBS]
    assert isinstance(in_pod, KubeJobs), "in a pod: the service account"
    from kubernetes.config import incluster_config

    monkeypatch.setattr(incluster_config, "SERVICE_TOKEN_FILENAME", str(tmp_path / "no-token"))
    with pytest.raises(BackendUnavailable, match="in-cluster service account"):
        in_pod.poll_jobs()
    with pytest.raises(ValueError, match="unknown job source"):
        build_sources(SourceOptions(jobs="slurm"))


def test_a_context_of_a_kubeconfig_with_two_and_kubeconfig_lists(kube: KubeCluster, tmp_path: Path, monkeypatch) -> None:
    running_job(kube, "train-a")
    two = ks.write_kubeconfig(tmp_path / "two", kube.server.url,
                              {"first": {"token": TEST_TOKEN}, "second": {"token": OTHER_TOKEN, "namespace": "ml"}})
    backend = kube.backend(kubeconfig=str(two), context="second", watch=False)
    assert backend.name == "kube:second"
    assert [j.name for j in backend.poll_jobs().jobs] == ["train-a"]
    assert {r.token for r in kube.server.requests} == {OTHER_TOKEN}, "the second context's user"

    kube.server.requests.clear()
    assert kube.backend(kubeconfig=str(two), watch=False).poll_jobs().jobs
    assert {r.token for r in kube.server.requests} == {TEST_TOKEN}, "without --context: the current one"
    with pytest.raises(BackendUnavailable, match="'third' is not in the kubeconfig") as caught:
        kube.backend(kubeconfig=str(two), context="third").poll_jobs()
    assert "first, second" in (caught.value.hint or "")

    # KUBECONFIG with two files, as kubectl merges them: the context lives in the second file.
    only_second = ks.write_kubeconfig(tmp_path / "second-only", kube.server.url, {"second": {"token": OTHER_TOKEN}})
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join([str(tmp_path / "absent"), str(kube.kubeconfig), str(only_second)]))
    kube.server.requests.clear()
    assert kube.backend(context="second", watch=False).poll_jobs().jobs
    assert {r.token for r in kube.server.requests} == {OTHER_TOKEN}


# --------------------------------------------------------------------------- the CLI and the console


def test_snapshot_json_reads_the_cluster_of_a_kubeconfig(kube: KubeCluster, tmp_path: Path) -> None:
    kube.server.add(ks.node("gpu-node-1"))
    running_job(kube, "train-a", gpus=2)
    pending = kube.server.add(ks.job("train-b", "ml", gpus=8, state="pending"))
    kube.server.add(ks.pod_for(pending, node=None, phase="Pending", unschedulable=ks.INSUFFICIENT_GPU))
    env = {**os.environ, "KUBECONFIG": str(tmp_path / "none"), "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    result = subprocess.run(
        [sys.executable, "-m", "gpuconsole", "snapshot", "--json", "--no-db", "--gpus", "off", "--cloud", "off",
         "--kubeconfig", str(kube.kubeconfig)],
        capture_output=True, text=True, timeout=60, env=env, check=False,
    )
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    jobs = {j["name"]: j for j in doc["jobs"]}
    assert jobs["train-a"]["state"] == "running" and jobs["train-a"]["gpus"] == 2
    assert jobs["train-b"]["pending_reason"] == ks.INSUFFICIENT_GPU
    assert doc["nodes"][0]["gpu_allocated"] == 2
    source = next(s for s in doc["sources"] if s["kind"] == "jobs")
    assert (source["name"], source["state"]) == ("kube", "live")
    assert not kube.server.requested("watch=", watch=True), "a snapshot lists; it does not watch"


class QuickKubeJobs(KubeJobs):
    """KubeJobs with test-sized timeouts, for consoles whose sources the factory builds."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("request_timeout", 1.0)
        kwargs.setdefault("watch_timeout", 1)
        super().__init__(*args, **kwargs)


async def test_the_console_shows_the_jobs_live_goes_stale_under_a_hang_and_recovers(kube: KubeCluster, monkeypatch) -> None:
    from tests.helpers import wait_until as wait_in_app
    from tests.driving import column, pane_text, running

    monkeypatch.setattr(kube_backend, "KubeJobs", QuickKubeJobs)
    kube.server.add(ks.node("gpu-node-1"))
    running_job(kube, "train-a", gpus=2)
    pending = kube.server.add(ks.job("train-b", "ml", gpus=8, state="pending"))
    kube.server.add(ks.pod_for(pending, node=None, phase="Pending", unschedulable=ks.INSUFFICIENT_GPU))
    options = ConsoleOptions(sources=SourceOptions(jobs="auto", gpus="off", cloud="off", namespaces=("ml",)),
                             interval=0.2, timeout=3)
    console = Console(options)

    def jobs_state() -> SourceState:
        status = console.snapshot.source(SourceKind.JOBS)
        assert status is not None
        return status.state

    async with running(console, live=False) as (app, pilot):
        await wait_in_app(lambda: jobs_state() is SourceState.LIVE and len(app.snapshot.jobs) == 2)
        await pilot.press("3")
        await pilot.pause()
        assert set(column(app, "job-table", "name")) == {"train-a", "train-b"}
        assert any("Insufficient nvidia.com/gpu" in r for r in column(app, "job-table", "reason"))
        assert "Kubernetes: kube · live" in pane_text(app, "jobs")

        kube.server.hang(30)
        try:
            await wait_in_app(lambda: jobs_state() in (SourceState.STALE, SourceState.ERROR), timeout=10)
            await pilot.pause()
            assert len(app.snapshot.jobs) == 2, "the last data stays"
            assert "no answer" in pane_text(app, "jobs") or "silent" in pane_text(app, "jobs")
            await pilot.press("2")
            assert app.active_pane == "gpus", "keys still answer"
        finally:
            kube.server.release()
        running_job(kube, "train-c")
        console.refresh()
        await wait_in_app(lambda: jobs_state() is SourceState.LIVE and len(app.snapshot.jobs) == 3, timeout=10)


def test_the_command_line_flags_reach_the_backend(kube: KubeCluster, tmp_path: Path) -> None:
    from gpuconsole.cli.main import make_console, parse_args

    two = ks.write_kubeconfig(tmp_path / "two", kube.server.url, {"first": {}, "second": {"token": OTHER_TOKEN}})
    args = parse_args(["snapshot", "--no-db", "--kubeconfig", str(two), "--context", "second",
                       "--namespace", "ml", "--namespace", "research", "--namespace", "ml"])
    console = make_console(args)
    try:
        source = console.hub.runners[SourceKind.JOBS].source
        assert isinstance(source, KubeJobs) and source.name == "kube:second"
        assert (source.kubeconfig, source.namespaces, source.watch) == (str(two), ("ml", "research"), False)
    finally:
        console.close()
    assert parse_args(["--namespace", "ml", "--all-namespaces"]).namespaces == []
    off = make_console(parse_args(["snapshot", "--no-db", "--jobs", "off", "--kubeconfig", str(two)]))
    try:
        assert isinstance(off.hub.runners[SourceKind.JOBS].source, Unconfigured)
    finally:
        off.close()


def test_the_test_server_creates_patches_deletes_and_streams_logs_for_the_official_client(kube: KubeCluster) -> None:
    """What the next steps (submit, suspend, delete, logs) will use, through the client itself."""
    import threading

    from kubernetes import client, config

    api = config.new_client_from_config(config_file=str(kube.kubeconfig), persist_config=False)
    batch, core = client.BatchV1Api(api), client.CoreV1Api(api)
    try:
        body = ks.job("submitted", "ml", gpus=2)
        del body["status"]
        preview = json.loads(batch.create_namespaced_job("ml", body, dry_run="All", _preload_content=False).data)
        assert preview["metadata"]["name"] == "submitted" and kube.server.get("Job", "submitted", "ml") is None
        created = json.loads(batch.create_namespaced_job("ml", body, _preload_content=False).data)
        assert created["metadata"]["uid"] != body["metadata"]["uid"], "the server gives the uid"
        with pytest.raises(client.ApiException) as exists:
            batch.create_namespaced_job("ml", body, _preload_content=False)
        assert exists.value.status == 409

        kube.server.add(ks.cronjob("nightly", "ml"))
        batch.patch_namespaced_cron_job("nightly", "ml", {"spec": {"suspend": True}}, _preload_content=False)
        assert kube.server.get("CronJob", "nightly", "ml")["spec"]["suspend"] is True
        batch.patch_namespaced_cron_job("nightly", "ml", [{"op": "replace", "path": "/spec/suspend", "value": False}],
                                        _preload_content=False)
        assert kube.server.get("CronJob", "nightly", "ml")["spec"]["suspend"] is False

        batch.delete_namespaced_job("submitted", "ml", propagation_policy="Background", _preload_content=False)
        assert kube.server.get("Job", "submitted", "ml") is None
        with pytest.raises(client.ApiException) as missing:
            batch.delete_namespaced_job("submitted", "ml", _preload_content=False)
        assert missing.value.status == 404

        job = kube.server.add(ks.job("logs", "ml"))
        pod = kube.server.add(ks.pod_for(job))
        name = pod["metadata"]["name"]
        kube.server.append_log("ml", name, "epoch 1 loss 2.31")
        # Read raw: client 36 turns a text/plain answer into "b'…'" when it deserialises it.
        assert core.read_namespaced_pod_log(name, "ml", _preload_content=False).data == b"epoch 1 loss 2.31\n"
        stream = core.read_namespaced_pod_log(name, "ml", follow=True, _preload_content=False, _request_timeout=5)

        def more() -> None:
            time.sleep(0.2)
            kube.server.append_log("ml", name, "epoch 2 loss 1.87")
            kube.server.end_log("ml", name)

        threading.Thread(target=more, daemon=True).start()
        lines = [line.decode() for line in stream.stream(decode_content=False)]
        assert "".join(lines) == "epoch 1 loss 2.31\nepoch 2 loss 1.87\n"
    finally:
        api.close()


def test_the_console_submits_to_the_cluster_it_watches(kube: KubeCluster, monkeypatch) -> None:
    """The jobs the console watches and the ones it submits go through one context's client."""
    from gpuconsole.core.ops.manifests import JobRequest

    monkeypatch.setattr(kube_backend, "KubeJobs", QuickKubeJobs)
    options = ConsoleOptions(sources=SourceOptions(jobs="kube", gpus="off", cloud="off", namespaces=("ml",)),
                             interval=0.2, timeout=3)
    console = Console(options)
    console.start(open_store=False)
    try:
        assert console.services.jobs.available
        request = JobRequest(name="bert-ft", namespace="ml", command="python train.py", gpus=2, owner="ana")
        console.services.jobs.submit(request, dry_run=True)
        assert not any(r.method == "POST" and "dryRun" not in r.query for r in kube.server.requests)
        console.services.jobs.submit(request)
        wait_until(lambda: any(j.name == "bert-ft" for j in console.snapshot.jobs), timeout=10)
        job = next(j for j in console.snapshot.jobs if j.name == "bert-ft")
        assert job.gpus == 2 and job.namespace == "ml"
        assert console.services.actions.recent()[-1].ok
    finally:
        console.close()


async def test_the_palette_switches_the_kubernetes_context_like_ctx(kube: KubeCluster, tmp_path: Path, monkeypatch) -> None:
    """ctrl+p, "Kubernetes context: second": the jobs now come as the second context's user."""
    from tests.helpers import wait_until as wait_in_app
    from tests.driving import running

    monkeypatch.setattr(kube_backend, "KubeJobs", QuickKubeJobs)
    running_job(kube, "train-a")
    two = ks.write_kubeconfig(tmp_path / "two", kube.server.url,
                              {"first": {"token": TEST_TOKEN}, "second": {"token": OTHER_TOKEN, "namespace": "ml"}})
    monkeypatch.setenv("KUBECONFIG", str(two))
    options = ConsoleOptions(sources=SourceOptions(jobs="kube", gpus="off", cloud="off"), interval=0.2, timeout=3)
    console = Console(options)
    assert console.kube_contexts() == (("first", "second"), "first")
    async with running(console, live=False) as (app, pilot):
        await wait_in_app(lambda: any(j.name == "train-a" for j in app.snapshot.jobs))
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"context: second")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await wait_in_app(lambda: app.snapshot.source(SourceKind.JOBS).name == "kube:second", timeout=10)
        kube.server.requests.clear()
        await wait_in_app(lambda: any(j.name == "train-a" for j in app.snapshot.jobs)
                          and any(r.token == OTHER_TOKEN for r in kube.server.requests), timeout=10)
        assert console.kube_contexts()[1] == "second"
    from gpuconsole.core.ops.actions import ActionError

    with pytest.raises(ActionError, match="no context 'third'"):
        console.switch_context("third")
