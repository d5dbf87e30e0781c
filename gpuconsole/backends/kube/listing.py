"""Listing one resource kind: paginated requests read as plain JSON into the mapping's records.

Lists are never read through the client's generated models: those are slow on thousands of
objects, and one object they cannot parse would fail the whole list, where here it is skipped
and logged. A continue token that expires mid-list (410) restarts the list.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from gpuconsole.backends.base import BackendError
from gpuconsole.backends.kube import mapping as kube_mapping
from gpuconsole.backends.kube import schema as kube_schema
from gpuconsole.backends.kube.client import Gone, KubeClient

log = logging.getLogger(__name__)

PAGE_SIZE = 500  # objects per list request (the API server's own default page is unbounded)
# A list's own metadata (resourceVersion, continue) comes before its items; reading the token
# from there lets the next page be fetched while this one is parsed.
_LIST_META = re.compile(rb'^\s*\{(?:\s*"(?:kind|apiVersion)"\s*:\s*"[^"\\]*"\s*,)*\s*"metadata"\s*:\s*\{([^{}]*)\}')
_CONTINUE = re.compile(rb'"continue"\s*:\s*"([^"\\]*)"')
LIST_RESTARTS = 3  # a list whose continue token keeps expiring gives up after this many restarts


@dataclass(frozen=True, slots=True)
class Kind:
    """One resource kind: how it is listed and how an object of it is read."""

    name: str  # in messages: "listing Jobs"
    api: str  # "batch" (BatchV1Api), "core" (CoreV1Api), "apps", "autoscaling" or "custom" (CustomObjectsApi)
    list_all: str
    list_namespaced: str | None  # None: cluster-scoped
    read: Callable[[Mapping[str, Any]], Any]  # raw object → record (None: not one we keep)
    field_selector: str | None = None
    required: bool = True  # False: a 403/404 leaves it empty instead of failing the source
    custom: tuple[str, str, str] | None = None  # a custom resource's (group, version, plural)


JOBS = Kind("Jobs", "batch", "list_job_for_all_namespaces", "list_namespaced_job", kube_mapping.job_record)
CRONJOBS = Kind("CronJobs", "batch", "list_cron_job_for_all_namespaces", "list_namespaced_cron_job",
                kube_mapping.cronjob_record, required=False)
PODS = Kind("Pods", "core", "list_pod_for_all_namespaces", "list_namespaced_pod", kube_mapping.pod_record,
            required=False)
NODES = Kind("Nodes", "core", "list_node", None, kube_mapping.node_record, required=False)
EVENTS = Kind("Events", "core", "list_event_for_all_namespaces", "list_namespaced_event",
              kube_mapping.warning_record, field_selector="type=Warning", required=False)
KINDS: tuple[Kind, ...] = (JOBS, CRONJOBS, PODS, NODES, EVENTS)


def parse_json(text: str | bytes, where: str) -> Any:
    """A JSON answer, or a :class:`BackendError` saying it could not be read ``where``."""
    try:
        return json.loads(text)
    except ValueError as exc:
        raise BackendError(f"unreadable answer {where}: {exc}") from exc


class KubeLister(KubeClient):
    """Lists of the resource kinds in one context, in the namespaces asked for (empty: all).

    Args:
        kubeconfig, context, request_timeout: as for :class:`~gpuconsole.backends.kube.client.KubeClient`.
        namespaces: namespaces to read; empty: all of them.
        page_size: objects per list request.
    """

    def __init__(self, kubeconfig: str | None, context: str | None, namespaces: tuple[str, ...],
                 request_timeout: float, page_size: int) -> None:
        super().__init__(kubeconfig, context, request_timeout)
        self.namespaces = tuple(dict.fromkeys(namespaces))
        self.page_size = max(1, int(page_size))
        self._skipped: dict[tuple[str, str], str] = {}  # (kind, uid) → resourceVersion logged

    def _request(self, kind: Kind, namespace: str | None, where: str, timeout: tuple[float, float],
                 **params: Any) -> Any:
        """One list or watch request of ``kind`` (``timeout``: connect, read); the raw urllib3 response."""
        self._client()
        api = self._apis[kind.api]
        if kind.field_selector:
            params["field_selector"] = kind.field_selector
        args: tuple[str, ...] = ()
        method = kind.list_all
        if namespace is not None and kind.list_namespaced is not None:
            method, args = kind.list_namespaced, (namespace,)
        if kind.custom is not None:
            group, version, plural = kind.custom
            args = (group, version, *args, plural)
        with self._errors(where, timeout[1]):
            return getattr(api, method)(*args, _preload_content=False, _request_timeout=timeout, **params)

    def _fetch(self, kind: Kind, namespace: str | None, where: str, token: str | None) -> bytes:
        """One page of a list, as the bytes the API server sent."""
        response = self._request(kind, namespace, where, (self.request_timeout, self.request_timeout),
                                 limit=self.page_size, _continue=token)
        try:
            with self._errors(where):
                return bytes(response.data)
        finally:
            response.release_conn()

    def _pages(self, kind: Kind, namespace: str | None, where: str) -> Iterator[Mapping[str, Any]]:
        """The pages of one list, each next page requested while the one before is parsed.

        The continue token is read from the page's leading metadata without parsing the rest; when
        it cannot be read that way (or differs from the parsed one) the next page waits instead.
        """
        with ThreadPoolExecutor(1, thread_name_prefix="kube-page") as pool:
            data, token = self._fetch(kind, namespace, where, None), None
            while True:
                ahead = peek_continue(data)
                coming = pool.submit(self._fetch, kind, namespace, where, ahead) if ahead else None
                page = kube_schema.decode_page(kind.name, data) or parse_json(data, where)
                if not isinstance(page, Mapping) or not isinstance(page.get("items", []), list):
                    raise BackendError(f"unreadable answer {where}: not a list")
                yield page
                meta = page.get("metadata")
                token = (meta if isinstance(meta, Mapping) else {}).get("continue") or None
                if token is None:
                    return
                data = coming.result() if coming is not None and token == ahead else self._fetch(kind, namespace, where, token)

    def _list(self, kind: Kind, namespace: str | None) -> tuple[dict[str, Any], str]:
        """Every object of ``kind`` as records by uid, and the list's resourceVersion.

        A continue token that expires between pages restarts the list from the first page (a
        list stitched from two moments could miss or repeat objects).
        """
        where = f"listing {kind.name}" + (f" in {namespace}" if namespace else "")
        for _attempt in range(LIST_RESTARTS + 1):
            records: dict[str, Any] = {}
            first = True
            try:
                for page in self._pages(kind, namespace, where):
                    first = False
                    for obj in page.get("items") or ():
                        record = self._read(kind, obj)
                        if record is not None:
                            records[uid_of(obj)] = record
                    meta = page.get("metadata")
                    meta = meta if isinstance(meta, Mapping) else {}
                    if not meta.get("continue"):
                        return records, str(meta.get("resourceVersion") or "")
            except Gone:
                if first:
                    raise
                log.info("the continue token expired %s; listing again from the start", where)
        raise BackendError(f"the list kept expiring {where} ({LIST_RESTARTS} restarts)")

    def _read(self, kind: Kind, obj: Any) -> Any:
        """``obj`` as a record; ``None`` (logged once per version) when it cannot be read."""
        try:
            return kind.read(obj)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            meta = obj.get("metadata") if isinstance(obj, Mapping) else None
            meta = meta if isinstance(meta, Mapping) else {}
            key, version = (kind.name, str(meta.get("uid"))), str(meta.get("resourceVersion"))
            if self._skipped.get(key) != version:
                self._skipped[key] = version
                log.warning("skipping %s %s: cannot read it (%s: %s)", kind.name[:-1], kube_mapping.describe(obj),
                            type(exc).__name__, exc)
            return None

    def _scopes(self, kind: Kind) -> tuple[str | None, ...]:
        if kind.list_namespaced is None or not self.namespaces:
            return (None,)
        return self.namespaces


def uid_of(obj: Any) -> str:
    """The uid of a listed object that could be read (a decoded structure or plain JSON)."""
    meta = getattr(obj, "metadata", None)
    return meta.uid if isinstance(meta, kube_schema.Metadata) else obj["metadata"]["uid"]


def peek_continue(data: bytes) -> str | None:
    """The continue token in a list's leading metadata, read without parsing the list."""
    head = _LIST_META.match(data[:4096])
    if head is None:
        return None
    token = _CONTINUE.search(head.group(1))
    return token.group(1).decode() if token else None
