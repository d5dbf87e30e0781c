"""Budgets and idle-stop on Azure: one ``budget check --enforce`` stops in-scope instances on AWS
(moto), Alibaba Cloud (the ECS peer) and Azure (the ARM peer) alike, each through its own API, each
action audited; on Azure a stop deallocates, also a VM that is powered off but still allocated;
idle-stop deallocates too, never only powers off."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuconsole.cli.main import main
from gpuconsole.core import paths
from gpuconsole.core.access.audit import AuditLog
from gpuconsole.core.paths import config_dir
from tests.azure_peer import SUBSCRIPTION, AzurePeer, azure, azure_env  # noqa: F401 (fixtures)
from tests.test_budget_spot import ENFORCE, RESEARCH, add_research, on_demand, sent_ids, states
from tests.test_azure_wiring import azure_table


@pytest.mark.slow
def test_stop_all_by_tag_on_aws_alibaba_and_azure(capsys, aws_peer, ecs, azure: AzurePeer):  # noqa: F811
    config = config_dir() / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(f'[alibaba]\nregions = ["cn-hangzhou"]\nendpoint = "{ecs.url}"\n{azure_table(azure)}')
    aws_in, aws_out = on_demand(aws_peer, RESEARCH), on_demand(aws_peer)
    ali_in = ecs.world.add("ecs.gn7i-c8g1.2xlarge", tags=RESEARCH)
    az_running = azure.world.add("Standard_NC24ads_A100_v4", tags=RESEARCH)
    az_allocated = azure.world.add("Standard_NC4as_T4_v3", tags=RESEARCH, power="stopped")  # powered off, still billing
    az_spot = azure.world.add("Standard_NC4as_T4_v3", tags=RESEARCH, spot=True)
    az_released = azure.world.add("Standard_NC4as_T4_v3", tags=RESEARCH, power="deallocated")
    az_out = azure.world.add("Standard_NC4as_T4_v3", tags={"Budget": "inference"})
    add_research(capsys, "100:notify+stop-all")

    code = main([*ENFORCE, "--wait", "120"])  # three clouds polled in turn: room on a loaded machine
    out, err = capsys.readouterr()

    assert code == 1, err
    assert sent_ids(aws_peer, "StopInstances") == [aws_in]
    assert states(aws_peer)[aws_out] == "running"
    assert sorted(p["InstanceId"] for a, p in ecs.world.calls if a == "StopInstance") == [ali_in]
    deallocated = sorted(p.split("/virtualMachines/")[0] + "/virtualMachines/" + p.split("/")[-2]
                         for m, p, _q in azure.world.calls if m == "POST" and p.endswith("/deallocate"))
    assert deallocated == sorted([az_running, az_allocated, az_spot])
    assert not [p for m, p, _q in azure.world.calls if p.endswith("/powerOff")]  # never only powered off
    assert [azure.world.power(v) for v in (az_running, az_allocated, az_spot, az_released, az_out)] == [
        "deallocated", "deallocated", "deallocated", "deallocated", "running"]
    targets = {r.target for r in AuditLog(paths.audit_db_path()).records() if r.action == "stop" and r.result != "started"}
    assert targets == {aws_in, ali_in, az_running, az_allocated, az_spot}


def test_idle_stop_deallocates_an_idle_azure_vm(tmp_path: Path, azure: AzurePeer) -> None:
    """The engine decides on live figures; the stop goes through the action path (audited as the
    rule) to a deallocate."""
    import msgspec

    from gpuconsole.backends.azure import AzureCloud, AzureSettings
    from gpuconsole.core.access.access import UsersTable
    from gpuconsole.core.access.guard import Guard
    from gpuconsole.core.access.mfa import MfaStore
    from gpuconsole.core.ops.actions import ActionLog
    from gpuconsole.core.ops.autopilot.actuator import CloudActuator
    from gpuconsole.core.ops.cloud_ops import CloudOps
    from tests.test_autopilot import IDLE, engine_for, gpu, snap

    idle = azure.world.add("Standard_NC24ads_A100_v4", tags={"Pool": "serve"})
    busy = azure.world.add("Standard_NC24ads_A100_v4", tags={"Pool": "serve"})
    cloud = AzureCloud(AzureSettings(subscription_id=SUBSCRIPTION, arm_endpoint=azure.url,
                                     prices_endpoint=f"{azure.url}/api/retail/prices"))
    nodes = {idle: "aks-gpu-0", busy: "aks-gpu-1"}
    fleet = tuple(msgspec.structs.replace(i, node=nodes[i.instance_id]) for i in cloud.poll_instances().instances)
    now = [1_800_000_000.0]
    audit = AuditLog(tmp_path / "audit.db", lambda: now[0])
    guard = Guard(UsersTable(tmp_path / "users.toml"), MfaStore(tmp_path / "mfa.json"), audit, user="ops")
    ops = CloudOps(cloud, lambda: None, clock=lambda: now[0], log=ActionLog(guard=guard))
    engine = engine_for(IDLE)
    gpus = (gpu(nodes[idle], 0.0), gpu(nodes[busy], 0.0, process=True))
    engine.tick(snap(now[0], fleet, gpus), CloudActuator(ops))
    now[0] += 31 * 60
    [decision] = engine.tick(snap(now[0], fleet, gpus), CloudActuator(ops))
    assert decision.verb == "stop" and decision.ok, decision.outcome
    assert [p.split("/")[-2] for m, p, _q in azure.world.calls if m == "POST"] == [idle.rsplit("/", 1)[1]]
    assert [p.rsplit("/", 1)[1] for m, p, _q in azure.world.calls if m == "POST"] == ["deallocate"]
    assert azure.world.power(idle) == "deallocated" and azure.world.power(busy) == "running"
    assert {r.actor for r in audit.records() if r.action == "stop"} == {"autopilot:autostop"}
