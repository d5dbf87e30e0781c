"""The launch wizard on Alibaba Cloud, driven with the keyboard against the local ECS peer through
the official SDK: the region's VSwitches, security groups and key pairs to pick from, and the
provider's own options (AlibabaLaunchOptions) as fields derived from its Struct."""

from __future__ import annotations

from textual.widgets import Input, Select, SelectionList

from gpuconsole.backends import registry
from gpuconsole.core.fleet.console import Console, ConsoleOptions
from gpuconsole.core.fleet.sources import SourceOptions
from gpuconsole.model import AlibabaLaunchOptions, Market
from tests.driving import running
from tests.helpers import wait_until
from gpuconsole.ui.wizards import ProvisionWizard
from tests.test_wizard import choose_type, choose_zone, fill, launch, text_of, to_review



async def test_a_launch_on_alibaba_cloud_picks_from_the_regions_lists_and_sends_its_own_options(ecs):
    ecs.world.add("ecs.gn7i-c8g1.2xlarge")
    settings = registry.alibaba_settings(regions=("cn-hangzhou",), endpoint=ecs.url)
    console = Console(ConsoleOptions(sources=SourceOptions(cloud="alibaba", gpus="off", jobs="off", alibaba=settings),
                                     interval=0.25, timeout=5.0))
    async with running(console, live=lambda app: len(app.snapshot.instances) == 1, size=(160, 48)) as (app, pilot):
        await pilot.press("4")
        await pilot.pause()
        await pilot.press("n")
        await wait_until(lambda: isinstance(app.screen, ProvisionWizard))
        wizard = app.screen
        await pilot.press("tab", "right", "enter")  # inference: A10 and T4 (no NVLink training type here)
        await wait_until(lambda: "ecs.gn7i-c8g1.2xlarge" in [t.name for t in wizard.workload_step.types])
        wizard.query_one("#type-table").focus()
        await pilot.pause()
        await choose_type(pilot, wizard, "ecs.gn7i-c8g1.2xlarge")
        await choose_zone(pilot, wizard, "cn-hangzhou-i", Market.ON_DEMAND)
        details = wizard.details_step
        await wait_until(lambda: len(details.subnets) == 3 and len(details.groups) == 2)
        await pilot.pause()
        vswitch: Select = wizard.query_one("#subnet", Select)
        assert [v for _label, v in vswitch._options][1:] == ["vsw-bp100000000000000000"]  # cn-hangzhou-i's only
        assert "VSwitch" in text_of(wizard, "#field-subnet_id .field-label")
        keys: Select = wizard.query_one("#key", Select)
        assert [v for _label, v in keys._options][1:] == ["platform-ops", "ci-runner"]
        vswitch.value = "vsw-bp100000000000000000"
        keys.value = "platform-ops"
        groups: SelectionList = wizard.query_one("#groups", SelectionList)
        groups.select("sg-bp1training00000002")
        await fill(pilot, wizard.query_one("#image", Input), "ubuntu_22_04_x64_20G_alibase_20240101.vhd")

        # The provider's own options, derived from its Struct, checked as they are typed.
        assert text_of(wizard, "#field-options-system_disk_category .field-label").strip() == "Disk category"
        bandwidth = wizard.query_one("#opt-public-bandwidth-mbps", Input)
        await fill(pilot, bandwidth, "500")
        assert "100" in text_of(wizard, "#field-options-public_bandwidth_mbps .field-message")
        await fill(pilot, bandwidth, "20")
        assert not wizard.query_one("#field-options-public_bandwidth_mbps .field-message").display
        wizard.query_one("#opt-system-disk-category", Select).value = "cloud_auto"
        await pilot.pause()

        await to_review(pilot, wizard)
        assert wizard.spec is not None
        assert wizard.spec.options == AlibabaLaunchOptions(system_disk_category="cloud_auto", public_bandwidth_mbps=20)
        await launch(pilot, wizard)
    sent = [p for a, p in ecs.world.calls if a == "RunInstances"][-1]
    assert (sent["VSwitchId"], sent["KeyPairName"], sent["SecurityGroupIds.1"]) == (
        "vsw-bp100000000000000000", "platform-ops", "sg-bp1training00000002")
    assert (sent["SystemDisk.Category"], sent["InternetMaxBandwidthOut"]) == ("cloud_auto", "20")
    assert "DryRun" not in sent
