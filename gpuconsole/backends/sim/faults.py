"""Fault injection for the simulated sources (``--demo-faults``).

A console is judged by how it behaves when a source misbehaves, so the simulator can make
any face fail on purpose: ``error`` fails every poll, ``flaky`` fails every third one, ``slow``
answers after a delay, ``hang`` does not answer until released or closed. Hangs and delays wait
on a :class:`threading.Event`, so closing a source wakes every poll stuck in it and no thread is
left behind when the console exits.
"""

from __future__ import annotations

import enum
import math
import threading
from dataclasses import dataclass

from gpuconsole.backends.base import BackendError
from gpuconsole.model import SourceKind

DEFAULT_SLOW_S = 3.0

USAGE = ("expected SOURCE:MODE[=SECONDS] separated by commas, SOURCE one of gpus, jobs, cloud, "
         "MODE one of error, flaky, slow[=SECONDS], hang[=SECONDS] (e.g. gpus:slow=3,cloud:flaky), "
         "or cloud:spot-storm[=SECONDS] (every spot instance interrupted SECONDS after the start)")


class FaultMode(str, enum.Enum):
    ERROR = "error"
    HANG = "hang"
    SLOW = "slow"
    FLAKY = "flaky"
    SPOT_STORM = "spot-storm"  # the world's, not a poll's: EC2 interrupts every spot instance at once


@dataclass(frozen=True, slots=True)
class Fault:
    """One source's misbehaviour; ``seconds`` is the delay of ``slow`` or the longest ``hang``."""

    mode: FaultMode
    seconds: float | None = None

    def __str__(self) -> str:
        return self.mode.value if self.seconds is None else f"{self.mode.value}={self.seconds:g}"


def _kind(source: SourceKind | str) -> SourceKind:
    try:
        return SourceKind(source)
    except ValueError:
        raise ValueError(f"unknown source {source!r}; one of gpus, jobs, cloud") from None


def _fault(mode: FaultMode | str, seconds: float | None) -> Fault:
    try:
        fmode = FaultMode(mode)
    except ValueError:
        raise ValueError(f"unknown mode {mode!r}; one of error, flaky, slow, hang, spot-storm") from None
    if seconds is not None:
        if fmode in (FaultMode.ERROR, FaultMode.FLAKY):
            raise ValueError(f"{fmode.value} takes no SECONDS")
        if not math.isfinite(seconds) or seconds < 0:
            raise ValueError(f"SECONDS must be a number ≥ 0, got {seconds!r}")
    elif fmode is FaultMode.SLOW:
        seconds = DEFAULT_SLOW_S
    return Fault(fmode, seconds)


class FaultPlan:
    """Which source misbehaves how; shared by the three faces and changeable while running."""

    def __init__(self, faults: dict[SourceKind, Fault] | None = None) -> None:
        self._lock = threading.Lock()
        self._faults: dict[SourceKind, Fault] = dict(faults or {})
        self._polls: dict[SourceKind, int] = {k: 0 for k in SourceKind}
        self._wake: dict[SourceKind, threading.Event] = {k: threading.Event() for k in SourceKind}
        self._closed: set[SourceKind] = set()

    @classmethod
    def parse(cls, spec: str) -> FaultPlan:
        """Read a ``--demo-faults`` value such as ``"gpus:slow=0.5,cloud:flaky"``.

        Raises:
            ValueError: one line naming the bad part and the valid forms.
        """
        faults: dict[SourceKind, Fault] = {}
        for raw in spec.split(","):
            part = raw.strip()
            if not part:
                continue
            source, colon, rest = part.partition(":")
            mode, equals, secs = rest.partition("=")
            try:
                if not colon or not mode.strip():
                    raise ValueError("missing MODE")
                kind = _kind(source.strip())
                if kind in faults:
                    raise ValueError(f"{kind.value} given twice")
                seconds = None
                if equals:
                    try:
                        seconds = float(secs)
                    except ValueError:
                        raise ValueError(f"SECONDS must be a number, got {secs!r}") from None
                faults[kind] = _fault(mode.strip(), seconds)
                if faults[kind].mode is FaultMode.SPOT_STORM and kind is not SourceKind.CLOUD:
                    raise ValueError("spot-storm is a fault of the cloud: write cloud:spot-storm")
            except ValueError as exc:
                raise ValueError(f"bad fault {part!r}: {exc}; {USAGE}") from None
        return cls(faults)

    def __str__(self) -> str:
        return ",".join(f"{k.value}:{f}" for k, f in sorted(self._faults.items(), key=lambda kv: kv[0].value))

    def get(self, source: SourceKind | str) -> Fault | None:
        with self._lock:
            return self._faults.get(_kind(source))

    def set(self, source: SourceKind | str, mode: FaultMode | str | None, seconds: float | None = None) -> None:
        """Change one source's fault (None clears it); a poll hanging on it is let go."""
        kind = _kind(source)
        fault = None if mode is None else _fault(mode, seconds)
        with self._lock:
            if fault is None:
                self._faults.pop(kind, None)
            else:
                self._faults[kind] = fault
            self._wake_locked(kind)

    def release(self) -> None:
        """End every hang: polls blocked now return, and later polls no longer hang."""
        with self._lock:
            for kind in SourceKind:
                fault = self._faults.get(kind)
                if fault is not None and fault.mode is FaultMode.HANG:
                    del self._faults[kind]
                self._wake_locked(kind)

    def close(self, source: SourceKind | str | None = None) -> None:
        """A face (or all of them) closed: wake its waiting polls for good.

        A plan serves one set of faces; a closed source stays closed, so build a new plan for
        new faces.
        """
        with self._lock:
            for kind in SourceKind if source is None else (_kind(source),):
                self._closed.add(kind)
                self._wake[kind].set()

    def _wake_locked(self, kind: SourceKind) -> None:
        if kind not in self._closed:
            self._wake[kind].set()
            self._wake[kind] = threading.Event()

    def apply(self, source: SourceKind | str) -> None:
        """Misbehave as planned for one poll of ``source``.

        Raises:
            BackendError: ``simulated fault: …`` for error, flaky, and a closed source.
        """
        kind = _kind(source)
        with self._lock:
            fault = self._faults.get(kind)
            self._polls[kind] += 1
            count = self._polls[kind]
            wake = self._wake[kind]
            closed = kind in self._closed
        if closed:
            raise BackendError(f"simulated fault: {kind.value} source is closed")
        if fault is None or fault.mode is FaultMode.SPOT_STORM:
            return
        if fault.mode is FaultMode.ERROR:
            raise BackendError(f"simulated fault: {kind.value} source error")
        if fault.mode is FaultMode.FLAKY:
            if count % 3 == 0:
                raise BackendError(f"simulated fault: {kind.value} source failed poll {count} (flaky)")
            return
        # slow and hang: wait, but wake early when released or closed
        wake.wait(fault.seconds)
        with self._lock:
            closed = kind in self._closed
        if closed:
            raise BackendError(f"simulated fault: {kind.value} source closed while waiting")
