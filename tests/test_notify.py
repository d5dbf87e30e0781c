"""The alert model, episodes and queues, and each channel's shape, against local receivers.

The sender runs in-process on hand-built snapshots with a clock the test moves, so a channel
down for two minutes takes no two minutes."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from gpuconsole.core.config import ConfigError
from gpuconsole.core.notify.alerts import conditions
from gpuconsole.core.notify.config import channels_from_data
from gpuconsole.core.notify.outbox import Outbox
from gpuconsole.core.notify.sender import NotifySender
from gpuconsole.model import FleetSnapshot, Job, JobState
from tests.notify_peer import Receiver, fleet

T0 = 1_764_480_000.0


class Clock:
    def __init__(self, t: float = T0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.stop()


def _sender(tmp: Path, tables: list[dict], clock: Clock) -> NotifySender:
    return NotifySender(channels_from_data({"notify": tables}), Outbox(tmp / "notify.db"), clock)


def test_identities_and_history_held_time() -> None:
    found = conditions(fleet(T0))
    assert set(found) == {"budget:team-a:80", "gpu-idle:GPU-1111", f"autopilot:autostop:{int(T0 - 60)}"}
    idle = found["gpu-idle:GPU-1111"]
    assert idle.since == T0 - 2400 and dict(idle.labels) == {"gpu": "GPU-1111", "instance_id": "i-0abc"}
    assert dict(idle.details)["owner"] == "alice"
    demo = conditions(fleet(T0, demo=True))["budget:team-a:80"]
    assert demo.summary.startswith("[demo] ") and ("demo", "true") in demo.labels


def test_once_per_episode_after_for_then_resolve_and_no_resend_after_restart(tmp_path: Path, receiver: Receiver) -> None:
    clock = Clock()
    tables = [{"kind": "webhook", "url": f"{receiver.url}/hook"}]
    sender = _sender(tmp_path, tables, clock)
    job = Job("u1", "train", "ml", JobState.PENDING, created=T0 - 30)  # pending 30 s: under its 10 min
    snap = FleetSnapshot(taken_at=T0, jobs=(job,))
    sender.cycle(snap)
    assert receiver.bodies() == []
    clock.t = T0 + 600
    for _ in range(3):
        sender.cycle(snap)
    got = receiver.bodies()
    assert [(b["id"], b["status"]) for b in got] == [("job-pending:ml/train", "firing")]
    assert got[0]["labels"] == {"namespace": "ml", "job": "train"} and got[0]["starts_at"].endswith("Z")
    # killed and restarted: the same file, a new sender: nothing again
    sender.outbox.close()
    sender = _sender(tmp_path, tables, clock)
    sender.cycle(snap)
    assert len(receiver.bodies()) == 1
    clock.t += 5
    sender.cycle(FleetSnapshot(taken_at=clock.t))
    sender.cycle(FleetSnapshot(taken_at=clock.t))
    got = receiver.bodies()
    assert [(b["status"], b["ends_at"] is not None) for b in got] == [("firing", False), ("resolved", True)]
    assert stat.S_IMODE((tmp_path / "notify.db").stat().st_mode) == 0o600


def test_repeat_interval(tmp_path: Path, receiver: Receiver) -> None:
    clock = Clock()
    sender = _sender(tmp_path, [{"kind": "webhook", "url": receiver.url, "repeat": "1h", "kinds": ["budget"]}], clock)
    for step in range(0, 7300, 600):
        clock.t = T0 + step
        sender.cycle(fleet(clock.t, T0))
    assert [b["id"] for b in receiver.bodies()] == ["budget:team-a:80"] * 3  # fired, +1h, +2h


def test_a_channel_down_for_two_minutes_delivers_once_afterwards(tmp_path: Path, receiver: Receiver) -> None:
    clock = Clock()
    sender = _sender(tmp_path, [{"kind": "webhook", "url": receiver.url}], clock)
    receiver.down = True
    for step in range(0, 121, 5):
        clock.t = T0 + step
        sender.cycle(fleet(clock.t, T0))
    health = sender.outbox.health("webhook")
    assert health.failing_since == T0 and "HTTP 503" in health.last_error and health.waiting == 3
    receiver.down = False
    for step in range(125, 400, 5):
        clock.t = T0 + step
        sender.cycle(fleet(clock.t, T0))
    ids = [b["id"] for b in receiver.bodies()]
    assert sorted(ids) == sorted(conditions(fleet(T0)).keys()) and len(set(ids)) == 3
    assert sender.outbox.health("webhook").failing_since is None


def test_what_a_console_shows_of_a_failing_channel(tmp_path: Path, receiver: Receiver) -> None:
    from gpuconsole.core.notify.status import channel_alerts, sender_status

    clock = Clock()
    sender = _sender(tmp_path, [{"name": "ops", "kind": "webhook", "url": f"{receiver.url}/secret-path"}], clock)
    receiver.down = True
    sender.cycle(fleet(T0))
    status = sender_status(sender.channels, tmp_path / "notify.db", tmp_path / "none.lock")
    assert status.holder == ""
    (alert,) = channel_alerts(status, T0 + 130)
    assert alert.message == "notify channel ops failing for 2 min, 3 waiting: channel ops (127.0.0.1) answered HTTP 503"
    assert "secret-path" not in alert.message


def test_filters_by_kind_and_severity(tmp_path: Path, receiver: Receiver) -> None:
    clock = Clock()
    sender = _sender(tmp_path, [{"name": "pages", "kind": "webhook", "url": f"{receiver.url}/p", "min_severity": "warning",
                                 "kinds": ["gpu-idle", "autopilot"]}], clock)
    sender.cycle(fleet(T0))
    assert [b["id"] for b in receiver.bodies()] == ["gpu-idle:GPU-1111"]  # the autopilot's is info


def test_slack_and_pagerduty_shapes_with_secrets_from_files(tmp_path: Path, receiver: Receiver,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "slack.url").write_text(f"{receiver.url}/slack/T000/B000/XXXXSECRET\n")
    (tmp_path / "pd.key").write_text("R0UTINGKEYSECRET")
    monkeypatch.setenv("PD_KEY", "R0UTINGKEYSECRET")
    clock = Clock()
    sender = _sender(tmp_path, [
        {"kind": "slack", "url_file": str(tmp_path / "slack.url"), "kinds": ["budget"]},
        {"kind": "pagerduty", "url": f"{receiver.url}/pd", "routing_key_env": "PD_KEY", "kinds": ["budget"]},
    ], clock)
    sender.cycle(fleet(T0))
    clock.t += 10
    sender.cycle(fleet(clock.t, T0, budget=False))
    slack = receiver.bodies("/slack")
    assert len(slack) == 2 and "budget team-a passed 80%" in slack[0]["text"] and "resolved" in slack[1]["text"]
    pd = receiver.bodies("/pd")
    assert [e["event_action"] for e in pd] == ["trigger", "resolve"]
    assert {e["dedup_key"] for e in pd} == {"budget:team-a:80"} and pd[0]["routing_key"] == "R0UTINGKEYSECRET"
    assert pd[0]["payload"]["severity"] == "warning" and pd[0]["payload"]["summary"].startswith("budget team-a")


def test_config_checks() -> None:
    with pytest.raises(ConfigError, match="key url: use an https:// URL"):
        channels_from_data({"notify": [{"kind": "webhook", "url": "http://hooks.example.com/x"}]})
    with pytest.raises(ConfigError, match="Slack webhook URL is a secret"):
        channels_from_data({"notify": [{"kind": "slack", "url": "https://hooks.slack.com/services/x"}]})
    with pytest.raises(ConfigError, match="routing_key_file"):
        channels_from_data({"notify": [{"kind": "pagerduty"}]})
    with pytest.raises(ConfigError, match="unknown kind 'nope'"):
        channels_from_data({"notify": [{"kind": "webhook", "url": "https://x.example", "kinds": ["nope"]}]})
    with pytest.raises(ConfigError, match=r"\[\[notify\]\] #1 key colour: unknown key"):
        channels_from_data({"notify": [{"kind": "webhook", "url": "https://x.example", "colour": 1}]})
    a, b = channels_from_data({"notify": [{"kind": "alertmanager", "url": "https://am.example:9093"},
                                          {"kind": "webhook", "url": "http://[::1]:8080/x"}]})
    assert (a.name, b.name, a.repeat_s) == ("alertmanager", "webhook", 4 * 3600.0)
    two = channels_from_data({"notify": [{"kind": "webhook", "url": "https://a.example"},
                                         {"kind": "webhook", "url": "https://b.example"}]})
    assert [c.name for c in two] == ["webhook-1", "webhook-2"]


def test_command_channel(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    clock = Clock()
    sender = _sender(tmp_path, [{"kind": "command", "command": f"echo \"$GPUCONSOLE_ALERT_JSON\" >> {out}",
                                 "kinds": ["budget"]}], clock)
    sender.cycle(fleet(T0))
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(x["id"], x["status"]) for x in lines] == [("budget:team-a:80", "firing")]


def test_email_over_starttls_with_a_password_from_a_file(tmp_path: Path) -> None:
    pytest.importorskip("aiosmtpd")
    from tests.notify_peer import SmtpServer

    smtp = SmtpServer(tmp_path, "gpuconsole", "smtp-password-secret")
    try:
        (tmp_path / "smtp.password").write_text("smtp-password-secret\n")
        clock = Clock()
        sender = _sender(tmp_path, [{"kind": "email", "smtp_host": "127.0.0.1", "smtp_port": smtp.port,
                                     "username": "gpuconsole", "password_file": str(tmp_path / "smtp.password"),
                                     "from": "gpuconsole@example.com", "to": ["oncall@example.com"],
                                     "ca_file": str(smtp.ca_file), "kinds": ["budget"]}], clock)
        sender.cycle(fleet(T0))
        clock.t += 10
        sender.cycle(fleet(clock.t, T0, budget=False))
        subjects = [m["Subject"] for m in smtp.messages]
        assert subjects == ["[warning] budget team-a passed 80%: $850 of $1,000 (85%)",
                            "[resolved] budget team-a passed 80%: $850 of $1,000 (85%)"]
        assert "alert: budget:team-a:80" in smtp.messages[0].get_payload()
        stored = b"".join(p.read_bytes() for p in tmp_path.glob("notify.db*"))
        assert b"smtp-password-secret" not in stored
    finally:
        smtp.stop()


def test_the_autopilot_actions_its_database_records(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    from gpuconsole.core.notify.alerts import recorded_actions
    from gpuconsole.core.ops.autopilot.state import AutopilotState

    monkeypatch.setenv("GPUCONSOLE_AUTOPILOT_DB", str(tmp_path / "autopilot.db"))
    config = tmp_path / "config.toml"
    config.write_text('[[rules]]\nname = "autostop"\nkind = "idle-stop"\nscope = "all"\nidle_for = "30m"\n')
    assert recorded_actions(config) == []
    state = AutopilotState(tmp_path / "autopilot.db")
    at = time.time() - 30
    state.acted("autostop", at, "stopped i-0abc")
    state.close()
    (alert,) = recorded_actions(config)
    assert alert.identity == f"autopilot:autostop:{int(at)}" and alert.summary == "autopilot rule autostop acted: stopped i-0abc"


def test_an_xid_a_rule_that_paused_itself_and_an_old_access_key_are_alerts_too() -> None:
    """The console's other findings reach the channels: a GPU's XID error (critical, at once), an
    autopilot rule that paused itself, and its key hygiene (one alert per key, whatever its age)."""
    import msgspec

    from gpuconsole.core.notify.alerts import KINDS, conditions
    from gpuconsole.model import Alert, AutopilotRuleStatus, Severity

    now = 1_764_480_000.0
    snap = fleet(now, budget=False, idle=False, autopilot=False)
    gpu = msgspec.structs.replace(snap.gpus[0], xid_errors=79)
    key = Alert(Severity.WARNING, "security", "AWS access key AKIA…WXYZ in use is 95 days old (rotate keys …)", now)
    rule = AutopilotRuleStatus("autostop", "idle-stop", "all", "", paused=True, paused_reason="3 failed actions in a row")
    snap = msgspec.structs.replace(snap, gpus=(gpu,), alerts=(key,), autopilot=(rule,))
    found = conditions(snap)
    assert found["gpu-xid:GPU-1111:79"].severity is Severity.CRITICAL and KINDS["gpu-xid"].for_s == 0
    assert "paused itself: 3 failed actions" in found["rule-paused:autostop"].summary
    older = msgspec.structs.replace(key, message=key.message.replace("95 days", "96 days"))
    again = conditions(msgspec.structs.replace(snap, alerts=(older,)))
    assert {i for i in found if i.startswith("security:")} == {i for i in again if i.startswith("security:")} == {
        "security:AWS access key AKIA…WXYZ in use"}, "a day older is the same alert, not a new one"
