"""The store's one writer: write jobs run in the order given on a single daemon thread that owns
the write connection, so writes of this process never contend with each other. The thread
starts with the first job and ends on :meth:`WriteQueue.stop` (or when its store is dropped)."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import TypeVar

import sqlite_utils

R = TypeVar("R")


class WriteQueue:
    """Runs jobs one at a time, in order, on its own thread; the thread starts on the first job.

    Args:
        name: the thread's name.
        connect: opens the write connection (called on the writer thread, on first use).
    """

    def __init__(self, name: str, connect: Callable[[], sqlite_utils.Database]) -> None:
        self.name = name
        self._connect = connect
        self._lock = threading.Lock()  # the thread and its queue
        self._thread: threading.Thread | None = None
        self._queue: queue.SimpleQueue[tuple[Callable[[], object], Future[object]] | None] = queue.SimpleQueue()
        self._local = threading.local()  # the connection, on the writer thread only

    def run(self, job: Callable[[], R]) -> R:
        """Run ``job`` on the writer thread after the jobs before it; its result or its exception.

        Called on the writer thread itself (a job that writes again), it runs at once.
        """
        if threading.current_thread() is self._thread:
            return job()
        future: Future[R] = Future()
        with self._lock:
            if self._thread is None:
                self._queue = queue.SimpleQueue()
                self._thread = threading.Thread(target=self._loop, args=(self._queue,), name=self.name, daemon=True)
                self._thread.start()
            self._queue.put((job, future))  # type: ignore[arg-type]
        return future.result()

    def connection(self) -> sqlite_utils.Database:
        """The write connection, opened on first use; only a job may ask for it."""
        db: sqlite_utils.Database | None = getattr(self._local, "db", None)
        if db is None:
            db = self._local.db = self._connect()
        return db

    def close_connection(self) -> None:
        """Close the write connection (a job that sets the file aside); the next use reopens it."""
        db: sqlite_utils.Database | None = getattr(self._local, "db", None)
        self._local.db = None
        if db is not None:
            db.close()

    def stop(self) -> None:
        """Run the jobs already given, then end the thread and close its connection."""
        with self._lock:  # held until the thread has ended: a job given meanwhile starts a new one after
            thread, self._thread = self._thread, None
            if thread is None or thread is threading.current_thread():
                return
            self._queue.put(None)
            thread.join()

    def stop_soon(self) -> None:
        """Like :meth:`stop`, without waiting for the thread to end (a store being collected)."""
        with self._lock:
            thread, self._thread = self._thread, None
            if thread is not None:
                self._queue.put(None)

    def _loop(self, jobs: queue.SimpleQueue[tuple[Callable[[], object], Future[object]] | None]) -> None:
        try:
            while (item := jobs.get()) is not None:
                _run_one(*item)
                del item  # hold no finished job (nor the store it names) while waiting for the next
        finally:
            self.close_connection()


def _run_one(job: Callable[[], object], future: Future[object]) -> None:
    if not future.set_running_or_notify_cancel():
        return
    try:
        future.set_result(job())
    except BaseException as exc:  # noqa: BLE001 - handed to the caller waiting on it
        future.set_exception(exc)
