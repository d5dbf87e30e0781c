"""API discovery: which API group versions the server serves, asked now and then.

``GET /apis`` (a request every user may make) lists the groups with every version each serves;
a kind from a CRD (KServe, the training operators) is read only where its group version is
there, so a cluster without the CRD costs no failing request and no log line. The answer is
asked again every ``every`` seconds, so a CRD installed later is found; a failed discovery keeps
what was known and is asked again sooner.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

from gpuconsole.backends.base import BackendError
from gpuconsole.backends.kube.listing import KubeLister, parse_json

log = logging.getLogger(__name__)

DISCOVERY_S = 300.0  # how often discovery is asked again
DISCOVERY_RETRY_S = 30.0  # how soon a discovery that failed is asked again


def served_versions(discovery: Any) -> frozenset[str]:
    """The ``group/version`` strings of an ``APIGroupList`` (``GET /apis``)."""
    groups = discovery.get("groups") if isinstance(discovery, Mapping) else None
    served = set()
    for group in groups if isinstance(groups, list) else ():
        if not isinstance(group, Mapping) or not isinstance(group.get("name"), str):
            continue
        for version in group.get("versions") or ():
            if isinstance(version, Mapping) and isinstance(version.get("version"), str):
                served.add(f"{group['name']}/{version['version']}")
    return frozenset(served)


class Discovery:
    """The group versions one API server serves, as its last discovery said (None: not known)."""

    def __init__(self, every: float = DISCOVERY_S) -> None:
        self.every = float(every)
        self.served: frozenset[str] | None = None
        self._asked_at: float | None = None

    def refresh(self, lister: KubeLister) -> frozenset[str] | None:
        """Ask ``lister``'s API server again when ``every`` seconds have passed; what is known."""
        now = time.monotonic()
        if self._asked_at is not None and now - self._asked_at < self.every:
            return self.served
        self._asked_at = now
        lister._client()
        where = "asking the API server which API groups it serves"
        timeout = (lister.request_timeout, lister.request_timeout)
        try:
            with lister._errors(where):
                response = lister._apis["apis"].get_api_versions(_preload_content=False, _request_timeout=timeout)
                try:
                    data = bytes(response.data)
                finally:
                    response.release_conn()
            self.served = served_versions(parse_json(data, where))
        except BackendError as exc:
            log.debug("%s", exc)
            self._asked_at = now - self.every + min(self.every, DISCOVERY_RETRY_S)
        return self.served
