"""Asking the cluster what the kubeconfig's user may do: ``SelfSubjectAccessReview``.

RBAC (or whatever authorizer the cluster runs) is the guard of a cluster's jobs, not gpuconsole.
A ``SelfSubjectAccessReview`` (``authorization.k8s.io/v1``) asks the API server, as the
credentials in use, whether they may do one verb on one resource in one namespace; it needs no
permission of its own. This module writes the question and reads the answer; the request goes
through :class:`~gpuconsole.backends.kube.control.KubeJobControl`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpuconsole.backends.base import BackendError

REVIEWS = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"


def review_body(verb: str, namespace: str, resource: str, group: str) -> dict[str, Any]:
    """The ``SelfSubjectAccessReview`` asking about ``verb`` on ``group/resource`` in ``namespace``."""
    return {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": {"namespace": namespace, "verb": verb, "group": group,
                                            "resource": resource}}}


def review_answer(answer: Any, where: str) -> tuple[bool, str]:
    """``(allowed, reason)`` from the API server's answer; the reason may be empty (RBAC says
    nothing when it refuses), and names an evaluation error when there was one."""
    status = answer.get("status") if isinstance(answer, Mapping) else None
    if not isinstance(status, Mapping):
        raise BackendError(f"{where}: the API server's answer has no status")
    allowed = bool(status.get("allowed")) and not status.get("denied")
    reason = str(status.get("reason") or status.get("evaluationError") or "")
    return allowed, reason
