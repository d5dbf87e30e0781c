"""A Kubernetes API test server for the Kubernetes adapter's tests, and the objects it serves.

The official client reaches it the way it reaches a cluster: over HTTP, from a kubeconfig. It
keeps Jobs, CronJobs, Pods, Nodes, Events and Services in memory with one resourceVersion counter (as etcd
does), and Deployments, StatefulSets, HPAs and (with :attr:`~KubeApiServer.kserve` set: the CRD installed)
KServe InferenceServices, and (with their group version in :attr:`~KubeApiServer.crds`) MPIJobs,
PyTorchJobs, TrainJobs and JobSets, and serves what the adapter uses, the way the API server does:

* lists, cluster-wide and per namespace (``/apis/batch/v1/jobs``,
  ``/apis/batch/v1/namespaces/{ns}/jobs``, ``/api/v1/pods`` …), with ``limit``/``continue``
  paging over a consistent snapshot, ``fieldSelector`` and ``labelSelector`` (``=``, ``!=``,
  existence), and the list's ``resourceVersion``;
* watches (``?watch=true``): chunked JSON lines of ``ADDED``/``MODIFIED``/``DELETED`` events from
  a resourceVersion, ``BOOKMARK`` events when asked for, ``timeoutSeconds``, and an ``ERROR``
  event with code 410 when the version is older than the kept history (see
  :meth:`~KubeApiServer.compact`);
* get, create (``POST``, ``dryRun=All`` validates without storing), delete and patch (merge
  patch; a JSON patch list), and pod logs (``/api/v1/namespaces/{ns}/pods/{name}/log``, with
  ``follow=true`` streaming lines as :meth:`KubeApiServer.append_log` adds them);
* API discovery (``GET /apis``: an ``APIGroupList``, a CRD's group only while it is installed),
  and the ``scale`` subresource of Deployments and StatefulSets (GET, merge PATCH).

Test controls: :meth:`~KubeApiServer.add` / :meth:`~KubeApiServer.modify` /
:meth:`~KubeApiServer.delete` (each emits its watch event), :meth:`~KubeApiServer.fail` (answer
matching requests with a status), :meth:`~KubeApiServer.hang` (hold new requests and silence
open streams), :meth:`~KubeApiServer.end_watches` (end open watches as their timeout would),
:meth:`~KubeApiServer.compact` and :meth:`~KubeApiServer.compacting` (watches behind the
history get 410), :meth:`~KubeApiServer.expire_continue_tokens` and
:meth:`~KubeApiServer.expire_next_continue`, and a request log (:attr:`~KubeApiServer.requests`).

Fixtures: ``kube_server`` (session) runs one server on a free 127.0.0.1 port; ``kube``
(function) resets it, writes a kubeconfig pointing at it, sets ``KUBECONFIG`` for the test, and
yields a :class:`KubeCluster` that also builds adapters and closes them afterwards.
"""

from __future__ import annotations

import copy
import json
import threading
import time
import urllib.parse
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import kube_crd_schema

TEST_TOKEN = "gpuconsole-test-token"
OTHER_TOKEN = "gpuconsole-other-token"
A100 = "NVIDIA-A100-SXM4-80GB"
PRODUCT_LABEL = "nvidia.com/gpu.product"
PYTORCH = "nvcr.io/nvidia/pytorch:24.05-py3"
INSUFFICIENT_GPU = ("0/4 nodes are available: 4 Insufficient nvidia.com/gpu. preemption: 0/4 nodes are available: "
                    "4 No preemption victims found for incoming pod.")


KSERVE = "serving.kserve.io/v1beta1"  # the KServe CRD's group and version
# The distributed training CRDs (tests/kube_training.py builds their objects): served only while
# named in :attr:`KubeApiServer.crds`. kubeflow.org serves two versions, as a cluster with both the
# MPI Operator (v2beta1) and the Training Operator (v1) does.
MPIJOB = "kubeflow.org/v2beta1"
PYTORCHJOB = "kubeflow.org/v1"
TRAINJOB = "trainer.kubeflow.org/v1alpha1"
JOBSET = "jobset.x-k8s.io/v1alpha2"
TRAINING_CRDS = frozenset({MPIJOB, PYTORCHJOB, TRAINJOB, JOBSET})
KUEUE_GROUP = "kueue.x-k8s.io"  # served at the version KubeApiServer.kueue names (v1beta2 or v1beta1)
VISIBILITY_GROUP = "visibility.kueue.x-k8s.io"  # Kueue's on-demand visibility API, while visibility is set
VOLCANO_SCHEDULING = "scheduling.volcano.sh/v1beta1"
VOLCANO_BATCH = "batch.volcano.sh/v1alpha1"


@dataclass(frozen=True)
class Resource:
    plural: str
    group_version: str  # "v1" (core) or "batch/v1"
    kind: str
    namespaced: bool = True
    key: str = ""  # its key in RESOURCES when that is not the plural (a Volcano Job's "jobs")
    status: bool = False  # a custom resource with the status subresource

    @property
    def id(self) -> str:
        return self.key or self.plural

    @property
    def alias(self) -> str:
        """The name tests give :meth:`KubeApiServer.get` and friends: the kind, else the key."""
        return self.key or self.kind


RESOURCES: dict[str, Resource] = {
    "jobs": Resource("jobs", "batch/v1", "Job"),
    "cronjobs": Resource("cronjobs", "batch/v1", "CronJob"),
    "pods": Resource("pods", "v1", "Pod"),
    "nodes": Resource("nodes", "v1", "Node", namespaced=False),
    "events": Resource("events", "v1", "Event"),
    "services": Resource("services", "v1", "Service"),  # a distributed job's headless Service
    "leases": Resource("leases", "coordination.k8s.io/v1", "Lease"),  # the autopilot's leader election
    # inference services (tests/kube_serving.py builds them)
    "deployments": Resource("deployments", "apps/v1", "Deployment"),
    "statefulsets": Resource("statefulsets", "apps/v1", "StatefulSet"),
    "horizontalpodautoscalers": Resource("horizontalpodautoscalers", "autoscaling/v2", "HorizontalPodAutoscaler"),
    "inferenceservices": Resource("inferenceservices", KSERVE, "InferenceService"),  # only while kserve is set
    # Kueue (only while kueue names a version) and Volcano (only while volcano is set); tests/kube_queues.py
    "clusterqueues": Resource("clusterqueues", f"{KUEUE_GROUP}/v1beta2", "ClusterQueue", namespaced=False, status=True),
    "localqueues": Resource("localqueues", f"{KUEUE_GROUP}/v1beta2", "LocalQueue", status=True),
    "workloads": Resource("workloads", f"{KUEUE_GROUP}/v1beta2", "Workload", status=True),
    "resourceflavors": Resource("resourceflavors", f"{KUEUE_GROUP}/v1beta2", "ResourceFlavor", namespaced=False),
    "queues": Resource("queues", VOLCANO_SCHEDULING, "Queue", namespaced=False, status=True),
    "podgroups": Resource("podgroups", VOLCANO_SCHEDULING, "PodGroup", status=True),
    "vcjobs": Resource("jobs", VOLCANO_BATCH, "Job", key="vcjobs", status=True),  # tests name it "vcjobs"
    # distributed training (only while their group version is in crds)
    "mpijobs": Resource("mpijobs", MPIJOB, "MPIJob"),
    "pytorchjobs": Resource("pytorchjobs", PYTORCHJOB, "PyTorchJob"),
    "trainjobs": Resource("trainjobs", TRAINJOB, "TrainJob"),
    "jobsets": Resource("jobsets", JOBSET, "JobSet"),
}
SCALABLE = frozenset({"deployments", "statefulsets"})  # the kinds with a scale subresource
BY_KIND = {r.alias: r for r in RESOURCES.values()}
_CRDS = {KSERVE: "kserve", VOLCANO_SCHEDULING: "volcano", VOLCANO_BATCH: "volcano"}  # group version → the switch

_REASONS = {400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound", 405: "MethodNotAllowed",
            409: "AlreadyExists", 410: "Expired", 415: "UnsupportedMediaType", 422: "Invalid",
            429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable", 504: "Timeout"}


def stamp(ts: float | None = None) -> str:
    """RFC 3339 in UTC, to the second, as the API server writes times."""
    return datetime.fromtimestamp(time.time() if ts is None else ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def status_body(code: int, message: str, reason: str | None = None, **extra: Any) -> dict[str, Any]:
    """A ``Status`` object, the API server's error document."""
    body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                            "message": message, "reason": reason or _REASONS.get(code, "Unknown"), "code": code}
    body.update(extra)
    return body


@dataclass(frozen=True)
class Request:
    """One request as the server saw it."""

    method: str
    path: str
    query: dict[str, str]
    token: str | None
    body: Any = None

    @property
    def url(self) -> str:
        return self.path + ("?" + urllib.parse.urlencode(self.query) if self.query else "")

    @property
    def watch(self) -> bool:
        return _truthy(self.query.get("watch"))


@dataclass
class Fault:
    status: int
    times: int | None
    path_contains: str | None
    method: str | None
    message: str
    hits: int = 0

    def matches(self, method: str, url: str) -> bool:
        if self.times is not None and self.hits >= self.times:
            return False
        if self.method and self.method != method:
            return False
        return self.path_contains is None or self.path_contains in url


def _truthy(value: str | None) -> bool:
    return (value or "").lower() in ("1", "true", "yes")


def _lookup(obj: Any, path: str) -> Any:
    for part in path.split("."):
        if not isinstance(obj, dict):
            return None
        obj = obj.get(part)
    return obj


def _selector_terms(text: str | None) -> list[tuple[str, str, str]]:
    """``a=b,c!=d,e`` → ``[("a", "=", "b"), ("c", "!=", "d"), ("e", "exists", "")]``."""
    terms = []
    for raw in (text or "").split(","):
        term = raw.strip()
        if not term:
            continue
        if "!=" in term:
            key, value = term.split("!=", 1)
            terms.append((key.strip(), "!=", value.strip()))
        elif "=" in term:
            key, value = term.replace("==", "=").split("=", 1)
            terms.append((key.strip(), "=", value.strip()))
        elif term.startswith("!"):
            terms.append((term[1:].strip(), "absent", ""))
        else:
            terms.append((term, "exists", ""))
    return terms


def _matches(obj: dict[str, Any], fields: list[tuple[str, str, str]], labels: list[tuple[str, str, str]]) -> bool:
    for key, op, value in fields:
        found = _lookup(obj, key)
        text = "" if found is None else str(found)
        if (op == "=" and text != value) or (op == "!=" and text == value):
            return False
    meta = obj.get("metadata")
    obj_labels = (meta.get("labels") if isinstance(meta, dict) else None) or {}
    for key, op, value in labels:
        present = key in obj_labels
        if op == "exists" and not present or op == "absent" and present:
            return False
        if op == "=" and obj_labels.get(key) != value or op == "!=" and obj_labels.get(key) == value:
            return False
    return True


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def json_patch(target: Any, ops: list[dict[str, Any]]) -> Any:
    """RFC 6902 JSON patch: ``add``, ``replace`` and ``remove``."""
    doc = copy.deepcopy(target)
    for op in ops:
        parts = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        parent = doc
        for part in parts[:-1]:
            parent = parent[int(part)] if isinstance(parent, list) else parent.setdefault(part, {})
        last = parts[-1]
        if op["op"] in ("add", "replace"):
            if isinstance(parent, list):
                index = len(parent) if last == "-" else int(last)
                if op["op"] == "add":
                    parent.insert(index, op["value"])
                else:
                    parent[index] = op["value"]
            else:
                parent[last] = op["value"]
        elif op["op"] == "remove":
            if isinstance(parent, list):
                parent.pop(int(last))
            else:
                del parent[last]
        else:
            raise ValueError(f"unsupported op {op['op']!r}")
    return doc


class _Answer(Exception):
    """Stop handling and answer with a Status."""

    def __init__(self, code: int, message: str, reason: str | None = None, **extra: Any) -> None:
        super().__init__(message)
        self.body = status_body(code, message, reason, **extra)
        self.code = code


class KubeApiServer:
    """The in-memory API server. Objects are never changed in place: a change stores a new dict."""

    def __init__(self, tokens: tuple[str, ...] = (TEST_TOKEN, OTHER_TOKEN)) -> None:
        self.tokens = set(tokens)  # bearer tokens accepted; empty: no authentication
        self.bookmark_every = 0.5  # seconds between BOOKMARK events on watches that asked for them
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._objects: dict[str, dict[tuple[str, str], dict[str, Any]]] = {r: {} for r in RESOURCES}
        self._rv = 1000
        self._oldest = self._rv  # history keeps the events after this version
        self._history: list[tuple[int, str, str, dict[str, Any]]] = []  # (rv, plural, type, object)
        self._pages: dict[str, tuple[list[dict[str, Any]], int]] = {}  # continue token → (rest, rv)
        self._encoding: dict[int, tuple[dict[str, Any], bytes]] = {}  # id(object) → (object, its JSON)
        self._expire_next = 0
        self._faults: list[Fault] = []
        self._hang_until = 0.0
        self._released = threading.Event()
        self._epoch = 0  # bumped by reset(): open streams end
        self._cuts = 0  # bumped by end_watches(): open watches end as if they had timed out
        self._stopping = False
        self._logs: dict[tuple[str, str], list[str]] = {}
        self._logs_ended: set[tuple[str, str]] = set()
        self.requests: list[Request] = []
        self.kserve = False  # whether the InferenceService CRD is installed (discovery shows its group)
        self.crds: set[str] = set()  # other CRDs installed, by group version (TRAINING_CRDS)
        self.kueue: str | None = None  # the Kueue version served ("v1beta2", "v1beta1"); None: not installed
        self.visibility = False  # whether Kueue's visibility API is served too (at Kueue's version)
        self.volcano = False  # whether Volcano's CRDs are installed
        self.open_streams = 0
        self._httpd: ThreadingHTTPServer | None = None
        self.tls: Any = None

    # ---------------------------------------------------------------- server

    @property
    def url(self) -> str:
        assert self._httpd is not None
        host, port = self._httpd.server_address[:2]
        return f"{'https' if self.tls else 'http'}://{host!s}:{port}"

    def start(self, tls: Any = None) -> KubeApiServer:
        """Serve on a free port; over HTTPS with ``tls`` (a server ``ssl.SSLContext``)."""
        api = self
        self.tls = tls

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def do_GET(self) -> None:
                api._handle(self)

            do_POST = do_PUT = do_PATCH = do_DELETE = do_GET

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib name
                pass

        httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        httpd.daemon_threads = True
        httpd.block_on_close = False
        if tls is not None:  # each connection's handshake happens in its own handler thread
            httpd.socket = tls.wrap_socket(httpd.socket, server_side=True, do_handshake_on_connect=False)
        self._httpd = httpd
        threading.Thread(target=httpd.serve_forever, name="kube-api-server", daemon=True).start()
        return self

    def stop(self) -> None:
        with self._lock:
            self._stopping = True
            self._changed.notify_all()
        self._released.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def reset(self) -> None:
        """Forget every object, fault, hang, token, log and request; end open streams."""
        with self._lock:
            self._epoch += 1
            for objects in self._objects.values():
                objects.clear()
            self._history.clear()
            self._oldest = self._rv
            self._pages.clear()
            self._expire_next = 0
            self._faults.clear()
            self._hang_until = 0.0
            self._logs.clear()
            self._logs_ended.clear()
            self.requests.clear()
            self.kserve = False
            self.crds = set()
            self.kueue = None
            self.visibility = False
            self.volcano = False
            self.bookmark_every = 0.5
            self._changed.notify_all()
        self._released.set()

    # ---------------------------------------------------------------- objects

    def _resource_of(self, obj: dict[str, Any]) -> Resource:
        group = str(obj.get("apiVersion") or "").rpartition("/")[0]
        for resource in RESOURCES.values():
            if resource.kind == obj.get("kind") and resource.group_version.rpartition("/")[0] == group:
                return resource
        try:
            return BY_KIND[obj["kind"]]
        except KeyError:
            raise ValueError(f"no resource for kind {obj.get('kind')!r}") from None

    @staticmethod
    def _key(resource: Resource, obj: dict[str, Any]) -> tuple[str, str]:
        meta = obj["metadata"]
        return (meta.get("namespace", "") if resource.namespaced else "", meta["name"])

    def _emit(self, resource: Resource, kind: str, obj: dict[str, Any]) -> None:
        self._history.append((self._rv, resource.id, kind, obj))
        self._changed.notify_all()

    def _bump(self) -> int:
        self._rv += 1
        return self._rv

    def add(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Store a new object (ADDED), filling uid, creationTimestamp and resourceVersion."""
        resource = self._resource_of(obj)
        with self._lock:
            stored = copy.deepcopy(obj)
            meta = stored.setdefault("metadata", {})
            if resource.namespaced:
                meta.setdefault("namespace", "default")
            meta.setdefault("uid", str(uuid.uuid4()))
            meta.setdefault("creationTimestamp", stamp())
            meta.setdefault("generation", 1)
            meta["resourceVersion"] = str(self._bump())
            self._objects[resource.id][self._key(resource, stored)] = stored
            self._encoded(stored)
            self._emit(resource, "ADDED", stored)
            return copy.deepcopy(stored)

    def add_raw(self, plural: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Store an object as it is (a malformed one too), under ``metadata.name`` if it has one."""
        resource = RESOURCES[plural]
        with self._lock:
            stored = copy.deepcopy(obj)
            found = stored.get("metadata")
            meta: dict[str, Any] = found if isinstance(found, dict) else {}
            name = meta.get("name") or f"raw-{uuid.uuid4().hex[:8]}"
            if isinstance(stored.get("metadata"), dict):
                stored["metadata"]["resourceVersion"] = str(self._bump())
            else:
                self._bump()
            self._objects[resource.id][(meta.get("namespace", "") if resource.namespaced else "", name)] = stored
            self._emit(resource, "ADDED", stored)
            return copy.deepcopy(stored)

    def get(self, kind: str, name: str, namespace: str = "default") -> dict[str, Any] | None:
        resource = BY_KIND[kind]
        with self._lock:
            found = self._objects[resource.id].get((namespace if resource.namespaced else "", name))
            return copy.deepcopy(found) if found is not None else None

    def objects(self, kind: str) -> list[dict[str, Any]]:
        with self._lock:
            return [copy.deepcopy(o) for o in self._objects[BY_KIND[kind].id].values()]

    def modify(self, kind: str, name: str, namespace: str = "default",
               change: Callable[[dict[str, Any]], None] | dict[str, Any] | None = None) -> dict[str, Any]:
        """Change an object (MODIFIED): ``change`` is a merge patch or a function editing a copy."""
        resource = BY_KIND[kind]
        with self._lock:
            key = (namespace if resource.namespaced else "", name)
            current = self._objects[resource.id][key]
            if callable(change):
                updated = copy.deepcopy(current)
                change(updated)
            else:
                updated = merge_patch(current, change or {})
            updated["metadata"]["resourceVersion"] = str(self._bump())
            self._objects[resource.id][key] = updated
            self._encoded(updated)
            self._emit(resource, "MODIFIED", updated)
            return copy.deepcopy(updated)

    def delete(self, kind: str, name: str, namespace: str = "default") -> dict[str, Any]:
        """Remove an object (DELETED)."""
        resource = BY_KIND[kind]
        with self._lock:
            gone = self._objects[resource.id].pop((namespace if resource.namespaced else "", name))
            gone = copy.deepcopy(gone)
            gone["metadata"]["resourceVersion"] = str(self._bump())
            self._emit(resource, "DELETED", gone)
            return gone

    @property
    def resource_version(self) -> int:
        return self._rv

    # ---------------------------------------------------------------- controls

    def fail(self, status: int, *, times: int | None = None, path_contains: str | None = None,
             method: str | None = None, message: str | None = None) -> Fault:
        """Answer matching requests (``path_contains`` looks at the path and query) with ``status``."""
        fault = Fault(status, times, path_contains, method, message or f"injected {status}")
        with self._lock:
            self._faults.append(fault)
        return fault

    def clear_faults(self) -> None:
        with self._lock:
            self._faults.clear()

    def hang(self, seconds: float) -> None:
        """Hold every new request for ``seconds`` (or until :meth:`release`) and send nothing on
        open streams meanwhile: a server that stopped answering without closing connections."""
        with self._lock:
            self._released = threading.Event()
            self._hang_until = time.monotonic() + seconds

    def release(self) -> None:
        with self._lock:
            self._hang_until = 0.0
            self._changed.notify_all()
        self._released.set()

    @property
    def hung(self) -> bool:
        return time.monotonic() < self._hang_until

    def end_watches(self) -> None:
        """End every open watch cleanly, as the server does when a watch's timeout is up."""
        with self._lock:
            self._cuts += 1
            self._changed.notify_all()

    def compact(self) -> None:
        """Forget the event history: watches from an older resourceVersion get a 410 ERROR event."""
        with self._lock:
            self._history.clear()
            self._oldest = self._rv
            self._changed.notify_all()

    @contextmanager
    def compacting(self) -> Iterator[KubeApiServer]:
        """Changes made in the block reach no open watch: it is compacted past them, so every
        watch gets a 410 and must list again to see them."""
        with self._lock:
            start = len(self._history)
            yield self
            del self._history[start:]
            self._oldest = self._rv
            self._changed.notify_all()

    def expire_continue_tokens(self) -> None:
        """Every continue token given out so far answers 410 Expired."""
        with self._lock:
            self._pages.clear()

    def expire_next_continue(self, times: int = 1) -> None:
        """The next ``times`` requests with a continue token find it expired (410)."""
        with self._lock:
            self._expire_next += times

    def append_log(self, namespace: str, pod: str, *lines: str) -> None:
        with self._lock:
            self._logs.setdefault((namespace, pod), []).extend(lines)
            self._changed.notify_all()

    def end_log(self, namespace: str, pod: str) -> None:
        """The container exited: followers get the rest and the stream ends."""
        with self._lock:
            self._logs_ended.add((namespace, pod))
            self._changed.notify_all()

    def requested(self, path_contains: str = "", *, method: str | None = None,
                  watch: bool | None = None) -> list[Request]:
        """Logged requests whose path and query contain ``path_contains``."""
        with self._lock:
            return [r for r in self.requests if path_contains in r.url and (method is None or r.method == method)
                    and (watch is None or r.watch == watch)]

    # ---------------------------------------------------------------- HTTP

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        split = urllib.parse.urlsplit(handler.path)
        query = dict(urllib.parse.parse_qsl(split.query, keep_blank_values=True))
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        auth = handler.headers.get("Authorization", "")
        token = auth.split(" ", 1)[1] if auth.lower().startswith("bearer ") else None
        request = Request(handler.command, split.path, query, token, body)
        with self._lock:
            self.requests.append(request)
            released, until = self._released, self._hang_until
        if until:
            released.wait(max(0.0, until - time.monotonic()))
        try:
            self._check(request)
            self._route(handler, request)
        except _Answer as answer:
            _send_json(handler, answer.code, answer.body)
        except (BrokenPipeError, ConnectionResetError):
            handler.close_connection = True

    def _check(self, request: Request) -> None:
        with self._lock:
            for fault in self._faults:
                if fault.matches(request.method, request.url):
                    fault.hits += 1
                    if fault.status == 401:
                        raise _Answer(401, "Unauthorized")
                    raise _Answer(fault.status, fault.message)
        if self.tokens and request.token not in self.tokens:
            raise _Answer(401, "Unauthorized")

    def _route(self, handler: BaseHTTPRequestHandler, request: Request) -> None:
        parts = [p for p in request.path.split("/") if p]
        if parts == ["version"]:
            _send_json(handler, 200, {"major": "1", "minor": "30", "gitVersion": "v1.30.0", "platform": "linux/amd64"})
            return
        if parts == ["apis"] and request.method == "GET":
            _send_json(handler, 200, self._discovery())
            return
        if parts[:2] == ["apis", VISIBILITY_GROUP] and self.kueue and self.visibility:
            self._visible(handler, request, parts[2:])
            return
        if parts[:2] == ["api", "v1"]:
            group_version, rest = "v1", parts[2:]
        elif parts[:1] == ["apis"] and len(parts) >= 3 and "/".join(parts[1:3]) in self._served():
            group_version, rest = "/".join(parts[1:3]), parts[3:]
        else:
            raise _Answer(404, f"the server could not find the requested resource ({request.path})")
        namespace = None
        if len(rest) >= 3 and rest[0] == "namespaces":
            namespace, rest = rest[1], rest[2:]
        found = {(self._gv(r), r.plural): r for r in RESOURCES.values()}.get((group_version, rest[0] if rest else ""))
        if found is None or not self._installed(found):
            raise _Answer(404, f"the server could not find the requested resource ({request.path})")
        resource = found
        if namespace is not None and not resource.namespaced:
            raise _Answer(404, f"the server could not find the requested resource ({request.path})")
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        if sub == "log" and resource.plural == "pods" and request.method == "GET" and namespace:
            self._pod_log(handler, request, namespace, name or "")
            return
        if sub == "scale" and resource.plural in SCALABLE and namespace and name:
            self._scale(handler, request, resource, namespace, name)
            return
        if sub == "status" and resource.status and name and request.method in ("GET", "PATCH", "PUT"):
            sub = None  # the status subresource: the object, changed as a whole here
        if sub is not None:
            raise _Answer(404, f"the server could not find the requested resource ({request.path})")
        if name is None:
            if request.method == "GET":
                if _truthy(request.query.get("watch")):
                    self._watch(handler, request, resource, namespace)
                else:
                    self._list(handler, request, resource, namespace)
            elif request.method == "POST":
                self._create(handler, request, resource, namespace)
            else:
                raise _Answer(405, f"{request.method} is not supported on a collection")
            return
        if request.method == "GET":
            found = self.get(resource.alias, name, namespace or "")
            if found is None:
                raise _Answer(404, f'{resource.plural} "{name}" not found')
            _send_json(handler, 200, found)
        elif request.method == "DELETE":
            self._delete(handler, request, resource, namespace, name)
        elif request.method == "PATCH":
            self._patch(handler, request, resource, namespace, name)
        elif request.method == "PUT":
            self._replace(handler, request, resource, namespace, name)
        else:
            raise _Answer(405, f"{request.method} is not supported here")

    def _gv(self, resource: Resource) -> str:
        """The group version ``resource`` is served at (Kueue's: the version :attr:`kueue` names)."""
        if resource.group_version.startswith(KUEUE_GROUP + "/") and self.kueue:
            return f"{KUEUE_GROUP}/{self.kueue}"
        return resource.group_version

    def _installed(self, resource: Resource) -> bool:
        """Whether ``resource``'s CRD is installed (built-in kinds always are)."""
        if resource.group_version.startswith(KUEUE_GROUP + "/"):
            return self.kueue is not None
        if resource.group_version in TRAINING_CRDS:
            return resource.group_version in self.crds
        switch = _CRDS.get(resource.group_version)
        return switch is None or bool(getattr(self, switch))

    def _served(self) -> set[str]:
        """The group versions served under /apis (a CRD's only while it is installed)."""
        served = {self._gv(r) for r in RESOURCES.values() if "/" in r.group_version and self._installed(r)}
        if self.kueue and self.visibility:
            served.add(f"{VISIBILITY_GROUP}/{self.kueue}")
        return served

    def _visible(self, handler: BaseHTTPRequestHandler, request: Request, rest: list[str]) -> None:
        """Kueue's visibility API: ``GET {version}/clusterqueues/NAME/pendingworkloads`` or
        ``{version}/namespaces/NS/localqueues/NAME/pendingworkloads``, a ``PendingWorkloadsSummary``
        of the pending Workloads in the order Kueue tries them: higher priority first, then by
        the time each was queued, a preempted one's being its eviction (Kueue's default
        ``requeuingTimestamp``), not its creation."""
        version = rest[0] if rest else ""
        rest = rest[1:]
        if version != self.kueue or request.method != "GET" or not rest or rest[-1] != "pendingworkloads":
            raise _Answer(404, f"the server could not find the requested resource ({request.path})")
        with self._lock:
            local = {(lq["metadata"]["namespace"], lq["metadata"]["name"]): lq["spec"].get("clusterQueue")
                     for lq in self.objects("LocalQueue")}
            if rest[:1] == ["clusterqueues"] and len(rest) == 3:
                cq, only = rest[1], None
                if self.get("ClusterQueue", cq, "") is None:
                    raise _Answer(404, f'clusterqueues.{KUEUE_GROUP} "{cq}" not found')
            elif rest[:1] == ["namespaces"] and len(rest) == 5 and rest[2] == "localqueues":
                only = (rest[1], rest[3])
                if only not in local:
                    raise _Answer(404, f'localqueues.{KUEUE_GROUP} "{rest[3]}" not found')
                cq = local[only]
            else:
                raise _Answer(404, f"the server could not find the requested resource ({request.path})")
            waiting = []
            for w in self.objects("Workload"):
                meta, spec = w["metadata"], w.get("spec") or {}
                conditions = {c["type"]: c for c in (w.get("status") or {}).get("conditions") or []}
                if (local.get((meta["namespace"], spec.get("queueName"))) != cq or spec.get("active") is False
                        or conditions.get("QuotaReserved", {}).get("status") == "True"
                        or conditions.get("Finished", {}).get("status") == "True"):
                    continue
                evicted = conditions.get("Evicted", {})
                queued = evicted["lastTransitionTime"] if evicted.get("status") == "True" else meta["creationTimestamp"]
                waiting.append((-int(spec.get("priority") or 0), queued, meta["name"], w))
        items, per_local = [], {}
        for position, (_p, _t, _n, w) in enumerate(sorted(waiting, key=lambda t: t[:3])):
            meta, lq = w["metadata"], (w["metadata"]["namespace"], w["spec"].get("queueName"))
            per_local[lq] = per_local.get(lq, -1) + 1
            if only is None or lq == only:
                items.append({"metadata": {"name": meta["name"], "namespace": meta["namespace"],
                                           "creationTimestamp": meta["creationTimestamp"],
                                           "ownerReferences": meta.get("ownerReferences", [])},
                              "priority": int(w["spec"].get("priority") or 0), "localQueueName": lq[1],
                              "positionInClusterQueue": position, "positionInLocalQueue": per_local[lq]})
        _send_json(handler, 200, {"kind": "PendingWorkloadsSummary", "apiVersion": f"{VISIBILITY_GROUP}/{version}",
                                  "metadata": {"creationTimestamp": None}, "items": items})

    def _discovery(self) -> dict[str, Any]:
        """``GET /apis``: the ``APIGroupList`` of the groups served, each with every version it
        serves (kubeflow.org: v2beta1 and v1), the newest preferred."""
        versions: dict[str, list[str]] = {}
        for group_version in sorted(self._served()):
            group, version = group_version.split("/")
            versions.setdefault(group, []).append(version)
        groups = []
        for group, served in versions.items():
            entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in sorted(served, reverse=True)]
            groups.append({"name": group, "versions": entries, "preferredVersion": entries[0]})
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}

    def _scale(self, handler: BaseHTTPRequestHandler, request: Request, resource: Resource,
               namespace: str, name: str) -> None:
        """The ``scale`` subresource (an ``autoscaling/v1`` Scale): GET it, or PATCH its
        ``spec.replicas`` (merge patch), which sets the object's."""
        with self._lock:
            current = self.get(resource.alias, name, namespace)
            if current is None:
                raise _Answer(404, f'{resource.plural}.apps "{name}" not found')
            if request.method == "PATCH":
                kind = (handler.headers.get("Content-Type") or "").split(";")[0].strip()
                if kind not in ("application/merge-patch+json", "application/strategic-merge-patch+json"):
                    raise _Answer(415, f"the body of the request was in an unknown format ({kind})")
                replicas = merge_patch(_scale_of(current), request.body).get("spec", {}).get("replicas")
                if not isinstance(replicas, int) or replicas < 0:
                    raise _Answer(422, f'Scale.autoscaling "{name}" is invalid: spec.replicas: Invalid value: '
                                       f"{replicas!r}: must be greater than or equal to 0", "Invalid")
                current = self.modify(resource.alias, name, namespace, {"spec": {"replicas": replicas}})
            elif request.method != "GET":
                raise _Answer(405, f"{request.method} is not supported on a scale subresource")
        _send_json(handler, 200, _scale_of(current))

    def _replace(self, handler: BaseHTTPRequestHandler, request: Request, resource: Resource,
                 namespace: str | None, name: str) -> None:
        """PUT: replace the object, refused with 409 Conflict when the body's resourceVersion is
        not the stored one (optimistic concurrency, as leader election relies on)."""
        body = request.body
        if not isinstance(body, dict) or not isinstance(body.get("metadata"), dict):
            raise _Answer(400, "the body of the request was in an unknown format")
        with self._lock:
            current = self.get(resource.alias, name, namespace or "")
            if current is None:
                raise _Answer(404, f'{resource.plural} "{name}" not found')
            sent = body["metadata"].get("resourceVersion")
            if sent and sent != current["metadata"]["resourceVersion"]:
                raise _Answer(409, f'Operation cannot be fulfilled on {resource.plural} "{name}": the object has been '
                                   "modified; please apply your changes to the latest version and try again", "Conflict")

            def become(obj: dict[str, Any]) -> None:
                meta = {**obj["metadata"], **{k: v for k, v in body["metadata"].items() if k != "resourceVersion"}}
                obj.clear()
                obj.update(body, metadata=meta)

            stored = self.modify(resource.alias, name, namespace or "", become)
        _send_json(handler, 200, stored)

    # ---------------------------------------------------------------- list and watch

    def _selected(self, resource: Resource, namespace: str | None, request: Request) -> Callable[[dict[str, Any]], bool]:
        fields = _selector_terms(request.query.get("fieldSelector"))
        labels = _selector_terms(request.query.get("labelSelector"))

        def selected(obj: dict[str, Any]) -> bool:
            found = obj.get("metadata")
            meta: dict[str, Any] = found if isinstance(found, dict) else {}
            if namespace is not None and meta.get("namespace") != namespace:
                return False
            return _matches(obj, fields, labels)

        return selected

    def _list(self, handler: BaseHTTPRequestHandler, request: Request, resource: Resource, namespace: str | None) -> None:
        limit = int(request.query.get("limit") or 0)
        token = request.query.get("continue") or None
        with self._lock:
            if token is not None:
                if self._expire_next > 0:
                    self._expire_next -= 1
                    self._pages.pop(token, None)
                page = self._pages.pop(token, None)
                if page is None:
                    raise _Answer(410, "The provided continue parameter is too old to display a consistent list "
                                       "result. You can start a new list without the continue parameter, or use "
                                       "the continue token in this response to retrieve the remainder of the results. "
                                       "Continuing with the provided token results in an inconsistent list - objects "
                                       "that were created, modified, or deleted between the time the first chunk was "
                                       "returned and now may show up in the list.",
                                  metadata={"continue": "expired-" + uuid.uuid4().hex})
                objects, version = page
            else:
                selected = self._selected(resource, namespace, request)
                objects = [o for _k, o in sorted(self._objects[resource.id].items()) if selected(o)]
                version = self._rv
            meta: dict[str, Any] = {"resourceVersion": str(version)}
            if limit and len(objects) > limit:
                objects, rest = objects[:limit], objects[limit:]
                next_token = uuid.uuid4().hex
                self._pages[next_token] = (rest, version)
                meta.update({"continue": next_token, "remainingItemCount": len(rest)})
        head = json.dumps({"kind": f"{resource.kind}List", "apiVersion": self._gv(resource), "metadata": meta})
        items = b", ".join(self._encoded(obj) for obj in objects)
        _send(handler, 200, "application/json", head[:-1].encode() + b', "items": [' + items + b"]}")

    def _encoded(self, obj: dict[str, Any]) -> bytes:
        """An object as a list item (no kind or apiVersion) in JSON, encoded once per version (when
        it is stored, as a real API server has it ready in its cache; stored objects are never
        changed in place)."""
        hit = self._encoding.get(id(obj))
        if hit is not None and hit[0] is obj:
            return hit[1]
        item = dict(obj)
        item.pop("kind", None)
        item.pop("apiVersion", None)
        encoded = json.dumps(item).encode()
        with self._lock:
            if len(self._encoding) > 2 * sum(map(len, self._objects.values())) + 1000:
                self._encoding.clear()  # drop the encodings of objects changed or deleted since
            self._encoding[id(obj)] = (obj, encoded)
        return encoded

    def _watch(self, handler: BaseHTTPRequestHandler, request: Request, resource: Resource, namespace: str | None) -> None:
        selected = self._selected(resource, namespace, request)
        timeout = float(request.query.get("timeoutSeconds") or 1800)
        bookmarks = _truthy(request.query.get("allowWatchBookmarks"))
        since = request.query.get("resourceVersion") or ""
        pending: list[dict[str, Any]] = []
        with self._lock:
            epoch, cuts = self._epoch, self._cuts
            if since in ("", "0"):
                position = self._rv
                pending = [{"type": "ADDED", "object": o} for _k, o in sorted(self._objects[resource.id].items())
                           if selected(o)]
            else:
                position = int(since)
        _start_stream(handler, "application/json")
        deadline = time.monotonic() + timeout
        next_bookmark = time.monotonic() + self.bookmark_every
        with self._lock:
            self.open_streams += 1
        try:
            while True:
                while self.hung and not self._stopping:  # a hung server says nothing and ends nothing
                    self._released.wait(0.05)
                for event in pending:
                    _send_chunk(handler, json.dumps(event).encode() + b"\n")
                if any(e["type"] == "ERROR" for e in pending):
                    break
                pending = []
                now = time.monotonic()
                if now >= deadline:
                    break
                with self._lock:
                    if not self._news(resource, position):
                        self._changed.wait(max(0.0, min(deadline, next_bookmark) - now))
                    if self._stopping or self._epoch != epoch or self._cuts != cuts:
                        break
                    if position < self._oldest:
                        pending = [{"type": "ERROR", "object": status_body(
                            410, f"too old resource version: {position} ({self._oldest})", "Expired")}]
                        continue
                    for rv, plural, kind, obj in self._history:
                        if rv > position and plural == resource.id and selected(obj):
                            pending.append({"type": kind, "object": obj})
                    position = self._rv
                    if bookmarks and time.monotonic() >= next_bookmark:
                        pending.append({"type": "BOOKMARK", "object": {
                            "kind": resource.kind, "apiVersion": self._gv(resource),
                            "metadata": {"resourceVersion": str(position)}}})
                        next_bookmark = time.monotonic() + self.bookmark_every
            _end_stream(handler)
        except OSError:
            handler.close_connection = True
        finally:
            with self._lock:
                self.open_streams -= 1

    def _news(self, resource: Resource, position: int) -> bool:
        if position < self._oldest:
            return True
        for rv, plural, _kind, _obj in reversed(self._history):
            if rv <= position:
                return False
            if plural == resource.id:
                return True
        return False

    # ---------------------------------------------------------------- create, delete, patch

    def _create(self, handler: BaseHTTPRequestHandler, request: Request, resource: Resource, namespace: str | None) -> None:
        obj = request.body
        if not isinstance(obj, dict):
            raise _Answer(400, "the body of the request was in an unknown format")
        if obj.get("kind") != resource.kind:
            raise _Answer(400, f"the kind {obj.get('kind')!r} does not match {resource.kind!r}")
        if resource.group_version in TRAINING_CRDS:
            if obj.get("apiVersion") != resource.group_version:
                raise _Answer(400, f"the API version in the data ({obj.get('apiVersion')}) does not match the "
                                   f"expected API version ({resource.group_version})")
            if (invalid := kube_crd_schema.problem(obj)) is not None:
                raise _Answer(422, invalid, "Invalid")
        meta = obj.setdefault("metadata", {})
        if resource.namespaced:
            if meta.get("namespace") not in (None, namespace):
                raise _Answer(400, "the namespace of the provided object does not match the namespace sent on the request")
            meta["namespace"] = namespace or "default"
        if not meta.get("name"):
            if not meta.get("generateName"):
                raise _Answer(422, f"{resource.kind} is invalid: metadata.name: Required value: name or generateName is required",
                              "Invalid")
            meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
        meta.pop("uid", None)
        with self._lock:
            key = self._key(resource, obj)
            if key in self._objects[resource.id]:
                raise _Answer(409, f'{resource.plural}.{resource.group_version.split("/")[0]} "{meta["name"]}" already exists')
            if request.query.get("dryRun") == "All":
                preview = copy.deepcopy(obj)
                preview["metadata"].update(uid=str(uuid.uuid4()), creationTimestamp=stamp())
                _send_json(handler, 201, preview)
                return
            stored = self.add(obj)
        _send_json(handler, 201, stored)

    def _delete(self, handler: BaseHTTPRequestHandler, request: Request, resource: Resource,
                namespace: str | None, name: str) -> None:
        with self._lock:
            if self.get(resource.alias, name, namespace or "") is None:
                raise _Answer(404, f'{resource.plural} "{name}" not found')
            if request.query.get("dryRun") == "All":
                gone = self.get(resource.alias, name, namespace or "")
            else:
                gone = self.delete(resource.alias, name, namespace or "")
        _send_json(handler, 200, gone)

    def _patch(self, handler: BaseHTTPRequestHandler, request: Request, resource: Resource,
               namespace: str | None, name: str) -> None:
        kind = (handler.headers.get("Content-Type") or "").split(";")[0].strip()
        with self._lock:
            current = self.get(resource.alias, name, namespace or "")
            if current is None:
                raise _Answer(404, f'{resource.plural} "{name}" not found')
            try:
                if kind == "application/json-patch+json" and isinstance(request.body, list):
                    updated = json_patch(current, request.body)
                elif kind in ("application/merge-patch+json", "application/strategic-merge-patch+json"):
                    updated = merge_patch(current, request.body)
                else:
                    raise _Answer(415, f"the body of the request was in an unknown format - accepted media types "
                                       f"include: application/json-patch+json, application/merge-patch+json ({kind})")
            except (KeyError, IndexError, ValueError, TypeError) as exc:
                raise _Answer(422, f"the patch cannot be applied: {exc}", "Invalid") from exc
            if request.query.get("dryRun") == "All":
                _send_json(handler, 200, updated)
                return

            def become(obj: dict[str, Any]) -> None:
                obj.clear()
                obj.update(updated)

            stored = self.modify(resource.alias, name, namespace or "", become)
        _send_json(handler, 200, stored)

    # ---------------------------------------------------------------- logs

    def _pod_log(self, handler: BaseHTTPRequestHandler, request: Request, namespace: str, name: str) -> None:
        if self.get("Pod", name, namespace) is None:
            raise _Answer(404, f'pods "{name}" not found')
        key = (namespace, name)
        tail = request.query.get("tailLines")
        with self._lock:
            lines = list(self._logs.get(key, ()))
            epoch = self._epoch
        start = max(0, len(lines) - int(tail)) if tail else 0
        if not _truthy(request.query.get("follow")):
            text = "".join(line + "\n" for line in lines[start:]).encode()
            _send(handler, 200, "text/plain", text)
            return
        _start_stream(handler, "text/plain")
        sent = start
        try:
            while True:
                with self._lock:
                    lines = self._logs.get(key, [])
                    if sent >= len(lines) and key not in self._logs_ended:
                        self._changed.wait(0.5)
                    lines = list(self._logs.get(key, []))
                    ended = key in self._logs_ended or self.get("Pod", name, namespace) is None
                    stop = self._stopping or self._epoch != epoch
                for line in lines[sent:]:
                    _send_chunk(handler, line.encode() + b"\n")
                sent = len(lines)
                if ended or stop:
                    break
            _end_stream(handler)
        except OSError:
            handler.close_connection = True


def _scale_of(obj: dict[str, Any]) -> dict[str, Any]:
    """The ``autoscaling/v1`` Scale of a Deployment or StatefulSet."""
    meta = obj["metadata"]
    labels = ((obj.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    return {"kind": "Scale", "apiVersion": "autoscaling/v1",
            "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
                         if k in meta},
            "spec": {"replicas": (obj.get("spec") or {}).get("replicas", 1)},
            "status": {"replicas": (obj.get("status") or {}).get("replicas", 0),
                       "selector": ",".join(f"{k}={v}" for k, v in sorted(labels.items()))}}


def _send(handler: BaseHTTPRequestHandler, code: int, content_type: str, payload: bytes) -> None:
    try:
        handler.send_response(code)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", str(len(payload)))
        handler.end_headers()
        handler.wfile.write(payload)
    except OSError:
        handler.close_connection = True  # the client gave up (a timeout under test)


def _send_json(handler: BaseHTTPRequestHandler, code: int, body: Any) -> None:
    _send(handler, code, "application/json", json.dumps(body).encode())


def _start_stream(handler: BaseHTTPRequestHandler, content_type: str) -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Transfer-Encoding", "chunked")
    handler.send_header("Cache-Control", "no-cache, private")
    handler.end_headers()
    handler.wfile.flush()


def _send_chunk(handler: BaseHTTPRequestHandler, data: bytes) -> None:
    handler.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))


def _end_stream(handler: BaseHTTPRequestHandler) -> None:
    handler.wfile.write(b"0\r\n\r\n")


# --------------------------------------------------------------------------- objects


def _uid() -> str:
    return str(uuid.uuid4())


def _gpu_resources(gpus: int = 0, mig: dict[str, int] | None = None) -> dict[str, Any]:
    limits: dict[str, str] = {"cpu": "8", "memory": "64Gi"}
    if gpus:
        limits["nvidia.com/gpu"] = str(gpus)
    for profile, count in (mig or {}).items():
        limits[f"nvidia.com/mig-{profile}"] = str(count)
    return {"limits": limits, "requests": dict(limits)}


def _pod_spec(gpus: int, mig: dict[str, int] | None, image: str) -> dict[str, Any]:
    return {
        "containers": [{
            "name": "train", "image": image, "command": ["python", "train.py"],
            "resources": _gpu_resources(gpus, mig), "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File", "imagePullPolicy": "IfNotPresent",
        }],
        "restartPolicy": "Never", "dnsPolicy": "ClusterFirst", "schedulerName": "default-scheduler",
        "securityContext": {}, "terminationGracePeriodSeconds": 30,
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    }


def job(name: str, namespace: str = "default", *, gpus: int = 1, mig: dict[str, int] | None = None,
        state: str = "running", image: str = PYTORCH, owner: str | None = None, parallelism: int | None = None,
        cronjob: dict[str, Any] | None = None, created: float | None = None, started: float | None = None,
        finished: float | None = None, labels: dict[str, str] | None = None) -> dict[str, Any]:
    """A batch/v1 Job as the API server returns it. ``state``: pending, running, complete,
    failed or suspended (what its status says; its pods say the rest)."""
    uid = _uid()
    now = time.time()
    created = now - 600 if created is None else created
    selector = {"batch.kubernetes.io/controller-uid": uid}
    pod_labels = {**selector, "batch.kubernetes.io/job-name": name, "controller-uid": uid, "job-name": name}
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": uid, "creationTimestamp": stamp(created),
                            "generation": 1, "labels": dict(labels or {}), "annotations": {}}
    if owner:
        meta["labels"]["owner"] = owner
    if cronjob is not None:
        meta["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "CronJob", "name": cronjob["metadata"]["name"],
                                    "uid": cronjob["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}]
    status: dict[str, Any] = {"terminating": 0, "uncountedTerminatedPods": {}}
    if state != "suspended":
        status["startTime"] = stamp(started if started is not None else created + 5)
    if state in ("running", "pending"):
        status.update(active=parallelism or 1, ready=(parallelism or 1) if state == "running" else 0)
    elif state == "complete":
        done = stamp(finished if finished is not None else now - 60)
        status.update(succeeded=1, ready=0, completionTime=done, conditions=[
            {"type": "SuccessCriteriaMet", "status": "True", "lastProbeTime": done, "lastTransitionTime": done},
            {"type": "Complete", "status": "True", "lastProbeTime": done, "lastTransitionTime": done}])
    elif state == "failed":
        done = stamp(finished if finished is not None else now - 60)
        status.update(failed=1, ready=0, conditions=[
            {"type": "FailureTarget", "status": "True", "reason": "BackoffLimitExceeded",
             "message": "Job has reached the specified backoff limit", "lastProbeTime": done, "lastTransitionTime": done},
            {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
             "message": "Job has reached the specified backoff limit", "lastProbeTime": done, "lastTransitionTime": done}])
    elif state == "suspended":
        now_s = stamp(now)
        status["conditions"] = [{"type": "Suspended", "status": "True", "reason": "JobSuspended",
                                 "message": "Job suspended", "lastProbeTime": now_s, "lastTransitionTime": now_s}]
    return {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": meta,
        "spec": {
            "parallelism": parallelism or 1, "completions": parallelism or 1, "backoffLimit": 6,
            "completionMode": "NonIndexed", "suspend": state == "suspended", "podReplacementPolicy": "TerminatingOrFailed",
            "manualSelector": False, "selector": {"matchLabels": selector},
            "template": {"metadata": {"labels": pod_labels}, "spec": _pod_spec(gpus, mig, image)},
        },
        "status": status,
    }


def pod_for(job_obj: dict[str, Any], *, node: str | None = "gpu-node-1", phase: str = "Running",
            unschedulable: str | None = None, waiting: tuple[str, str] | None = None,
            suffix: str | None = None, created: float | None = None) -> dict[str, Any]:
    """The pod a Job's controller creates: owned by the Job, labelled with its uid and name."""
    meta = job_obj["metadata"]
    template = job_obj["spec"]["template"]
    name = f"{meta['name']}-{suffix or uuid.uuid4().hex[:5]}"
    created = time.time() - 590 if created is None else created
    spec = copy.deepcopy(template["spec"])
    conditions: list[dict[str, Any]] = []
    status: dict[str, Any] = {"phase": phase, "qosClass": "Guaranteed", "conditions": conditions}
    if node is not None:
        spec["nodeName"] = node
        conditions.append({"type": "PodScheduled", "status": "True", "lastProbeTime": None,
                           "lastTransitionTime": stamp(created + 1)})
        status.update(hostIP="10.0.1.17", podIP="10.244.3.21", startTime=stamp(created + 1))
    elif unschedulable is not None:
        conditions.append({"type": "PodScheduled", "status": "False", "lastProbeTime": None,
                           "lastTransitionTime": stamp(created + 1), "reason": "Unschedulable", "message": unschedulable})
    if phase == "Running":
        status["containerStatuses"] = [{"name": "train", "image": spec["containers"][0]["image"], "ready": True,
                                        "restartCount": 0, "started": True,
                                        "state": {"running": {"startedAt": stamp(created + 20)}}}]
    elif waiting is not None and node is not None:
        status["containerStatuses"] = [{"name": "train", "image": spec["containers"][0]["image"], "ready": False,
                                        "restartCount": 0, "started": False,
                                        "state": {"waiting": {"reason": waiting[0], "message": waiting[1]}}}]
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": name, "generateName": f"{meta['name']}-", "namespace": meta["namespace"], "uid": _uid(),
            "creationTimestamp": stamp(created), "labels": dict(template["metadata"]["labels"]),
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": meta["name"], "uid": meta["uid"],
                                 "controller": True, "blockOwnerDeletion": True}],
        },
        "spec": spec,
        "status": status,
    }


def node(name: str, *, gpus: int = 8, allocatable: int | None = None, product: str | None = A100,
         mig: dict[str, int] | None = None, strategy: str | None = None, ready: bool = True,
         instance_id: str | None = "i-0a1b2c3d4e5f60718", zone: str = "us-east-1a") -> dict[str, Any]:
    """A core/v1 Node with the labels the NVIDIA GPU operator (GPU feature discovery) sets."""
    labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
              "node.kubernetes.io/instance-type": "p4de.24xlarge", "topology.kubernetes.io/zone": zone}
    if product:
        labels.update({PRODUCT_LABEL: product, "nvidia.com/gpu.count": str(gpus), "nvidia.com/gpu.memory": "81920",
                       "nvidia.com/gpu.present": "true"})
    if strategy:
        labels["nvidia.com/mig.strategy"] = strategy
    capacity = {"cpu": "96", "memory": "1176211388Ki", "pods": "110", "ephemeral-storage": "1968874736Ki"}
    if gpus or product:
        capacity["nvidia.com/gpu"] = str(gpus)
    for profile, count in (mig or {}).items():
        capacity[f"nvidia.com/mig-{profile}"] = str(count)
    alloc = dict(capacity, cpu="95690m", memory="1165317052Ki")
    if "nvidia.com/gpu" in capacity:
        alloc["nvidia.com/gpu"] = str(gpus if allocatable is None else allocatable)
    now = stamp()
    spec: dict[str, Any] = {"podCIDR": "10.244.3.0/24"}
    if instance_id:
        spec["providerID"] = f"aws:///{zone}/{instance_id}"
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "uid": _uid(), "creationTimestamp": stamp(time.time() - 86400), "labels": labels,
                     "annotations": {"node.alpha.kubernetes.io/ttl": "0"}},
        "spec": spec,
        "status": {
            "capacity": capacity, "allocatable": alloc,
            "conditions": [
                {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory",
                 "lastHeartbeatTime": now, "lastTransitionTime": now},
                {"type": "Ready", "status": "True" if ready else "False",
                 "reason": "KubeletReady" if ready else "KubeletNotReady",
                 "message": "kubelet is posting ready status" if ready else "container runtime is down",
                 "lastHeartbeatTime": now, "lastTransitionTime": now},
            ],
            "nodeInfo": {"kubeletVersion": "v1.30.0", "containerRuntimeVersion": "containerd://1.7.13",
                         "osImage": "Ubuntu 22.04.4 LTS", "architecture": "amd64", "operatingSystem": "linux"},
        },
    }


def cronjob(name: str, namespace: str = "default", schedule: str = "0 3 * * *", *, gpus: int = 1,
            mig: dict[str, int] | None = None, suspend: bool = False, last_schedule: float | None = None,
            active: list[dict[str, Any]] | None = None, time_zone: str | None = None,
            image: str = PYTORCH) -> dict[str, Any]:
    """A batch/v1 CronJob."""
    spec: dict[str, Any] = {
        "schedule": schedule, "concurrencyPolicy": "Forbid", "suspend": suspend,
        "successfulJobsHistoryLimit": 3, "failedJobsHistoryLimit": 1,
        "jobTemplate": {"metadata": {}, "spec": {"backoffLimit": 2, "template": {
            "metadata": {}, "spec": _pod_spec(gpus, mig, image)}}},
    }
    if time_zone:
        spec["timeZone"] = time_zone
    status: dict[str, Any] = {}
    if last_schedule is not None:
        status["lastScheduleTime"] = stamp(last_schedule)
    if active:
        status["active"] = [{"kind": "Job", "namespace": j["metadata"]["namespace"], "name": j["metadata"]["name"],
                             "uid": j["metadata"]["uid"], "apiVersion": "batch/v1"} for j in active]
    return {"apiVersion": "batch/v1", "kind": "CronJob",
            "metadata": {"name": name, "namespace": namespace, "uid": _uid(),
                         "creationTimestamp": stamp(time.time() - 7 * 86400)},
            "spec": spec, "status": status}


def event(about: dict[str, Any], message: str = INSUFFICIENT_GPU, *, reason: str = "FailedScheduling",
          at: float | None = None, type_: str = "Warning") -> dict[str, Any]:
    """A core/v1 Event about a pod (the scheduler's) or a Job (the job controller's)."""
    meta = about["metadata"]
    kind = about.get("kind", "Pod")
    when = time.time() if at is None else at
    micro = datetime.fromtimestamp(when, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    scheduler = reason == "FailedScheduling"
    return {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": f"{meta['name']}.{uuid.uuid4().hex[:16]}", "namespace": meta["namespace"], "uid": _uid(),
                     "creationTimestamp": stamp(when)},
        "involvedObject": {"apiVersion": "v1" if kind == "Pod" else "batch/v1", "kind": kind, "name": meta["name"],
                           "namespace": meta["namespace"], "uid": meta["uid"],
                           "resourceVersion": meta.get("resourceVersion", "")},
        "reason": reason, "message": message, "type": type_, "count": 1,
        "source": {"component": "default-scheduler" if scheduler else "job-controller"},
        "firstTimestamp": None if scheduler else stamp(when), "lastTimestamp": None if scheduler else stamp(when),
        "eventTime": micro if scheduler else None, "action": "Scheduling" if scheduler else "",
        "reportingComponent": "default-scheduler" if scheduler else "job-controller",
        "reportingInstance": "default-scheduler-control-plane" if scheduler else "",
    }


# --------------------------------------------------------------------------- kubeconfig and fixtures


def write_kubeconfig(path: Path, server_url: str, contexts: dict[str, dict[str, str]] | None = None,
                     current: str | None = None) -> Path:
    """A kubeconfig (YAML) whose contexts all reach ``server_url``.

    ``contexts``: ``{name: {"token": …, "namespace": …}}``; default: one context ``test``.
    """
    contexts = contexts or {"test": {"token": TEST_TOKEN, "namespace": "default"}}
    doc = {
        "apiVersion": "v1", "kind": "Config", "preferences": {},
        "clusters": [{"name": f"{name}-cluster", "cluster": {"server": server_url}} for name in contexts],
        "users": [{"name": f"{name}-user", "user": {"token": spec.get("token", TEST_TOKEN)}} for name, spec in contexts.items()],
        "contexts": [{"name": name, "context": {"cluster": f"{name}-cluster", "user": f"{name}-user",
                                                "namespace": spec.get("namespace", "default")}}
                     for name, spec in contexts.items()],
        "current-context": current or next(iter(contexts)),
    }
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


@dataclass
class KubeCluster:
    """What a test gets: the server, the kubeconfig that reaches it, and adapters it closes."""

    server: KubeApiServer
    kubeconfig: Path
    tmp_path: Path
    _backends: list[Any] = field(default_factory=list)

    def backend(self, **kwargs: Any) -> Any:
        """A :class:`~gpuconsole.backends.kube.source.KubeJobs` with test-sized timeouts, closed after the test."""
        from gpuconsole.backends.kube.source import KubeJobs

        return self._kept(KubeJobs, kwargs)

    def services(self, **kwargs: Any) -> Any:
        """A :class:`~gpuconsole.backends.kube.services.KubeServices` likewise."""
        from gpuconsole.backends.kube.services import KubeServices

        return self._kept(KubeServices, kwargs)

    def _kept(self, make: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
        kwargs.setdefault("request_timeout", 2.0)
        kwargs.setdefault("watch_timeout", 2)
        backend = make(**kwargs)
        self._backends.append(backend)
        return backend

    def close_backends(self) -> None:
        for backend in self._backends:
            backend.close()
        self._backends.clear()

    def add(self, *objects: dict[str, Any]) -> list[dict[str, Any]]:
        return [self.server.add(o) for o in objects]


def wait_until(predicate: Callable[[], Any], timeout: float = 10.0, interval: float = 0.02) -> Any:
    """Poll ``predicate`` until it returns something true; that value, or AssertionError."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(interval)


def poll_until(poll: Callable[[], Any], check: Callable[[Any], object], timeout: float = 8.0) -> Any:
    """Call ``poll`` until ``check(reading)`` holds; a backend failure on the way is retried."""
    from gpuconsole.backends.base import BackendError

    last: list[object] = []

    def attempt() -> Any:
        try:
            reading = poll()
        except BackendError as exc:
            last[:] = [exc]
            return None
        last[:] = [reading]
        return reading if check(reading) else None

    try:
        return wait_until(attempt, timeout)
    except AssertionError:
        raise AssertionError(f"not reached; last poll: {last[0] if last else None!r:.600}") from None


def use_kubeconfig(monkeypatch: pytest.MonkeyPatch, path: Path) -> None:
    """Point the kubernetes client at ``path`` alone: KUBECONFIG set, no in-cluster account."""
    monkeypatch.setenv("KUBECONFIG", str(path))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)


@pytest.fixture(scope="session")
def kube_server() -> Iterator[KubeApiServer]:
    """The Kubernetes API test server on a free 127.0.0.1 port, for the whole session."""
    server = KubeApiServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def kube(kube_server: KubeApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[KubeCluster]:
    """A clean server, and KUBECONFIG pointing at a kubeconfig with one context that reaches it."""
    kube_server.reset()
    path = write_kubeconfig(tmp_path / "kubeconfig", kube_server.url)
    use_kubeconfig(monkeypatch, path)
    cluster = KubeCluster(kube_server, path, tmp_path)
    try:
        yield cluster
    finally:
        cluster.close_backends()
        kube_server.reset()
