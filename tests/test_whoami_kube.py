"""``access whoami`` for Kubernetes and TLS, against the API test server with RBAC by token: the
user the cluster names (``SelfSubjectReview``, the kubeconfig's name on an older server), per
watched namespace what RBAC lets it do to jobs, what is missing without a kubeconfig; the TLS
floor and the version the Kubernetes connection negotiated, on a local TLS 1.3 server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from gpuconsole.backends import tls
from gpuconsole.cli.main import main
from gpuconsole.core.access.access import UsersTable, current_user
from gpuconsole.model import Role
from tests.kube_identity_peer import SELF_REVIEWS, IdentityApiServer
from tests.kube_rbac import DEV_TOKEN, DEV_USER, READ, REVIEWS, WRITE
from tests.kube_server import write_kubeconfig
from tests.tls_peer import ca_file, server_context, tls_ca  # noqa: F401 - fixture

OWN, OTHER = "team-a", "team-b"
QUIET = ["--no-db", "--gpus", "off", "--cloud", "off"]


def developer_rules(server: IdentityApiServer) -> None:
    """Read jobs everywhere; change them in team-a only (team-b: read only)."""
    server.grant(DEV_TOKEN, DEV_USER, "*", READ, resources=("jobs", "cronjobs", "pods", "nodes", "events"))
    server.grant(DEV_TOKEN, DEV_USER, OWN, WRITE)


def serve(server: IdentityApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
          context: str = "rbac", tls_context=None, ca: str | None = None) -> IdentityApiServer:
    server.start(tls=tls_context)
    path = write_kubeconfig(tmp_path / "kubeconfig", server.url, {context: {"token": DEV_TOKEN}})
    if ca is not None:
        doc = yaml.safe_load(path.read_text())
        doc["clusters"][0]["cluster"]["certificate-authority"] = ca
        path.write_text(yaml.safe_dump(doc))
    monkeypatch.setenv("KUBECONFIG", str(path))
    developer_rules(server)
    return server


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request) -> Iterator[IdentityApiServer]:
    """An RBAC server reached as DEV_TOKEN through context ``rbac`` (user entry ``rbac-user``);
    ``indirect`` parameter False: a server older than SelfSubjectReview."""
    server = serve(IdentityApiServer(self_review=getattr(request, "param", True)), tmp_path, monkeypatch)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def strict_floor() -> Iterator[None]:
    """The process's TLS floor is back at the default after the test (the console sets it)."""
    tls.set_minimum_version(tls.DEFAULT_MINIMUM)
    yield
    tls.set_minimum_version(tls.DEFAULT_MINIMUM)


def whoami_json(capsys: pytest.CaptureFixture[str], *extra: str) -> dict:
    assert main(["access", "whoami", "--json", *QUIET, *extra]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.peer
def test_whoami_names_the_cluster_user_and_what_rbac_allows_per_namespace(
        cluster: IdentityApiServer, capsys: pytest.CaptureFixture[str]) -> None:
    kube = whoami_json(capsys, "--namespace", OWN, "--namespace", OTHER)["kubernetes"]

    assert kube["configured"] is True and kube["missing"] == []
    assert kube["user"] == DEV_USER and kube["user_from"] == "the cluster (SelfSubjectReview)"
    assert kube["groups"] == ["system:authenticated"]
    assert (kube["context"], kube["kubeconfig_user"], kube["cluster"]) == ("rbac", "rbac-user", "rbac-cluster")
    assert list(kube["jobs"]) == [OWN, OTHER]
    assert kube["jobs"][OTHER]["delete"] == {
        "allowed": False, "reason": f"denied by the cluster: RBAC does not let this login delete jobs in {OTHER}"}
    assert kube["jobs"][OTHER]["list"]["allowed"] is True
    assert kube["jobs"][OWN]["delete"] == {
        "allowed": True,
        "reason": f'RBAC: allowed by RoleBinding "{OWN}/{DEV_USER}-jobs" of Role "job-runner" to User "{DEV_USER}"'}
    asked = [r for r in cluster.requests if r.path in (REVIEWS, SELF_REVIEWS)]
    assert all(r.method == "POST" and r.token == DEV_TOKEN for r in asked)
    assert [r.path for r in asked].count(SELF_REVIEWS) == 1
    assert {(r.body["spec"]["resourceAttributes"]["namespace"], r.body["spec"]["resourceAttributes"]["verb"])
            for r in asked if r.path == REVIEWS} >= {(OTHER, "delete"), (OWN, "delete")}


@pytest.mark.parametrize("cluster", [False], indirect=True)
@pytest.mark.peer
def test_an_older_server_leaves_the_kubeconfigs_user_name(cluster: IdentityApiServer,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    kube = whoami_json(capsys, "--namespace", OTHER)["kubernetes"]

    assert [r.path for r in cluster.requests if r.path == SELF_REVIEWS], "it was asked, and answered 404"
    assert kube["user"] == "rbac-user"
    assert kube["user_from"] == "the kubeconfig (the API server has no SelfSubjectReview)"
    assert kube["jobs"][OTHER]["delete"]["allowed"] is False


@pytest.mark.peer
def test_a_developer_sees_the_namespaces_of_the_users_table(
        cluster: IdentityApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("GPUCONSOLE_USERS", str(tmp_path / "users.json"))
    monkeypatch.setenv("GPUCONSOLE_AUDIT_DB", str(tmp_path / "audit.db"))
    UsersTable(tmp_path / "users.json").init(current_user())
    UsersTable(tmp_path / "users.json").add("someone-else", Role.ADMIN)
    UsersTable(tmp_path / "users.json").set_role(current_user(), Role.DEVELOPER, (OTHER,))

    kube = whoami_json(capsys)["kubernetes"]

    assert list(kube["jobs"]) == [OTHER]
    assert kube["jobs"][OTHER]["create"]["allowed"] is False


@pytest.mark.peer
def test_watching_every_namespace_asks_the_cluster_wide_question(cluster: IdentityApiServer,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    kube = whoami_json(capsys)["kubernetes"]

    assert list(kube["jobs"]) == ["*"]
    assert kube["jobs"]["*"]["list"]["allowed"] is True
    assert kube["jobs"]["*"]["delete"] == {
        "allowed": False, "reason": "denied by the cluster: RBAC does not let this login delete jobs in every namespace"}
    sent = [r.body["spec"]["resourceAttributes"] for r in cluster.requests if r.path == REVIEWS]
    assert sent and all(a["namespace"] == "" for a in sent)


@pytest.mark.peer
def test_the_text_answer_is_readable_at_80_columns(cluster: IdentityApiServer,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["access", "whoami", *QUIET, "--namespace", OWN, "--namespace", OTHER]) == 0
    out = capsys.readouterr().out

    assert max(len(line) for line in out.splitlines()) <= 80
    assert "\nkubernetes\n" in out
    assert f"  user: {DEV_USER}\n" in out
    assert f"  jobs in {OWN}: may create, delete, patch, list\n" in out
    assert f"  jobs in {OTHER}: may list; may not create, delete, patch\n" in out
    assert "\ntls\n  min version: TLSv1.3\n" in out
    assert "{" not in out and "'allowed'" not in out


def test_without_a_kubeconfig_whoami_says_what_is_missing(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["access", "whoami", *QUIET]) == 0  # the test home has no kubeconfig
    out = capsys.readouterr().out
    assert ("kubernetes\n  configured: False\n  problem: no Kubernetes cluster configured\n"
            "  missing: point KUBECONFIG at a kubeconfig, or create ~/.kube/config (or pass\n"
            "      --kubeconfig)\n") in out

    kube = whoami_json(capsys, "--jobs", "kube", "--kubeconfig", "/nonexistent/kubeconfig")["kubernetes"]
    assert kube == {"configured": False, "problem": "kubeconfig /nonexistent/kubeconfig not found",
                    "missing": ["point KUBECONFIG at a kubeconfig, create ~/.kube/config, or pass --kubeconfig PATH"]}


@pytest.mark.peer
def test_a_silent_api_server_is_one_problem_line_not_five_waits(cluster: IdentityApiServer,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    cluster.hang(60)
    try:
        kube = whoami_json(capsys, "--namespace", OWN)["kubernetes"]
    finally:
        cluster.release()

    assert kube["user"] == "rbac-user" and kube["jobs"] == {}
    assert kube["problem"].startswith("asking the cluster who these credentials are: no answer from the API server")
    assert not [r for r in cluster.requests if r.path == REVIEWS], "no RBAC question after the server fell silent"


def test_the_demo_has_no_cluster_to_ask(capsys: pytest.CaptureFixture[str]) -> None:
    kube = whoami_json(capsys, "--demo")["kubernetes"]
    assert kube["configured"] is False and kube["missing"] == []
    assert kube["cluster"].startswith("none: the ") and kube["cluster"].endswith(" job source has no RBAC to ask")


@pytest.mark.peer
def test_whoami_reports_the_tls_version_the_kubernetes_connection_negotiated(
        tls_ca, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, strict_floor: None,
        capsys: pytest.CaptureFixture[str]) -> None:
    # A context name of its own: the source is recorded as "kube:tls13" by this test only.
    server = serve(IdentityApiServer(), tmp_path, monkeypatch, context="tls13",
                   tls_context=server_context(tls_ca, "1.3"), ca=ca_file(tls_ca, tmp_path))
    try:
        answer = whoami_json(capsys, "--context", "tls13", "--namespace", OWN)
    finally:
        server.stop()

    assert answer["kubernetes"]["user"] == DEV_USER
    assert answer["tls"]["negotiated"]["kube:tls13"] == "TLSv1.3"
    assert (answer["tls"]["min_version"], answer["tls"]["min_version_from"]) == ("TLSv1.3", "default")
    assert answer["tls"]["missing"] == []


def test_whoami_reports_a_floor_the_configuration_lowers(tmp_path: Path, strict_floor: None,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[tls]\nmin_version = "1.2"\n')

    section = whoami_json(capsys, "--config", str(config))["tls"]

    assert (section["min_version"], section["min_version_from"]) == ("TLSv1.2", "[tls] min_version")
    assert section["missing"] == ['[tls] min_version = "1.2" lowers the floor: remove it once every server '
                                  "speaks TLS 1.3"]
