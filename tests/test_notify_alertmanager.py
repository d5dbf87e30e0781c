"""A real Alertmanager (Debian's ``prometheus-alertmanager`` on 127.0.0.1) routing to a local
receiver: a budget crossing, an idle GPU and an autopilot action each arrive once, grouped by
alertname as routed; the resolve arrives when the condition ends; a sender killed and started
again over the same queue makes Alertmanager send nothing new."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from gpuconsole.core.notify.config import channels_from_data
from gpuconsole.core.notify.outbox import Outbox
from gpuconsole.core.notify.sender import NotifySender
from tests.notify_peer import ALERTMANAGER, Receiver, fleet, start_alertmanager

pytestmark = [pytest.mark.slow, pytest.mark.peer,
              pytest.mark.skipif(not os.access(ALERTMANAGER, os.X_OK), reason="prometheus-alertmanager not installed")]


def _groups(bodies: list[dict]) -> list[tuple[str, str, tuple[str, ...]]]:
    """(alertname, status, the alerts' gpuconsole ids) of each notification Alertmanager sent."""
    return [(b["groupLabels"]["alertname"], b["status"], tuple(sorted(a["labels"]["gpuconsole_id"] for a in b["alerts"])))
            for b in bodies]


def test_each_alert_arrives_once_grouped_then_resolves_and_a_restart_resends_nothing(tmp_path: Path) -> None:
    receiver = Receiver()
    proc, url = start_alertmanager(tmp_path, receiver.url)
    try:
        channels = channels_from_data({"notify": [{"kind": "alertmanager", "url": url}]})
        t0 = time.time()
        sender = NotifySender(channels, Outbox(tmp_path / "notify.db"))
        report = sender.cycle(fleet(time.time(), t0))
        assert len(report.fired) == 3 and not report.failed
        got = receiver.wait_for(lambda b: len(b) >= 3, "/am")
        time.sleep(2.5)  # two more group intervals: nothing more may come
        sender.cycle(fleet(time.time(), t0))
        first = _groups(receiver.bodies("/am"))
        assert sorted(first) == sorted([
            ("GpuconsoleBudgetCrossed", "firing", ("budget:team-a:80",)),
            ("GpuconsoleGpuIdle", "firing", ("gpu-idle:GPU-1111",)),
            ("GpuconsoleAutopilotAction", "firing", (f"autopilot:autostop:{int(t0 - 60)}",)),
        ]), first
        alert = next(a for b in got for a in b["alerts"] if a["labels"]["gpuconsole_kind"] == "gpu-idle")
        assert alert["labels"]["gpu"] == "GPU-1111" and alert["labels"]["instance_id"] == "i-0abc"
        assert alert["labels"]["severity"] == "warning" and "idle while billed" in alert["annotations"]["summary"]
        assert alert["generatorURL"]

        # killed and started again: a new sender over the same queue re-posts (its protocol), nothing is resent
        sender.outbox.close()
        sender = NotifySender(channels, Outbox(tmp_path / "notify.db"))
        again = sender.cycle(fleet(time.time(), t0))
        assert not again.fired and len(again.delivered) == 0
        time.sleep(2.5)
        assert len(receiver.bodies("/am")) == 3

        # the budget crossing ends: its resolve arrives, the others stay
        report = sender.cycle(fleet(time.time(), t0, budget=False))
        assert report.resolved == ["budget:team-a:80"]
        resolved = receiver.wait_for(lambda b: len(b) >= 4, "/am")[3:]
        assert _groups(resolved) == [("GpuconsoleBudgetCrossed", "resolved", ("budget:team-a:80",))]
        time.sleep(1.5)
        assert len(receiver.bodies("/am")) == 4
    finally:
        proc.terminate()
        proc.wait(10)
        receiver.stop()
