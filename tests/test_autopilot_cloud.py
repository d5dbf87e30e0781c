"""``gpuconsole autopilot run --once`` on a moto server and the Kubernetes API test server: jobs
pending for GPUs make the scale rule launch one instance of the pool's spec with the pool's
tags; a second run inside the cooldown launches none; both decisions are audited as the rule."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import pytest

from gpuconsole.cli.main import main
from gpuconsole.core.access.audit import AuditLog
from tests import kube_server as ks
from tests.aws_peer import MOTO_LINUX_AMI, AwsPeer

pytestmark = pytest.mark.slow

CONFIG = f"""
[[rules]]
name = "train-pool"
kind = "scale"
pool = "tag:Pool=train"
launch = {{ type = "g5.xlarge", region = "us-east-1", market = "on-demand", ami = "{MOTO_LINUX_AMI}", tags = {{ Pool = "train", Owner = "ml" }} }}
scale_out = "pending_gpus > 0"
max = 4
cooldown = "15m"
"""


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name, file in (("GPUCONSOLE_AUTOPILOT_DB", "autopilot.db"), ("GPUCONSOLE_DB", "cache.db"),
                       ("GPUCONSOLE_AUDIT_DB", "audit.db"), ("GPUCONSOLE_USERS", "users.toml"),
                       ("GPUCONSOLE_MFA", "mfa.json")):
        monkeypatch.setenv(name, str(tmp_path / file))
    (tmp_path / "config.toml").write_text(CONFIG)
    return tmp_path


def run_once(home: Path, *extra: str) -> list[dict[str, Any]]:
    out = io.StringIO()
    with redirect_stdout(out):
        code = main(["autopilot", "run", "--once", "--json", "--config", str(home / "config.toml"), "--gpus", "off",
                     "--cloud", "aws", "--region", "us-east-1", "--jobs", "kube", "--namespace", "ml",
                     "--lock", str(home / "leader.lock"), *extra])
    assert code == 0, out.getvalue()
    # moto's server shares this process and prints its own notes: keep the JSON lines.
    return [json.loads(line) for line in out.getvalue().splitlines() if line.startswith("{")]


def test_run_once_launches_the_pools_spec_then_the_cooldown_holds(home: Path, aws_peer: AwsPeer, kube: Any) -> None:
    waiting = kube.server.add(ks.job("waiting", "ml", gpus=4, state="pending"))
    kube.server.add(ks.pod_for(waiting, node=None, phase="Pending", unschedulable=ks.INSUFFICIENT_GPU))

    [first] = run_once(home)
    assert first["decision"] == "launch" and first["ok"] is True, first
    assert first["figures"]["pending_gpus"] == 4
    [sent] = aws_peer.proxy.sent("RunInstances")
    assert sent.params["InstanceType"] == "g5.xlarge" and sent.params["ImageId"] == MOTO_LINUX_AMI
    assert sent.params["MinCount"] == sent.params["MaxCount"] == "1"
    tags = {sent.params[k]: sent.params[k.replace(".Key", ".Value")] for k in sent.params
            if k.startswith("TagSpecification.1.Tag.") and k.endswith(".Key")}
    assert tags["Pool"] == "train" and tags["Owner"] == "ml"

    [second] = run_once(home)  # a new process, the job still pending, inside the cooldown
    assert second["decision"] == "wait" and "cooldown" in second["reason"]
    assert len(aws_peer.proxy.sent("RunInstances")) == 1

    records = [r for r in AuditLog(home / "audit.db").records() if r.action == "launch" and r.result != "started"]
    assert [r.actor for r in records] == ["autopilot:train-pool"]
    params = json.loads(records[0].params)
    assert params["rule"] == "train-pool" and "pending_gpus=4" in params["figures"]


def test_read_only_turns_run_into_a_plan(home: Path, aws_peer: AwsPeer, kube: Any) -> None:
    waiting = kube.server.add(ks.job("waiting", "ml", gpus=4, state="pending"))
    kube.server.add(ks.pod_for(waiting, node=None, phase="Pending", unschedulable=ks.INSUFFICIENT_GPU))
    [line] = run_once(home, "--read-only")
    assert line["decision"] == "launch" and line["ok"] is None  # decided, not done
    assert aws_peer.proxy.sent("RunInstances") == []
    assert not [r for r in AuditLog(home / "audit.db").records() if r.action == "launch"]


NO_GPU_TELEMETRY = f"""
[[rules]]
name = "train-pool"
kind = "scale"
pool = "tag:Pool=train"
launch = {{ type = "g5.xlarge", region = "us-east-1", market = "on-demand", ami = "{MOTO_LINUX_AMI}", tags = {{ Pool = "train" }} }}
scale_out = "gpu_util > 80 or pending_gpus > 0"
scale_in = "gpu_util < 20 for 30m"
max = 4

[[rules]]
name = "autostop"
kind = "idle-stop"
scope = "tag:Pool=train"
idle_for = "0s"
"""


def test_without_gpu_telemetry_pending_gpus_still_scale_and_idle_stop_never_acts(home: Path, aws_peer: AwsPeer,
                                                                              kube: Any) -> None:
    """A bastion with no GPU source: the GPU figures are unknown (their comparisons false), not
    stale, so the pending job launches; idle-stop, which needs the GPUs, waits."""
    (home / "config.toml").write_text(NO_GPU_TELEMETRY)
    waiting = kube.server.add(ks.job("waiting", "ml", gpus=4, state="pending"))
    kube.server.add(ks.pod_for(waiting, node=None, phase="Pending", unschedulable=ks.INSUFFICIENT_GPU))
    decisions = {line["rule"]: line for line in run_once(home)}
    assert decisions["train-pool"]["decision"] == "launch" and decisions["train-pool"]["ok"] is True, decisions
    assert "gpu_util" not in decisions["train-pool"]["figures"]
    assert len(aws_peer.proxy.sent("RunInstances")) == 1
    idle = decisions["autostop"]
    assert idle["decision"] == "wait" and "gpus source" in idle["reason"], idle
    assert aws_peer.proxy.sent("StopInstances") == []
