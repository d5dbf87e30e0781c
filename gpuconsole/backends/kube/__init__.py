"""The Kubernetes adapter: Jobs, CronJobs, Pods, Nodes and Events through the official client.

Modules (private to this folder unless named below):
    source: :class:`KubeJobs`, the job backend, over kubeconfig (files, contexts, the client's
        making), client (one context's ApiClient and its errors), listing, watch and watched.
    services: :class:`KubeServices`, the inference services backend (GPU Deployments,
        StatefulSets, KServe InferenceServices, their HPAs): service_records, autoscaler and
        service_compose read them, service_control scales, restarts and describes them.
    mapping: API objects translated into the model (records, pending reasons, cron, errors).
    schema: typed msgspec decoding of list pages (only the fields the mapping reads).
    control: submit, delete, suspend and trigger, sent to the API server.
    credentials: when the kubeconfig's client certificate or token expires.
    describe: a job described in words, as ``kubectl describe`` would.
    access_review, identity: what the credentials may do, and who they are.
    lease: leadership through a coordination.k8s.io/v1 Lease (the autopilot's replicas).

Other layers use only the names below, imported from this package; each is loaded on first use.
"""

from __future__ import annotations

from gpuconsole.backends import lazy_face

__all__, __getattr__ = lazy_face(__name__, {
    "KubeJobs": "source",
    "KubeLease": "lease",
    "KubeServices": "services",
    "contexts": "kubeconfig",
    "credential_expiries": "credentials",
    "kubeconfig_user": "kubeconfig",
})
