"""What adding a provider touches: a fake third cloud, registered in a test with its model
options, adapter and registry entry, shows in the Instances pane beside Alibaba Cloud, with no
change outside its own code and the registry. The launch wizard labels its details as each
provider declares them."""

from __future__ import annotations

import re

import pytest

from gpuconsole.backends import registry
from gpuconsole.backends.clouds import PROVIDERS, Provider, register_provider
from gpuconsole.core.fleet.console import Console, ConsoleOptions
from gpuconsole.core.fleet.sources import SourceOptions
from gpuconsole.core.ops.launch_checks import launch_fields, validate
from gpuconsole.model import LaunchSpec, SourceKind
from tests.driving import column, pane_text, running
from tests.test_clouds import FakeCloud



@pytest.fixture
def fake(monkeypatch):
    """The whole of the third provider's wiring: its provider entry and its registry entry."""
    cloud = FakeCloud()
    monkeypatch.setitem(PROVIDERS, "fakecloud", PROVIDERS["aws"])
    register_provider(Provider("fakecloud", "Fake Cloud", re.compile(r"fk-\d{4}"), "fk.",
                               launch_fields=(("count", "Count"), ("image_id", "Boot image"))))
    monkeypatch.setitem(registry.SOURCES[SourceKind.CLOUD], "fakecloud",
                        registry.SourceEntry(SourceKind.CLOUD, "fakecloud", lambda _o, _c, _w: cloud,
                                             set_up=lambda _o, _e: False))
    return cloud


async def test_a_third_provider_shows_in_the_instances_pane(ecs, fake):
    stopped = ecs.world.add("ecs.gn6i-c4g1.xlarge", status="Stopped", stopped_mode="KeepCharging")
    ecs.world.add("ecs.gn7i-c8g1.2xlarge")
    settings = registry.alibaba_settings(regions=("cn-hangzhou",), endpoint=ecs.url)
    console = Console(ConsoleOptions(sources=SourceOptions(cloud="alibaba,fakecloud", gpus="off", jobs="off",
                                                           alibaba=settings), interval=0.25, timeout=5.0))
    async with running(console, live=lambda app: len(app.snapshot.instances) == 3, size=(160, 30)) as (app, pilot):
        await pilot.press("4")
        await pilot.pause()
        clouds = column(app, "instance-table", "cloud")
        assert sorted(clouds) == ["alibaba", "alibaba", "fakecloud"]
        states = dict(zip(column(app, "instance-table", "id"), column(app, "instance-table", "state"), strict=True))
        assert states[stopped] == "stopped $"  # standard mode: still billing
        await pilot.press("1")
        await pilot.pause()
        overview = pane_text(app, "overview")
        assert "totals leaves out 2 instances billed in CNY, 1 instance billed in EUR" in overview


def test_the_wizard_details_are_the_providers_own(fake):
    assert dict(launch_fields("ecs.gn7i-c8g1.2xlarge"))["subnet_id"] == "VSwitch"
    assert dict(launch_fields("ecs.gn7i-c8g1.2xlarge"))["image_id"] == "Image"
    assert dict(launch_fields("p4d.24xlarge"))["image_id"] == "AMI"
    assert launch_fields("fk.gpu.a10") == (("count", "Count"), ("image_id", "Boot image"))
    ali = LaunchSpec("cn-hangzhou", "ecs.gn7i-c8g1.2xlarge", "ubuntu_22_04_x64_20G_alibase_20240101.vhd",
                     subnet_id="vsw-bp1abcdefgh", security_group_ids=("sg-bp1abcdefgh",), kms_key_id="key-hzz62abc")
    assert validate(ali) == {}
    wrong = LaunchSpec("cn-hangzhou", "ecs.gn7i-c8g1.2xlarge", "ami-0abc1234", subnet_id="subnet-0abc1234",
                       tags=(("acs:owner", "x"),))
    problems = validate(wrong)
    assert "VSwitch" in problems["subnet_id"] and "acs:" in problems["tag:acs:owner"]
    assert "region" in validate(LaunchSpec("cn-hangzhou", "p4d.24xlarge", "ami-0abc1234"))  # not an AWS region
