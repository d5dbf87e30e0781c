"""A stand-in for a backend that is not set up: every poll says what is missing and how to fix it.

The Hub turns that into an ``unconfigured`` status with the hint, and the pane shows it where the
data would be. It never fabricates data: without ``--demo`` the console shows nothing simulated.
"""

from __future__ import annotations

from gpuconsole.backends.base import BackendUnavailable, Capability
from gpuconsole.model import CloudReading, GpuReading, JobsReading, ServicesReading


class Unconfigured:
    """Implements every backend face; every poll raises :class:`BackendUnavailable`."""

    capabilities: frozenset[Capability] = frozenset()

    def __init__(self, name: str, reason: str, hint: str) -> None:
        self.name = name
        self.reason = reason
        self.hint = hint

    def _missing(self) -> BackendUnavailable:
        return BackendUnavailable(self.reason, hint=self.hint)

    def poll_gpus(self) -> GpuReading:
        raise self._missing()

    def poll_jobs(self) -> JobsReading:
        raise self._missing()

    def poll_instances(self) -> CloudReading:
        raise self._missing()

    def poll_services(self) -> ServicesReading:
        raise self._missing()

    def close(self) -> None:
        return None
