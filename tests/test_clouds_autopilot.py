"""The autopilot on Alibaba Cloud: spot-recover sees a preemptible instance's reclaim notice
(``OperationLocks: Recycling``) on the ECS peer and launches its replacement in another zone with
the same image and tags; idle-stop acts through the same path."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from gpuconsole.cli.main import main
from gpuconsole.core.access.audit import AuditLog
from tests.alibaba_peer import EcsPeer

RULES = """
[[rules]]
name = "spot"
kind = "spot-recover"
scope = "tag:Pool=train"
fallback_after = 2
"""



@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ecs: EcsPeer) -> Path:
    for name, file in (("GPUCONSOLE_AUTOPILOT_DB", "autopilot.db"), ("GPUCONSOLE_DB", "cache.db"),
                       ("GPUCONSOLE_AUDIT_DB", "audit.db"), ("GPUCONSOLE_USERS", "users.toml"),
                       ("GPUCONSOLE_MFA", "mfa.json")):
        monkeypatch.setenv(name, str(tmp_path / file))
    (tmp_path / "config.toml").write_text(f'[alibaba]\nregions = ["cn-hangzhou"]\nendpoint = "{ecs.url}"\n{RULES}')
    return tmp_path


def run_once(home: Path) -> list[dict]:
    out = io.StringIO()
    with redirect_stdout(out):
        code = main(["autopilot", "run", "--once", "--json", "--config", str(home / "config.toml"), "--gpus", "off",
                     "--cloud", "alibaba", "--jobs", "off", "--lock", str(home / "leader.lock")])
    assert code == 0, out.getvalue()
    return [json.loads(line) for line in out.getvalue().splitlines() if line.startswith("{")]


def test_spot_recover_replaces_a_reclaimed_preemptible_instance(home: Path, ecs: EcsPeer) -> None:
    reclaimed = ecs.world.add("ecs.gn7i-c8g1.2xlarge", spot="SpotAsPriceGo", locks=("Recycling",),
                              tags={"Pool": "train", "Owner": "ml"})
    ecs.world.add("ecs.gn7i-c8g1.2xlarge", spot="SpotAsPriceGo", tags={"Pool": "train"})  # not reclaimed
    decisions = run_once(home)
    [spot] = [d for d in decisions if d["rule"] == "spot"]
    assert spot["decision"] == "relaunch" and spot["ok"] is True, spot["outcome"]
    [run] = [p for a, p in ecs.world.calls if a == "RunInstances" and "DryRun" not in p]
    assert run["InstanceType"] == "ecs.gn7i-c8g1.2xlarge" and run["SpotStrategy"] == "SpotAsPriceGo"
    assert run["ImageId"] == ecs.world.instances[reclaimed]["ImageId"]
    assert run.get("ZoneId") != ecs.world.instances[reclaimed]["ZoneId"]  # the only other zone is sold out: ECS picks
    tags = {run[f"Tag.{n}.Key"]: run[f"Tag.{n}.Value"] for n in range(1, 10) if f"Tag.{n}.Key" in run}
    assert tags["Pool"] == "train" and reclaimed in tags.values()
    actors = {r.actor for r in AuditLog(home / "audit.db").records() if r.action == "launch"}
    assert actors == {"autopilot:spot"}


def test_idle_stop_stops_an_idle_alibaba_instance_through_the_action_path(tmp_path: Path, ecs: EcsPeer) -> None:
    """The engine decides on live figures; the stop goes through the action path (audited as the
    rule) to StopInstance in economical mode."""
    import msgspec

    from gpuconsole.backends.alibaba import AlibabaCloud, AlibabaSettings
    from gpuconsole.core.access.access import UsersTable
    from gpuconsole.core.access.guard import Guard
    from gpuconsole.core.access.mfa import MfaStore
    from gpuconsole.core.ops.actions import ActionLog
    from gpuconsole.core.ops.autopilot.actuator import CloudActuator
    from tests.test_autopilot import IDLE, engine_for, gpu, snap

    idle = ecs.world.add("ecs.gn7i-c8g1.2xlarge", tags={"Pool": "serve"})
    busy = ecs.world.add("ecs.gn7i-c8g1.2xlarge", tags={"Pool": "serve"})
    cloud = AlibabaCloud(AlibabaSettings(regions=("cn-hangzhou",), endpoint=ecs.url))
    nodes = {idle: "cn-hangzhou.192.168.0.1", busy: "cn-hangzhou.192.168.0.2"}
    fleet = tuple(msgspec.structs.replace(i, node=nodes[i.instance_id]) for i in cloud.poll_instances().instances)
    now = [1_800_000_000.0]
    audit = AuditLog(tmp_path / "audit.db", lambda: now[0])
    guard = Guard(UsersTable(tmp_path / "users.toml"), MfaStore(tmp_path / "mfa.json"), audit, user="ops")
    from gpuconsole.core.ops.cloud_ops import CloudOps

    ops = CloudOps(cloud, lambda: None, clock=lambda: now[0], log=ActionLog(guard=guard))
    engine = engine_for(IDLE)
    gpus = (gpu(nodes[idle], 0.0), gpu(nodes[busy], 0.0, process=True))
    engine.tick(snap(now[0], fleet, gpus), CloudActuator(ops))
    now[0] += 31 * 60
    [decision] = engine.tick(snap(now[0], fleet, gpus), CloudActuator(ops))
    assert decision.verb == "stop" and decision.ok, decision.outcome
    assert [p["InstanceId"] for a, p in ecs.world.calls if a == "StopInstance"] == [idle]
    assert ecs.world.instances[idle]["StoppedMode"] == "StopCharging"
    assert {r.actor for r in audit.records() if r.action == "stop"} == {"autopilot:autostop"}
