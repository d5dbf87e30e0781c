"""``gpuconsole notify`` as processes: two ``notify run`` on one host, one sends and the other
stands by and names it; a sender killed (SIGKILL) and started again resends nothing; no secret
reaches a log, the audit log, the queue, ``notify list --json`` or ``notify status --json``;
``notify test``, ``manifest`` and the demo that sends nowhere."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuconsole.cli.main import main
from tests.notify_peer import Receiver
from tests.helpers import json_lines

pytestmark = pytest.mark.slow
WAIT_S = 60.0  # a generous bound for a busy machine, never a speed claim
SLACK_SECRET = "T0SECRET/B0SECRET/slackpathsecret"
PD_SECRET = "pagerdutyroutingkeysecret0123"
TOKEN_SECRET = "webhookbearertokensecret"
DEMO = ["--demo", "--notify-demo", "--demo-faults", "gpus:error"]  # the demo's budgets and a source error fire at once


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.stop()


def _env(tmp: Path) -> dict[str, str]:
    return {**os.environ, "GPUCONSOLE_DEMO_DIR": str(tmp / "demo"), "GPUCONSOLE_DB": str(tmp / "cache.db"),
            "GPUCONSOLE_AUTOPILOT_DB": str(tmp / "autopilot.db"), "GPUCONSOLE_NOTIFY_DB": str(tmp / "notify.db"),
            "GPUCONSOLE_AUDIT_DB": str(tmp / "audit.db"), "GPUCONSOLE_USERS": str(tmp / "users.toml"),
            "GPUCONSOLE_MFA": str(tmp / "mfa.json"), "GPUCONSOLE_LOG": "DEBUG", "AWS_EC2_METADATA_DISABLED": "true"}


def _config(tmp: Path, receiver: Receiver, *, kinds: str = '["source"]') -> Path:
    (tmp / "slack.url").write_text(f"{receiver.url}/slack/{SLACK_SECRET}\n")
    (tmp / "pd.key").write_text(PD_SECRET)
    (tmp / "token").write_text(TOKEN_SECRET)
    path = tmp / "config.toml"
    path.write_text(f"""
[[notify]]
name = "hook"
kind = "webhook"
url = "{receiver.url}/hook"
token_file = "{tmp / 'token'}"
kinds = {kinds}

[[notify]]
kind = "slack"
url_file = "{tmp / 'slack.url'}"
kinds = {kinds}

[[notify]]
kind = "pagerduty"
url = "{receiver.url}/pd"
routing_key_file = "{tmp / 'pd.key'}"
kinds = {kinds}
""")
    return path


def _start(tmp: Path, config: Path, command: str = "notify") -> tuple[subprocess.Popen[str], queue.Queue[dict[str, Any]]]:
    """``COMMAND run`` (``notify``, or ``autopilot``: the other sender) on the demo, one JSON line an event."""
    argv = [sys.executable, "-m", "gpuconsole", command, "run", "--json", "--interval", "0.3",
            "--config", str(config), "--lock", str(tmp / "sender.lock"), *DEMO]
    return json_lines(argv, stderr=subprocess.PIPE, env=_env(tmp))


def _until(lines: queue.Queue[dict[str, Any]], event: str) -> dict[str, Any]:
    deadline = time.monotonic() + WAIT_S
    while True:
        line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
        if line.get("event") == event:
            return line


def _stop(proc: subprocess.Popen[str]) -> str:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=WAIT_S)
    return err


def test_one_sends_the_other_stands_by_and_a_kill_resends_nothing(tmp_path: Path, receiver: Receiver) -> None:
    config = _config(tmp_path, receiver)
    a, a_lines = _start(tmp_path, config)
    b = None
    try:
        assert _until(a_lines, "sending")["holder"].endswith("(notify run)")
        _until(a_lines, "delivered")
        b, b_lines = _start(tmp_path, config)
        standby = _until(b_lines, "standby")
        assert standby["holder"] == f"{os.uname().nodename}:{a.pid} (notify run)"
        status = subprocess.run([sys.executable, "-m", "gpuconsole", "notify", "status", "--json", "--demo", "--config",
                                 str(config), "--lock", str(tmp_path / "sender.lock")], capture_output=True, text=True,
                                env=_env(tmp_path), timeout=WAIT_S)
        assert json.loads(status.stdout)["sender"] == standby["holder"]
        receiver.wait_for(lambda got: len(got) >= 1, "/pd")
        a.kill()  # no clean stop: the lock goes with the process, the queue stays
        a.communicate(timeout=WAIT_S)
        _until(b_lines, "sending")
        time.sleep(2.0)
    finally:
        errors = [_stop(p) for p in (a, b) if p is not None]
    hooks = receiver.bodies("/hook")
    assert hooks and all(h["id"] == "source:sim" for h in hooks)
    assert Counter((h["id"], h["status"]) for h in hooks).most_common(1)[0][1] == 1  # once each, across the kill
    assert all(h["labels"].get("demo") == "true" and h["summary"].startswith("[demo] ") for h in hooks)
    pd = receiver.bodies("/pd")
    assert Counter(e["event_action"] for e in pd)["trigger"] == 1
    _no_secret(tmp_path, [*errors, json.dumps(receiver.bodies("/hook"))])


def _no_secret(tmp: Path, texts: list[str]) -> None:
    env = _env(tmp)
    for verb in (["list", "--json"], ["status", "--json"]):
        done = subprocess.run([sys.executable, "-m", "gpuconsole", "notify", *verb, "--demo", "--config",
                               str(tmp / "config.toml")], capture_output=True, text=True, env=env, timeout=WAIT_S)
        assert done.returncode == 0, done.stderr
        texts += [done.stdout, done.stderr]
    stored = [p.read_bytes().decode(errors="replace") for p in tmp.rglob("*")
              if p.is_file() and p.suffix not in (".url", ".key") and p.name != "token"]
    for secret in (SLACK_SECRET, PD_SECRET, TOKEN_SECRET, "slackpathsecret"):
        for text in [*texts, *stored]:
            assert secret not in text


def test_a_failing_channel_names_its_host_only(tmp_path: Path, receiver: Receiver, capsys: pytest.CaptureFixture[str]) -> None:
    config = _config(tmp_path, receiver)
    receiver.down = True
    env = _env(tmp_path)
    done = subprocess.run([sys.executable, "-m", "gpuconsole", "notify", "run", "--once", "--config", str(config),
                           "--lock", str(tmp_path / "sender.lock"), *DEMO], capture_output=True, text=True, env=env,
                          timeout=WAIT_S)
    assert done.returncode == 0, done.stderr
    assert "channel slack (127.0.0.1) answered HTTP 503" in done.stdout
    status = subprocess.run([sys.executable, "-m", "gpuconsole", "notify", "status", "--json", "--demo", "--config",
                             str(config)], capture_output=True, text=True, env=env, timeout=WAIT_S)
    channels = {c["channel"]: c for c in json.loads(status.stdout)["channels"]}
    assert channels["slack"]["failing_since"] is not None and channels["slack"]["waiting"] >= 1
    listed = subprocess.run([sys.executable, "-m", "gpuconsole", "notify", "list", "--json", "--demo", "--config",
                             str(config)], capture_output=True, text=True, env=env, timeout=WAIT_S)
    rows = {r["id"]: r for r in json.loads(listed.stdout)}
    assert rows["source:sim"]["deliveries"]["hook"]["delivered_at"] is None
    _no_secret(tmp_path, [done.stdout, done.stderr])


def test_notify_test_sends_an_alert_and_its_resolve(tmp_path: Path, receiver: Receiver,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    config = _config(tmp_path, receiver)
    assert main(["notify", "test", "pagerduty", "--config", str(config)]) == 0
    assert "sent a test alert and its resolve through pagerduty (pagerduty, 127.0.0.1)" in capsys.readouterr().out
    assert [e["event_action"] for e in receiver.bodies("/pd")] == ["trigger", "resolve"]
    assert main(["notify", "test", "nope", "--config", str(config)]) == 2
    assert "no channel 'nope' (channels: hook, slack, pagerduty)" in capsys.readouterr().err


def test_the_demo_sends_nowhere_without_notify_demo(tmp_path: Path, receiver: Receiver,
                                                    capsys: pytest.CaptureFixture[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    config = _config(tmp_path, receiver, kinds='["source", "budget"]')
    monkeypatch.setenv("GPUCONSOLE_DEMO_DIR", str(tmp_path / "demo"))
    assert main(["notify", "run", "--once", "--demo", "--demo-faults", "gpus:error", "--config", str(config),
                 "--lock", str(tmp_path / "l.lock")]) == 0
    assert "demo: sending nowhere" in capsys.readouterr().out
    assert receiver.bodies() == []
    assert main(["notify", "run", "--once", "--notify-demo", "--config", str(config)]) == 2
    assert "--notify-demo goes with --demo" in capsys.readouterr().err


def test_manifests(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["notify", "manifest", "--kubernetes", "--namespace", "ops"]) == 0
    docs = list(yaml.safe_load_all(capsys.readouterr().out))
    kinds = [d["kind"] for d in docs]
    assert kinds == ["ServiceAccount", "Role", "RoleBinding", "ConfigMap", "PersistentVolumeClaim", "Deployment"]
    deployment = docs[-1]
    assert deployment["spec"]["replicas"] == 1 and deployment["spec"]["strategy"]["type"] == "Recreate"
    assert deployment["spec"]["template"]["spec"]["containers"][0]["args"][:2] == ["notify", "run"]
    assert main(["notify", "manifest", "--systemd"]) == 0
    assert "notify run --json" in capsys.readouterr().out
