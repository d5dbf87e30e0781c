"""The real full-screen console in tmux (``set-clipboard on``), on the Kubernetes API test
server: a pod log line and a job annotation carrying OSC 52, colour and markup are drawn as
text (``tmux capture-pane -e``) and never set tmux's clipboard, the way an operator would
have found out."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests import kube_server as ks
from tests.kube_server import KubeCluster
from tests.test_inert_console import PLANTED

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")]


class Tmux:
    """A private tmux server (its own socket) with one window of ``cols`` x ``rows``."""

    def __init__(self, command: list[str], env: dict[str, str], cols: int = 160, rows: int = 45) -> None:
        self.socket = f"gpuconsole-test-{uuid.uuid4().hex[:8]}"
        self.env = env
        line = " ".join(f"'{part}'" for part in command)
        self.run("-f", "/dev/null", "new-session", "-d", "-x", str(cols), "-y", str(rows), "-s", "t", line)
        self.run("set-option", "-g", "set-clipboard", "on")

    def run(self, *args: str) -> str:
        done = subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=30,
                              env=self.env, check=False)
        assert done.returncode == 0, done.stderr
        return done.stdout

    def screen(self) -> str:
        return self.run("capture-pane", "-e", "-p", "-t", "t")

    def wait_for(self, words: str, timeout: float = 60) -> str:
        deadline = time.monotonic() + timeout
        while True:
            shown = self.screen()
            if words in shown:
                return shown
            if time.monotonic() > deadline:
                raise AssertionError(f"{words!r} never shown; the screen:\n{shown}")
            time.sleep(0.3)

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True, timeout=30, check=False)


def test_a_planted_pod_log_line_reaches_tmux_as_text_and_never_its_clipboard(kube: KubeCluster, tmp_path: Path) -> None:
    kube.server.add(ks.node("gpu-node-1"))
    job = ks.job("train-a", "ml")
    job["metadata"]["annotations"] = {"note": PLANTED}
    job = kube.server.add(job)
    pod = kube.server.add(ks.pod_for(job))
    kube.server.append_log("ml", pod["metadata"]["name"], "step 1 loss 0.5", f"step 2 {PLANTED}")
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home), "XDG_STATE_HOME": str(home / "state"), "XDG_CONFIG_HOME": str(home / "config"),
           "XDG_DATA_HOME": str(home / "data"), "GPUCONSOLE_AUDIT_DB": str(home / "audit.db"), "TERM": "xterm-256color",
           "KUBECONFIG": str(kube.kubeconfig)}
    tmux = Tmux([sys.executable, "-m", "gpuconsole", "--jobs", "kube", "--gpus", "off", "--cloud", "off",
                 "--namespace", "ml", "--no-db"], env)
    try:
        tmux.wait_for("gpuconsole")
        tmux.run("send-keys", "-t", "t", "3")
        tmux.wait_for("train-a")
        tmux.run("send-keys", "-t", "t", "l")
        shown = tmux.wait_for("step 2")
        assert "step 2 \\x1b]52;c;cHduZWQ=\\x07\\x1b[31mred\\x9b2J [bold red]markup[/]" in shown
        assert "\x1b]52" not in shown
        assert tmux.run("list-buffers") == "", "the planted OSC 52 set tmux's clipboard"
    finally:
        tmux.close()
