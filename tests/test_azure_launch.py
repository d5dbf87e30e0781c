"""Launching Azure VMs against the ARM peer: the check before the create (resource SKUs'
restrictions and the vCPU quota), the create as a long-running operation (image, size, zone, a NIC
in an existing subnet, an encrypted managed OS disk, tags, Spot with its eviction policy and max
price), and the command line's launch path."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuconsole.backends.azure import AzureCloud, AzureSettings
from gpuconsole.backends.base import CapacityError, DryRunFailed
from gpuconsole.cli.main import main
from gpuconsole.core.ops.launch_checks import validate
from gpuconsole.model import AzureLaunchOptions, LaunchSpec, Market
from tests.azure_peer import SUBSCRIPTION, AzurePeer, azure, azure_env  # noqa: F401 (fixtures)
from tests.test_azure_wiring import azure_table

SUBNET = f"/subscriptions/{SUBSCRIPTION}/resourceGroups/net-rg/providers/Microsoft.Network/virtualNetworks/gpu/subnets/train"
NSG = f"/subscriptions/{SUBSCRIPTION}/resourceGroups/net-rg/providers/Microsoft.Network/networkSecurityGroups/train"
DES = f"/subscriptions/{SUBSCRIPTION}/resourceGroups/gpu-rg/providers/Microsoft.Compute/diskEncryptionSets/cmk"


@pytest.fixture
def cloud(azure: AzurePeer):
    made = AzureCloud(AzureSettings(subscription_id=SUBSCRIPTION, resource_groups=("gpu-rg",), regions=("eastus",),
                                    arm_endpoint=azure.url, prices_endpoint=f"{azure.url}/api/retail/prices",
                                    lro_poll_s=0.01))
    yield made
    made.close()


def spec(**kw) -> LaunchSpec:
    base = dict(region="eastus", instance_type="Standard_NC24ads_A100_v4", image_id="microsoft-dsvm:ubuntu-hpc:2204:latest",
                availability_zone="eastus-2", subnet_id=SUBNET, security_group_ids=(NSG,), kms_key_id=DES,
                key_name="platform-ops", market=Market.SPOT, max_spot_price=1.5, root_volume_gib=256,
                tags=(("Name", "train-a100"), ("Budget", "research")),
                options=AzureLaunchOptions(eviction_policy="Delete", encryption_at_host=True))
    return LaunchSpec(**{**base, **kw})


def test_the_spec_passes_the_console_checks():
    assert validate(spec()) == {}
    assert set(validate(spec(subnet_id="subnet-0123abcd", region="East US"))) == {"subnet_id", "region"}


def test_dry_run_checks_then_create_waits_for_the_operation(azure: AzurePeer, cloud: AzureCloud):
    assert cloud.launch(spec(), dry_run=True) == ()
    assert not azure.world.bodies  # the check sent no create
    (made,) = cloud.launch(spec())
    assert made.instance_id == f"/subscriptions/{SUBSCRIPTION}/resourceGroups/gpu-rg/providers/Microsoft.Compute/virtualMachines/train-a100"
    assert made.cloud == "azure" and made.market is Market.SPOT
    [body] = azure.world.bodies
    props = body["properties"]
    assert body["location"] == "eastus" and body["zones"] == ["2"]
    assert body["tags"] == {"Name": "train-a100", "Budget": "research", "ManagedBy": "gpuconsole"}
    assert props["hardwareProfile"] == {"vmSize": "Standard_NC24ads_A100_v4"}
    assert props["priority"] == "Spot" and props["evictionPolicy"] == "Delete" and props["billingProfile"] == {"maxPrice": 1.5}
    os_disk = props["storageProfile"]["osDisk"]
    assert os_disk["managedDisk"]["diskEncryptionSet"] == {"id": DES} and os_disk["deleteOption"] == "Delete"
    assert os_disk["diskSizeGB"] == 256 and props["securityProfile"] == {"encryptionAtHost": True}
    assert props["storageProfile"]["imageReference"] == {"publisher": "microsoft-dsvm", "offer": "ubuntu-hpc",
                                                         "sku": "2204", "version": "latest"}
    [nic] = props["networkProfile"]["networkInterfaceConfigurations"]
    assert nic["properties"]["ipConfigurations"][0]["properties"]["subnet"] == {"id": SUBNET}
    assert nic["properties"]["networkSecurityGroup"] == {"id": NSG} and nic["properties"]["deleteOption"] == "Delete"
    assert props["osProfile"]["linuxConfiguration"]["ssh"]["publicKeys"][0]["keyData"].startswith("ssh-ed25519 ")
    polls = [p for m, p, _q in azure.world.calls if "/operations/" in p]
    assert len(polls) >= 2  # InProgress, then Succeeded: the create was waited for
    assert azure.world.power(made.instance_id) == "running"


def test_the_check_refuses_a_restricted_zone_and_a_quota_short(azure: AzurePeer, cloud: AzureCloud):
    azure.world.restricted["Standard_NC24ads_A100_v4"] = ("2",)
    with pytest.raises(CapacityError, match="SkuNotAvailable: .* zone 2 of eastus"):
        cloud.launch(spec(), dry_run=True)
    azure.world.quota["lowPriorityCores"] = (90, 100)
    with pytest.raises(CapacityError, match="QuotaExceeded: lowPriorityCores in eastus: 90 of 100 vCPUs used, 24 more"):
        cloud.launch(spec(availability_zone="eastus-1"), dry_run=True)
    with pytest.raises(DryRunFailed, match="SkuNotAvailable: Standard_NC99_nothing"):
        cloud.launch(spec(instance_type="Standard_NC99_nothing"), dry_run=True)
    assert not azure.world.bodies


def test_launch_from_the_command_line(azure: AzurePeer, tmp_path: Path, capsys):
    config = tmp_path / "config.toml"
    config.write_text(azure_table(azure) + f'resource_groups = ["gpu-rg"]\nsubnet_id = "{SUBNET}"\n')
    code = main(["instance", "launch", "--type", "Standard_NC4as_T4_v3", "--zone", "eastus-1", "--tag", "Budget=research",
                 "--yes", "--only-this-zone", "--cloud", "azure", "--config", str(config), "--gpus", "off", "--jobs", "off"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "/virtualMachines/gpu-" in out and "(Standard_NC4as_T4_v3, on-demand) in eastus-1" in out
    [body] = azure.world.bodies
    assert body["properties"]["storageProfile"]["imageReference"]["publisher"] == "microsoft-dsvm"  # the default GPU image
    assert body["tags"]["Budget"] == "research" and body["zones"] == ["1"]


def test_an_allocation_failing_after_the_create_moves_to_the_next_zone(azure: AzurePeer, tmp_path: Path, capsys):
    """Azure accepts the create, then its operation fails (ZonalAllocationFailed): a capacity error,
    so the launcher tries the next zone the size is offered in."""
    azure.world.failing_zones.add("1")
    config = tmp_path / "config.toml"
    config.write_text(azure_table(azure) + f'resource_groups = ["gpu-rg"]\nsubnet_id = "{SUBNET}"\n')
    code = main(["instance", "launch", "--type", "Standard_NC4as_T4_v3", "--zone", "eastus-1", "--tag", "Name=retry",
                 "--yes", "--cloud", "azure", "--config", str(config), "--gpus", "off", "--jobs", "off"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert [b["zones"] for b in azure.world.bodies] == [["1"], ["2"]]
    assert "in eastus-2" in out and azure.world.power(
        f"/subscriptions/{SUBSCRIPTION}/resourceGroups/gpu-rg/providers/Microsoft.Compute/virtualMachines/retry") == "running"
