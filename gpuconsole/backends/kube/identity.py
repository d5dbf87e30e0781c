"""Who the kubeconfig's credentials are, in the cluster's own words: ``SelfSubjectReview``.

A kubeconfig names its user entry (``users[].name``) as its author chose, which need not be the
name the API server authenticates (a token's ServiceAccount, an OIDC e-mail). The server says
which with a ``SelfSubjectReview`` (``authentication.k8s.io/v1``, Kubernetes 1.28 and later),
which needs no permission of its own; an older server answers 404, and then the kubeconfig's
name is all there is (:func:`~gpuconsole.backends.kube.kubeconfig.kubeconfig_user`). This module
writes the question and reads the answer; the request goes through
:meth:`~gpuconsole.backends.kube.control.KubeJobControl.identity`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpuconsole.backends.base import BackendError

REVIEWS = "/apis/authentication.k8s.io/v1/selfsubjectreviews"
REVIEW = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}


def review_user(answer: Any, where: str) -> tuple[str, tuple[str, ...]]:
    """``(username, groups)`` from the API server's ``SelfSubjectReview`` answer."""
    status = answer.get("status") if isinstance(answer, Mapping) else None
    info = status.get("userInfo") if isinstance(status, Mapping) else None
    if not isinstance(info, Mapping) or not info.get("username"):
        raise BackendError(f"{where}: the API server's answer names no user")
    groups = info.get("groups") or ()
    return str(info["username"]), tuple(str(g) for g in groups if isinstance(g, str))
