"""One replica acts at a time: a file lock on one host, or a Kubernetes Lease on a cluster.

Both answer :meth:`acquire` (take or renew leadership, True while this process leads) and
:meth:`holder` (who leads, for the console). The file lock is held by the kernel: when the
holder dies, however it dies, the lock is free at once.
"""

from __future__ import annotations

import fcntl
import os
import socket
from pathlib import Path
from typing import Protocol


class Leadership(Protocol):
    identity: str

    def acquire(self) -> bool:
        """Take or renew leadership; True while this process holds it."""

    def holder(self) -> str:
        """Who holds it now ('' when nobody does)."""

    def release(self) -> None:
        """Give it up (a clean stop), so another replica takes over at once."""

    def shared(self) -> dict[str, float]:
        """When each rule last acted, as every replica sees it (empty where the state file is
        shared already: one host)."""

    def share(self, rule: str, at: float) -> None:
        """Record for every replica that ``rule`` acted at ``at``."""


def default_identity() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


class FileLeadership:
    """Leadership on one host: an exclusive ``flock`` on ``path``, which names the holder."""

    def __init__(self, path: Path, identity: str | None = None) -> None:
        self.path = path
        self.identity = identity or default_identity()
        self._fd: int | None = None

    def acquire(self) -> bool:
        if self._fd is not None:
            return True
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        os.ftruncate(fd, 0)
        os.pwrite(fd, self.identity.encode(), 0)
        self._fd = fd
        return True

    def holder(self) -> str:
        if self._fd is not None:
            return self.identity
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except OSError:
            return ""
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except OSError:
                return os.pread(fd, 256, 0).decode(errors="replace").strip()
            fcntl.flock(fd, fcntl.LOCK_UN)
            return ""  # nobody holds it: the name in the file is a past holder's
        finally:
            os.close(fd)

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def shared(self) -> dict[str, float]:
        return {}  # one host: the autopilot database is the shared state

    def share(self, rule: str, at: float) -> None:
        pass


LEASE_NAME = "gpuconsole-autopilot"


def leadership_for(job_backend: object, namespace: str, lock_path: Path, *, identity: str | None = None,
                   lease_s: int = 15) -> Leadership:
    """The Lease ``gpuconsole-autopilot`` in ``namespace`` when the jobs come from a cluster,
    else the file lock at ``lock_path`` (one host)."""
    from gpuconsole.backends.registry import lease_for

    lease = lease_for(job_backend, namespace, LEASE_NAME, identity or default_identity(), lease_s=lease_s)
    if lease is not None:
        return lease  # type: ignore[return-value]  # a Lease is a Leadership of the cluster
    return FileLeadership(lock_path, identity)


class LocalLeadership:
    """Leadership that is always this process's: the demo's (its world is its own)."""

    def __init__(self, identity: str) -> None:
        self.identity = identity

    def acquire(self) -> bool:
        return True

    def holder(self) -> str:
        return self.identity

    def release(self) -> None:
        pass

    def shared(self) -> dict[str, float]:
        return {}

    def share(self, rule: str, at: float) -> None:
        pass
