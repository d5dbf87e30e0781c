"""Serving figures through a real Prometheus scraping a CPU model server under a bounded load.

The model server (``tests/model_server.py``) exposes vLLM's and Triton's families with
``prometheus-client``; a load loop on 127.0.0.1 measures its own requests/s and latencies; the
console's figures for the two services, read through Prometheus, are within 10 % of them.
"""

from __future__ import annotations

import time

import pytest

from gpuconsole.backends.prometheus import PrometheusServing, PrometheusSettings
from gpuconsole.backends.prometheus import serving_queries as sq
from gpuconsole.backends.served import history_query, pod_selector
from gpuconsole.core.serving.config import ServingConfig
from gpuconsole.core.serving.join import ServingBook
from gpuconsole.model import FleetSnapshot, Service, ServiceReplica, ServicesReading
from gpuconsole.model.serving import workload_of
from tests.model_server import LoadLoop, ModelServer, scrape_config
from tests.prometheus_peer import PrometheusProcess, find_prometheus

BINARY = find_prometheus()
pytestmark = [pytest.mark.slow, pytest.mark.peer,
              pytest.mark.skipif(BINARY is None, reason="no prometheus binary on this machine")]

WINDOW_S = 20.0
LLM_POD, EMBED_POD = ("chat", "vllm-llama3-7d9f8c6b5-x2kqp"), ("search", "embed-0")


def within(measured: float, truth: float, share: float = 0.10) -> bool:
    return abs(measured - truth) <= share * truth


def services() -> tuple[Service, ...]:
    """The two services as the cluster would list them: each with its one pod."""
    return (Service(LLM_POD[0], "vllm-llama3", replicas_desired=1, replicas=(ServiceReplica(LLM_POD[1], "node-a",
                                                                                            phase="Running", gpus=1.0),)),
            Service(EMBED_POD[0], "embed", replicas_desired=1, replicas=(ServiceReplica(EMBED_POD[1], "node-b",
                                                                                        phase="Running", gpus=1.0),)))


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    # The LLM answers within one of vLLM's latency buckets, (0.8 s, 1 s], and never queues (fewer
    # clients than slots): a histogram's quantile is exact to a few per cent there, whatever the
    # machine's load adds to the loop's own timing.
    # The embedding model takes long enough (0.12-0.2 s) that what a loaded machine adds to the
    # loop's own timing (a few ms a request) stays a small share of the mean it measures.
    server = ModelServer(llm_ms=(810.0, 950.0), embed_ms=(120.0, 200.0), slots=8, embed_fail=0.05)
    prometheus = PrometheusProcess(BINARY, tmp_path_factory.mktemp("prometheus"), [],
                                   scrape=scrape_config(server, LLM_POD, EMBED_POD))
    try:
        prometheus.wait_for('up{job="triton"}', lambda r: bool(r) and r[0]["value"][1] == "1", 60)
        yield server, prometheus
    finally:
        prometheus.stop()
        server.stop()


def test_the_console_reads_requests_and_p99_within_ten_percent_of_what_the_load_loop_measured(served) -> None:
    server, prometheus = served
    llm = LoadLoop(server.url, "/v1/completions", clients=6).start()
    embed = LoadLoop(server.url, "/v2/models/embed/infer", clients=4).start()
    time.sleep(WINDOW_S + 6.0)  # a whole window of steady load, scraped
    source = PrometheusServing(PrometheusSettings(prometheus.url, timeout=10.0), window_s=WINDOW_S)
    reading = source.poll_serving()
    # What Prometheus itself says the LLM's p99 is, over the same pods and window.
    promql = ('histogram_quantile(0.99, sum by (le) (rate(vllm:e2e_request_latency_seconds_bucket'
              f'{{namespace="chat"}}[{int(WINDOW_S)}s])))')
    truth = prometheus.query(promql, at=reading.taken_at)  # at the very moment the console's round asked
    # The service view's p99 chart, over the service's own pods, ends on the same figure.
    chart = source.history(history_query("p99_ms", WINDOW_S, pod_selector(LLM_POD[0], (LLM_POD[1],))),
                           reading.taken_at - 30.0, reading.taken_at, 15.0)
    llm_loop, embed_loop = llm.stop(), embed.stop()
    source.close()
    book = ServingBook(ServingConfig(window_s=WINDOW_S))
    found, _alerts = book.compose(ServicesReading(services(), reading.taken_at, reading), FleetSnapshot(taken_at=0.0),
                                  (), reading.taken_at)
    got = {s.name: s for s in found}
    vllm, triton = got["vllm-llama3"], got["embed"]
    assert reading.error == ""
    # The LLM (vLLM's families): requests/s and p99 within 10 % of the loop's own.
    assert within(vllm.rps, llm_loop.rps), (vllm.rps, llm_loop.rps)
    assert within(vllm.p99_ms, llm_loop.quantile(0.99) * 1000), (vllm.p99_ms, llm_loop.quantile(0.99))
    assert within(vllm.p50_ms, llm_loop.quantile(0.5) * 1000), (vllm.p50_ms, llm_loop.quantile(0.5))
    assert vllm.p99_ms == pytest.approx(float(truth[0]["value"][1]) * 1000, rel=0.02), "as histogram_quantile says"
    assert chart and chart[-1][1] == pytest.approx(vllm.p99_ms, rel=0.02), chart
    assert vllm.tokens_per_s == pytest.approx(vllm.rps * 64, rel=0.1) and vllm.ttft_ms is not None
    assert vllm.error_ratio is None and vllm.kv_cache is not None and dict(vllm.sources)["p99_ms"] == "vllm"
    # The embedding model (Triton's default counters): requests/s and mean latency; no quantiles.
    assert within(triton.rps, embed_loop.rps), (triton.rps, embed_loop.rps)
    assert within(triton.mean_ms, embed_loop.mean * 1000, 0.15), (triton.mean_ms, embed_loop.mean)
    assert triton.p99_ms is None and triton.p50_ms is None and triton.metrics_source == "triton"
    assert triton.error_ratio is not None and 0.0 < triton.error_ratio < 0.15
    assert triton.inferences_per_s == pytest.approx(4 * triton.rps * (1 - triton.error_ratio), rel=0.1)


def test_prometheus_names_a_pods_workload_as_the_core_does(served) -> None:
    _server, prometheus = served
    for pod in ("vllm-llama3-7d9f8c6b5-x2kqp", "llm-2-7d9f8c6b5-x2kqp", "embed-0", "embed-12", "a-1-0", "standalone",
                "resnet-predictor-00001-deployment-5c8f9d7b6-qz7kd", "llm-7d9f8c6b5-x2kqp-0", "q-0-bcdfg",
                "z-12345678901-abcde", "x-12345-67890"):
        answer = prometheus.query(sq.with_workload(f'label_replace(vector(1), "pod", "{pod}", "", "")'))
        assert answer[0]["metric"]["workload"] == workload_of(pod), pod
