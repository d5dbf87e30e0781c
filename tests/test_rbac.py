"""Kubernetes through RBAC, against the API test server with rules per token: what the login may
do is asked with SelfSubjectAccessReview and kept a minute; the Jobs pane dims a key the cluster
refuses and says why; a direct command gets the server's 403 in one line, audited as denied."""

from __future__ import annotations

from pathlib import Path

from gpuconsole.backends.kube import KubeJobs
from gpuconsole.cli.main import main
from gpuconsole.core.access.audit import AuditLog
from gpuconsole.core.access.rbac import ClusterPermissions, job_permissions
from gpuconsole.core.fleet.console import Console, ConsoleOptions
from gpuconsole.core.fleet.sources import SourceOptions
from gpuconsole.core.ops.actions import ActionKind
from tests.helpers import FrozenClock, wait_until
from tests.kube_rbac import DEV_TOKEN, DEV_USER, READ, REVIEWS, WRITE, RbacApiServer, rbac_kube  # noqa: F401
from tests.kube_server import job
from tests.driving import running, table

OWN, OTHER = "team-a", "team-b"


def developer_rules(server: RbacApiServer) -> None:
    """Read everything everywhere; change jobs in team-a only (team-b: read only)."""
    server.grant(DEV_TOKEN, DEV_USER, "*", READ, resources=("jobs", "cronjobs", "pods", "nodes", "events", "services"))
    server.grant(DEV_TOKEN, DEV_USER, OWN, WRITE)
    server.add(job("train-a", OWN))
    server.add(job("train-b", OTHER))


def control(server: RbacApiServer):
    backend = KubeJobs(watch=False, request_timeout=5.0)
    return backend, backend.job_control


def test_the_cluster_is_asked_with_a_self_subject_access_review(rbac_kube) -> None:
    developer_rules(rbac_kube)
    backend, ctl = control(rbac_kube)
    try:
        allowed, reason = ctl.review("delete", OWN)
        assert allowed
        assert reason == f'RBAC: allowed by RoleBinding "{OWN}/{DEV_USER}-jobs" of Role "job-runner" to User "{DEV_USER}"'
        assert ctl.review("delete", OTHER) == (False, "")
        assert ctl.review("list", OTHER)[0]
    finally:
        backend.close()
    sent = [r for r in rbac_kube.requests if r.path == REVIEWS]
    assert sent[0].method == "POST" and sent[0].token == DEV_TOKEN
    assert sent[0].body["spec"]["resourceAttributes"] == {"namespace": OWN, "verb": "delete", "group": "batch",
                                                          "resource": "jobs"}


def test_answers_are_kept_a_minute_per_namespace_and_verb(rbac_kube) -> None:
    developer_rules(rbac_kube)
    clock = FrozenClock()
    backend, ctl = control(rbac_kube)
    rbac = ClusterPermissions(lambda: ctl, clock)
    reviews = lambda: len([r for r in rbac_kube.requests if r.path == REVIEWS])  # noqa: E731
    try:
        assert rbac.why_not(ActionKind.DELETE_JOB, OTHER) is None, "nothing known yet: nothing dimmed"
        assert rbac.needs_asking(OTHER)
        rbac.refresh(OTHER)
        asked = reviews()
        assert asked == 4 and not rbac.needs_asking(OTHER)
        why = rbac.why_not(ActionKind.DELETE_JOB, OTHER)
        assert why == f"denied by the cluster: RBAC does not let this login delete jobs in {OTHER}"
        assert rbac.why_not(ActionKind.SUSPEND_JOB, OTHER).startswith("denied by the cluster")
        rbac.refresh(OTHER)
        clock.advance(59)
        rbac.refresh(OTHER)
        assert reviews() == asked, "kept for a minute: no new question"
        assert rbac.needs_asking(OWN), "kept per namespace"
        clock.advance(2)
        assert rbac.needs_asking(OTHER)
        perms = rbac.job_permissions(OTHER)
        assert reviews() == asked + 4
        assert perms["list"]["allowed"] is True and perms["delete"] == {"allowed": False, "reason": why}
        assert rbac.job_permissions(OWN)["delete"]["allowed"] is True
    finally:
        backend.close()


def test_job_permissions_without_a_console(rbac_kube) -> None:
    developer_rules(rbac_kube)
    perms = job_permissions(OTHER)
    assert {verb: p["allowed"] for verb, p in perms.items()} == {"create": False, "delete": False, "patch": False,
                                                                 "list": True}
    assert perms["list"]["reason"].startswith("RBAC: allowed by ClusterRoleBinding")


def test_job_permissions_without_a_cluster_say_why() -> None:
    perms = job_permissions("team-a")  # the test home has no kubeconfig
    assert perms["delete"]["allowed"] is None
    assert perms["delete"]["reason"].startswith("could not ask the cluster: no Kubernetes cluster configured")


def test_a_job_source_without_a_cluster_dims_nothing() -> None:
    rbac = ClusterPermissions(lambda: None)
    assert rbac.job_permissions("any")["delete"] == {
        "allowed": None, "reason": "this job source has no cluster to ask (demo or no Kubernetes)"}
    assert rbac.why_not(ActionKind.DELETE_JOB, "any") is None


def test_a_direct_delete_gets_the_servers_403_in_one_line_and_is_audited(rbac_kube, tmp_path: Path,
                                                                         monkeypatch, capsys) -> None:
    developer_rules(rbac_kube)
    audit_db = tmp_path / "audit.db"
    monkeypatch.setenv("GPUCONSOLE_AUDIT_DB", str(audit_db))
    rc = main(["--no-db", "--gpus", "off", "--cloud", "off", "job", "delete", f"{OTHER}/train-b", "--yes"])
    err = capsys.readouterr().err.strip()
    assert rc == 1
    assert err == (f'gpuconsole: error: denied by the cluster: jobs.batch "train-b" is forbidden: User "{DEV_USER}" cannot delete '
                   f'resource "jobs" in API group "batch" in the namespace "{OTHER}"')
    assert rbac_kube.get("Job", "train-b", OTHER) is not None
    record = [r for r in AuditLog(audit_db).records() if r.action == "delete-job"][-1]
    assert record.target == f"{OTHER}/train-b"
    assert record.result.startswith("denied: by the cluster: jobs.batch \"train-b\" is forbidden")
    # The namespace the rules allow: the same command deletes.
    assert main(["--no-db", "--gpus", "off", "--cloud", "off", "job", "delete", f"{OWN}/train-a", "--yes"]) == 0
    assert rbac_kube.get("Job", "train-a", OWN) is None


async def test_the_jobs_pane_dims_delete_where_the_cluster_refuses_it(rbac_kube) -> None:
    developer_rules(rbac_kube)
    rbac_kube.grant(DEV_TOKEN, DEV_USER, OTHER, ("create", "patch"))  # team-b: anything but delete
    clock = FrozenClock()
    options = ConsoleOptions(sources=SourceOptions(gpus="off", cloud="off", jobs="kube"), interval=0.25, timeout=2.0,
                             clock=clock)
    async with running(Console(options), live=False, ready=lambda app: app.access_principal is not None) as (
            app, pilot):
        await pilot.press("3")
        jobs = table(app, "job-table")
        await wait_until(lambda: len(jobs.shown_keys) == 2)
        pane = app.query_one("#jobs-pane")

        async def select(name: str) -> None:
            key = next(k for k in jobs.shown_keys if pane.jobs.by_key[k].name == name)
            jobs.focus()
            jobs.move_cursor(row=jobs.shown_keys.index(key))
            await pilot.pause()

        await select("train-b")
        await wait_until(lambda: pane.check_action("delete", ()) is None)
        line = pane.query_one(".access-line")
        assert line.display
        assert str(line.content).startswith("disabled: ctrl+d — ")
        assert pane.check_action("suspend", ()) is True, "what the cluster allows stays enabled"
        assert f"denied by the cluster: RBAC does not let this login delete jobs in {OTHER}" in str(line.content)
        await pilot.press("ctrl+d")
        await pilot.pause()
        assert rbac_kube.get("Job", "train-b", OTHER) is not None, "a dimmed key does nothing"
        await select("train-a")
        await wait_until(lambda: pane.check_action("delete", ()) is True)
        assert not pane.query_one(".access-line").display
