"""A distributed job's roles as child rows of the Jobs pane (as MIG slices under a GPU): each with
its replicas, GPUs per replica and why it waits; the logs per role (an MPIJob's launcher's, a
role row's pod's) through the one log-stream reader. On the seeded demo, and on the Kubernetes
API test server for the counts only a cluster's status has (succeeded, failed)."""

from __future__ import annotations

import pytest
from rich.style import Style

from gpuconsole.model import Job, JobRole, JobState
from gpuconsole.ui.palette import Palette
from gpuconsole.ui.panes.job_roles import ROLE_SEP, RoleRows, role_cells, role_detail
from gpuconsole.ui.screens.confirm import ConfirmScreen
from gpuconsole.ui.screens.logs import LogScreen
from gpuconsole.ui.widgets.row_index import RowIndex
from tests.driving import running, shown, table
from tests.helpers import wait_until

PLAIN = Palette(*[Style()] * 6)


def rows_of(app) -> list[tuple[str, list[str]]]:
    """The job table's rows: key and cells as text."""
    jobs = table(app, "job-table")
    columns = list(jobs.columns)
    return [(key, [str(jobs.get_cell(key, c)) for c in columns]) for key in jobs.shown_keys]


def distributed(app, kind: str) -> Job:
    return next(j for j in app.snapshot.jobs if j.kind == kind)


async def jobs_pane(app, pilot) -> None:
    await pilot.press("3")
    await pilot.pause()
    await wait_until(lambda: any(j.roles for j in app.snapshot.jobs)
                     and ROLE_SEP in " ".join(table(app, "job-table").shown_keys))


async def select(app, pilot, key: str) -> None:
    jobs = table(app, "job-table")
    jobs.focus()
    jobs.move_cursor(row=jobs.shown_keys.index(key))
    await pilot.pause()


async def test_each_role_is_a_row_under_its_job_with_its_replicas_gpus_and_wait() -> None:
    async with running() as (app, pilot):
        await jobs_pane(app, pilot)
        rows = rows_of(app)
        keys = [k for k, _cells in rows]
        mpi, torch = distributed(app, "MPIJob"), distributed(app, "PyTorchJob")
        at = keys.index(mpi.uid)
        assert keys[at + 1:at + 3] == [f"{mpi.uid}/Launcher", f"{mpi.uid}/Worker"]
        launcher, worker = rows[at + 1][1], rows[at + 2][1]
        assert launcher[:5] == ["running", "", "└ Launcher", "-", "1/1 active"] and launcher[-1] == ""
        assert worker[:5] == ["running", "", "└ Worker", "2×4", "2/2 active"] and worker[-1] == ""
        at = keys.index(torch.uid)
        master, waiting = rows[at + 1][1], rows[at + 2][1]
        assert master[:5] == ["waiting", "", "└ Master", "1×8", "0/1 active"]
        assert waiting[:5] == ["waiting", "", "└ Worker", "2×8", "0/2 active"]
        assert waiting[-1].startswith("0/8 nodes are available: ")
        # the filter keeps a job's roles under it, and a job it hides takes its roles along
        app.current_pane.filter_text = "nccl-allreduce"
        app.current_pane.redraw()
        await pilot.pause()
        assert table(app, "job-table").shown_keys == [mpi.uid, f"{mpi.uid}/Launcher", f"{mpi.uid}/Worker"]


async def test_a_role_rows_line_names_every_count_its_gpus_and_pod() -> None:
    async with running() as (app, pilot):
        await jobs_pane(app, pilot)
        mpi = distributed(app, "MPIJob")
        await select(app, pilot, f"{mpi.uid}/Worker")
        line = " ".join(shown(app.current_pane.query_one(".row-detail")).split())
        worker = next(r for r in mpi.roles if r.name == "Worker")
        text = role_detail(mpi, worker, PLAIN).plain
        assert text.startswith("research/nccl-allreduce · Worker  2 desired · 2 active · 0 succeeded · 0 failed")
        assert f"4 GPUs each, 8 in all · pod {worker.pod} (l: its log)" in text
        assert line.startswith("research/nccl-allreduce · Worker 2 desired · 2 active")


async def test_logs_per_role_the_mpijobs_launcher_and_a_workers_pod() -> None:
    async with running() as (app, pilot):
        await jobs_pane(app, pilot)
        mpi = distributed(app, "MPIJob")
        await select(app, pilot, mpi.uid)
        await pilot.press("l")
        await wait_until(lambda: isinstance(app.screen, LogScreen))
        assert app.screen.pod == mpi.pod and "-launcher-" in mpi.pod
        await pilot.press("escape")
        await wait_until(lambda: not isinstance(app.screen, LogScreen))
        worker = next(r for r in mpi.roles if r.name == "Worker")
        await select(app, pilot, f"{mpi.uid}/Worker")
        await pilot.press("l")
        await wait_until(lambda: isinstance(app.screen, LogScreen))
        assert app.screen.pod == worker.pod and "-worker-" in worker.pod
        assert "· Worker · pod " in app.screen.title_text
        await pilot.press("escape")
        await wait_until(lambda: not isinstance(app.screen, LogScreen))
        torch = distributed(app, "PyTorchJob")
        await select(app, pilot, f"{torch.uid}/Worker")
        await pilot.press("l")
        await pilot.pause()
        assert not isinstance(app.screen, LogScreen)
        assert any("its Worker has no pod yet (0/8 nodes are available" in n.message for n in app._notifications)


async def test_delete_on_a_role_row_asks_about_its_job_and_space_tags_jobs_only() -> None:
    async with running() as (app, pilot):
        await jobs_pane(app, pilot)
        mpi = distributed(app, "MPIJob")
        await select(app, pilot, mpi.uid)
        await pilot.press("space", "space", "space")  # the job, then its two role rows: not tagged
        await pilot.pause()
        assert table(app, "job-table").tagged_keys() == [mpi.uid]
        await pilot.press("escape")
        await select(app, pilot, f"{mpi.uid}/Launcher")
        await pilot.press("ctrl+d")
        await wait_until(lambda: isinstance(app.screen, ConfirmScreen))
        assert "Delete MPIJob research/nccl-allreduce?" in shown(app.screen.query_one("#confirm-prompt"))
        await pilot.press("n")


def test_role_rows_follow_their_jobs_and_say_finished_counts() -> None:
    roles = (JobRole("Launcher", 1, succeeded=1), JobRole("Worker", 4, active=2, failed=2, gpus_per_replica=8))
    job = Job(uid="u1", name="allreduce", namespace="train", state=JobState.FAILED, created=0.0, kind="MPIJob",
              roles=roles, gpus=32)
    others = tuple(Job(uid=u, name=u, namespace="train", state=JobState.RUNNING, created=1.0) for u in ("u0", "u2"))
    jobs = RowIndex(lambda j: j.uid, lambda j: j.uid, lambda j: (j.name,))
    jobs.update((others[0], job, others[1]))
    index = RoleRows()
    index.update(jobs.items)
    assert index.under_their_jobs(jobs, "") == ["u0", "u1", "u1/Launcher", "u1/Worker", "u2"]
    assert index.under_their_jobs(jobs, "allreduce") == ["u1", "u1/Launcher", "u1/Worker"]
    assert index.under_their_jobs(jobs, "u2") == ["u2"]
    assert [str(c) for c in role_cells(job, roles[0], PLAIN)][0] == "succeeded"
    cells = [str(c) for c in role_cells(job, roles[1], PLAIN)]
    assert (cells[0], cells[3], cells[4], cells[-1]) == ("failed", "4×8", "2/4 active · 2 failed", "")
    assert index.job_of("u1/Worker") is job and index.role_of("u1/Worker") is roles[1]
    assert index.role_of("u1") is None and index.job_of(None) is None
    plain = RoleRows()
    jobs.update(others)
    plain.update(jobs.items)
    assert plain.under_their_jobs(jobs, "") == ["u0", "u2"] and plain.rows == {}


@pytest.mark.slow
async def test_the_mpijobs_log_on_a_cluster_is_its_launchers_and_a_worker_rows_is_the_workers(
        kube, monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuconsole.backends.kube import source as kube_backend
    from tests import kube_server as ks
    from tests import kube_training as kt
    from tests.test_kube import QuickKubeJobs
    from tests.test_training_submit import kube_console

    monkeypatch.setattr(kube_backend, "KubeJobs", QuickKubeJobs)
    kube.server.crds = set(ks.TRAINING_CRDS)
    kube.add(ks.node("gpu-node-1"), ks.node("gpu-node-2"))
    mpi = kube.server.add(kt.mpijob("allreduce", workers=2, gpus=8))
    launcher = kube.server.add(kt.launcher_job(mpi))
    launcher_pod = kube.server.add(ks.pod_for(launcher, node="gpu-node-1"))
    workers = [kube.server.add(kt.kubeflow_pod(mpi, "Worker", i, node=f"gpu-node-{i + 1}")) for i in range(2)]
    kube.server.append_log("train", launcher_pod["metadata"]["name"], "rank 0: allreduce 16 GPUs, busbw 180 GB/s")
    kube.server.append_log("train", workers[0]["metadata"]["name"], "sshd: listening on port 22")
    async with running(kube_console(), live=False) as (app, pilot):
        await wait_until(lambda: any(j.kind == "MPIJob" for j in app.snapshot.jobs))
        await jobs_pane(app, pilot)
        job = distributed(app, "MPIJob")
        rows = dict(rows_of(app))
        assert rows[f"{job.uid}/Worker"][:5] == ["running", "", "└ Worker", "2×8", "2/2 active"]
        await select(app, pilot, job.uid)
        await pilot.press("l")
        await wait_until(lambda: isinstance(app.screen, LogScreen)
                         and "busbw 180 GB/s" in "\n".join(app.screen.view.lines))
        assert app.screen.pod == launcher_pod["metadata"]["name"]
        await pilot.press("escape")
        await wait_until(lambda: not isinstance(app.screen, LogScreen))
        await select(app, pilot, f"{job.uid}/Worker")
        await pilot.press("l")
        await wait_until(lambda: isinstance(app.screen, LogScreen)
                         and "listening on port 22" in "\n".join(app.screen.view.lines))
        assert app.screen.pod == workers[0]["metadata"]["name"]
