"""The parts of Jobs, CronJobs and Pods that gpuconsole reads, as typed structures.

A list of 10,000 Pods is tens of megabytes of JSON, and most of each object (volumes,
environment, probes, managed fields) is never looked at. A page decoded into these structures
skips the rest of every object in C while it is parsed, and the mapping reads attributes instead
of walking dicts.

A page that does not fit (one object with a field of an unexpected type) is decoded as plain
JSON instead and each object converted on its own (:func:`convert`), so an odd object is skipped
alone and never costs the rest of the list.
"""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec
from msgspec import Struct

T = TypeVar("T")


class _Part(Struct, frozen=True, gc=False):
    """Fields absent from the JSON are ``None``, as ``dict.get`` would answer."""


class OwnerReference(_Part):
    kind: Any = None
    name: Any = None
    uid: Any = None
    controller: Any = None


class Metadata(_Part):
    name: str
    uid: str
    namespace: str | None = None
    resourceVersion: str | None = None
    generation: Any = None
    creationTimestamp: str | None = None
    labels: dict[str, Any] | None = None
    annotations: dict[str, Any] | None = None
    ownerReferences: list[OwnerReference] | None = None


class Resources(_Part):
    limits: dict[str, Any] | None = None
    requests: dict[str, Any] | None = None


class Container(_Part):
    image: Any = None
    resources: Resources | None = None


class PodSpec(_Part):
    containers: list[Container] | None = None
    initContainers: list[Container] | None = None
    nodeName: Any = None


class TemplateMetadata(_Part):
    labels: dict[str, Any] | None = None


class PodTemplate(_Part):
    metadata: TemplateMetadata | None = None
    spec: PodSpec | None = None


class JobSpec(_Part):
    parallelism: Any = None
    completions: Any = None
    suspend: Any = None
    template: PodTemplate | None = None


class Condition(_Part):
    type: Any = None
    status: Any = None
    reason: Any = None
    message: Any = None
    lastTransitionTime: Any = None


class JobStatus(_Part):
    conditions: list[Condition] | None = None
    completionTime: Any = None
    startTime: Any = None
    active: Any = None
    ready: Any = None


class Job(_Part):
    metadata: Metadata
    spec: JobSpec | None = None
    status: JobStatus | None = None


class JobTemplate(_Part):
    spec: JobSpec | None = None


class CronJobSpec(_Part):
    schedule: str
    suspend: Any = None
    timeZone: Any = None
    jobTemplate: JobTemplate | None = None


class CronJobStatus(_Part):
    lastScheduleTime: Any = None
    active: list[Any] | None = None


class CronJob(_Part):
    metadata: Metadata
    spec: CronJobSpec
    status: CronJobStatus | None = None


class Waiting(_Part):
    reason: Any = None
    message: Any = None


class ContainerState(_Part):
    waiting: Waiting | None = None


class ContainerStatus(_Part):
    state: ContainerState | None = None
    restartCount: Any = None


class PodStatus(_Part):
    phase: Any = None
    startTime: Any = None
    conditions: list[Condition] | None = None
    containerStatuses: list[ContainerStatus] | None = None


class Pod(_Part):
    metadata: Metadata
    spec: PodSpec | None = None
    status: PodStatus | None = None


EMPTY_JOB_SPEC = JobSpec()
EMPTY_JOB_STATUS = JobStatus()
EMPTY_POD_SPEC = PodSpec()
EMPTY_POD_STATUS = PodStatus()
EMPTY_CRONJOB_STATUS = CronJobStatus()


def _list_of(item: type) -> type:
    return msgspec.defstruct(f"{item.__name__}List", [("metadata", Any, None), ("items", list[item] | None, None)],
                             bases=(_Part,))


_DECODERS = {kind: msgspec.json.Decoder(_list_of(item)) for kind, item in (("Jobs", Job), ("CronJobs", CronJob), ("Pods", Pod))}


def decode_page(kind: str, data: bytes) -> dict[str, Any] | None:
    """One list page of ``kind`` ("Jobs", "CronJobs", "Pods") as ``{"metadata": …, "items":
    [structures]}``; ``None`` when the kind has no structures here or the page does not fit
    them (then decode it as plain JSON and :func:`convert` each object)."""
    decoder = _DECODERS.get(kind)
    if decoder is None:
        return None
    try:
        page = decoder.decode(data)
    except msgspec.MsgspecError:
        return None
    return {"metadata": page.metadata, "items": page.items or []}


def convert(obj: Any, shape: type[T]) -> T:
    """``obj`` (plain JSON: a dict) as the structure ``shape``.

    Raises:
        ValueError: the object does not have that shape (the message says where).
    """
    if type(obj) is shape:
        return obj
    try:
        return msgspec.convert(obj, shape)
    except msgspec.ValidationError as exc:
        raise ValueError(str(exc)) from None
