"""TLS floor of the connections gpuconsole opens itself, against local HTTPS servers that speak
one TLS version each (throwaway certificates from trustme): a TLS 1.2 server is refused by
default in one line naming TLSv1.2, a TLS 1.3 server is accepted and its version recorded,
``[tls] min_version = "1.2"`` relaxes the floor; budget webhooks never follow a redirect."""

from __future__ import annotations

import ssl
from collections.abc import Iterator

import pytest

from gpuconsole.backends import tls
from gpuconsole.backends.base import BackendError
from gpuconsole.backends.prometheus import PrometheusGpus, PrometheusSettings
from gpuconsole.core.config import ConfigError
from gpuconsole.core.fleet.tls_config import apply_tls_config, read_min_version
from gpuconsole.core.money import budgets as rules
from gpuconsole.core.money.budget_evaluation import Crossing
from gpuconsole.core.ops.budget_notify import post_webhook
from gpuconsole.model import Budget, Threshold
from tests.helpers import START
from tests.kube_server import KubeApiServer, use_kubeconfig, write_kubeconfig
from tests.prometheus_peer import series
from tests.tls_peer import HookServer, TlsCannedPrometheus, ca_file, hook_servers, server_context, tls_ca  # noqa: F401


REFUSED = 'the server offered TLSv1.2; gpuconsole requires TLSv1.3 or newer ([tls] min_version = "1.2" allows TLSv1.2)'


@pytest.fixture(autouse=True)
def strict_floor() -> Iterator[None]:
    """Every test starts at the default floor and leaves it there."""
    tls.set_minimum_version(tls.DEFAULT_MINIMUM)
    yield
    tls.set_minimum_version(tls.DEFAULT_MINIMUM)


def crossing() -> Crossing:
    budget = Budget("research", 1000.0)
    return Crossing(budget, Threshold(100.0), 1200.0, 1200.0, rules.costs.month_start(START), START)


# --------------------------------------------------------------------------- Prometheus


@pytest.fixture
def prometheus(tls_ca, tmp_path, request) -> Iterator[tuple[TlsCannedPrometheus, str]]:
    server = TlsCannedPrometheus(server_context(tls_ca, request.param))
    server.answers["DCGM_FI_DEV_GPU_UTIL"] = [series(42, UUID="GPU-1", gpu="0", Hostname="node-a")]
    try:
        yield server, ca_file(tls_ca, tmp_path)
    finally:
        server.stop()


def poll(server: TlsCannedPrometheus, ca: str):
    source = PrometheusGpus(PrometheusSettings(server.url, ca_file=ca, timeout=5.0), env={})
    try:
        return source, source.poll_gpus()
    finally:
        source.close()


@pytest.mark.parametrize("prometheus", ["1.2"], indirect=True)
def test_prometheus_on_tls_1_2_is_refused_naming_the_version(prometheus) -> None:
    server, ca = prometheus
    with pytest.raises(BackendError) as caught:
        poll(server, ca)
    port = server.server_address[1]
    assert str(caught.value) == f"TLS with Prometheus at 127.0.0.1:{port} failed: {REFUSED}"
    assert not server.requests, "no query was sent over the refused connection"


@pytest.mark.parametrize("prometheus", ["1.3"], indirect=True)
def test_prometheus_on_tls_1_3_is_accepted_and_its_version_recorded(prometheus) -> None:
    server, ca = prometheus
    source, reading = poll(server, ca)
    assert server.requests
    assert tls.negotiated_versions()[source.name] == "TLSv1.3"
    assert tls.summary()["negotiated"][source.name] == "TLSv1.3" and tls.summary()["min_version"] == "TLSv1.3"


@pytest.mark.parametrize("prometheus", ["1.2"], indirect=True)
def test_min_version_1_2_in_the_config_lets_an_old_server_in(prometheus, tmp_path) -> None:
    server, ca = prometheus
    config = tmp_path / "config.toml"
    config.write_text('[tls]\nmin_version = "1.2"\n')
    assert apply_tls_config(config) is None
    source, _ = poll(server, ca)
    assert tls.negotiated_versions()[source.name] == "TLSv1.2"


def test_an_unknown_min_version_is_one_line_and_keeps_the_strict_floor(tmp_path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[tls]\nmin_version = "1.0"\n')
    with pytest.raises(ConfigError, match=r"min_version of \[tls\]: '1.0'"):
        read_min_version(config)
    tls.set_minimum_version("1.2")
    problem = apply_tls_config(config)
    assert problem and "\n" not in problem
    assert tls.minimum_version() == "1.3"


def test_an_untrusted_certificate_is_still_refused_whatever_the_floor(tls_ca, tmp_path) -> None:
    server = TlsCannedPrometheus(server_context(tls_ca, "1.3"))
    try:
        tls.set_minimum_version("1.2")
        with pytest.raises(BackendError, match="CERTIFICATE_VERIFY_FAILED"):
            PrometheusGpus(PrometheusSettings(server.url, timeout=5.0), env={}).poll_gpus()
    finally:
        server.stop()


# --------------------------------------------------------------------------- webhooks


@pytest.mark.parametrize(("version", "accepted"), [("1.2", False), ("1.3", True)])
def test_webhook_tls_floor(tls_ca, tmp_path, hook_servers, monkeypatch, version, accepted) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", ca_file(tls_ca, tmp_path))  # the system's store, as the hook sees it
    hook = HookServer(server_context(tls_ca, version))
    hook_servers.append(hook)
    if accepted:
        assert post_webhook(hook.url + "/hook", crossing(), timeout=5) == "webhook 127.0.0.1 answered HTTP 200"
        assert hook.posts and hook.posts[0][1]["budget"] == "research"
        assert tls.negotiated_versions()["webhook 127.0.0.1"] == "TLSv1.3"
    else:
        with pytest.raises(BackendError) as caught:
            post_webhook(hook.url + "/hook", crossing(), timeout=5)
        assert str(caught.value) == f"webhook 127.0.0.1 failed: {REFUSED}"
        assert not hook.posts


def test_a_local_webhook_that_redirects_is_not_followed(hook_servers) -> None:
    elsewhere = HookServer(host="127.0.0.2")  # stands for the other host a redirect names
    hook_servers.append(elsewhere)
    target = elsewhere.url + "/collect"
    local = HookServer(status=302, location=target)
    hook_servers.append(local)
    url = local.url.replace("127.0.0.1", "localhost") + "/hook"
    with pytest.raises(BackendError) as caught:
        post_webhook(url, crossing(), timeout=5)
    assert str(caught.value) == "webhook localhost answered HTTP 302: redirects are not followed"
    assert len(local.posts) == 1
    assert not elsewhere.posts and not elsewhere.gets, "nothing reached the host the redirect named"


# --------------------------------------------------------------------------- the Kubernetes API


@pytest.fixture
def tls_kube(tls_ca, tmp_path, monkeypatch, request) -> Iterator[KubeApiServer]:
    server = KubeApiServer().start(tls=server_context(tls_ca, request.param))
    path = write_kubeconfig(tmp_path / "kubeconfig", server.url)
    import yaml

    doc = yaml.safe_load(path.read_text())
    doc["clusters"][0]["cluster"]["certificate-authority"] = ca_file(tls_ca, tmp_path)
    path.write_text(yaml.safe_dump(doc))
    use_kubeconfig(monkeypatch, path)
    try:
        yield server
    finally:
        server.stop()


def kube_jobs():
    from gpuconsole.backends.kube import KubeJobs

    return KubeJobs(watch=False, request_timeout=5.0)


@pytest.mark.parametrize("tls_kube", ["1.3"], indirect=True)
def test_kubernetes_client_on_tls_1_3_is_accepted(tls_kube) -> None:
    backend = kube_jobs()
    try:
        backend.poll_jobs()
    finally:
        backend.close()
    assert tls_kube.requests
    assert tls.negotiated_versions()["kube"] == "TLSv1.3"


@pytest.mark.parametrize("tls_kube", ["1.2"], indirect=True)
def test_kubernetes_client_on_tls_1_2_is_refused_naming_the_version(tls_kube) -> None:
    backend = kube_jobs()
    try:
        with pytest.raises(BackendError) as caught:
            backend.poll_jobs()
    finally:
        backend.close()
    assert str(caught.value) == f"TLS with {tls_kube.url} failed listing Jobs: {REFUSED}"
    assert not tls_kube.requests


def test_the_client_context_always_verifies() -> None:
    context = tls.client_context("anything")
    assert context.verify_mode is ssl.CERT_REQUIRED and context.check_hostname
    assert context.minimum_version is ssl.TLSVersion.TLSv1_3


@pytest.mark.parametrize("tls_kube", ["1.3"], indirect=True)
def test_a_kubeconfig_that_skips_verification_is_refused(tls_kube) -> None:
    import os

    import yaml

    path = os.environ["KUBECONFIG"]
    with open(path) as handle:
        doc = yaml.safe_load(handle)
    cluster = doc["clusters"][0]["cluster"]
    cluster.pop("certificate-authority")
    cluster["insecure-skip-tls-verify"] = True
    with open(path, "w") as handle:
        yaml.safe_dump(doc, handle)
    backend = kube_jobs()
    try:
        with pytest.raises(BackendError, match="turns TLS verification off"):
            backend.poll_jobs()
    finally:
        backend.close()
    assert not tls_kube.requests


def test_the_console_applies_the_tls_table_and_reports_a_bad_one(tmp_path) -> None:
    from gpuconsole.core.fleet.console import Console, ConsoleOptions
    from gpuconsole.core.fleet.sources import SourceOptions

    config = tmp_path / "config.toml"
    config.write_text('[tls]\nmin_version = "1.2"\n')
    console = Console(ConsoleOptions(sources=SourceOptions(demo=True), config_path=config))
    try:
        assert tls.minimum_version() == "1.2"
    finally:
        console.close()
    config.write_text('[tls]\nmin_version = "1.1"\n')
    console = Console(ConsoleOptions(sources=SourceOptions(demo=True), config_path=config))
    try:
        assert tls.minimum_version() == "1.3"
        assert any(a.source == "config" and "min_version of [tls]: '1.1'" in a.message for a in console.snapshot.alerts)
    finally:
        console.close()
