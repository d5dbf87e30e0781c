"""Queue positions from Kueue's visibility API (``visibility.kueue.x-k8s.io``), where it is served.

Kueue's on-demand visibility server lists a ClusterQueue's pending Workloads in the order Kueue
will try them (``positionInClusterQueue``, 0 first): its own order, which the console's estimate
(priority, then age) can only approach, since Kueue also orders by the time a preempted Workload
was evicted and by its queueing strategy. A console over the whole cluster asks per ClusterQueue
(``clusterqueues/NAME/pendingworkloads``); one over some namespaces asks per LocalQueue of those
namespaces (``namespaces/NS/localqueues/NAME/pendingworkloads``: what a batch user may read),
whose items carry the ClusterQueue position too. Only the queues jobs wait in for quota are
asked, at most every :data:`POSITIONS_S` seconds; a refusal (403) or a missing API (404) is
logged once and leaves the estimate, until discovery is asked again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from gpuconsole.backends.base import BackendError
from gpuconsole.backends.kube.client import http_status
from gpuconsole.model import Job, WaitingFor

log = logging.getLogger(__name__)

VISIBILITY_GROUP = "visibility.kueue.x-k8s.io"
VISIBILITY_VERSIONS = ("v1beta2", "v1beta1")  # the newest first, as Kueue serves them
POSITIONS_S = 5.0  # the API computes each answer on demand: not asked at every poll
LIMIT = 1000  # the API's own default page

# ClusterQueue → {(namespace, Workload name): position, 1 first}
Positions = dict[str, dict[tuple[str, str], int]]


def positions_of(answer: Any) -> dict[tuple[str, str], int]:
    """The ``PendingWorkloadsSummary``'s positions in the ClusterQueue (1 first); an item without
    a name or a whole position is left out."""
    items = answer.get("items") if isinstance(answer, Mapping) else None
    found: dict[tuple[str, str], int] = {}
    for item in items if isinstance(items, list) else ():
        if not isinstance(item, Mapping):
            continue
        meta = item.get("metadata") if isinstance(item.get("metadata"), Mapping) else item  # v1beta2 inlines it
        name, namespace = meta.get("name"), meta.get("namespace")
        position = item.get("positionInClusterQueue")
        if isinstance(name, str) and isinstance(namespace, str) and isinstance(position, int) and position >= 0:
            found[(namespace, name)] = position + 1
    return found


def asked(jobs: Iterable[Job], namespaces: tuple[str, ...]) -> list[tuple[str, str]]:
    """``(ClusterQueue, path)`` of each answer to ask for: the queues jobs wait in for quota, per
    ClusterQueue, or per LocalQueue when the console watches only some namespaces."""
    paths: dict[str, str] = {}
    for job in jobs:
        if job.waiting_for is not WaitingFor.QUOTA or not job.cluster_queue:
            continue
        if namespaces:
            if job.queue:
                paths.setdefault(f"namespaces/{job.namespace}/localqueues/{job.queue}/pendingworkloads", job.cluster_queue)
        else:
            paths.setdefault(f"clusterqueues/{job.cluster_queue}/pendingworkloads", job.cluster_queue)
    return [(cluster_queue, path) for path, cluster_queue in paths.items()]


class PositionReader:
    """The positions Kueue's visibility API gave, kept between its reads.

    Args:
        clock: ``time.monotonic`` or a stand-in.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.positions: Positions = {}
        self._read_at: float | None = None
        self._refused = False

    def forget_refusal(self) -> None:
        """After a new discovery: ask again."""
        self._refused = False

    def due(self) -> bool:
        return not self._refused and (self._read_at is None or self.clock() - self._read_at >= POSITIONS_S)

    def read(self, get: Callable[[str], Any], jobs: Iterable[Job], namespaces: tuple[str, ...]) -> bool:
        """Ask for the pending Workloads of every queue a job waits in for quota (``get`` takes
        the path under the API's group version and returns the decoded answer, raising
        :class:`BackendError`); whether the positions changed. A failure keeps what was known;
        a 403 or 404 stops the asking."""
        self._read_at = self.clock()
        found: Positions = {}
        for cluster_queue, path in asked(jobs, namespaces):
            try:
                answer = get(f"{path}?limit={LIMIT}")
            except BackendError as exc:
                if http_status(exc) in (403, 404):
                    log.warning("Kueue's visibility API is not readable (%s); queue positions are estimated", exc)
                    self._refused = True
                    found = {}
                    break
                log.info("Kueue's visibility API: %s", exc)
                return False
            found.setdefault(cluster_queue, {}).update(positions_of(answer))
        changed = found != self.positions
        self.positions = found
        return changed
