"""What the cluster lets this login do to jobs: asked of the cluster, kept a minute.

Kubernetes actions run with the login's own credentials, so the cluster's authorizer (RBAC) is
the guard that holds, whatever gpuconsole shows. The console asks it beforehand, with a
``SelfSubjectAccessReview`` per namespace and verb, only to dim the keys it would refuse and say
why; the answers are kept :data:`CACHE_S` seconds, so moving along the job queue costs no
request. The users table's namespaces for developers stay a second, local limit (the guard's).

:meth:`ClusterPermissions.why_not` reads the kept answers only and never blocks (the UI asks it
while drawing the footer); :meth:`ClusterPermissions.refresh` asks the cluster (from a worker).
:meth:`ClusterPermissions.job_permissions` (and :func:`job_permissions`, for a command without a
console) is the JSON-able summary of one namespace, for ``access whoami``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpuconsole.backends.base import AccessReview, BackendError, one_line
from gpuconsole.core.ops.actions import ActionKind

CACHE_S = 60.0
JOB_VERBS = ("create", "delete", "patch", "list")
# The verb on ``jobs`` each job action needs (suspend and resume are patches; a trigger creates a Job).
VERB_OF = {
    ActionKind.SUBMIT_JOB: "create",
    ActionKind.TRIGGER_CRONJOB: "create",
    ActionKind.DELETE_JOB: "delete",
    ActionKind.SUSPEND_JOB: "patch",
    ActionKind.SUSPEND_CRONJOB: "patch",
    ActionKind.RESUME_JOB: "patch",
}
NO_RBAC = "this job source has no cluster to ask (demo or no Kubernetes)"


@dataclass(frozen=True, slots=True)
class ClusterAnswer:
    """The cluster's answer for one verb in one namespace.

    ``allowed`` is None when it could not be asked (no cluster, or the review failed): the
    console then dims nothing and the cluster still decides when the action is sent.
    """

    allowed: bool | None
    reason: str
    at: float


class ClusterPermissions:
    """The cluster's answers about the jobs of each namespace, asked on demand and kept a minute.

    Args:
        control: returns the job source's control (the Kubernetes adapter's offers ``review``);
            answers are kept per control, so a context switch asks again.
        clock: for the age of the answers.
        ttl: seconds an answer is kept.
    """

    def __init__(self, control: Callable[[], Any], clock: Callable[[], float] = time.time,
                 ttl: float = CACHE_S) -> None:
        self._control = control
        self.clock = clock
        self.ttl = ttl
        self._answers: dict[tuple[int, str, str], ClusterAnswer] = {}
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ reading the kept answers
    def known(self, namespace: str, verb: str) -> ClusterAnswer | None:
        """The kept answer for ``verb`` on jobs in ``namespace`` if it is fresh; never blocks."""
        with self._lock:
            answer = self._answers.get((id(self._control()), namespace, verb))
        if answer is None or self.clock() - answer.at >= self.ttl:
            return None
        return answer

    def needs_asking(self, namespace: str) -> bool:
        """Whether some verb of ``namespace`` has no fresh answer."""
        return any(self.known(namespace, verb) is None for verb in JOB_VERBS)

    def why_not(self, kind: ActionKind, namespace: str) -> str | None:
        """Why the cluster refuses ``kind`` in ``namespace``, from the kept answers only (None:
        allowed, not a job action, or not known yet)."""
        verb = VERB_OF.get(kind)
        answer = self.known(namespace, verb) if verb else None
        if answer is None or answer.allowed is not False:
            return None
        return refusal(verb or "", namespace, answer.reason)

    # ------------------------------------------------------------------ asking the cluster
    def ask(self, namespace: str, verb: str) -> ClusterAnswer:
        """The cluster's answer for ``verb`` on jobs in ``namespace`` (kept, or asked now: blocks)."""
        kept = self.known(namespace, verb)
        if kept is not None:
            return kept
        control = self._control()
        if not isinstance(control, AccessReview):
            answer = ClusterAnswer(None, NO_RBAC, self.clock())
        else:
            try:
                allowed, reason = control.review(verb, namespace)
                answer = ClusterAnswer(bool(allowed), str(reason), self.clock())
            except BackendError as exc:
                answer = ClusterAnswer(None, f"could not ask the cluster: {one_line(exc)}", self.clock())
        with self._lock:
            self._answers[(id(control), namespace, verb)] = answer
        return answer

    def refresh(self, namespace: str) -> None:
        """Ask about every job verb of ``namespace`` that has no fresh answer (blocks)."""
        for verb in JOB_VERBS:
            self.ask(namespace, verb)

    def job_permissions(self, namespace: str) -> dict[str, dict[str, Any]]:
        """``{verb: {"allowed": True | False | None, "reason": "…"}}`` for the jobs of
        ``namespace`` (asks what is not kept: blocks)."""
        out: dict[str, dict[str, Any]] = {}
        for verb in JOB_VERBS:
            answer = self.ask(namespace, verb)
            reason = refusal(verb, namespace, answer.reason) if answer.allowed is False else answer.reason
            out[verb] = {"allowed": answer.allowed, "reason": reason}
        return out


def job_permissions(namespace: str, kubeconfig: str | None = None,
                    context: str | None = None) -> dict[str, dict[str, Any]]:
    """What the kubeconfig's user may do to the jobs of ``namespace``, for a command that has no
    console (``access whoami``): :meth:`ClusterPermissions.job_permissions` over a connection of
    its own, closed afterwards. Without a cluster every verb is ``None`` with the reason."""
    from gpuconsole.backends.registry import cluster_session  # the kubernetes client is imported only here

    source = cluster_session(kubeconfig, context)
    try:
        return ClusterPermissions(lambda: source.job_control).job_permissions(namespace)
    finally:
        source.close()


def refusal(verb: str, namespace: str, reason: str) -> str:
    """``denied by the cluster: RBAC does not let this login delete jobs in team-b`` (with the
    authorizer's own reason when it gave one)."""
    text = f"denied by the cluster: RBAC does not let this login {verb} jobs in {namespace or 'every namespace'}"
    return f"{text} ({reason})" if reason else text
