"""The cache-and-history store: readings, GPU history, settings, damage recovery, threads."""

from __future__ import annotations

import json
import os
import random
import sqlite3
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuconsole.core.fleet import store as store_module, store_readings
from gpuconsole.core.fleet.store import SCHEMA_VERSION, Store, StoreError
from gpuconsole.core.paths import check_db_path, config_dir, default_db_path, state_dir
from gpuconsole.model import (
    CloudReading,
    CronJob,
    Gpu,
    GpuProcess,
    GpuReading,
    Instance,
    InstanceState,
    Job,
    JobsReading,
    JobState,
    Market,
    MigMode,
    MigSlice,
    Node,
)

T0 = 28_333_333 * 60  # a minute boundary in November 2023
DAY = 86400


def gpu(
    uuid: str = "GPU-0", utilization: float = 50.0, memory: int = 1000, temp: int = 60, power: float = 300.0
) -> Gpu:
    return Gpu(uuid, "node-a", 0, "NVIDIA A100-SXM4-80GB", utilization, memory, 81920, temp, power, 400.0)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "cache" / "gpuconsole.db"


@pytest.fixture
def store(db_path: Path):
    with Store(db_path) as s:
        yield s


def aside_files(db_path: Path, tag: str) -> list[Path]:
    return sorted(
        p
        for p in db_path.parent.iterdir()
        if p.name.startswith(f"{db_path.name}.{tag}-") and not p.name.endswith(("-wal", "-shm", "-journal"))
    )


# --------------------------------------------------------------------------- readings

MIG_GPU = Gpu(
    uuid="GPU-1",
    node="node-a",
    index=1,
    name="NVIDIA H100 80GB HBM3",
    utilization=37.5,
    memory_used_mib=20480,
    memory_total_mib=81559,
    temperature_c=71,
    power_w=512.25,
    power_limit_w=700.0,
    mig_mode=MigMode.ENABLED,
    mig_slices=(
        MigSlice("MIG-a", "GPU-1", 1, 0, "1g.10gb", 9856, 4096, 80.0, "pod-1"),
        MigSlice("MIG-b", "GPU-1", 2, 0, "3g.40gb", 40192),
    ),
    processes=(
        GpuProcess(4242, "GPU-1", "python train.py", 4096, mig_uuid="MIG-a", user="ana", pod_uid="pod-1"),
        GpuProcess(4243, "GPU-1", "nvidia-smi", 0),
    ),
)

JOBS = JobsReading(
    jobs=(
        Job("u1", "train-llm", "ml", JobState.RUNNING, T0, gpus=8, node="node-a", started=T0 + 5, image="img:1"),
        Job(
            "u2",
            "eval",
            "ml",
            JobState.PENDING,
            T0,
            mig_profile="1g.10gb",
            pending_reason="Insufficient nvidia.com/gpu",
        ),
    ),
    cronjobs=(CronJob("c1", "nightly", "ml", "0 2 * * *", T0, suspended=True, last_schedule=T0 - DAY, gpus=1),),
    nodes=(Node("node-a", "A100", 8, 8, 6, instance_id="i-1", mig_strategy="mixed", mig_capacity=(("1g.10gb", 7),)),),
    taken_at=T0 + 1.5,
)

CLOUD = CloudReading(
    instances=(
        Instance(
            "i-0abc",
            "p4d.24xlarge",
            "us-east-1",
            "us-east-1a",
            Market.SPOT,
            InstanceState.RUNNING,
            T0 - 3600,
            9.83,
            gpus=8,
            gpu_model="A100",
            accrued_cost=9.83,
            name="trainer",
            node="node-a",
            tags=(("Owner", "ana"), ("Team", "ml")),
        ),
    ),
    taken_at=T0 + 2.0,
    spend_today=120.5,
)


@pytest.mark.parametrize(
    ("key", "reading"),
    [("gpus:sim", GpuReading((MIG_GPU, gpu("GPU-2")), T0)), ("jobs:sim", JOBS), ("cloud:sim", CLOUD)],
)
def test_reading_round_trip(store: Store, key: str, reading: object) -> None:
    store.save_reading(key, reading)

    assert store.load_reading(key, type(reading)) == reading


def test_missing_reading_is_none(store: Store) -> None:
    assert store.load_reading("gpus:nowhere", GpuReading) is None


def test_newer_reading_replaces_older(store: Store) -> None:
    store.save_reading("gpus:sim", GpuReading((gpu(),), T0))
    store.save_reading("gpus:sim", GpuReading((), T0 + 1))

    assert store.load_reading("gpus:sim", GpuReading) == GpuReading((), T0 + 1)


@pytest.mark.parametrize("payload", ["{not json", '{"gpus": "nope", "taken_at": 1}', '{"taken_at": 1}', "[1, 2]"])
def test_undecodable_reading_is_none_and_dropped(store: Store, db_path: Path, payload: str) -> None:
    with sqlite3.connect(db_path) as conn:
        conn.execute("INSERT INTO readings VALUES ('gpus:sim', 1.0, ?)", (payload,))
    conn.close()

    assert store.load_reading("gpus:sim", GpuReading) is None
    with sqlite3.connect(db_path) as conn:
        assert conn.execute("SELECT count(*) FROM readings").fetchone()[0] == 0
    conn.close()


def many_jobs(count: int, state: JobState = JobState.SUCCEEDED) -> tuple[Job, ...]:
    return tuple(Job(f"uid-{i:06d}", f"train-{i:06d}", "ml", state, T0 + i, gpus=i % 9) for i in range(count))


def test_a_long_reading_is_kept_in_parts_and_read_back_whole(store: Store, db_path: Path) -> None:
    count = 2 * store_readings.PART_ITEMS + 7
    reading = JobsReading(many_jobs(count), JOBS.cronjobs, JOBS.nodes, T0)
    store.save_reading("jobs:kube", reading)

    assert store.load_reading("jobs:kube", JobsReading) == reading
    with sqlite3.connect(db_path) as conn:
        parts = conn.execute("SELECT field, part FROM reading_parts WHERE source = 'jobs:kube' ORDER BY part").fetchall()
        head = json.loads(conn.execute("SELECT payload FROM readings WHERE source = 'jobs:kube'").fetchone()[0])
    conn.close()
    assert parts == [("jobs", 0), ("jobs", 1), ("jobs", 2)]
    assert head["jobs"] == [] and len(head["nodes"]) == len(JOBS.nodes)  # the short tuples stay in the row


def test_a_shorter_reading_leaves_no_parts_of_the_last(store: Store, db_path: Path) -> None:
    store.save_reading("jobs:kube", JobsReading(many_jobs(3 * store_readings.PART_ITEMS), (), (), T0))
    store.save_reading("jobs:kube", JOBS)

    assert store.load_reading("jobs:kube", JobsReading) == JOBS
    with sqlite3.connect(db_path) as conn:
        assert conn.execute("SELECT count(*) FROM reading_parts").fetchone()[0] == 0
    conn.close()


def test_a_part_that_does_not_decode_drops_the_whole_reading(store: Store, db_path: Path) -> None:
    store.save_reading("jobs:kube", JobsReading(many_jobs(store_readings.PART_ITEMS + 1), (), (), T0))
    with sqlite3.connect(db_path) as conn:
        conn.execute("UPDATE reading_parts SET payload = '[{\"uid\": 1}]' WHERE part = 1")
    conn.close()

    assert store.load_reading("jobs:kube", JobsReading) is None
    with sqlite3.connect(db_path) as conn:
        assert conn.execute("SELECT count(*) FROM readings").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM reading_parts").fetchone()[0] == 0
    conn.close()


def test_a_file_made_before_reading_parts_gains_the_table(db_path: Path) -> None:
    with Store(db_path) as first:
        first.save_reading("gpus:sim", GpuReading((gpu(),), T0))
    with sqlite3.connect(db_path) as conn:
        conn.execute("DROP TABLE reading_parts")
    conn.close()

    with Store(db_path) as again:
        assert again.warnings == []  # converted in place, not set aside
        assert again.load_reading("gpus:sim", GpuReading) == GpuReading((gpu(),), T0)
        long = JobsReading(many_jobs(store_readings.PART_ITEMS + 1), (), (), T0)
        again.save_reading("jobs:kube", long)
        assert again.load_reading("jobs:kube", JobsReading) == long


names = st.text(max_size=12)
numbers = st.floats(allow_nan=False, allow_infinity=False, width=64)
counts = st.integers(min_value=0, max_value=2**40)
maybe = st.none

mig_slices = st.builds(
    MigSlice, names, names, counts, counts, names, counts, counts, numbers | maybe(), names | maybe()
)
processes = st.builds(GpuProcess, counts, names, names, counts, names | maybe(), names | maybe(), names | maybe())
gpus = st.builds(
    Gpu,
    names,
    names,
    counts,
    names,
    numbers,
    counts,
    counts,
    st.integers(-50, 150),
    numbers,
    numbers,
    st.sampled_from(MigMode),
    st.tuples(mig_slices) | st.just(()),
    st.lists(processes, max_size=2).map(tuple),
)
jobs = st.builds(
    Job,
    names,
    names,
    names,
    st.sampled_from(JobState),
    numbers,
    counts,
    names | maybe(),
    names | maybe(),
    numbers | maybe(),
    numbers | maybe(),
    names | maybe(),
    names | maybe(),
    names,
    names | maybe(),
    names | maybe(),
)
cronjobs = st.builds(
    CronJob, names, names, names, names, numbers, st.booleans(), numbers | maybe(), numbers | maybe(), counts
)
nodes = st.builds(
    Node,
    names,
    names,
    counts,
    counts,
    counts,
    names | maybe(),
    names | maybe(),
    st.lists(st.tuples(names, counts), max_size=2).map(tuple),
    st.booleans(),
)
instances = st.builds(
    Instance,
    names,
    names,
    names,
    names,
    st.sampled_from(Market),
    st.sampled_from(InstanceState),
    numbers,
    numbers,
    counts,
    names,
    numbers,
    names,
    names | maybe(),
    st.lists(st.tuples(names, names), max_size=3).map(tuple),
)
readings = st.one_of(
    st.builds(GpuReading, st.lists(gpus, max_size=3).map(tuple), numbers),
    st.builds(
        JobsReading,
        st.lists(jobs, max_size=2).map(tuple),
        st.lists(cronjobs, max_size=2).map(tuple),
        st.lists(nodes, max_size=2).map(tuple),
        numbers,
    ),
    st.builds(CloudReading, st.lists(instances, max_size=2).map(tuple), numbers, numbers | maybe(), numbers | maybe()),
)


@pytest.fixture(scope="module")
def shared_store(tmp_path_factory: pytest.TempPathFactory):
    with Store(tmp_path_factory.mktemp("hypothesis") / "gpuconsole.db") as s:
        yield s


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(reading=readings)
def test_any_reading_round_trips(shared_store: Store, reading: object) -> None:
    shared_store.save_reading("any", reading)

    assert shared_store.load_reading("any", type(reading)) == reading


# --------------------------------------------------------------------------- settings


def test_settings(store: Store) -> None:
    assert store.get_setting("theme") is None
    assert store.get_setting("theme", "textual-dark") == "textual-dark"

    store.set_setting("theme", "nord")
    store.set_setting("columns", {"gpus": ["util", "mem"], "width": 3})

    assert store.get_setting("theme") == "nord"
    assert store.get_setting("columns") == {"gpus": ["util", "mem"], "width": 3}


# --------------------------------------------------------------------------- GPU history


def record_two_hours(store: Store, uuids: tuple[str, ...] = ("GPU-A", "GPU-B")) -> None:
    """Per-second samples from T0 for two hours; values make each minute's average known.

    At second ``s`` of minute ``m``: utilization is ``s`` (average 29.5, peak 59), memory is
    ``1000 + m``, temperature alternates 50/51 (average 50.5), power is ``100 + 2m`` (+ 10 for
    GPU-B).
    """
    for second in range(7200):
        m, s = divmod(second, 60)
        store.record_gpus(
            [gpu(u, float(s), 1000 + m, 50 + s % 2, 100.0 + 2 * m + 10 * i) for i, u in enumerate(uuids)],
            T0 + second,
        )


def raw_timestamps(db_path: Path) -> list[float]:
    conn = sqlite3.connect(db_path)
    try:
        return [row[0] / 1000 for row in conn.execute("SELECT DISTINCT ts_ms FROM gpu_samples ORDER BY ts_ms")]
    finally:
        conn.close()


def test_history_rolls_up_and_keeps_raw_for_an_hour(store: Store, db_path: Path) -> None:
    record_two_hours(store)
    now = T0 + 7200

    store.maintain(now)
    store.maintain(now)  # a second call changes nothing

    ts = raw_timestamps(db_path)
    assert ts[0] == T0 + 3600 and ts[-1] == T0 + 7199
    assert len(ts) == 3600

    old = store.gpu_history("GPU-B", T0, T0 + 1800)
    assert [s.ts for s in old] == [T0 + 60 * m for m in range(31)]
    for m, sample in enumerate(old):
        assert sample.utilization == pytest.approx(29.5)
        assert sample.memory_used_mib == 1000 + m
        assert sample.temperature_c == pytest.approx(50.5)
        assert sample.power_w == pytest.approx(110.0 + 2 * m)
    with sqlite3.connect(db_path) as conn:
        peaks = {row[0] for row in conn.execute("SELECT utilization_max FROM gpu_minutes")}
    conn.close()
    assert peaks == {590}  # tenths of a percent

    recent = store.gpu_history("GPU-A", T0 + 5400, T0 + 5460)
    assert [s.ts for s in recent] == [T0 + 5400 + i for i in range(61)]
    assert [s.utilization for s in recent[:3]] == [0.0, 1.0, 2.0]
    assert recent[0].memory_used_mib == 1090 and recent[0].power_w == 280.0


def test_history_across_the_raw_boundary_is_sorted(store: Store) -> None:
    record_two_hours(store)
    store.maintain(T0 + 7200)

    samples = store.gpu_history("GPU-A", T0 + 3000, T0 + 3700)

    assert [s.ts for s in samples] == [T0 + 3000 + 60 * m for m in range(10)] + [T0 + 3600 + i for i in range(101)]
    assert [s.ts for s in store.gpu_history("GPU-A", T0 + 7150)] == [T0 + 7150 + i for i in range(50)]
    assert store.gpu_history("GPU-unknown", T0) == []


def test_maintain_every_minute_keeps_an_hour_of_raw(store: Store, db_path: Path) -> None:
    for second in range(7200):
        store.record_gpus([gpu("GPU-A", float(second % 60))], T0 + second)
        if second % 60 == 59:
            store.maintain(T0 + second + 1)

    ts = raw_timestamps(db_path)
    assert ts[0] == T0 + 7200 - 3600
    minutes = store.gpu_history("GPU-A", T0, T0 + 3540)
    assert len(minutes) == 60
    assert {s.utilization for s in minutes} == {29.5}


def test_minutes_older_than_two_days_live_on_as_hours(store: Store) -> None:
    for day in (0, 1, 3):
        store.record_gpus([gpu("GPU-A", 10.0 + day)], T0 + day * DAY)
        store.maintain(T0 + day * DAY + 120)

    store.maintain(T0 + 3 * DAY + 3600)

    minutes = store.gpu_history("GPU-A", T0, T0 + 3 * DAY + 3600, min_points=1_000_000)
    assert [(s.ts, s.utilization) for s in minutes] == [
        (T0 - T0 % 3600, 10.0),  # hours where minutes are gone
        (T0 + DAY - (T0 + DAY) % 3600, 11.0),
        (T0 + 3 * DAY, 13.0),
    ]
    assert len(store.gpu_history("GPU-A", 0)) == 3


def test_late_maintain_rolls_up_before_dropping_raw(store: Store) -> None:
    for second in range(180):
        store.record_gpus([gpu("GPU-A", 40.0)], T0 + second)

    store.maintain(T0 + 5 * 3600)  # the console was closed for hours

    assert [(s.ts, s.utilization) for s in store.gpu_history("GPU-A", T0, T0 + 180)] == [
        (T0, 40.0),
        (T0 + 60, 40.0),
        (T0 + 120, 40.0),
    ]


def test_record_gpus_with_no_gpus_is_a_no_op(store: Store) -> None:
    store.record_gpus([], T0)
    store.maintain(T0 + 3600)

    assert store.gpu_history("GPU-A", 0) == []


# --------------------------------------------------------------------------- restart


def test_store_survives_a_restart(db_path: Path) -> None:
    reading = GpuReading((MIG_GPU,), T0)
    with Store(db_path) as first:
        first.save_reading("gpus:nvml", reading)
        first.set_setting("theme", "nord")
        record_two_hours(first, ("GPU-A",))
        first.maintain(T0 + 7200)
        before = first.gpu_history("GPU-A", T0)

    with Store(db_path) as second:
        assert second.load_reading("gpus:nvml", GpuReading) == reading
        assert second.get_setting("theme") == "nord"
        assert second.gpu_history("GPU-A", T0) == before
        second.record_gpus([gpu("GPU-A"), gpu("GPU-new")], T0 + 7200)
        assert second.gpu_history("GPU-A", T0 + 7200)[0].ts == T0 + 7200
        assert len(second.gpu_history("GPU-new", T0)) == 1
        assert second.warnings == []


# --------------------------------------------------------------------------- damage


def fill(path: Path) -> None:
    with Store(path) as s:
        s.save_reading("gpus:sim", GpuReading(tuple(gpu(f"GPU-{i}") for i in range(200)), T0))
        for second in range(60):
            s.record_gpus([gpu(f"GPU-{i}") for i in range(50)], T0 + second)


def assert_rebuilt(store: Store, db_path: Path, tag: str, seen: list[str]) -> None:
    kept = aside_files(db_path, tag)
    assert len(kept) == 1
    assert seen == store.warnings and len(seen) == 1
    assert "\n" not in seen[0] and str(kept[0]) in seen[0] and "rebuilt" in seen[0]
    store.save_reading("gpus:sim", GpuReading((gpu(),), T0))
    assert store.load_reading("gpus:sim", GpuReading) == GpuReading((gpu(),), T0)


def test_random_bytes_are_rebuilt_with_a_warning(db_path: Path) -> None:
    db_path.parent.mkdir(parents=True)
    junk = random.Random(7).randbytes(20_000)
    db_path.write_bytes(junk)
    seen: list[str] = []

    with Store(db_path, on_warning=seen.append) as store:
        assert "was corrupt" in seen[0]
        assert_rebuilt(store, db_path, "corrupt", seen)
    assert aside_files(db_path, "corrupt")[0].read_bytes() == junk


def test_truncated_database_is_rebuilt(db_path: Path) -> None:
    fill(db_path)
    size = db_path.stat().st_size
    with db_path.open("r+b") as f:
        f.truncate(size // 2)
    seen: list[str] = []

    with Store(db_path, on_warning=seen.append) as store:
        assert_rebuilt(store, db_path, "corrupt", seen)
        assert store.gpu_history("GPU-0", 0) == []


def test_corruption_found_after_opening_is_rebuilt(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fill(db_path)
    with db_path.open("r+b") as f:  # clobber every page but the first (the schema)
        f.seek(4096)
        f.write(b"\xa5" * (db_path.stat().st_size - 4096))
    monkeypatch.setattr(store_module, "QUICK_CHECK_MAX_BYTES", 0)  # as for a large file
    seen: list[str] = []

    with Store(db_path, on_warning=seen.append) as store:
        assert seen == []
        assert store.load_reading("gpus:sim", GpuReading) is None
        assert_rebuilt(store, db_path, "corrupt", seen)


def test_other_schema_version_is_rebuilt(db_path: Path) -> None:
    fill(db_path)
    conn = sqlite3.connect(db_path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    seen: list[str] = []

    with Store(db_path, on_warning=seen.append) as store:
        assert f"schema version {SCHEMA_VERSION + 1}" in seen[0]
        assert_rebuilt(store, db_path, f"schema{SCHEMA_VERSION + 1}", seen)
        assert store.gpu_history("GPU-0", 0) == []


def test_a_foreign_database_is_kept_aside_untouched(db_path: Path) -> None:
    db_path.parent.mkdir(parents=True)
    conn = sqlite3.connect(db_path)
    conn.execute("CREATE TABLE notes (body TEXT)")
    conn.execute("INSERT INTO notes VALUES ('mine')")
    conn.commit()
    conn.close()
    seen: list[str] = []

    with Store(db_path, on_warning=seen.append) as store:
        assert_rebuilt(store, db_path, "schema0", seen)
    conn = sqlite3.connect(aside_files(db_path, "schema0")[0])
    assert conn.execute("SELECT body FROM notes").fetchall() == [("mine",)]
    conn.close()


def test_unwritable_location_raises_store_error(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")

    with pytest.raises(StoreError):
        Store(blocker / "gpuconsole.db")


# --------------------------------------------------------------------------- threads


def test_writes_from_two_threads_at_once(store: Store) -> None:
    errors: list[BaseException] = []
    start = threading.Barrier(3)

    def writer(prefix: str) -> None:
        try:
            start.wait()
            for second in range(300):
                store.record_gpus([gpu(f"{prefix}-{i}", float(second % 100)) for i in range(32)], T0 + second)
                if second % 50 == 0:
                    store.save_reading(prefix, GpuReading((gpu(prefix),), T0 + second))
                    store.maintain(T0 + second)
        except BaseException as exc:  # collected and asserted on below
            errors.append(exc)

    def reader() -> None:
        try:
            start.wait()
            for _ in range(100):
                store.gpu_history("A-0", T0)
                store.load_reading("A", GpuReading)
        except BaseException as exc:  # collected and asserted on below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(p,)) for p in ("A", "B")] + [threading.Thread(target=reader)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert errors == []
    for prefix in ("A", "B"):
        history = store.gpu_history(f"{prefix}-31", T0)
        assert len(history) == 300
        assert store.load_reading(prefix, GpuReading) == GpuReading((gpu(prefix),), T0 + 250)


def test_connections_of_ended_threads_are_closed(store: Store) -> None:
    for n in range(8):
        t = threading.Thread(target=store.set_setting, args=("n", n))
        t.start()
        t.join()

    assert store.get_setting("n") == 7
    assert len(store._connections) <= 2  # this thread's and at most the last worker's


def test_writes_from_many_threads_at_once_all_read_back(db_path: Path) -> None:
    """Eight threads write settings, budgets, fired actions, readings and samples at once; each
    write is seen as soon as it returns, everything reads back after, and every write ran on the
    store's one writer thread."""
    from gpuconsole.model import Budget

    store = Store(db_path)
    errors: list[BaseException] = []
    writers: set[threading.Thread] = set()
    start = threading.Barrier(8)

    def work(n: int) -> None:
        try:
            start.wait()
            for i in range(20):
                store.set_setting(f"t{n}-{i}", [n, i])
                assert store.get_setting(f"t{n}-{i}") == [n, i]  # seen at once, from this thread
                assert store.save_budget(Budget(name=f"b{n}-{i}", amount=100.0 + i))
                assert store.mark_budget_fired(f"b{n}-{i}", "80", "notify", T0, T0 + i)
                store.record_gpus([gpu(f"GPU-{n}", float(i))], T0 + i)
            store.save_reading(f"r{n}", GpuReading((gpu(f"GPU-{n}"),), T0 + n))
            writers.add(store._write("ask the writer", lambda _db: threading.current_thread()))
        except BaseException as exc:  # collected and asserted on below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(writers) == 1 and threading.current_thread() not in writers
    store.close()  # drains and stops the writer
    assert not any(t.is_alive() for t in writers)

    with Store(db_path) as again:
        assert {b.name for b in again.budgets()} == {f"b{n}-{i}" for n in range(8) for i in range(20)}
        assert len(again.budget_fired()) == 8 * 20
        for n in range(8):
            assert again.get_setting(f"t{n}-19") == [n, 19]
            assert again.load_reading(f"r{n}", GpuReading) == GpuReading((gpu(f"GPU-{n}"),), T0 + n)
            assert [s.utilization for s in again.gpu_history(f"GPU-{n}", T0)] == [float(i) for i in range(20)]


def test_close_then_use_again(store: Store) -> None:
    store.set_setting("theme", "nord")
    store.close()

    assert store.get_setting("theme") == "nord"


# --------------------------------------------------------------------------- paths


def test_check_db_path_under_a_regular_file(tmp_path: Path) -> None:
    blocker = tmp_path / "plain-file"
    blocker.write_text("")
    target = blocker / "sub" / "gpuconsole.db"

    with pytest.raises(StoreError) as info:
        check_db_path(target)

    message = str(info.value)
    assert message.startswith(f"cannot write the database at {target}: ")
    assert "not a directory" in message and "\n" not in message


def test_check_db_path_on_a_directory(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="is a directory"):
        check_db_path(tmp_path)


def test_check_db_path_creates_the_directory_and_leaves_nothing_else(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "gpuconsole.db"

    check_db_path(target)

    assert target.parent.is_dir()
    assert list(target.parent.iterdir()) == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_check_db_path_in_a_read_only_directory(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    try:
        with pytest.raises(StoreError, match="not writable"):
            check_db_path(locked / "gpuconsole.db")
    finally:
        locked.chmod(0o700)


def test_default_db_path_respects_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("GPUCONSOLE_DB", str(tmp_path / "elsewhere.db"))
    assert default_db_path() == tmp_path / "elsewhere.db"

    monkeypatch.delenv("GPUCONSOLE_DB")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    assert default_db_path() == tmp_path / "xdg-cache" / "gpuconsole" / "gpuconsole.db"


def test_config_and_state_dirs_are_per_app(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))

    assert config_dir() == tmp_path / "config" / "gpuconsole"
    assert state_dir() == tmp_path / "state" / "gpuconsole"


def test_settings_survive_json_edge_values(store: Store) -> None:
    value = {"list": [1, 2.5, None, True], "text": "ünïcode ✓", "nested": {"a": []}}
    store.set_setting("edge", value)

    assert store.get_setting("edge") == json.loads(json.dumps(value))
