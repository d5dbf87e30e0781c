"""Azure wired into the console: the ``[azure]`` table, ``--cloud azure``, ``bills_now`` in the
snapshot's JSON, an instance action through the one action path, one ``budget check --enforce``
across AWS (moto), Alibaba Cloud and Azure peers, and idle-stop deallocating."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuconsole.backends import registry
from gpuconsole.cli.main import main
from gpuconsole.core import paths
from gpuconsole.core.access.audit import AuditLog
from gpuconsole.core.config import ConfigError
from gpuconsole.core.fleet.cloud_config import azure_settings
from gpuconsole.core.fleet.sources import SourceOptions
from gpuconsole.core.paths import config_dir
from gpuconsole.model import SourceKind
from tests.azure_peer import SUBSCRIPTION, AzurePeer, azure, azure_env  # noqa: F401 (fixtures)


QUIET = ("--gpus", "off", "--jobs", "off", "--wait", "60")  # the wait ends at the first answer: room on a loaded machine


def azure_table(peer: AzurePeer) -> str:
    return (f'[azure]\nsubscription_id = "{SUBSCRIPTION}"\nregions = ["eastus"]\narm_endpoint = "{peer.url}"\n'
            f'prices_endpoint = "{peer.url}/api/retail/prices"\n')


def test_the_azure_table_and_when_azure_counts_as_set_up(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text("[alibaba]\nregions = [\"cn-hangzhou\"]\n")
    assert azure_settings(path) is None
    assert not registry.set_up(SourceKind.CLOUD, "azure", SourceOptions(), {})
    path.write_text(f'[azure]\nsubscription_id = "{SUBSCRIPTION}"\nresource_groups = ["gpu-rg"]\n')
    settings = azure_settings(path)
    assert settings.subscription_id == SUBSCRIPTION and settings.resource_groups == ("gpu-rg",)
    assert settings.arm_endpoint == "https://management.azure.com"
    assert registry.set_up(SourceKind.CLOUD, "azure", SourceOptions(azure=settings), {})
    path.write_text(f'[azure]\nsubscription_id = "{SUBSCRIPTION}"\narm_endpoint = "management.azure.com"\n')
    with pytest.raises(ConfigError, match=r"\[azure\] key arm_endpoint: not a full https URL") as caught:
        azure_settings(path)
    assert "\n" not in str(caught.value)
    path.write_text('[azure]\nsubscription_id = "not-a-guid"\n')
    with pytest.raises(ConfigError, match=r"\[azure\] key subscription_id"):
        azure_settings(path)


def test_snapshot_json_shows_a_powered_off_vm_as_still_billing(azure: AzurePeer, tmp_path: Path, capsys) -> None:
    running = azure.world.add("Standard_NC24ads_A100_v4")
    allocated = azure.world.add("Standard_NC4as_T4_v3", power="stopped")
    released = azure.world.add("Standard_NC4as_T4_v3", power="deallocated")
    config = tmp_path / "config.toml"
    config.write_text(azure_table(azure))
    assert main(["snapshot", "--json", "--no-db", "--cloud", "azure", "--config", str(config), "--wait", "60"]) == 0
    doc = json.loads(capsys.readouterr().out)
    rows = {i["instance_id"]: i for i in doc["instances"]}
    assert set(rows) == {running, allocated, released}
    assert rows[allocated]["cloud"] == "azure" and rows[allocated]["state"] == "stopped"
    assert [rows[i]["bills_now"] for i in (running, allocated, released)] == [True, True, False]
    assert doc["spend"]["burn_per_hour"] == pytest.approx(3.673 + 0.526)  # the powered-off VM still burns


def test_instance_stop_deallocates_through_the_action_path(azure: AzurePeer, tmp_path: Path, capsys) -> None:
    vm = azure.world.add("Standard_NC4as_T4_v3", power="stopped")
    config = tmp_path / "config.toml"
    config.write_text(azure_table(azure))
    code = main(["instance", "stop", vm, "--yes", "--cloud", "azure", "--config", str(config),
                 *QUIET])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert azure.world.power(vm) == "deallocated"
    [record] = [r for r in AuditLog(paths.audit_db_path()).records() if r.action == "stop" and r.result != "started"]
    assert record.target == vm


def test_an_rbac_403_is_one_line_and_audited(azure: AzurePeer, tmp_path: Path, capsys) -> None:
    vm = azure.world.add("Standard_NC4as_T4_v3")
    azure.world.denied.add("restart")
    config = tmp_path / "config.toml"
    config.write_text(azure_table(azure))
    code = main(["instance", "reboot", vm, "--yes", "--cloud", "azure", "--config", str(config),
                 *QUIET])
    _out, err = capsys.readouterr()
    assert code != 0
    assert len(err.strip().splitlines()) == 1 and "Microsoft.Compute/virtualMachines/restart/action" in err
    records = [r for r in AuditLog(paths.audit_db_path()).records() if r.action == "reboot" and r.result != "started"]
    assert records and records[-1].target == vm and records[-1].result != "ok"


def test_access_whoami_shows_the_azure_principal_and_its_role_assignments(azure: AzurePeer, tmp_path: Path, capsys) -> None:
    config = tmp_path / "config.toml"
    config.write_text(azure_table(azure))
    assert main(["access", "whoami", "--json", "--cloud", "azure", "--config", str(config)]) == 0
    section = json.loads(capsys.readouterr().out)["azure"]
    assert section["caller"] == "ana@contoso.example" and section["identity_type"] == "user"
    assert section["object_id"] == "5e6f7a8b-1c2d-4e3f-8a9b-0c1d2e3f4a5b" and section["subscription"] == SUBSCRIPTION
    assert section["role_assignments"] == [f"Virtual Machine Contributor at /subscriptions/{SUBSCRIPTION}",
                                           f"Reader at /subscriptions/{SUBSCRIPTION}"]
    [listed] = [q for m, p, q in azure.world.calls if p.endswith("/roleAssignments")]
    assert listed["$filter"] == "assignedTo('5e6f7a8b-1c2d-4e3f-8a9b-0c1d2e3f4a5b')"


def test_power_off_is_its_own_action_and_says_the_vm_still_bills(azure: AzurePeer, tmp_path: Path, capsys) -> None:
    vm = azure.world.add("Standard_NC4as_T4_v3")
    config = tmp_path / "config.toml"
    config.write_text(azure_table(azure))
    code = main(["instance", "power-off", vm, "--yes", "--cloud", "azure", "--config", str(config),
                 *QUIET])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "still bills" in out and azure.world.power(vm) == "stopped"
    assert [p.rsplit("/", 1)[1] for m, p, _q in azure.world.calls if m == "POST"] == ["powerOff"]
    assert [r.target for r in AuditLog(paths.audit_db_path()).records() if r.action == "power-off" and r.result != "started"] == [vm]


def test_cost_clouds_prices_the_azure_sizes(azure: AzurePeer, tmp_path: Path, capsys) -> None:
    config = tmp_path / "config.toml"
    config.write_text(azure_table(azure))
    assert main(["cost", "clouds", "T4", "--in", "eastus", "--json", "--cloud", "azure", "--config", str(config), "--no-db",
                 "--gpus", "off", "--jobs", "off"]) == 0
    doc = json.loads(capsys.readouterr().out)
    rows = doc["rows"]
    assert [(r["cloud"], r["instance_type"], r["region"], r["per_gpu_hour"], r["usd_per_gpu_hour"]) for r in rows] == [
        ("azure", "Standard_NC4as_T4_v3", "eastus", 0.526, 0.526)], doc["catalog_note"]
