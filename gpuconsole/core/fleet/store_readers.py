"""The store's read connections: one per reading thread, closed when their thread has ended,
when the file is replaced, or when the store closes (each once its running statement is done)."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field

import sqlite_utils


@dataclass(eq=False)
class Reader:
    """One thread's read connection; ``lock`` is held while a statement of it runs."""

    db: sqlite_utils.Database
    thread: weakref.ref[threading.Thread]
    generation: int
    lock: threading.Lock = field(default_factory=threading.Lock)
    closed: bool = False

    def close(self) -> None:
        with self.lock:
            if not self.closed:
                self.closed = True
                self.db.close()


class ReadConnections:
    """The read connections of one store file.

    Args:
        connect: opens a connection to the file.
    """

    def __init__(self, connect: Callable[[], sqlite_utils.Database]) -> None:
        self._connect = connect
        self._local = threading.local()  # this thread's Reader
        self._lock = threading.Lock()
        self.open: list[Reader] = []  # every connection not yet closed (as far as known)

    def mine(self, generation: int) -> Reader:
        """This thread's connection to the file of ``generation``, opened on first use (and again
        after the file was replaced or the store closed)."""
        current: Reader | None = getattr(self._local, "reader", None)
        if current is not None and not current.closed and current.generation == generation:
            return current
        if current is not None:
            current.close()
        reader = Reader(self._connect(), weakref.ref(threading.current_thread()), generation)
        with self._lock:
            alive, ended = [], []
            for other in self.open:
                thread = other.thread()
                (alive if thread is not None and thread.is_alive() and not other.closed else ended).append(other)
            alive.append(reader)
            self.open = alive
        for other in ended:
            other.close()  # its thread has ended, so nothing is using it
        self._local.reader = reader
        return reader

    def close_all(self) -> None:
        """Close every connection, each once the statement running on it (if any) is done."""
        with self._lock:
            readers, self.open = self.open, []
        for reader in readers:
            reader.close()
