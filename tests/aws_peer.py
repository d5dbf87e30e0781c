"""A real AWS protocol peer for the AWS adapter's tests: moto's server behind a fault proxy.

boto3 reaches it the way it reaches AWS: over HTTP, through ``AWS_ENDPOINT_URL``. Faults are
injected at the HTTP layer by :class:`FaultProxy` (an EC2 error document, a JSON error, a hang),
so retries, timeouts and error parsing are botocore's own, never patched. The proxy also records
what was sent, so tests can assert on the request EC2 would have received.

Fixtures (import them into a test module):
    ``moto_server`` (session): the moto server's base URL; it keeps ``MOTO_AMIS_PATH`` set for
        the session so moto loads one image (:data:`MOTO_LINUX_AMI`) instead of thousands.
    ``fault_proxy`` (session): the :class:`FaultProxy` in front of it.
    ``aws_peer`` (function): resets moto, clears the proxy, points boto3 at the proxy with test
        credentials and ``us-east-1``, and yields an :class:`AwsPeer`.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

TEST_ACCESS_KEY_ID = "AKIDGPUCONSOLETEST01"
TEST_SECRET_ACCESS_KEY = "gpuconsole-test-secret-0123456789"
TEST_REGION = "us-east-1"
MOTO_LINUX_AMI = "ami-760aaa0f"  # amzn-ami-hvm-2017.09, in moto's default image list

_HOP_BY_HOP = frozenset({"connection", "keep-alive", "transfer-encoding", "content-length", "proxy-connection"})


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the proxy saw it (never its signature or credentials).

    ``params`` holds the form fields of query-protocol calls (EC2: ``"TagSpecification.1.Tag.1.Key"``
    …, without ``Action`` and ``Version``) or the JSON body of JSON-protocol calls (SSM, Pricing).
    """

    service: str
    region: str
    action: str
    params: dict[str, Any]


@dataclass
class Rule:
    """What the proxy does instead of (or before) forwarding a matching request."""

    action: str
    when: dict[str, str]
    region: str | None
    times: int | None  # None: every matching request
    code: str = ""
    message: str = ""
    status: int = 400
    hang_s: float = 0.0
    body: bytes | None = None  # a canned answer, sent as it is
    content_type: str = "text/xml"
    hits: int = 0

    def matches(self, request: RecordedRequest) -> bool:
        if self.action != request.action or (self.region and self.region != request.region):
            return False
        if self.times is not None and self.hits >= self.times:
            return False
        return all(str(request.params.get(k)) == v for k, v in self.when.items())


@dataclass
class FaultProxy:
    """A reverse proxy to ``upstream`` (moto) that records requests and injects faults."""

    upstream: str
    requests: list[RecordedRequest] = field(default_factory=list)
    _rules: list[Rule] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _released: threading.Event = field(default_factory=threading.Event)
    _server: ThreadingHTTPServer | None = None
    # Answers for services moto lacks: given a request, a (status, JSON body) or None to go on.
    serve: Callable[[RecordedRequest], tuple[int, dict[str, Any]] | None] | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    # ---------------------------------------------------------------- rules

    def fail(self, action: str, code: str, message: str = "injected failure", *, status: int = 400,
             when: dict[str, str] | None = None, region: str | None = None, times: int | None = None) -> Rule:
        """Answer ``action`` with an AWS error (``when``: request fields that must match)."""
        return self._add(Rule(action, dict(when or {}), region, times, code=code, message=message, status=status))

    def hang(self, action: str, seconds: float, *, region: str | None = None, times: int | None = None) -> Rule:
        """Hold ``action`` for ``seconds`` before forwarding it (released early on :meth:`reset`)."""
        return self._add(Rule(action, {}, region, times, hang_s=seconds))

    def answer(self, action: str, body: dict[str, Any] | str, *, status: int = 200, region: str | None = None,
               times: int | None = None) -> Rule:
        """Answer ``action`` with a canned body: a dict is sent as AWS JSON, a string as XML."""
        raw = json.dumps(body).encode() if isinstance(body, dict) else body.encode()
        kind = "application/x-amz-json-1.1" if isinstance(body, dict) else "text/xml"
        return self._add(Rule(action, {}, region, times, status=status, body=raw, content_type=kind))

    def _add(self, rule: Rule) -> Rule:
        with self._lock:
            self._rules.append(rule)
        return rule

    def reset(self) -> None:
        """Forget rules and recorded requests, and let go of any request held by :meth:`hang`."""
        self._released.set()
        with self._lock:
            self._rules.clear()
            self.requests.clear()
            self.serve = None
        self._released = threading.Event()

    def actions(self, service: str | None = None) -> list[str]:
        """The actions recorded so far, in order."""
        return [r.action for r in self.requests if service is None or r.service == service]

    def sent(self, action: str) -> list[RecordedRequest]:
        return [r for r in self.requests if r.action == action]

    def _match(self, request: RecordedRequest) -> Rule | None:
        with self._lock:
            self.requests.append(request)
            for rule in self._rules:
                if rule.matches(request):
                    rule.hits += 1
                    return rule
        return None

    # ---------------------------------------------------------------- server

    def start(self) -> FaultProxy:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body go out as separate writes

            def do_GET(self) -> None:
                proxy._handle(self)

            do_POST = do_PUT = do_DELETE = do_HEAD = do_GET

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib name
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        server.block_on_close = False
        self._server = server
        threading.Thread(target=server.serve_forever, name="aws-fault-proxy", daemon=True).start()
        return self

    def stop(self) -> None:
        self._released.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else b""
        request = _describe(handler, body)
        rule = self._match(request)
        json_protocol = "X-Amz-Target" in handler.headers
        if rule is not None and rule.hang_s:
            self._released.wait(rule.hang_s)
        if rule is not None and rule.body is not None:
            _reply(handler, rule.status, {"Content-Type": rule.content_type}, rule.body)
            return
        if rule is not None and rule.code:
            if json_protocol:
                payload = json.dumps({"__type": rule.code, "message": rule.message}).encode()
                headers = {"Content-Type": "application/x-amz-json-1.1", "x-amzn-ErrorType": rule.code}
            else:
                payload = (
                    f"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error><Code>{rule.code}</Code>"
                    f"<Message>{_xml_escape(rule.message)}</Message></Error></Errors>"
                    f"<RequestID>{uuid.uuid4()}</RequestID></Response>"
                ).encode()
                headers = {"Content-Type": "text/xml"}
            _reply(handler, rule.status, headers, payload)
            return
        served = self.serve(request) if self.serve is not None else None
        if served is not None:
            _reply(handler, served[0], {"Content-Type": "application/x-amz-json-1.1"}, json.dumps(served[1]).encode())
            return
        self._forward(handler, body)

    def _forward(self, handler: BaseHTTPRequestHandler, body: bytes) -> None:
        try:
            status, out, payload = self._fetch(handler, body)
        except OSError as exc:
            _reply(handler, 502, {"Content-Type": "text/plain"}, f"proxy: {exc}".encode())
            return
        _reply(handler, status, out, payload)

    def _fetch(self, handler: BaseHTTPRequestHandler, body: bytes) -> tuple[int, dict[str, str], bytes]:
        """The upstream's answer to the request as received: status, end-to-end headers, body."""
        target = urllib.parse.urlsplit(self.upstream)
        conn = http.client.HTTPConnection(target.hostname, target.port, timeout=60)
        headers = {k: v for k, v in handler.headers.items() if k.lower() not in _HOP_BY_HOP}
        try:
            conn.request(handler.command, handler.path, body=body or None, headers=headers)
            response = conn.getresponse()
            payload = response.read()
            return response.status, {k: v for k, v in response.getheaders() if k.lower() not in _HOP_BY_HOP}, payload
        finally:
            conn.close()


def _describe(handler: BaseHTTPRequestHandler, body: bytes) -> RecordedRequest:
    """Service, region and action of a SigV4-signed request, and its parameters."""
    service = region = ""
    auth = handler.headers.get("Authorization", "")
    if "Credential=" in auth:
        scope = auth.split("Credential=", 1)[1].split(",", 1)[0].split("/")
        if len(scope) >= 5:
            region, service = scope[2], scope[3]
    target = handler.headers.get("X-Amz-Target")
    if target:
        try:
            params = json.loads(body or b"{}")
        except ValueError:
            params = {}
        return RecordedRequest(service, region, target.rsplit(".", 1)[-1], params)
    form = dict(urllib.parse.parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))
    action = form.pop("Action", "")
    form.pop("Version", None)
    return RecordedRequest(service, region, action, form)


def _reply(handler: BaseHTTPRequestHandler, status: int, headers: dict[str, str], payload: bytes) -> None:
    try:
        handler.send_response(status)
        for key, value in headers.items():
            handler.send_header(key, value)
        handler.send_header("Content-Length", str(len(payload)))
        handler.end_headers()
        if handler.command != "HEAD":
            handler.wfile.write(payload)
    except OSError:
        pass  # the client gave up (a read timeout under test): nothing left to tell it


def _xml_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


@dataclass
class AwsPeer:
    """What a test gets: the proxy, the endpoint boto3 uses, and direct clients for set-up."""

    proxy: FaultProxy
    endpoint: str  # the proxy: what the adapter talks to
    moto_url: str  # moto itself: set-up calls go here so they are not recorded

    def client(self, service: str, region: str = TEST_REGION) -> Any:
        """A boto3 client straight to moto, for arranging state the adapter will then read."""
        import boto3

        return boto3.client(
            service, region_name=region, endpoint_url=self.moto_url,
            aws_access_key_id=TEST_ACCESS_KEY_ID, aws_secret_access_key=TEST_SECRET_ACCESS_KEY,
        )

    def image_id(self, region: str = TEST_REGION) -> str:
        """An Amazon Linux AMI from the default set moto loads into every region.

        A constant rather than a ``DescribeImages`` call: listing moto's images takes seconds.
        """
        return MOTO_LINUX_AMI


def reset_moto(moto_url: str) -> None:
    """Drop every resource moto holds (its ``/moto-api/reset`` endpoint)."""
    request = urllib.request.Request(f"{moto_url}/moto-api/reset", method="POST", data=b"")
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 - 127.0.0.1 only
        response.read()


# The one image moto loads when MOTO_AMIS_PATH names this list: without it every region's first
# call after a reset loads thousands of "latest" AMIs, a quarter of a second each time.
_MOTO_AMIS = [{
    "ami_id": MOTO_LINUX_AMI, "state": "available", "public": True, "owner_id": "137112412989",
    "image_location": "amazon/amzn-ami-hvm-2017.09.1.20171103-x86_64-gp2", "root_device_type": "ebs",
    "root_device_name": "/dev/xvda", "description": "Amazon Linux AMI 2017.09.1", "image_type": "machine",
    "platform": None, "architecture": "x86_64", "name": "amzn-ami-hvm-2017.09.1.20171103-x86_64-gp2",
    "virtualization_type": "hvm", "hypervisor": "xen",
}]


@pytest.fixture(scope="session")
def moto_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """moto's HTTP server on a free 127.0.0.1 port, for the whole session."""
    amis = tmp_path_factory.mktemp("moto") / "amis.json"
    amis.write_text(json.dumps(_MOTO_AMIS))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MOTO_AMIS_PATH", str(amis))  # read when moto's EC2 models are imported
        from moto.server import ThreadedMotoServer

        port = free_port()
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
        server.start()
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 20
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        try:
            yield url
        finally:
            server.stop()


@pytest.fixture(scope="session")
def fault_proxy(moto_server: str) -> Iterator[FaultProxy]:
    proxy = FaultProxy(moto_server).start()
    try:
        yield proxy
    finally:
        proxy.stop()


@pytest.fixture
def aws_peer(moto_server: str, fault_proxy: FaultProxy, monkeypatch: pytest.MonkeyPatch) -> Iterator[AwsPeer]:
    """A clean moto behind a clean proxy, and an environment where boto3 finds only them."""
    reset_moto(moto_server)
    fault_proxy.reset()
    for var in ("AWS_REGION", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ENDPOINT_URL_EC2",
                "AWS_ENDPOINT_URL_SSM", "AWS_ENDPOINT_URL_PRICING", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_ENDPOINT_URL", fault_proxy.url)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", TEST_ACCESS_KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", TEST_SECRET_ACCESS_KEY)
    monkeypatch.setenv("AWS_DEFAULT_REGION", TEST_REGION)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    yield AwsPeer(fault_proxy, fault_proxy.url, moto_server)
    fault_proxy.reset()
