"""Idle waste: a clock the test moves, GPUs the test makes idle or busy."""

from __future__ import annotations

import tracemalloc

import pytest
from msgspec.structs import replace

from gpuconsole.core.money.idle import IdleTracker, by_owner, is_idle
from gpuconsole.model import (
    Gpu,
    GpuProcess,
    IdleGpu,
    Instance,
    InstanceState,
    Market,
    MigMode,
    MigSlice,
)

T0 = 1_800_000_000.0
MIN = 60.0


def gpu(uuid: str, node: str = "n1", util: float = 0.0, **kw) -> Gpu:
    return Gpu(uuid, node, 0, "NVIDIA A100-SXM4-80GB", util, 0, 81920, 30, 60.0, 400.0, **kw)


def instance(node: str = "n1", price: float = 8.0, gpus: int = 4, owner: str | None = "alice",
             state: InstanceState = InstanceState.RUNNING, instance_id: str = "i-1") -> Instance:
    tags = (("Owner", owner),) if owner else ()
    return Instance(instance_id, "p4d.24xlarge", "us-east-1", "us-east-1a", Market.ON_DEMAND, state, 0.0, price,
                    gpus, node=node, tags=tags)


class Clock:
    def __init__(self) -> None:
        self.t = T0

    def tick(self, seconds: float) -> float:
        self.t += seconds
        return self.t


def test_idle_for_thirty_minutes_counts_as_waste():
    clock, tracker = Clock(), IdleTracker()
    inst = (instance(),)
    assert tracker.update([gpu("GPU-a")], inst, clock.t) == ()
    assert tracker.idle_since("GPU-a") == T0
    assert tracker.update([gpu("GPU-a")], inst, clock.tick(29 * MIN)) == ()
    (row,) = tracker.update([gpu("GPU-a", util=4.9)], inst, clock.tick(MIN))
    assert row == IdleGpu("GPU-a", "n1", "i-1", "alice", T0, 2.0, 1.0)  # $8 / 4 GPUs, for half an hour
    (row,) = tracker.update([gpu("GPU-a")], inst, clock.tick(30 * MIN))
    assert row.wasted == pytest.approx(2.0)


def test_busy_starts_over():
    clock, tracker = Clock(), IdleTracker()
    inst = (instance(),)
    tracker.update([gpu("GPU-a")], inst, clock.t)
    tracker.update([gpu("GPU-a", util=5.0)], inst, clock.tick(20 * MIN))
    assert tracker.idle_since("GPU-a") is None
    tracker.update([gpu("GPU-a")], inst, clock.tick(MIN))
    assert tracker.update([gpu("GPU-a")], inst, clock.tick(29 * MIN)) == ()
    assert tracker.update([gpu("GPU-a")], inst, clock.tick(MIN))[0].idle_since == T0 + 21 * MIN


def test_only_billed_instances_waste_money():
    clock, tracker = Clock(), IdleTracker()
    tracker.update([gpu("GPU-a"), gpu("GPU-b", node="n2")], (instance(state=InstanceState.STOPPING),), clock.t)
    assert tracker.update([gpu("GPU-a"), gpu("GPU-b", node="n2")], (instance(state=InstanceState.STOPPED),),
                          clock.tick(HOUR)) == ()
    assert tracker.idle_since("GPU-b") == T0, "tracked even where no instance is known"
    (row,) = tracker.update([gpu("GPU-a"), gpu("GPU-b", node="n2")], (instance(),), clock.tick(1))
    assert row.uuid == "GPU-a" and row.idle_since == T0


HOUR = 3600.0


def test_gpus_that_disappear_are_forgotten():
    clock, tracker = Clock(), IdleTracker()
    inst = (instance(),)
    tracker.update([gpu("GPU-a"), gpu("GPU-b")], inst, clock.t)
    tracker.update([gpu("GPU-b")], inst, clock.tick(MIN))
    assert tracker.idle_since("GPU-a") is None and tracker.idle_since("GPU-b") == T0
    rows = tracker.update([gpu("GPU-a"), gpu("GPU-b")], inst, clock.tick(HOUR))
    assert [r.uuid for r in rows] == ["GPU-b"], "GPU-a came back: its idle time starts over"
    assert tracker.idle_since("GPU-a") == T0 + MIN + HOUR


def test_threshold_is_configurable():
    clock, tracker = Clock(), IdleTracker(threshold_s=5 * MIN)
    tracker.update([gpu("GPU-a")], (instance(),), clock.t)
    assert len(tracker.update([gpu("GPU-a")], (instance(),), clock.tick(5 * MIN))) == 1


def test_mig_gpu_idle_only_when_every_slice_is():
    def sl(uuid: str, mem: int = 0, util: float | None = None) -> MigSlice:
        return MigSlice(uuid, "GPU-m", 1, 0, "3g.40gb", 40960, mem, util)

    quiet = gpu("GPU-m", util=0.0, mig_mode=MigMode.ENABLED, mig_slices=(sl("MIG-1"), sl("MIG-2", util=2.0)))
    assert is_idle(quiet)
    assert not is_idle(replace(quiet, mig_slices=(sl("MIG-1"), sl("MIG-2", mem=1200))))
    assert not is_idle(replace(quiet, mig_slices=(sl("MIG-1"), sl("MIG-2", util=60.0))))


def test_a_job_holding_a_gpu_without_computing_is_idle():
    stalled = gpu("GPU-s", util=0.0, processes=(GpuProcess(42, "GPU-s", "python", 30000),))
    assert stalled.busy and is_idle(stalled)


def test_most_wasted_first_and_by_owner():
    clock, tracker = Clock(), IdleTracker()
    insts = (instance(), instance(node="n2", price=2.0, gpus=1, owner=None, instance_id="i-2"),
             instance(node="n3", price=1.0, gpus=1, owner="bob", instance_id="i-3"))
    gpus = [gpu("GPU-a"), gpu("GPU-b"), gpu("GPU-c", node="n2"), gpu("GPU-d", node="n3")]
    tracker.update(gpus, insts, clock.t)
    rows = tracker.update(gpus, insts, clock.tick(HOUR))
    assert [r.uuid for r in rows] == ["GPU-a", "GPU-b", "GPU-c", "GPU-d"]  # $2, $2, $2, $1
    lines = by_owner(rows)
    assert [(x.dimension, x.key, x.amount, x.per_hour) for x in lines] == [
        ("tag:Owner", "alice", 4.0, 4.0), ("tag:Owner", "(untagged)", 2.0, 2.0), ("tag:Owner", "bob", 1.0, 1.0)]


def test_cheap_at_fleet_scale():
    nodes = 1024
    insts = tuple(instance(node=f"n{k}", instance_id=f"i-{k}", gpus=8, price=32.0) for k in range(nodes))
    gpus = [gpu(f"GPU-{k}", node=f"n{k // 8}", util=0.0 if k % 3 else 80.0) for k in range(8 * nodes)]
    tracker = IdleTracker()
    tracker.update(gpus, insts, T0)
    # a tick with thousands of GPUs idle, none for long enough yet, allocates next to nothing
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        assert tracker.update(gpus, insts, T0 + 60) == ()
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    grown = sum(d.size_diff for d in after.compare_to(before, "filename") if d.size_diff > 0
                and "idle.py" in str(d.traceback))
    assert grown < 4096, f"{grown} bytes allocated by one quiet tick"
    # Speed at this size is measured by benchmarks/idle_tracker.py, not asserted here.
    rows = tracker.update(gpus, insts, T0 + 1801)
    assert len(rows) == sum(1 for k in range(8 * nodes) if k % 3)
