"""The Kubernetes adapter: Jobs, CronJobs, Pods, Nodes and Events through the official client.

Modules (private to this folder unless named below):
    source: :class:`KubeJobs`, the job backend (lists, watches, and the kubeconfig's contexts
        and their users).
    mapping: API objects translated into the model, and why a job is pending.
    schema: typed msgspec decoding of list pages (only the fields the mapping reads).
    control: submit, delete, suspend and trigger, sent to the API server.
    credentials: when the kubeconfig's client certificate or token expires.
    describe: a job described in words, as ``kubectl describe`` would.
    access_review: the SelfSubjectAccessReview that asks what the credentials may do.
    identity: the SelfSubjectReview that asks who the credentials are.
    lease: leadership through a coordination.k8s.io/v1 Lease (the autopilot's replicas).

Other layers use only the names below, imported from this package; each is loaded on first use.
"""

from __future__ import annotations

from gpuconsole.backends import lazy_face

__all__, __getattr__ = lazy_face(__name__, {
    "KubeJobs": "source",
    "KubeLease": "lease",
    "contexts": "source",
    "credential_expiries": "credentials",
    "kubeconfig_user": "source",
})
