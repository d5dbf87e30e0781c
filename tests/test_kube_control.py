"""Changing jobs on a cluster: the official client over real HTTP against the Kubernetes API test
server (tests/kube_server.py), as ``KubeJobControl`` does it."""

from __future__ import annotations

import re
import threading
import time

import kubernetes
import pytest

from gpuconsole.backends.base import (
    BackendError,
    BackendPermissionDenied,
    BackendTimeout,
    JobControl,
)
from gpuconsole.backends.kube.control import KubeJobControl
from gpuconsole.core.ops.manifests import manifests
from tests import kube_server
from tests.kube_server import cronjob, event, job, pod_for, wait_until
from tests.test_manifests import (
    CRON_REQUEST,
    DISTRIBUTED_REQUEST,
    EXPECTED_CRONJOB,
    EXPECTED_INDEXED_JOB,
    EXPECTED_JOB,
    EXPECTED_SERVICE,
    JOB_REQUEST,
)


def control_for(kube, timeout: float = 2.0) -> KubeJobControl:
    path = str(kube.kubeconfig)
    return KubeJobControl(lambda: kubernetes.config.new_client_from_config(config_file=path, persist_config=False),
                          request_timeout=timeout)


def posted(server, plural: str) -> list:
    return [r.body for r in server.requested(f"/{plural}", method="POST")]


def test_it_is_a_job_control(kube) -> None:
    assert isinstance(control_for(kube), JobControl)


def test_a_job_reaches_the_server_exactly_as_reviewed(kube) -> None:
    control = control_for(kube)
    assert control.submit(manifests(JOB_REQUEST)) == ["Job team-nlp/bert-finetune"]
    assert posted(kube.server, "namespaces/team-nlp/jobs") == [EXPECTED_JOB]
    stored = kube.server.get("Job", "bert-finetune", "team-nlp")
    assert stored["spec"] == EXPECTED_JOB["spec"] and stored["metadata"]["uid"]


def test_distributed_training_sends_the_indexed_job_then_its_service_owned_by_it(kube) -> None:
    control = control_for(kube)
    assert control.submit(manifests(DISTRIBUTED_REQUEST)) == ["Job research/llama-ddp", "Service research/llama-ddp"]
    server = kube.server
    assert posted(server, "namespaces/research/jobs") == [EXPECTED_INDEXED_JOB]
    uid = server.get("Job", "llama-ddp", "research")["metadata"]["uid"]
    owned = {**EXPECTED_SERVICE, "metadata": {**EXPECTED_SERVICE["metadata"], "ownerReferences": [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "llama-ddp", "uid": uid}]}}
    assert posted(server, "namespaces/research/services") == [owned]
    assert [r.path for r in server.requested(method="POST")] == [
        "/apis/batch/v1/namespaces/research/jobs", "/api/v1/namespaces/research/services"]


def test_a_cronjob_is_sent_exactly(kube) -> None:
    assert control_for(kube).submit(manifests(CRON_REQUEST)) == ["CronJob inference/nightly-eval"]
    assert posted(kube.server, "namespaces/inference/cronjobs") == [EXPECTED_CRONJOB]


def test_a_dry_run_checks_every_object_and_stores_nothing(kube) -> None:
    server = kube.server
    control = control_for(kube)
    assert control.submit(manifests(DISTRIBUTED_REQUEST), dry_run=True) == [
        "Job research/llama-ddp", "Service research/llama-ddp"]
    assert [r.query.get("dryRun") for r in server.requested(method="POST")] == ["All", "All"]
    assert server.objects("Job") == [] and server.objects("Service") == []


def test_an_object_the_server_refuses_comes_back_as_one_line(kube) -> None:
    control = control_for(kube)
    kube.server.fail(422, path_contains="/jobs", method="POST", times=1,
                     message='Job.batch "bert-finetune" is invalid: spec.template.spec.containers[0].image: '
                             "Required value\nand a second line nobody reads")
    with pytest.raises(BackendError) as refused:
        control.submit(manifests(JOB_REQUEST))
    message = str(refused.value)
    assert message == ('creating Job team-nlp/bert-finetune: Job.batch "bert-finetune" is invalid: '
                       "spec.template.spec.containers[0].image: Required value")
    # The server's own checks: no name, and a name that is taken.
    nameless = {**EXPECTED_JOB, "metadata": {"namespace": "team-nlp"}}
    with pytest.raises(BackendError, match=r"Job is invalid: metadata.name: Required value"):
        control.submit([nameless])
    control.submit(manifests(JOB_REQUEST))
    with pytest.raises(BackendError, match=r'jobs.batch "bert-finetune" already exists') as taken:
        control.submit(manifests(JOB_REQUEST), dry_run=True)
    assert "\n" not in str(taken.value)


def test_a_service_refused_after_its_job_says_what_was_created(kube) -> None:
    kube.server.fail(409, path_contains="/services", method="POST", message='services "llama-ddp" already exists')
    with pytest.raises(BackendError) as refused:
        control_for(kube).submit(manifests(DISTRIBUTED_REQUEST))
    assert str(refused.value) == ('creating Service research/llama-ddp: services "llama-ddp" already exists '
                                  "(created before it: Job research/llama-ddp)")


def test_delete_is_background_propagation(kube) -> None:
    kube.add(job("train-a", "team-nlp"), cronjob("nightly", "team-nlp"))
    control = control_for(kube)
    control.delete("Job", "team-nlp", "train-a")
    control.delete("CronJob", "team-nlp", "nightly")
    bodies = [r.body for r in kube.server.requested(method="DELETE")]
    assert bodies == [{"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}] * 2
    assert kube.server.objects("Job") == [] and kube.server.objects("CronJob") == []
    with pytest.raises(BackendError, match=r'deleting Job team-nlp/train-a: jobs "train-a" not found'):
        control.delete("Job", "team-nlp", "train-a")
    with pytest.raises(BackendError, match="only Jobs and CronJobs"):
        control.delete("Pod", "team-nlp", "x")


def test_suspend_and_resume_are_merge_patches(kube) -> None:
    kube.add(job("train-a", "team-nlp"), cronjob("nightly", "team-nlp"))
    control = control_for(kube)
    control.suspend("Job", "team-nlp", "train-a", True)
    control.suspend("CronJob", "team-nlp", "nightly", True)
    assert kube.server.get("Job", "train-a", "team-nlp")["spec"]["suspend"] is True
    assert kube.server.get("CronJob", "nightly", "team-nlp")["spec"]["suspend"] is True
    control.suspend("Job", "team-nlp", "train-a", False)
    assert kube.server.get("Job", "train-a", "team-nlp")["spec"]["suspend"] is False
    assert [r.body for r in kube.server.requested(method="PATCH")] == [
        {"spec": {"suspend": True}}, {"spec": {"suspend": True}}, {"spec": {"suspend": False}}]


def test_trigger_creates_a_manual_job_from_the_template(kube) -> None:
    (cron,) = kube.add(cronjob("nightly-eval", "team-nlp", gpus=4))
    name = control_for(kube).trigger("team-nlp", "nightly-eval")
    assert re.fullmatch(r"nightly-eval-manual-[a-z0-9]{5}", name)
    created = kube.server.get("Job", name, "team-nlp")
    assert created["metadata"]["annotations"] == {"cronjob.kubernetes.io/instantiate": "manual"}
    assert created["metadata"]["ownerReferences"] == [
        {"apiVersion": "batch/v1", "kind": "CronJob", "name": "nightly-eval", "uid": cron["metadata"]["uid"],
         "controller": True}]
    assert created["spec"] == cron["spec"]["jobTemplate"]["spec"]


def test_a_long_cronjob_name_still_makes_a_valid_job_name(kube) -> None:
    kube.add(cronjob("c" * 52, "team-nlp"))
    name = control_for(kube).trigger("team-nlp", "c" * 52)
    assert len(name) <= 63 and name.startswith("c" * 40)


def test_logs_tail_then_follow_until_the_container_exits(kube) -> None:
    (train,) = kube.add(job("train-a", "team-nlp"))
    (pod,) = kube.add(pod_for(train, suffix="x7k2p"))
    pod_name = pod["metadata"]["name"]
    kube.server.append_log("team-nlp", pod_name, *(f"step {i}" for i in range(10)))
    control = control_for(kube)
    assert list(control.logs("team-nlp", pod_name, tail_lines=3)) == ["step 7", "step 8", "step 9"]
    assert kube.server.requested("/log")[-1].query == {"tailLines": "3"}

    got: list[str] = []
    reader = threading.Thread(target=lambda: got.extend(control.logs("team-nlp", pod_name, tail_lines=1, follow=True)))
    reader.start()
    wait_until(lambda: got == ["step 9"])
    kube.server.append_log("team-nlp", pod_name, "epoch 1 loss 0.53", "epoch 2 loss 0.41")
    wait_until(lambda: len(got) == 3)
    kube.server.end_log("team-nlp", pod_name)
    reader.join(5)
    assert not reader.is_alive()
    assert got == ["step 9", "epoch 1 loss 0.53", "epoch 2 loss 0.41"]


def test_following_a_quiet_log_stops_when_asked(kube) -> None:
    (train,) = kube.add(job("train-a", "team-nlp"))
    (pod,) = kube.add(pod_for(train, suffix="q9z8w"))
    stop = threading.Event()
    got: list[str] = []
    lines = control_for(kube, timeout=1.0).logs("team-nlp", pod["metadata"]["name"], follow=True, stop=stop)
    reader = threading.Thread(target=lambda: got.extend(lines))
    reader.start()
    wait_until(lambda: kube.server.requested("/log"))
    time.sleep(1.5)  # longer than the request timeout: a quiet log is not a dead server
    assert reader.is_alive()
    stop.set()
    reader.join(3)
    assert not reader.is_alive() and got == []


def test_logs_of_a_missing_pod_say_so(kube) -> None:
    with pytest.raises(BackendError, match=r'reading the log of pod team-nlp/gone: pods "gone" not found'):
        list(control_for(kube).logs("team-nlp", "gone"))


def test_describe_shows_the_object_and_the_events_of_the_job_and_its_pods(kube) -> None:
    (train,) = kube.add(job("train-a", "team-nlp", gpus=2, state="pending"))
    (pod,) = kube.add(pod_for(train, node=None, phase="Pending", unschedulable=kube_server.INSUFFICIENT_GPU))
    kube.add(event(pod), event(train, "Created pod: " + pod["metadata"]["name"], reason="SuccessfulCreate",
                               type_="Normal"))
    text = control_for(kube).describe("Job", "team-nlp", "train-a")
    assert text.startswith("apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: train-a\n")
    assert "nvidia.com/gpu: '2'" in text
    events = text.split("\nEvents:\n", 1)[1]
    assert "SuccessfulCreate" in events and "job-controller" in events
    assert f"pod/{pod['metadata']['name']}: 0/4 nodes are available: 4 Insufficient nvidia.com/gpu." in events
    assert "FailedScheduling" in events and "default-scheduler" in events


def test_describe_of_a_cronjob_without_events(kube) -> None:
    kube.add(cronjob("nightly", "team-nlp", schedule="0 3 * * *"))
    text = control_for(kube).describe("CronJob", "team-nlp", "nightly")
    assert "schedule: 0 3 * * *" in text and text.endswith("Events:\n  <none>")


def test_credentials_refused_forbidden_and_no_answer(kube) -> None:
    kube.add(job("train-a", "team-nlp"))
    control = control_for(kube, timeout=0.5)
    kube.server.fail(401, times=1)
    with pytest.raises(BackendPermissionDenied, match="401 Unauthorized"):
        control.delete("Job", "team-nlp", "train-a")
    kube.server.fail(403, times=1, message='jobs.batch "train-a" is forbidden: User "bob" cannot delete resource')
    with pytest.raises(BackendPermissionDenied, match="^denied by the cluster: jobs.batch"):
        control.delete("Job", "team-nlp", "train-a")
    kube.server.hang(3)
    try:
        with pytest.raises(BackendTimeout, match="no answer"):
            control.suspend("Job", "team-nlp", "train-a", True)
    finally:
        kube.server.release()
    kube.server.fail(500, times=1, path_contains="/cronjobs/nightly", message="etcdserver: request timed out")
    with pytest.raises(BackendError, match="etcdserver: request timed out"):
        control.trigger("team-nlp", "nightly")
