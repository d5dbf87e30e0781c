"""What Azure billed each VM per day, from the Cost Management Query API of the ARM peer
(tests/azure_peer.py), through the official SDK's pipeline: rows per VM and day in US dollars,
pages followed, the bill's lower-cased ids given back as ARM names the VMs, a refusal in one
line, and the console's own reconciliation against the bill."""

from __future__ import annotations

import calendar
import json
import time
from pathlib import Path

import pytest

from gpuconsole.backends.azure import AzureCloud, AzureSettings
from gpuconsole.backends.base import BackendError, BackendPermissionDenied
from gpuconsole.cli.main import main
from gpuconsole.core.money.reconcile import full_days
from gpuconsole.core.paths import config_dir
from gpuconsole.model import CostLine
from tests.azure_peer import SUBSCRIPTION, AzurePeer, azure, azure_env  # noqa: F401 (fixtures)
from tests.test_azure_wiring import azure_table

def _cloud(peer: AzurePeer) -> AzureCloud:
    return AzureCloud(AzureSettings(subscription_id=SUBSCRIPTION, arm_endpoint=peer.url,
                                    prices_endpoint=f"{peer.url}/api/retail/prices"))


def _ts(day: str) -> float:
    return float(calendar.timegm(time.strptime(day, "%Y-%m-%d")))


def test_each_vms_cost_per_day_from_the_bill_pages_followed_and_ids_as_arm_names_them(azure: AzurePeer) -> None:
    a100 = azure.world.add("Standard_NC24ads_A100_v4", name="Train-A100")
    t4 = azure.world.add("Standard_NC4as_T4_v3")
    disk = f"/subscriptions/{SUBSCRIPTION}/resourceGroups/gpu-rg/providers/Microsoft.Compute/disks/train-os"
    azure.world.bill += [(a100, "2026-11-30", 88.13, "USD"), (a100, "2026-12-01", 88.13, "USD"),
                         (t4, "2026-12-01", 12.6, "USD"), (disk, "2026-12-01", 0.8, "USD")]
    cloud = _cloud(azure)
    cloud.poll_instances()  # the VMs as ARM names them
    rows = cloud.resource_costs(_ts("2026-11-30"), _ts("2026-12-02"))
    assert rows == ((a100, "2026-11-30", 88.13), (a100, "2026-12-01", 88.13), (t4, "2026-12-01", 12.6))
    assert a100 != a100.lower()  # the bill said it in lower case
    [asked, *more] = azure.world.queries
    assert len(more) == 1  # two rows a page: a second page, by nextLink
    assert asked["type"] == "ActualCost" and asked["dataset"]["granularity"] == "Daily"
    assert asked["dataset"]["grouping"] == [{"type": "Dimension", "name": "ResourceId"}]
    assert asked["timePeriod"] == {"from": "2026-11-30T00:00:00Z", "to": "2026-12-02T00:00:00Z"}
    lines = cloud.cost_and_usage(_ts("2026-11-30"), _ts("2026-12-02"))
    assert set(lines) == {CostLine("instance", a100, 176.26), CostLine("instance", t4, 12.6)}


def test_a_refusal_is_one_line_and_a_bill_in_another_currency_is_not_read_as_dollars(azure: AzurePeer) -> None:
    vm = azure.world.add("Standard_NC4as_T4_v3")
    cloud = _cloud(azure)
    azure.world.denied.add("costmanagement")
    with pytest.raises(BackendPermissionDenied) as refused:
        cloud.resource_costs(_ts("2026-12-01"), _ts("2026-12-02"))
    assert "Microsoft.CostManagement/query/action" in str(refused.value) and "\n" not in str(refused.value)
    azure.world.denied.clear()
    azure.world.bill.append((vm, "2026-12-01", 11.2, "EUR"))
    with pytest.raises(BackendError, match="Azure bills this subscription in EUR"):
        cloud.resource_costs(_ts("2026-12-01"), _ts("2026-12-02"))


def test_cost_reconcile_sets_the_bill_beside_the_consoles_estimate(azure: AzurePeer, capsys) -> None:
    vm = azure.world.add("Standard_NC24ads_A100_v4")
    [(yesterday, _midnight)] = full_days(time.time(), 1)
    azure.world.bill.append((vm, yesterday, 80.0, "USD"))
    config = config_dir() / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(azure_table(azure))
    code = main(["cost", "reconcile", "--days", "1", "--json", "--cloud", "azure", "--gpus", "off", "--jobs", "off",
                 "--no-db"])
    out, err = capsys.readouterr()
    assert code == 0, err
    doc = json.loads(out)
    [row] = [r for r in doc["rows"] if r["instance_id"] == vm]
    assert (row["day"], row["billed"]) == (yesterday, 80.0)
    assert row["estimate"] > 0 and row["difference"] == pytest.approx(row["estimate"] - 80.0, abs=1e-3)
    assert doc["spend_basis"] == "Activity Log history"  # the runs come from Azure's own record


def test_when_a_vm_billed_from_the_activity_log_a_power_off_billing_on(azure: AzurePeer) -> None:
    vm = azure.world.add("Standard_NC24ads_A100_v4")
    other = azure.world.add("Standard_NC4as_T4_v3")
    log = azure.world.log_event
    log(vm, "write", "2026-12-01T08:00:00.1234567Z", sub_status="Created")  # the create
    log(vm, "write", "2026-12-01T09:00:00Z")  # a later update (tags): 200 OK, not a start
    log(vm, "powerOff/action", "2026-12-01T12:00:00Z")  # still allocated: bills on
    log(vm, "deallocate/action", "2026-12-01T20:00:00Z", status="Started")  # accepted, not done
    log(vm, "deallocate/action", "2026-12-01T20:01:00Z")
    log(vm, "start/action", "2026-12-02T07:00:00Z", status="Failed")
    log(vm, "start/action", "2026-12-02T08:00:00Z")
    log(other, "deallocate/action", "2026-12-02T09:00:00Z")
    events = _cloud(azure).instance_history("eastus", vm, _ts("2026-12-01"), _ts("2026-12-03"))
    assert events == ((_ts("2026-12-01") + 8 * 3600 + 0.123456, True), (_ts("2026-12-01") + 20 * 3600 + 60, False),
                      (_ts("2026-12-02") + 8 * 3600, True))
    asked = [q for m, p, q in azure.world.calls if p.endswith("/eventtypes/management/values")]
    assert len(asked) == 4  # two events a page: every page followed
    assert f"resourceUri eq '{vm}'" in asked[0]["$filter"] and "eventTimestamp ge '2026-12-01T00:00:00Z'" in asked[0]["$filter"]


def test_a_refused_activity_log_is_one_line(azure: AzurePeer) -> None:
    vm = azure.world.add("Standard_NC4as_T4_v3")
    azure.world.denied.add("activitylog")
    with pytest.raises(BackendPermissionDenied) as refused:
        _cloud(azure).instance_history("eastus", vm, _ts("2026-12-01"), _ts("2026-12-02"))
    assert "Microsoft.Insights/eventtypes/values/read" in str(refused.value) and "\n" not in str(refused.value)
