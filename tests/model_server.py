"""A CPU model server for the tests, and a bounded load loop that measures it, all on 127.0.0.1.

:class:`ModelServer` answers an LLM's completions (``POST /v1/completions``) and an embedding
model's inferences (``POST /v2/models/embed/infer``) after a queue and a service time of its own,
and exposes what it did as the inference servers it stands for do, with ``prometheus-client``:
vLLM's families on ``/metrics/vllm`` (histograms of end-to-end latency and time to first token,
tokens, requests running and waiting, KV-cache use) and NVIDIA Triton's default counters on
``/metrics/triton`` (success, failure, count, request and queue microseconds, pending).

:func:`load_loop` sends requests from a few client threads for a bounded time and measures, from
the client's side, how many it completed a second and their 99th percentile latency.
"""

from __future__ import annotations

import json
import random
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import Metric

# Fine buckets (10 ms apart where the latency lies): a quantile read from them is off by little.
LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, *[round(0.1 + 0.01 * n, 3) for n in range(1, 91)], 1.25, 1.5, 2.0,
                   5.0, 10.0)
TOKENS_PER_REQUEST = 64


@dataclass(eq=False)
class _Triton:
    """Triton's cumulative counters (named as Triton names them: no ``_total``)."""

    success: int = 0
    failure: int = 0
    inferences: int = 0
    request_us: float = 0.0
    queue_us: float = 0.0
    pending: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def collect(self) -> Iterator[Metric]:
        labels = {"model": "embed", "version": "1"}
        with self.lock:
            values = (("nv_inference_request_success", "counter", self.success),
                      ("nv_inference_request_failure", "counter", self.failure),
                      ("nv_inference_count", "counter", self.inferences),
                      ("nv_inference_request_duration_us", "counter", self.request_us),
                      ("nv_inference_queue_duration_us", "counter", self.queue_us),
                      ("nv_inference_pending_request_count", "gauge", self.pending))
        for name, kind, value in values:
            metric = Metric(name, name, kind)
            metric.add_sample(name, labels, float(value))
            yield metric


class ModelServer(ThreadingHTTPServer):
    """Both models on one port; ``slots`` requests are served at once, the rest wait.

    Args:
        llm_ms / embed_ms: each request's service time is drawn uniformly from this range.
        embed_fail: the share of the embedding model's requests that fail.
    """

    daemon_threads = True

    def __init__(self, llm_ms: tuple[float, float] = (200.0, 400.0), embed_ms: tuple[float, float] = (20.0, 40.0),
                 slots: int = 8, embed_fail: float = 0.0, seed: int = 7) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.llm_ms, self.embed_ms, self.embed_fail = llm_ms, embed_ms, embed_fail
        self.random = random.Random(seed)
        self.llm_slots, self.embed_slots = threading.Semaphore(slots), threading.Semaphore(slots)
        self.in_flight = 0
        self.vllm = CollectorRegistry()
        labels = ["model_name"]
        self.success = Counter("vllm:request_success", "finished requests", ["model_name", "finished_reason"],
                               registry=self.vllm)
        self.e2e = Histogram("vllm:e2e_request_latency_seconds", "end to end", labels, buckets=LATENCY_BUCKETS,
                             registry=self.vllm)
        self.ttft = Histogram("vllm:time_to_first_token_seconds", "first token", labels, buckets=LATENCY_BUCKETS,
                              registry=self.vllm)
        self.tokens = Counter("vllm:generation_tokens", "generated tokens", labels, registry=self.vllm)
        self.running = Gauge("vllm:num_requests_running", "running", labels, registry=self.vllm)
        self.waiting = Gauge("vllm:num_requests_waiting", "waiting", labels, registry=self.vllm)
        self.kv = Gauge("vllm:kv_cache_usage_perc", "KV cache", labels, registry=self.vllm)
        self.triton = _Triton()
        self.triton_registry = CollectorRegistry()
        self.triton_registry.register(self.triton)  # type: ignore[arg-type]
        self._lock = threading.Lock()
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def draw(self, span: tuple[float, float]) -> float:
        with self._lock:
            return self.random.uniform(*span) / 1000.0

    def complete(self) -> None:
        """One completion: wait for a slot, then the first token, then the rest."""
        started = time.monotonic()
        model = ("llama3",)
        self.waiting.labels(*model).inc()
        with self.llm_slots:
            self.waiting.labels(*model).dec()
            self.running.labels(*model).inc()
            with self._lock:
                self.in_flight += 1
                self.kv.labels(*model).set(0.1 * self.in_flight)
            service = self.draw(self.llm_ms)
            time.sleep(service * 0.25)
            self.ttft.labels(*model).observe(time.monotonic() - started)
            time.sleep(service * 0.75)
            self.running.labels(*model).dec()
            with self._lock:
                self.in_flight -= 1
        self.tokens.labels(*model).inc(TOKENS_PER_REQUEST)
        self.e2e.labels(*model).observe(time.monotonic() - started)
        self.success.labels("llama3", "stop").inc()

    def infer(self) -> bool:
        """One embedding inference of a batch of 4; False when it fails."""
        started = time.monotonic()
        t = self.triton
        with t.lock:
            t.pending += 1
        with self.embed_slots:
            queued = time.monotonic() - started
            with t.lock:
                t.pending -= 1
            time.sleep(self.draw(self.embed_ms))
        failed = self.random.random() < self.embed_fail
        with t.lock:
            if failed:
                t.failure += 1
            else:
                t.success += 1
                t.inferences += 4
                t.request_us += (time.monotonic() - started) * 1e6
                t.queue_us += queued * 1e6
        return not failed

    def stop(self) -> None:
        self.shutdown()
        self.server_close()


class _Handler(BaseHTTPRequestHandler):
    server: ModelServer
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        registry = {"/metrics/vllm": self.server.vllm, "/metrics/triton": self.server.triton_registry}.get(self.path)
        if registry is None:
            self._send(404, b"{}")
            return
        self._send(200, generate_latest(registry), "text/plain; version=0.0.4")

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        if self.path == "/v1/completions":
            self.server.complete()
            self._send(200, json.dumps({"choices": [{"text": "ok"}]}).encode())
        elif self.path == "/v2/models/embed/infer":
            ok = self.server.infer()
            self._send(200 if ok else 500, b"{}")
        else:
            self._send(404, b"{}")

    def _send(self, status: int, body: bytes, kind: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@dataclass
class LoopFigures:
    """What a load loop measured itself, from the client's side."""

    requests: int
    seconds: float
    latencies: list[float]
    failures: int = 0

    @property
    def rps(self) -> float:
        return self.requests / self.seconds

    def quantile(self, q: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, max(0, int(round(q * len(ordered))) - 1))]

    @property
    def mean(self) -> float:
        return sum(self.latencies) / len(self.latencies)


class LoadLoop:
    """Client threads sending ``path`` to ``url`` back to back until :meth:`stop` (or ``limit_s``)."""

    def __init__(self, url: str, path: str, clients: int = 8, limit_s: float = 120.0) -> None:
        self.url, self.path, self.clients, self.limit_s = url, path, clients, limit_s
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._latencies: list[float] = []
        self._failures = 0
        self._threads = [threading.Thread(target=self._client, daemon=True) for _ in range(clients)]
        self.started = 0.0
        self.ended = 0.0

    def start(self) -> LoadLoop:
        self.started = time.monotonic()
        for thread in self._threads:
            thread.start()
        return self

    def _client(self) -> None:
        deadline = self.started + self.limit_s
        while not self._stop.is_set() and time.monotonic() < deadline:
            request = urllib.request.Request(self.url + self.path, data=b'{"prompt": "hello"}', method="POST",
                                             headers={"Content-Type": "application/json"})
            began = time.monotonic()
            try:
                with urllib.request.urlopen(request, timeout=10) as answer:
                    answer.read()
                ok = True
            except urllib.error.HTTPError:
                ok = False
            took = time.monotonic() - began
            with self._lock:
                if ok:
                    self._latencies.append(took)
                else:
                    self._failures += 1

    def stop(self) -> LoopFigures:
        self._stop.set()
        for thread in self._threads:
            thread.join(15)
        self.ended = time.monotonic()
        with self._lock:
            return LoopFigures(len(self._latencies) + self._failures, self.ended - self.started, list(self._latencies),
                               self._failures)


def scrape_config(server: ModelServer, vllm_pod: tuple[str, str], triton_pod: tuple[str, str]) -> str:
    """Prometheus's scrape configuration of both models, labelled with their namespace and pod
    as a Kubernetes service discovery would label them."""
    jobs = []
    for job, path, (namespace, pod) in (("vllm", "/metrics/vllm", vllm_pod), ("triton", "/metrics/triton", triton_pod)):
        jobs.append(f"  - job_name: {job}\n    metrics_path: {path}\n    static_configs:\n"
                    f"      - targets: ['127.0.0.1:{server.port}']\n"
                    f"        labels: {{namespace: {namespace}, pod: {pod}}}\n")
    return "scrape_configs:\n" + "".join(jobs)
