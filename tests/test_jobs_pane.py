"""The Jobs pane as the place to run GPU training, driven with the keyboard at 80×24 on the demo."""

from __future__ import annotations

from textual.widgets import Input, Static

from gpuconsole.core.ops.actions import ActionKind
from gpuconsole.model import JobState
from gpuconsole.ui.screens.confirm import ConfirmScreen
from gpuconsole.ui.screens.describe import DescribeScreen
from gpuconsole.ui.screens.logs import LogScreen
from gpuconsole.ui.widgets.log_view import MAX_LINES, LogView
from gpuconsole.ui.wizards.submit import SubmitWizard
from tests.helpers import FrozenClock, demo_console, wait_until
from tests.driving import running, show_pane, shown, table
from tests.test_wizard import outside


async def open_submit(app, pilot) -> SubmitWizard:
    await pilot.press("3")
    await pilot.pause()
    await pilot.press("N")
    await wait_until(lambda: isinstance(app.screen, SubmitWizard))
    await pilot.pause()
    return app.screen


async def fill(pilot, wizard: SubmitWizard, widget_id: str, words: str, *, typed: bool = False) -> None:
    """Put ``words`` in a field: typed key by key as a user does (``ctrl+u`` clears it first), or
    pasted in one go (the same change event, fewer frames)."""
    field = wizard.query_one(f"#{widget_id}", Input)
    field.focus()
    await pilot.pause()
    if typed:
        await pilot.press("end", "ctrl+u", *words)
    else:
        field.value = words
    await pilot.pause()


def message(wizard: SubmitWizard, field: str) -> str:
    line = wizard.query_one(f"#field-{field} .field-message", Static)
    return shown(line) if line.display else ""


async def to_review(pilot, wizard: SubmitWizard) -> str:
    """Next, Next, and wait for the dry run's answer; the YAML shown."""
    await pilot.press("ctrl+n")
    await wait_until(lambda: wizard.step == 1)
    await pilot.press("ctrl+n")
    await wait_until(lambda: wizard.step == 2)
    await wait_until(lambda: wizard.dry_run_message.startswith("Dry run ") and "asking" not in wizard.dry_run_message)
    await pilot.pause()
    return shown(wizard.query_one("#review-yaml", Static))


async def submit(app, pilot, wizard: SubmitWizard) -> None:
    assert wizard.can_submit, wizard.dry_run_message
    await pilot.press("ctrl+n")
    await wait_until(lambda: not isinstance(app.screen, SubmitWizard))
    await pilot.pause()


def notes(app) -> list[str]:
    return [n.message for n in app._notifications]


async def select_job(app, pilot, predicate) -> str:
    """Put the job table's cursor on the first job passing ``predicate``; its uid."""
    await pilot.press("3")
    await pilot.pause()
    jobs = table(app, "job-table")
    wanted = next(j for j in app.snapshot.jobs if predicate(j) and j.uid in jobs.shown_keys)
    jobs.focus()
    jobs.move_cursor(row=jobs.shown_keys.index(wanted.uid))
    await pilot.pause()
    return wanted.uid


def job_rows(app) -> list[str]:
    """The job table's rows that are jobs (a distributed job's roles are rows under it)."""
    return [key for key in table(app, "job-table").shown_keys if "/" not in key]


def job(app, uid: str):
    return next((j for j in app.snapshot.jobs if j.uid == uid), None)


def plain_running(j) -> bool:
    return j.state is JobState.RUNNING and not j.cronjob and not j.mig_profile


async def test_submit_a_job_through_the_wizard_and_see_it_in_the_queue():
    async with running() as (app, pilot):
        wizard = await open_submit(app, pilot)
        assert "1 Job › 2 Environment › 3 Review" in " ".join(shown(wizard.query_one("#submit-steps", Static)).split())
        assert app.focused.id == "job-name"
        await pilot.press(*"bert-sweep")
        await fill(pilot, wizard, "job-namespace", "team-nlp")
        await fill(pilot, wizard, "job-gpus", "2")
        await fill(pilot, wizard, "job-command", "python train.py --lr 3e-4")
        code = await to_review(pilot, wizard)
        assert "kind: Job" in code and "name: bert-sweep" in code and "nvidia.com/gpu: 2" in code
        assert "- python train.py --lr 3e-4" in code
        assert shown(wizard.query_one("#dry-run", Static)).startswith("Dry run passed: Job team-nlp/bert-sweep")
        await submit(app, pilot, wizard)
        await wait_until(lambda: any(j.name == "bert-sweep" for j in app.snapshot.jobs))
        created = next(j for j in app.snapshot.jobs if j.name == "bert-sweep")
        await wait_until(lambda: created.uid in table(app, "job-table").shown_keys)
        assert created.state is JobState.PENDING and created.gpus == 2
        assert "created Job team-nlp/bert-sweep" in notes(app)
        result = app.core.services.actions.recent()[-1]
        assert result.ok and result.request.kind is ActionKind.SUBMIT_JOB


async def test_invalid_input_is_refused_with_the_fields_message():
    async with running() as (app, pilot):
        wizard = await open_submit(app, pilot)
        await fill(pilot, wizard, "job-name", "Bad_Name", typed=True)
        assert "only lowercase a-z, 0-9 and '-'" in message(wizard, "name")
        await fill(pilot, wizard, "job-mig", "9g.99gb")
        assert "not a MIG profile" in message(wizard, "mig_profile")
        await fill(pilot, wizard, "job-schedule", "* * *", typed=True)
        assert "needs 5 fields" in message(wizard, "schedule")
        assert shown(wizard.query_one("#next-runs", Static)) == ""
        await fill(pilot, wizard, "job-memory", "64GB")
        assert 'like "64Gi"' in message(wizard, "memory")
        assert outside(app) == [], "the form with four messages still fits 80×24"
        await pilot.press("ctrl+n")
        await pilot.pause()
        assert wizard.step == 0
        status = shown(wizard.query_one("#submit-status", Static))
        assert status.startswith("Can't go on: Name: only lowercase a-z")
        assert app.focused.id == "job-name", "Next puts the cursor on the first field to fix"
        await fill(pilot, wizard, "job-name", "good-name")
        assert message(wizard, "name") == ""

        # An environment preset is checked the same way, on its own step.
        await fill(pilot, wizard, "job-mig", "")
        await fill(pilot, wizard, "job-schedule", "")
        await fill(pilot, wizard, "job-memory", "")
        await pilot.press("ctrl+n")
        await wait_until(lambda: wizard.step == 1)
        await fill(pilot, wizard, "env-NCCL_DEBUG", "LOUD")
        assert "VERSION, WARN, INFO, TRACE" in message(wizard, "env-NCCL_DEBUG")
        assert outside(app) == []
        await pilot.press("ctrl+n")
        await pilot.pause()
        assert wizard.step == 1
        assert app.core.services.actions.recent() == ()


async def test_distributed_training_with_four_workers_is_an_indexed_job_and_a_service():
    async with running() as (app, pilot):
        wizard = await open_submit(app, pilot)
        await pilot.press(*"llama-ddp")
        await fill(pilot, wizard, "job-namespace", "research")
        await fill(pilot, wizard, "job-workers", "4")
        await fill(pilot, wizard, "job-gpus", "2")
        await fill(pilot, wizard, "job-command", "torchrun train.py")
        code = await to_review(pilot, wizard)
        for words in ("completionMode: Indexed", "completions: 4", "parallelism: 4", "subdomain: llama-ddp",
                      "value: llama-ddp-0.llama-ddp", "name: WORLD_SIZE", "name: NODE_RANK",
                      "job-completion-index", "kind: Service", "clusterIP: None"):
            assert words in code, words
        assert "4 pods × 2 GPU(s) = 8" in shown(wizard.query_one("#review-context", Static))
        assert "Service research/llama-ddp" in wizard.dry_run_message
        assert outside(app) == []
        await submit(app, pilot, wizard)
        await wait_until(lambda: any(j.name == "llama-ddp" for j in app.snapshot.jobs))
        created = next(j for j in app.snapshot.jobs if j.name == "llama-ddp")
        assert created.gpus == 8 and created.pod.startswith("llama-ddp-0-")
        assert "created Job research/llama-ddp, Service research/llama-ddp" in notes(app)


async def test_a_cronjob_shows_its_next_three_runs_and_joins_the_cronjobs():
    async with running() as (app, pilot):
        wizard = await open_submit(app, pilot)
        await pilot.press(*"nightly-ft")
        await fill(pilot, wizard, "job-namespace", "team-nlp")
        await fill(pilot, wizard, "job-schedule", "0 2 * * *", typed=True)
        runs = shown(wizard.query_one("#next-runs", Static))
        assert runs == "Next runs (UTC): Tue 17 Nov 02:00 · Wed 18 Nov 02:00 · Thu 19 Nov 02:00"
        code = await to_review(pilot, wizard)
        assert "kind: CronJob" in code and "concurrencyPolicy: Forbid" in code and "jobTemplate:" in code
        await submit(app, pilot, wizard)
        await wait_until(lambda: any(c.name == "nightly-ft" for c in app.snapshot.cronjobs))
        cron = next(c for c in app.snapshot.cronjobs if c.name == "nightly-ft")
        assert cron.schedule == "0 2 * * *" and not cron.suspended
        await wait_until(lambda: cron.uid in table(app, "cron-table").shown_keys)


async def test_delete_asks_first_and_goes_through_the_core():
    async with running() as (app, pilot):
        uid = await select_job(app, pilot, plain_running)
        name = job(app, uid).name
        await pilot.press("ctrl+d")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        assert name in shown(app.screen.query_one("#confirm-details", Static))
        assert f"Delete Job {job(app, uid).namespace}/{name}?" in shown(app.screen.query_one("#confirm-prompt", Static))
        assert outside(app) == []
        await pilot.press("n")
        await pilot.pause()
        assert job(app, uid) is not None and app.core.services.actions.recent() == ()
        await pilot.press("ctrl+d", "y")
        await wait_until(lambda: job(app, uid) is None)
        result = app.core.services.actions.recent()[-1]
        assert result.ok and result.request.kind is ActionKind.DELETE_JOB and result.request.confirmation == "yes"


async def test_suspend_asks_resume_does_not():
    async with running() as (app, pilot):
        uid = await select_job(app, pilot, plain_running)
        await pilot.press("s")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        assert "pods are stopped" in shown(app.screen.query_one("#confirm-details", Static))
        await pilot.press("y")
        await wait_until(lambda: job(app, uid).state is JobState.SUSPENDED)
        jobs = table(app, "job-table")
        await wait_until(lambda: str(jobs.get_cell(uid, "state")) == "suspended")
        jobs.move_cursor(row=jobs.shown_keys.index(uid))
        await pilot.pause()
        await pilot.press("s")
        await wait_until(lambda: job(app, uid).state is JobState.PENDING)
        assert not isinstance(app.screen, ConfirmScreen)
        kinds = [r.request.kind for r in app.core.services.actions.recent()]
        assert kinds == [ActionKind.SUSPEND_JOB, ActionKind.RESUME_JOB]


async def test_suspended_cronjob_resumes_and_a_cronjob_runs_now():
    async with running() as (app, pilot):
        await pilot.press("3", "c")
        await pilot.pause()
        crons = table(app, "cron-table")
        assert crons.has_focus
        by_name = {c.name: c for c in app.snapshot.cronjobs}
        crons.move_cursor(row=crons.shown_keys.index(by_name["dataset-reindex"].uid))
        await pilot.pause()
        await pilot.press("s")
        await wait_until(lambda: not next(c for c in app.snapshot.cronjobs if c.name == "dataset-reindex").suspended)

        crons.move_cursor(row=crons.shown_keys.index(by_name["hourly-embeddings-refresh"].uid))
        await pilot.pause()
        await pilot.press("T")
        await wait_until(lambda: any("-manual-" in j.name for j in app.snapshot.jobs))
        manual = next(j for j in app.snapshot.jobs if "-manual-" in j.name)
        assert manual.name.startswith("hourly-embeddings-refresh-manual-")
        assert manual.cronjob == "hourly-embeddings-refresh" and manual.mig_profile == "1g.10gb"
        assert any(n.startswith(f"created Job inference/{manual.name}") for n in notes(app))


async def test_logs_follow_a_running_job_and_search_finds_a_line():
    clock = FrozenClock()
    async with running(demo_console(clock=clock)) as (app, pilot):
        uid = await select_job(app, pilot, plain_running)
        await pilot.press("l")
        await wait_until(lambda: isinstance(app.screen, LogScreen))
        screen = app.screen
        view = screen.query_one(LogView)
        await wait_until(lambda: len(view.lines) > 4)
        assert view.lines.maxlen == MAX_LINES
        assert view.lines[0].startswith("=== ") and "loss" in view.lines[-1]
        assert "following" in shown(screen.query_one("#log-status", Static))
        assert outside(app) == []
        before = len(view.lines)
        clock.advance(60)  # a minute of training: four more step lines
        await wait_until(lambda: len(view.lines) == before + 4)

        await pilot.press("slash")
        await pilot.pause()
        assert isinstance(app.focused, Input)
        await pilot.press(*"step 100/", "enter")
        await pilot.pause()
        status = shown(screen.query_one("#log-status", Static))
        assert "match 1/1 for 'step 100/'" in status
        assert "step 100/" in view.lines[view.current - view.dropped]
        assert outside(app) == []
        await pilot.press("n")
        await pilot.pause()
        assert "match 1/1" in shown(screen.query_one("#log-status", Static)), "one match: n wraps to it"
        await pilot.press("escape")
        await wait_until(lambda: not isinstance(app.screen, LogScreen))
        assert job(app, uid).state is JobState.RUNNING


async def test_logs_search_moves_between_matches_with_n_and_shift_n():
    async with running() as (app, pilot):
        now = app.snapshot.taken_at
        await select_job(app, pilot, lambda j: plain_running(j) and j.started and now - j.started > 3600)
        await pilot.press("l")
        await wait_until(lambda: isinstance(app.screen, LogScreen))
        view = app.screen.query_one(LogView)
        await wait_until(lambda: len(view.lines) > 100)
        await pilot.press("slash", *"eval", "enter")
        await pilot.pause()
        first = view.current
        assert first is not None and "eval" in view.lines[first - view.dropped]
        await pilot.press("n")
        await pilot.pause()
        assert view.current > first
        await pilot.press("N")
        await pilot.pause()
        assert view.current == first


async def test_describe_shows_the_yaml_and_events():
    async with running() as (app, pilot):
        uid = await select_job(app, pilot, lambda j: j.state is JobState.PENDING and j.pending_reason)
        await pilot.press("enter")
        await wait_until(lambda: isinstance(app.screen, DescribeScreen))
        screen = app.screen
        await wait_until(lambda: bool(screen.text))
        text = shown(screen.query_one("#describe-text", Static))
        assert text.startswith("apiVersion: batch/v1\nkind: Job\n")
        assert f"uid: {uid}" in text and "\nEvents:\n" in text
        assert "FailedScheduling" in text and job(app, uid).pending_reason in text
        assert outside(app) == []
        await pilot.press("escape")
        await wait_until(lambda: not isinstance(app.screen, DescribeScreen))


async def test_nodes_view_shows_gpu_capacity():
    async with running() as (app, pilot):
        await pilot.press("3", "n")
        await pilot.pause()
        nodes = table(app, "node-table")
        assert nodes.display and nodes.has_focus and not table(app, "job-table").display
        snap = app.snapshot
        assert len(nodes.shown_keys) == len(snap.nodes)
        for node in snap.nodes:
            assert str(nodes.get_cell(node.name, "used")) == f"{node.gpu_allocated}/{node.gpu_allocatable}"
            assert str(nodes.get_cell(node.name, "free")) == str(node.gpu_allocatable - node.gpu_allocated)
        total = sum(n.gpu_allocatable for n in snap.nodes)
        used = sum(n.gpu_allocated for n in snap.nodes)
        pane = app.query_one("#jobs-pane")
        source_line = shown(pane.query_one(".source-line", Static))
        assert f"{len(snap.nodes)} nodes · {used}/{total} GPUs allocated · {total - used} free" in source_line
        mig_node = next(n for n in snap.nodes if n.mig_capacity)
        nodes.move_cursor(row=nodes.shown_keys.index(mig_node.name))
        await pilot.pause()
        detail = shown(pane.query_one(".row-detail", Static))
        assert "MIG 1g.10gb" in detail and "GPUs allocated" in detail
        assert outside(app) == []
        await pilot.press("n")
        await pilot.pause()
        assert table(app, "job-table").display and not nodes.display and table(app, "job-table").has_focus


async def test_without_a_cluster_the_keys_say_why():
    async with running(demo_console(demo=False), live=False) as (app, pilot):
        await wait_until(lambda: app.access_principal is not None)
        await show_pane(app, pilot, "3", "jobs")
        await pilot.press("N")
        await wait_until(lambda: any("--demo" in m and "KUBECONFIG" in m for m in notes(app)))
        assert not isinstance(app.screen, SubmitWizard)


async def test_the_job_queue_is_ordered_before_the_pane_is_first_shown():
    """A big queue is sorted and worded in a worker while another pane is on screen, so the
    first showing of the Jobs pane does not do it on the UI thread."""
    from tests.driving import running
    from tests.helpers import wait_until

    async with running() as (app, pilot):
        assert app.active_pane == "overview"
        pane = app.query_one("#jobs-pane")
        await wait_until(lambda: not pane.jobs.empty)
        assert app.active_pane == "overview"
        assert len(pane.jobs.keys()) == len(app.snapshot.jobs)


async def test_a_queue_merged_in_a_worker_keeps_its_filter_and_sort(monkeypatch):
    """The queue's first ordering runs in a worker (and a reading that comes meanwhile): the UI
    thread keeps showing (and filtering) the last merged reading until the next one is ready,
    a filter typed meanwhile is narrowed in the new index already, and a sort chosen while a
    merge is in flight is never undone by it."""
    import threading

    import msgspec

    from gpuconsole.ui.widgets.row_index import RowIndex

    real_update = RowIndex.update
    threads: list[str] = []

    def update(self, items):
        if items and type(items[0]).__name__ == "Job":  # the queue's index, not the CronJobs' or the nodes'
            threads.append(threading.current_thread().name)
        return real_update(self, items)

    monkeypatch.setattr(RowIndex, "update", update)
    async with running() as (app, pilot):
        await pilot.press("3")
        pane = app.query_one("#jobs-pane")
        await wait_until(lambda: len(job_rows(app)) == len(app.snapshot.jobs))
        monkeypatch.setattr(app, "_paint_latest", lambda: None)  # only the readings given below from now on
        if app._flush_timer is not None:  # noqa: SLF001 - nor one already due
            app._flush_timer.stop()  # noqa: SLF001
        await pilot.pause()
        threads.clear()
        snap = app.snapshot
        renamed = tuple(msgspec.structs.replace(j, name=f"zz-{j.name}") if j.state is JobState.RUNNING else j
                        for j in snap.jobs)
        pane.filter_text = "zz-"
        pane._follow(renamed, warm=True)  # noqa: SLF001 - merged in a worker, as a first ordering is
        pane.show(msgspec.structs.replace(snap, jobs=renamed), pane.palette)
        await wait_until(lambda: pane.jobs.items is renamed)
        await pilot.pause()
        assert threads and all(name != threading.main_thread().name for name in threads)
        running_jobs = sum(1 for j in renamed if j.state is JobState.RUNNING)
        assert len(job_rows(app)) == running_jobs  # the running MPIJob's roles are rows under it besides
        last_text, _words, last_keys, _texts = pane.jobs._last  # noqa: SLF001 - found in the worker, ready to narrow
        assert last_text == "zz-" and len(last_keys) == running_jobs

        # A sort chosen while a merge is in flight: the merge from the old order is not taken.
        pane.filter_text = ""
        before = pane.jobs
        pane.snapshot = snap  # the newest reading again, a merge from ``before`` to it in flight:
        pane._merging, pane._wanted = True, snap.jobs  # noqa: SLF001
        resorted = pane.jobs.successor()
        pane.jobs = resorted
        stale = before.successor(snap.jobs)
        pane._merged(before, stale)  # noqa: SLF001 - that merge ends: not taken, merged again from ``resorted``
        assert pane.jobs is resorted
        await wait_until(lambda: pane.jobs.items is snap.jobs)
        assert pane.jobs is not stale


def test_what_the_panes_derive_from_a_reading_is_made_in_the_thread_that_delivers_it():
    """The tally by state, the pods' UIDs and the distributed jobs of a new reading are made
    beside the UI thread; the UI thread then finds them made, for that reading only."""
    import threading

    from gpuconsole.core.money.attribution import job_index
    from gpuconsole.model import FleetSnapshot, Gpu, Job, JobRole
    from gpuconsole.ui.messages import SnapshotUpdated
    from gpuconsole.ui.panes.job_roles import with_roles
    from gpuconsole.ui.panes.job_rows import TALLIES, JobTally
    from gpuconsole.ui.panes.overview import GPU_TALLIES, GpuTally

    jobs = tuple(Job(f"u{n}", f"train-{n}", "ml", JobState.PENDING if n % 3 else JobState.RUNNING, 0.0, gpus=2,
                     pod_uid=f"pod-{n}", kind="MPIJob" if n == 7 else "Job",
                     roles=(JobRole("Worker", 2, gpus_per_replica=1),) if n == 7 else ()) for n in range(30))
    gpus = tuple(Gpu(uuid=f"GPU-{n}", node="node-a", index=n, name="A100", utilization=90.0 if n else 0.0,
                     memory_used_mib=900, memory_total_mib=81920, temperature_c=40, power_w=80.0, power_limit_w=400.0)
                 for n in range(4))
    delivered: list[SnapshotUpdated] = []
    reading = FleetSnapshot(0.0, jobs=jobs, gpus=gpus)
    thread = threading.Thread(target=lambda: delivered.append(SnapshotUpdated.delivered(reading)))
    thread.start()
    thread.join()
    assert delivered[0].snapshot.jobs is jobs
    for made in (TALLIES, job_index, with_roles):  # made already, before the UI thread asks
        assert any(seen is jobs for seen, _ in made._made)
    assert any(seen is gpus for seen, _ in GPU_TALLIES._made) and GpuTally.of(reading).busy == 3
    tally, index, distributed = JobTally.of(jobs), job_index(jobs), with_roles(jobs)
    assert tally.counts[JobState.PENDING] == 20 and tally.waiting_gpus == 40
    assert [j.name for j in distributed] == ["train-7"] and index.owner("pod-9") is jobs[9]
    again = jobs[:15] + jobs[15:]  # the same jobs in a new reading: made for it
    assert JobTally.of(again) is not tally and JobTally.of(again).counts == tally.counts
