"""A :class:`~gpuconsole.core.ops.job_request.JobRequest` checked field by field, and read from a
form's text fields; every message is one line, keyed by the field it is about."""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping

from gpuconsole.core.money.budgets import namespace_problem
from gpuconsole.core.ops.queue_manifest import parse_choice, queue_problem
from gpuconsole.core.ops.job_request import (
    CONCURRENCY_POLICIES,
    CRONJOB_NAME_MAX,
    DRIVER_CAPABILITIES,
    JOB_NAME_MAX,
    MAX_BACKOFF,
    MAX_GPUS,
    MAX_MIG_DEVICES,
    MAX_WORKERS,
    MEDIA_PROFILES,
    MIG_PROFILES,
    NCCL_DEBUG_LEVELS,
    PRESETS,
    TORCHRUN_VARS,
    JobRequest,
    cron_expression,
)

_RFC1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
_CPU = re.compile(r"^(?:\d+(?:\.\d{1,3})?|\.\d{1,3}|\d+m)$")
_MEMORY = re.compile(r"^(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$")
_MEMORY_FACTORS = {None: 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
                   "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
# An image reference as the distribution spec writes it: [registry[:port]/]path[:tag][@digest].
_HOST = r"(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)(?:\.(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?))*(?::[0-9]+)?"
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_QUEUE = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")  # a LocalQueue's name (a DNS subdomain)
_IMAGE = re.compile(
    rf"^(?:{_HOST}/)?{_COMPONENT}(?:/{_COMPONENT})*(?::[\w][\w.-]{{0,127}})?"
    r"(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?$"
)



def memory_bytes(text: str) -> float:
    """Bytes of a memory quantity. Raises ValueError when it is not one."""
    match = _MEMORY.match(text.strip())
    if match is None:
        raise ValueError(text)
    return float(match.group(1)) * _MEMORY_FACTORS[match.group(2)]


def _name_problem(req: JobRequest) -> str | None:
    name = req.name
    limit = CRONJOB_NAME_MAX if req.kind == "CronJob" else JOB_NAME_MAX
    if not name:
        return "required"
    if not _RFC1123_LABEL.match(name):
        return "only lowercase a-z, 0-9 and '-' (not at either end)"
    if len(name) > limit:
        why = " (Kubernetes adds 11 to name each run)" if req.kind == "CronJob" else ""
        return f"at most {limit} characters for a {req.kind}{why}, this is {len(name)}"
    if req.distributed:
        if not name[0].isalpha():
            return "a distributed job's name also names its Service: start it with a letter"
        host = len(f"{name}-{req.workers - 1}")
        if host > JOB_NAME_MAX:
            return f"too long for pod host names ({name}-{req.workers - 1} is {host} > {JOB_NAME_MAX})"
    return None


def _preset_problem(name: str, value: str) -> str | None:
    if name == "NVIDIA_DRIVER_CAPABILITIES":
        words = [w.strip() for w in value.split(",")]
        bad = [w for w in words if w not in DRIVER_CAPABILITIES]
        if bad:
            return f"unknown capability {bad[0]!r}: use compute,utility (add video for NVDEC/NVENC)"
    elif name in ("NVIDIA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"):
        if name == "NVIDIA_VISIBLE_DEVICES" and value in ("all", "none", "void"):
            return None
        items = [w.strip() for w in value.split(",")]
        if not all(w.isdigit() or w.startswith(("GPU-", "MIG-")) for w in items):
            more = "all, none, " if name == "NVIDIA_VISIBLE_DEVICES" else ""
            return f"{more}or GPU indexes / UUIDs separated by commas, e.g. 0,1"
    elif name == "NCCL_DEBUG":
        if value.upper() not in NCCL_DEBUG_LEVELS:
            return f"one of {', '.join(NCCL_DEBUG_LEVELS)}"
    elif name == "NCCL_IB_DISABLE":
        if value not in ("0", "1"):
            return "1 (use sockets, no InfiniBand) or 0"
    elif name == "NCCL_SOCKET_IFNAME":
        if not re.match(r"^[\^=]?[A-Za-z0-9_.:-]+(,[A-Za-z0-9_.:-]+)*$", value):
            return "interface names separated by commas, e.g. eth0 or ^lo,docker0"
    else:
        return f"not a preset: one of {', '.join(PRESETS)}"
    return None


def validate(req: JobRequest) -> dict[str, str]:
    """What is wrong with ``req``: ``{field: one-line message}`` in the form's order; empty when fine.

    Fields are the :class:`JobRequest` attribute names, ``env:<NAME>`` for a preset.
    """
    problems: dict[str, str] = {}

    def check(field: str, message: str | None) -> None:
        if message:
            problems.setdefault(field, message)

    check("name", _name_problem(req))
    if (problem := namespace_problem(req.namespace)) is not None:
        check("namespace", problem)
    if req.queue and not _QUEUE.match(req.queue):
        check("queue", "not a LocalQueue name: lower-case letters, digits, '-' and '.', like team-a")
    check("queue", queue_problem(req))
    if not req.image.strip():
        check("image", "required")
    elif not _IMAGE.match(req.image.strip()) or len(req.image) > 255:
        check("image", "not an image reference like nvcr.io/nvidia/pytorch:24.10-py3")
    if isinstance(req.command, str):
        if "\x00" in req.command:
            check("command", "contains a NUL character")
    elif any(not isinstance(word, str) for word in req.command):
        check("command", "every word of a command list must be a string")
    if not 1 <= req.workers <= MAX_WORKERS:
        check("workers", f"between 1 and {MAX_WORKERS} pods")
    if req.mig_profile:
        if req.mig_profile not in MIG_PROFILES | MEDIA_PROFILES:
            check("mig_profile", "not a MIG profile: e.g. 1g.10gb, 3g.40gb")
        if not 1 <= req.gpus <= MAX_MIG_DEVICES:
            check("gpus", f"with a MIG profile: 1 to {MAX_MIG_DEVICES} MIG devices per pod")
    elif not 0 <= req.gpus <= MAX_GPUS:
        check("gpus", f"between 0 and {MAX_GPUS} GPUs per pod")
    if req.cpu and (not _CPU.match(req.cpu) or float(req.cpu.rstrip("m") or 0) <= 0):
        check("cpu", 'not a CPU amount: like "8", "0.5" or "500m"')
    if req.memory:
        try:
            size = memory_bytes(req.memory)
        except ValueError:
            check("memory", 'not a memory amount: like "64Gi" or "512Mi"')
        else:
            if size <= 0:
                check("memory", "must be more than 0")
            elif size < 2**20:
                check("memory", f"{req.memory} bytes is too little: did you mean {req.memory}Gi?")
    if req.owner and (len(req.owner) > 63 or not _LABEL_VALUE.match(req.owner)):
        check("owner", "a label value: letters, digits, '-', '_' and '.', at most 63")
    for label, value in req.labels + req.node_selector:
        if len(value) > 63 or not _LABEL_VALUE.match(value):
            check("labels", f"{label}={value!r} is not a label value")
    if req.schedule.strip():
        try:
            cron_expression(req.schedule)
        except ValueError as exc:
            check("schedule", str(exc))
    if req.concurrency_policy not in CONCURRENCY_POLICIES:
        check("concurrency_policy", f"one of {', '.join(CONCURRENCY_POLICIES)}")
    if not 0 <= req.backoff_limit <= MAX_BACKOFF:
        check("backoff_limit", f"between 0 and {MAX_BACKOFF} retries")
    if req.active_deadline_seconds is not None and req.active_deadline_seconds <= 0:
        check("active_deadline_seconds", "more than 0 seconds, or empty for no deadline")
    if req.ttl_seconds_after_finished is not None and req.ttl_seconds_after_finished < 0:
        check("ttl_seconds_after_finished", "0 or more seconds, or empty to keep finished jobs")
    seen: set[str] = set()
    for name, value in req.presets:
        if value:
            check(f"env:{name}", _preset_problem(name, value))
            seen.add(name)
    reserved = set(TORCHRUN_VARS) if req.distributed else set()
    for name, _value in req.env:
        if not _ENV_NAME.match(name):
            check("env", f"{name!r} is not a variable name")
        elif name in seen:
            check("env", f"{name} is set twice")
        elif name in reserved:
            check("env", f"{name} is set for distributed training already")
        seen.add(name)
    return problems


# --------------------------------------------------------------------------- the form


def parse_command(text: str) -> tuple[str, ...] | str:
    """A form's command: a JSON list (``["python", "train.py"]``) or a shell line.

    Raises:
        ValueError: it starts like a JSON list but is not a list of strings.
    """
    text = text.strip()
    if not text.startswith("["):
        return text
    try:
        words = json.loads(text)
    except ValueError:
        raise ValueError('a list is JSON: ["python", "train.py"]') from None
    if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
        raise ValueError('a list is JSON strings: ["python", "train.py"]')
    return tuple(words)


def parse_env(text: str) -> tuple[tuple[str, str], ...]:
    """``KEY=VALUE`` pairs separated by spaces (shell quoting for values with spaces).

    Raises:
        ValueError: a word without ``=`` or unbalanced quotes.
    """
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise ValueError(f"cannot split: {exc}") from None
    pairs = []
    for word in words:
        name, sep, value = word.partition("=")
        if not sep or not name:
            raise ValueError(f"{word!r} is not KEY=VALUE")
        pairs.append((name, value))
    return tuple(pairs)


def from_form(values: Mapping[str, str]) -> tuple[JobRequest, dict[str, str]]:
    """A request from a form's text fields (keyed like :func:`validate`'s fields), and what
    could not be read. A field that cannot be read keeps its default in the request."""
    problems: dict[str, str] = {}

    def text(field: str, default: str = "") -> str:
        return values.get(field, default).strip()

    def number(field: str) -> int | None:
        words = text(field).replace(",", "").replace("_", "")
        if not words:
            return None
        try:
            return int(words)
        except ValueError:
            problems[field] = "not a whole number"
            return None

    def whole(field: str, default: int) -> int:
        value = number(field)
        if value is None:
            problems.setdefault(field, "required")
            return default
        return value

    command: tuple[str, ...] | str = ""
    try:
        command = parse_command(values.get("command", ""))
    except ValueError as exc:
        problems["command"] = str(exc)
    env: tuple[tuple[str, str], ...] = ()
    try:
        env = parse_env(values.get("env", ""))
    except ValueError as exc:
        problems["env"] = str(exc)
    queue, volcano_queue = parse_choice(values.get("queue", ""))
    req = JobRequest(
        name=text("name"),
        namespace=text("namespace"),
        image=text("image"),
        command=command,
        gpus=whole("gpus", 1),
        mig_profile=text("mig_profile"),
        cpu=text("cpu"),
        memory=text("memory"),
        presets=tuple((p, text(f"env:{p}")) for p in PRESETS if text(f"env:{p}")),
        env=env,
        workers=whole("workers", 1),
        backoff_limit=whole("backoff_limit", 2),
        active_deadline_seconds=number("active_deadline_seconds"),
        ttl_seconds_after_finished=number("ttl_seconds_after_finished"),
        schedule=" ".join(values.get("schedule", "").split()),
        concurrency_policy=text("concurrency_policy", "Forbid") or "Forbid",
        owner=text("owner"),
        queue=queue,
        volcano_queue=volcano_queue,
    )
    return req, problems
