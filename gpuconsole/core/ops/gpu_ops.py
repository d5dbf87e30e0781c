"""GPUs through the core: signalling a GPU process, and the last minutes of each GPU.

The UI and the CLI reach the GPU source only through :class:`GpuOps` (``console.gpus``) and
:func:`gpuconsole.core.fleet.gpus_once.read_gpus_once`. Signalling a process is an
:class:`~gpuconsole.core.ops.actions.ActionRequest` run by :func:`~gpuconsole.core.ops.actions.run_action`,
so the ``"yes"`` it needs is checked here before the process is touched, and every result is
recorded. :meth:`GpuOps.kill` blocks (it may call the operating system or the driver): call it
from a worker thread. Every failure reaches the caller as
:class:`~gpuconsole.core.ops.actions.ActionError` with one line.
"""

from __future__ import annotations

import signal
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from gpuconsole.backends.base import BackendError, ProcessControl
from gpuconsole.core.ops.actions import (
    ActionError,
    ActionKind,
    ActionLog,
    ActionRequest,
    ActionResult,
    run_action,
)
from gpuconsole.model import GpuReading, GpuSample

SIGNALS = {"SIGTERM": signal.SIGTERM, "SIGKILL": signal.SIGKILL}
NOT_A_HOST = "this GPU source cannot signal processes"
RING_SECONDS = 300.0  # the in-memory history: five minutes
RING_ALL_UP_TO = 256  # larger fleets keep the ring only for GPUs someone looked at (watch)
RING_MAX_SAMPLES = 1200


class GpuRing:
    """The last five minutes of every GPU's utilization, memory, temperature and power, in memory.

    Fed with every new GPU reading; it needs no database, so the detail view has its short
    history even with ``--no-db``. A fleet of more than :data:`RING_ALL_UP_TO` GPUs keeps it only
    for the GPUs :meth:`watch` names (those opened in the detail view), to bound memory.
    """

    def __init__(self, seconds: float = RING_SECONDS, all_up_to: int = RING_ALL_UP_TO) -> None:
        self.seconds = seconds
        self.all_up_to = all_up_to
        self._samples: dict[str, deque[GpuSample]] = {}
        self._watched: set[str] = set()
        self._last_ts: float | None = None
        self._lock = threading.Lock()

    def watch(self, uuid: str) -> None:
        with self._lock:
            self._watched.add(uuid)

    def record(self, reading: GpuReading) -> None:
        if reading.taken_at == self._last_ts:
            return  # the same reading published again (another source answered)
        self._last_ts = ts = reading.taken_at
        cutoff = ts - self.seconds
        every = len(reading.gpus) <= self.all_up_to
        with self._lock:
            for g in reading.gpus:
                if not every and g.uuid not in self._watched:
                    continue
                ring = self._samples.get(g.uuid)
                if ring is None:
                    ring = self._samples[g.uuid] = deque(maxlen=RING_MAX_SAMPLES)
                ring.append(GpuSample(ts, g.utilization, float(g.memory_used_mib), float(g.temperature_c), g.power_w))
                while ring[0].ts < cutoff:
                    ring.popleft()

    def samples(self, uuid: str, seconds: float, now: float) -> list[GpuSample]:
        """The samples of the last ``seconds`` (at most the ring's length), oldest first."""
        with self._lock:
            ring = self._samples.get(uuid)
            if ring is None:
                return []
            cutoff = now - seconds
            return [s for s in ring if s.ts >= cutoff]


class GpuOps:
    """What the console can do with the GPU source it polls.

    Args:
        source: returns the Hub's current GPU source (it changes when the demo is switched on).
        reading: returns the latest GPU reading, or None.
        clock: the console's clock.
        log: where every action's result is recorded.
    """

    def __init__(self, source: Callable[[], Any], reading: Callable[[], GpuReading | None],
                 clock: Callable[[], float] = time.time, log: ActionLog | None = None,
                 pod_namespace: Callable[[str], str | None] = lambda pod_uid: None) -> None:
        self._source = source
        self._reading = reading
        self._pod_namespace = pod_namespace
        self.clock = clock
        self.log = log if log is not None else ActionLog()
        self.ring = GpuRing()

    @property
    def available(self) -> bool:
        """Whether the source can signal the processes it reports."""
        return isinstance(self._source(), ProcessControl)

    @property
    def versions(self) -> tuple[tuple[str, str], ...]:
        """Driver, CUDA and NVML versions of the latest reading (empty where the source has none)."""
        reading = self._reading()
        return reading.versions if reading is not None else ()

    def observe(self, reading: GpuReading) -> None:
        """Keep a new reading's samples in the ring (the Console calls it for every reading)."""
        self.ring.record(reading)

    def recent(self, uuid: str, seconds: float = RING_SECONDS) -> list[GpuSample]:
        """The in-memory samples of one GPU over the last ``seconds`` (five minutes at most)."""
        self.ring.watch(uuid)
        return self.ring.samples(uuid, seconds, self.clock())

    def kill_request(self, gpu_uuid: str, pid: int, signal_name: str, confirmation: str = "") -> ActionRequest:
        """The request, naming the process's user and its pod's namespace where the last poll saw
        them (what decides whether a developer may send the signal)."""
        params: list[tuple[str, str]] = [("signal", signal_name), ("gpu", gpu_uuid)]
        reading = self._reading()
        gpu = next((g for g in reading.gpus if g.uuid == gpu_uuid), None) if reading is not None else None
        proc = next((p for p in gpu.processes if p.pid == pid), None) if gpu is not None else None
        if proc is not None and proc.user:
            params.append(("user", proc.user))
        namespace = self._pod_namespace(proc.pod_uid) if proc is not None and proc.pod_uid else None
        if namespace:
            params.append(("namespace", namespace))
        return ActionRequest(ActionKind.KILL_PROCESS, str(pid), confirmation=confirmation, params=tuple(params))

    def kill(self, gpu_uuid: str, pid: int, signal_name: str, confirmation: str) -> ActionResult:
        """Send SIGTERM or SIGKILL to a process on a GPU, once the user said ``"yes"``.

        Raises:
            ActionError: not confirmed, not a signal the console sends, a source that cannot
                signal, or the process or the operating system refused (one line).
        """
        sig = SIGNALS.get(signal_name)
        if sig is None:
            raise ActionError(f"{signal_name} is not a signal the console sends: SIGTERM or SIGKILL")
        request = self.kill_request(gpu_uuid, pid, signal_name, confirmation)

        def do() -> str:
            source = self._source()
            if not isinstance(source, ProcessControl):
                raise BackendError(NOT_A_HOST)
            return source.kill_process(gpu_uuid, pid, sig)

        return run_action(request, do, self.log, self.clock)

