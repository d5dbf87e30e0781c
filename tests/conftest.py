"""Shared test set-up: no test reaches the network, a user's cache, or a real cloud."""

from __future__ import annotations

import os

import pytest

# The moto server, the fault-injecting proxy and the AWS environment, the Kubernetes API test server
# and the ECS peer, for tests that use them.
pytest_plugins = ["tests.aws_peer", "tests.kube_server", "tests.alibaba_peer"]

# boto3 would otherwise probe the instance-metadata address when it finds no credentials.
os.environ["AWS_EC2_METADATA_DISABLED"] = "true"
os.environ["ALIBABA_CLOUD_ECS_METADATA_DISABLED"] = "true"  # the ECS credential chain's RAM-role step
os.environ.pop("NO_COLOR", None)

# The fixtures that start a real protocol peer: a test that asks for one (itself or through
# another fixture) is marked ``peer``, so ``-m "not peer"`` leaves them all out.
PEER_FIXTURES = frozenset({"moto_server", "iam_moto", "kube_server", "rbac_kube", "tls_kube", "azure", "ecs"})


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: two workers a core, up to four more than the cores. The app tests spend about
    half their time waiting for the app to go idle, so one worker a core leaves the cores half
    used (on 2 cores: 248 s with 4 workers against 310 s with 2, the same tests)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return min(2 * cores, cores + 4)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if PEER_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.peer)


@pytest.fixture(autouse=True)
def _no_real_nvml(monkeypatch):
    """Tests never read this machine's GPUs: NVML's library "is missing" unless a test installs
    the fake layer (tests/fake_nvml.py); tests/device/ runs the real thing in a subprocess."""
    import pynvml

    def missing() -> None:
        raise pynvml.NVMLError_LibraryNotFound()

    monkeypatch.setattr(pynvml, "_LoadNvmlLibrary", missing)
    monkeypatch.setattr(pynvml, "nvmlInit", missing)


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path, monkeypatch):
    """Every test gets its own cache database location and no kubeconfig or AWS profile."""
    monkeypatch.setenv("GPUCONSOLE_DB", str(tmp_path / "cache" / "gpuconsole.db"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg-state"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg-data"))
    for var in ("GPUCONSOLE_USERS", "GPUCONSOLE_MFA", "GPUCONSOLE_AUDIT_DB", "GPUCONSOLE_MFA_CODE", "GPUCONSOLE_DEMO_DIR"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-kubeconfig"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
                "AWS_DEFAULT_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL",
                "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                "AWS_CONTAINER_CREDENTIALS_FULL_URI", "NO_COLOR", "KUBERNETES_SERVICE_HOST",
                "KUBERNETES_SERVICE_PORT"):
        monkeypatch.delenv(var, raising=False)
