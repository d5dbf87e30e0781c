"""GPU history at scale: rollups, retention, resolution by span, 30 simulated days, old schemas."""

from __future__ import annotations

import sqlite3
from collections import Counter
from itertools import pairwise
from pathlib import Path

import pytest

from gpuconsole.core.fleet.history import MIN_POINTS, resolution
from gpuconsole.core.fleet.history_fill import (
    fill_history,
    minute_values,
    second_values,
)
from gpuconsole.core.fleet.store import SCHEMA_VERSION, Store
from gpuconsole.model import Budget, Gpu

H0 = 472_222 * 3600  # an hour boundary in November 2023
DAY = 86400
END = 490_128 * 3600  # an hour boundary at the end of November 2025


def gpu(uuid: str, utilization: float, memory: int = 1000, temp: int = 60, power: float = 300.0) -> Gpu:
    return Gpu(uuid, "node-a", 0, "NVIDIA A100-SXM4-80GB", utilization, memory, 81920, temp, power, 400.0)


def rows(db_path: Path, sql: str, *params: object) -> list[tuple]:
    conn = sqlite3.connect(db_path)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "gpuconsole.db"


@pytest.fixture
def store(db_path: Path):
    with Store(db_path) as s:
        yield s


# --------------------------------------------------------------------------- rollups


def test_minutes_and_hours_roll_up_across_their_boundaries(store: Store) -> None:
    # Two minutes before the hour, the hour, two minutes after; maintain every minute as the
    # console does. Every minute has utilization 0..59 (average 29.5, peak 59) except minute 10
    # of the hour, which has 30 samples of 90 %.
    for ts in range(H0 - 120, H0 + 3720):
        if ts % 60 == 0:
            store.maintain(ts)
        busy = H0 + 600 <= ts < H0 + 660
        if busy and ts % 2:
            continue
        store.record_gpus([gpu("GPU-A", 90.0 if busy else float(ts % 60), 1000 + (ts - H0) // 60 % 7, 50 + ts % 2,
                               200.0 + (ts >= H0) * 100)], ts)
    store.maintain(H0 + 3840)

    minutes = store.gpu_history("GPU-A", H0 - 120, H0 + 3719, min_points=60)
    assert [s.ts for s in minutes[:64]] == [H0 - 120 + 60 * m for m in range(64)]
    by_ts = {s.ts: s for s in minutes}
    assert by_ts[H0 + 600].utilization == 90.0
    assert by_ts[H0 + 660].utilization == 29.5 and by_ts[H0 - 60].utilization == 29.5
    assert by_ts[H0 + 120].memory_used_mib == 1002 and by_ts[H0 + 120].temperature_c == 50.5
    assert by_ts[H0 - 60].power_w == 200.0 and by_ts[H0].power_w == 300.0

    week = store.gpu_history("GPU-A", H0 + 3720 - 7 * DAY, H0 + 3720)
    assert [s.ts for s in week] == [H0 - 3600, H0, H0 + 3600, H0 + 3660]
    before, hour = week[0], week[1]
    assert (before.utilization, before.power_w, before.temperature_c) == (29.5, 200.0, 50.5)
    # 59 minutes of 60 samples at 29.5 and one of 30 samples at 90, weighted by samples
    assert hour.utilization == pytest.approx((59 * 60 * 29.5 + 30 * 90) / 3570, abs=0.05)
    assert hour.power_w == 300.0 and hour.temperature_c == pytest.approx(50.5, abs=0.05)
    peaks = rows(store.path, "SELECT ts, samples, utilization_max FROM gpu_hours ORDER BY ts")
    assert peaks == [(H0 - 3600, 120, 590), (H0, 3570, 900)]


def test_maintain_twice_changes_nothing(store: Store, db_path: Path) -> None:
    for ts in range(H0, H0 + 7200, 10):
        store.record_gpus([gpu("GPU-A", float(ts % 100))], ts)
    store.maintain(H0 + 7300)
    tables = ("gpu_samples", "gpu_minutes", "gpu_hours")
    first = {t: rows(db_path, f"SELECT * FROM {t}") for t in tables}

    store.maintain(H0 + 7300)

    assert {t: rows(db_path, f"SELECT * FROM {t}") for t in tables} == first
    assert len(first["gpu_hours"]) == 2 and len(first["gpu_minutes"]) == 120


def test_sub_second_samples_are_kept_apart(store: Store) -> None:
    store.record_gpus([gpu("GPU-A", 10.0)], H0 + 0.25)
    store.record_gpus([gpu("GPU-A", 20.0)], H0 + 0.75)

    assert [(s.ts, s.utilization) for s in store.gpu_history("GPU-A", H0, H0 + 1)] == [(H0 + 0.25, 10.0),
                                                                                      (H0 + 0.75, 20.0)]


# --------------------------------------------------------------------------- retention


def counts(db_path: Path, table: str) -> dict[int, tuple[int, int, int]]:
    return {g: (lo, hi, n) for g, lo, hi, n in rows(db_path, f"SELECT gpu, min(ts), max(ts), count(*) FROM {table} GROUP BY gpu")}


def test_retention_removes_exactly_the_old_rows(store: Store, db_path: Path) -> None:
    rolled = H0 + 3 * DAY - 3600
    minutes = [(u, m, 60, 50.0, 60.0, 1000.0, 50.0, 300.0) for m in range(H0, rolled, 60) for u in ("GPU-A", "GPU-B")]
    store.record_minutes(minutes, rolled_until=rolled)
    now = H0 + 3 * DAY + 1800
    for ts in range(rolled, now, 5):
        store.record_gpus([gpu("GPU-A", 50.0), gpu("GPU-B", 50.0)], ts)

    store.maintain(now)

    raw = rows(db_path, "SELECT min(ts_ms), max(ts_ms), count(*) FROM gpu_samples")[0]
    assert raw == (1000 * (H0 + 3 * DAY - 1800), 1000 * (now - 5), 2 * 3600 // 5)  # an hour before now, to the minute
    # minutes from the whole hour two days back; rolled up to the last complete minute
    assert set(counts(db_path, "gpu_minutes").values()) == {(H0 + DAY, H0 + 3 * DAY + 1680, 2 * 1440 + 29)}
    assert set(counts(db_path, "gpu_hours").values()) == {(H0, H0 + 3 * DAY - 3600, 72)}

    later = H0 + 36 * DAY + 100  # the console comes back after a month
    store.maintain(later)

    assert rows(db_path, "SELECT count(*) FROM gpu_samples") == [(0,)]
    assert rows(db_path, "SELECT count(*) FROM gpu_minutes") == [(0,)]
    # hours kept for 35 days: from the first whole hour after later - 35 days, to the last sample
    assert set(counts(db_path, "gpu_hours").values()) == {(H0 + DAY + 3600, H0 + 3 * DAY, 48)}
    assert [s.ts for s in store.gpu_history("GPU-A", later - 35 * DAY, later)][:2] == [H0 + DAY + 3600, H0 + DAY + 7200]


# --------------------------------------------------------------------------- resolution by span


def test_resolution_follows_the_span() -> None:
    assert [resolution(span) for span in (300, 3600, DAY, 7 * DAY, 30 * DAY)] == [0, 0, 60, 3600, 3600]
    assert resolution(MIN_POINTS * 60) == 60 and resolution(MIN_POINTS * 60 - 1) == 0


@pytest.fixture(scope="module")
def month(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """30 simulated days of 1 Hz samples of 64 GPUs ending at END, the Store closed."""
    path = tmp_path_factory.mktemp("month") / "gpuconsole.db"
    with Store(path) as store:
        uuids = fill_history(store, gpus=64, days=30, end=END)
        store.checkpoint()
    return path, uuids


def steps(samples: list) -> Counter[float]:
    return Counter(b.ts - a.ts for a, b in pairwise(samples))


def test_thirty_days_of_64_gpus_fill_the_expected_rows_within_200_mb(month: tuple[Path, list[str]]) -> None:
    path, uuids = month
    assert len(uuids) == 64
    assert rows(path, "SELECT count(*) FROM gpu_samples") == [(64 * 3600,)]  # the last hour
    assert rows(path, "SELECT count(*) FROM gpu_minutes") == [(64 * (48 * 60 - 1),)]  # two days, less the open minute
    assert rows(path, "SELECT count(*) FROM gpu_hours") == [(64 * (30 * 24 - 1),)]  # 30 days, less the open hour
    assert rows(path, "SELECT min(ts), max(ts) FROM gpu_hours") == [(END - 30 * DAY, END - 7200)]
    size = path.stat().st_size
    assert size <= 200 * 1024 * 1024
    wal = Path(f"{path}-wal")
    assert not wal.exists() or wal.stat().st_size == 0  # checkpointed


@pytest.mark.parametrize(
    ("span", "step", "count"),
    [
        (300, 1, 300),  # raw samples
        (3600, 1, 3600),
        (DAY, 60, 1439 + 60),  # minutes, then the raw samples of the minute not yet rolled up
        (7 * DAY, 3600, 167 + 59 + 60),  # hours, then minutes and raw samples of the open hour
        (30 * DAY, 3600, 719 + 59 + 60),
    ],
)
def test_history_of_a_span_comes_at_its_resolution(month: tuple[Path, list[str]], span: int, step: int, count: int) -> None:
    path, uuids = month
    g = 5
    with Store(path) as store:  # reopened: the history survives a restart
        samples = store.gpu_history(uuids[g], END - span, END)
        assert store.warnings == []
    assert len(samples) == count
    assert samples[0].ts == END - span and samples[-1].ts == END - 1
    assert steps(samples).most_common(1)[0][0] == step
    assert all(a.ts < b.ts for a, b in pairwise(samples))
    for sample in samples[:: max(1, count // 50)]:
        ts = int(sample.ts)
        if step == 1 or ts >= END - 60:
            util, memory, temp, power = second_values(g, ts)
            assert (sample.utilization, sample.memory_used_mib, sample.temperature_c) == (util, memory, temp)
            assert sample.power_w == pytest.approx(power)
        elif step == 60 or ts >= END - 3600:
            util, _peak, memory, _temp, power = minute_values(g, ts)
            assert sample.utilization == pytest.approx(util, abs=0.05)
            assert sample.memory_used_mib == memory
            assert sample.power_w == pytest.approx(power, abs=0.3)
        else:
            hour = [minute_values(g, m) for m in range(ts, ts + 3600, 60)]
            assert sample.utilization == pytest.approx(sum(h[0] for h in hour) / 60, abs=0.06)
            assert sample.temperature_c == pytest.approx(sum(h[3] for h in hour) / 60, abs=0.06)


def test_hours_written_directly_equal_hours_rolled_up_by_the_store(tmp_path: Path) -> None:
    tables = ("gpu_samples", "gpu_minutes", "gpu_hours", "store_meta")
    contents = []
    for direct in (True, False):
        path = tmp_path / f"direct-{direct}.db"
        with Store(path) as store:
            fill_history(store, gpus=3, days=4, end=END, direct_hours=direct)
        contents.append({t: rows(path, f"SELECT * FROM {t} ORDER BY 1, 2") for t in tables})
    assert contents[0] == contents[1]
    assert len(contents[0]["gpu_hours"]) == 3 * (4 * 24 - 1)


def test_a_chart_can_ask_for_finer_points(month: tuple[Path, list[str]]) -> None:
    path, uuids = month
    with Store(path) as store:
        samples = store.gpu_history(uuids[0], END - 7 * DAY, END, min_points=7 * 24 * 60)
    # minutes where they are kept (two days), hours before
    assert steps(samples)[60] > 2800 and steps(samples)[3600] >= 119
    assert samples[0].ts == END - 7 * DAY


# --------------------------------------------------------------------------- older files

V1_SCHEMA = """
CREATE TABLE readings (source TEXT PRIMARY KEY, taken_at REAL, payload TEXT NOT NULL);
CREATE TABLE gpus (id INTEGER PRIMARY KEY, uuid TEXT NOT NULL UNIQUE);
CREATE TABLE gpu_samples (ts REAL NOT NULL, gpu INTEGER NOT NULL REFERENCES gpus (id), utilization REAL,
    memory_used_mib INTEGER, temperature_c INTEGER, power_w REAL, PRIMARY KEY (ts, gpu)) WITHOUT ROWID;
CREATE TABLE gpu_minutes (gpu INTEGER NOT NULL REFERENCES gpus (id), minute INTEGER NOT NULL, utilization REAL,
    utilization_max REAL, memory_used_mib REAL, temperature_c REAL, power_w REAL, PRIMARY KEY (gpu, minute))
    WITHOUT ROWID;
CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE store_meta (key TEXT PRIMARY KEY, value);
CREATE TABLE budgets (name TEXT PRIMARY KEY, payload TEXT NOT NULL);
CREATE TABLE budget_fired (budget TEXT NOT NULL, threshold TEXT NOT NULL, action TEXT NOT NULL,
    period_start REAL NOT NULL, fired_at REAL NOT NULL, PRIMARY KEY (budget, threshold, action, period_start))
    WITHOUT ROWID;
PRAGMA user_version = 1;
"""


def test_a_schema_1_file_keeps_its_settings_budgets_and_history(db_path: Path) -> None:
    conn = sqlite3.connect(db_path)
    conn.executescript(V1_SCHEMA)
    conn.execute("INSERT INTO gpus VALUES (1, 'GPU-A')")
    conn.executemany("INSERT INTO gpu_samples VALUES (?, 1, 40.5, 1000, 61, 250.25)", [(H0 + 3600 + s + 0.5,) for s in range(3)])
    conn.executemany("INSERT INTO gpu_minutes VALUES (1, ?, 33.33, 70.0, 1000.4, 50.5, 300.0)",
                     [(H0 + 60 * m,) for m in range(60)])
    conn.execute("INSERT INTO store_meta VALUES ('rolled_until', ?)", (H0 + 3600,))
    conn.execute("INSERT INTO settings VALUES ('theme', '\"nord\"')")
    conn.commit()
    conn.close()
    seen: list[str] = []
    with Store(db_path, on_warning=seen.append) as store:
        store.save_budget(Budget("team", 100.0))
    with Store(db_path, on_warning=seen.append) as store:
        assert seen == []
        assert store.get_setting("theme") == "nord"
        assert [b.name for b in store.budgets()] == ["team"]
        history = store.gpu_history("GPU-A", H0, H0 + 3603)
        assert [s.ts for s in history] == [H0 + 60 * m for m in range(60)] + [H0 + 3600.5, H0 + 3601.5, H0 + 3602.5]
        assert (history[0].utilization, history[0].memory_used_mib, history[0].power_w) == (33.3, 1000.0, 300.0)
        assert (history[-1].utilization, history[-1].power_w) == (40.5, 250.25)
        store.maintain(H0 + 3 * 3600)
        assert [s.ts for s in store.gpu_history("GPU-A", H0 - 7 * DAY, H0 + 3 * 3600)][:1] == [H0]
    assert rows(db_path, "PRAGMA user_version") == [(SCHEMA_VERSION,)]
    assert not [p for p in db_path.parent.iterdir() if ".schema" in p.name]


def test_a_schema_1_file_that_cannot_be_converted_is_set_aside(db_path: Path) -> None:
    conn = sqlite3.connect(db_path)
    conn.executescript(V1_SCHEMA.replace("utilization_max REAL,", ""))
    conn.execute("INSERT INTO settings VALUES ('theme', '\"nord\"')")
    conn.commit()
    conn.close()
    seen: list[str] = []

    with Store(db_path, on_warning=seen.append) as store:
        assert len(seen) == 1 and "schema version 1" in seen[0] and "rebuilt" in seen[0]
        assert store.get_setting("theme") is None
        store.record_gpus([gpu("GPU-A", 10.0)], H0)
        assert len(store.gpu_history("GPU-A", H0, H0 + 1)) == 1
    aside = [p for p in db_path.parent.iterdir() if ".schema1-" in p.name]
    assert len(aside) == 1
    conn = sqlite3.connect(aside[0])
    assert conn.execute("SELECT value FROM settings").fetchall() == [('"nord"',)]  # kept untouched
    conn.close()
