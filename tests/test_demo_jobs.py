"""``--demo-jobs N``: a simulated world that lists about N jobs, most of them static history."""

from __future__ import annotations

import json

from gpuconsole.backends.sim.archive import QUEUED_REASON
from gpuconsole.backends.sim.world import SimWorld
from gpuconsole.cli.main import main
from gpuconsole.core.fleet.console import Console, ConsoleOptions
from gpuconsole.core.fleet.sources import SourceOptions
from gpuconsole.model import JobState
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
