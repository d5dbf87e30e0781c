"""API discovery: which API groups (and versions) the cluster serves, asked once and again rarely.

A source that reads custom resources (KServe's InferenceServices, Kueue's and Volcano's queues)
asks ``GET /apis`` (a request every user may make) before it lists them: a cluster without the
CRD costs no failing request and no log line. Discovery is asked again every ``discovery_every``
seconds, so a CRD installed later is found; one that failed is asked again after
:data:`DISCOVERY_RETRY_S` and keeps what was known meanwhile (the lists say what is wrong; a
timeout fails the poll at once, as the lists would after as long again).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

from gpuconsole.backends.base import BackendError, BackendTimeout
from gpuconsole.backends.kube.listing import PAGE_SIZE, parse_json
from gpuconsole.backends.kube.watch import WATCH_TIMEOUT_S
from gpuconsole.backends.kube.watched import WatchedLister

log = logging.getLogger(__name__)

DISCOVERY_S = 300.0  # how often API discovery is asked again
DISCOVERY_RETRY_S = 30.0  # how soon a discovery that failed is asked again

Groups = dict[str, tuple[str, ...]]  # API group → the versions it serves


def served_groups(discovery: Any) -> Groups:
    """The groups of an ``APIGroupList`` (``GET /apis``) and their versions, preferred first."""
    out: Groups = {}
    groups = discovery.get("groups") if isinstance(discovery, Mapping) else None
    for group in groups if isinstance(groups, list) else ():
        if not isinstance(group, Mapping) or not isinstance(group.get("name"), str):
            continue
        versions = [v.get("version") for v in group.get("versions") or () if isinstance(v, Mapping)]
        preferred = group.get("preferredVersion")
        first = preferred.get("version") if isinstance(preferred, Mapping) else None
        ordered = [first] if isinstance(first, str) and first in versions else []
        out[group["name"]] = tuple(dict.fromkeys([*ordered, *(v for v in versions if isinstance(v, str))]))
    return out


class DiscoveringLister(WatchedLister):
    """A :class:`WatchedLister` whose kinds depend on the API groups the cluster serves.

    Args:
        discovery_every: seconds between two discoveries.
        (the rest): as for :class:`WatchedLister`.
    """

    def __init__(self, kubeconfig: str | None, context: str | None, namespaces: tuple[str, ...], *,
                 request_timeout: float, watch: bool, watch_timeout: int = WATCH_TIMEOUT_S,
                 page_size: int = PAGE_SIZE, discovery_every: float = DISCOVERY_S) -> None:
        super().__init__(kubeconfig, context, namespaces, request_timeout=request_timeout, watch=watch,
                         watch_timeout=watch_timeout, page_size=page_size)
        self.poll_timeout = 2 * self.request_timeout + 2.0  # a discovery, then the first lists
        self.discovery_every = float(discovery_every)
        self.groups: Groups | None = None  # None: not known (not asked yet, or discovery failed)
        self._discovered_at: float | None = None

    def serves(self, group: str, *versions: str) -> str | None | bool:
        """The first of ``versions`` the cluster serves ``group`` at; False: none; None: not known."""
        if self.groups is None:
            return None
        served = self.groups.get(group, ())
        return next((v for v in versions if v in served), False)

    def _discover(self) -> None:
        """Ask API discovery which groups are served, at most every ``discovery_every`` seconds."""
        now = time.monotonic()
        if self._discovered_at is not None and now - self._discovered_at < self.discovery_every:
            return
        self._discovered_at = now
        self._client()
        where = "asking the API server which API groups it serves"
        timeout = (self.request_timeout, self.request_timeout)
        try:
            with self._errors(where):
                response = self._apis["apis"].get_api_versions(_preload_content=False, _request_timeout=timeout)
                try:
                    data = bytes(response.data)
                finally:
                    response.release_conn()
            self.groups = served_groups(parse_json(data, where))
        except BackendError as exc:
            log.debug("%s", exc)
            self._discovered_at = now - self.discovery_every + min(self.discovery_every, DISCOVERY_RETRY_S)
            if isinstance(exc, BackendTimeout):
                raise  # a server that does not answer: the lists would wait as long again
