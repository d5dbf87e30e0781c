"""Two ``gpuconsole autopilot run`` processes: exactly one leads and decides, through a file lock
on one host or through the ``gpuconsole-autopilot`` Lease on the Kubernetes API test server;
when the leader is killed the other takes over; SIGTERM stops a run cleanly."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import json_lines

pytestmark = pytest.mark.slow

RULES = """
[[rules]]
name = "autostop"
kind = "idle-stop"
scope = "all"
idle_for = "30m"
"""
WAIT_S = 120.0  # a generous bound for a busy machine, never a speed claim


def _start(tmp: Path, name: str, *extra: str, env_extra: dict[str, str] | None = None,
           demo: bool = True) -> tuple[subprocess.Popen[str], queue.Queue[dict]]:
    env = {**os.environ, **(env_extra or {}), "GPUCONSOLE_AUTOPILOT_DB": str(tmp / "autopilot.db"), "GPUCONSOLE_DB": str(tmp / f"{name}.db"),
           "GPUCONSOLE_AUDIT_DB": str(tmp / "audit.db"), "GPUCONSOLE_USERS": str(tmp / "users.toml"),
           "GPUCONSOLE_MFA": str(tmp / "mfa.json"), "AWS_EC2_METADATA_DISABLED": "true"}
    argv = [sys.executable, "-m", "gpuconsole", "autopilot", "run", "--json", "--interval", "0.5",
            "--config", str(tmp / "config.toml"), "--lock", str(tmp / "leader.lock"), *extra]
    if demo:
        argv.append("--demo")
    return json_lines(argv, stderr=subprocess.DEVNULL, env=env)


def _next(lines: queue.Queue[dict]) -> dict:
    return lines.get(timeout=WAIT_S)


def test_exactly_one_leads_and_the_other_takes_over_when_it_dies(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text(RULES)
    a, a_lines = _start(tmp_path, "a")
    try:
        assert "decision" in _next(a_lines)  # a started first and leads
        b, b_lines = _start(tmp_path, "b")
        try:
            seen = [_next(b_lines) for _ in range(3)]
            assert all(line == {"leader": False, "holder": seen[0]["holder"]} for line in seen)
            assert seen[0]["holder"].endswith(f":{a.pid}")
            a.send_signal(signal.SIGKILL)
            a.wait(WAIT_S)
            while "decision" not in (line := _next(b_lines)):
                assert line["leader"] is False
            assert line["rule"] == "autostop"
            b.send_signal(signal.SIGTERM)
            assert b.wait(WAIT_S) == 0  # a clean stop
        finally:
            b.kill()
    finally:
        a.kill()


def test_on_a_cluster_the_lease_elects_one_and_the_other_takes_over(tmp_path: Path, kube: Any) -> None:
    """No file lock is shared here (each process has its own): only the Lease can keep one of
    them standing by."""
    (tmp_path / "config.toml").write_text(RULES)
    no_aws = {"AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull, "KUBECONFIG": str(kube.kubeconfig)}
    for key in ("AWS_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        no_aws[key] = ""
    cluster = ("--jobs", "kube", "--cloud", "off", "--gpus", "off", "--namespace", "ml", "--lease-seconds", "3")
    a, a_lines = _start(tmp_path, "a", *cluster, "--lock", str(tmp_path / "a.lock"), env_extra=no_aws, demo=False)
    try:
        assert "decision" in _next(a_lines)
        lease = kube.server.get("Lease", "gpuconsole-autopilot", "ml")
        assert lease is not None and lease["spec"]["holderIdentity"].endswith(f":{a.pid}")
        b, b_lines = _start(tmp_path, "b", *cluster, "--lock", str(tmp_path / "b.lock"), env_extra=no_aws, demo=False)
        try:
            seen = [_next(b_lines) for _ in range(4)]
            assert all(line.get("leader") is False for line in seen)
            assert seen[-1]["holder"].endswith(f":{a.pid}")
            a.send_signal(signal.SIGKILL)
            a.wait(WAIT_S)
            while "decision" not in (line := _next(b_lines)):
                assert line["leader"] is False
            lease = kube.server.get("Lease", "gpuconsole-autopilot", "ml")
            assert lease["spec"]["holderIdentity"].endswith(f":{b.pid}")
            assert lease["spec"]["leaseTransitions"] == 1
            b.send_signal(signal.SIGTERM)
            assert b.wait(WAIT_S) == 0
            released = kube.server.get("Lease", "gpuconsole-autopilot", "ml")
            assert released["spec"]["holderIdentity"] == ""  # given up on a clean stop
        finally:
            b.kill()
    finally:
        a.kill()
    # Every write after the first carried the resourceVersion it read (a 409 otherwise).
    puts = kube.server.requested("leases/gpuconsole-autopilot", method="PUT")
    assert puts


def test_the_lease_is_taken_only_after_its_holder_stops_renewing_and_a_conflict_loses(kube: Any) -> None:
    from gpuconsole.backends.kube import KubeLease

    ticks = [0.0]
    a = KubeLease(kube.backend(watch=False), "ml", "gpuconsole-autopilot", "a", lease_s=10, clock=lambda: ticks[0])
    b = KubeLease(kube.backend(watch=False), "ml", "gpuconsole-autopilot", "b", lease_s=10, clock=lambda: ticks[0])
    assert a.acquire() and not b.acquire() and b.holder() == "a"
    ticks[0] = 9.0
    assert a.acquire()  # renewed: b sees the record change and starts its wait over
    ticks[0] = 15.0
    assert not b.acquire()
    ticks[0] = 26.0  # a stopped renewing more than 10 s (b's clock) ago
    assert b.acquire() and b.holder() == "b"
    assert not a.acquire() and a.holder() == "b"  # a lost it and knows
    assert b.acquire()  # asked again within the retry period: the last answer stands, no request
    kube.server.fail(409, times=1, path_contains="leases/gpuconsole-autopilot", method="PUT")
    ticks[0] = 29.0
    assert not b.acquire()  # the renewal raced another writer: not ours this time
    ticks[0] = 32.0
    assert b.acquire()
    lease = kube.server.get("Lease", "gpuconsole-autopilot", "ml")
    assert lease["spec"]["holderIdentity"] == "b" and lease["spec"]["leaseTransitions"] == 1


def test_cooldowns_travel_in_the_lease_to_the_replica_that_takes_over(kube: Any) -> None:
    from gpuconsole.backends.kube import KubeLease
    from gpuconsole.core.ops.autopilot.state import AutopilotState

    ticks = [0.0]
    a = KubeLease(kube.backend(watch=False), "ml", "gpuconsole-autopilot", "a", lease_s=10, clock=lambda: ticks[0])
    b = KubeLease(kube.backend(watch=False), "ml", "gpuconsole-autopilot", "b", lease_s=10, clock=lambda: ticks[0])
    assert a.acquire()
    a.share("train-pool", 1_800_000_000.0)  # a launched, then renews once (at once: news to share) and dies
    assert a.acquire()
    assert not b.acquire()
    ticks[0] = 30.0
    assert b.acquire()
    state = AutopilotState()  # b's own database knows nothing of it
    state.adopt(b.shared())
    assert state.get("train-pool").last_action_at == 1_800_000_000.0
    lease = kube.server.get("Lease", "gpuconsole-autopilot", "ml")
    assert lease["metadata"]["annotations"]["autopilot.gpuconsole.io/last-action.train-pool"] == "1800000000.000"


def test_on_a_cluster_the_sender_is_read_from_the_lease_without_taking_it(kube: Any) -> None:
    """The Overview's "alerts sent by …" on a cluster: the Lease's holder, read, never taken."""
    from gpuconsole.backends.kube import KubeLease
    from gpuconsole.core.notify.status import current_sender

    backend = kube.backend(watch=False)
    assert current_sender(backend, "ml") == ""  # no Lease yet: nobody sends
    holder = KubeLease(backend, "ml", "gpuconsole-autopilot", "pod-a:1 (notify run)", lease_s=30)
    assert holder.acquire()
    puts = len(kube.server.requested("leases/gpuconsole-autopilot", method="PUT"))
    assert current_sender(backend, "ml") == "pod-a:1 (notify run)"
    assert len(kube.server.requested("leases/gpuconsole-autopilot", method="PUT")) == puts, "read only"
    lease = kube.server.get("Lease", "gpuconsole-autopilot", "ml")
    assert lease["spec"]["holderIdentity"] == "pod-a:1 (notify run)"
