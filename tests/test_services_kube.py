"""The Kubernetes services backend against the Kubernetes API test server (tests/kube_server.py).

The official client reaches the server over HTTP from a kubeconfig: GPU Deployments and
StatefulSets (a CPU one is not a service), the HPA that targets one, KServe InferenceServices
where discovery shows the CRD (and nothing at all where it does not), why a replica waits,
rollouts, and the changes: scale through the scale subresource, rollout restart, logs,
describe, and a 403 from RBAC in one line.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import pytest

from gpuconsole.backends.base import (
    AuthorizationDenied,
    BackendError,
    BackendPermissionDenied,
    BackendTimeout,
    ServiceControl,
)
from gpuconsole.backends.kube.services import KubeServices
from gpuconsole.core.fleet.console import Console, ConsoleOptions
from gpuconsole.core.fleet.sources import SourceOptions, build_sources
from gpuconsole.core.ops.actions import ActionDenied, ActionLog
from gpuconsole.core.ops.service_ops import ServiceOps
from gpuconsole.model import Rollout, Service, ServiceKind, ServicesReading, SourceKind
from tests import kube_server as ks
from tests import kube_serving as kv
from tests.kube_rbac import DEV_TOKEN, READ, RbacApiServer
from tests.kube_server import KubeCluster, wait_until

pytestmark = pytest.mark.slow

H100 = "NVIDIA-H100-80GB-HBM3"
WAITING = {"type": "Pods", "pods": {"metric": {"name": "vllm:num_requests_waiting"},
                                    "target": {"type": "AverageValue", "averageValue": "10"}}}
CPU = {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}
WAITING_NOW = {"type": "Pods", "pods": {"metric": {"name": "vllm:num_requests_waiting"},
                                        "current": {"averageValue": "4"}}}


def by_key(reading: ServicesReading) -> dict[str, Service]:
    return {s.key: s for s in reading.services}


def poll_until(backend: KubeServices, check: Callable[[ServicesReading], object]) -> ServicesReading:
    return ks.poll_until(backend.poll_services, check)


def serving_cluster(kube: KubeCluster) -> dict[str, dict]:
    """A vLLM Deployment on two H100s a replica with an HPA, a CPU Deployment, and a Triton
    StatefulSet on MIG slices, each with its pods."""
    server = kube.server
    server.add(ks.node("gpu-node-1", product=H100))
    server.add(ks.node("gpu-node-2", product=H100))
    llm = server.add(kv.deployment("vllm-llama3", "chat", replicas=2, gpus=2))
    server.add(kv.pod_of(llm, node="gpu-node-1"))
    server.add(kv.pod_of(llm, node="gpu-node-2"))
    web = server.add(kv.deployment("web", "chat", replicas=2, gpus=0, image="nginx:1.27"))
    server.add(kv.pod_of(web, node="cpu-node-1"))
    vision = server.add(kv.statefulset("triton-vision", "vision", replicas=2, gpus=0, mig={"3g.40gb": 1}))
    server.add(kv.pod_of(vision, 0, node="gpu-node-1"))
    server.add(kv.pod_of(vision, 1, node="gpu-node-2"))
    server.add(kv.hpa("vllm-llama3", llm, metrics=[WAITING, CPU], current_metrics=[WAITING_NOW]))
    return {"llm": llm, "web": web, "vision": vision}


# --------------------------------------------------------------------------- reading


def test_gpu_deployments_a_statefulset_and_an_hpa_are_listed_and_a_cpu_deployment_is_not(kube: KubeCluster,
                                                                                         caplog) -> None:
    objects = serving_cluster(kube)
    backend = kube.services()
    assert isinstance(backend, ServiceControl)
    reading = backend.poll_services()
    services = by_key(reading)
    assert list(services) == ["chat/vllm-llama3", "vision/triton-vision"]
    assert reading.kserve is False and reading.serving is None

    llm = services["chat/vllm-llama3"]
    assert llm.kind is ServiceKind.DEPLOYMENT
    assert (llm.replicas_desired, llm.replicas_ready, llm.replicas_available) == (2, 2, 2)
    assert (llm.gpus_per_replica, llm.gpus, llm.mig_profile) == (2.0, 4.0, None)
    assert llm.nodes == ("gpu-node-1", "gpu-node-2") and llm.gpu_model == H100
    assert llm.image == kv.VLLM and llm.uid == objects["llm"]["metadata"]["uid"]
    assert llm.created == pytest.approx(time.time() - 3600, abs=120)
    assert ("app.kubernetes.io/name", "vllm-llama3") in llm.labels
    assert llm.rollout is Rollout.COMPLETE and llm.pending_reason is None
    assert len(llm.replicas) == 2 and all(r.ready and r.phase == "Running" and r.gpus == 2.0 for r in llm.replicas)
    assert {r.node for r in llm.replicas} == {"gpu-node-1", "gpu-node-2"}
    assert llm.rps is None and llm.usd_per_hour is None  # figures and money are the core's join
    hpa = llm.hpa
    assert hpa is not None and hpa.name == "vllm-llama3"
    assert (hpa.min_replicas, hpa.max_replicas, hpa.current_replicas, hpa.desired_replicas) == (2, 8, 2, 3)
    assert hpa.metrics == ("pods vllm:num_requests_waiting 4/10", "cpu 80%")

    vision = services["vision/triton-vision"]
    assert vision.kind is ServiceKind.STATEFULSET and vision.hpa is None
    assert vision.mig_profile == "3g.40gb" and vision.gpus_per_replica == pytest.approx(3 / 7)
    assert vision.gpus == pytest.approx(6 / 7)
    assert [r.pod for r in vision.replicas] == ["triton-vision-0", "triton-vision-1"]
    assert vision.rollout is Rollout.COMPLETE

    # Watched: a scale-up the controller makes shows without a new list.
    lists = len(kube.server.requested("/deployments", watch=False))
    kube.server.modify("Deployment", "vllm-llama3", "chat", {"spec": {"replicas": 3}, "status": {"replicas": 3}})
    kube.server.add(kv.pod_of(objects["llm"], node=None, ready=False))
    # Each kind has its own watch: the pod may come before the Deployment's change, so wait for both.
    reading = poll_until(backend, lambda r: len(by_key(r)["chat/vllm-llama3"].replicas) == 3
                         and by_key(r)["chat/vllm-llama3"].replicas_desired == 3)
    assert by_key(reading)["chat/vllm-llama3"].replicas_desired == 3
    assert len(kube.server.requested("/deployments", watch=False)) == lists
    # Without watching, one poll lists the same; a Deployment that cannot be read is skipped, and said once.
    odd = kv.deployment("odd", "chat")
    odd["spec"]["replicas"] = "two"
    kube.server.add_raw("deployments", odd)
    with caplog.at_level(logging.WARNING, logger="gpuconsole.backends.kube"):
        listed = kube.services(watch=False).poll_services()
    assert list(by_key(listed)) == ["chat/vllm-llama3", "vision/triton-vision"]
    assert "skipping Deployment chat/odd: cannot read it" in caplog.text


def test_a_pending_replica_says_why_in_the_schedulers_words(kube: KubeCluster) -> None:
    llm = kube.server.add(kv.deployment("vllm-70b", "chat", replicas=3, gpus=8, ready=1, rollout="progressing"))
    kube.server.add(kv.pod_of(llm, node="gpu-node-1"))
    waiting = kube.server.add(kv.pod_of(llm, node=None, ready=False, unschedulable=ks.INSUFFICIENT_GPU))
    kube.server.add(kv.pod_of(llm, node="gpu-node-2", ready=False,
                              waiting=("ImagePullBackOff", f'Back-off pulling image "{kv.VLLM}"')))
    service = by_key(kube.services().poll_services())["chat/vllm-70b"]
    reasons = {r.pod: r.pending_reason for r in service.replicas}
    assert reasons[waiting["metadata"]["name"]] == ks.INSUFFICIENT_GPU
    assert sorted(str(r) for r in reasons.values()) == sorted(
        ["None", ks.INSUFFICIENT_GPU, f'ImagePullBackOff: Back-off pulling image "{kv.VLLM}"'])
    assert service.pending_reason in (ks.INSUFFICIENT_GPU, f'ImagePullBackOff: Back-off pulling image "{kv.VLLM}"')
    assert (service.replicas_desired, service.replicas_ready) == (3, 1)
    assert service.gpus == 16.0  # the replicas on a node hold their GPUs; the waiting one holds none yet
    assert service.rollout is Rollout.PROGRESSING
    assert service.rollout_message == 'Waiting for deployment "vllm-70b" rollout to finish: 2 out of 3 new replicas have been updated...'


def test_a_rollout_past_its_deadline_says_progress_deadline_exceeded(kube: KubeCluster) -> None:
    stuck = kube.server.add(kv.deployment("embed", "search", replicas=2, gpus=1, ready=1, rollout="stalled"))
    kube.server.add(kv.pod_of(stuck))
    service = by_key(kube.services(watch=False).poll_services())["search/embed"]
    assert service.rollout is Rollout.STALLED
    assert service.rollout.value == "ProgressDeadlineExceeded"
    assert service.rollout_message == 'ReplicaSet "embed-7c9f8b6d5" has timed out progressing.'


def test_a_hung_server_fails_the_poll_with_a_timeout_and_the_source_recovers(kube: KubeCluster) -> None:
    serving_cluster(kube)
    backend = kube.services(request_timeout=0.5)
    kube.server.hang(5)
    try:
        with pytest.raises(BackendTimeout, match="no answer"):
            backend.poll_services()
    finally:
        kube.server.release()
    reading = poll_until(backend, lambda r: len(r.services) == 2)
    assert reading.kserve is None  # discovery timed out too: not known, asked again later


# --------------------------------------------------------------------------- KServe


def test_an_inference_service_where_discovery_shows_the_crd(kube: KubeCluster) -> None:
    kube.server.kserve = True
    kube.server.add(ks.node("gpu-node-1", product=H100))
    isvc = kube.server.add(kv.inference_service("llama3", "models", gpus=1, low=2, high=4))
    shape = kv.inference_pod_template(isvc)
    for _ in range(2):
        kube.server.add(kv.pod_of(shape, node="gpu-node-1"))
    # Raw deployment mode: KServe runs the predictor as a Deployment of its own, with an HPA.
    raw = kv.deployment("llama3-predictor", "models", replicas=2, gpus=1, labels={kv.ISVC_LABEL: "llama3"})
    raw = kube.server.add(raw)
    old = kv.deployment("llama3-predictor-00001-deployment", "models", replicas=0, gpus=1, labels={kv.ISVC_LABEL: "llama3"})
    old["metadata"]["creationTimestamp"] = ks.stamp(time.time() - 86400)  # an older revision, scaled to zero
    kube.server.add(old)
    kube.server.add(kv.hpa("llama3-predictor", raw, low=2, high=4, metrics=[CPU]))
    reading = kube.services().poll_services()
    assert reading.kserve is True
    assert list(by_key(reading)) == ["models/llama3"]  # the predictor's Deployment is not listed twice
    service = by_key(reading)["models/llama3"]
    assert service.kind is ServiceKind.INFERENCESERVICE and service.uid == isvc["metadata"]["uid"]
    assert (service.replicas_desired, service.replicas_ready, service.gpus_per_replica, service.gpus) == (2, 2, 1.0, 2.0)
    assert service.hpa is not None and service.hpa.max_replicas == 4 and service.hpa.metrics == ("cpu 80%",)
    assert service.rollout is Rollout.COMPLETE and service.gpu_model == H100
    assert kube.server.requested("/apis/serving.kserve.io/v1beta1/inferenceservices", watch=False)


def test_without_the_crd_there_is_no_error_no_noise_and_no_failing_request(kube: KubeCluster, caplog) -> None:
    serving_cluster(kube)
    kube.server.add(kv.inference_service("orphan", "models"))  # stored, but no CRD serves it
    with caplog.at_level(logging.DEBUG, logger="gpuconsole.backends.kube"):
        backend = kube.services()
        for _ in range(3):
            reading = backend.poll_services()
        listed = kube.services(watch=False).poll_services()
    assert reading.kserve is False and listed.kserve is False
    assert [s.kind for s in reading.services] == [ServiceKind.DEPLOYMENT, ServiceKind.STATEFULSET]
    assert not kube.server.requested("serving.kserve.io")  # never asked for
    discoveries = [r for r in kube.server.requests if r.path.rstrip("/") == "/apis"]
    assert len(discoveries) == 2  # once per backend, not once per poll
    assert not [r for r in caplog.records if r.levelno >= logging.INFO]

    # Installed later: the next discovery finds it; one that failed is asked again.
    kube.server.kserve = True
    later = kube.services(discovery_every=0.0)
    kube.server.fail(503, times=1, path_contains="/apis/", message="the server is currently unable to handle the request")
    assert later.poll_services().kserve is None
    assert [s.key for s in later.poll_services().services if s.kind is ServiceKind.INFERENCESERVICE] == ["models/orphan"]


def test_namespaces_asked_for_are_the_ones_read(kube: KubeCluster) -> None:
    serving_cluster(kube)
    kube.server.kserve = True
    kube.add(kv.inference_service("llama3", "models"), kv.inference_service("other", "elsewhere"))
    reading = kube.services(namespaces=("chat", "models"), watch=False).poll_services()
    assert list(by_key(reading)) == ["chat/vllm-llama3", "models/llama3"]
    assert kube.server.requested("/apis/serving.kserve.io/v1beta1/namespaces/models/inferenceservices")
    assert not kube.server.requested("/apis/apps/v1/deployments")  # never across every namespace


# --------------------------------------------------------------------------- changes


def test_scale_patches_the_scale_subresource(kube: KubeCluster) -> None:
    objects = serving_cluster(kube)
    kube.server.kserve = True
    kube.server.add(kv.inference_service("llama3", "models", low=1, high=3))
    backend = kube.services()
    backend.scale_service("Deployment", "chat", "vllm-llama3", 5)
    patches = kube.server.requested("/apis/apps/v1/namespaces/chat/deployments/vllm-llama3/scale", method="PATCH")
    assert [p.body for p in patches] == [{"spec": {"replicas": 5}}]
    assert kube.server.get("Deployment", "vllm-llama3", "chat")["spec"]["replicas"] == 5
    assert kube.server.get("Deployment", "vllm-llama3", "chat")["spec"]["template"] == objects["llm"]["spec"]["template"]

    backend.scale_service("StatefulSet", "vision", "triton-vision", 0)
    patches = kube.server.requested("/apis/apps/v1/namespaces/vision/statefulsets/triton-vision/scale", method="PATCH")
    assert [p.body for p in patches] == [{"spec": {"replicas": 0}}]

    backend.scale_service("InferenceService", "models", "llama3", 4)
    patches = kube.server.requested("/inferenceservices/llama3", method="PATCH")
    assert [p.body for p in patches] == [{"spec": {"predictor": {"minReplicas": 4, "maxReplicas": 4}}}]
    assert kube.server.get("InferenceService", "llama3", "models")["spec"]["predictor"]["minReplicas"] == 4

    mesh = kv.inference_service("mesh", "models")
    mesh["metadata"]["annotations"]["serving.kserve.io/deploymentMode"] = "ModelMesh"
    kube.server.add(mesh)
    with pytest.raises(BackendError, match="^cannot scale InferenceService models/mesh: ModelMesh places"):
        backend.scale_service("InferenceService", "models", "mesh", 2)
    assert not kube.server.requested("/inferenceservices/mesh", method="PATCH")

    with pytest.raises(BackendError, match="not found"):
        backend.scale_service("Deployment", "chat", "gone", 1)
    with pytest.raises(BackendError, match="only Deployments, StatefulSets and InferenceServices"):
        backend.scale_service("Job", "chat", "train", 1)


def test_restart_logs_and_describe(kube: KubeCluster) -> None:
    objects = serving_cluster(kube)
    backend = kube.services()
    backend.restart_service("Deployment", "chat", "vllm-llama3")
    (patch,) = kube.server.requested("/deployments/vllm-llama3", method="PATCH")
    stamp = patch.body["spec"]["template"]["metadata"]["annotations"]["kubectl.kubernetes.io/restartedAt"]
    assert stamp.endswith("Z") and abs(time.time() - _epoch(stamp)) < 120
    assert kube.server.get("Deployment", "vllm-llama3", "chat")["spec"]["template"]["spec"] == \
        objects["llm"]["spec"]["template"]["spec"]

    pod = by_key(backend.poll_services())["chat/vllm-llama3"].replicas[0].pod
    kube.server.append_log("chat", pod, "INFO vLLM API server listening on 0.0.0.0:8000", "INFO 200 POST /v1/chat")
    assert list(backend.service_logs("chat", pod, tail_lines=1)) == ["INFO 200 POST /v1/chat"]

    kube.server.add(ks.event({**objects["llm"], "kind": "Deployment"}, "Scaled up replica set vllm-llama3-7c9f8b6d5 to 2",
                             reason="ScalingReplicaSet", type_="Normal"))
    text = backend.describe_service("Deployment", "chat", "vllm-llama3")
    assert text.startswith("apiVersion: apps/v1\nkind: Deployment\n")
    assert "ScalingReplicaSet" in text and "Scaled up replica set" in text

    # An InferenceService: its predictor is annotated (KServe rolls its pods), described with its pods' events.
    kube.server.kserve = True
    isvc = kube.server.add(kv.inference_service("llama3", "models"))
    waiting = kube.server.add(kv.pod_of(kv.inference_pod_template(isvc), node=None, ready=False))
    kube.server.add(ks.event(waiting))
    backend.restart_service("InferenceService", "models", "llama3")
    (patch,) = kube.server.requested("/inferenceservices/llama3", method="PATCH")
    assert list(patch.body["spec"]["predictor"]["annotations"]) == ["kubectl.kubernetes.io/restartedAt"]
    text = backend.describe_service("InferenceService", "models", "llama3")
    assert text.startswith("apiVersion: serving.kserve.io/v1beta1\nkind: InferenceService\n")
    assert f"pod/{waiting['metadata']['name']}: {ks.INSUFFICIENT_GPU}" in text


def _epoch(text: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def test_a_403_from_rbac_is_one_line(tmp_path, monkeypatch) -> None:
    server = RbacApiServer().start()
    try:
        path = ks.write_kubeconfig(tmp_path / "rbac", server.url, {"rbac": {"token": DEV_TOKEN}})
        ks.use_kubeconfig(monkeypatch, path)
        server.grant(DEV_TOKEN, "alice", "chat", READ, resources=("deployments", "pods", "pods/log"))
        server.add(kv.deployment("vllm-llama3", "chat"))
        backend = KubeServices(str(path), request_timeout=2.0, watch=False)
        try:
            with pytest.raises(AuthorizationDenied) as denied:
                backend.scale_service("Deployment", "chat", "vllm-llama3", 4)
            message = str(denied.value)
            assert "\n" not in message
            assert message.startswith("denied by the cluster: ") and 'User "alice" cannot patch' in message
            assert not server.get("Deployment", "vllm-llama3", "chat")["spec"]["replicas"] == 4
            # Through the one action path: denied in the cluster's words, one line, recorded.
            log = ActionLog()
            ops = ServiceOps(lambda: backend, log=log)
            with pytest.raises(ActionDenied) as through:
                ops.scale(("Deployment", "chat", "vllm-llama3"), 4)
            assert str(through.value) == message
            (result,) = log.recent()
            assert not result.ok and result.message == f"denied: {message.removeprefix('denied ')}"
            # Listing across every namespace is refused too: the source says so in one line.
            with pytest.raises(BackendPermissionDenied) as refused:
                backend.poll_services()
            assert "\n" not in str(refused.value) and "forbidden listing Deployments" in str(refused.value)
        finally:
            backend.close()
    finally:
        server.stop()


def test_the_console_shows_the_clusters_services_and_scales_them_through_its_action_path(kube: KubeCluster) -> None:
    serving_cluster(kube)
    options = ConsoleOptions(sources=SourceOptions(gpus="off", cloud="off"), interval=0.2, timeout=6)
    console = Console(options)
    console.start(open_store=False)
    try:
        wait_until(lambda: {s.key for s in console.snapshot.services} == {"chat/vllm-llama3", "vision/triton-vision"},
                   timeout=15)
        source = next(s for s in console.snapshot.sources if s.kind is SourceKind.SERVICES)
        assert (source.name, source.state.value) == ("kube", "live")
        llm = next(s for s in console.snapshot.services if s.key == "chat/vllm-llama3")
        assert llm.gpus == 4.0 and llm.usd_per_hour is None  # no cloud: the cost is unknown, not $0
        result = console.services.service_ops.scale(llm, 3)
        assert result.ok and result.message == "scaled Deployment chat/vllm-llama3 to 3 replicas"
        (patch,) = kube.server.requested("/deployments/vllm-llama3/scale", method="PATCH")
        assert patch.body == {"spec": {"replicas": 3}}
        wait_until(lambda: any(s.key == "chat/vllm-llama3" and s.replicas_desired == 3
                               for s in console.snapshot.services), timeout=10)
    finally:
        console.close()


def test_a_kubeconfig_brings_the_kube_services_source(kube: KubeCluster) -> None:
    sources = build_sources(SourceOptions(kubeconfig=str(kube.kubeconfig), gpus="off", cloud="off", watch_jobs=False))
    try:
        assert isinstance(sources[SourceKind.SERVICES], KubeServices)
    finally:
        for source in sources.values():
            source.close()
