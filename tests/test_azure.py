"""Azure virtual machines through the official SDKs against the local HTTPS peer (tests/azure_peer.py),
signed in through the Azure CLI credential (a stand-in ``az`` on PATH)."""

from __future__ import annotations

import socket

import pytest

from gpuconsole.backends.azure import AzureCloud, AzureSettings
from gpuconsole.backends.base import BackendError, BackendPermissionDenied
from gpuconsole.model import InstanceState, Market
from tests.azure_peer import SUBSCRIPTION, AzurePeer, azure, azure_env  # noqa: F401 (fixtures)


def settings(peer: AzurePeer, **kw) -> AzureSettings:
    return AzureSettings(subscription_id=SUBSCRIPTION, arm_endpoint=peer.url, prices_endpoint=f"{peer.url}/api/retail/prices",
                         regions=("eastus",), lro_poll_s=0.01, **kw)


@pytest.fixture
def cloud(azure):
    made = AzureCloud(settings(azure))
    yield made
    made.close()


def by_id(cloud):
    return {i.instance_id: i for i in cloud.poll_instances().instances}


def test_lists_gpu_vms_with_power_state_gpus_and_prices(azure, cloud):
    t4 = azure.world.add("Standard_NC4as_T4_v3", tags={"Budget": "research"})
    a100 = azure.world.add("Standard_NC24ads_A100_v4", power="stopped")  # powered off, still allocated
    off = azure.world.add("Standard_ND96isr_H100_v5", power="deallocated")
    azure.world.add("Standard_D4s_v5")  # no GPU: left out
    found = by_id(cloud)
    assert set(found) == {t4, a100, off}
    one = found[t4]
    assert (one.cloud, one.name, one.region, one.availability_zone) == ("azure", "vm-1", "eastus", "eastus-1")
    assert (one.gpus, one.gpu_model, one.price_per_hour, one.currency) == (1, "NVIDIA T4", 0.526, "USD")
    assert one.state is InstanceState.RUNNING and one.bills_now and one.tag("Budget") == "research"
    assert found[a100].state is InstanceState.STOPPED and found[a100].stopped_bills and found[a100].bills_now
    assert found[off].state is InstanceState.STOPPED and not found[off].bills_now and found[off].gpus == 8
    assert one.instance_id.startswith(f"/subscriptions/{SUBSCRIPTION}/resourceGroups/gpu-rg/")


def test_pages_are_followed_and_resource_groups_listed(azure):
    azure.world.page_size = 2
    for n in range(5):
        azure.world.add("Standard_NC4as_T4_v3", group="train" if n % 2 else "infer")
    everywhere = AzureCloud(settings(azure))
    assert len(everywhere.poll_instances().instances) == 5
    lists = [q for m, p, q in azure.world.calls if p.endswith("/virtualMachines")]
    assert len(lists) == 3 and all(q.get("$expand") == "instanceView" for q in lists)
    only = AzureCloud(settings(azure, resource_groups=("train",)))
    assert {i.instance_id.split("/")[4] for i in only.poll_instances().instances} == {"train"}
    assert any("/resourceGroups/train/" in p for m, p, q in azure.world.calls)


def test_spot_price_meter_follows_the_os_and_never_low_priority(azure, cloud):
    spot = azure.world.add("Standard_NC24ads_A100_v4", spot=True, eviction="Delete", max_price=1.2)
    win = azure.world.add("Standard_NC4as_T4_v3", windows=True)
    found = by_id(cloud)
    assert found[spot].market is Market.SPOT and found[spot].price_per_hour == 0.551  # not 0.7346 (Low Priority)
    assert found[spot].spot_interruption == "terminate" and found[spot].stoppable_spot
    assert found[spot].spot_max_price == 1.2
    assert found[win].price_per_hour == 0.71
    price_calls = [q for m, p, q in azure.world.calls if p == "/api/retail/prices"]
    assert any("$skip" in q for q in price_calls)  # NextPageLink followed
    before = len(price_calls)
    cloud.poll_instances()
    assert len([1 for m, p, q in azure.world.calls if p == "/api/retail/prices"]) == before  # cached


def test_stop_deallocates_power_off_is_separate_and_still_bills(azure, cloud):
    vm = azure.world.add("Standard_NC4as_T4_v3")
    cloud.power_off("eastus", vm)
    assert azure.world.power(vm) == "stopped" and by_id(cloud)[vm].bills_now
    cloud.stop("eastus", vm)  # powered off but allocated: deallocated all the same
    assert azure.world.power(vm) == "deallocated" and not by_id(cloud)[vm].bills_now
    cloud.start("eastus", vm)
    cloud.reboot("eastus", vm)
    assert [a for a in azure.actions() if a.startswith("POST")] == [
        "POST powerOff", "POST deallocate", "POST start", "POST restart"]


def test_delete_takes_the_disks_and_nic_gpuconsole_made(azure, cloud):
    ours = azure.world.add("Standard_NC4as_T4_v3", managed=True)
    theirs = azure.world.add("Standard_NC4as_T4_v3")
    cloud.terminate("eastus", ours)
    cloud.terminate("eastus", theirs)
    assert by_id(cloud) == {}
    left = sorted(r["name"] for r in azure.world.resources.values())
    assert left == ["vm-2-nic", "vm-2_OsDisk_1"]
    gets = [q for m, p, q in azure.world.calls if m == "GET" and p.endswith("/virtualMachines/vm-1")]
    assert gets and gets[0].get("$expand") == "instanceView"  # read with its instance view before the delete
    assert [a for a in azure.actions() if a.startswith("DELETE")] == [
        "DELETE vm-1", "DELETE vm-1_OsDisk_1", "DELETE vm-1-nic", "DELETE vm-2"]


def test_rbac_403_is_one_line(azure, cloud):
    vm = azure.world.add("Standard_NC4as_T4_v3")
    azure.world.denied.add("deallocate")
    with pytest.raises(BackendPermissionDenied) as caught:
        cloud.stop("eastus", vm)
    text = str(caught.value)
    assert "\n" not in text and "Microsoft.Compute/virtualMachines/deallocate/action" in text and "Azure RBAC denied" in text


def test_bad_urls_and_ids_are_one_line():
    with pytest.raises(ValueError, match="arm_endpoint: not a full https URL"):
        AzureSettings(subscription_id=SUBSCRIPTION, arm_endpoint="management.azure.com")
    with pytest.raises(ValueError, match="prices_endpoint"):
        AzureSettings(prices_endpoint="http://prices.example.com/api")
    with pytest.raises(BackendError, match="not an Azure VM id"):
        AzureCloud(AzureSettings(subscription_id=SUBSCRIPTION)).stop("eastus", "i-0123456789abcdef0")


def test_no_connection_leaves_127_0_0_1(azure, cloud, monkeypatch):
    """The CLI credential signs in; the managed-identity address (169.254.169.254) is never asked."""
    reached: list[object] = []
    real = socket.socket.connect

    def connect(self, address):
        reached.append(address)
        return real(self, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    vm = azure.world.add("Standard_NC4as_T4_v3")
    cloud.poll_instances()
    cloud.stop("eastus", vm)
    assert reached and all(a[0] == "127.0.0.1" for a in reached if isinstance(a, tuple))
    assert azure.world.tokens_seen  # a bearer token from the stand-in az was sent


def test_sizes_zones_and_catalog_prices(azure, cloud):
    azure.world.restricted["Standard_NC24ads_A100_v4"] = ("2",)
    azure.world.location_restricted.add("Standard_ND96isr_H100_v5")
    types = {t.name: t for t in cloud.instance_types("eastus")}
    assert set(types) == {"Standard_NC4as_T4_v3", "Standard_NC24ads_A100_v4"}
    assert (types["Standard_NC24ads_A100_v4"].gpu_model, types["Standard_NC24ads_A100_v4"].gpu_memory_gib) == ("NVIDIA A100", 80)
    zones = cloud.offerings("eastus", ("Standard_NC24ads_A100_v4", "Standard_ND96isr_H100_v5"))
    assert zones == {"Standard_NC24ads_A100_v4": ("eastus-1", "eastus-3"), "Standard_ND96isr_H100_v5": ()}
    prices = {p.instance_type: p.price for p in cloud.on_demand_prices(("eastus",))}
    assert prices["Standard_NC4as_T4_v3"] == 0.526 and "Standard_D4s_v5" not in prices
    spot = cloud.spot_prices("eastus", ("Standard_NC4as_T4_v3",), 0.0)
    assert {p.price for p in spot} == {0.0789} and {p.availability_zone for p in spot} == {"eastus-1", "eastus-2", "eastus-3"}


def test_without_a_sign_in_the_poll_says_so_in_one_line(azure, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")  # no az at all
    with pytest.raises(BackendError) as caught:
        AzureCloud(settings(azure)).poll_instances()
    text = str(caught.value)
    assert "\n" not in text and "Azure" in text and "credential" in text.lower()
    assert not azure.world.calls  # nothing reached ARM without a token


def test_a_failing_price_api_leaves_prices_unknown_and_is_not_asked_again_at_once(azure, monkeypatch):
    vm = azure.world.add("Standard_NC4as_T4_v3")
    azure.world.add("Standard_NC24ads_A100_v4")
    azure.world.prices_down = True
    cloud = AzureCloud(settings(azure))
    for _ in range(2):
        assert {i.price_per_hour for i in cloud.poll_instances().instances} == {0.0}
    assert len([1 for m, p, q in azure.world.calls if "/api/retail" in p]) == 1
    assert vm
