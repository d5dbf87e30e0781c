"""The RBAC test API server that also says who a token is: ``SelfSubjectReview``.

:class:`IdentityApiServer` is :class:`~tests.kube_rbac.RbacApiServer` plus
``POST /apis/authentication.k8s.io/v1/selfsubjectreviews``, answered as a Kubernetes 1.28+ API
server does (``201`` with ``status.userInfo``: the token's user and its groups). With
``self_review=False`` it is an older server, which answers that path ``404``.
"""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.kube_rbac import RbacApiServer
from tests.kube_server import Request, _Answer, _send_json

SELF_REVIEWS = "/apis/authentication.k8s.io/v1/selfsubjectreviews"
GROUPS = ["system:authenticated"]


class IdentityApiServer(RbacApiServer):
    """Answers ``SelfSubjectReview`` with the user a token's rules were granted to."""

    def __init__(self, self_review: bool = True) -> None:
        super().__init__()
        self.self_review = self_review

    def _route(self, handler: BaseHTTPRequestHandler, request: Request) -> None:
        if request.path == SELF_REVIEWS:
            if not self.self_review:
                raise _Answer(404, f"the server could not find the requested resource ({request.path})")
            _send_json(handler, 201, self._self_review(request))
            return
        super()._route(handler, request)

    def _self_review(self, request: Request) -> dict[str, Any]:
        body = request.body if isinstance(request.body, dict) else {}
        if request.method != "POST":
            raise _Answer(405, f"{request.method} is not supported on selfsubjectreviews")
        if body.get("kind") != "SelfSubjectReview" or body.get("apiVersion") != "authentication.k8s.io/v1":
            raise _Answer(400, "the body is not an authentication.k8s.io/v1 SelfSubjectReview")
        subject = self.subjects.get(request.token or "")
        user = subject.user if subject is not None else "system:anonymous"
        return {"kind": "SelfSubjectReview", "apiVersion": "authentication.k8s.io/v1",
                "metadata": {"creationTimestamp": None}, "status": {"userInfo": {"username": user, "groups": GROUPS}}}
