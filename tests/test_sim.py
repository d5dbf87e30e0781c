"""The simulated GPU cloud: determinism, realism of what it reports, scheduling, time, faults."""

from __future__ import annotations

import re
import threading
import time
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuconsole.backends.base import (
    BackendError,
    Capability,
    CloudBackend,
    GpuSource,
    JobBackend,
)
from gpuconsole.backends.sim import FaultMode, FaultPlan, SimWorld, make_sim
from gpuconsole.model import (
    InstanceState,
    JobState,
    Market,
    MigMode,
    to_jsonable,
)

START = 1717200000.0  # 2024-06-01 00:00:00 UTC, on the hour

GPU_UUID = re.compile(r"^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
MIG_UUID = re.compile(r"^MIG-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
UUID4 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
INSTANCE_ID = re.compile(r"^i-[0-9a-f]{17}$")
NODE_EAST = re.compile(r"^ip-10-0-\d{1,3}-\d{1,3}\.ec2\.internal$")
NODE_WEST = re.compile(r"^ip-10-1-\d{1,3}-\d{1,3}\.us-west-2\.compute\.internal$")
RFC1123 = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


def readings(world: SimWorld) -> list[object]:
    return [to_jsonable(world.gpu_reading()), to_jsonable(world.jobs_reading()),
            to_jsonable(world.cloud_reading())]


def job_named(world: SimWorld, uid: str):
    return next((j for j in world.jobs_reading().jobs if j.uid == uid), None)


# ------------------------------------------------------------------ determinism


def test_same_seed_same_readings_and_different_seeds_differ() -> None:
    a, b, c = SimWorld(seed=7, start=START), SimWorld(seed=7, start=START), SimWorld(seed=8, start=START)
    for _ in range(300):
        a.step()
        b.step()
        c.step()
    assert a.now == b.now == START + 300
    assert readings(a) == readings(b)
    ra, rc = readings(a), readings(c)
    assert all(x != y for x, y in zip(ra, rc, strict=True))


def test_start_defaults_to_a_whole_second_of_the_wall_clock() -> None:
    before = time.time()
    world = SimWorld()
    assert world.now == int(world.now)
    assert int(before) <= world.now <= time.time()


def test_advance_to_steps_whole_seconds_and_jumps_long_gaps() -> None:
    world = SimWorld(start=START)
    world.advance_to(START + 10.7)
    assert world.now == START + 10
    world.advance_to(START + 5)  # never backwards
    assert world.now == START + 10
    target = START + 10 * 3600
    world.advance_to(target, max_steps=3600)
    assert world.now == target
    jobs = world.jobs_reading().jobs
    assert jobs and all(j.finished is None or j.finished <= target for j in jobs)
    assert all(j.state is not JobState.RUNNING or (j.started or 0) <= target for j in jobs)


# ------------------------------------------------------------------ what it looks like


def test_identifiers_have_real_formats() -> None:
    world = SimWorld(seed=3, start=START)
    world.step(30)
    gpus = world.gpu_reading().gpus
    assert all(GPU_UUID.match(g.uuid) for g in gpus)
    slices = [s for g in gpus for s in g.mig_slices]
    assert slices and all(MIG_UUID.match(s.uuid) for s in slices)
    for inst in world.cloud_reading().instances:
        assert INSTANCE_ID.match(inst.instance_id)
        pattern = NODE_EAST if inst.region == "us-east-1" else NODE_WEST
        assert inst.node and pattern.match(inst.node), inst.node
    reading = world.jobs_reading()
    for job in reading.jobs:
        assert RFC1123.match(job.name), job.name
        assert UUID4.match(job.uid) and job.pod_uid and UUID4.match(job.pod_uid)
    assert all(UUID4.match(c.uid) for c in reading.cronjobs)
    assert len({g.uuid for g in gpus}) == len(gpus)


def test_default_fleet_mix() -> None:
    world = SimWorld(seed=7, start=START)
    instances = world.cloud_reading().instances
    assert Counter(i.instance_type for i in instances) == {
        "p4de.24xlarge": 1, "p5.48xlarge": 1, "g5.12xlarge": 1, "g5.xlarge": 2,
        "g4dn.xlarge": 2, "g6.xlarge": 1,
    }
    assert {i.region for i in instances} == {"us-east-1", "us-west-2"}
    spot = [i for i in instances if i.market is Market.SPOT]
    assert {i.instance_type for i in spot} == {"g4dn.xlarge", "g5.xlarge", "g6.xlarge"}
    prices = {i.instance_type: i.price_per_hour for i in instances if i.market is Market.ON_DEMAND}
    assert prices["p4de.24xlarge"] == 40.96608 and prices["p5.48xlarge"] == 98.32
    for inst in spot:
        on_demand = {t.name: t.on_demand_price for t in world.instance_types()}[inst.instance_type]
        assert 0.3 * on_demand <= inst.price_per_hour <= 0.7 * on_demand
    for inst in instances:
        assert inst.state is InstanceState.RUNNING
        assert START - 40 * 86400 < inst.launch_time < START - 86400
        assert {"Name", "Owner", "Project"} <= {k for k, _ in inst.tags}
        assert inst.tag("Name") == inst.name
    p4de = next(i for i in instances if i.instance_type == "p4de.24xlarge")
    assert p4de.accrued_cost > 10_000  # weeks of a $41/h instance

    gpus = world.gpu_reading().gpus
    assert len(gpus) == 25
    assert Counter(g.name for g in gpus) == {
        "NVIDIA A100-SXM4-80GB": 8, "NVIDIA H100 80GB HBM3": 8, "NVIDIA A10G": 6, "Tesla T4": 2,
        "NVIDIA L4": 1,
    }
    mig = [g for g in gpus if g.mig_mode is MigMode.ENABLED]
    assert len(mig) == 1 and mig[0].node == p4de.node
    assert sorted(s.profile for s in mig[0].mig_slices) == ["1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb"]
    assert sum(s.memory_total_mib for s in mig[0].mig_slices) <= mig[0].memory_total_mib

    nodes = {n.name: n for n in world.jobs_reading().nodes}
    assert len(nodes) == 8
    mig_node = nodes[p4de.node]
    assert mig_node.mig_strategy == "mixed" and mig_node.gpu_capacity == 7
    assert dict(mig_node.mig_capacity) == {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}
    assert mig_node.gpu_product == "NVIDIA-A100-SXM4-80GB" and mig_node.instance_id == p4de.instance_id


def test_default_workload_is_busy_with_a_short_queue() -> None:
    world = SimWorld(seed=7, start=START)
    reading = world.jobs_reading()
    states = Counter(j.state for j in reading.jobs)
    assert 25 <= len(reading.jobs) <= 45
    assert 2 <= states[JobState.PENDING] <= 10
    assert states[JobState.SUSPENDED] == 2
    assert {j.namespace for j in reading.jobs} <= {"team-nlp", "team-vision", "research", "inference"}
    assert all(j.node and j.started and j.pod_uid for j in reading.jobs if j.state is JobState.RUNNING)
    assert all(j.pending_reason for j in reading.jobs if j.state is JobState.PENDING)
    assert 3 <= len(reading.cronjobs) <= 5
    assert sum(c.suspended for c in reading.cronjobs) == 1
    assert all(c.next_schedule and c.last_schedule for c in reading.cronjobs if not c.suspended)


def test_gpu_telemetry_follows_jobs() -> None:
    world = SimWorld(seed=7, start=START)
    world.step(120)
    by_pod = {uid: j for j in world.jobs_reading().jobs if j.state is JobState.RUNNING
              for uid in (j.pod_uid, *j.pod_uids)}
    gpus = world.gpu_reading().gpus
    for g in gpus:
        if g.mig_mode is MigMode.ENABLED:
            assert g.utilization == pytest.approx(
                sum((s.utilization or 0) * int(s.profile[0]) for s in g.mig_slices) / 7, abs=0.2)
            for s in g.mig_slices:
                assert (s.pod_uid is None) == (s.memory_used_mib == 0)
            continue
        if not g.processes:
            assert g.utilization == 0 and g.memory_used_mib < 500
            assert g.power_w <= 0.25 * g.power_limit_w and g.temperature_c <= 42
            continue
        (proc,) = g.processes
        job = by_pod[proc.pod_uid]
        assert proc.user == job.owner and proc.name == "python" and g.node in (job.nodes or (job.node,))
        assert g.memory_used_mib >= proc.memory_used_mib > 0.4 * g.memory_total_mib
    busy = [g for g in gpus if g.processes and g.mig_mode is MigMode.DISABLED]
    assert any(g.utilization >= 60 for g in busy)


def test_some_gpus_are_held_but_idle() -> None:
    world = SimWorld(seed=7, nodes=16, start=START)
    world.step(60)
    stalled = [g for g in world.gpu_reading().gpus
               if g.processes and g.mig_mode is MigMode.DISABLED and g.utilization <= 3]
    assert stalled
    for g in stalled:
        assert g.memory_used_mib > 0.4 * g.memory_total_mib and g.power_w < 0.3 * g.power_limit_w


# ------------------------------------------------------------------ scheduling


def test_job_too_big_for_any_node_stays_pending() -> None:
    world = SimWorld(seed=7, start=START)
    job = world.submit_job("huge-pretrain", "research", 16)
    world.step(5)
    seen = job_named(world, job.uid)
    assert seen is not None and seen.state is JobState.PENDING
    assert seen.pending_reason == "0/8 nodes are available: 8 Insufficient nvidia.com/gpu."


def test_mig_job_lands_on_a_free_slice_and_the_rest_wait() -> None:
    world = SimWorld(seed=7, start=START)
    world.set_cronjob_suspended("hourly-embeddings-refresh", True)
    for j in world.jobs_reading().jobs:
        if j.mig_profile == "1g.10gb" and j.state in (JobState.PENDING, JobState.RUNNING):
            world.delete_job(j.uid)
    submitted = [world.submit_job(f"embed-test-{k}", "inference", mig_profile="1g.10gb") for k in range(3)]
    world.step(1)
    seen = [job_named(world, j.uid) for j in submitted]
    assert [s.state for s in seen if s] == [JobState.RUNNING, JobState.RUNNING, JobState.PENDING]
    assert seen[2] is not None and seen[2].pending_reason == (
        "0/8 nodes are available: 1 Insufficient nvidia.com/mig-1g.10gb, "
        "7 node(s) didn't match Pod's node affinity/selector.")
    mig_gpu = next(g for g in world.gpu_reading().gpus if g.mig_mode is MigMode.ENABLED)
    for job in seen[:2]:
        assert job is not None and job.node == mig_gpu.node and job.gpu_request == "1×1g.10gb"
        (sl,) = [s for s in mig_gpu.mig_slices if s.pod_uid == job.pod_uid]
        assert sl.profile == "1g.10gb" and sl.memory_used_mib > 0
        (proc,) = [p for p in mig_gpu.processes if p.pod_uid == job.pod_uid]
        assert proc.mig_uuid == sl.uuid and proc.gpu_uuid == mig_gpu.uuid


def test_jobs_run_to_completion_and_old_ones_are_dropped() -> None:
    world = SimWorld(seed=11, start=START)
    history: dict[str, list[JobState]] = {}
    for _ in range(6 * 60):
        world.step(60)
        for job in world.jobs_reading().jobs:
            states = history.setdefault(job.uid, [])
            if not states or states[-1] is not job.state:
                states.append(job.state)
    full = [s for s in history.values() if s[:2] == [JobState.PENDING, JobState.RUNNING] and len(s) == 3]
    assert full and {s[2] for s in full} <= {JobState.SUCCEEDED, JobState.FAILED}
    finished = Counter(s[-1] for s in history.values() if s[-1] in (JobState.SUCCEEDED, JobState.FAILED))
    assert finished[JobState.SUCCEEDED] > finished[JobState.FAILED] > 0
    now = world.now
    for job in world.jobs_reading().jobs:
        if job.finished is not None:
            assert now - job.finished <= 3600 + 60
            assert job.started is not None and job.created <= job.started <= job.finished


def test_cronjob_fires_at_its_schedule() -> None:
    boundary = START + 3600
    clock = [boundary - 5]
    _, jobs, _ = make_sim(seed=7, start=boundary - 5, clock=lambda: clock[0])
    before = {c.name: c for c in jobs.poll_jobs().cronjobs}
    assert before["hourly-embeddings-refresh"].next_schedule == boundary
    clock[0] = boundary + 5
    reading = jobs.poll_jobs()
    cron = {c.name: c for c in reading.cronjobs}["hourly-embeddings-refresh"]
    assert cron.last_schedule == boundary and cron.next_schedule == boundary + 3600
    made = [j for j in reading.jobs if j.cronjob == "hourly-embeddings-refresh" and j.created == boundary]
    assert len(made) == 1 and made[0].name == f"hourly-embeddings-refresh-{int(boundary // 60)}"
    assert made[0].mig_profile == "1g.10gb" and cron.active >= 1
    suspended = next(c for c in reading.cronjobs if c.suspended)
    assert suspended.next_schedule is None


# ------------------------------------------------------------------ money and instances


def test_accrued_cost_grows_by_price_times_time() -> None:
    world = SimWorld(seed=7, start=START)
    before = {i.instance_id: i for i in world.cloud_reading().instances}
    world.step(3600)
    for inst in world.cloud_reading().instances:
        if inst.market is Market.ON_DEMAND:
            old = before[inst.instance_id]
            assert inst.accrued_cost - old.accrued_cost == pytest.approx(inst.price_per_hour, abs=1e-3)


def test_stopping_an_instance_stops_billing_and_removes_its_node() -> None:
    world = SimWorld(seed=7, start=START)
    p5 = next(i for i in world.cloud_reading().instances if i.instance_type == "p5.48xlarge")
    assert world.stop_instance(p5.instance_id).state is InstanceState.STOPPING
    world.step(90)
    now = {i.instance_id: i for i in world.cloud_reading().instances}[p5.instance_id]
    assert now.state is InstanceState.STOPPED
    assert p5.node not in {n.name for n in world.jobs_reading().nodes}
    assert p5.node not in {g.node for g in world.gpu_reading().gpus}
    assert all(j.node != p5.node for j in world.jobs_reading().jobs if j.state is JobState.RUNNING)
    world.step(600)
    later = {i.instance_id: i for i in world.cloud_reading().instances}[p5.instance_id]
    assert later.accrued_cost == now.accrued_cost
    spot = next(i for i in world.cloud_reading().instances if i.market is Market.SPOT)
    with pytest.raises(ValueError, match="Spot"):
        world.stop_instance(spot.instance_id)


def test_launch_and_terminate_through_the_cloud_face() -> None:
    clock = [START]
    _, jobs, cloud = make_sim(seed=5, start=START, clock=lambda: clock[0])
    inst = cloud.launch_instance("g6.xlarge", "us-west-2b", Market.ON_DEMAND, name="bench-l4",
                                 owner="alice", project="research")
    assert inst.state is InstanceState.PENDING and INSTANCE_ID.match(inst.instance_id)
    clock[0] += 120
    assert inst.node in {n.name for n in jobs.poll_jobs().nodes}
    assert cloud.terminate_instance(inst.instance_id).state is InstanceState.SHUTTING_DOWN
    clock[0] += 120
    states = {i.instance_id: i.state for i in cloud.poll_instances().instances}
    assert states[inst.instance_id] is InstanceState.TERMINATED
    clock[0] += 900
    after = cloud.poll_instances().instances
    assert inst.instance_id not in {i.instance_id for i in after}
    assert not [i for i in after if i.name == "bench-l4"]  # no replacement for a user's terminate
    with pytest.raises(BackendError, match="InvalidInstanceID"):
        cloud.stop_instance("i-00000000000000000")
    with pytest.raises(BackendError, match="not found"):
        jobs.submit_job("x", "nowhere")


def test_spot_interruption_happens_and_the_fleet_recovers() -> None:
    world = SimWorld(seed=7, start=START)
    spot_ids = {i.instance_id for i in world.cloud_reading().instances if i.market is Market.SPOT}
    victim = None
    for _ in range(24 * 12):
        world.step(300)
        victim = next((i for i in world.cloud_reading().instances if i.instance_id in spot_ids
                       and i.state in (InstanceState.SHUTTING_DOWN, InstanceState.TERMINATED)), None)
        if victim is not None:
            break
    assert victim is not None, "no spot interruption in a simulated day"
    world.step(120)
    assert victim.node not in {n.name for n in world.jobs_reading().nodes}
    assert victim.node not in {g.node for g in world.gpu_reading().gpus}
    assert all(j.node != victim.node for j in world.jobs_reading().jobs if j.state is JobState.RUNNING)
    world.step(15 * 60)
    instances = world.cloud_reading().instances
    assert victim.instance_id not in {i.instance_id for i in instances}  # gone after ~10 min
    (replacement,) = [i for i in instances if i.name == victim.name]
    assert replacement.instance_id != victim.instance_id and replacement.node != victim.node
    assert replacement.state is InstanceState.RUNNING and replacement.market is Market.SPOT
    assert replacement.node in {n.name for n in world.jobs_reading().nodes}
    assert len(world.gpu_reading().gpus) == 25


# ------------------------------------------------------------------ scale


def test_scaled_world() -> None:
    t0 = time.perf_counter()
    world = SimWorld(seed=1, nodes=128, start=START)
    assert time.perf_counter() - t0 < 2.0
    nodes = world.jobs_reading().nodes
    gpus = world.gpu_reading().gpus
    assert len(nodes) == 128
    per_node = Counter(g.node for g in gpus)
    assert len(per_node) == 128 and max(per_node.values()) == 8 and min(per_node.values()) >= 1
    assert 900 <= len(gpus) <= 1024
    assert Counter(per_node.values())[8] > 100
    jobs = world.jobs_reading().jobs
    running = sum(1 for j in jobs if j.state is JobState.RUNNING)
    assert len(gpus) / 4 <= running <= len(gpus)
    assert any(g.mig_mode is MigMode.ENABLED for g in gpus)
    world.step(10)
    assert len(world.gpu_reading().gpus) == len(gpus)


def test_thousand_node_world_builds() -> None:
    world = SimWorld(seed=2, nodes=1024, start=START)
    assert len(world.jobs_reading().nodes) == 1024
    world.step()
    assert len(world.gpu_reading().gpus) > 7000


def test_nodes_must_be_positive() -> None:
    with pytest.raises(ValueError):
        SimWorld(nodes=0)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(min_value=0, max_value=2**63), steps=st.integers(min_value=1, max_value=400),
       nodes=st.one_of(st.none(), st.integers(min_value=1, max_value=6)))
def test_any_seed_gives_a_consistent_world(seed: int, steps: int, nodes: int | None) -> None:
    world = SimWorld(seed=seed, nodes=nodes, start=START)
    world.step(steps)
    jobs = world.jobs_reading()
    gpus = world.gpu_reading().gpus
    for node in jobs.nodes:
        assert 0 <= node.gpu_allocated <= node.gpu_allocatable <= node.gpu_capacity <= 8
    for g in gpus:
        assert 0 <= g.utilization <= 100
        assert 0 <= g.memory_used_mib <= g.memory_total_mib
        assert 0 < g.power_w <= g.power_limit_w and 20 <= g.temperature_c <= 90
        for s in g.mig_slices:
            assert 0 <= s.memory_used_mib <= s.memory_total_mib and 0 <= (s.utilization or 0) <= 100
    # A distributed job's GPUs are held by its replicas' pods, on their own nodes.
    gang_pods = {u: j for j in jobs.jobs if j.roles for u in j.pod_uids}
    gang_held = Counter(g.node for g in gpus for p in g.processes if p.pod_uid in gang_pods)
    held = Counter(p.pod_uid for g in gpus for p in g.processes if p.pod_uid not in gang_pods)
    running = {j.pod_uid: j for j in jobs.jobs if j.state is JobState.RUNNING and not j.roles}
    assert set(held) == set(running)
    for pod, count in held.items():
        assert count == running[pod].gpus
    allocated = Counter(j.node for j in running.values() if not j.mig_profile)
    for node in jobs.nodes:
        assert node.gpu_allocated == gang_held[node.name] + sum(
            running[p].gpus for p in running if running[p].node == node.name and not running[p].mig_profile)
        assert allocated[node.name] <= node.gpu_capacity


# ------------------------------------------------------------------ faces and faults


def test_faces_satisfy_the_protocols() -> None:
    gpus, jobs, cloud = make_sim(seed=7, start=START, clock=lambda: START)
    assert isinstance(gpus, GpuSource) and isinstance(jobs, JobBackend) and isinstance(cloud, CloudBackend)
    assert gpus.name == jobs.name == cloud.name == "sim"
    assert Capability.MIG in gpus.capabilities and Capability.SUBMIT_JOB in jobs.capabilities
    assert Capability.SPOT in cloud.capabilities and Capability.TERMINATE in cloud.capabilities
    assert gpus.poll_gpus().taken_at == jobs.poll_jobs().taken_at == cloud.poll_instances().taken_at
    assert cloud.spot_prices() and cloud.instance_types()


def test_polls_follow_the_clock_and_history_accumulates() -> None:
    clock = [START]
    gpus, _, _ = make_sim(seed=7, start=START, clock=lambda: clock[0])
    uuid = gpus.poll_gpus().gpus[0].uuid
    clock[0] += 61.9
    assert gpus.poll_gpus().taken_at == START + 61
    samples = gpus.gpu_history(uuid)
    assert [s.ts for s in samples] == [START + 5 * k for k in range(1, 13)]
    assert gpus.gpu_history(uuid, since=START + 30)[0].ts == START + 30
    with pytest.raises(BackendError):
        gpus.gpu_history("GPU-nope")


@pytest.mark.parametrize("spec, expected", [
    ("gpus:error", {"gpus": "error"}),
    ("gpus:slow", {"gpus": "slow=3"}),
    (" gpus:slow=0.5 , cloud:flaky,jobs:hang ", {"gpus": "slow=0.5", "cloud": "flaky", "jobs": "hang"}),
    ("jobs:hang=10", {"jobs": "hang=10"}),
    ("", {}),
])
def test_fault_spec_parses(spec: str, expected: dict[str, str]) -> None:
    plan = FaultPlan.parse(spec)
    assert {k: str(plan.get(k)) for k in ("gpus", "jobs", "cloud") if plan.get(k)} == expected


@pytest.mark.parametrize("spec, bad", [
    ("gpu:error", "gpu"),
    ("gpus", "missing MODE"),
    ("gpus:explode", "explode"),
    ("gpus:error=3", "takes no SECONDS"),
    ("gpus:slow=soon", "soon"),
    ("gpus:slow=-1", "≥ 0"),
    ("gpus:slow,gpus:error", "twice"),
])
def test_bad_fault_spec_says_what_and_how(spec: str, bad: str) -> None:
    with pytest.raises(ValueError) as info:
        FaultPlan.parse(spec)
    message = str(info.value)
    assert bad in message and "SOURCE:MODE[=SECONDS]" in message and "\n" not in message


def test_error_and_flaky_faults() -> None:
    plan = FaultPlan.parse("gpus:error,cloud:flaky")
    gpus, jobs, cloud = make_sim(seed=7, start=START, faults=plan, clock=lambda: START)
    with pytest.raises(BackendError, match="simulated fault"):
        gpus.poll_gpus()
    jobs.poll_jobs()  # the other faces are unaffected
    failed = []
    for k in range(1, 10):
        try:
            cloud.poll_instances()
        except BackendError:
            failed.append(k)
    assert failed == [3, 6, 9]
    plan.set("gpus", None)
    gpus.poll_gpus()


def test_slow_fault_delays_the_answer() -> None:
    gpus, _, _ = make_sim(seed=7, start=START, faults=FaultPlan.parse("gpus:slow=0.05"), clock=lambda: START)
    t0 = time.perf_counter()
    gpus.poll_gpus()
    assert time.perf_counter() - t0 >= 0.05


def _poll_in_thread(poll) -> tuple[threading.Thread, list[object]]:
    out: list[object] = []

    def run() -> None:
        try:
            out.append(poll())
        except BackendError as exc:
            out.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


def test_hang_blocks_until_released_and_close_unblocks() -> None:
    plan = FaultPlan()
    gpus, jobs, _ = make_sim(seed=7, start=START, faults=plan, clock=lambda: START)
    plan.set("gpus", FaultMode.HANG)
    thread, out = _poll_in_thread(gpus.poll_gpus)
    thread.join(0.2)
    assert thread.is_alive() and not out
    jobs.poll_jobs()  # a hanging GPU face does not hold the world's lock
    plan.release()
    thread.join(2.0)
    assert not thread.is_alive() and len(out[0].gpus) == 25  # type: ignore[attr-defined]
    gpus.poll_gpus()  # released: later polls answer

    plan.set("gpus", "hang")
    thread, out = _poll_in_thread(gpus.poll_gpus)
    thread.join(0.1)
    assert thread.is_alive()
    gpus.close()
    thread.join(2.0)
    assert not thread.is_alive() and isinstance(out[0], BackendError)
    with pytest.raises(BackendError, match="closed"):
        gpus.poll_gpus()
