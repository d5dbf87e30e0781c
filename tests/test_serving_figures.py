"""Inference services' figures, cost and SLOs from their pods' answers (no I/O)."""

from __future__ import annotations

import math

import pytest

from gpuconsole.core.config import ConfigError
from gpuconsole.core.serving.config import ServingConfig, Slo, decode
from gpuconsole.core.serving.figures import histogram_quantile
from gpuconsole.core.serving.join import ServingBook
from gpuconsole.model import (
    FleetSnapshot,
    Gpu,
    GpuProcess,
    Instance,
    InstanceState,
    Market,
    PodSeries,
    Service,
    ServiceKind,
    ServiceReplica,
    ServicesReading,
    ServingReading,
    ServingSeries,
    Severity,
)
from gpuconsole.model.serving import SeriesName as S
from gpuconsole.model.serving import workload_of

BOUNDS = (0.05, 0.1, 0.2, 0.5, 1.0, math.inf)


def buckets(ns: str, pod: str, family: str, counts: tuple[float, ...], name: str = S.LATENCY_BUCKET) -> list[PodSeries]:
    return [PodSeries(ns, pod, c, family, le) for le, c in zip(BOUNDS, counts, strict=True)]


def test_histogram_quantile_interpolates_as_prometheus_does() -> None:
    cumulative = list(zip(BOUNDS, (0.0, 10.0, 50.0, 90.0, 100.0, 100.0), strict=True))
    assert histogram_quantile(0.5, cumulative) == pytest.approx(0.1 + 0.1 * (50 - 10) / 40)
    assert histogram_quantile(0.99, cumulative) == pytest.approx(0.5 + 0.5 * (99 - 90) / 10)
    assert histogram_quantile(0.05, cumulative) == pytest.approx(0.05 + 0.05 * 5 / 10)
    # The rank in the +Inf bucket: the highest finite bound; in the first bucket: from zero.
    assert histogram_quantile(0.99, [(0.1, 1.0), (math.inf, 10.0)]) == 0.1
    assert histogram_quantile(0.5, [(0.2, 10.0), (math.inf, 10.0)]) == pytest.approx(0.1)
    assert histogram_quantile(0.5, [(0.2, 10.0)]) is None, "no +Inf bucket"
    assert histogram_quantile(0.5, [(0.2, 0.0), (math.inf, 0.0)]) is None, "nothing counted"


def reading(*answers: tuple[str, list[PodSeries]], window_s: float = 120.0) -> ServingReading:
    return ServingReading(tuple(ServingSeries(name, tuple(series)) for name, series in answers), 1000.0, window_s)


def service(ns: str, name: str, *pods: tuple[str, str | None, float], **more) -> Service:
    replicas = tuple(ServiceReplica(pod, node, phase="Running" if node else "Pending", ready=bool(node), gpus=gpus)
                     for pod, node, gpus in pods)
    return Service(ns, name, replicas_desired=len(pods), replicas=replicas,
                   gpus=sum(r.gpus for r in replicas if r.node), **more)


def instance(node: str, price: float, gpus: int, currency: str = "USD") -> Instance:
    return Instance(f"i-{node}", "p5.48xlarge", "us-east-1", "us-east-1a", Market.ON_DEMAND, InstanceState.RUNNING,
                    0.0, price, gpus, node=node, currency=currency)


def gpu(node: str, index: int, util: float, pod_uid: str | None = None) -> Gpu:
    procs = (GpuProcess(100 + index, f"GPU-{node}-{index}", "python", 1000, pod_uid=pod_uid),) if pod_uid else ()
    return Gpu(f"GPU-{node}-{index}", node, index, "NVIDIA H100", util, 1000, 81920, 50, 300.0, 700.0, processes=procs)


LLM = service("chat", "vllm-llama3", ("llm-a", "node-a", 2.0), ("llm-b", "node-a", 2.0))
EMBED = service("search", "embed", ("emb-a", "node-b", 1.0))
BARE = service("batch", "no-metrics", ("bare-a", "node-b", 1.0), ("bare-b", None, 1.0))

SERVING = reading(
    (S.OK, [PodSeries("chat", "llm-a", 6.0, "vllm"), PodSeries("chat", "llm-b", 4.0, "vllm"),
            PodSeries("search", "emb-a", 95.0, "triton")]),
    (S.ERRORS, [PodSeries("search", "emb-a", 5.0, "triton")]),
    (S.LATENCY_BUCKET, buckets("chat", "llm-a", "vllm", (0, 0, 1, 5, 6, 6))
     + buckets("chat", "llm-b", "vllm", (0, 0, 3, 3, 4, 4))),
    (S.LATENCY_SUM, [PodSeries("chat", "llm-a", 2.0, "vllm"), PodSeries("chat", "llm-b", 1.0, "vllm"),
                     PodSeries("search", "emb-a", 0.95, "triton")]),
    (S.LATENCY_COUNT, [PodSeries("chat", "llm-a", 6.0, "vllm"), PodSeries("chat", "llm-b", 4.0, "vllm"),
                       PodSeries("search", "emb-a", 95.0, "triton")]),
    (S.TOKENS, [PodSeries("chat", "llm-a", 900.0, "vllm"), PodSeries("chat", "llm-b", 600.0, "vllm")]),
    (S.WAITING, [PodSeries("chat", "llm-a", 3.0, "vllm"), PodSeries("chat", "llm-b", 1.0, "vllm"),
                 PodSeries("search", "emb-a", 0.0, "triton")]),
    (S.KV_CACHE, [PodSeries("chat", "llm-a", 0.5, "vllm"), PodSeries("chat", "llm-b", 0.3, "vllm")]),
    (S.INFERENCES, [PodSeries("search", "emb-a", 380.0, "triton")]),
)


def compose(book: ServingBook, serving: ServingReading | None = SERVING, now: float = 1000.0,
            services=(LLM, EMBED, BARE), **snapshot) -> dict[str, Service]:
    snap = FleetSnapshot(taken_at=now, **snapshot)
    found, alerts = book.compose(ServicesReading(tuple(services), now, serving), snap, (), now)
    book.alerts = alerts
    return {s.key: s for s in found}


def test_each_service_adds_up_its_replicas_and_names_each_figures_family() -> None:
    got = compose(ServingBook())
    llm, embed, bare = got["chat/vllm-llama3"], got["search/embed"], got["batch/no-metrics"]
    assert llm.rps == 10.0 and llm.tokens_per_s == 1500.0 and llm.queue_depth == 4.0
    # p99 of the two replicas' summed buckets (0, 0, 4, 8, 10, 10): rank 9.9 in (0.5, 1.0].
    assert llm.p99_ms == pytest.approx((0.5 + 0.5 * (9.9 - 8) / 2) * 1000)
    assert llm.mean_ms == pytest.approx(300.0) and llm.kv_cache == pytest.approx(0.4)
    assert llm.error_ratio is None, "vLLM counts no failures: its error ratio is unknown, not 0"
    assert dict(llm.sources)["p99_ms"] == "vllm" and llm.metrics_source == "vllm"
    assert [r.rps for r in llm.replicas] == [6.0, 4.0] and [r.waiting for r in llm.replicas] == [3.0, 1.0]
    # Triton's default counters: requests, errors and a mean; no quantiles without its summaries.
    assert embed.rps == 100.0 and embed.error_ratio == pytest.approx(0.05) and embed.mean_ms == pytest.approx(10.0)
    assert embed.p50_ms is None and embed.p99_ms is None and embed.inferences_per_s == 380.0
    assert embed.metrics_source == "triton" and embed.tokens_per_s is None
    # No metrics at all: replicas and GPUs still there, every figure unknown.
    assert bare.metrics_source == "" and bare.rps is None and bare.p99_ms is None and bare.gpus == 1.0


def test_cost_follows_pod_node_instance_and_divides_by_tokens_and_requests() -> None:
    book = ServingBook()
    got = compose(book, instances=(instance("node-a", 98.32, 8), instance("node-b", 8.0, 8)))
    llm, embed, bare = got["chat/vllm-llama3"], got["search/embed"], got["batch/no-metrics"]
    assert llm.usd_per_hour == pytest.approx(98.32 / 8 * 4)
    assert llm.usd_per_million_tokens == pytest.approx(llm.usd_per_hour / 3600 / 1500 * 1e6)
    assert llm.usd_per_1k_requests == pytest.approx(llm.usd_per_hour / 3600 / 10 * 1e3)
    assert embed.usd_per_million_tokens is None, "no tokens: no price per token"
    assert bare.usd_per_hour == pytest.approx(1.0), "the pending replica holds no GPU"
    assert list(got) == ["chat/vllm-llama3", "batch/no-metrics", "search/embed"], "namespaces by $/h, then services"
    # A node no instance backs: the cost is unknown, never $0.
    unknown = compose(ServingBook(), instances=(instance("node-b", 8.0, 8),))
    assert unknown["chat/vllm-llama3"].usd_per_hour is None and unknown["chat/vllm-llama3"].usd_per_million_tokens is None
    # Another currency without [money] rates is not counted either.
    yuan = compose(ServingBook(), instances=(instance("node-a", 700.0, 8, "CNY"),))
    assert yuan["chat/vllm-llama3"].usd_per_hour is None


def test_a_replica_whose_gpu_idles_and_serves_nothing_is_costed_as_idle() -> None:
    quiet = service("batch", "quiet", ("q-a", "node-b", 1.0))
    quiet = Service(quiet.namespace, quiet.name, replicas=(ServiceReplica("q-a", "node-b", uid="uid-q", phase="Running",
                                                                           ready=True, gpus=1.0),), gpus=1.0)
    serving = reading((S.OK, [PodSeries("batch", "q-a", 0.0, "vllm"), *SERVING.answers[0].series]))
    got = compose(ServingBook(), serving, services=(quiet, LLM), instances=(instance("node-b", 8.0, 8),
                                                                             instance("node-a", 98.32, 8)),
                  gpus=(gpu("node-b", 0, 1.0, "uid-q"), gpu("node-a", 0, 90.0)))
    assert got["batch/quiet"].idle_replicas == 1 and got["batch/quiet"].idle_usd_per_hour == pytest.approx(1.0)
    assert got["batch/quiet"].replicas[0].gpu_utilization == 1.0
    assert got["chat/vllm-llama3"].idle_replicas == 0


def test_an_slo_is_met_or_breached_since_when_and_a_breach_is_an_alert() -> None:
    config = ServingConfig(slos={"chat/vllm-llama3": Slo("chat/vllm-llama3", p99_ms=300.0),
                                 "batch/no-metrics": Slo("batch/no-metrics", p99_ms=300.0),
                                 "search/embed": Slo("search/embed", error_ratio=0.1)})
    book = ServingBook(config)
    first = compose(book, now=1000.0)
    slo = first["chat/vllm-llama3"].slo
    assert slo.met is False and slo.breached == ("p99_ms",) and slo.since == 1000.0
    assert first["batch/no-metrics"].slo.met is None, "a figure nobody knows: neither met nor breached"
    assert first["search/embed"].slo.met is True
    later = compose(book, now=1300.0)
    assert later["chat/vllm-llama3"].slo.since == 1000.0, "breached since the first snapshot"
    [alert] = book.alerts
    assert alert.severity is Severity.WARNING and alert.source == "services"
    assert alert.message == "chat/vllm-llama3 breaches its SLO: p99 975 ms over 300 ms, for 5 min"


@pytest.mark.parametrize(("table", "words"), [
    ({"window": "2 hours"}, '[services] key window: expected a duration such as "90s", "2m" or "1h"'),
    ({"window": "1s"}, "[services] key window: expected a duration from 10s to 24h"),
    ({"slo": [{"service": "chat/llm", "p99": 3}]}, "[services] key slo[0].p99: unknown key"),
    ({"slo": [{"service": "chat"}]}, "[services] key slo[0].service: expected NAMESPACE/NAME of a service"),
    ({"slo": [{"service": "chat/llm"}]}, "[services] key slo[0]: set p99_ms, ttft_ms or error_ratio"),
    ({"slo": [{"service": "chat/llm", "p99_ms": 0}]}, "[services] key slo[0].p99_ms: expected a number of milliseconds"),
    ({"metrics": [{"family": "ray"}]}, "[services] key metrics[0]: give a PromQL for at least one figure"),
    ({"metrics": [{"rps": "x"}]}, "[services] key metrics[0].family: name the server's family"),
    (["x"], "key services: write it as a [services] table"),
])
def test_a_bad_services_table_is_one_line_naming_the_key(table, words) -> None:
    with pytest.raises(ConfigError) as caught:
        decode(table, "/etc/gpuconsole.toml")
    message = str(caught.value)
    assert message.startswith("/etc/gpuconsole.toml: ") and words in message and "\n" not in message


def test_the_services_table_reads_window_metrics_and_slos() -> None:
    config = decode({"window": "90s", "metrics": [{"family": "ray", "rps": "sum by (namespace, pod) (rate(x[{window}]))"}],
                     "slo": [{"service": "chat/llm", "p99_ms": 300, "window": "5m"}]})
    assert config.window_s == 90.0 and config.custom == (("ray", "rps", "sum by (namespace, pod) (rate(x[{window}]))"),)
    assert config.slos["chat/llm"].window_s == 300.0 and config.slo_windows() == (300.0,)


def test_a_breach_is_sent_through_the_notify_path_like_any_other_alert(tmp_path) -> None:
    from gpuconsole.core.notify.config import channels_from_data
    from gpuconsole.core.notify.outbox import Outbox
    from gpuconsole.core.notify.sender import NotifySender
    from tests.notify_peer import Receiver

    receiver = Receiver()
    try:
        book = ServingBook(ServingConfig(slos={"chat/vllm-llama3": Slo("chat/vllm-llama3", p99_ms=300.0)}))
        now = 1_764_480_000.0
        found, alerts = book.compose(ServicesReading((LLM,), now, SERVING), FleetSnapshot(taken_at=now), (), now)
        snapshot = FleetSnapshot(taken_at=now, services=found, alerts=alerts)
        sender = NotifySender(channels_from_data({"notify": [{"kind": "webhook", "url": receiver.url}]}),
                              Outbox(tmp_path / "notify.db"), lambda: now)
        sender.cycle(snapshot)
        [body] = receiver.bodies()
        assert body["id"] == "slo:chat/vllm-llama3" and body["status"] == "firing"
        assert body["labels"] == {"namespace": "chat", "service": "vllm-llama3"}
        assert "p99 975 ms over 300 ms" in body["summary"]
    finally:
        receiver.stop()


def test_a_pods_name_gives_its_deployments_or_statefulsets_name() -> None:
    assert workload_of("vllm-llama3-7d9f8c6b5-x2kqp") == "vllm-llama3"
    assert workload_of("llm-0001-7d9f8c6b5-00003") == "llm-0001"
    assert workload_of("embed-0") == "embed" and workload_of("embed-12") == "embed"
    assert workload_of("resnet-predictor-00001-deployment-5c8f9d7b6-qz7kd") == "resnet-predictor-00001-deployment"
    assert workload_of("standalone") == "standalone", "any other pod: a workload of its own"


def workload_reading(*answers: tuple[str, list[PodSeries]]) -> ServingReading:
    """Answers whose series are workloads' sums (``pod`` holds the workload), as Prometheus adds them up."""
    return ServingReading(tuple(ServingSeries(name, tuple(series), by="workload") for name, series in answers), 1000.0)


def test_answers_per_workload_join_the_service_whose_pods_name_them_and_a_shared_workload_says_nothing() -> None:
    # A Deployment in the middle of a rollout (two template hashes: one workload) and a
    # StatefulSet, each with two replicas; per-pod answers for their replicas' own figures.
    deployment = service("chat", "llm", ("llm-7d9f8c6b5-x2kqp", "node-a", 1.0), ("llm-5c8f9d7b6-qz7kd", "node-a", 1.0))
    stateful = service("chat", "embed", ("embed-0", "node-b", 1.0), ("embed-1", "node-b", 1.0))
    per_pod = [(S.OK, [PodSeries("chat", "llm-7d9f8c6b5-x2kqp", 6.0, "vllm"), PodSeries("chat", "llm-5c8f9d7b6-qz7kd", 4.0, "vllm"),
                       PodSeries("chat", "embed-0", 50.0, "triton"), PodSeries("chat", "embed-1", 30.0, "triton")])]
    answers = workload_reading(
        (S.LATENCY_BUCKET, buckets("chat", "llm", "vllm", (0.0, 0.0, 4.0, 8.0, 10.0, 10.0))),
        (S.LATENCY_SUM, [PodSeries("chat", "llm", 5.0, "vllm"), PodSeries("chat", "embed", 2.0, "triton")]),
        (S.LATENCY_COUNT, [PodSeries("chat", "llm", 10.0, "vllm"), PodSeries("chat", "embed", 80.0, "triton")]),
        (S.TOKENS, [PodSeries("chat", "llm", 1500.0, "vllm"), PodSeries("chat", "other", 99.0, "vllm")]))
    serving = ServingReading((*answers.answers, *reading(*per_pod).answers), 1000.0)
    got = compose(ServingBook(), serving, services=(deployment, stateful))
    llm, embed = got["chat/llm"], got["chat/embed"]
    assert llm.rps == 10.0 and [r.rps for r in llm.replicas] == [6.0, 4.0], "each replica its own requests"
    assert llm.p99_ms == pytest.approx((0.5 + 0.5 * (9.9 - 8) / 2) * 1000) and llm.mean_ms == 500.0
    assert llm.tokens_per_s == 1500.0 and dict(llm.sources)["p99_ms"] == "vllm"
    assert embed.rps == 80.0 and embed.mean_ms == pytest.approx(25.0) and embed.tokens_per_s is None
    # A StatefulSet named as the Deployment is (pods llm-0, llm-1): the workload "llm" holds
    # both services' pods, and its figures are neither's.
    twin = Service("chat", "llm", ServiceKind.STATEFULSET, replicas=(ServiceReplica("llm-0", "node-b", gpus=1.0),))
    shared = compose(ServingBook(), serving, services=(deployment, twin, stateful))
    assert shared["chat/embed"].mean_ms == pytest.approx(25.0)
    for found in (s for key, s in shared.items() if key == "chat/llm"):
        assert found.p99_ms is None and found.mean_ms is None and found.tokens_per_s is None
