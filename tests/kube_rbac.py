"""The Kubernetes API test server with authorization: RBAC rules per bearer token.

:class:`RbacApiServer` is the :class:`~tests.kube_server.KubeApiServer` with what an RBAC-enabled
API server adds, in the real API's shapes:

* ``POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews`` answers whether the token's
  user may do a verb on a resource in a namespace (``status.allowed``, and ``status.reason``
  naming the binding that allowed it, empty on a refusal, as RBAC answers);
* any other request a token's rules do not allow is answered ``403 Forbidden`` with the
  ``Status`` object the API server writes (``jobs.batch "x" is forbidden: User "alice" cannot
  delete resource "jobs" in API group "batch" in the namespace "team-a"``).

Rules: :meth:`RbacApiServer.grant` gives a token's user verbs on resources in a namespace
(``"*"``: every namespace and the cluster scope). A token with no rules at all is unrestricted,
as on the plain test server.

Fixture: ``rbac_kube`` runs one on a free 127.0.0.1 port, with a kubeconfig whose one context
uses :data:`DEV_TOKEN`, and stops it afterwards.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from tests.kube_server import KubeApiServer, Request, _Answer, _send_json, use_kubeconfig, write_kubeconfig

DEV_TOKEN = "gpuconsole-dev-token"
DEV_USER = "alice"
REVIEWS = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
READ = ("get", "list", "watch")
WRITE = ("create", "delete", "patch", "update")
EVERY_RESOURCE = ("jobs", "cronjobs", "pods", "pods/log", "nodes", "events", "services")
CORE_GROUP = {"pods", "pods/log", "nodes", "events", "services"}


@dataclass
class Subject:
    user: str
    rules: dict[str, dict[str, set[str]]] = field(default_factory=dict)  # namespace → resource → verbs
    bindings: dict[str, str] = field(default_factory=dict)  # namespace → "RoleBinding \"x\" of Role \"y\""

    def allows(self, verb: str, resource: str, namespace: str | None) -> str | None:
        """The binding that allows it, or None."""
        for where in ((namespace, "*") if namespace else ("*",)):
            if verb in self.rules.get(where or "", {}).get(resource, set()):
                return self.bindings.get(where or "", "")
        return None


class RbacApiServer(KubeApiServer):
    """The test API server, authorizing each request by its token's rules."""

    def __init__(self) -> None:
        super().__init__()
        self.subjects: dict[str, Subject] = {}

    def grant(self, token: str, user: str, namespace: str, verbs: tuple[str, ...],
              resources: tuple[str, ...] = ("jobs", "cronjobs")) -> None:
        self.tokens.add(token)
        subject = self.subjects.setdefault(token, Subject(user))
        for resource in resources:
            subject.rules.setdefault(namespace, {}).setdefault(resource, set()).update(verbs)
        kind = "ClusterRoleBinding" if namespace == "*" else "RoleBinding"
        where = "" if namespace == "*" else f"{namespace}/"
        subject.bindings[namespace] = f'{kind} "{where}{user}-jobs" of Role "job-runner" to User "{user}"'

    # ------------------------------------------------------------------ HTTP

    def _route(self, handler: BaseHTTPRequestHandler, request: Request) -> None:
        if request.path == REVIEWS:
            if request.method != "POST":
                raise _Answer(405, f"{request.method} is not supported on selfsubjectaccessreviews")
            _send_json(handler, 201, self._review(request))
            return
        subject = self.subjects.get(request.token or "")
        if subject is not None:
            self._authorize(subject, request)
        super()._route(handler, request)

    def _review(self, request: Request) -> dict[str, Any]:
        body = request.body if isinstance(request.body, dict) else {}
        if body.get("kind") != "SelfSubjectAccessReview" or body.get("apiVersion") != "authorization.k8s.io/v1":
            raise _Answer(400, "the body is not an authorization.k8s.io/v1 SelfSubjectAccessReview")
        attributes = (body.get("spec") or {}).get("resourceAttributes") or {}
        resource = str(attributes.get("resource", ""))
        if attributes.get("subresource"):
            resource += "/" + str(attributes["subresource"])
        subject = self.subjects.get(request.token or "")
        binding = "" if subject is None else subject.allows(str(attributes.get("verb", "")), resource,
                                                            attributes.get("namespace") or None)
        allowed = subject is None or binding is not None
        status = {"allowed": allowed}
        if allowed and binding:
            status["reason"] = f"RBAC: allowed by {binding}"
        return {"kind": "SelfSubjectAccessReview", "apiVersion": "authorization.k8s.io/v1",
                "metadata": {"creationTimestamp": None}, "spec": body.get("spec"), "status": status}

    def _authorize(self, subject: Subject, request: Request) -> None:
        parts = [p for p in request.path.split("/") if p]
        group, rest = ("", parts[2:]) if parts[:2] == ["api", "v1"] else (parts[1] if len(parts) > 1 else "", parts[3:])
        if parts == ["version"] or not rest:
            return
        namespace = None
        if len(rest) >= 3 and rest[0] == "namespaces":
            namespace, rest = rest[1], rest[2:]
        resource = rest[0] + (f"/{rest[2]}" if len(rest) > 2 else "")
        name = rest[1] if len(rest) > 1 else None
        verb = {"POST": "create", "DELETE": "delete", "PATCH": "patch", "PUT": "update"}.get(request.method)
        if verb is None:
            verb = "get" if name else ("watch" if request.watch else "list")
        if subject.allows(verb, resource, namespace) is not None:
            return
        what = f"{resource}.{group}" if group else resource
        what += f' "{name}"' if name and verb != "create" else ""
        scope = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
        message = (f'{what} is forbidden: User "{subject.user}" cannot {verb} resource "{rest[0]}" '
                   f'in API group "{group}" {scope}')
        details: dict[str, Any] = {"group": group, "kind": rest[0]}
        if name:
            details["name"] = name
        raise _Answer(403, message, details=details)


@pytest.fixture
def rbac_kube(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[RbacApiServer]:
    """An RBAC-enabled test server; KUBECONFIG reaches it as :data:`DEV_TOKEN`'s user."""
    server = RbacApiServer().start()
    path = write_kubeconfig(tmp_path / "rbac-kubeconfig", server.url, {"rbac": {"token": DEV_TOKEN}})
    use_kubeconfig(monkeypatch, path)
    try:
        yield server
    finally:
        server.stop()
