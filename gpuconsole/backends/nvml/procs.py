"""GPU processes: who they are (psutil), what pod and container they run in (their cgroup), and
how busy they keep the SMs (NVML's per-process samples).

NVML only knows a PID and the GPU memory it holds. The operating system adds the name, the user,
the command line, the start time, the ancestors (for a process tree), the CPU share and the
resident memory; ``/proc/PID/cgroup`` names the Kubernetes pod (its UID) and the container,
which is how the console says which job owns a process.

What never changes while a process lives is read once per PID and start time; a poll reads only
CPU, RSS and the parent PID (one ``oneshot`` of ``/proc/PID/stat``), and the ancestors again only
when the parent changed (a process whose parent exited is adopted).
"""

from __future__ import annotations

import re
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from gpuconsole.backends.base import BackendError, BackendPermissionDenied

# A pod UID in a cgroup path: "pod<uuid>" (cgroupfs driver) or "pod<uuid with _>" (systemd
# driver); static pods have a 32-hex hash instead of a UUID.
_POD = re.compile(r"pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12}|[0-9a-f]{32})(?:\.slice)?(?:/|$)")
# A container id: 64 hex digits, bare or as "<runtime>-<id>.scope".
_CONTAINER = re.compile(r"(?:^|[/-])([0-9a-f]{64})(?:\.scope)?$")
MIB = 1024 * 1024
MAX_ANCESTORS = 32  # a deeper chain is cut there (a fork bomb's, say)


def parse_cgroup(text: str) -> tuple[str | None, str | None]:
    """The pod UID and container id named by the contents of ``/proc/PID/cgroup``.

    Understands cgroup v1 (``N:controller:/path``) and v2 (``0::/path``) lines, the cgroupfs
    layout (``/kubepods/burstable/pod<uid>/<id>``), the systemd layout
    (``/kubepods.slice/…/kubepods-burstable-pod<uid_with_underscores>.slice/cri-containerd-<id>.scope``)
    and plain Docker (``/docker/<id>``, ``/system.slice/docker-<id>.scope``).

    Returns:
        ``(pod_uid, container_id)``; either is None when the path does not name one.
    """
    pod_uid: str | None = None
    container: str | None = None
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        path = parts[2].strip()
        if not path or path == "/":
            continue
        if pod_uid is None:
            found = _POD.search(path)
            if found:
                pod_uid = found.group(1).replace("_", "-")
        if container is None:
            found = _CONTAINER.search(path)
            if found:
                container = found.group(1)
        if pod_uid is not None and container is not None:
            break
    return pod_uid, container


def read_cgroup(pid: int, proc: Path = Path("/proc")) -> tuple[str | None, str | None]:
    try:
        return parse_cgroup((proc / str(pid) / "cgroup").read_text(errors="replace"))
    except OSError:
        return None, None


@dataclass(slots=True)
class ProcessFacts:
    """What the operating system says about one PID (cached while the PID lives)."""

    process: psutil.Process | None
    created: float | None
    name: str
    user: str | None
    command: str
    pod_uid: str | None
    container_id: str | None
    cpu_primed: bool = False
    ppid: int | None = None
    parents: tuple[tuple[int, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Usage:
    """What a poll reads afresh about a process: CPU % since the last poll (None on its first),
    resident memory, and its parent with the ancestors above it."""

    cpu_percent: float | None = None
    rss_mib: float | None = None
    ppid: int | None = None
    parents: tuple[tuple[int, str], ...] = ()


UNKNOWN = Usage()


class ProcessTable:
    """PID → facts, kept across polls so CPU% has a previous reading and nothing is read twice.

    A PID whose process was replaced (another start time) is read afresh; PIDs not seen in a
    poll are forgotten at the end of it (:meth:`forget_except`).
    """

    def __init__(self, proc: Path = Path("/proc")) -> None:
        self._facts: dict[int, ProcessFacts] = {}
        self._proc = proc
        self._usage: dict[int, Usage] = {}

    def begin_poll(self) -> None:
        """A new poll: usage is read again (once per process, however many GPUs it uses)."""
        self._usage.clear()

    def facts(self, pid: int, nvml_name: Any) -> ProcessFacts | None:
        """Facts of ``pid``; None when the process no longer exists anywhere.

        Args:
            nvml_name: a callable returning NVML's name for the PID (or raising ``NotFound``),
                used when the PID is not visible here (another PID namespace, or hidden /proc).
        """
        known = self._facts.get(pid)
        if known is not None:
            if known.process is None:
                return known  # not visible here; NVML still lists it, so it still runs
            try:
                if known.process.create_time() == known.created:
                    return known
            except psutil.Error:
                pass
        facts = self._read(pid, nvml_name)
        if facts is None:
            self._facts.pop(pid, None)
        else:
            self._facts[pid] = facts
        return facts

    def _read(self, pid: int, nvml_name: Any) -> ProcessFacts | None:
        try:
            proc = psutil.Process(pid)
            with proc.oneshot():
                created = proc.create_time()
                name = proc.name()
                user = _safe(proc.username)
                cmdline = _safe(proc.cmdline)
        except psutil.NoSuchProcess:
            name = nvml_name(pid)
            if name is None:
                return None  # gone between NVML's list and now
            return ProcessFacts(None, None, name or "?", None, "", None, None)
        except psutil.AccessDenied:
            name = nvml_name(pid) or "?"
            return ProcessFacts(None, None, name, None, "", None, None)
        pod_uid, container = read_cgroup(pid, self._proc)
        command = " ".join(cmdline) if cmdline else ""
        return ProcessFacts(proc, created, name, user, command, pod_uid, container)

    def usage(self, pid: int, facts: ProcessFacts) -> Usage:
        """CPU%, RSS and lineage of ``pid`` this poll, each None where the OS does not say."""
        known = self._usage.get(pid)
        if known is None:
            self._usage[pid] = known = self._read_usage(facts)
        return known

    def _read_usage(self, facts: ProcessFacts) -> Usage:
        proc = facts.process
        if proc is None:
            return UNKNOWN
        try:
            with proc.oneshot():
                cpu = _safe(lambda: proc.cpu_percent(None))
                memory = _safe(proc.memory_info)
                ppid = _safe(proc.ppid)
        except psutil.Error:
            return UNKNOWN
        if not facts.cpu_primed and cpu is not None:
            facts.cpu_primed = True
            cpu = None  # the first reading has no interval
        if ppid != facts.ppid:
            facts.ppid, facts.parents = ppid, ancestors(ppid) if ppid is not None else ()
        rss = memory.rss / MIB if memory is not None else None
        return Usage(cpu, rss, ppid, facts.parents)

    def created(self, pid: int) -> float | None:
        facts = self._facts.get(pid)
        return facts.created if facts is not None else None

    def forget_except(self, pids: set[int]) -> None:
        for pid in [p for p in self._facts if p not in pids]:
            del self._facts[pid]


def _safe(getter: Any) -> Any:
    try:
        return getter()
    except psutil.Error:
        return None


def ancestors(ppid: int) -> tuple[tuple[int, str], ...]:
    """``(pid, name)`` from ``ppid`` up, nearest first, without the init process (pid 1) or the
    kernel (0); the chain stops at the first ancestor the OS hides or that has exited."""
    out: list[tuple[int, str]] = []
    pid = ppid
    while pid > 1 and len(out) < MAX_ANCESTORS:
        try:
            parent = psutil.Process(pid)
            with parent.oneshot():
                name, above = parent.name(), parent.ppid()
        except psutil.Error:
            break
        out.append((pid, name))
        if above == pid:
            break
        pid = above
    return tuple(out)


class SmSamples:
    """Per-process SM utilization from ``nvmlDeviceGetProcessUtilization``.

    NVML returns the samples newer than a timestamp; the newest timestamp seen on each device is
    carried to its next poll so every sample is read once. A process with no new sample was idle
    since the last poll (0 %); a device that cannot say gives N/A for all of its processes.
    """

    def __init__(self) -> None:
        self._last_seen: dict[str, int] = {}

    def read(self, uuid: str, samples: Any) -> dict[int, float] | None:
        """Turn one answer into ``{pid: sm %}``; ``samples`` is the call's result, ``()`` for
        NVML's "no sample since" (``NotFound``) and N/A (falsy non-list) where unsupported."""
        if samples is None or not isinstance(samples, (list, tuple)):
            return None
        out: dict[int, tuple[int, float]] = {}
        newest = self._last_seen.get(uuid, 0)
        for sample in samples:
            ts = int(sample.timeStamp)
            newest = max(newest, ts)
            pid = int(sample.pid)
            seen = out.get(pid)
            if seen is None or ts >= seen[0]:
                out[pid] = (ts, float(sample.smUtil))
        self._last_seen[uuid] = newest
        return {pid: value for pid, (_, value) in out.items()}

    def last_seen(self, uuid: str) -> int:
        return self._last_seen.get(uuid, 0)


KILL_SIGNALS = (signal.SIGTERM, signal.SIGKILL)


@dataclass(frozen=True, slots=True)
class SeenProcess:
    """A process as the last poll saw it on a GPU: what a signal is checked against."""

    created: float | None
    name: str
    user: str | None


def signal_process(seen: SeenProcess, pid: int, sig: int, send: Callable[[int, int], None]) -> str:
    """Send ``sig`` to ``pid`` if it is still the process ``seen`` (same start time); one line back.

    Raises:
        BackendError: a signal other than SIGTERM/SIGKILL, exited, or not visible from here.
        BackendPermissionDenied: the operating system refused.
    """
    if sig not in KILL_SIGNALS:
        raise BackendError(f"signal {sig} is not one the console sends (SIGTERM or SIGKILL)")
    if seen.created is None:
        raise BackendError(f"pid {pid} is not visible from here (another PID namespace, or /proc is hidden)")
    try:
        if psutil.Process(pid).create_time() != seen.created:
            raise BackendError(f"pid {pid} has exited; its number now belongs to another process")
    except psutil.NoSuchProcess:
        raise BackendError(f"pid {pid} has already exited") from None
    except psutil.AccessDenied:
        pass  # the signal below gets the operating system's answer
    name = signal.Signals(sig).name
    try:
        send(pid, sig)
    except ProcessLookupError:
        raise BackendError(f"pid {pid} has already exited") from None
    except PermissionError:
        owner = f" (user {seen.user})" if seen.user else ""
        raise BackendPermissionDenied(f"the operating system refused to send {name} to pid {pid}{owner}: "
                                      "run gpuconsole as that user or as root") from None
    return f"sent {name} to pid {pid} ({seen.name})"
