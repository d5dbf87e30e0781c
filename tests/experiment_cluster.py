"""The Kubernetes API test server playing the cluster of an experiment: it runs the Jobs the
console submitted, puts their pods on a node and serves the benchmark's log."""

from __future__ import annotations

from typing import Any

from tests.kube_server import KubeApiServer, pod_for, stamp


def submitted(server: KubeApiServer, namespace: str) -> list[dict[str, Any]]:
    """The Jobs posted to ``namespace``, in the order they came."""
    return [r.body for r in server.requested(f"/namespaces/{namespace}/jobs", method="POST")]


def finish(server: KubeApiServer, name: str, namespace: str, *, log: tuple[str, ...] = (), failed: bool = False,
           node: str = "ip-10-0-1-17.ec2.internal", started: float = 1_700_000_000.0,
           seconds: float = 600.0) -> dict[str, Any]:
    """End a Job as its controller would (Complete, or Failed with ``BackoffLimitExceeded``),
    with a pod on ``node`` whose log is ``log``."""
    start, end = stamp(started), stamp(started + seconds)
    condition = "Failed" if failed else "Complete"
    status: dict[str, Any] = {"startTime": start, "completionTime" if not failed else "failedAt": end,
                              "conditions": [{"type": condition, "status": "True", "lastTransitionTime": end,
                                              "reason": "BackoffLimitExceeded" if failed else "Completed"}]}
    status["failed" if failed else "succeeded"] = 1
    job = server.modify("Job", name, namespace, {"status": status})
    pod = pod_for(job, node=node, phase="Failed" if failed else "Succeeded", suffix="x1", created=started - 20)
    server.add(pod)
    server.append_log(namespace, pod["metadata"]["name"], *log)
    server.end_log(namespace, pod["metadata"]["name"])
    return pod


def start(server: KubeApiServer, name: str, namespace: str, *, started: float = 1_700_000_000.0,
          node: str = "ip-10-0-1-17.ec2.internal") -> None:
    """Start a Job: its pod runs on ``node``."""
    job = server.modify("Job", name, namespace, {"status": {"startTime": stamp(started), "active": 1, "ready": 1}})
    server.add(pod_for(job, node=node, phase="Running", suffix="r1", created=started - 20))
