"""A serve-scale rule end to end: the Kubernetes API test server lists a vLLM Deployment, a real
Prometheus scrapes a CPU model server labelled as its pod, the console joins the two (the
``kube`` services source with Prometheus's figures), and on a p99 breach the rule patches the
Deployment's scale subresource, audited as the rule; next to an HPA it patches nothing."""

from __future__ import annotations

import time

import pytest
from msgspec.structs import replace as msgspec_replace

from gpuconsole.backends.prometheus import PrometheusSettings
from gpuconsole.backends.served import FiguresSettings, ServedServices
from gpuconsole.core.fleet.console import Console, ConsoleOptions
from gpuconsole.core.fleet.sources import SourceOptions
from gpuconsole.core.ops.autopilot.actuator import CloudActuator
from gpuconsole.core.ops.autopilot.engine import Engine
from gpuconsole.core.ops.autopilot.rules import rule_from_table
from gpuconsole.core.ops.autopilot.state import AutopilotState
from gpuconsole.model import SourceKind
from tests import kube_server as ks
from tests import kube_serving as kv
from tests.kube_server import KubeCluster
from tests.model_server import LoadLoop, ModelServer, scrape_config
from tests.prometheus_peer import PrometheusProcess, find_prometheus

BINARY = find_prometheus()
pytestmark = [pytest.mark.slow, pytest.mark.peer,
              pytest.mark.skipif(BINARY is None, reason="no prometheus binary on this machine")]

WINDOW_S = 20.0
LLM_POD, EMBED_POD = ("chat", "vllm-llama3-7c9f8b6d5-x2kqp"), ("search", "embed-0")
RULE = {"name": "llm-scale", "kind": "serve-scale", "service": "chat/vllm-llama3", "scale_out": "p99_ms > 100",
        "min": 1, "max": 3, "cooldown": "10m"}
SCALE = "/apis/apps/v1/namespaces/chat/deployments/vllm-llama3/scale"


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    """The model server under a steady load (its LLM answering in 200–400 ms), scraped."""
    server = ModelServer(llm_ms=(200.0, 400.0), embed_ms=(20.0, 40.0), slots=8)
    prometheus = PrometheusProcess(BINARY, tmp_path_factory.mktemp("prometheus"), [],
                                   scrape=scrape_config(server, LLM_POD, EMBED_POD))
    loop = LoadLoop(server.url, "/v1/completions", clients=6)
    try:
        prometheus.wait_for('up{job="vllm"}', lambda r: bool(r) and r[0]["value"][1] == "1", 60)
        loop.start()
        time.sleep(WINDOW_S + 6.0)  # a whole window of load, scraped
        yield prometheus
    finally:
        loop.stop()
        prometheus.stop()
        server.stop()


def llm_deployment(kube: KubeCluster, *, hpa: bool = False) -> None:
    kube.server.add(ks.node("gpu-node-1", product="NVIDIA-H100-80GB-HBM3"))
    llm = kube.server.add(kv.deployment("vllm-llama3", "chat", replicas=1, gpus=1))
    pod = kv.pod_of(llm, node="gpu-node-1")
    pod["metadata"]["name"] = LLM_POD[1]  # the pod Prometheus's target is labelled with
    kube.server.add(pod)
    if hpa:
        kube.server.add(kv.hpa("vllm-llama3", llm, metrics=[]))


def console_on(kube: KubeCluster, prometheus: PrometheusProcess) -> Console:
    figures = FiguresSettings(PrometheusSettings(prometheus.url, timeout=10.0), window_s=WINDOW_S)
    options = ConsoleOptions(sources=SourceOptions(kubeconfig=str(kube.kubeconfig), gpus="off", cloud="off",
                                                   watch_jobs=False, serving=figures), no_db=True, timeout=20)
    return Console(options)


def decide(console: Console, engine: Engine):  # noqa: ANN201 - the rule's Decision
    console.hub.poll_once()
    snapshot = console.compose()
    return snapshot, engine.tick(snapshot, CloudActuator(console.services.cloud, console.services.service_ops))[0]


def test_a_p99_breach_read_from_prometheus_patches_the_scale_subresource(kube: KubeCluster, loaded) -> None:
    llm_deployment(kube)
    console = console_on(kube, loaded)
    try:
        source = console.source(SourceKind.SERVICES)
        assert isinstance(source, ServedServices)
        assert source.poll_timeout == source.cluster.poll_timeout + 20.0  # discovery and lists, then the queries
        engine = Engine([rule_from_table(RULE)], AutopilotState())
        snapshot, decision = decide(console, engine)
        [service] = [s for s in snapshot.services if s.key == "chat/vllm-llama3"]
        assert service.metrics_source == "vllm" and service.p99_ms is not None and service.p99_ms > 150, service
        assert service.rps is not None and service.rps > 0
        # the service screen's charts: Prometheus's query_range over the service's own pods
        for figure in ("rps", "p99_ms", "tokens_per_s"):
            points = console.services.service_ops.history(service, figure, seconds=60.0, step=5.0)
            assert points and all(value > 0 for _at, value in points[-3:]), (figure, points)
        assert decision.verb == "scale" and decision.ok, decision
        assert [p.body for p in kube.server.requested(SCALE, method="PATCH")] == [{"spec": {"replicas": 2}}]
        records = [r for r in console.services.guard.audit.records() if r.actor == "autopilot:llm-scale"]
        assert [r.result for r in records][-1] == "ok" and records[-1].target == "chat/vllm-llama3"
        _snapshot, again = decide(console, engine)
        # acted once: the replica it added is not ready yet (and the cooldown holds)
        assert again.verb == "wait" and "1/2 replicas are ready" in again.reason, again
        assert len(kube.server.requested(SCALE, method="PATCH")) == 1
    finally:
        console.close()


def test_next_to_an_hpa_it_patches_nothing(kube: KubeCluster, loaded) -> None:
    llm_deployment(kube, hpa=True)
    console = console_on(kube, loaded)
    try:
        engine = Engine([rule_from_table(RULE)], AutopilotState())
        _snapshot, decision = decide(console, engine)
        assert decision.verb == "blocked" and "will not fight it" in decision.reason, decision
        assert not kube.server.requested(SCALE, method="PATCH")
    finally:
        console.close()


def test_the_demo_pool_through_sim_exporter_and_a_real_prometheus_reads_as_the_simulator_says(tmp_path) -> None:
    """``sim-exporter``'s exposition (the pool's vLLM and Triton families) scraped by a real
    Prometheus: the console's requests/s per service is within 10 % of what the simulator says."""
    from gpuconsole.backends.prometheus import PrometheusServing
    from gpuconsole.backends.sim import SimServicesBackend, make_sim
    from gpuconsole.cli.metrics_server import MetricsServer, sim_metrics
    from gpuconsole.core.serving.config import ServingConfig
    from gpuconsole.core.serving.join import ServingBook
    from gpuconsole.model import FleetSnapshot

    gpus, _jobs, _cloud = make_sim(seed=7, serving=True)  # on the wall clock, as sim-exporter runs it
    exporter = MetricsServer(sim_metrics(gpus.sim)).start()
    prometheus = PrometheusProcess(BINARY, tmp_path, [f"127.0.0.1:{exporter.port}"])
    services = SimServicesBackend(gpus.sim)
    try:
        prometheus.wait_for("vllm:request_success_total", lambda r: bool(r), 60)
        time.sleep(WINDOW_S + 4.0)
        source = PrometheusServing(PrometheusSettings(prometheus.url, timeout=10.0), window_s=WINDOW_S)
        truth = services.poll_services()  # the simulator's own figures, at about the same moment
        reading = source.poll_serving()
        source.close()
    finally:
        prometheus.stop()
        exporter.stop()
        gpus.close()
    listed = msgspec_replace(truth, serving=reading)
    found, _alerts = ServingBook(ServingConfig(window_s=WINDOW_S)).compose(listed, FleetSnapshot(taken_at=0.0), (),
                                                                          reading.taken_at)
    own, _alerts = ServingBook(ServingConfig(window_s=WINDOW_S)).compose(truth, FleetSnapshot(taken_at=0.0), (),
                                                                        truth.taken_at)
    read, said = {s.key: s for s in found}, {s.key: s for s in own}
    assert reading.error == ""
    for key in ("chat/vllm-llama3", "search/text-embed", "imaging/ct-imaging"):
        assert read[key].metrics_source == said[key].metrics_source != "", key
        assert abs(read[key].rps - said[key].rps) <= 0.10 * said[key].rps, (key, read[key].rps, said[key].rps)
    assert read["chat/vllm-llama3"].p99_ms is not None and read["chat/vllm-llama3"].tokens_per_s > 0
    assert read["research/notebook-llm"].metrics_source == ""  # it exposes nothing
