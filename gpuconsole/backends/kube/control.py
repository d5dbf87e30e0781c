"""Changing jobs on a real cluster: :class:`KubeJobControl`, the Kubernetes side of ``JobControl``,
and asking the cluster what it allows (:meth:`KubeJobControl.review`).

Requests go through ``ApiClient.call_api`` with plain ``dict`` bodies, answers read as JSON (no
generated models), each with a timeout; errors are one-line backend errors with the API
server's own message (403: ``denied by the cluster: …``).
"""

from __future__ import annotations

import copy
import json
import random
import string
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import urllib3

from gpuconsole.backends.base import (
    AuthorizationDenied,
    BackendError,
    BackendPermissionDenied,
    BackendTimeout,
)
from gpuconsole.backends.kube import access_review, identity, queue_control
from gpuconsole.backends.kube import mapping as kube_mapping
from gpuconsole.backends.kube.describe import EventLine, describe_text

BATCH = "/apis/batch/v1/namespaces/{namespace}"
CORE = "/api/v1/namespaces/{namespace}"
COLLECTIONS = {
    "Job": f"{BATCH}/jobs",
    "CronJob": f"{BATCH}/cronjobs",
    "Service": f"{CORE}/services",
    # distributed training jobs (kube.training): deleted, suspended and resumed like a Job
    "MPIJob": "/apis/kubeflow.org/v2beta1/namespaces/{namespace}/mpijobs",
    "PyTorchJob": "/apis/kubeflow.org/v1/namespaces/{namespace}/pytorchjobs",
    "TrainJob": "/apis/trainer.kubeflow.org/v1alpha1/namespaces/{namespace}/trainjobs",
    "JobSet": "/apis/jobset.x-k8s.io/v1alpha2/namespaces/{namespace}/jobsets",
    "PodGroup": "/apis/scheduling.volcano.sh/v1beta1/namespaces/{namespace}/podgroups",  # a gang, owned by its Job
}
WORKLOADS = ("Job", "CronJob", "MPIJob", "PyTorchJob", "TrainJob", "JobSet")
RUN_POLICY = frozenset({"MPIJob", "PyTorchJob"})  # the Kubeflow kinds suspend through spec.runPolicy
MANUAL_ANNOTATION = "cronjob.kubernetes.io/instantiate"
JOB_NAME_MAX = 63
_SUFFIX = string.ascii_lowercase + string.digits
MESSAGE_LIMIT = 300
DESCRIBED_PODS = 5  # a Job's pods whose events a describe shows (the newest)


def one_line(text: str, limit: int = MESSAGE_LIMIT) -> str:
    return kube_mapping.one_line(text, limit)


def status_message(body: Any) -> str:
    """The ``message`` of a Kubernetes ``Status`` answer, else its first line."""
    return kube_mapping.status_message(body, MESSAGE_LIMIT)


def api_error(status: int, body: Any, where: str) -> BackendError:
    """The error for an HTTP status the API server answered while doing ``where``."""
    error = _api_error(status, status_message(body), where)
    error.status = status  # type: ignore[attr-defined]  # as the source's errors carry it
    return error


def _api_error(status: int, message: str, where: str) -> BackendError:
    if status == 401:
        return BackendPermissionDenied(f"{where}: the API server refused the credentials (401 Unauthorized)")
    if status == 403:  # RBAC refused: the server's message names the user, verb and namespace
        return AuthorizationDenied(f"denied by the cluster: {message or f'{where}: 403 Forbidden'}")
    if status in (408, 504):
        return BackendTimeout(f"{where}: the API server timed out: {message or status}")
    return BackendError(f"{where}: {message or f'the API server answered {status}'}")


def parse_time(text: Any) -> float | None:
    """POSIX seconds of an RFC 3339 time (``2026-11-16T14:00:00Z``, with or without fractions)."""
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def manual_job(cronjob: Mapping[str, Any], suffix: str) -> dict[str, Any]:
    """The Job ``kubectl create job --from=cronjob/<name>`` makes: the CronJob's ``jobTemplate``,
    named ``<cronjob>-manual-<suffix>``, annotated as manual and owned by the CronJob."""
    meta = cronjob.get("metadata") or {}
    template = (cronjob.get("spec") or {}).get("jobTemplate") or {}
    template_meta = template.get("metadata") or {}
    base = str(meta.get("name", ""))[: JOB_NAME_MAX - len("-manual-") - len(suffix)].rstrip("-")
    annotations = {**(template_meta.get("annotations") or {}), MANUAL_ANNOTATION: "manual"}
    job_meta: dict[str, Any] = {"name": f"{base}-manual-{suffix}", "namespace": meta.get("namespace", "default"),
                                "annotations": annotations}
    if template_meta.get("labels"):
        job_meta["labels"] = dict(template_meta["labels"])
    job_meta["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "CronJob", "name": meta.get("name"),
                                    "uid": meta.get("uid"), "controller": True}]
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": job_meta,
            "spec": copy.deepcopy(template.get("spec") or {})}


def _event_line(obj: Mapping[str, Any], about: str = "") -> EventLine:
    meta = obj.get("metadata") or {}
    at = (parse_time(obj.get("lastTimestamp")) or parse_time(obj.get("eventTime"))
          or parse_time(obj.get("firstTimestamp")) or parse_time(meta.get("creationTimestamp")))
    source = (obj.get("source") or {}).get("component") or obj.get("reportingComponent") or ""
    count = obj.get("count") or ((obj.get("series") or {}).get("count")) or 1
    return EventLine(str(obj.get("type") or ""), str(obj.get("reason") or ""), at, str(source),
                     str(obj.get("message") or ""), int(count) if isinstance(count, int) else 1, about)


def _shutdown(response: Any) -> None:
    """End a streaming answer from another thread: a blocked read returns at once."""
    try:
        if hasattr(response, "shutdown"):
            response.shutdown()
        else:
            response.close()
    except Exception:  # noqa: BLE001 - it is being torn down either way
        pass


class KubeJobControl:
    """Submit, delete, suspend, trigger, logs and describe through the official client.

    Args:
        api_client_factory: returns the ``kubernetes.client.ApiClient`` of the context to act in
            (called once, on first use, in the calling thread).
        request_timeout: seconds any request may take to answer.
        clock: for the ages of events in a describe.
    """

    name = "kube"

    def __init__(self, api_client_factory: Callable[[], Any], request_timeout: float = 10.0,
                 clock: Callable[[], float] = time.time) -> None:
        self._factory = api_client_factory
        self.request_timeout = float(request_timeout)
        self.clock = clock
        self._api: Any = None
        self._lock = threading.Lock()
        self._random = random.SystemRandom()

    # ----------------------------------------------------------------- requests

    def _client(self) -> Any:
        with self._lock:
            if self._api is None:
                self._api = self._factory()
            return self._api

    @contextmanager
    def _errors(self, where: str) -> Iterator[None]:
        from kubernetes.client.exceptions import ApiException

        try:
            yield
        except BackendError:
            raise
        except ApiException as exc:
            raise api_error(exc.status or 0, exc.body, where) from exc
        except urllib3.exceptions.HTTPError as exc:
            reason = exc.reason if isinstance(exc, urllib3.exceptions.MaxRetryError) and exc.reason else exc
            if isinstance(reason, urllib3.exceptions.TimeoutError):
                raise BackendTimeout(f"{where}: no answer from the API server in {self.request_timeout:g} s") from exc
            raise BackendError(f"{where}: cannot talk to the API server: {one_line(str(reason))}") from exc
        except OSError as exc:
            raise BackendError(f"{where}: cannot talk to the API server: {one_line(str(exc))}") from exc

    def _request(self, method: str, path: str, where: str, *, namespace: str, name: str | None = None,
                 query: list[tuple[str, str]] | None = None, body: Any = None,
                 content_type: str = "application/json", accept: str = "application/json",
                 timeout: tuple[float, float | None] | None = None) -> Any:
        """One request; the raw urllib3 answer (the caller reads and releases it)."""
        api = self._client()
        params = {"namespace": namespace}
        if name is not None:
            if "{name}" not in path:
                path += "/{name}"
            params["name"] = name
        with self._errors(where):
            return api.call_api(
                path, method,
                path_params=params,
                query_params=list(query or []),
                header_params={"Accept": accept, "Content-Type": content_type},
                body=body,
                auth_settings=["BearerToken"],
                _preload_content=False,
                _request_timeout=timeout or (self.request_timeout, self.request_timeout),
            )

    def _json(self, method: str, path: str, where: str, **kwargs: Any) -> Any:
        response = self._request(method, path, where, **kwargs)
        try:
            with self._errors(where):
                data = response.data
        finally:
            response.release_conn()
        try:
            return json.loads(data) if data else {}
        except ValueError:
            raise BackendError(f"{where}: the API server's answer is not JSON") from None

    @staticmethod
    def _workload_path(kind: str) -> str:
        if kind not in WORKLOADS:
            raise BackendError(f"cannot act on a {kind}: only Jobs and CronJobs (and distributed training jobs)")
        return COLLECTIONS[kind]

    # ----------------------------------------------------------------- JobControl

    def submit(self, manifests: list[dict[str, Any]], *, dry_run: bool = False) -> list[str]:
        done: list[str] = []
        owners: dict[tuple[str, str], tuple[str, str]] = {}
        for obj in manifests:
            kind = str(obj.get("kind", ""))
            if kind not in COLLECTIONS:
                what = kind or "object without a kind"
                raise BackendError(f"cannot create a {what}: only Jobs, CronJobs and Services")
            body = copy.deepcopy(obj)
            meta = body.setdefault("metadata", {})
            namespace = str(meta.get("namespace") or "default")
            name = str(meta.get("name") or "")
            owner = owners.get((namespace, name))
            if kind in ("Service", "PodGroup") and owner is not None and not meta.get("ownerReferences"):
                meta["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": owner[0], "name": name, "uid": owner[1]}]
            where = f"{'checking' if dry_run else 'creating'} {kind} {namespace}/{name}"
            try:
                answer = self._json("POST", COLLECTIONS[kind], where, namespace=namespace, body=body,
                                    query=[("dryRun", "All")] if dry_run else None)
            except BackendError as exc:
                if done and not dry_run:
                    raise type(exc)(f"{exc} (created before it: {', '.join(done)})") from exc
                raise
            uid = (answer.get("metadata") or {}).get("uid") if isinstance(answer, Mapping) else None
            if kind in WORKLOADS and uid:
                owners[(namespace, name)] = (kind, str(uid))
            done.append(f"{kind} {namespace}/{name}")
        return done

    def delete(self, kind: str, namespace: str, name: str) -> None:
        body = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}
        self._json("DELETE", self._workload_path(kind), f"deleting {kind} {namespace}/{name}",
                   namespace=namespace, name=name, body=body)

    def suspend(self, kind: str, namespace: str, name: str, suspended: bool) -> None:
        verb = "suspending" if suspended else "resuming"
        self._json("PATCH", self._workload_path(kind), f"{verb} {kind} {namespace}/{name}",
                   namespace=namespace, name=name,
                   body={"spec": {"runPolicy": {"suspend": bool(suspended)}} if kind in RUN_POLICY
                         else {"suspend": bool(suspended)}},
                   content_type="application/merge-patch+json")

    # ----------------------------------------------------------------- QueueControl (Kueue)

    kueue_version: Callable[[], str | None] = staticmethod(lambda: None)  # the job source sets it

    def move_to_queue(self, namespace: str, name: str, queue: str) -> None:
        queue_control.move(self, self.kueue_version(), namespace, name, queue)

    def set_workload_active(self, namespace: str, name: str, active: bool) -> None:
        queue_control.set_active(self, self.kueue_version(), namespace, name, active)

    def trigger(self, namespace: str, cronjob: str) -> str:
        where = f"running CronJob {namespace}/{cronjob} now"
        found = self._json("GET", COLLECTIONS["CronJob"], where, namespace=namespace, name=cronjob)
        if not isinstance(found, Mapping) or not found.get("spec"):
            raise BackendError(f"{where}: the API server sent no CronJob")
        suffix = "".join(self._random.choice(_SUFFIX) for _ in range(5))
        job = manual_job({**found, "metadata": {**found.get("metadata", {}), "namespace": namespace}}, suffix)
        name = job["metadata"]["name"]
        self._json("POST", COLLECTIONS["Job"], f"creating Job {namespace}/{name} from CronJob {cronjob}",
                   namespace=namespace, body=job)
        return str(name)

    def logs(self, namespace: str, pod: str, *, tail_lines: int = 1000, follow: bool = False,
             stop: threading.Event | None = None) -> Iterator[str]:
        where = f"reading the log of pod {namespace}/{pod}"
        query = [("tailLines", str(max(0, int(tail_lines))))]
        if follow:
            query.append(("follow", "true"))
        timeout = (self.request_timeout, None) if follow else (self.request_timeout, self.request_timeout)
        response = self._request("GET", f"{CORE}/pods/{{name}}/log", where, namespace=namespace, name=pod,
                                 query=query, accept="text/plain", timeout=timeout)
        yield from self._lines(response, stop, where)

    def _lines(self, response: Any, stop: threading.Event | None, where: str) -> Iterator[str]:
        done = threading.Event()
        if stop is not None:
            def watch() -> None:
                while not done.is_set():
                    if stop.wait(0.1):
                        _shutdown(response)
                        return

            threading.Thread(target=watch, name="log-stop", daemon=True).start()
        rest = b""
        try:
            with self._errors(where):
                for chunk in response.stream(4096, decode_content=True):
                    if stop is not None and stop.is_set():
                        return
                    rest += chunk
                    *lines, rest = rest.split(b"\n")
                    for line in lines:
                        yield line.decode("utf-8", "replace").rstrip("\r")
            if rest and not (stop is not None and stop.is_set()):
                yield rest.decode("utf-8", "replace").rstrip("\r")
        except BackendError:
            if stop is not None and stop.is_set():
                return
            raise
        finally:
            done.set()
            try:
                response.release_conn()
            except Exception:  # noqa: BLE001 - a shut-down answer may not go back to the pool
                pass

    def describe(self, kind: str, namespace: str, name: str) -> str:
        where = f"describing {kind} {namespace}/{name}"
        obj = self._json("GET", self._workload_path(kind), where, namespace=namespace, name=name)
        if not isinstance(obj, Mapping):
            raise BackendError(f"{where}: the API server sent no object")
        obj = {"apiVersion": "batch/v1", "kind": kind, **obj}
        events = self._events(namespace, (obj.get("metadata") or {}).get("uid"), where)
        if kind == "Job":
            events += self._pod_events(namespace, f"job-name={name}", where)
        return describe_text(obj, events, self.clock())

    def _pod_events(self, namespace: str, selector: str, where: str) -> list[EventLine]:
        """The events of the newest :data:`DESCRIBED_PODS` pods that ``selector`` selects."""
        pods = self._json("GET", f"{CORE}/pods", where, namespace=namespace, query=[("labelSelector", selector)])
        items = [p for p in (pods.get("items") or []) if isinstance(p, Mapping)]
        items.sort(key=lambda p: parse_time((p.get("metadata") or {}).get("creationTimestamp")) or 0.0)
        events: list[EventLine] = []
        for pod in items[-DESCRIBED_PODS:]:
            meta = pod.get("metadata") or {}
            events += self._events(namespace, meta.get("uid"), where, about=f"pod/{meta.get('name', '')}")
        return events

    def _events(self, namespace: str, uid: Any, where: str, about: str = "") -> list[EventLine]:
        if not uid:
            return []
        found = self._json("GET", f"{CORE}/events", where, namespace=namespace,
                           query=[("fieldSelector", f"involvedObject.uid={uid}")])
        return [_event_line(e, about) for e in (found.get("items") or []) if isinstance(e, Mapping)]

    def review(self, verb: str, namespace: str, resource: str = "jobs", group: str = "batch") -> tuple[bool, str]:
        """Whether the credentials in use may ``verb`` ``group/resource`` in ``namespace``, asked
        with a ``SelfSubjectAccessReview``: ``(allowed, the authorizer's reason)``."""
        where = f"asking the cluster whether it may {verb} {resource} in {namespace}"
        answer = self._json("POST", access_review.REVIEWS, where, namespace=namespace,
                            body=access_review.review_body(verb, namespace, resource, group))
        return access_review.review_answer(answer, where)

    def identity(self) -> tuple[str, tuple[str, ...]] | None:
        """The user and groups the API server authenticates these credentials as, asked with a
        ``SelfSubjectReview``; None when the server has no such API (404, before 1.28)."""
        where = "asking the cluster who these credentials are"
        try:
            answer = self._json("POST", identity.REVIEWS, where, namespace="", body=dict(identity.REVIEW))
        except BackendError as exc:
            if getattr(exc, "status", None) == 404:
                return None
            raise
        return identity.review_user(answer, where)

    def close(self) -> None:
        """Nothing to release: the client belongs to whoever made it."""
