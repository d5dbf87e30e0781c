"""Spot evictions on Azure: a Scheduled Events ``Preempt`` notice (where the console can read it)
marks the Spot VM as about to be evicted, and spot-recover launches its replacement in another
zone with the same size, image and tags, through the action path."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from gpuconsole.backends.azure import AzureCloud, AzureSettings
from gpuconsole.cli.main import main
from gpuconsole.core.access.audit import AuditLog
from tests.azure_peer import SUBSCRIPTION, AzurePeer, azure, azure_env  # noqa: F401 (fixtures)
from tests.test_azure_launch import SUBNET
from tests.test_azure_wiring import azure_table

RULES = """
[[rules]]
name = "spot"
kind = "spot-recover"
scope = "tag:Pool=train"
fallback_after = 2
"""


def events_url(peer: AzurePeer) -> str:
    return f"{peer.url}/metadata/scheduledevents?api-version=2020-07-01"


def test_a_preempt_notice_marks_the_spot_vm(azure: AzurePeer) -> None:
    evicted = azure.world.add("Standard_NC4as_T4_v3", name="train-1", spot=True)
    calm = azure.world.add("Standard_NC4as_T4_v3", name="train-2", spot=True)
    azure.world.preempt("train-1")
    cloud = AzureCloud(AzureSettings(subscription_id=SUBSCRIPTION, arm_endpoint=azure.url,
                                     prices_endpoint=f"{azure.url}/api/retail/prices", scheduled_events=events_url(azure)))
    found = {i.instance_id: i for i in cloud.poll_instances().instances}
    assert found[evicted].spot_status == "marked-for-termination" and "Preempt" in found[evicted].state_reason
    assert found[calm].spot_status == "" and found[calm].state_reason == ""
    with pytest.raises(ValueError, match="scheduled_events"):
        AzureSettings(subscription_id=SUBSCRIPTION, scheduled_events="http://example.com/metadata/scheduledevents")
    AzureSettings(scheduled_events="http://169.254.169.254/metadata/scheduledevents?api-version=2020-07-01")  # the VM's own


def test_spot_recover_replaces_an_evicted_spot_vm(azure: AzurePeer, tmp_path: Path, monkeypatch) -> None:
    for name, file in (("GPUCONSOLE_AUTOPILOT_DB", "autopilot.db"), ("GPUCONSOLE_DB", "cache.db"),
                       ("GPUCONSOLE_AUDIT_DB", "audit.db"), ("GPUCONSOLE_USERS", "users.toml"), ("GPUCONSOLE_MFA", "mfa.json")):
        monkeypatch.setenv(name, str(tmp_path / file))
    azure.world.add("Standard_NC4as_T4_v3", name="train-1", spot=True, zone="1", tags={"Pool": "train", "Owner": "ml"})
    azure.world.preempt("train-1")
    config = tmp_path / "config.toml"
    config.write_text(azure_table(azure) + f'resource_groups = ["gpu-rg"]\nsubnet_id = "{SUBNET}"\n'
                      f'scheduled_events = "{events_url(azure)}"\n{RULES}')
    out = io.StringIO()
    with redirect_stdout(out):
        code = main(["autopilot", "run", "--once", "--json", "--config", str(config), "--gpus", "off", "--cloud", "azure",
                     "--jobs", "off", "--lock", str(tmp_path / "leader.lock")])
    assert code == 0, out.getvalue()
    decisions = [json.loads(line) for line in out.getvalue().splitlines() if line.startswith("{")]
    [spot] = [d for d in decisions if d["rule"] == "spot"]
    assert spot["decision"] == "relaunch" and spot["ok"] is True, spot["outcome"]
    [body] = azure.world.bodies
    assert body["properties"]["hardwareProfile"]["vmSize"] == "Standard_NC4as_T4_v3"
    assert body["properties"]["priority"] == "Spot" and body["zones"] != ["1"]
    assert body["properties"]["storageProfile"]["imageReference"]["offer"] == "ubuntu-hpc"
    assert body["tags"]["Pool"] == "train" and body["tags"]["Owner"] == "ml"
    assert {r.actor for r in AuditLog(tmp_path / "audit.db").records() if r.action == "launch"} == {"autopilot:spot"}
