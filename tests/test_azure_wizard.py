"""The launch wizard and the Instances pane on Azure, driven with the keyboard against the local
ARM peer through the official SDKs: the location's subnets (regional: offered in every zone),
network security groups and SSH key resources to pick from, AzureLaunchOptions as fields derived
from its Struct; power off apart from stop, and a stop that deallocates."""

from __future__ import annotations

from textual.widgets import Input, Select, SelectionList

from gpuconsole.backends import registry
from gpuconsole.core.fleet.console import Console, ConsoleOptions
from gpuconsole.core.fleet.sources import SourceOptions
from gpuconsole.model import AzureLaunchOptions, Market
from gpuconsole.ui.wizards import ProvisionWizard
from tests.azure_peer import SUBSCRIPTION, AzurePeer, azure, azure_env  # noqa: F401 (fixtures)
from tests.driving import running
from tests.helpers import wait_until
from tests.test_wizard import choose_type, choose_zone, fill, launch, text_of, to_review


async def test_a_launch_on_azure_picks_from_the_locations_lists_and_sends_its_own_options(azure: AzurePeer):
    azure.world.add("Standard_NC4as_T4_v3")
    subnet, nsg = azure.world.network()
    settings = registry.azure_settings(subscription_id=SUBSCRIPTION, resource_groups=("gpu-rg",), regions=("eastus",),
                                       arm_endpoint=azure.url, prices_endpoint=f"{azure.url}/api/retail/prices",
                                       lro_poll_s=0.01)
    console = Console(ConsoleOptions(sources=SourceOptions(cloud="azure", gpus="off", jobs="off", azure=settings),
                                     interval=0.25, timeout=5.0))
    async with running(console, live=lambda app: len(app.snapshot.instances) == 1, size=(160, 48)) as (app, pilot):
        await pilot.press("4")
        await pilot.pause()
        await pilot.press("n")
        await wait_until(lambda: isinstance(app.screen, ProvisionWizard))
        wizard = app.screen
        await pilot.press("tab", "right", "enter")  # inference: the T4 size
        await wait_until(lambda: "Standard_NC4as_T4_v3" in [t.name for t in wizard.workload_step.types])
        wizard.query_one("#type-table").focus()
        await pilot.pause()
        await choose_type(pilot, wizard, "Standard_NC4as_T4_v3")
        await choose_zone(pilot, wizard, "eastus-2", Market.ON_DEMAND)
        details = wizard.details_step
        await wait_until(lambda: len(details.subnets) == 2 and len(details.groups) == 1)
        await pilot.pause()
        subnets: Select = wizard.query_one("#subnet", Select)
        assert [v for _label, v in subnets._options][1:] == [subnet, subnet.replace("/train", "/serve")]
        assert "Subnet" in text_of(wizard, "#field-subnet_id .field-label")
        keys: Select = wizard.query_one("#key", Select)
        assert [v for _label, v in keys._options][1:] == ["platform-ops", "ci-runner"]
        subnets.value = subnet
        keys.value = "platform-ops"
        wizard.query_one("#groups", SelectionList).select(nsg)
        await fill(pilot, wizard.query_one("#image", Input), "microsoft-dsvm:ubuntu-hpc:2204:latest")
        assert text_of(wizard, "#field-options-os_disk_type .field-label").strip() == "OS disk"
        wizard.query_one("#opt-os-disk-type", Select).value = "StandardSSD_LRS"
        await pilot.pause()

        await to_review(pilot, wizard)
        assert wizard.spec is not None
        assert wizard.spec.options == AzureLaunchOptions(os_disk_type="StandardSSD_LRS")
        await launch(pilot, wizard)
    body = azure.world.bodies[-1]
    nic = body["properties"]["networkProfile"]["networkInterfaceConfigurations"][0]["properties"]
    assert nic["ipConfigurations"][0]["properties"]["subnet"] == {"id": subnet}
    assert nic["networkSecurityGroup"] == {"id": nsg} and body["zones"] == ["2"]
    assert body["properties"]["storageProfile"]["osDisk"]["managedDisk"]["storageAccountType"] == "StandardSSD_LRS"
    assert body["properties"]["osProfile"]["linuxConfiguration"]["ssh"]["publicKeys"][0]["keyData"].startswith("ssh-ed25519")


async def test_the_instances_pane_powers_off_apart_and_stops_a_billing_stopped_vm(azure: AzurePeer):
    """``o`` powers off (the confirmation says it still bills); ``s`` on a VM powered off but still
    allocated (``stopped $``) deallocates it."""
    from textual.widgets import Static

    from gpuconsole.ui.screens.confirm import ConfirmScreen
    from tests.driving import table
    from tests.test_instances_pane import select

    running_vm = azure.world.add("Standard_NC4as_T4_v3")
    allocated = azure.world.add("Standard_NC24ads_A100_v4", power="stopped")
    settings = registry.azure_settings(subscription_id=SUBSCRIPTION, arm_endpoint=azure.url, regions=("eastus",),
                                       prices_endpoint=f"{azure.url}/api/retail/prices")
    console = Console(ConsoleOptions(sources=SourceOptions(cloud="azure", gpus="off", jobs="off", azure=settings),
                                     interval=0.25, timeout=5.0))
    async with running(console, live=lambda app: len(app.snapshot.instances) == 2, size=(160, 40)) as (app, pilot):
        await select(app, pilot, lambda i: i.instance_id == running_vm)
        states = dict(zip(table(app, "instance-table").shown_keys,
                          [str(table(app, "instance-table").get_cell(k, "state")) for k in table(app, "instance-table").shown_keys],
                          strict=True))
        assert states[allocated] == "stopped $"
        await pilot.press("o")
        await wait_until(lambda: isinstance(app.screen, ConfirmScreen))
        assert "STILL BILLS" in str(app.screen.query_one("#confirm-details", Static).content)
        await pilot.press("y")
        await wait_until(lambda: azure.world.power(running_vm) == "stopped")
        await select(app, pilot, lambda i: i.instance_id == allocated)
        await pilot.press("s")
        await wait_until(lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await wait_until(lambda: azure.world.power(allocated) == "deallocated")
    assert [p.rsplit("/", 1)[1] for m, p, _q in azure.world.calls if m == "POST"] == ["powerOff", "deallocate"]
