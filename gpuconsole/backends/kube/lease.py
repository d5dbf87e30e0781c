"""Leadership through a ``coordination.k8s.io/v1`` Lease, the way client-go's leader election
takes it, and the autopilot's cooldowns kept in the Lease's annotations.

Every :meth:`KubeLease.acquire` reads the Lease. Nobody holds it: create it (a 409 means
another replica was faster). This replica holds it: renew ``renewTime`` with a replace that
carries the read ``resourceVersion``, so a concurrent change makes it fail with 409 instead of
overwriting. Another replica holds it: take over only when its record has not changed for
``lease_s`` seconds of *this* process's clock (as client-go does, so clocks that disagree
between hosts do not matter), again with the read ``resourceVersion``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from gpuconsole.backends.base import BackendError
from gpuconsole.backends.kube.kubeconfig import import_kubernetes
from gpuconsole.backends.kube.source import KubeJobs

LEASE_S = 15
RETRY_S = 2.0  # client-go's retry period: the API server is asked at most this often
SHARED_PREFIX = "autopilot.gpuconsole.io/last-action."  # + rule name: when the rule last acted (POSIX seconds)


def _now_micro() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class KubeLease:
    """One replica's hold on the Lease ``name`` in ``namespace``.

    Args:
        jobs: the job backend whose client (kubeconfig, context, credentials) is used.
        identity: this replica's name, written as ``holderIdentity``.
        lease_s: how long a record that stops changing keeps its holder.
        retry_s: how often the API server is asked at most; in between the last answer stands.
        clock: a monotonic clock (tests may pass their own).
    """

    def __init__(self, jobs: KubeJobs, namespace: str, name: str, identity: str, *, lease_s: int = LEASE_S,
                 retry_s: float = RETRY_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.jobs = jobs
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.lease_s = lease_s
        self.retry_s = min(retry_s, lease_s / 3.0)  # renewed well inside the lease
        self.clock = clock
        self._tried_at: float | None = None
        self._observed: tuple[str, str] | None = None  # (holder, renewTime) last seen
        self._observed_at = 0.0
        self._holder = ""
        self._shared: dict[str, float] = {}  # rule -> last action, as the Lease's annotations say
        self._to_share: dict[str, float] = {}  # written with the next renewal

    def _api(self) -> Any:
        return import_kubernetes().client.CoordinationV1Api(self.jobs._client())

    def _body(self, spec: dict[str, Any], resource_version: str | None = None) -> dict[str, Any]:
        shared = {**self._shared, **self._to_share}
        meta: dict[str, Any] = {"name": self.name, "namespace": self.namespace,
                                "annotations": {f"{SHARED_PREFIX}{rule}": f"{at:.3f}" for rule, at in shared.items()}}
        if resource_version is not None:
            meta["resourceVersion"] = resource_version
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta, "spec": spec}

    def current_holder(self) -> str:
        """Who holds the Lease now, read without taking it: "" when nobody does, or its holder
        stopped renewing it. Raises :class:`BackendError` when the API server cannot be asked."""
        api = self._api()
        try:
            with self.jobs._errors(f"reading the Lease {self.namespace}/{self.name}"):
                lease = api.read_namespaced_lease(self.name, self.namespace, _request_timeout=self.jobs.request_timeout)
        except BackendError as exc:
            if getattr(exc, "status", None) == 404:
                return ""
            raise
        spec = lease.spec
        holder = spec.holder_identity or ""
        duration = spec.lease_duration_seconds or self.lease_s
        if holder and spec.renew_time is not None and spec.renew_time.timestamp() + duration < time.time():
            return ""  # its holder stopped renewing it
        return holder

    def acquire(self) -> bool:
        """Take or renew the Lease; True while this replica holds it. Raises :class:`BackendError`
        when the API server cannot be asked (the caller then acts on nothing)."""
        now_s = self.clock()
        if self._tried_at is not None and now_s - self._tried_at < self.retry_s and not self._to_share:
            return self._holder == self.identity
        self._tried_at = now_s
        api = self._api()
        k8s = import_kubernetes()
        where = f"for the Lease {self.namespace}/{self.name}"
        now = _now_micro()
        mine = {"holderIdentity": self.identity, "leaseDurationSeconds": self.lease_s, "renewTime": now}
        try:
            with self.jobs._errors(where):
                lease = api.read_namespaced_lease(self.name, self.namespace, _request_timeout=self.jobs.request_timeout)
        except BackendError as exc:
            if getattr(exc, "status", None) != 404:
                raise
            return self._write(lambda: api.create_namespaced_lease(
                self.namespace, self._body({**mine, "acquireTime": now, "leaseTransitions": 0}),
                _request_timeout=self.jobs.request_timeout), k8s, where)
        self._read_shared(lease)
        spec = lease.spec
        holder = spec.holder_identity or ""
        renewed = str(spec.renew_time or "")
        record = (holder, renewed)
        if record != self._observed:
            self._observed, self._observed_at = record, self.clock()
        self._holder = holder
        duration = spec.lease_duration_seconds or self.lease_s
        version = lease.metadata.resource_version
        if holder == self.identity:
            acquired = spec.acquire_time.strftime("%Y-%m-%dT%H:%M:%S.%fZ") if spec.acquire_time else now
            body = {**mine, "acquireTime": acquired, "leaseTransitions": spec.lease_transitions or 0}
        elif holder and self.clock() < self._observed_at + duration:
            return False  # another replica holds it and renews it
        else:
            body = {**mine, "acquireTime": now, "leaseTransitions": (spec.lease_transitions or 0) + 1}
        return self._write(lambda: api.replace_namespaced_lease(
            self.name, self.namespace, self._body(body, version), _request_timeout=self.jobs.request_timeout), k8s, where)

    def _write(self, call: Callable[[], Any], k8s: Any, where: str) -> bool:
        try:
            with self.jobs._errors(where):
                call()
        except BackendError as exc:
            if getattr(exc, "status", None) == 409:  # someone else wrote first: not ours this time
                return False
            raise
        self._holder = self.identity
        self._observed = None
        self._shared.update(self._to_share)
        self._to_share.clear()
        return True

    def _read_shared(self, lease: Any) -> None:
        for key, value in (lease.metadata.annotations or {}).items():
            if key.startswith(SHARED_PREFIX):
                try:
                    self._shared[key[len(SHARED_PREFIX):]] = max(float(value), self._shared.get(key[len(SHARED_PREFIX):], 0.0))
                except ValueError:
                    continue  # an annotation someone else wrote: not ours to read

    def shared(self) -> dict[str, float]:
        """When each rule last acted, as the Lease says: a replica that takes over keeps the
        cooldowns its predecessor started, though their databases differ."""
        return dict(self._shared)

    def share(self, rule: str, at: float) -> None:
        """Record that ``rule`` acted at ``at``; written with the next renewal."""
        self._to_share[rule] = at

    def holder(self) -> str:
        return self._holder

    def release(self) -> None:
        """Give the Lease up on a clean stop, so a standby takes it at its next try."""
        if self._holder != self.identity:
            return
        api = self._api()
        where = f"releasing the Lease {self.namespace}/{self.name}"
        try:
            with self.jobs._errors(where):
                lease = api.read_namespaced_lease(self.name, self.namespace, _request_timeout=self.jobs.request_timeout)
                if lease.spec.holder_identity == self.identity:
                    body = self._body({"holderIdentity": "", "leaseDurationSeconds": 1, "renewTime": _now_micro(),
                                       "leaseTransitions": lease.spec.lease_transitions or 0},
                                      lease.metadata.resource_version)
                    api.replace_namespaced_lease(self.name, self.namespace, body, _request_timeout=self.jobs.request_timeout)
        except BackendError:
            pass  # the Lease then expires by itself
        self._holder = ""
