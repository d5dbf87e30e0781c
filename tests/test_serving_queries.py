"""A round of serving queries against a stand-in Prometheus on 127.0.0.1: one query per figure,
however many services there are, and the answers read as Prometheus writes them."""

from __future__ import annotations

import math

import pytest

from gpuconsole.backends.prometheus import PrometheusServing, PrometheusSettings
from gpuconsole.backends.prometheus import serving_queries as sq
from gpuconsole.core.serving.cost import GpuPrices
from gpuconsole.model import FleetSnapshot, Instance, InstanceState, Market, Node
from gpuconsole.model.serving import SeriesName as S
from gpuconsole.model.serving import workload_of
from tests.prometheus_peer import CannedPrometheus, series


@pytest.fixture
def prometheus():
    server = CannedPrometheus()
    server.compact = True  # as Prometheus writes its answers
    yield server
    server.stop()


def pods(services: int, replicas: int = 8) -> list[tuple[str, str]]:
    return [(f"team-{n % 7}", f"llm-{n:04d}-7d9f8c6b5-{r:05d}") for n in range(services) for r in range(replicas)]


def sent_in_one_round(prometheus: CannedPrometheus, source: PrometheusServing, services: int):
    """The queries one poll sends while the stand-in knows ``services`` services, and the reading."""
    served = pods(services)
    workloads = dict.fromkeys((ns, workload_of(pod)) for ns, pod in served)
    prometheus.answers = {
        "vllm:request_success_total": [series(2.5, family="vllm", namespace=ns, pod=pod) for ns, pod in served],
        # grouped by workload, as the query asks: a service's 8 pods added up
        "vllm:e2e_request_latency_seconds_bucket": [
            series(le_count * 8, family="vllm", namespace=ns, workload=workload, le=le)
            for ns, workload in workloads for le, le_count in (("0.5", 1.0), ("1.0", 2.0), ("+Inf", 2.5))],
    }
    with prometheus.lock:
        prometheus.requests.clear()
    reading = source.poll_serving()
    with prometheus.lock:
        queries = [params["query"] for path, params, _headers in prometheus.requests if path == "/api/v1/query"]
    return queries, reading


def test_a_round_sends_one_query_per_figure_whatever_the_number_of_services(prometheus) -> None:
    source = PrometheusServing(PrometheusSettings(prometheus.url), window_s=120.0)
    try:
        few, few_reading = sent_in_one_round(prometheus, source, 3)
        many, many_reading = sent_in_one_round(prometheus, source, 300)
    finally:
        source.close()
    assert len(few) == len(many) == len(sq.TERMS), "one query per figure, never one per service"
    assert sorted(few) == sorted(many) == sorted(q for q, _family in source.queries().values())
    ok = {a.name: a for a in many_reading.answers}[S.OK]
    assert len(ok.series) == 300 * 8 and {s.value for s in ok.series} == {2.5}
    assert len({a.name: a for a in few_reading.answers}[S.OK].series) == 3 * 8
    buckets = {a.name: a for a in many_reading.answers}[S.LATENCY_BUCKET]
    assert sorted({s.le for s in buckets.series}) == [0.5, 1.0, math.inf]
    assert buckets.by == "workload" and len(buckets.series) == 300 * 3, "one histogram a service, not one a pod"
    assert {s.pod for s in buckets.series} == {f"llm-{n:04d}" for n in range(300)}


def test_a_query_two_answers_share_is_sent_once_and_an_slo_window_reads_its_services_pods_only(prometheus) -> None:
    # A summary's quantiles have no window: over the SLO's window the query is the same.
    every = PrometheusServing(PrometheusSettings(prometheus.url), window_s=120.0, slo_windows=(300.0,))
    scoped = PrometheusServing(PrometheusSettings(prometheus.url, selector='cluster="prod"'), window_s=120.0,
                               slo_windows=(300.0,), slo_services=("chat/llm.v2", "team-1/llm-0001"))
    try:
        sent, reading = sent_in_one_round(prometheus, every, 20)
        names = [a.name for a in reading.answers]
        assert len(names) == len(sq.TERMS) + len(sq.SLO_ANSWERS) and len(sent) == len(names) - 1
        answers = {a.name: a for a in reading.answers}
        assert answers[f"{S.LATENCY_QUANTILE}@300"].series == answers[S.LATENCY_QUANTILE].series
        assert len(answers[f"{S.OK}@300"].series) == 20 * 8
        queries = scoped.queries()
        assert 'pod=~"(llm-0001|llm[.]v2)-.+"' in queries[f"{S.OK}@300"][0]
        assert 'cluster="prod", namespace=~"chat|team-1"' in queries[f"{S.OK}@300"][0]
        assert "namespace=~" not in queries[S.OK][0], "the serving window reads every pod"
    finally:
        every.close()
        scoped.close()


def test_an_answer_reads_infinities_and_leaves_out_what_says_nothing_of_a_pod() -> None:
    body = (b'{"status":"success","data":{"resultType":"vector","result":['
            b'{"metric":{"family":"vllm","namespace":"a","pod":"p","le":"+Inf"},"value":[1.5,"3"]},'
            b'{"metric":{"family":"vllm","namespace":"a","pod":"p","le":"0.25"},"value":[1.5,"1"]},'
            b'{"metric":{"family":"vllm","namespace":"a","pod":"p","le":"soon"},"value":[1.5,"1"]},'
            b'{"metric":{"family":"vllm","namespace":"a","pod":"q","le":"1"},"value":[1.5,"NaN"]},'
            b'{"metric":{"family":"vllm","namespace":"a","pod":"q","le":"2"},"value":[1.5,"+Inf"]},'
            b'{"metric":{"family":"vllm","pod":"r","le":"1"},"value":[1.5,"1"]}]}}')
    answer = sq.read_answer(S.LATENCY_BUCKET, body.replace(b'"pod"', b'"workload"'))  # its series are workloads
    assert [(s.pod, s.le, s.value) for s in answer.series] == [("p", math.inf, 3.0), ("p", 0.25, 1.0)]
    scalar = sq.read_answer(S.OK, body.replace(b',"le":"soon"', b""))
    assert [(s.pod, s.value, s.le) for s in scalar.series] == [("p", 3.0, None), ("p", 1.0, None), ("p", 1.0, None)]
    with pytest.raises(sq.ServingAnswerError):
        sq.read_answer(S.OK, b'{"status":"success","data":{"resultType":"matrix","result":[]}}')


def test_a_node_finds_its_instance_by_name_or_by_the_instance_id_it_names() -> None:
    def instance(instance_id: str, price: float, node: str | None = None) -> Instance:
        return Instance(instance_id, "p5.48xlarge", "us-east-1", "us-east-1a", Market.ON_DEMAND, InstanceState.RUNNING,
                        0.0, price, 8, node=node)

    snapshot = FleetSnapshot(taken_at=0.0, instances=(instance("i-a", 80.0, "node-a"), instance("i-b", 16.0)),
                             nodes=(Node("node-b", "NVIDIA H100", 8, 8, 0, instance_id="i-b"),))
    prices = GpuPrices(snapshot)
    assert prices.per_gpu_hour("node-a") == 10.0 and prices.per_gpu_hour("node-b") == 2.0
    assert prices.per_gpu_hour("node-c") is None


def test_the_services_table_sends_its_slo_windows_services_to_the_source(prometheus) -> None:
    from gpuconsole.backends.served import ServedServices
    from gpuconsole.core.fleet.prometheus_config import serving_figures
    from gpuconsole.core.serving.config import decode

    config = decode({"window": "2m", "slo": [{"service": "chat/llm", "p99_ms": 300, "window": "5m"},
                                             {"service": "search/embed", "error_ratio": 0.01}]})
    settings = serving_figures(config, PrometheusSettings(prometheus.url))
    assert settings.slo_windows == (300.0,) and settings.slo_services == ("chat/llm",)
    served = ServedServices(object(), settings)
    try:
        assert 'pod=~"(llm)-.+"' in served.figures.queries()[f"{S.OK}@300"][0]
    finally:
        served.figures.close()
