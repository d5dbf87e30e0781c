"""Weeks of simulated fleet history written into a Store in seconds (benchmarks, tests, demos).

Thirty days of 1 Hz samples of 64 GPUs are 166 million samples; inserting them one by one and
rolling them up would take hours. The simulated signal here is chosen so a minute's average and
peak have a closed form (within a minute utilization climbs linearly from a base, temperature
and power follow utilization linearly, memory stays put), so everything but the last hour is
written as minute rollups equal to what rolling up the per-second samples would give, a day at a
time, each day followed by :meth:`Store.maintain` as the console calls it: hours are rolled up
from those minutes and retention applied by the live code. The last hour goes through the live
path, one :meth:`Store.record_gpus` transaction per second and ``maintain`` every minute.

The signal is deterministic for a GPU index and a time: a daily cycle with a per-GPU phase,
a little per-minute jitter, and a memory level that changes every hour.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

from gpuconsole.core.fleet.history import MINUTE_RETENTION_S, RAW_RETENTION_S
from gpuconsole.model import Gpu

if TYPE_CHECKING:
    from gpuconsole.core.fleet.store import Store

__all__ = ["fill_history", "fleet_uuids", "minute_values", "second_values"]

DAY = 86400
MEMORY_TOTAL_MIB = 81920
POWER_LIMIT_W = 700.0


def fleet_uuids(gpus: int) -> list[str]:
    """The UUIDs of the simulated GPUs :func:`fill_history` writes."""
    return [f"GPU-hist-{g:05d}" for g in range(gpus)]


def _base(g: int, minute: int) -> tuple[float, int]:
    """Utilization at second 0 of a minute and how far it climbs by second 59."""
    k = minute // 60
    cycle = 45.0 + 35.0 * math.sin(2 * math.pi * (minute % DAY) / DAY + 0.37 * g)
    jitter = (g * 7919 + k * 104729) % 17 - 8
    return min(90.0, max(0.0, cycle + jitter)), (k * 31 + g) % 5


def _memory(g: int, ts: int) -> int:
    return 20000 + 600 * ((g + ts // 3600) % 100)


def minute_values(g: int, minute: int) -> tuple[float, float, float, float, float]:
    """(average utilization, peak, memory, average temperature, average power) of a GPU's minute."""
    base, climb = _base(g, minute)
    mean = base + climb / 2  # the mean of s / 59 over s = 0..59 is 1/2
    return mean, base + climb, float(_memory(g, minute)), 35.0 + 0.45 * mean, 80.0 + 5.0 * mean


def _day_of_minutes(uuids: list[str], start: int, end: int) -> list[tuple[str, int, int, float, float, float, float,
                                                                         float]]:
    """:func:`minute_values` of every GPU and minute in ``[start, end)``, unrolled for speed."""
    phases = [(math.sin(0.37 * g), math.cos(0.37 * g)) for g in range(len(uuids))]
    rows = []
    append = rows.append
    for minute in range(start, end, 60):
        angle = 2 * math.pi * (minute % DAY) / DAY
        sin_a, cos_a = math.sin(angle), math.cos(angle)
        k = minute // 60
        jitter_k, climb_k, hour = k * 104729, k * 31, minute // 3600
        for g, uuid in enumerate(uuids):
            sin_p, cos_p = phases[g]
            base = 45.0 + 35.0 * (sin_a * cos_p + cos_a * sin_p) + (g * 7919 + jitter_k) % 17 - 8
            base = min(90.0, max(0.0, base))
            climb = (climb_k + g) % 5
            mean = base + climb / 2
            append((uuid, minute, 60, mean, base + climb, 20000.0 + 600 * ((g + hour) % 100), 35.0 + 0.45 * mean,
                    80.0 + 5.0 * mean))
    return rows


def _hours_of(minutes: list[tuple[str, int, int, float, float, float, float, float]]) -> list[tuple]:
    """Hour rollups of whole hours of minute rollups, as the Store's SQL computes them.

    Minutes are stored in tenths (whole MiB for memory); an hour is the sample-weighted mean of
    its minutes, rounded half away from zero as SQLite's ``round`` does.
    """
    sums: dict[tuple[str, int], list[float]] = {}
    for uuid, minute, n, util, peak, mem, temp, power in minutes:
        key = (uuid, minute - minute % 3600)
        acc = sums.get(key)
        if acc is None:
            acc = sums[key] = [0, 0, 0, 0, 0, 0]
        acc[0] += n
        acc[1] += round(util * 10) * n
        acc[2] = max(acc[2], round(peak * 10))
        acc[3] += round(mem) * n
        acc[4] += round(temp * 10) * n
        acc[5] += round(power * 10) * n
    return [
        (uuid, hour, n, _sql_round(u * 1.0 / n) / 10, peak / 10, float(_sql_round(m * 1.0 / n)),
         _sql_round(t * 1.0 / n) / 10, _sql_round(p * 1.0 / n) / 10)
        for (uuid, hour), (n, u, peak, m, t, p) in sums.items()
    ]


def _sql_round(value: float) -> int:
    return math.floor(value + 0.5)


def second_values(g: int, ts: int) -> tuple[float, int, int, float]:
    """(utilization, memory MiB, temperature °C, power W) of a GPU at a whole second."""
    base, climb = _base(g, ts - ts % 60)
    util = base + climb * (ts % 60) / 59
    return util, _memory(g, ts), round(35.0 + 0.45 * util), 80.0 + 5.0 * util


def fill_history(
    store: Store,
    *,
    gpus: int = 64,
    days: float = 30,
    end: int,
    direct_hours: bool = True,
    on_day: Callable[[int], None] | None = None,
) -> list[str]:
    """Write ``days`` of history of ``gpus`` GPUs ending at ``end`` (both rounded down to hours).

    With ``direct_hours`` (the default) the days older than minute retention are written as
    hour rollups computed in Python exactly as :meth:`Store.maintain` computes them from minutes
    (same rounding), which is three times faster than writing, rolling up and deleting their
    minutes; without it every minute goes through the Store. The result is the same.

    Returns:
        The GPUs' UUIDs, GPU ``g`` at index ``g``.
    """
    end -= end % 3600
    uuids = fleet_uuids(gpus)
    start = end - int(days * DAY)
    start -= start % 3600
    raw_from = end - RAW_RETENTION_S
    # Minutes older than this would be rolled into hours and deleted by the end: write the
    # hours straight away, as the rollup would have computed them.
    minutes_from = max(start, end - MINUTE_RETENTION_S if direct_hours else start)
    minutes_from -= minutes_from % 3600
    t = start
    while t < minutes_from:
        chunk_end = min(t - t % DAY + DAY, minutes_from)
        store.record_hours(_hours_of(_day_of_minutes(uuids, t, chunk_end)), rolled_until=chunk_end)
        if on_day is not None:
            on_day(chunk_end)
        t = chunk_end
    while t < raw_from:
        chunk_end = min(t - t % DAY + DAY, raw_from)
        store.record_minutes(_day_of_minutes(uuids, t, chunk_end), rolled_until=chunk_end)
        store.maintain(chunk_end)
        if on_day is not None:
            on_day(chunk_end)
        t = chunk_end
    nodes = [f"hist-node-{g // 8:04d}" for g in range(gpus)]
    for ts in range(raw_from, end):
        readings = []
        for g, uuid in enumerate(uuids):
            util, memory, temp, power = second_values(g, ts)
            readings.append(Gpu(uuid, nodes[g], g % 8, "NVIDIA H100 80GB HBM3", util, memory, MEMORY_TOTAL_MIB, temp,
                                power, POWER_LIMIT_W))
        store.record_gpus(readings, ts)
        if (ts + 1) % 60 == 0:
            store.maintain(ts + 1)
    store.maintain(end)
    return uuids
