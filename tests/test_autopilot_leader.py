"""Two ``gpuconsole autopilot run`` processes on one host: exactly one leads and decides; when it
is killed the other takes over; SIGTERM stops a run cleanly."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

RULES = """
[[rules]]
name = "autostop"
kind = "idle-stop"
scope = "all"
idle_for = "30m"
"""
WAIT_S = 120.0  # a generous bound for a busy machine, never a speed claim


def _start(tmp: Path, name: str) -> tuple[subprocess.Popen[str], queue.Queue[dict]]:
    env = {**os.environ, "GPUCONSOLE_AUTOPILOT_DB": str(tmp / "autopilot.db"), "GPUCONSOLE_DB": str(tmp / f"{name}.db"),
           "GPUCONSOLE_AUDIT_DB": str(tmp / "audit.db"), "GPUCONSOLE_USERS": str(tmp / "users.toml"),
           "GPUCONSOLE_MFA": str(tmp / "mfa.json"), "AWS_EC2_METADATA_DISABLED": "true"}
    proc = subprocess.Popen([sys.executable, "-m", "gpuconsole", "autopilot", "run", "--demo", "--json", "--interval", "0.5",
                             "--config", str(tmp / "config.toml"), "--lock", str(tmp / "leader.lock")],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    lines: queue.Queue[dict] = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(json.loads(line))

    threading.Thread(target=pump, daemon=True).start()
    return proc, lines


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
