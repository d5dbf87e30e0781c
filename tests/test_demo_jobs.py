"""``--demo-jobs N``: a simulated world that lists about N jobs, most of them static history."""

from __future__ import annotations

import json
import math
import random

from gpuconsole.backends.sim.archive import FAILED_SHARE, HISTORY_DAYS, QUEUED_REASON, QUEUED_SHARE
from gpuconsole.backends.sim.ids import IdFactory
from gpuconsole.backends.sim.state import pod_suffix
from gpuconsole.backends.sim.workload import TEAMS, TEMPLATES
from gpuconsole.backends.sim.world import SimWorld
from gpuconsole.cli.main import main
from gpuconsole.core.fleet.console import Console, ConsoleOptions
from gpuconsole.core.fleet.sources import SourceOptions
from gpuconsole.model import Job, JobState
from gpuconsole.ui.panes.base import FilterInput
from gpuconsole.ui.panes.job_rows import STATE_ORDER
from tests.helpers import START, FrozenClock, wait_until
from tests.driving import running, table


def test_the_world_lists_n_jobs_and_its_live_part_is_unchanged() -> None:
    plain = SimWorld(seed=7, start=START)
    many = SimWorld(seed=7, start=START, jobs=5000)
    live = plain.jobs_reading().jobs
    listed = many.jobs_reading().jobs
    assert len(listed) == 5000
    assert listed[:len(live)] == live  # the same live world, the history after it
    history = listed[len(live):]
    assert {j.state for j in history} == {JobState.SUCCEEDED, JobState.FAILED, JobState.PENDING}
    assert all(j.pending_reason == QUEUED_REASON for j in history if j.state is JobState.PENDING)
    assert all(j.finished is not None and j.started is not None and j.created <= j.started <= j.finished <= START
               for j in history if j.state is not JobState.PENDING)
    assert len({(j.namespace, j.name) for j in listed}) == len(listed)
    assert [j.uid for j in SimWorld(seed=7, start=START, jobs=5000).jobs_reading().jobs] == [j.uid for j in listed]
    assert SimWorld(seed=7, start=START, jobs=10).jobs_reading().jobs == live  # fewer than live: none added


def test_a_historical_job_is_what_the_world_would_list_for_its_own_record() -> None:
    """History is listed as frozen jobs made directly; each is the job the world's own record
    of it (made again for a describe, a log, a suspend) lists: its pod, node and times."""
    world = SimWorld(seed=7, start=START, jobs=3000)
    history = world.jobs_reading().jobs[-2500:]
    assert all(j.pod and j.pod.startswith(f"{j.name}-") for j in history)
    for view in history:
        record = world._unarchived(view)  # noqa: SLF001 - the record a change would step
        record.view = None
        assert record.to_model() == view


def reference_history(world: SimWorld, count: int) -> list[Job]:
    """The history as random.Random's own choices, choice, uniform and randint draw it, and
    IdFactory names it: what the world's quicker draws must give, job for job."""
    rng = random.Random(f"{world.seed}:archive")
    ids = IdFactory(rng)
    nodes = world._scheduler.nodes  # noqa: SLF001 - the nodes a historical job could have run on
    taken = {(j.namespace, j.name) for j in world._jobs.values()}  # noqa: SLF001
    jobs = []
    for _ in range(count):
        t = rng.choices(TEMPLATES, cum_weights=world._cum_weights)[0]  # noqa: SLF001
        name = f"{t.base}-{ids.suffix()}"
        while (t.namespace, name) in taken:
            name = f"{t.base}-{ids.suffix()}"
        taken.add((t.namespace, name))
        gpus = 1 if t.mig_profile else rng.choice(t.gpus)
        product = t.product if t.product in world._products else None  # noqa: SLF001
        minutes = math.exp(rng.uniform(math.log(t.minutes[0]), math.log(t.minutes[1])))
        uid, owner, pod_uid = ids.uuid4(), rng.choice(TEAMS[t.namespace]), ids.uuid4()
        common = {"uid": uid, "name": name, "namespace": t.namespace, "gpus": gpus, "mig_profile": t.mig_profile,
                  "image": t.image, "owner": owner, "pod_uid": pod_uid, "pod": f"{name}-{pod_suffix(pod_uid, 0)}"}
        if rng.random() < QUEUED_SHARE:
            created = float(math.floor(START - rng.uniform(600.0, 2 * 86400.0)))
            jobs.append(Job(state=JobState.PENDING, created=created, pending_reason=QUEUED_REASON, **common))
            continue
        fitting = [n for n in nodes if n.slices] if t.mig_profile else \
            [n for n in nodes if (product is None or n.model.label == product) and len(n.whole) >= gpus]
        fails = rng.random() < FAILED_SHARE
        length = max(60.0, round(minutes * 60.0) * (rng.uniform(0.05, 0.8) if fails else 1.0))
        finished = float(math.floor(START - rng.uniform(3600.0, HISTORY_DAYS * 86400.0)))
        started = float(math.floor(finished - length))
        created = started - rng.randint(5, 1800)
        node = rng.choice(fitting).node_name if fitting else None
        jobs.append(Job(state=JobState.FAILED if fails else JobState.SUCCEEDED, created=created, node=node,
                        started=started, finished=finished, **common))
    return jobs


def test_the_history_is_drawn_as_the_random_modules_own_calls_draw_it() -> None:
    """The seeded world stays the same: the history's inlined draws give, job for job, what
    the plain calls give (a fleet of several GPU models, MIG nodes, and queued jobs)."""
    for nodes, total in ((None, 1500), (24, 6000)):
        world = SimWorld(seed=11, start=START, nodes=nodes, jobs=total)
        history = world._archive_view  # noqa: SLF001 - the history alone, as built
        live = len(world.jobs_reading().jobs) - len(history)
        assert len(history) == total - live > 1000
        assert list(history) == reference_history(SimWorld(seed=11, start=START, nodes=nodes), total - live)
        assert {j.state for j in history} == {JobState.SUCCEEDED, JobState.FAILED, JobState.PENDING}
        assert any(j.mig_profile for j in history) and len({j.node for j in history}) > 3


def test_history_costs_nothing_per_step_and_is_shared_by_every_reading() -> None:
    world = SimWorld(seed=7, start=START, jobs=3000)
    before = world.jobs_reading().jobs
    world.step(120)  # two purges of finished jobs: history is not theirs to purge
    after = world.jobs_reading().jobs
    assert all(a is b for a, b in zip(before[-2900:], after[-2900:], strict=True))


def test_history_can_be_described_and_deleted() -> None:
    world = SimWorld(seed=7, start=START, jobs=1000)
    old = world.jobs_reading().jobs[-1]
    assert f"name: {old.name}" in world.describe_object("Job", old.namespace, old.name)
    world.delete_object("Job", old.namespace, old.name)
    assert old.uid not in {j.uid for j in world.jobs_reading().jobs}


def test_demo_jobs_on_the_command_line(capsys) -> None:
    assert main(["snapshot", "--demo", "--no-db", "--demo-at", "2026-11-16T14:00Z", "--demo-jobs", "2000",
                 "--json", "--wait", "5"]) == 0
    assert len(json.loads(capsys.readouterr().out)["jobs"]) == 2000
    assert main(["snapshot", "--demo", "--demo-jobs", "-1"]) == 2
    assert "--demo-jobs" in capsys.readouterr().err


def words(job) -> str:
    """What the Jobs filter matches a job by, as the pane documents it."""
    return " ".join(str(w) for w in (job.name, job.namespace, job.state.value, job.node, job.pending_reason,
                                     job.cronjob, job.mig_profile) if w is not None).lower()


async def test_the_jobs_pane_filters_100k_jobs_to_exactly_the_matching_rows() -> None:
    clock = FrozenClock()
    console = Console(ConsoleOptions(sources=SourceOptions(demo=True, seed=7, demo_jobs=100_000, sim_start=clock()),
                                     interval=30.0, timeout=10.0, clock=clock))  # one poll: the rows hold still
    async with running(console) as (app, pilot):
        await pilot.press("3")
        # 100,000 jobs, and the demo's distributed jobs' roles in rows under them
        await wait_until(lambda: table(app, "job-table").row_count >= 100_000, timeout=30)
        await pilot.press("slash")
        field = app.query_one("#jobs-pane").query_one(FilterInput)
        field.value = "team-vision faile"
        field.cursor_position = len(field.value)
        await pilot.press("d")
        await pilot.pause()
        jobs = app.snapshot.jobs
        expected = [j for j in jobs if "team-vision" in words(j) and "failed" in words(j)]
        expected.sort(key=lambda j: (STATE_ORDER[j.state], -j.created, j.name))
        shown = table(app, "job-table")
        assert field.value == "team-vision failed"
        assert 100 < len(expected) < 10_000
        assert shown.shown_keys == [j.uid for j in expected]
        assert {j.state for j in expected} == {JobState.FAILED} and {j.namespace for j in expected} == {"team-vision"}
        assert str(shown.get_cell(expected[0].uid, "name")) == expected[0].name
