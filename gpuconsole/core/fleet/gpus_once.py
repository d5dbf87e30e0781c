"""One reading of the GPU source, for ``gpuconsole gpus --once``.

:func:`read_gpus_once` builds the GPU source the options choose, polls it once through a
:class:`~gpuconsole.core.fleet.hub.Hub` (so the timeout and the status words are the console's),
and closes it. Jobs and cloud sources are not contacted.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

from gpuconsole.core.fleet.hub import Hub, PollPolicy
from gpuconsole.core.fleet.sources import SourceOptions, build_sources
from gpuconsole.model import GpuReading, SourceKind, SourceStatus


def read_gpus_once(options: SourceOptions, timeout: float,
                   clock: Callable[[], float] = time.time) -> tuple[GpuReading | None, SourceStatus]:
    """Poll the GPU source the options choose once, under ``timeout``, and close it.

    Jobs and cloud sources are not contacted (a GPU listing needs neither). Returns the reading
    (None when the source did not answer) and the source's status, in the words the console uses.

    Raises:
        ValueError: a bad option (one line).
    """
    options = replace(options, jobs="off", cloud="off", watch_jobs=False)
    sources = build_sources(options, clock=clock)
    hub = Hub(sources, lambda _kind: None, {SourceKind.GPUS: PollPolicy(interval=1.0, timeout=timeout)}, clock=clock)
    runner = hub.runners[SourceKind.GPUS]
    try:
        runner.run_once(runner._poll_fn())
        reading = runner.reading
    finally:
        hub.stop(timeout=1.0)
    return (reading if isinstance(reading, GpuReading) else None), runner.status
