"""``autopilot run`` is the sender of alerts while it leads, and a console shows a failing channel.

The autopilot and ``notify run`` hold one lock: while the autopilot leads, ``notify run`` stands
by and names it, and an alert goes out once. A demo sends nothing without ``--notify-demo``, and
a config without ``[[notify]]`` makes no queue. A channel whose queue says it fails is a warning
in the console's alerts, naming its host and never its secret."""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from pathlib import Path

import pytest

from gpuconsole.cli.main import main
from gpuconsole.core.fleet.console import Console, ConsoleOptions
from gpuconsole.core.fleet.sources import SourceOptions
from gpuconsole.core.notify.outbox import Outbox
from gpuconsole.core.notify.status import ChannelWatch
from gpuconsole.model import Severity
from tests.helpers import wait_for
from tests.notify_peer import Receiver
from tests.test_notify_cli import DEMO, WAIT_S, _config, _no_secret, _start, _stop, _until, receiver

__all__ = ["receiver"]  # the local receiver fixture of the notify tests


@pytest.mark.slow
def test_autopilot_run_sends_once_while_it_leads_and_notify_run_stands_by(tmp_path: Path, receiver: Receiver) -> None:
    config = _config(tmp_path, receiver)  # hook, slack and pagerduty, each for source alerts
    autopilot, a_lines = _start(tmp_path, config, "autopilot")
    notify = None
    try:
        assert _until(a_lines, "delivered")["status"] == "firing"
        receiver.wait_for(lambda got: len(got) >= 1, "/hook")
        notify, n_lines = _start(tmp_path, config)
        standby = _until(n_lines, "standby")
        assert standby["holder"] == f"{os.uname().nodename}:{autopilot.pid}"  # who sends: the autopilot
        time.sleep(2.0)  # a few more cycles of both
        assert notify.poll() is None
    finally:
        errors = [_stop(p) for p in (autopilot, notify) if p is not None]
    hooks = receiver.bodies("/hook")
    assert Counter((h["id"], h["status"]) for h in hooks) == {("source:sim", "firing"): 1}
    assert hooks[0]["labels"]["demo"] == "true" and hooks[0]["summary"].startswith("[demo] ")
    assert Counter(e["event_action"] for e in receiver.bodies("/pd")) == {"trigger": 1}
    _no_secret(tmp_path, [*errors, json.dumps(hooks)])


def test_the_demo_sends_nothing_without_notify_demo_and_no_notify_table_makes_no_queue(
        tmp_path: Path, receiver: Receiver, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    config = _config(tmp_path, receiver)
    monkeypatch.setenv("GPUCONSOLE_DEMO_DIR", str(tmp_path / "demo"))
    monkeypatch.setenv("GPUCONSOLE_AUTOPILOT_DB", str(tmp_path / "autopilot.db"))
    monkeypatch.setenv("GPUCONSOLE_NOTIFY_DB", str(tmp_path / "notify.db"))
    lock = ["--lock", str(tmp_path / "l.lock")]
    assert main(["autopilot", "run", "--once", "--json", "--demo", "--demo-faults", "gpus:error",
                 "--config", str(config), *lock]) == 0
    assert all("event" not in json.loads(line) for line in capsys.readouterr().out.splitlines())
    assert receiver.bodies() == []
    assert not (tmp_path / "demo" / "notify.db").exists() and not (tmp_path / "notify.db").exists()
    rules_only = tmp_path / "rules.toml"
    rules_only.write_text('[[budgets]]\nname = "fleet"\namount = 100\n')
    assert main(["autopilot", "run", "--once", *DEMO, "--config", str(rules_only), *lock]) == 0
    capsys.readouterr()
    assert not (tmp_path / "demo" / "notify.db").exists() and not (tmp_path / "notify.db").exists()
    assert main(["autopilot", "run", "--once", "--notify-demo", "--config", str(config), *lock]) == 2
    assert "--notify-demo goes with --demo" in capsys.readouterr().err


def test_a_failing_channel_is_a_console_alert_naming_its_host_only(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "T0SECRET/B0SECRET/pathsecret"
    (tmp_path / "slack.url").write_text(f"https://hooks.slack.example/services/{secret}\n")
    config = tmp_path / "config.toml"
    config.write_text(f'[[notify]]\nkind = "slack"\nurl_file = "{tmp_path / "slack.url"}"\n')
    monkeypatch.setenv("GPUCONSOLE_NOTIFY_DB", str(tmp_path / "notify.db"))
    now = time.time()
    outbox = Outbox(tmp_path / "notify.db")  # what a sender left: one message it could not deliver
    outbox.queue("source:sim", [("source:sim@1:firing:0", "slack", "firing", {"status": "firing"})], now - 180)
    outbox.failed("slack", ["source:sim@1:firing:0"], "channel slack (hooks.slack.example) answered HTTP 503", now - 180)
    outbox.close()
    console = Console(ConsoleOptions(sources=SourceOptions(demo=False), config_path=config, interval=0.25, timeout=0.5))
    console.start(open_store=False)
    try:
        wait_for(lambda: any(a.source == "notify:slack" for a in console.snapshot.alerts), timeout=WAIT_S)
        [alert] = [a for a in console.snapshot.alerts if a.source == "notify:slack"]
    finally:
        console.close()
    assert alert.severity is Severity.WARNING
    assert alert.message.startswith("notify channel slack failing for 3 min, 1 waiting:")
    assert "hooks.slack.example" in alert.message and "pathsecret" not in alert.message


def test_a_console_without_notify_tables_opens_no_queue(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUCONSOLE_NOTIFY_DB", str(tmp_path / "notify.db"))
    config = tmp_path / "config.toml"
    config.write_text('[[budgets]]\nname = "fleet"\namount = 100\n')
    assert ChannelWatch(config).alerts(time.time(), demo=False) == ()
    (tmp_path / "hook.toml").write_text('[[notify]]\nkind = "webhook"\nurl = "http://127.0.0.1:9/h"\n')
    assert ChannelWatch(tmp_path / "hook.toml").alerts(time.time(), demo=False) == ()  # no sender ran yet
    assert not (tmp_path / "notify.db").exists()


def test_help_names_the_queue_and_the_notify_tables(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "GPUCONSOLE_NOTIFY_DB" in out and "[[notify]]" in out
    with pytest.raises(SystemExit):
        main(["autopilot", "run", "--help"])
    assert "--notify-demo" in capsys.readouterr().out


async def test_the_overview_says_who_sends_the_alerts(tmp_path, monkeypatch):
    """With [[notify]] channels, the Sources card names the sender, or says that none runs."""
    from gpuconsole.core.notify.status import ChannelWatch
    from gpuconsole.core.ops.autopilot.leader import FileLeadership
    from tests.driving import running, shown
    from tests.helpers import wait_until

    config = tmp_path / "config.toml"
    config.write_text('[[notify]]\nkind = "webhook"\nurl = "http://127.0.0.1:9/hook"\n')
    lock = tmp_path / "sender.lock"
    monkeypatch.setattr("gpuconsole.core.notify.status.sender_lock_path", lambda: lock)
    async with running() as (app, pilot):
        watch = ChannelWatch(config)
        app.core._check_channels(watch)
        await wait_until(lambda: "no sender runs" in shown(app.query_one("#card-sources")))
        leader = FileLeadership(lock, "bastion:4242 (notify run)")
        assert leader.acquire()
        try:
            app.core._check_channels(watch)
            await wait_until(lambda: "alerts sent by bastion:4242 (notify run)" in shown(app.query_one("#card-sources")))
        finally:
            leader.release()


async def test_a_failing_channel_shows_in_the_sources_card():
    import msgspec

    from gpuconsole.model import Alert, Severity
    from gpuconsole.ui.panes.overview import sources_card
    from tests.driving import running

    async with running() as (app, pilot):
        failing = Alert(Severity.WARNING, "notify:chat", "notify channel chat failing for 3 min, 1 waiting: …", 0.0)
        snap = msgspec.structs.replace(app.snapshot, alerts=(failing,))
        text = sources_card(snap, app.palette, "").plain
        assert "notify chat · failing" in text and "no sender runs" in text

